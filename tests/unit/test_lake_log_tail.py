"""A table's newest commits read from its log's JSON (log_tail.py) give the files delta-rs lists
at the same version, and give way to delta-rs for whatever they do not follow."""

import os
from datetime import date, datetime, timezone

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streaming.lake.files import live_files
from streaming.lake.log_tail import commit_file, commit_mark, tail

DAY = {"day": pa.date32()}


def rows(start_hour: int, count: int = 2) -> pa.Table:
    times = [datetime(2026, 3, 2, start_hour, n, tzinfo=timezone.utc) for n in range(count)]
    return pa.table({"t": pa.array(times, pa.timestamp("us", tz="UTC")), "day": [date(2026, 3, 2)] * count,
                     "n": list(range(count))})


def write(location: str, table: pa.Table, mode: str = "append") -> None:
    write_deltalake(location, table, mode=mode, partition_by=["day"])


def followed(location: str, since: int) -> dict[str, tuple]:
    """The live files at the newest version as delta-rs's files at `since` and the tail after it."""
    held = {f.path: (f.low, f.high, f.partition) for f in live_files(DeltaTable(location, version=since), "t")}
    found = tail(location, since, commit_mark(location, since), "t", DAY)
    assert found is not None and found.version == DeltaTable(location).version()
    for path in found.removed:
        held.pop(path, None)
    held.update({f.path: (f.low, f.high, f.partition) for f in found.added})
    return held


def listed(location: str) -> dict[str, tuple]:
    return {f.path: (f.low, f.high, f.partition) for f in live_files(DeltaTable(location), "t")}


def test_appends_an_overwrite_and_a_compaction_followed_from_the_log_are_the_files_delta_rs_lists(tmp_path):
    location = str(tmp_path / "t")
    write(location, rows(9))
    write(location, rows(10))
    assert followed(location, 0) == listed(location)
    write(location, rows(11))
    DeltaTable(location).optimize.compact()  # removes the three files, adds one
    assert followed(location, 1) == listed(location) and len(listed(location)) == 1
    write(location, rows(12), mode="overwrite")
    assert followed(location, 3) == listed(location)


def test_no_newer_commit_is_a_tail_of_the_version_held(tmp_path):
    location = str(tmp_path / "t")
    write(location, rows(9))
    found = tail(location, 0, commit_mark(location, 0), "t", DAY)
    assert found is not None and (found.version, found.added, found.removed) == (0, [], set())


def test_a_metadata_change_a_table_made_anew_or_a_commit_gone_give_way_to_delta_rs(tmp_path):
    location = str(tmp_path / "t")
    write(location, rows(9))
    mark = commit_mark(location, 0)
    DeltaTable(location).alter.set_table_properties({"delta.logRetentionDuration": "interval 1 day"})
    assert tail(location, 0, mark, "t", DAY) is None  # a metaData action

    write(location, rows(10))
    held = commit_mark(location, 2)
    os.remove(commit_file(location, 2))
    assert tail(location, 2, held, "t", DAY) is None  # the version held is gone from the log

    other = str(tmp_path / "u")
    write(other, rows(9))
    write(other, rows(10))
    assert tail(other, 0, (0, 0), "t", DAY) is None  # not the commit file the reader held
    assert tail(other, 0, commit_mark(other, 0), "t", {"hour": pa.int32()}) is None  # other partitions
    assert tail("s3://bucket/t", 0, commit_mark("s3://bucket/t", 0), "t", DAY) is None  # remote: delta-rs
