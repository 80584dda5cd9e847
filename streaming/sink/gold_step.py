"""The sink's gold step: the trades silver kept from a batch -> too-late trades, window sums added
to gold (or windows recounted from silver), corrections for windows already past, each window's
change in gold's history, and the ledger.
Gold's tables are written as one step under their locks (tables.GOLD_WRITES); a live batch's
bronze, silver and quarantine files commit in the same step, beside gold."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from datetime import datetime, timezone
from typing import Callable, Collection, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from streaming.config import Settings
from streaming.lake.lookups import key_range_before, rows_between
from streaming.lake.merges import merged
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import (
    BATCH_WATERMARKS,
    CORRECTIONS,
    GOLD,
    GOLD_VIEW,
    GOLD_WRITES,
    LATE_TRADES,
    SILVER,
    SUMMARY_HISTORY,
    UTC_TIME,
    Table,
    Write,
)
from streaming.medallion.corrections import find_corrections
from streaming.medallion.gold import MEASURES, window_starts, window_sums
from streaming.medallion.history import CARRIED_OVER, REPLAY, carried_over, change_rows, stream_causes
from streaming.medallion.lateness import EPOCH, judged_delay, judged_watermark, late_trade_rows, too_late
from streaming.medallion.replay import recount
from streaming.metrics.counters import METRICS
from streaming.metrics.phase_times import NOT_TIMED, PhaseTimes

log = logging.getLogger(__name__)
CARRIED_OVER_DONE = 2**62  # the batch id of the carried-over history's last day


def gold_rows(sums: pa.Table, batch_id: int, now: datetime) -> pa.Table:
    """window_sums() rows -> gold rows written by this batch."""
    n = sums.num_rows
    return pa.table({
        **{name: sums[name] for name in ("window_start", "window_end", *MEASURES)},
        "revision": pa.array([1] * n, pa.int64()),
        "updated_at": pa.array([now] * n, UTC_TIME),
        "batch_id": pa.array([batch_id] * n, pa.int64()),
    }).cast(GOLD.schema)


def added(current: pa.Table, rows: pa.Table) -> pa.Table:
    """Gold's `rows` of a batch's windows as they stand once added to gold's `current` rows: the
    ADD MERGE's rule (merges.merged), for the corrections and the history."""
    total = merged(current, rows, GOLD, Write.ADD)
    return total.filter(pc.is_in(total["window_start"], value_set=rows["window_start"].combine_chunks()))


def carry_over_history(lake: Lake, history_was_there: bool) -> None:
    """Give a lake from before gold's history the history it can have (history.carried_over),
    once, at the first start with the history table: a day per commit, the last one recorded as
    CARRIED_OVER_DONE, so that a start after a crash half way goes on where it stopped."""
    if history_was_there and (not lake.published(SUMMARY_HISTORY, Batch(CARRIED_OVER, 0))
                              or lake.published(SUMMARY_HISTORY, Batch(CARRIED_OVER, CARRIED_OVER_DONE))):
        return
    gold = lake.read(GOLD).to_pandas()
    if gold.empty:
        return
    days = sorted(pd.to_datetime(gold["window_start"], utc=True).dt.floor("D").unique())
    log.warning("gold has no history yet: carrying over what the lake kept of %d days, once", len(days))
    for index, day in enumerate(days):
        start, end = day.to_pydatetime(), (day + pd.Timedelta(days=1)).to_pydatetime()
        on_day = gold[(gold["window_start"] >= day) & (gold["window_start"] < day + pd.Timedelta(days=1))]
        corrections = rows_between(lake, CORRECTIONS, "window_start", start, end, high_inclusive=False).to_pandas()
        batch = Batch(CARRIED_OVER, CARRIED_OVER_DONE if index == len(days) - 1 else index)
        lake.publish(SUMMARY_HISTORY, carried_over(on_day, corrections), batch)


class GoldStep:
    """Gold's tables for one sink, a batch at a time."""

    def __init__(self, settings: Settings, lake: Lake, phases: PhaseTimes = NOT_TIMED):
        self.settings = settings
        self.lake = lake
        self.phases = phases

    def add_summed(self, late: pa.Table, sums: pa.Table, ledger: pa.Table, batch: Batch,
                   files: Mapping[str, Callable[[], object]] | None = None, rerun: bool = False) -> None:
        """What the tasks judged and summed of the trades new to silver: the too-late ones, the
        others' window sums, added to gold; and the batch's ledger rows. `files` (by phase
        name) commit the batch's bronze, silver and quarantine files beside them; the ledger
        waits for them, so the offsets it records are in silver (the reconciliation cuts silver
        there), and the too-late trades wait for silver (record_late). Gold, its corrections,
        history and too-late trades are settled for readers as soon as they are in, the ledger
        still to come (tables.GOLD_VIEW). rerun: the batch may have run before (gold may hold
        it already)."""
        files = files or {}
        committed: list[concurrent.futures.Future[None]] = [concurrent.futures.Future() for _ in files]

        def commit(phase: str, step: Callable[[], object], done: concurrent.futures.Future) -> None:
            try:
                with self.phases.timed(phase):
                    step()
            except BaseException as exc:
                done.set_exception(exc)
                raise
            done.set_result(None)

        def wait_for(phases: Collection[str]) -> None:
            for phase, done in zip(files, committed):
                if phase in phases:
                    done.result()  # a failed commit's error: nothing is written ahead of it

        with self.lake.writing(*GOLD_WRITES) as held:
            def gold_view() -> None:
                self.update_gold(sums, ledger, batch, Write.ADD, look_before=rerun)
                if late.num_rows:
                    wait_for({"silver"})
                    self.record_late(late, ledger, batch, new_to_silver=True)
                held.settle(*GOLD_VIEW)  # the page may push them now, while the ledger waits for silver

            def ledger_last() -> None:
                wait_for(files)
                self.ledger(ledger, batch)

            self.lake.at_once(*(functools.partial(commit, phase, step, done)
                                for (phase, step), done in zip(files.items(), committed)),
                              gold_view, ledger_last)

    def ledger(self, ledger: pa.Table, batch: Batch) -> None:
        with self.phases.timed("ledger"):
            self.lake.publish(BATCH_WATERMARKS, ledger, batch)

    def count_kept(self, kept: pa.Table, ledger: pa.Table, batch: Batch, recount: bool) -> int:
        """The trades silver kept from the batch's records (lateness.LATE_CANDIDATE_COLUMNS)
        counted, and the batch's ledger rows. Returns how many were too late."""
        with self.lake.writing(*GOLD_WRITES):
            late_count = self.count_trades(kept, ledger, batch, recount)
            # Every batch that read records leaves its offsets and watermark in the ledger, even
            # when all its trades were too late and it changes no window.
            self.lake.publish(BATCH_WATERMARKS, ledger, batch)
        return late_count

    def count_trades(self, kept: pa.Table, ledger: pa.Table, batch: Batch, recount: bool) -> int:
        """The trades silver kept: too late -> gold/late_trades; the others -> gold. Returns how
        many were too late."""
        if kept.num_rows == 0:
            return 0
        late = too_late(kept, judged_watermark(ledger))
        self.record_late(kept.filter(late), ledger, batch)
        # Records that may have been read before: gold may hold the batch already (look_before).
        if recount:
            self.update_gold(self.recounted(kept), ledger, batch, Write.UPSERT, look_before=True)
        else:
            self.update_gold(window_sums(kept.filter(pc.invert(late)), self.settings.window), ledger, batch,
                             Write.ADD, look_before=True)
        return int(pc.sum(late).as_py() or 0)

    def record_late(self, late: pa.Table, ledger: pa.Table, batch: Batch, new_to_silver: bool = False) -> None:
        """Too-late trades (LATE_CANDIDATE_COLUMNS) -> gold/late_trades. new_to_silver: the
        trades were new to silver, which now holds them; late_trades only ever takes a trade
        silver holds, so they are new to it too, and are appended rather than MERGEd (the MERGE
        matches them against every trade_id of the table)."""
        if late.num_rows == 0:
            return
        rows = late_trade_rows(late, judged_watermark(ledger), self.settings.window, datetime.now(timezone.utc))
        if new_to_silver:
            self.lake.commit_files(LATE_TRADES, self.lake.write_files(LATE_TRADES, rows), batch)
        else:
            self.lake.publish(LATE_TRADES, rows, batch)

    def update_gold(self, sums: pa.Table, ledger: pa.Table, batch: Batch, write: Write, look_before: bool) -> None:
        """Window sums -> gold: added to its totals (Write.ADD) or setting them (UPSERT), with a
        correction for each window already past that changes, and the changes in gold's history.
        look_before: the batch may be in gold already (gold_before)."""
        if sums.num_rows == 0:
            return
        now = datetime.now(timezone.utc)
        with self.phases.timed("gold_read"):
            current = self.gold_before(batch, pc.min(sums["window_start"]).as_py(),
                                       pc.max(sums["window_start"]).as_py(), look_before)
        rows = gold_rows(sums, batch.id, now)
        after = rows if write is Write.UPSERT else added(current, rows)
        judged = judged_watermark(ledger)
        # The windows the chart showed complete are those up to the front (watermark + delay):
        # after an idle close the watermark trails the front by less than --watermark.
        watermark, delay = (judged if judged > EPOCH else None), judged_delay(ledger, self.settings.watermark)
        causes = REPLAY if write is Write.UPSERT else stream_causes(after, watermark, delay)
        corrections = METRICS.corrected(find_corrections(current, after, watermark, delay, now, batch.id,
                                                         batch.writer))
        changes = change_rows(current, after, causes, now, batch.writer, batch.id)
        # Gold beside its corrections and history: the trade is visible at gold's commit. The
        # page reads them once the whole step is done (Lake.steady).
        self.lake.at_once(lambda: self.publish_timed("gold", GOLD, rows, batch, write),
                          lambda: self.publish_timed("history", SUMMARY_HISTORY, changes, batch),
                          lambda: self.publish_timed("corrections", CORRECTIONS, corrections, batch))

    def publish_timed(self, phase: str, table: Table, rows: pa.Table, batch: Batch, write: Write | None = None) -> None:
        with self.phases.timed(phase):
            self.lake.publish(table, rows, batch, write=write)

    def gold_before(self, batch: Batch, low: datetime, high: datetime, look_before: bool) -> pa.Table:
        """Gold's windows from low to high as they stood before the batch. A batch run again
        after a crash (look_before) may find itself in gold already, its corrections and history
        not: they commit together."""
        before = key_range_before(self.lake, GOLD, batch, low, high) if look_before else None
        return before if before is not None else self.lake.key_range(GOLD, low, high)

    def recounted(self, kept: pa.Table) -> pa.Table:
        """The windows these trades fall in, recounted from all of silver's trades in them but
        the too-late ones."""
        window = self.settings.window
        starts = pc.unique(window_starts(kept["event_time"], window))
        low, high = pc.min(starts).as_py(), pc.max(starts).as_py() + window
        trades = rows_between(self.lake, SILVER, "event_time", low, high, high_inclusive=False,
                              columns=["trade_id", "side", "amount", "event_time"])
        late = rows_between(self.lake, LATE_TRADES, "window_start", low, high, high_inclusive=False,
                            columns=["trade_id", "backfilled_at"])
        # A too-late trade a backfill has put into gold counts: a recount keeps the backfill.
        return recount(trades, late.filter(pc.is_null(late["backfilled_at"]))["trade_id"], starts, window)
