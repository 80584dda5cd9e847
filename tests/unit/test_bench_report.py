"""A bench run rewrites docs/benchmarks.md but carries over the sections other commands measure
apart (python -m bench.broker_soak, python -m bench.delta_writers)."""

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


def test_every_kept_section_is_carried_over():
    writers = "## Delta writers: deltalake and delta-spark\n\n| writer | p50 |\n"
    page = PAGE + "\n## Later\n\nmore\n\n" + writers
    assert kept_section(page) == PAGE[PAGE.index("## Embedded broker"):] + "\n" + writers
