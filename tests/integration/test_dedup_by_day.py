"""Exact dedup at any age, with the driver holding only the days in play: a duplicate carries its
trade's event time, so its day is read from silver when it comes (after the day was let go, and
after a restart), and it is dropped as a duplicate of a day's trade always is."""

from datetime import timedelta

from deltalake import DeltaTable

from streaming.jobs.pipeline import MEDALLION_QUERY
from streaming.lake.store import Lake
from streaming.lake.tables import GOLD, LATE_TRADES, SILVER
from streaming.sink.seen_ids import DAYS_HELD
from tests.support.corpus import trade
from tests.support.harness import StreamTest


def test_a_duplicate_of_a_20_day_old_trade_is_dropped_after_its_day_was_let_go_and_after_a_restart(
        spark, settings, writer):
    old = trade("old-1", "BUY", 2, 10.0, "2026-02-10T09:05:00Z")
    later_days = [f"2026-03-0{day}T09:05:00Z" for day in range(1, DAYS_HELD + 2)]
    with StreamTest(spark, settings.replace(max_event_time_jump=timedelta(days=40)), writer) as stream:
        stream.add(old)
        stream.process()
        for number, event_time in enumerate(later_days):  # days in play after it: its day is let go
            stream.add(trade(f"new-{number}", "SELL", 1, 1.0, event_time))
            stream.process()
        ids = stream.pipeline.sinks[MEDALLION_QUERY].trade_ids
        assert len(ids._days) == DAYS_HELD and ids.ids_held == DAYS_HELD

        stream.add({**old, "channel": "mobile"})  # the redelivery, twenty days on
        stream.process()
        stream.restart()  # a new sink: it reads no day of silver until a trade of that day comes
        stream.add({**old, "channel": "phone"})
        stream.process()
        assert stream.pipeline.sinks[MEDALLION_QUERY].trade_ids.days_read == 1

        silver = stream.check_table(SILVER, rows=1 + len(later_days))
        assert silver.set_index("trade_id").loc["old-1", "channel"] == "web"  # the first copy wins
        gold = stream.table(GOLD)
        assert (gold["trade_count"].sum(), gold["buy_amount"].sum()) == (1 + len(later_days), 20.0)
        stream.check_table(LATE_TRADES, rows=0)  # a duplicate of a counted trade is not too late


def test_duplicates_on_both_sides_of_midnight_are_dropped_after_a_compaction_and_a_restart(spark, settings, writer):
    before = trade("eve-1", "BUY", 1, 10.0, "2026-03-02T23:59:59.999Z")
    after = trade("morn-1", "SELL", 1, 4.0, "2026-03-03T00:00:00.000Z")
    with StreamTest(spark, settings, writer) as stream:
        stream.add(before, after)
        stream.process()
        stream.add({**before, "channel": "mobile"}, {**after, "channel": "mobile"})  # held in the index
        stream.process()
        stream.stop()
        DeltaTable(Lake(settings.data_dir).location(SILVER)).optimize.compact()  # silver's files rewritten
        stream.restart()
        stream.add({**after, "channel": "phone"}, {**before, "channel": "phone"})  # read from silver again
        stream.process()
        silver = stream.check_table(SILVER, rows=2)
        assert set(silver["channel"]) == {"web"}  # the first copies
        gold = stream.table(GOLD)
        assert (gold["trade_count"].sum(), gold["buy_amount"].sum(), gold["sell_amount"].sum()) == (2, 10.0, 4.0)
        assert stream.pipeline.sinks[MEDALLION_QUERY].trade_ids.days_read == 2  # each side's day
