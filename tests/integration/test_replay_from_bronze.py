"""--replay-from a time the broker no longer reaches back to: bronze gives the records Kafka has
lost (here to a delete-records call, which moves each partition's start as retention does), then
Kafka the rest, with the results of a replay that Kafka alone could serve."""

import logging
import time
from datetime import datetime, timezone

from deltalake import DeltaTable

from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, BRONZE, GOLD, LATE_TRADES, QUARANTINE, SILVER
from tests.integration.test_retention_losses import remove_all_but_last
from tests.support.corpus import DAY, trade

SILVER_RECORD = ["trade_id", "event_time", "amount", "topic", "partition", "offset"]


def results(stream) -> dict:
    """What a replay must give again: silver's rows (less their ingestion time), gold, the too-late
    trades and quarantine's records."""
    silver = stream.check_table(SILVER)[SILVER_RECORD].sort_values(["partition", "offset"])
    return {"silver": silver.to_dict("records"), "gold": stream.gold(),
            "too_late": sorted(stream.check_table(LATE_TRADES)["trade_id"]),
            "quarantine": sorted(stream.check_table(QUARANTINE)["offset"])}


def lose_gold(stream) -> None:
    """Every gold row deleted: what a replay is for (a fix, a table lost) is rebuilding it."""
    DeltaTable(Lake(stream.settings.data_dir).location(GOLD)).delete()
    assert stream.gold() == {}


def test_a_replay_from_before_the_brokers_earliest_record_reads_bronze_then_kafka_with_the_same_results(
        stream, broker, topic, caplog):
    time.sleep(0.2)
    since = datetime.now(timezone.utc)
    time.sleep(0.2)
    accounts = [f"ACC-{i}" for i in range(6)]  # spread over every partition
    stream.add(*[trade(f"a{i}", "BUY", 1, 10.0 + i, DAY + f"09:{i:02d}:00Z", account_id=accounts[i % 6])
                 for i in range(12)], b"{not json")
    stream.add(*[trade(f"b{i}", "SELL", 2, 5.0, DAY + f"10:{30 + i:02d}:00Z", account_id=accounts[i % 6])
                 for i in range(6)])
    stream.process()
    stream.add(trade("late1", "SELL", 100, 1.0, DAY + "09:03:00Z", account_id="ACC-1"),  # too late
               trade("a0", "BUY", 1, 10.0, DAY + "09:00:00Z"),  # delivered again
               *[trade(f"c{i}", "BUY", 1, 3.0, DAY + f"10:{40 + i:02d}:00Z", account_id=accounts[i % 6])
                 for i in range(6)])
    stream.process()
    live = results(stream)
    stream.stop()
    lose_gold(stream)
    stream.restart(replay_from=since)
    stream.process()
    from_kafka = results(stream)
    assert from_kafka == live
    assert from_kafka["too_late"] == ["late1"] and len(from_kafka["silver"]) == 25
    bronze_rows = len(stream.check_table(BRONZE))

    removed = remove_all_but_last(broker.bootstrap_servers, topic, kept=2)
    assert sum(removed.values()) > 0
    stream.stop()
    lose_gold(stream)
    with caplog.at_level(logging.INFO, logger="streaming.jobs"):
        stream.restart(replay_from=since)
        stream.process()
    assert results(stream) == from_kafka
    stream.check_table(BRONZE, rows=bronze_rows)
    said = caplog.text
    assert "Kafka no longer holds the start of it, so bronze gives" in said and "then Kafka from offsets" in said
    assert f"replay from bronze: {sum(removed.values()):,} of" in said
    [status] = stream.pipeline.status()
    assert status.records_lost == 0 and status.data_loss is None
    assert stream.table(BATCH_WATERMARKS)["records_lost"].sum() == 0

    # Trades after the replay carry on from the watermark the replay reached.
    stream.add(trade("late2", "BUY", 1, 1.0, DAY + "09:05:00Z", account_id="ACC-2"),
               trade("d1", "BUY", 1, 1.0, DAY + "10:50:00Z", account_id="ACC-3"))
    stream.process()
    assert sorted(stream.check_table(LATE_TRADES)["trade_id"]) == ["late1", "late2"]
