"""Windows close when the input goes quiet (--close-idle-after), on the real pipeline: after 20 s
with no new trade the watermark moves up to the latest event time seen, the windows up to it are
final, a trade for one of them that comes later is too late, and a restart (or a batch run
again) judges with the same watermark."""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timedelta, timezone

import pandas as pd

from dashboard.dash_app import create_app
from streaming.jobs.pipeline import MEDALLION_QUERY
from streaming.jobs.reconcile import Reconciler
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, CORRECTIONS, LATE_TRADES, SUMMARY_HISTORY
from streaming.medallion.lateness import CLOSER_PREFIX, quiet_closer
from streaming.run.health import resume_point
from tests.support.corpus import DAY, trade

QUIET = timedelta(seconds=20)
FRONT = "2026-03-02T09:20:00.000Z"


def test_quiet_input_closes_its_windows_and_a_later_trade_for_them_is_too_late_after_a_restart_too(stream, settings,
                                                                                                   spark):
    stream.settings = settings.replace(close_idle_after=QUIET)
    stream.add(trade("a", "BUY", 1, 10.0, DAY + "09:01:00Z"), trade("b", "SELL", 1, 4.0, DAY + "09:20:00Z"))
    stream.process()
    assert final_windows(stream) == {"09:00": False, "09:15": False}  # the watermark: 08:50

    waited = wait_for_the_close(stream)

    assert waited >= QUIET.total_seconds() - 2  # not before the quiet (2 s: the batch's own end)
    status = stream.pipeline.status()[0]
    assert status.watermark == FRONT
    assert status.closed_when_quiet["windows_up_to"] == FRONT and status.closed_when_quiet["quiet_s"] >= 18
    assert final_windows(stream) == {"09:00": True, "09:15": False}  # 09:15 ends at 09:30, after it
    assert Reconciler(spark, stream.settings).watermark() == pd.Timestamp(FRONT)  # final for a backfill too
    ledger = stream.table(BATCH_WATERMARKS)
    closer_rows = ledger[ledger["query_id"].str.startswith(CLOSER_PREFIX)]
    assert len(closer_rows) > 0 and set(closer_rows["start_offset"] - closer_rows["end_offset"]) == {0}

    stream.restart()
    checkpoint = stream.pipeline.checkpoints.query(MEDALLION_QUERY)
    assert resume_point(Lake(settings.data_dir), checkpoint, settings.watermark).watermark == FRONT
    wait_for_the_close(stream)  # quiet again after the start: the close found is said, not made twice
    assert stream.pipeline.status()[0].closed_when_quiet["windows_up_to"] == FRONT
    closers = stream.table(BATCH_WATERMARKS)["query_id"].str.startswith(CLOSER_PREFIX)
    assert closers.sum() == len(closer_rows)

    stream.add(trade("late", "BUY", 2, 10.0, DAY + "09:10:00Z"), trade("open", "BUY", 1, 5.0, DAY + "09:25:00Z"))
    stream.process()
    late = stream.check_table(LATE_TRADES, rows=1, trade_id=["late"])
    assert pd.Timestamp(late["watermark"][0]) == pd.Timestamp(FRONT)
    stream.check_gold({"09:00": (10.0, 0.0, 1), "09:15": (5.0, 4.0, 2)})
    # 09:15 ends after the front: still open when "open" came, so no correction, and on time.
    stream.check_table(CORRECTIONS, rows=0)
    assert set(stream.table(SUMMARY_HISTORY)["cause"]) == {"on_time"}

    stream.restart(forget_last_commit=True)  # the batch with the late trade runs again
    stream.process()
    stream.check_table(LATE_TRADES, rows=1, trade_id=["late"])
    stream.check_gold({"09:00": (10.0, 0.0, 1), "09:15": (5.0, 4.0, 2)})
    ledger = stream.table(BATCH_WATERMARKS)
    assert (ledger[ledger["query_id"] == checkpoint.query_id]["watermark"].max() == pd.Timestamp(FRONT))
    assert quiet_closer(checkpoint.query_id) in set(ledger["query_id"])

    lateness = page(stream).get(f"/api/lateness?day={DAY[:10]}").get_json()
    assert lateness["closed_when_quiet"] == 1  # too late at every delay
    assert all(point["too_late"] == 1 for point in lateness["curve"])


def wait_for_the_close(stream, timeout_s: float = 90) -> float:
    """Asks the pipeline to close quiet windows each second, as the app does; the seconds it took."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        stream.pipeline.close_quiet_windows()
        if stream.pipeline.status()[0].closed_when_quiet:
            return time.monotonic() - began
        time.sleep(1.0)
    raise AssertionError(f"no idle close in {timeout_s} s")


def page(stream):
    snapshot = {"at": datetime.now(timezone.utc).isoformat(),
                "queries": [dataclasses.asdict(q) for q in stream.pipeline.status()]}
    return create_app(Lake(stream.settings.data_dir), health=lambda: snapshot,
                      watermark=stream.settings.watermark).server.test_client()


def final_windows(stream) -> dict[str, bool]:
    """Window start ("HH:MM") -> final, as /api/summary says it."""
    answer = page(stream).get(f"/api/summary?day={DAY[:10]}").get_json()
    return {w["window_start"][11:16]: w["final"] for w in answer["windows"]}
