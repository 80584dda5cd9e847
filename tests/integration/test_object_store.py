"""The lake on an S3-compatible store (moto's server on 127.0.0.1): tables written and read
through the one store as on a disk, and a store that cannot be reached named in one line."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from streaming.lake.files import write_file
from streaming.lake.locations import StorageUnreachable, arrow_filesystem, check_reachable
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD
from tests.support.cluster import s3_server
from tests.support.kafka import free_port


@pytest.fixture
def s3(tmp_path):
    with s3_server(tmp_path / "s3") as server:
        server.create_bucket("lake")
        yield server


def gold_rows(count: int) -> pa.Table:
    starts = [datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc) + timedelta(minutes=15 * n) for n in range(count)]
    columns = {"window_start": starts, "window_end": [s + timedelta(minutes=15) for s in starts]}
    for field in GOLD.schema:
        if field.name not in columns:
            columns[field.name] = pa.nulls(count, field.type) if field.nullable else pa.array([1] * count, field.type)
    return pa.table(columns).select(GOLD.schema.names).cast(GOLD.schema)


def test_a_table_published_to_the_store_reads_back_and_once_per_batch(s3):
    lake = Lake("s3://lake/trades", s3.env)
    lake.publish(GOLD, gold_rows(3), Batch("fixture", 0))
    assert lake.read(GOLD).num_rows == 3
    lake.publish(GOLD, gold_rows(3), Batch("fixture", 0))  # the same batch again: nothing added
    assert lake.read(GOLD).num_rows == 3


def test_a_task_file_lands_in_the_store(s3):
    location = "s3://lake/trades/any/table"
    written = write_file(location, pa.table({"n": [1, 2, 3]}), s3.env)
    filesystem, _ = arrow_filesystem(location, s3.env)
    assert written.rows == 3 and filesystem.get_file_info(written.path).size == written.size


def test_a_missing_bucket_or_a_store_that_does_not_answer_is_one_readable_line(s3):
    check_reachable("s3://lake/trades", s3.env)  # an existing bucket, an empty prefix: fine
    with pytest.raises(StorageUnreachable, match="s3://nobucket/trades: NoSuchBucket: The specified bucket"):
        check_reachable("s3://nobucket/trades", s3.env)
    nobody = {**s3.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_MAX_RETRIES": "0"}
    with pytest.raises(StorageUnreachable, match="refused") as raised:
        check_reachable("s3://lake/trades", nobody)
    assert "\x1b[" not in str(raised.value) and "\n" not in str(raised.value)
