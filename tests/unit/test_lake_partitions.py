"""Bronze and silver by day: rows land in their day's partition whichever way they are written,
closed days are rolled into large files while appends go on, and a table an older version made
unpartitioned is rewritten by day once, keeping its rows and its recorded batches."""

import dataclasses
import threading
import time
from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from streaming.lake import partitions
from streaming.lake.increments import FileIncrements, Span
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import BRONZE, DAY, SILVER, Write

TODAY = datetime.now(timezone.utc).date()  # read once: calls pass it, so a run across midnight agrees with itself


def silver(ids: list[str], times: list[datetime], offset: int = 0) -> pa.Table:
    n = len(ids)
    return pa.table({
        "trade_id": ids, "account_id": ["acc"] * n, "symbol": ["AAPL"] * n, "side": ["BUY"] * n,
        "quantity": pa.array([1] * n, pa.int64()), "price": [10.0] * n, "amount": [10.0] * n, "channel": ["web"] * n,
        "event_time": pa.array(times, SILVER.schema.field("event_time").type), "topic": ["trades"] * n,
        "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(offset, offset + n), pa.int64()),
        "kafka_timestamp": pa.array(times, SILVER.schema.field("event_time").type),
        "ingested_at": pa.array(times, SILVER.schema.field("event_time").type),
        "lateness_us": pa.array([0] * n, pa.int64()),
    }, schema=SILVER.schema)


def at(day: date, second: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc) + timedelta(seconds=second)


def days_of(lake: Lake, table) -> dict[date, int]:
    """The table's live files per partition day."""
    actions = pa.table(lake.open(table).get_add_actions(flatten=True))
    return {entry["values"]: entry["counts"] for entry in pc.value_counts(actions[f"partition.{DAY}"]).to_pylist()}


def sorted_ids(rows: pa.Table) -> list[str]:
    return sorted(rows["trade_id"].to_pylist())


def test_published_rows_land_in_the_partition_of_their_day_and_read_as_before(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(SILVER)
    rows = silver(["a", "b", "c"], [at(TODAY, 5), at(TODAY - timedelta(days=1), 86399), at(TODAY - timedelta(days=9))])
    lake.publish(SILVER, rows, Batch("app", 0))

    assert lake.open(SILVER).metadata().partition_columns == [DAY]
    assert days_of(lake, SILVER) == {TODAY: 1, TODAY - timedelta(days=1): 1, TODAY - timedelta(days=9): 1}
    assert lake.read(SILVER).column_names == SILVER.columns  # the day only for those who ask for it
    with_day = lake.read(SILVER, ["trade_id", DAY]).sort_by("trade_id")
    assert with_day[DAY].to_pylist() == [TODAY, TODAY - timedelta(days=1), TODAY - timedelta(days=9)]


def test_a_task_writes_a_file_per_day_which_the_driver_commits_into_its_partition(tmp_path):
    lake = Lake(tmp_path)
    rows = silver([f"t{i}" for i in range(6)], [at(TODAY - timedelta(days=i % 3), i) for i in range(6)])

    files = lake.write_files(SILVER, rows)
    assert sorted(f.partition_values[DAY] for f in files) == [str(TODAY - timedelta(days=i)) for i in (2, 1, 0)]
    assert lake.commit_files(SILVER, files, Batch("app", 0))

    assert sorted_ids(lake.read(SILVER)) == sorted_ids(rows)
    assert days_of(lake, SILVER) == {TODAY - timedelta(days=i): 1 for i in range(3)}
    back = lake.read(SILVER, ["trade_id", "event_time", DAY])
    assert back[DAY].equals(pc.cast(back["event_time"], pa.date32()))


def test_bronze_is_partitioned_by_the_day_of_its_kafka_time(tmp_path):
    lake = Lake(tmp_path)
    times = pa.array([at(TODAY, 1), at(TODAY - timedelta(days=2), 1)], BRONZE.schema.field("timestamp").type)
    rows = pa.table({"key": [b"k", b"k"], "value": [b"v1", b"v2"], "topic": ["t", "t"],
                     "partition": pa.array([0, 0], pa.int32()), "offset": pa.array([1, 2], pa.int64()),
                     "timestamp": times, "ingested_at": times}, schema=BRONZE.schema)
    lake.publish(BRONZE, rows, Batch("app", 0))
    lake.publish(BRONZE, rows, Batch("app", 1))  # the same records again: first copy wins, in their partitions

    assert lake.read(BRONZE).num_rows == 2
    assert days_of(lake, BRONZE) == {TODAY: 1, TODAY - timedelta(days=2): 1}


def test_a_record_read_again_with_a_new_event_day_moves_to_that_day(tmp_path):
    lake = Lake(tmp_path)
    lake.publish(SILVER, silver(["a"], [at(TODAY - timedelta(days=3))]), Batch("app", 0))
    # The same Kafka record parsed anew (a replay after a fix): it replaces its row, keys alone.
    lake.publish(SILVER, silver(["a"], [at(TODAY, 60)]), Batch("app", 1), narrow=False)

    back = lake.read(SILVER, ["trade_id", "event_time", DAY])
    assert back.to_pylist() == [{"trade_id": "a", "event_time": at(TODAY, 60), DAY: TODAY}]


def test_which_closed_days_are_rolled():
    def files(*rows):
        return pa.table({f"partition.{DAY}": pa.array([r[0] for r in rows], pa.date32()),
                         "size_bytes": pa.array([r[1] for r in rows], pa.int64())})

    old, older, open_day = TODAY - timedelta(days=2), TODAY - timedelta(days=5), TODAY - timedelta(days=1)
    actions = files((older, 10), (older, 20), (old, 100), (old, 30), (old, 90), (open_day, 1), (open_day, 1))
    assert partitions.days_to_roll(actions, open_day, file_bytes=100) == [older]  # 30 + 90 do not fit in 100
    assert partitions.days_to_roll(actions, open_day, file_bytes=120) == [older, old]
    assert partitions.days_to_roll(files((older, 10)), open_day, file_bytes=100) == []  # one file: nothing to roll
    assert partitions.first_open_day(TODAY, TODAY) == open_day
    assert partitions.first_open_day(None, TODAY) == open_day
    assert partitions.first_open_day(TODAY + timedelta(days=1), TODAY) == open_day  # a trade dated tomorrow
    assert partitions.first_open_day(date(2026, 3, 2), TODAY) == date(2026, 3, 1)  # data of the past, written now


def test_a_closed_day_is_rolled_into_one_file_and_the_open_days_are_left_to_the_writer_s_compaction(tmp_path):
    lake = Lake(tmp_path)
    days = [TODAY, TODAY - timedelta(days=1), TODAY - timedelta(days=4)]
    for batch in range(12):  # a small file per day and batch
        lake.publish(SILVER, silver([f"{batch}-{d}" for d in range(3)], [at(day, batch) for day in days], batch * 3),
                     Batch("app", batch))
    before = lake.read(SILVER).sort_by("trade_id")

    assert lake.roll_closed_days(SILVER, TODAY) == [TODAY - timedelta(days=4)]
    assert days_of(lake, SILVER) == {TODAY: 12, TODAY - timedelta(days=1): 12, TODAY - timedelta(days=4): 1}
    assert lake.read(SILVER).sort_by("trade_id").equals(before)
    assert lake.roll_closed_days(SILVER, TODAY) == []  # rolled once

    # The writer's compaction (every so many versions: here, every one) folds the small files of
    # every day, a late trade's in a closed day too.
    every_version = dataclasses.replace(SILVER, compact_every=1)
    lake.publish(every_version, silver(["late"], [at(TODAY - timedelta(days=4), 99)], 99), Batch("app", 12))
    assert days_of(lake, SILVER) == {TODAY: 1, TODAY - timedelta(days=1): 1, TODAY - timedelta(days=4): 1}


def test_the_open_days_follow_the_data_so_a_past_day_being_written_is_not_rolled(tmp_path):
    lake = Lake(tmp_path)
    past = date(2026, 3, 2)
    for batch in range(3):
        lake.publish(SILVER, silver([f"{batch}-{d}" for d in range(3)], [at(past - timedelta(days=d), batch)
                                                                         for d in (0, 1, 2)], batch * 3),
                     Batch("app", batch))
    assert lake.roll_closed_days(SILVER, TODAY) == [past - timedelta(days=2)]


def test_appends_go_on_while_a_roll_rewrites_a_closed_day(tmp_path):
    lake = Lake(tmp_path)
    lake.ensure(SILVER)
    closed = TODAY - timedelta(days=3)
    for batch in range(40):
        lake.publish(SILVER, silver([f"old{batch}-{i}" for i in range(5000)], [at(closed, batch)] * 5000,
                                    batch * 5000), Batch("seed", batch))
    lake.publish(SILVER, silver(["today"], [at(TODAY)], 999_999), Batch("seed", 40))  # the live day, open
    rolled, failed = [], []

    def roll():
        try:
            rolled.extend(lake.roll_closed_days(SILVER, TODAY))
        except Exception as error:  # noqa: BLE001 - reported below
            failed.append(error)

    rolling = threading.Thread(target=roll)
    rolling.start()
    for batch in range(20):  # the pipeline's task files, committed meanwhile, and a MERGE (a redelivery)
        rows = silver([f"new{batch}"], [at(TODAY, batch)], 1_000_000 + batch)
        assert lake.commit_files(SILVER, lake.write_files(SILVER, rows), Batch("app", batch))
    # Redeliveries: of today's trades, merged meanwhile; of a closed day's too, after the roll of it.
    assert lake.publish(SILVER, silver(["new0", "new1"], [at(TODAY, 0), at(TODAY, 1)], 1_000_100), Batch("m", 0))
    assert lake.publish(SILVER, silver(["new0", "old0-0"], [at(TODAY, 0), at(closed, 0)], 1_000_200), Batch("m", 1))
    rolling.join()

    assert not failed and rolled == [closed]
    assert lake.read(SILVER).num_rows == 40 * 5000 + 21
    assert days_of(lake, SILVER) == {closed: 1, TODAY: 21}


def test_a_stop_waits_for_the_day_a_roll_is_rewriting_and_leaves_the_next_days_to_the_next_roll(tmp_path):
    lake = Lake(tmp_path)
    closed = [TODAY - timedelta(days=4), TODAY - timedelta(days=3)]
    for batch in range(6):
        lake.publish(SILVER, silver([f"{batch}-{d}" for d in range(3)], [at(day, batch) for day in [*closed, TODAY]],
                                    batch * 3), Batch("app", batch))
    before = lake.read(SILVER).sort_by("trade_id")
    assert partitions.finish_rolls() == []  # nothing rolling: nothing to wait for
    stopped: list[list[str]] = []
    opens = 0

    def open_table():
        nonlocal opens
        opens += 1
        if opens == 2:  # the roll holds the first day's lock: the stop comes now
            threading.Thread(target=lambda: stopped.append(partitions.finish_rolls(timeout_s=60))).start()
            assert partitions._stopping.wait(10)
        return lake.open(SILVER)

    partitions.roll_in_background(SILVER, lake.location(SILVER), open_table)
    deadline = time.monotonic() + 60
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.05)

    assert stopped == [[]]  # the stop waited for the roll, which ended in time
    assert days_of(lake, SILVER) == {closed[0]: 1, closed[1]: 6, TODAY: 6}  # the day under way, and no further
    assert lake.read(SILVER).sort_by("trade_id").equals(before)
    assert lake.roll_closed_days(SILVER, TODAY) == [closed[1]]  # the next roll takes the rest


def test_a_table_an_older_version_made_unpartitioned_is_rewritten_by_day_once(tmp_path):
    lake = Lake(tmp_path)
    location = lake.location(SILVER)
    rows = silver(["a", "b"], [at(TODAY), at(TODAY - timedelta(days=6))])
    old_schema = rows.drop_columns(["channel"])  # and a column added since
    (tmp_path / "silver").mkdir()
    write_deltalake(location, old_schema, commit_properties=CommitProperties(
        app_transactions=[Transaction(app_id=Batch("app", 7).app_id(SILVER), version=7)]))

    lake.ensure(SILVER)

    opened = DeltaTable(location)
    assert opened.metadata().partition_columns == [DAY]
    assert days_of(lake, SILVER) == {TODAY: 1, TODAY - timedelta(days=6): 1}
    back = lake.read(SILVER).sort_by("trade_id")
    assert sorted_ids(back) == ["a", "b"] and back["channel"].null_count == 2
    assert lake.published(SILVER, Batch("app", 7))  # its batches are still recognised
    assert not lake.publish(SILVER, rows, Batch("app", 7))
    lake.ensure(SILVER)
    assert lake.open(SILVER).version() == opened.version()  # once


def test_a_page_read_of_a_partitioned_table_follows_its_files_and_gives_the_day(tmp_path):
    lake = Lake(tmp_path)
    lake.publish(SILVER, silver(["a", "b"], [at(TODAY, 1), at(TODAY - timedelta(days=1), 1)]), Batch("app", 0))
    reads = FileIncrements(lake, SILVER, ["trade_id", DAY], Span.utc_day("event_time", str(TODAY)))
    reads.refresh()
    lake.publish(SILVER, silver(["c"], [at(TODAY, 2)], 5), Batch("app", 1))
    reads.refresh()

    rows = pa.concat_tables(reads.parts.values()).sort_by("trade_id")
    assert rows.to_pylist() == [{"trade_id": "a", DAY: TODAY}, {"trade_id": "c", DAY: TODAY}]
    assert reads.whole_reads == 0 and reads.files_read == 2


def test_every_write_policy_of_a_partitioned_table_keeps_one_row_per_key(tmp_path):
    lake = Lake(tmp_path)
    rows = silver(["a", "b"], [at(TODAY), at(TODAY - timedelta(days=1))])
    lake.publish(SILVER, rows, Batch("app", 0))
    lake.publish(SILVER, rows, Batch("app", 1), write=Write.UPSERT)
    assert sorted_ids(lake.read(SILVER)) == ["a", "b"]


def test_a_merge_waits_for_a_roll_only_if_it_may_remove_files_or_reads_a_closed_day():
    today = SILVER.stored_rows(silver(["a", "b"], [at(TODAY), at(TODAY - timedelta(days=1))]))
    with_closed = SILVER.stored_rows(silver(["a", "b"], [at(TODAY), at(TODAY - timedelta(days=2))]))
    assert not partitions.must_wait_for_roll(SILVER, today, may_remove_files=False, today=TODAY)  # inserts only
    assert partitions.must_wait_for_roll(SILVER, today, may_remove_files=True, today=TODAY)  # a record read again
    assert partitions.must_wait_for_roll(SILVER, with_closed, may_remove_files=False, today=TODAY)
    unpartitioned = dataclasses.replace(SILVER, day_of=None)
    assert not partitions.must_wait_for_roll(unpartitioned, unpartitioned.stored_rows(with_closed), True)  # no roll


def test_rows_stored_once_are_stored_as_they_are_and_their_day_follows_the_event_time():
    stored = SILVER.stored_rows(silver(["a", "b"], [at(TODAY), at(TODAY - timedelta(days=1))]))
    assert stored.schema.equals(SILVER.stored_schema)
    assert stored[DAY].to_pylist() == [TODAY, TODAY - timedelta(days=1)]
    assert SILVER.stored_rows(stored) is stored  # a publish hands its stored rows on to write_files
