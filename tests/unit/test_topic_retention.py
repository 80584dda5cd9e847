"""A topic's retention: the segment rolls at a quarter of it (Kafka deletes only closed segments),
hourly at most and never more often than once a minute; and what each kind of broker is given."""

from datetime import timedelta

from streaming.config import EMBEDDED_RETENTION, NEW_TOPIC_RETENTION
from streaming.kafka.admin import retention_config, retention_text
from streaming.run.cli import parse_settings


def test_a_week_of_retention_rolls_the_segment_hourly():
    assert retention_config(7 * 24 * 3_600_000) == {"retention.ms": "604800000", "segment.ms": "3600000"}


def test_a_short_retention_rolls_at_a_quarter_of_it():
    assert retention_config(20 * 60_000)["segment.ms"] == str(5 * 60_000)
    assert retention_config(4 * 3_600_000)["segment.ms"] == "3600000"


def test_a_very_short_retention_rolls_once_a_minute():
    assert retention_config(90_000) == {"retention.ms": "90000", "segment.ms": "60000"}


def test_unlimited_retention_leaves_the_segment_alone():
    assert retention_config(-1) == {"retention.ms": "-1"}


def test_the_embedded_broker_keeps_five_minutes_and_gives_them_to_an_existing_topic_it_started():
    settings = parse_settings([])
    assert settings.topic_retention == EMBEDDED_RETENTION == timedelta(minutes=5)
    assert settings.topic_retention_ms == 300_000
    assert settings.retention_at_start(reused_broker=False) == EMBEDDED_RETENTION


def test_a_load_that_reuses_a_running_apps_broker_leaves_its_retention_unless_told():
    assert parse_settings([]).retention_at_start(reused_broker=True) is None
    assert parse_settings(["--broker-retention", "7d"]).retention_at_start(reused_broker=True) == timedelta(days=7)


def test_another_kafka_keeps_an_existing_topic_as_it_is_and_creates_one_with_a_week():
    settings = parse_settings(["--bootstrap-servers", "kafka:9092"])
    assert settings.topic_retention is None and settings.retention_at_start(reused_broker=False) is None
    assert settings.topic_retention_ms == NEW_TOPIC_RETENTION.total_seconds() * 1000


def test_broker_retention_is_applied_to_any_kafka_when_given():
    assert parse_settings(["--broker-retention", "2h"]).topic_retention_ms == 7_200_000
    other = parse_settings(["--bootstrap-servers", "kafka:9092"], {"TRADE_SUMMARY_BROKER_RETENTION": "90s"})
    assert other.topic_retention == timedelta(seconds=90)


def test_a_retention_is_said_in_the_largest_whole_unit():
    assert [retention_text(ms) for ms in (604_800_000, 300_000, 90_000, 1_500, -1)] == [
        "7 days", "5 minutes", "90 seconds", "1500 ms", "unlimited"]
