"""A bench run rewrites docs/benchmarks.md but carries over the embedded broker's section, which
python -m bench.broker_soak measures apart."""

from bench.report import kept_section

PAGE = """# Benchmarks

| figure | measured |

## Embedded broker: Apache Kafka 4.4.0

Measured on a day.

| figure | measured |
"""


def test_the_broker_section_is_kept_to_the_end_of_the_page_or_the_next_section():
    assert kept_section(PAGE) == PAGE[PAGE.index("## Embedded broker"):]
    assert kept_section(PAGE + "\n## Later\n\nmore\n") == PAGE[PAGE.index("## Embedded broker"):]


def test_a_page_without_it_keeps_nothing():
    assert kept_section("# Benchmarks\n\n## Machine\n") == ""
