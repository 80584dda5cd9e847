from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streaming.config import UsageError, parse_duration, parse_instant, parse_kafka_properties, redact
from streaming.run.cli import parse_load_settings, parse_settings


def test_defaults_match_the_product_contract():
    s = parse_settings([], cwd=Path("/home/me"))
    assert s.embedded_broker and s.broker_port == 9092 and s.kafka_bootstrap == "127.0.0.1:9092"
    assert s.data_dir == Path("/home/me/data") and s.topic == "trades"  # ./data, where run.py was started
    assert s.producer_enabled and s.dashboard_enabled
    assert (s.host, s.port) == ("127.0.0.1", 8050)
    assert s.window == timedelta(minutes=15) and s.watermark == timedelta(minutes=30)
    assert s.max_event_time_jump == timedelta(days=1) and s.fail_on_data_loss
    assert (s.data_dir / "gold/trade_summary") == Path("/home/me/data/gold/trade_summary")


def test_every_contract_flag_is_parsed():
    s = parse_settings([
        "--bootstrap-servers", "k1:9092,k2:9093", "--data-dir", "/tmp/d", "--topic", "t",
        "--no-producer", "--no-dashboard", "--host", "0.0.0.0", "--port", "9000",
        "--window", "5 minutes", "--watermark", "1 hour", "--trigger", "2 seconds",
        "--available-now", "--max-offsets-per-trigger", "500", "--replay-from", "2026-03-02T09:00:00Z",
        "--max-event-time-jump", "2 hours", "--fail-on-data-loss", "false",
    ])
    assert s.bootstrap_servers == "k1:9092,k2:9093" and not s.embedded_broker
    assert s.data_dir == Path("/tmp/d") and s.topic == "t"
    assert not s.producer_enabled and not s.dashboard_enabled
    assert (s.host, s.port) == ("0.0.0.0", 9000)
    assert s.window == timedelta(minutes=5) and s.watermark == timedelta(hours=1)
    assert s.trigger == timedelta(seconds=2) and s.available_now and s.max_offsets_per_trigger == 500
    assert s.replay_from == datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    assert s.max_event_time_jump == timedelta(hours=2) and not s.fail_on_data_loss


def test_environment_mirrors_flags_and_flags_win():
    env = {"TRADE_SUMMARY_TOPIC": "from-env", "TRADE_SUMMARY_NO_PRODUCER": "1",
           "TRADE_SUMMARY_BROKER_PORT": "19999"}
    s = parse_settings(["--topic", "from-flag"], env)
    assert s.topic == "from-flag" and not s.producer_enabled and s.broker_port == 19999


@pytest.mark.parametrize("argv, message", [
    (["--window", "fifteen"], "--window"),
    (["--watermark", "0 minutes"], "--watermark"),
    (["--port", "70000"], "out of range"),
    (["--broker-port", "abc"], "--broker-port"),
    (["--bootstrap-servers", "nohostport"], "HOST:PORT"),
    (["--replay-from", "2026-03-02T09:00:00"], "no zone"),
    (["--max-offsets-per-trigger", "-1"], "positive"),
    (["--late-share", "2"], "between 0 and 1"),
    (["--no-such-flag"], "unrecognized"),
    (["--fail-on-data-loss", "maybe"], "true or false"),
    (["--max-event-time-jump", "soon"], "--max-event-time-jump"),
    (["--conf", "spark.driver.memory"], "KEY=VALUE"),
    (["--conf", "driver.memory=2g"], "not a Spark setting"),
])
def test_bad_flags_raise_a_readable_usage_error(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_settings(argv)


def test_bad_boolean_environment_value_is_a_usage_error():
    with pytest.raises(UsageError, match="TRADE_SUMMARY_NO_PRODUCER"):
        parse_settings([], {"TRADE_SUMMARY_NO_PRODUCER": "maybe"})


def test_durations_and_instants():
    assert parse_duration("15 minutes") == timedelta(minutes=15)
    assert parse_duration("1 hour") == timedelta(hours=1)
    assert parse_duration("30 SECONDS") == timedelta(seconds=30)
    assert parse_instant("2026-03-02T10:00:00+01:00") == datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def test_kafka_client_settings_come_from_a_file_or_the_environment_and_secrets_are_redacted(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# Confluent Cloud\nbootstrap.servers=pkc.example:9092\nsecurity.protocol=SASL_SSL\n"
                     "sasl.mechanisms=PLAIN\nsasl.username=KEY\n")
    s = parse_settings(["--kafka-config", str(props)], {"TRADE_SUMMARY_KAFKA_SASL_PASSWORD": "s3cret"})
    assert s.bootstrap_servers == "pkc.example:9092" and not s.embedded_broker
    assert s.kafka_client_config()["sasl.password"] == "s3cret"
    assert "s3cret" not in s.describe() and "s3cret" not in repr(s)
    assert redact({"sasl.password": "x", "sasl.username": "u"}) == {"sasl.password": "***", "sasl.username": "u"}
    assert parse_kafka_properties("a=1\n\n!c\nb: 2") == {"a": "1", "b": "2"}


def test_the_variables_of_kafka_flags_are_flags_not_kafka_client_settings(tmp_path):
    (tmp_path / "client.properties").write_text("security.protocol=PLAINTEXT\n")
    s = parse_settings([], {"TRADE_SUMMARY_KAFKA_CONFIG": str(tmp_path / "client.properties"),
                            "TRADE_SUMMARY_KAFKA_RETRY_TIMEOUT": "30 seconds",
                            "TRADE_SUMMARY_KAFKA_SASL_USERNAME": "u"})
    assert dict(s.kafka_options) == {"security.protocol": "PLAINTEXT", "sasl.username": "u"}
    assert s.kafka_retry_timeout == timedelta(seconds=30)


def test_a_bad_bootstrap_servers_setting_from_the_environment_is_a_usage_error():
    with pytest.raises(UsageError, match="TRADE_SUMMARY_KAFKA_BOOTSTRAP_SERVERS.*HOST:PORT"):
        parse_settings([], {"TRADE_SUMMARY_KAFKA_BOOTSTRAP_SERVERS": "no port here"})


def test_missing_kafka_config_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read --kafka-config"):
        parse_settings(["--kafka-config", str(tmp_path / "missing.properties")])


def test_max_lateness_must_stay_within_the_watermark():
    assert parse_settings(["--max-lateness", "20 minutes"]).simulation.max_lateness == timedelta(minutes=20)
    with pytest.raises(UsageError, match="--max-lateness 45 minutes must be shorter than the watermark"):
        parse_settings(["--max-lateness", "45 minutes"])


def test_load_settings_share_the_kafka_flags_and_have_their_own(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    s = parse_load_settings(
        ["--from", str(landing), "--where", "channel = 'mobile'", "--key", "symbol", "--max-files-per-trigger", "2",
         "--clean-source", "archive", "--archive-dir", str(tmp_path / "archive"), "--available-now",
         "--data-dir", str(tmp_path / "data")],
        {"TRADE_SUMMARY_TOPIC": "replayed", "TRADE_SUMMARY_KAFKA_SASL_PASSWORD": "s3cret",
         "TRADE_SUMMARY_BOOTSTRAP_SERVERS": "k1:9092"})
    assert s.source_dir == landing and s.where == "channel = 'mobile'" and s.key_column == "symbol"
    assert s.max_files_per_trigger == 2 and s.clean_source == "archive" and s.available_now
    assert s.archive_location == tmp_path / "archive"
    assert s.topic == "replayed"
    assert s.kafka_client_config() == {"sasl.password": "s3cret", "bootstrap.servers": "k1:9092"}
    assert "s3cret" not in s.describe() and "s3cret" not in repr(s)
    # one checkpoint per landing directory and topic, outside the pipeline's checkpoints
    assert s.checkpoint_location.parent == tmp_path / "data" / "loader-checkpoints"
    assert s.checkpoint_location != s.replace(topic="other").checkpoint_location
    assert s.checkpoint_location == s.replace(source_dir=landing / ".." / "landing").checkpoint_location


def test_load_defaults_use_the_embedded_broker_and_leave_files_in_place(tmp_path):
    s = parse_load_settings(["--from", str(tmp_path)])
    assert s.embedded_broker and s.kafka_bootstrap == "127.0.0.1:9092" and s.topic == "trades"
    assert s.where is None and s.key_column == "account_id" and s.clean_source == "off"
    assert s.trigger == timedelta(seconds=5) and not s.available_now


@pytest.mark.parametrize("argv, message", [
    ([], "--from"),
    (["--from", "/nonexistent/landing"], "no such directory"),
    (["--from", "{tmp}", "--clean-source", "move"], "invalid choice"),
    (["--from", "{tmp}", "--archive-dir", "/tmp/a"], "needs --clean-source archive"),
    (["--from", "{tmp}", "--clean-source", "archive", "--archive-dir", "{tmp}/archive"], "inside --from"),
    (["--from", "{tmp}", "--max-files-per-trigger", "0"], "positive"),
    (["--from", "{tmp}", "--data-dir", "s3://bucket/lake"], "give --checkpoint"),
    (["--from", "{tmp}", "--data-dir", "s3://bucket/lake", "--checkpoint", "{tmp}/../ck", "--clean-source", "archive"],
     "give --archive-dir"),
])
def test_bad_load_flags_raise_a_readable_usage_error(tmp_path, argv, message):
    with pytest.raises(UsageError, match=message):
        parse_load_settings([a.replace("{tmp}", str(tmp_path)) for a in argv])




def test_spark_settings_pass_through_as_spark_submit_takes_them(tmp_path):
    s = parse_settings(["--conf", "spark.driver.memory=768m", "--conf", "spark.executor.extraJavaOptions=-Da=b"])
    assert s.spark_conf == (("spark.driver.memory", "768m"), ("spark.executor.extraJavaOptions", "-Da=b"))
    assert parse_settings([]).spark_conf == ()
    load = parse_load_settings(["--from", str(tmp_path), "--conf", "spark.driver.memory=1g"])
    assert load.spark_conf == (("spark.driver.memory", "1g"),)


def test_shuffle_partitions_follow_the_local_cores_and_default_to_8_on_a_cluster():
    from streaming.run.spark_session import default_shuffle_partitions

    assert default_shuffle_partitions("local") == 1 and default_shuffle_partitions("local[3]") == 3
    assert default_shuffle_partitions("yarn") == 8


def test_the_market_clock_may_run_slower_than_the_wall_clock_but_not_stand_still():
    assert parse_settings(["--clock-speed", "0.05"]).simulation.clock_speed == 0.05
    with pytest.raises(UsageError, match="--clock-speed.*above 0"):
        parse_settings(["--clock-speed", "0"])
