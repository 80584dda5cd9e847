"""The change history's pure rules: which windows changed, why, and gold as of an instant."""

from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa

from streaming.lake.tables import SUMMARY_HISTORY
from streaming.medallion.corrections import find_corrections
from streaming.medallion.gold import WINDOW_SUMS_SCHEMA
from streaming.medallion.history import (
    BACKFILL,
    LATE,
    ON_TIME,
    REPLAY,
    as_of,
    carried_over,
    change_rows,
    first_reported,
    in_change_order,
    revisions,
    stream_causes,
)

NINE = pd.Timestamp("2026-03-02 09:00", tz="UTC")
QUARTER = pd.Timedelta(minutes=15)


def windows(*values) -> pa.Table:
    """(minutes after 09:00, buy, sell, count) -> window rows."""
    return pa.Table.from_pylist([{
        "window_start": NINE + pd.Timedelta(minutes=m), "window_end": NINE + pd.Timedelta(minutes=m) + QUARTER,
        "buy_amount": buy, "sell_amount": sell, "settlement_amount": buy - sell, "trade_count": count,
    } for m, buy, sell, count in values], schema=WINDOW_SUMS_SCHEMA)


def at(seconds: float) -> datetime:
    return (NINE + pd.Timedelta(hours=3, seconds=seconds)).to_pydatetime()


def test_a_window_rewritten_with_its_own_values_has_no_change():
    current = windows((0, 10.0, 0.0, 1), (15, 5.0, 5.0, 2))
    changes = change_rows(current, windows((0, 10.0, 0.0, 1), (15, 6.0, 5.0, 3)), REPLAY, at(0), "q", 7)
    assert changes.column("window_start").to_pylist() == [NINE + QUARTER]
    assert changes.column("buy_amount").to_pylist() == [6.0] and changes.column("cause").to_pylist() == [REPLAY]
    assert changes.schema == SUMMARY_HISTORY.schema


def test_a_window_gold_lacked_changes_from_zero():
    changes = change_rows(windows(), windows((30, 1.0, 0.0, 1)), [ON_TIME], at(0), "q", 1)
    assert changes.num_rows == 1 and changes.column("trade_count").to_pylist() == [1]


def test_a_change_is_late_exactly_when_the_same_batch_records_a_correction():
    watermark, delay = NINE + pd.Timedelta(minutes=30), timedelta(minutes=30)  # event time was at 10:00
    updated = windows((30, 1.0, 0.0, 1), (45, 2.0, 0.0, 1), (60, 3.0, 0.0, 1))
    causes = stream_causes(updated, watermark.to_pydatetime(), delay)
    corrected = find_corrections(windows(), updated, watermark.to_pydatetime(), delay, at(0), 1, "q")
    late_starts = [start for start, cause in zip(updated["window_start"].to_pylist(), causes) if cause == LATE]
    assert late_starts == corrected.column("window_start").to_pylist()
    assert causes == [LATE, LATE, ON_TIME]
    assert stream_causes(updated, None, delay) == [ON_TIME] * 3  # no watermark yet: nothing is past


def history_of(*changes) -> pa.Table:
    """(seconds, minutes after 09:00, buy, cause) -> history rows in change order."""
    rows = [change_rows(windows(), windows((m, buy, 0.0, 1)), cause, at(s), "q", i)
            for i, (s, m, buy, cause) in enumerate(changes)]
    return in_change_order(pa.concat_tables(rows))


def test_gold_as_of_an_instant_is_each_window_s_last_change_by_then():
    ordered = history_of((1, 0, 1.0, ON_TIME), (2, 15, 5.0, ON_TIME), (3, 0, 2.0, ON_TIME), (9, 0, 4.0, LATE),
                         (4, 30, 7.0, ON_TIME))
    assert as_of(ordered, at(0)).num_rows == 0
    assert as_of(ordered, at(1)).column("buy_amount").to_pylist() == [1.0]
    assert as_of(ordered, at(3.5)).column("buy_amount").to_pylist() == [2.0, 5.0]
    assert as_of(ordered, at(8)).column("buy_amount").to_pylist() == [2.0, 5.0, 7.0]
    assert as_of(ordered, at(9)).column("buy_amount").to_pylist() == [4.0, 5.0, 7.0]
    assert as_of(ordered, None).equals(as_of(ordered, at(60)))
    naive = (NINE + pd.Timedelta(hours=3, seconds=3)).tz_localize(None)  # a time without an offset is UTC
    assert as_of(ordered, naive).equals(as_of(ordered, at(3)))


def test_a_window_s_revisions_are_its_changes_oldest_first():
    ordered = history_of((5, 0, 3.0, LATE), (1, 0, 1.0, ON_TIME), (2, 15, 5.0, ON_TIME), (9, 0, 4.0, BACKFILL))
    assert revisions(ordered, NINE).column("buy_amount").to_pylist() == [1.0, 3.0, 4.0]
    assert revisions(ordered, NINE).column("cause").to_pylist() == [ON_TIME, LATE, BACKFILL]
    assert revisions(ordered, NINE + 2 * QUARTER).num_rows == 0


def test_as_first_reported_is_a_window_before_its_first_correction():
    ordered = history_of((1, 0, 1.0, ON_TIME), (2, 0, 2.0, ON_TIME), (3, 0, 3.0, LATE), (4, 0, 4.0, LATE),
                         (1, 15, 5.0, ON_TIME), (5, 30, 6.0, LATE), (6, 30, 7.0, LATE))
    first = first_reported(ordered).to_pylist()
    assert [(row["window_start"], row["buy_amount"]) for row in first] == [(NINE, 2.0), (NINE + 2 * QUARTER, 0.0)]
    assert first_reported(in_change_order(SUMMARY_HISTORY.schema.empty_table())).num_rows == 0


def test_a_lake_from_before_the_history_starts_it_with_each_window_as_first_reported_then_corrected():
    gold = windows((0, 5.0, 0.0, 3), (15, 2.0, 0.0, 1), (30, 3.0, 0.0, 1)).to_pandas().assign(
        updated_at=[at(50), at(10), at(90)])
    corrections = pd.DataFrame({
        "window_start": [NINE, NINE, NINE + 2 * QUARTER], "window_end": [NINE + QUARTER] * 2 + [NINE + 3 * QUARTER],
        **{f"{m}_before": v for m, v in [("buy_amount", [1.0, 4.0, 0.0]), ("sell_amount", [0.0] * 3),
                                         ("settlement_amount", [1.0, 4.0, 0.0]), ("trade_count", [1, 2, 0])]},
        **{f"{m}_after": v for m, v in [("buy_amount", [4.0, 5.0, 3.0]), ("sell_amount", [0.0] * 3),
                                        ("settlement_amount", [4.0, 5.0, 3.0]), ("trade_count", [2, 3, 1])]},
        "corrected_at": [at(30), at(50), at(90)], "batch_id": [7, 8, 9], "query_id": ["q", "backfill", "q"]})
    ordered = in_change_order(carried_over(gold, corrections))
    assert [(row["buy_amount"], row["cause"]) for row in revisions(ordered, NINE).to_pylist()] == [
        (1.0, ON_TIME), (4.0, LATE), (5.0, BACKFILL)]
    assert revisions(ordered, NINE).column("changed_at").to_pylist()[0] < at(30)  # first reported before corrected
    assert revisions(ordered, NINE + 2 * QUARTER).column("cause").to_pylist() == [LATE]  # a correction from 0
    assert as_of(ordered, None).column("buy_amount").to_pylist() == gold["buy_amount"].tolist()
    assert as_of(ordered, at(20)).column("buy_amount").to_pylist() == [2.0]
    assert as_of(ordered, at(40)).column("buy_amount").to_pylist() == [4.0, 2.0]
