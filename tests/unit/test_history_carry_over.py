"""A lake from before gold's history gets one at its first start, once, from gold and its
corrections (real Delta tables)."""

import pandas as pd
import pyarrow as pa
from deltalake import DeltaTable

from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS, GOLD, SUMMARY_HISTORY
from streaming.medallion.corrections import correction_rows
from streaming.medallion.history import as_of, in_change_order
from streaming.sink.gold_step import carry_over_history

NINE = pd.Timestamp("2026-03-02 09:00", tz="UTC")


def gold_window(start: pd.Timestamp, buy: float, count: int, updated_at: pd.Timestamp) -> pd.DataFrame:
    return pd.DataFrame([{"window_start": start, "window_end": start + pd.Timedelta(minutes=15), "buy_amount": buy,
                          "sell_amount": 0.0, "settlement_amount": buy, "trade_count": count, "revision": 1,
                          "updated_at": updated_at, "batch_id": 1}])


def old_lake(root) -> Lake:
    """Two days of gold; 09:00 of the first corrected once by a late trade."""
    lake = Lake(root)
    for table in (GOLD, CORRECTIONS):
        lake.ensure(table)
    first = gold_window(NINE, 10.0, 2, NINE + pd.Timedelta(hours=4))
    second = gold_window(NINE + pd.Timedelta(days=1), 3.0, 1, NINE + pd.Timedelta(days=1, hours=4))
    lake.publish(GOLD, pa.Table.from_pandas(pd.concat([first, second]), preserve_index=False), Batch("q", 1))
    before = first.assign(buy_amount=6.0, settlement_amount=6.0, trade_count=1)
    was, now = (pa.Table.from_pandas(frame, preserve_index=False) for frame in (before, first))
    lake.publish(CORRECTIONS, correction_rows(was, now, (NINE + pd.Timedelta(hours=4)).to_pydatetime(), None, "q", 5),
                 Batch("q", 5))
    return lake


def history(lake: Lake) -> pa.Table:
    return in_change_order(DeltaTable(lake.location(SUMMARY_HISTORY)).to_pyarrow_table(columns=SUMMARY_HISTORY.columns))


def test_an_old_lake_starts_its_history_with_what_it_kept_once(tmp_path):
    lake = old_lake(tmp_path / "data")
    lake.ensure(SUMMARY_HISTORY)
    carry_over_history(lake, history_was_there=False)
    ordered = history(lake)
    assert [(r["buy_amount"], r["cause"]) for r in ordered.to_pylist()] == [(6.0, "on_time"), (10.0, "late"),
                                                                             (3.0, "on_time")]
    assert as_of(ordered, None).column("buy_amount").to_pylist() == [10.0, 3.0]
    version = DeltaTable(lake.location(SUMMARY_HISTORY)).version()
    carry_over_history(lake, history_was_there=True)  # the next start
    assert DeltaTable(lake.location(SUMMARY_HISTORY)).version() == version


def test_a_lake_whose_pipeline_wrote_the_history_is_left_as_it_is(tmp_path):
    lake = old_lake(tmp_path / "data")
    lake.ensure(SUMMARY_HISTORY)
    carry_over_history(lake, history_was_there=True)
    assert history(lake).num_rows == 0
