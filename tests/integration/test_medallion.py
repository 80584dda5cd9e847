"""Bronze, silver and quarantine through the real pipeline, as scripts: every record once, bad
input kept with a reason, gold exact beside it."""

import json

from streaming.lake.tables import BRONZE, QUARANTINE, SILVER
from tests.support.corpus import BAD, DAY, raw, trade


def test_bad_records_are_quarantined_with_reasons_while_good_ones_flow_and_gold_stays_exact(stream, writer):
    corpus = sorted(BAD)
    stream.add(trade("g1", "BUY", 2, 10.0, DAY + "09:01:00Z"),
               *[raw(BAD[kind][0]) or b"" for kind in corpus],
               trade("g2", "SELL", 1, 5.0, DAY + "09:16:00Z"))
    writer.send_raw(key=None, value=None)  # a tombstone: no value at all
    keyless = json.dumps(trade("k1", "BUY", 1000, 1000.0, DAY + "09:02:00Z")).encode()
    writer.send_raw(key=None, value=keyless)
    stream.process()

    stream.check_table(BRONZE, rows=len(corpus) + 4)  # each (partition, offset) once
    stream.check_table(SILVER, trade_id=["g1", "g2"])
    quarantine = stream.check_table(QUARANTINE, rows=len(corpus) + 2)
    assert "missing Kafka key" in quarantine[quarantine["value"] == keyless]["reason"].iloc[0]
    assert quarantine["reason"].str.len().min() > 0
    for kind in corpus:
        value, expected = BAD[kind]
        value = raw(value) or b""
        reasons = quarantine[quarantine["value"].apply(lambda v: (v or b"") == value)]["reason"]
        assert any(expected in r for r in reasons), (kind, list(reasons))
    stream.check_gold({"09:00": (20.0, 0.0, 1), "09:15": (0.0, 5.0, 1)})


def test_rerunning_the_same_offsets_with_a_fresh_checkpoint_adds_nothing(stream, settings):
    stream.add(*[trade(f"r{i}", "BUY", 1, 1.0, DAY + f"09:{i:02d}:00Z") for i in range(30)])
    stream.process()
    stream.check_table(BRONZE, rows=30)
    stream.restart()  # on the checkpoint: nothing new
    stream.process()
    stream.check_table(BRONZE, rows=30)
    # Rewind: a fresh checkpoint reads the same 30 offsets again.
    stream.stop()
    settings.checkpoint_dir.rename(settings.data_dir / "old-checkpoints")
    stream.process()
    stream.check_table(BRONZE, rows=30)
    stream.check_table(SILVER, rows=30)


def test_a_trade_delivered_twice_is_one_silver_row_and_counted_once(stream):
    first = trade("d1", "BUY", 3, 10.0, DAY + "09:05:00Z", channel="mobile")
    stream.add(first, trade("x1", "SELL", 1, 1.0, DAY + "09:06:00Z"))
    stream.process()
    stream.stop()
    stream.add({**first, "channel": "web"})  # the redelivery, in a later batch of a later run
    stream.process()
    silver = stream.check_table(SILVER, trade_id=["d1", "x1"])
    assert silver.set_index("trade_id").loc["d1", "channel"] == "mobile"  # the first copy wins
    stream.check_gold({"09:00": (30.0, 1.0, 2)})


def test_a_trade_on_both_sides_of_where_a_big_batch_is_cut_is_one_silver_row(stream):
    # One key, so one partition: a batch this size is cut in two for two tasks (reader.even_shares).
    first = trade("d2", "BUY", 3, 10.0, DAY + "09:05:00Z")
    stream.add(first, *[trade(f"c{i}", "SELL", 1, 1.0, DAY + "09:20:00Z") for i in range(45_000)], first)
    stream.process()
    stream.check_table(BRONZE, rows=45_002)
    stream.check_table(SILVER, rows=45_001)
    stream.check_gold({"09:00": (30.0, 0.0, 1), "09:15": (0.0, 45_000.0, 45_000)})
