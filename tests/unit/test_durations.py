"""Durations as the flags take them and as Spark gets them back (pure)."""

from datetime import timedelta

import pytest

from streaming.config import UsageError, duration_text, format_duration, parse_duration
from streaming.run.cli import parse_settings


@pytest.mark.parametrize("text, expected", [
    ("15 minutes", timedelta(minutes=15)), ("1 second", timedelta(seconds=1)), ("2 Hours", timedelta(hours=2)),
    ("250 milliseconds", timedelta(milliseconds=250)), ("0.25 seconds", timedelta(milliseconds=250)),
    ("1.5 minutes", timedelta(seconds=90)), ("1 day", timedelta(days=1)),
])
def test_a_duration_reads_spark_interval_words_with_fractions_down_to_the_millisecond(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("90s", timedelta(seconds=90)), ("5m", timedelta(minutes=5)), ("2h", timedelta(hours=2)),
    ("7d", timedelta(days=7)), ("250ms", timedelta(milliseconds=250)), ("1.5 h", timedelta(minutes=90)),
])
def test_a_duration_reads_the_short_units_too(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["0 seconds", "0.5 milliseconds", "0.0001 seconds", "-1 second", "soon",
                                  "15", "1 fortnight", ""])
def test_a_duration_that_is_not_a_positive_whole_number_of_milliseconds_is_refused(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_spark_gets_seconds_when_whole_and_milliseconds_otherwise():
    assert format_duration(timedelta(minutes=15)) == "900 seconds"
    assert format_duration(timedelta(milliseconds=250)) == "250 milliseconds"
    assert format_duration(timedelta(seconds=1, milliseconds=500)) == "1500 milliseconds"


@pytest.mark.parametrize("delta, text", [
    (timedelta(minutes=15), "15 minutes"), (timedelta(minutes=30), "30 minutes"), (timedelta(seconds=1), "1 second"),
    (timedelta(milliseconds=500), "500 milliseconds"), (timedelta(seconds=90), "90 seconds"),
    (timedelta(days=1), "1 day"), (timedelta(hours=2), "2 hours"), (timedelta(milliseconds=1), "1 millisecond"),
])
def test_help_shows_a_duration_in_its_largest_whole_unit_and_it_reads_back(delta, text):
    assert duration_text(delta) == text and parse_duration(text) == delta


def test_a_sub_second_trigger_is_kept():
    settings = parse_settings(["--trigger", "250 milliseconds"])
    assert format_duration(settings.trigger) == "250 milliseconds"


@pytest.mark.parametrize("text", ["0", "0 seconds", "0s", "0 milliseconds"])
def test_a_trigger_of_0_runs_batches_back_to_back_and_spark_gets_0_seconds(text):
    settings = parse_settings(["--trigger", text])
    assert settings.trigger == timedelta(0) and format_duration(settings.trigger) == "0 seconds"


def test_a_batch_starts_every_150_ms_by_default_0_runs_them_back_to_back_and_the_start_line_says_which():
    assert parse_settings([]).trigger == timedelta(milliseconds=150)
    assert "batches every 150 milliseconds" in parse_settings([]).describe()
    assert "batches back to back" in parse_settings(["--trigger", "0"]).describe()
    assert "batches every 2 seconds" in parse_settings(["--trigger", "2s"]).describe()


@pytest.mark.parametrize("text", ["-1 seconds", "0.5 milliseconds", "soon"])
def test_a_trigger_that_is_no_interval_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--trigger"):
        parse_settings(["--trigger", text])
    with pytest.raises(ValueError):
        parse_duration("0")  # other durations are positive


def test_windows_close_after_a_quiet_15_minutes_with_the_embedded_broker_and_never_with_another_kafka():
    assert parse_settings([]).close_idle_after == timedelta(minutes=15)
    assert parse_settings(["--bootstrap-servers", "kafka:9092"]).close_idle_after is None
    assert parse_settings(["--bootstrap-servers", "kafka:9092", "--close-idle-after", "20 seconds"]
                          ).close_idle_after == timedelta(seconds=20)
    assert parse_settings(["--close-idle-after", "off"]).close_idle_after is None
    with pytest.raises(UsageError, match="or off"):
        parse_settings(["--close-idle-after", "0"])
