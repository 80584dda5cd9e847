"""Bronze, silver and quarantine through the real pipeline: every record once, bad input kept
with a reason, gold exact beside it."""

import json

import pytest
from deltalake import DeltaTable

from streaming.config import Settings
from streaming.lake.tables import BRONZE, GOLD, QUARANTINE, SILVER
from tests.conftest import run_once, trade
from tests.test_silver_parse import BAD

DAY = "2026-03-02T"


def table(settings, name):
    return DeltaTable(str((settings.data_dir / name))).to_pandas()


@pytest.fixture
def settings(broker, topic, tmp_path):
    return Settings(data_dir=tmp_path / "data", bootstrap_servers=broker.bootstrap_servers, topic=topic)


def raw(value):
    return value if isinstance(value, bytes) or value is None else json.dumps(value).encode()


def test_bad_records_are_quarantined_with_reasons_while_good_ones_flow_and_gold_stays_exact(
        spark, writer, settings):
    good = [trade("g1", "BUY", 2, 10.0, DAY + "09:01:00Z"), trade("g2", "SELL", 1, 5.0, DAY + "09:16:00Z")]
    corpus = sorted(BAD)
    writer.send(good[0], *[raw(BAD[kind][0]) or b"" for kind in corpus], good[1])
    writer.producer.produce(writer.topic, key=None, value=None)  # a tombstone: no value at all
    keyless = json.dumps(trade("k1", "BUY", 1000, 1000.0, DAY + "09:02:00Z")).encode()
    writer.producer.produce(writer.topic, key=None, value=keyless)
    writer.producer.flush(10)
    run_once(spark, settings)

    bronze = table(settings, BRONZE.name)
    quarantine = table(settings, QUARANTINE.name)
    silver = table(settings, SILVER.name)
    assert len(bronze) == len(corpus) + 4
    assert bronze[["partition", "offset"]].duplicated().sum() == 0
    assert sorted(silver["trade_id"]) == ["g1", "g2"]
    assert len(quarantine) == len(corpus) + 2
    assert "missing Kafka key" in quarantine[quarantine["value"] == keyless]["reason"].iloc[0]
    assert quarantine["reason"].str.len().min() > 0
    for kind in corpus:
        value, expected = BAD[kind]
        value = raw(value) or b""
        reasons = quarantine[quarantine["value"].apply(lambda v: (v or b"") == value)]["reason"]
        assert any(expected in r for r in reasons), (kind, list(reasons))
    gold = table(settings, GOLD.name).sort_values("window_start")
    assert list(gold["buy_amount"]) == [20.0, 0.0] and list(gold["sell_amount"]) == [0.0, 5.0]


def test_rerunning_the_same_offsets_with_a_fresh_checkpoint_adds_nothing(spark, writer, settings):
    writer.send(*[trade(f"r{i}", "BUY", 1, 1.0, DAY + f"09:{i:02d}:00Z") for i in range(30)])
    run_once(spark, settings)
    assert len(table(settings, BRONZE.name)) == 30
    run_once(spark, settings)  # restart on the checkpoint: nothing new
    assert len(table(settings, BRONZE.name)) == 30
    # rewind: a fresh checkpoint reads the same 30 offsets again
    (settings.checkpoint_dir).rename(settings.data_dir / "old-checkpoints")
    run_once(spark, settings)
    assert len(table(settings, BRONZE.name)) == 30
    assert len(table(settings, SILVER.name)) == 30


def test_a_trade_delivered_twice_is_one_silver_row_and_counted_once(spark, writer, settings):
    first = trade("d1", "BUY", 3, 10.0, DAY + "09:05:00Z", channel="mobile")
    writer.send(first, trade("x1", "SELL", 1, 1.0, DAY + "09:06:00Z"))
    run_once(spark, settings)
    writer.send({**first, "channel": "web"})  # the redelivery, in a later batch
    run_once(spark, settings)
    silver = table(settings, SILVER.name)
    assert len(silver[silver["trade_id"] == "d1"]) == 1
    assert silver.set_index("trade_id").loc["d1", "channel"] == "mobile"  # the first copy wins
    gold = table(settings, GOLD.name)
    assert list(gold["buy_amount"]) == [30.0] and list(gold["trade_count"]) == [2]
