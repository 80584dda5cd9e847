"""The pipeline's parse (silver.parse_records, Arrow): typed trades, a reason for each bad
record, and the fast check agreeing with the rule-by-rule one."""

import json
import random

import pyarrow as pa
import pytest

from streaming.medallion.silver import arrow as silver
from tests.support.corpus import BAD, EDGE, GOOD, raw

UTC = pa.timestamp("us", tz="UTC")


def parse(*values, key=b"ACC-1"):
    n = len(values)
    return silver.parse_records(pa.table({
        "key": pa.array([key] * n, pa.binary()), "value": pa.array([raw(v) for v in values], pa.binary()),
        "topic": ["trades"] * n, "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([None] * n, UTC)})).to_pylist()


def test_a_valid_trade_is_typed_and_gets_its_amount():
    row = parse(GOOD)[0]
    assert row["reason"] is None
    assert (row["trade_id"], row["side"], row["quantity"], row["price"]) == ("t-1", "BUY", 10, 101.25)
    assert row["amount"] == pytest.approx(1012.5)
    assert row["event_time"].isoformat() == "2026-03-02T09:32:00+00:00"


def test_event_time_offsets_are_converted_to_utc():
    row = parse({**GOOD, "event_time": "2026-03-02T10:32:00.250+01:00"})[0]
    assert row["reason"] is None and row["event_time"].isoformat() == "2026-03-02T09:32:00.250000+00:00"


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_records_get_a_readable_reason(kind):
    value, expected = BAD[kind]
    row = parse(value)[0]
    assert row["reason"] is not None and expected in row["reason"], row["reason"]


def test_a_trade_without_a_kafka_key_is_rejected():
    assert parse(GOOD, key=None)[0]["reason"] == "missing Kafka key (the account_id)"


def test_every_record_keeps_its_place_and_its_raw_value():
    rows = parse(GOOD, b"junk", {**GOOD, "trade_id": "t-2"})
    assert [(r["offset"], r["value"], r["reason"] is None) for r in rows] == \
        [(0, raw(GOOD), True), (1, b"junk", False), (2, raw({**GOOD, "trade_id": "t-2"}), True)]


@pytest.mark.parametrize("name", sorted(EDGE) + ["good"])
def test_the_fast_check_accepts_only_what_the_rule_by_rule_check_accepts_with_the_same_fields(name):
    value = raw(EDGE.get(name, GOOD))
    fast = silver._plain_trade(value)
    if fast is not None:
        micros = silver.event_micros(fast[7])
        assert micros is None or (*fast[:7], micros, None) == silver.checked_trade(value, True)


USUAL_FORM_EDGES = ["2026-03-02T09:32:00.123Z", "2024-02-29T23:59:59.999Z", "2026-02-29T00:00:00.000Z",
                    "1900-02-29T00:00:00.000Z", "2000-02-29T12:00:00.000Z", "2026-03-02T24:00:00.000Z",
                    "2026-13-01T00:00:00.000Z", "2026-00-10T00:00:00.000Z", "2026-04-31T00:00:00.000Z",
                    "2026-04-00T00:00:00.000Z", "2026-03-02T09:60:00.000Z", "2026-03-02T09:32:60.000Z",
                    "0000-01-01T00:00:00.000Z", "1969-12-31T23:59:59.999Z", "2026-03-02 09:32:00.123Z",
                    "2026-03-02T09:32:00.123z", "2026-03-02T09:32:0a.123Z", "2026-03-02T09:32:00,123Z",
                    "2026-03-02T09:32:00Z", "2026-03-02T09:32:00.123+01:00", "２026-03-02T09:32:00.12Z", "", None]


def test_the_usual_form_read_all_at_once_agrees_with_event_micros():
    rng = random.Random(3)
    fuzz = ["".join(rng.choice("0123456789") if c.isdigit() and rng.random() < 0.3 else c
                    for c in "2026-02-28T23:59:59.999Z") for _ in range(2_000)]
    texts = USUAL_FORM_EDGES + fuzz
    fast = silver.usual_event_micros(pa.array(texts, pa.string())).to_pylist()
    for text, micros in zip(texts, fast):
        if micros is not None:  # what it reads, it reads as event_micros does
            assert micros == silver.event_micros(text), text
        elif text is not None and len(text.encode()) == 24 and text[10] == "T" and text[19] == "." \
                and text[23] == "Z":  # what it leaves, event_micros rejects too
            assert silver.event_micros(text) is None, text
    assert fast[:2] == [silver.event_micros(t) for t in USUAL_FORM_EDGES[:2]]


@pytest.mark.parametrize("text, expected", [
    ("2026-03-02T09:32:00Z", "2026-03-02T09:32:00+00:00"),
    ("2026-03-02 09:32:00.5-05:30", "2026-03-02T15:02:00.500000+00:00"),
    ("2024-02-29T23:59:59.123456789+0100", "2024-02-29T22:59:59.123456+00:00"),
    ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999000+00:00"),
])
def test_event_times_count_microseconds_from_the_epoch_in_utc(text, expected):
    micros = silver.event_micros(text)
    assert pa.scalar(micros, pa.int64()).cast(UTC).as_py().isoformat() == expected


@pytest.mark.parametrize("text", ["2026-02-29T00:00:00Z", "2026-03-02T24:00:00Z", "2026-03-02T09:32Z",
                                  "2026-03-02T09:32:00z", "2026-03-02T09:32:00+19:00", "2026-13-01T00:00:00Z"])
def test_impossible_times_have_no_value(text):
    assert silver.event_micros(text) is None


def test_json_numbers_in_reasons_read_as_spark_writes_them():
    value = json.dumps({**GOOD, "price": 2e9}).encode()
    assert parse(value)[0]["reason"] == "price 2.0E9 is over the limit of 1000000000"
