"""Where the tables, checkpoints and broker data live: local paths vs URIs, storage options and
their redaction, the flags that set them, and the driver's address on a cluster."""

from pathlib import Path

import pytest

from streaming.config import UsageError
from streaming.lake.checkpoints import Checkpoints, HadoopFiles, LocalFiles
from streaming.lake.locations import (
    checkpoint_location,
    data_location,
    is_remote,
    options_for_tasks,
    redact_storage_options,
    storage_error_summary,
    storage_option_pair,
)
from streaming.lake.store import Lake
from streaming.lake.tables import GOLD
from streaming.run.cli import parse_load_settings, parse_settings
from streaming.run.spark_session import bind_address, driver_address, master_hosts

S3_ENV = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
          "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "HOME": "/root"}


@pytest.mark.parametrize("text, expected", [
    ("data", Path("data")),
    ("/srv/trades/", Path("/srv/trades")),
    ("file:///srv/trades", Path("/srv/trades")),
    ("s3://bucket/prefix/", "s3://bucket/prefix"),
    ("S3://bucket", "s3://bucket"),
    ("gs://bucket/p", "gs://bucket/p"),
    ("abfss://container@account.dfs.core.windows.net/p", "abfss://container@account.dfs.core.windows.net/p"),
])
def test_a_data_dir_is_a_local_path_or_an_object_store_uri(text, expected):
    assert data_location(text) == expected
    assert is_remote(data_location(text)) == isinstance(expected, str)


@pytest.mark.parametrize("text, message", [
    ("ftp://host/x", "unsupported location"),
    ("hdfs://namenode/x", "unsupported location"),
    ("s3://", "names no bucket"),
    ("", "expected a path"),
])
def test_a_data_dir_deltalake_cannot_write_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        data_location(text)


def test_a_checkpoint_dir_may_be_any_hadoop_uri():
    assert checkpoint_location("/mnt/shared/ck") == Path("/mnt/shared/ck")
    assert checkpoint_location("file:///mnt/ck/") == Path("/mnt/ck")
    assert checkpoint_location("hdfs://namenode:8020/ck/") == "hdfs://namenode:8020/ck"
    assert checkpoint_location("s3a://bucket/ck") == "s3a://bucket/ck"


def test_the_lake_joins_table_names_onto_paths_and_uris_alike():
    assert Lake(Path("data")).location(GOLD) == "data/gold/trade_summary"
    assert Lake("s3://bucket/prefix").location(GOLD) == "s3://bucket/prefix/gold/trade_summary"
    assert "s3cr3t" not in repr(Lake("s3://bucket/prefix", S3_ENV))


def test_storage_options_come_from_the_environment_and_flags_win():
    options = options_for_tasks({"AWS_REGION": "eu-west-1"}, S3_ENV)
    assert options["AWS_REGION"] == "eu-west-1" and options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert "HOME" not in options


def test_an_http_endpoint_allows_plain_http_unless_told_otherwise():
    assert options_for_tasks({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"}, {})["AWS_ALLOW_HTTP"] == "true"
    assert options_for_tasks({"endpoint": "HTTP://minio:9000"}, {})["AWS_ALLOW_HTTP"] == "true"
    assert options_for_tasks({"allow_http": "false"}, {"AWS_ENDPOINT_URL": "http://minio:9000"}) == \
        {"AWS_ENDPOINT_URL": "http://minio:9000", "allow_http": "false"}
    assert "AWS_ALLOW_HTTP" not in options_for_tasks({"AWS_ENDPOINT_URL": "https://s3.example"}, {})
    assert "AWS_ALLOW_HTTP" not in options_for_tasks({}, {})


def test_secret_storage_options_are_redacted():
    shown = redact_storage_options({**S3_ENV, "AZURE_STORAGE_SAS_TOKEN": "sv=1", "GOOGLE_SERVICE_ACCOUNT_KEY": "{}"})
    assert shown["AWS_SECRET_ACCESS_KEY"] == shown["AZURE_STORAGE_SAS_TOKEN"] == "***"
    assert shown["GOOGLE_SERVICE_ACCOUNT_KEY"] == "***"
    assert shown["AWS_REGION"] == "us-east-1" and shown["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"


def test_a_bad_storage_option_never_echoes_a_secret_value():
    assert storage_option_pair("AWS_REGION = eu-west-1") == ("AWS_REGION", "eu-west-1")
    with pytest.raises(ValueError) as error:
        storage_option_pair("no-equals-sign")
    assert "KEY=VALUE" in str(error.value)


def test_a_remote_data_dir_takes_its_options_from_the_environment_and_flags():
    s = parse_settings(["--data-dir", "s3://bucket/x", "--checkpoint-dir", "/mnt/ck",
                        "--storage-option", "AWS_REGION=eu-west-1"], S3_ENV, cwd=Path("/home/me"))
    assert s.data_dir == "s3://bucket/x" and not s.data_is_local
    assert s.storage_options["AWS_REGION"] == "eu-west-1" and s.storage_options["AWS_SECRET_ACCESS_KEY"] == "s3cr3t"
    assert s.checkpoint_dir == Path("/mnt/ck")
    assert s.broker_dir == Path("/home/me/data/broker")  # always local
    assert s.lock_file == Path("/mnt/.ck.trade-summary.lock")  # beside the checkpoints: a replay moves them
    assert "s3cr3t" not in s.describe() and "s3cr3t" not in repr(s)
    assert "eu-west-1" in s.describe()


def test_a_remote_data_dir_needs_a_checkpoint_dir():
    with pytest.raises(UsageError, match="--checkpoint-dir"):
        parse_settings(["--data-dir", "s3://bucket/x"])
    with pytest.raises(UsageError, match="--checkpoint"):
        parse_load_settings(["--from", ".", "--data-dir", "s3://bucket/x"])


def test_storage_options_for_a_local_data_dir_are_a_usage_error():
    with pytest.raises(UsageError, match="--storage-option applies to a --data-dir URI"):
        parse_settings(["--storage-option", "AWS_REGION=eu-west-1"])


def test_the_broker_dir_is_always_local_and_defaults_beside_a_local_data_dir():
    assert parse_settings(["--data-dir", "/srv/d"]).broker_dir == Path("/srv/d/broker")
    assert parse_settings(["--broker-dir", "/var/broker"]).broker_dir == Path("/var/broker")
    with pytest.raises(UsageError, match="not a local path"):
        parse_settings(["--broker-dir", "s3://bucket/broker"])


def test_no_flags_keep_everything_under_the_local_data_dir():
    s = parse_settings([], cwd=Path("/home/me"))
    assert s.data_dir == Path("/home/me/data") and s.checkpoint_dir == Path("/home/me/data/checkpoints")
    assert s.broker_dir == Path("/home/me/data/broker") and s.lock_file == Path("/home/me/data/.trade-summary.lock")
    assert s.storage_options == {} and s.driver_host is None


def test_checkpoints_are_read_from_the_local_disk_or_through_spark():
    assert isinstance(Checkpoints("/tmp/ck").files, LocalFiles)
    assert Checkpoints("file:///tmp/ck").location == "/tmp/ck"
    with pytest.raises(ValueError, match="through Spark"):
        Checkpoints("hdfs://namenode/ck")
    assert HadoopFiles  # used for URIs; exercised in tests/integration/test_checkpoint_files.py


@pytest.mark.parametrize("master, hosts", [
    ("local[*]", []),
    ("yarn", []),
    ("spark://127.0.0.1:7077", [("127.0.0.1", 7077)]),
    ("spark://a:7077,b:7078", [("a", 7077), ("b", 7078)]),
    ("spark://[::1]:7077", [("::1", 7077)]),
    ("k8s://https://api.example:6443", [("api.example", 6443)]),
])
def test_master_urls_name_their_hosts(master, hosts):
    assert master_hosts(master) == hosts


def test_the_driver_binds_loopback_unless_the_cluster_is_elsewhere():
    assert driver_address("local[*]", None) == "127.0.0.1"
    assert driver_address("spark://127.0.0.1:7077", None) == "127.0.0.1"
    assert driver_address("spark://localhost:7077", None) == "127.0.0.1"
    assert driver_address("spark://10.0.0.5:7077", "10.0.0.9") == "10.0.0.9"
    assert driver_address("local[2]", "192.168.1.4") == "192.168.1.4"
    assert parse_settings(["--driver-host", "10.0.0.9"]).driver_host == "10.0.0.9"


def test_the_driver_binds_what_it_advertises_only_when_that_address_is_its_own():
    assert bind_address("spark://127.0.0.1:7077", "127.0.0.1") == "127.0.0.1"
    # NAT or a Kubernetes service: advertised to the executors, not an address of this machine
    assert bind_address("spark://127.0.0.1:7077", "203.0.113.9") == "127.0.0.1"


def test_an_object_store_error_becomes_one_line_with_the_stores_own_reason():
    chain = ("Generic S3 error\n  \x1b[31m↳\x1b[0m Error performing list request\n  \x1b[31m↳\x1b[0m 404 Not Found\n"
             "  \x1b[31m↳\x1b[0m <?xml version=\"1.0\"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified "
             "bucket does not exist</Message></Error>")
    assert storage_error_summary(OSError(chain)) == "NoSuchBucket: The specified bucket does not exist"
    refused = "Generic S3 error\n \x1b[31m↳\x1b[0m error sending request\n \x1b[31m↳\x1b[0m tcp connect error\n" \
              " \x1b[31m↳\x1b[0m Connection refused (os error 111)\n"
    assert storage_error_summary(refused) == \
        "error sending request; tcp connect error; Connection refused (os error 111)"
