"""Parsing and validation of the trade JSON (silver.parse_trades), on small static batches."""

import json

import pytest

from streaming.medallion.silver import dataframe as silver
from tests.support.corpus import BAD, GOOD

KAFKA_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def records(spark, *values):
    rows = [(b"ACC-1", v if isinstance(v, (bytes, type(None))) else json.dumps(v).encode(), "trades", 0, i, None)
            for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_COLUMNS)


def parse_one(spark, value):
    return silver.parse_trades(records(spark, value)).collect()[0]


def test_a_valid_trade_is_typed_and_gets_its_amount(spark):
    row = parse_one(spark, GOOD)
    assert row.reason is None and row.valid is True
    assert (row.trade_id, row.side, row.quantity, row.price) == ("t-1", "BUY", 10, 101.25)
    assert row.amount == pytest.approx(1012.5)
    assert row.event_time.isoformat() == "2026-03-02T09:32:00"  # UTC session time zone


def test_event_time_offsets_are_converted_to_utc(spark):
    row = parse_one(spark, {**GOOD, "event_time": "2026-03-02T10:32:00+01:00"})
    assert row.reason is None and row.event_time.isoformat() == "2026-03-02T09:32:00"


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_records_get_a_readable_reason(spark, kind):
    value, expected = BAD[kind]
    row = parse_one(spark, value)
    assert row.reason is not None and expected in row.reason, row.reason
    assert row.valid is False  # the predicate gold filters on agrees with the reason


def test_a_trade_without_a_kafka_key_is_rejected(spark):
    df = spark.createDataFrame([(None, json.dumps(GOOD).encode(), "trades", 0, 0, None)], KAFKA_COLUMNS)
    row = silver.parse_trades(df).collect()[0]
    assert row.reason == "missing Kafka key (the account_id)" and row.valid is False


def test_valid_and_rejected_split_keeps_every_record(spark):
    parsed = silver.parse_trades(records(spark, GOOD, b"junk", {**GOOD, "trade_id": "t-2"}))
    assert [r.trade_id for r in silver.valid_trades(parsed).collect()] == ["t-1", "t-2"]
    rejected = silver.rejected_records(parsed).collect()
    assert [(r.offset, r.value) for r in rejected] == [(1, b"junk")]


def test_gold_parse_without_the_reason_keeps_the_same_trades(spark):
    batch = records(spark, GOOD, b"junk", {**GOOD, "trade_id": "t-2", "price": -1}, {**GOOD, "trade_id": "t-3"})
    lean = silver.parse_trades(batch, with_reason=False)
    assert "reason" not in lean.columns
    assert [r.valid for r in lean.orderBy("offset").collect()] == \
        [r.valid for r in silver.parse_trades(batch).orderBy("offset").collect()] == [True, False, False, True]
    assert [r.trade_id for r in silver.valid_trades(lean).collect()] == ["t-1", "t-3"]
