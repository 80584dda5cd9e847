"""Gold's change history against the real pipeline, as a script: after each step the history as
of each gold version's instant is exactly that version of gold (Delta time travel), through
on-time and late trades, a backfill, a batch run again after a crash and a replay; and it still
is once compaction, vacuum and log cleanup have removed those versions.

Window 15 minutes, watermark 30 minutes (tests/support/corpus.py).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from streaming.jobs.reconcile import Reconciler
from streaming.lake.store import Lake
from streaming.lake.tables import GOLD, SUMMARY_HISTORY
from streaming.medallion.gold import MEASURES
from streaming.medallion.history import BACKFILL, LATE, ON_TIME, REPLAY, as_of, in_change_order
from tests.support.corpus import DAY, trade

State = dict[str, tuple]


def state_of(rows: pa.Table) -> State:
    """Windows -> their values (amounts to the cent)."""
    return {row["window_start"].isoformat(): tuple(round(row[m], 2) for m in MEASURES) for row in rows.to_pylist()}


def gold_versions(lake: Lake) -> dict[int, tuple[datetime, State]]:
    """Every version of gold still readable by time travel, with data: version -> (the instant
    of its newest change, gold then)."""
    location = lake.location(GOLD)
    versions = {}
    for version in range(DeltaTable(location).version() + 1):
        try:
            rows = DeltaTable(location, version=version).to_pyarrow_table()
        except Exception:  # noqa: BLE001 - a version whose log or files cleanup removed
            continue
        if rows.num_rows:
            versions[version] = (max(rows["updated_at"].to_pylist()), state_of(rows))
    return versions


def history(lake: Lake) -> pa.Table:
    return in_change_order(DeltaTable(lake.location(SUMMARY_HISTORY)).to_pyarrow_table(columns=SUMMARY_HISTORY.columns))


def check_history_is_time_travel(lake: Lake, versions: dict[int, tuple[datetime, State]]) -> None:
    ordered = history(lake)
    for version, (instant, gold) in versions.items():
        assert state_of(as_of(ordered, instant)) == gold, f"the history as of gold's version {version}"
    keys = ordered.select(list(SUMMARY_HISTORY.keys)).to_pylist()
    assert len({tuple(k.values()) for k in keys}) == len(keys), "a change is recorded twice"


def causes(lake: Lake) -> dict[str, list[str]]:
    """Window (HH:MM) -> the causes of its changes, oldest first."""
    by_window: dict[str, list[str]] = {}
    for row in history(lake).to_pylist():
        by_window.setdefault(row["window_start"].strftime("%H:%M"), []).append(row["cause"])
    return by_window


def clean_up_the_log_and_files(lake: Lake, table) -> None:
    """What a long run does to old versions, at once: compaction, a vacuum, and the log's cleanup."""
    opened = DeltaTable(lake.location(table))
    opened.optimize.compact()
    opened.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds",
                                       "delta.deletedFileRetentionDuration": "interval 0 seconds"})
    opened.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    opened.create_checkpoint()
    opened.cleanup_metadata()


def test_the_history_is_gold_at_every_version_through_late_trades_a_backfill_a_rerun_and_cleanup(
        spark, stream, settings):
    lake = Lake(settings.data_dir)
    stream.add(trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"),
               trade("t2", "SELL", 5, 100.0, DAY + "09:14:59Z"),
               trade("t3", "BUY", 1, 50.0, DAY + "09:15:00Z"))
    stream.process()
    stream.add(trade("t4", "SELL", 2, 10.0, DAY + "09:31:00Z"), trade("t5", "BUY", 1, 1.0, DAY + "09:16:00Z"))
    stream.process()
    # Event time reaches 10:30 (watermark 10:00): 09:15 is past, a trade in it within the
    # watermark is late; one for 09:05 after that is too late and changes nothing.
    stream.add(trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"))
    stream.process()
    stream.add(trade("t7", "BUY", 3, 10.0, DAY + "10:05:00Z"))
    stream.process()
    stream.add(trade("t8", "SELL", 100, 100.0, DAY + "09:05:00Z"))
    stream.process()
    check_history_is_time_travel(lake, gold_versions(lake))
    assert causes(lake) == {"09:00": [ON_TIME], "09:15": [ON_TIME, ON_TIME], "09:30": [ON_TIME],
                            "10:00": [LATE], "10:30": [ON_TIME]}

    # A backfill puts the too-late trade into 09:00.
    report = Reconciler(spark, settings).backfill([DAY + "09:00:00+00:00"])
    assert report.backfilled
    # The last batch run again after a crash (the sink wrote it, Spark had not recorded it done).
    stream.restart(forget_last_commit=True)
    stream.add(trade("t9", "BUY", 2, 1.0, DAY + "10:31:00Z"), trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"))
    stream.process()
    versions = gold_versions(lake)
    check_history_is_time_travel(lake, versions)
    assert causes(lake)["09:00"] == [ON_TIME, BACKFILL]
    assert causes(lake)["10:30"] == [ON_TIME, ON_TIME]

    # Compaction, vacuum and the log's cleanup remove the old versions; the history keeps them.
    stream.stop()
    for table in (GOLD, SUMMARY_HISTORY):
        clean_up_the_log_and_files(lake, table)
    assert len(gold_versions(lake)) < len(versions)
    with pytest.raises(Exception):
        DeltaTable(lake.location(GOLD), version=min(versions)).to_pyarrow_table()
    check_history_is_time_travel(lake, versions)

    # Started again, it goes on from there.
    stream.add(trade("t10", "SELL", 1, 5.0, DAY + "10:40:00Z"))
    stream.process()
    newer = gold_versions(lake)
    check_history_is_time_travel(lake, {**versions, **newer})
    assert state_of(as_of(history(lake), datetime.now(timezone.utc))) == state_of(
        DeltaTable(lake.location(GOLD)).to_pyarrow_table())


def test_a_replay_adds_no_false_change(stream, settings):
    lake = Lake(settings.data_dir)
    stream.add(trade("r1", "BUY", 1, 10.0, DAY + "09:00:00Z"), trade("r2", "SELL", 2, 5.0, DAY + "09:20:00Z"))
    stream.process()
    stream.add(trade("r3", "BUY", 1, 7.0, DAY + "10:30:00Z"))
    stream.process()
    stream.add(trade("r4", "SELL", 1, 3.0, DAY + "10:10:00Z"))  # late: 10:00 was past
    stream.process()
    before = history(lake)
    assert before.num_rows == 4

    # Reprocessing everything recounts every window from silver, to the values they had.
    stream.restart(replay_from=datetime(2000, 1, 1, tzinfo=timezone.utc))
    stream.process()
    after = history(lake)
    assert after.equals(before), "a replay that changes no value records no change"
    assert REPLAY not in after["cause"].to_pylist()
    check_history_is_time_travel(lake, gold_versions(lake))
