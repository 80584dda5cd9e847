"""The gold query end to end, as scripts: real broker, real Spark, real Delta.

Each step adds trades, processes everything available, then checks gold/trade_summary exactly.
Window 15 minutes, watermark 30 minutes.
"""

from streaming.lake.tables import BATCH_WATERMARKS, CORRECTIONS, GOLD, LATE_TRADES, QUARANTINE, SILVER
from streaming.medallion.lateness import too_late_trades
from tests.support.corpus import DAY, trade
from tests.support.harness import StreamTest


def test_gold_is_exact_through_late_trades_too_late_trades_and_a_restart(stream):
    # Trades over several windows, edges included; one delivered twice; one not a trade at all.
    stream.add(
        trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"),
        trade("t2", "SELL", 5, 100.0, DAY + "09:14:59Z"),
        trade("t3", "BUY", 1, 50.0, DAY + "09:15:00Z"),
        trade("t4", "SELL", 2, 10.0, DAY + "09:31:00Z"),
        trade("t4", "SELL", 2, 10.0, DAY + "09:31:00Z"),
        b"not a trade",  # ignored, never stops the query
    )
    stream.process()
    stream.check_gold({"09:00": (1000.0, 500.0, 2), "09:15": (50.0, 0.0, 1), "09:30": (0.0, 20.0, 1)})
    stream.check_table(CORRECTIONS, rows=0)  # first reports are not corrections

    # A late trade inside the watermark (max 09:31 -> watermark 09:01) corrects 09:15.
    stream.add(trade("t5", "BUY", 3, 10.0, DAY + "09:20:00Z"))
    stream.process()
    stream.check_gold({"09:00": (1000.0, 500.0, 2), "09:15": (80.0, 0.0, 2), "09:30": (0.0, 20.0, 1)})
    c = stream.check_table(CORRECTIONS, rows=1).iloc[0]
    assert c.window_start.strftime("%H:%M") == "09:15"
    assert (c.buy_amount_before, c.buy_amount_after) == (50.0, 80.0)
    assert (c.sell_amount_before, c.sell_amount_after) == (0.0, 0.0)
    assert (c.settlement_amount_before, c.settlement_amount_after) == (50.0, 80.0)
    assert (c.trade_count_before, c.trade_count_after, c.late_trades) == (1, 2, 1)

    # Event time moves to 10:30 (watermark 10:00); then 09:05 is too late, 10:10 is not.
    # t1 is delivered again: behind the watermark, but its first copy was counted, so not too late.
    stream.add(trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"))
    stream.process()
    stream.add(trade("t7", "SELL", 100, 100.0, DAY + "09:05:00Z"),
               trade("t8", "SELL", 1, 7.0, DAY + "10:10:00Z"),
               trade("t1", "BUY", 10, 100.0, DAY + "09:00:00Z"))
    stream.process()
    stream.check_gold({
        "09:00": (1000.0, 500.0, 2),
        "09:15": (80.0, 0.0, 2),
        "09:30": (0.0, 20.0, 1),
        "10:00": (0.0, 7.0, 1),
        "10:30": (1.0, 0.0, 1),
    })
    # 10:00 was past (event time had reached 10:30) when t8 arrived: a correction from 0.
    corrections = stream.table(CORRECTIONS).sort_values("window_start")
    assert [w.strftime("%H:%M") for w in corrections["window_start"]] == ["09:15", "10:00"]
    assert tuple(corrections.iloc[1][["sell_amount_before", "sell_amount_after", "late_trades"]]) == (0.0, 7.0, 1)
    # The too-late trade is listed, with its window and the watermark it missed, and is nowhere in gold.
    lt = stream.check_table(LATE_TRADES, trade_id=["t7"]).iloc[0]
    assert lt.window_start.strftime("%H:%M") == "09:00" and lt.late_by_seconds == 55 * 60
    assert lt.watermark.isoformat() == "2026-03-02T10:00:00+00:00"
    # Exactly the trade left out is derivable as too late, with the watermark it missed.
    late = too_late_trades(stream.table(SILVER), stream.table(BATCH_WATERMARKS))
    assert list(late["trade_id"]) == ["t7"]
    assert late["watermark"].iloc[0].isoformat() == "2026-03-02T10:00:00+00:00"
    assert late["late_by"].iloc[0].total_seconds() == 55 * 60

    # Restart on the same checkpoints, forgetting the last commits so Spark replays those batches:
    # nothing is written twice, and a new trade adds to the restored 10:30 totals.
    corrections_before = len(stream.table(CORRECTIONS))
    stream.restart(forget_last_commit=True)
    stream.add(trade("t9", "BUY", 2, 1.0, DAY + "10:31:00Z"),
               trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"))  # redelivered after the restart
    stream.process()
    stream.check_gold({
        "09:00": (1000.0, 500.0, 2),
        "09:15": (80.0, 0.0, 2),
        "09:30": (0.0, 20.0, 1),
        "10:00": (0.0, 7.0, 1),
        "10:30": (3.0, 0.0, 2),
    })
    stream.check_table(CORRECTIONS, rows=corrections_before)
    stream.check_table(LATE_TRADES, trade_id=["t7"])
    assert stream.table(GOLD)["revision"].min() >= 1


def test_a_batch_judges_its_trades_by_the_watermark_of_the_batches_before_it(spark, writer, settings):
    # One record per micro-batch, back to back: batch 1 sees 10:30, so every later batch runs
    # with watermark 10:00, and 09:05 and 09:10 are too late; batch 1 itself ran with 08:30.
    with StreamTest(spark, settings.replace(max_offsets_per_trigger=1), writer) as stream:
        stream.add(trade("t1", "BUY", 1, 100.0, DAY + "09:00:00Z"),
                   trade("t6", "BUY", 1, 1.0, DAY + "10:30:00Z"),
                   trade("t7", "BUY", 1, 10.0, DAY + "09:05:00Z"),
                   trade("t8", "BUY", 1, 1000.0, DAY + "09:10:00Z"))
        stream.process()
    stream.check_gold({"09:00": (100.0, 0.0, 1), "10:30": (1.0, 0.0, 1)})
    late = stream.check_table(LATE_TRADES, trade_id=["t7", "t8"])
    assert {w.isoformat() for w in late["watermark"]} == {"2026-03-02T10:00:00+00:00"}


def test_a_conflicting_record_for_a_known_trade_id_is_quarantined_and_the_trade_counts_once_for_good(stream):
    # A record with a known trade_id but another event time is not a redelivery (semantics.md).
    stream.add(trade("c1", "BUY", 1, 10.0, DAY + "09:01:00Z"))
    stream.process()
    stream.add(trade("c1", "BUY", 1, 99.0, DAY + "09:02:00Z"),  # a later batch: silver had c1
               trade("c2", "SELL", 1, 5.0, DAY + "09:03:00Z"),
               trade("c2", "SELL", 1, 7.0, DAY + "09:04:00Z"))  # the same batch: the first copy wins
    stream.process()
    stream.add(trade("c1", "BUY", 1, 50.0, DAY + "10:02:00Z"))  # any time later, in another window
    stream.process()
    silver = stream.check_table(SILVER, trade_id=["c1", "c2"])
    assert sorted(silver["amount"]) == [5.0, 10.0]
    bad = stream.check_table(QUARANTINE, rows=3)
    assert all("the first copy wins" in reason for reason in bad["reason"])
    assert sum("trade_id c1 is already a trade with event_time 2026-03-02T09:01:00Z" in r for r in bad["reason"]) == 2
    stream.check_gold({"09:00": (10.0, 5.0, 2)})
    stream.restart(forget_last_commit=True)  # the last batch again, through the driver: the same outcome
    stream.process()
    stream.check_table(QUARANTINE, rows=3)
    stream.check_gold({"09:00": (10.0, 5.0, 2)})
