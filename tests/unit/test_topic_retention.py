"""A topic's retention can act: Kafka deletes only closed segments, so the segment rolls at a
quarter of the retention, hourly at most and never more often than once a minute."""

from streaming.kafka.admin import retention_config


def test_a_week_of_retention_rolls_the_segment_hourly():
    assert retention_config(7 * 24 * 3_600_000) == {"retention.ms": "604800000", "segment.ms": "3600000"}


def test_a_short_retention_rolls_at_a_quarter_of_it():
    assert retention_config(20 * 60_000)["segment.ms"] == str(5 * 60_000)
    assert retention_config(4 * 3_600_000)["segment.ms"] == "3600000"


def test_a_very_short_retention_rolls_once_a_minute():
    assert retention_config(90_000) == {"retention.ms": "90000", "segment.ms": "60000"}


def test_unlimited_retention_leaves_the_segment_alone():
    assert retention_config(-1) == {"retention.ms": "-1"}
