"""A valid time far in the future (past pandas' nanosecond range, which ends in 2262) is a
trade like any other: no micro-batch fails on it, so it can never become a poison pill that
fails the queries again after every restart."""

from streaming.lake.tables import GOLD, LATE_TRADES, SILVER
from tests.support.corpus import DAY, trade


def test_a_trade_dated_2999_is_counted_and_the_queries_keep_running(stream):
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
