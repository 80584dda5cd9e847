"""Reconciliation and backfill against the real pipeline, as a script: gold vs a batch recompute
from silver, the difference explained by the too-late trades, and a backfill that is recorded once."""

import json
from datetime import date

import pandas as pd

from dashboard import ids
from dashboard.client import call, store_snapshot
from dashboard.dash_app import create_app
from streaming.jobs.reconcile import BACKFILL_QUERY_ID, Reconciler
from streaming.lake.tables import CORRECTIONS, GOLD, LATE_TRADES
from tests.support.corpus import DAY, trade


def by_window(frame: pd.DataFrame) -> dict:
    return {row.window_start.strftime("%H:%M"): row for row in frame.itertuples()}


def test_reconciliation_explains_too_late_trades_and_backfill_is_recorded_once(spark, stream, settings):
    reconciler = Reconciler(spark, settings)
    # 09:00 and 09:15 windows; event time reaches 10:30 (watermark 10:00).
    stream.add(trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"),
               trade("t2", "SELL", 1, 50.0, DAY + "09:20:00Z"),
               trade("t3", "BUY", 1, 1.0, DAY + "10:30:00Z"))
    stream.process()
    # Two trades too late for 09:00 (one buy, one sell), one too late for the still-open 10:00
    # window (at the watermark itself), one on time for 10:30.
    stream.add(trade("late-buy", "BUY", 2, 100.0, DAY + "09:05:00Z"),
               trade("late-sell", "SELL", 3, 10.0, DAY + "09:10:00Z"),
               trade("late-open", "BUY", 1, 9.0, DAY + "10:00:00Z"),
               trade("t4", "SELL", 1, 2.0, DAY + "10:31:00Z"))
    stream.process()

    view = by_window(reconciler.reconcile(date(2026, 3, 2)))
    nine = view["09:00"]
    assert (nine.buy_amount_gold, nine.buy_amount_silver) == (1000.0, 1200.0)
    assert (nine.sell_amount_gold, nine.sell_amount_silver) == (0.0, 30.0)
    assert (nine.trade_count_gold, nine.trade_count_silver, nine.late_trades) == (1, 3, 2)
    assert nine.explained and not nine.matches and nine.final
    assert view["09:15"].matches and view["10:30"].matches
    assert not view["10:30"].final  # event time is still in it
    ten = view["10:00"]
    assert (ten.buy_amount_gold, ten.buy_amount_silver, ten.late_trades) == (0.0, 9.0, 1)
    assert ten.explained and not ten.final  # the watermark (10:01) is inside it

    # The page shows the same through its own callbacks; 10:00 cannot be chosen while open.
    client = create_app(settings.data_dir, reconciler=reconciler).server.test_client()
    snapshot = store_snapshot(client)
    checked = call(client, [f"{ids.RECONCILE_RESULT}.data", f"{ids.RECONCILE_MESSAGE}.children"],
                   {f"{ids.RECONCILE_CHECK}.n_clicks": 1, f"{ids.BACKFILL_APPLY}.n_clicks": 0},
                   {f"{ids.BACKFILL_CHOICE}.value": [], f"{ids.SNAPSHOT}.data": snapshot})
    result = checked[ids.RECONCILE_RESULT]["data"]
    assert "Checked 4 windows" in checked[ids.RECONCILE_MESSAGE]["children"]
    drawn = call(client, [f"{ids.RECONCILE_TABLE}.children", f"{ids.BACKFILL_CHOICE}.options",
                          f"{ids.BACKFILL_CHOICE}.value"], {f"{ids.RECONCILE_RESULT}.data": result})
    options = drawn[ids.BACKFILL_CHOICE]["options"]
    assert [(o["value"][11:16], o["disabled"]) for o in options] == [("09:00", False), ("10:00", True)]
    assert "2 of 4 windows of 2026-03-02 match silver" in json.dumps(drawn)
    assert "explained by 2 too-late trades" in json.dumps(drawn)

    # Backfill 09:00, 09:15 and 10:30 (already matching), 10:00 (open): only 09:00 is written.
    report = reconciler.backfill([DAY + "09:00:00+00:00", DAY + "09:15:00+00:00", DAY + "10:00:00+00:00",
                                  DAY + "10:30:00+00:00"])
    assert [s[11:16] for s in report.backfilled] == ["09:00"]
    assert [s[11:16] for s in report.already_matching] == ["09:15", "10:30"]
    assert [s[11:16] for s in report.still_open] == ["10:00"]
    row = by_window(stream.table(GOLD))["09:00"]
    assert (row.buy_amount, row.sell_amount, row.settlement_amount, row.trade_count) == (1200.0, 30.0, 1170.0, 3)
    corrections = stream.table(CORRECTIONS)
    backfills = corrections[corrections["query_id"] == BACKFILL_QUERY_ID]
    assert len(backfills) == 1
    c = backfills.iloc[0]
    assert (c.buy_amount_before, c.buy_amount_after, c.sell_amount_before, c.sell_amount_after) == \
        (1000.0, 1200.0, 0.0, 30.0)
    assert (c.trade_count_before, c.trade_count_after, c.late_trades) == (1, 3, 2)
    assert by_window(reconciler.reconcile(date(2026, 3, 2)))["09:00"].matches

    # Backfilling again (from the page) changes nothing; nor does the stream moving on (09:00 is final).
    again = call(client, [f"{ids.RECONCILE_RESULT}.data", f"{ids.RECONCILE_MESSAGE}.children"],
                 {f"{ids.BACKFILL_APPLY}.n_clicks": 1, f"{ids.RECONCILE_CHECK}.n_clicks": 1},
                 {f"{ids.BACKFILL_CHOICE}.value": [options[0]["value"]], f"{ids.SNAPSHOT}.data": snapshot})
    assert "Already matching silver: 09:00." in again[ids.RECONCILE_MESSAGE]["children"]
    stream.add(trade("t5", "BUY", 1, 5.0, DAY + "10:40:00Z"))
    stream.process()
    corrections = stream.table(CORRECTIONS)
    assert (corrections["query_id"] == BACKFILL_QUERY_ID).sum() == 1
    row = by_window(stream.table(GOLD))["09:00"]
    assert (row.buy_amount, row.sell_amount, row.trade_count) == (1200.0, 30.0, 3)
    late = stream.table(LATE_TRADES).set_index("trade_id")
    assert late.loc["late-buy", "backfilled_at"] is not pd.NaT and pd.isna(late.loc["late-open", "backfilled_at"])

    # One more too-late trade for 09:00: the difference is that trade alone.
    stream.add(trade("late-again", "SELL", 1, 7.0, DAY + "09:01:00Z"))
    stream.process()
    nine = by_window(reconciler.reconcile(date(2026, 3, 2)))["09:00"]
    assert (nine.diff_sell_amount, nine.diff_trade_count, nine.late_trades) == (7.0, 1, 1)
    assert nine.explained and not nine.matches
