"""A trade dated far in the future is a clock error, not the market: it is quarantined with its
reason instead of moving the watermark (which would make every real trade after it too late).
And a valid time past pandas' nanosecond range (which ends in 2262) never fails a micro-batch, so
it can never become a poison pill that fails the query again after every restart."""

import dataclasses
from datetime import timedelta

import pytest

from streaming.lake.tables import BATCH_WATERMARKS, GOLD, LATE_TRADES, QUARANTINE, SILVER
from tests.support.corpus import DAY, trade
from tests.support.harness import StreamTest


@pytest.mark.parametrize("far", ["2999-01-01T00:00:00Z", "2200-01-01T00:00:00Z"])
def test_a_trade_far_ahead_is_quarantined_and_the_watermark_stays_with_the_real_trades(stream, far):
    stream.add(trade("now", "BUY", 1, 10.0, DAY + "09:01:00Z"))
    stream.process()
    stream.add(trade("far", "SELL", 2, 5.0, far))
    stream.process()
    stream.add(trade("after", "BUY", 3, 1.0, DAY + "09:02:00Z"))
    stream.process()
    stream.check_table(SILVER, trade_id=["now", "after"])
    bad = stream.check_table(QUARANTINE, rows=1)
    assert far[:4] in bad["reason"][0] and "--max-event-time-jump" in bad["reason"][0]
    stream.check_table(LATE_TRADES, rows=0)
    stream.check_gold({"09:00": (13.0, 0.0, 2)})
    assert stream.table(BATCH_WATERMARKS)["watermark"].max().isoformat() == "2026-03-02T08:31:00+00:00"
    stream.restart(forget_last_commit=True)  # the last batch again, judged the same way
    stream.add(trade("later", "SELL", 1, 4.0, DAY + "09:03:00Z"))
    stream.process()
    stream.check_table(QUARANTINE, rows=1)
    stream.check_gold({"09:00": (13.0, 4.0, 3)})


def test_the_first_trade_on_an_empty_topic_is_judged_against_its_kafka_timestamp(stream):
    stream.add(trade("far", "SELL", 2, 5.0, "2200-01-01T00:00:00Z"), trade("now", "BUY", 1, 10.0, DAY + "09:01:00Z"))
    stream.process()
    stream.check_table(SILVER, trade_id=["now"])
    stream.check_table(QUARANTINE, rows=1)
    stream.check_gold({"09:00": (10.0, 0.0, 1)})


def test_with_a_wide_max_event_time_jump_a_trade_dated_2999_is_counted_and_no_batch_fails(spark, settings, writer):
    wide = dataclasses.replace(settings, max_event_time_jump=timedelta(days=999_999))
    with StreamTest(spark, wide, writer) as stream:
        stream.add(trade("now", "BUY", 1, 10.0, DAY + "09:01:00Z"),
                   trade("far", "SELL", 2, 5.0, "2999-01-01T00:00:00Z"))
        stream.process()
        stream.add(trade("after", "BUY", 3, 1.0, DAY + "09:02:00Z"))  # far behind the watermark now
        stream.process()
        assert all(query.isActive for query in stream.pipeline.queries)
        gold = stream.table(GOLD)
        far = gold[gold["window_start"].dt.year == 2999]
        assert list(far["sell_amount"]) == [10.0] and list(far["trade_count"]) == [1]
        stream.check_table(SILVER, trade_id=["now", "far", "after"])
        stream.check_table(LATE_TRADES, trade_id=["after"])
        stream.restart(forget_last_commit=True)
        stream.process()
        assert all(query.isActive for query in stream.pipeline.queries)
