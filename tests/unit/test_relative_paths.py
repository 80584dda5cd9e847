"""Every path a flag or a TRADE_SUMMARY_* variable gives is made absolute where the settings are
parsed, against the directory the command was started in: the broker's JVM and Spark run with
other working directories, where a relative path points elsewhere."""

from pathlib import Path

import pytest

from streaming.run.cli import parse_load_settings, parse_settings

START = Path("/home/me/desk")


@pytest.fixture
def landing(tmp_path):
    """A relative --from that exists: the loader checks its directory at parse time."""
    (tmp_path / "landing").mkdir()
    return tmp_path


def test_a_relative_data_dir_is_absolute_and_so_is_all_beneath_it():
    s = parse_settings(["--data-dir", "lake"], cwd=START)
    assert s.data_dir == START / "lake"
    assert s.checkpoint_dir == START / "lake/checkpoints" and s.broker_dir == START / "lake/broker"
    assert s.lock_file == START / "lake/.trade-summary.lock"


def test_a_relative_data_dir_from_the_environment_is_absolute():
    assert parse_settings([], {"TRADE_SUMMARY_DATA_DIR": "lake"}, cwd=START).data_dir == START / "lake"


def test_a_file_uri_data_dir_stays_absolute_and_an_object_store_uri_is_left_as_given():
    assert parse_settings(["--data-dir", "file:///srv/lake"], cwd=START).data_dir == Path("/srv/lake")
    s = parse_settings(["--data-dir", "s3://bucket/lake", "--checkpoint-dir", "ck"], cwd=START)
    assert s.data_dir == "s3://bucket/lake" and s.checkpoint_dir == START / "ck"
    assert s.broker_dir == START / "data/broker"


def test_a_relative_checkpoint_dir_is_absolute_and_a_hadoop_uri_is_left_as_given():
    assert parse_settings(["--checkpoint-dir", "../ck"], cwd=START).checkpoint_dir == Path("/home/me/ck")
    assert parse_settings(["--checkpoint-dir", "hdfs://nn/ck"], cwd=START).checkpoint_dir == "hdfs://nn/ck"


def test_a_relative_broker_dir_is_absolute():
    assert parse_settings(["--broker-dir", "kafka"], cwd=START).broker_dir == START / "kafka"


def test_a_relative_kafka_config_is_read_from_the_start_directory(tmp_path):
    (tmp_path / "client.properties").write_text("security.protocol=SASL_SSL\n")
    s = parse_settings(["--bootstrap-servers", "k:9092", "--kafka-config", "client.properties"], cwd=tmp_path)
    assert s.kafka_options["security.protocol"] == "SASL_SSL"


def test_a_home_relative_path_is_expanded(monkeypatch):
    monkeypatch.setenv("HOME", "/home/them")
    assert parse_settings(["--data-dir", "~/lake"], cwd=START).data_dir == Path("/home/them/lake")


def test_the_loader_makes_from_archive_dir_checkpoint_and_data_dir_absolute(landing, monkeypatch):
    monkeypatch.chdir(landing)  # --from is checked for existence, relative to the start directory
    s = parse_load_settings(["--from", "landing", "--data-dir", "lake", "--clean-source", "archive",
                             "--archive-dir", "sent", "--checkpoint", "ck"])
    assert s.source_dir == landing / "landing" and s.data_dir == landing / "lake"
    assert s.archive_location == landing / "sent" and s.checkpoint_location == landing / "ck"
    assert s.broker_dir == landing / "lake/broker"


def test_the_loaders_defaults_are_under_the_absolute_data_dir(landing):
    s = parse_load_settings(["--from", "landing"], cwd=landing)
    assert s.data_dir == landing / "data" and s.archive_location == landing / "data/loader-archive"
    assert Path(s.checkpoint_location).is_relative_to(landing / "data/loader-checkpoints")


def test_a_missing_relative_from_names_the_directory_it_looked_in(tmp_path):
    with pytest.raises(Exception, match=str(tmp_path / "nowhere")):
        parse_load_settings(["--from", "nowhere"], cwd=tmp_path)
