"""A data file this process wrote is read from memory, exactly as its Parquet file reads."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streaming.lake import files

START = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
SCHEMA = pa.schema([("trade_id", pa.string()), ("event_time", pa.timestamp("us", tz="UTC")),
                    ("amount", pa.float64()), ("partition", pa.int32())])


@pytest.fixture(autouse=True)
def nothing_kept():
    files._kept.forget()
    yield
    files._kept.forget()


def rows(n: int) -> pa.Table:
    return pa.table({"trade_id": [f"t{i}" for i in range(n)],
                     "event_time": [START + timedelta(seconds=i) for i in range(n)],
                     "amount": [i * 1.5 for i in range(n)],
                     "partition": pa.array([i % 3 for i in range(n)], pa.int32())},
                    schema=SCHEMA)


@pytest.mark.parametrize("schema, columns, filters", [
    (SCHEMA, None, None),
    (pa.schema([SCHEMA.field("amount"), SCHEMA.field("trade_id")]), ["amount", "trade_id"], None),
    (pa.schema([*SCHEMA, ("added_since", pa.string())]), None, None),  # a column the file lacks: nulls
    (pa.schema([("amount", pa.float64()), ("partition", pa.int64())]), ["partition", "amount"], None),
    (SCHEMA, ["event_time", "trade_id"], pc.field("event_time") >= pa.scalar(START + timedelta(seconds=7),
                                                                          SCHEMA.field("event_time").type)),
])
def test_a_file_written_here_reads_from_memory_as_from_its_parquet_file(tmp_path, schema, columns, filters):
    location = str(tmp_path / "table")
    written = files.write_file(location, rows(20), partition={"day": "2026-03-02"})
    root = files.files_root(location, None)
    from_memory = files.read_live_file(root, written.path, schema, columns, filters)
    files._kept.forget()
    from_disk = files.read_live_file(root, written.path, schema, columns, filters)
    assert from_memory.equals(from_disk) and from_memory.schema.equals(from_disk.schema)
    assert from_memory.num_rows == (13 if filters is not None else 20)


def test_the_rows_kept_are_bounded_and_the_oldest_go_first(tmp_path, monkeypatch):
    one = rows(100)
    monkeypatch.setattr(files, "KEPT_BYTES", 5 * one.get_total_buffer_size())
    (tmp_path / "table").mkdir()
    location = str(tmp_path / "table")
    written = [files.write_file(location, one) for _ in range(12)]
    assert files._kept.size <= files.KEPT_BYTES
    root = files.files_root(location, None)
    (tmp_path / "table" / written[0].path).unlink()  # the oldest is no longer kept: read from disk
    with pytest.raises(FileNotFoundError):
        files.read_live_file(root, written[0].path, SCHEMA)
    assert files.read_live_file(root, written[-1].path, SCHEMA).equals(one)


def test_a_file_too_large_to_keep_is_read_from_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "KEPT_FILE_BYTES", 10)
    (tmp_path / "table").mkdir()
    written = files.write_file(str(tmp_path / "table"), rows(50))
    assert files._kept.size == 0
    assert files.read_live_file(files.files_root(str(tmp_path / "table"), None), written.path, SCHEMA).equals(rows(50))
