"""The day's history window by window: what the page reads of it as files come (HistoryReader,
PageReaders.day_history) is what sorting the whole day gives, through appends, a late change to an
old window and a compaction."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from dashboard.context import PageContext, PageReaders
from dashboard.data import first_values, history_span
from streaming.lake import partitions
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import SUMMARY_HISTORY
from streaming.medallion.history import LATE, ON_TIME, by_window, in_change_order

DAY = "2026-03-02"
START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
WINDOW = timedelta(minutes=15)


def change(window: int, batch: int, second: float, cause: str = ON_TIME, query: str = "q") -> dict:
    start = START + window * WINDOW
    return {"window_start": start, "window_end": start + WINDOW, "buy_amount": float(batch), "sell_amount": 1.0,
            "settlement_amount": float(batch) + 1.0, "trade_count": batch,
            "changed_at": START + timedelta(seconds=second), "cause": cause, "batch_id": batch, "query_id": query}


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SUMMARY_HISTORY.schema)


def random_changes(seed: int, batches: int = 60) -> list[list[dict]]:
    """A batch at a time: the current window changes on time, now and then an older one late."""
    rng = random.Random(seed)
    made = []
    for batch in range(batches):
        current = batch // 10
        rows = [change(current, batch, batch * 2.0)]
        if current and rng.random() < 0.3:
            rows.append(change(rng.randrange(current), batch, batch * 2.0, LATE))
        made.append(rows)
    return made


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_days_windows_each_in_change_order_make_the_day_in_change_order(seed):
    rows = [row for batch in random_changes(seed) for row in batch]
    random.Random(seed).shuffle(rows)
    files = [table(rows[i:i + 7]) for i in range(0, len(rows), 7)]
    starts = sorted({start for rows_of_file in files for start in by_window(rows_of_file)})
    windows = [in_change_order(pa.concat_tables([part[start] for part in map(by_window, files) if start in part]))
               for start in starts]

    whole = in_change_order(table(rows))
    assert pa.concat_tables(windows).equals(whole)
    assert {k: v for w in windows for k, v in first_values(w).items()} == first_values(whole)
    spans = [history_span(w) for w in windows]
    assert [min(s[0] for s in spans), max(s[1] for s in spans)] == history_span(whole)


def test_a_file_split_by_window_keeps_each_windows_rows_in_the_files_order():
    rows = [change(1, 0, 5.0), change(0, 1, 3.0), change(1, 2, 1.0), change(0, 3, 9.0)]
    split = by_window(table(rows))
    assert [start for start in split] == [int((START + w * WINDOW).timestamp() * 1e6) for w in (0, 1)]
    assert [split[s]["batch_id"].to_pylist() for s in split] == [[1, 3], [0, 2]]
    assert by_window(table([])) == {}


def test_the_page_reads_the_days_history_as_the_whole_day_sorted_through_appends_and_a_compaction(tmp_path):
    lake = Lake(tmp_path)
    context = PageContext(PageReaders.of(lake), status=dict, lake=lake)

    def check():
        whole = in_change_order(lake.read(SUMMARY_HISTORY, SUMMARY_HISTORY.columns))
        assert context.readers.history.read(DAY).equals(whole)
        kept = context.day_history(DAY)
        assert kept["first"] == first_values(whole)
        assert kept["span"] == history_span(whole)

    for batch, rows in enumerate(random_changes(7, batches=25)):
        lake.publish(SUMMARY_HISTORY, table(rows), Batch("q", batch))
        check()
    compacting = dataclasses.replace(SUMMARY_HISTORY, compact_every=1)
    partitions.compact_now_and_then(compacting, lake.location(SUMMARY_HISTORY), lambda: lake.open(SUMMARY_HISTORY))
    assert len(lake.open(SUMMARY_HISTORY).file_uris()) < 25
    check()
    lake.publish(SUMMARY_HISTORY, table([change(0, 99, 500.0, LATE, query="backfill")]), Batch("backfill", 0))
    check()


def test_a_window_unchanged_by_a_new_file_is_handed_back_as_it_was(tmp_path):
    lake = Lake(tmp_path)
    readers = PageReaders.of(lake)
    lake.publish(SUMMARY_HISTORY, table([change(0, 0, 1.0), change(1, 0, 1.0)]), Batch("q", 0))
    _, before = readers.history.read_windows(DAY)
    lake.publish(SUMMARY_HISTORY, table([change(1, 1, 2.0)]), Batch("q", 1))
    _, after = readers.history.read_windows(DAY)
    first, second = sorted(after)
    assert after[first] is before[first]
    assert after[second] is not before[second] and after[second].num_rows == 2
