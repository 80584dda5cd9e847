"""The two formulations of the parse agree: Spark's (silver.parse_trades) and Arrow's
(silver.parse_records, what the pipeline's tasks run), on every corpus value: the same reason for
a bad record, the same typed trade for a good one."""

import pyarrow as pa

from streaming.medallion.silver.arrow import parse_records
from streaming.medallion.silver.dataframe import parse_trades
from tests.support.corpus import BAD, EDGE, GOOD, raw

KAFKA_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
COMPARED = ["trade_id", "account_id", "symbol", "side", "quantity", "price", "channel", "event_time", "reason"]


def test_spark_and_arrow_parse_every_record_alike(spark):
    cases = {**{f"bad: {kind}": value for kind, (value, _) in BAD.items()}, **EDGE, "good": GOOD}
    rows = [(b"ACC-1", raw(value), "trades", 0, i, None) for i, value in enumerate(cases.values())]
    rows += [(None, raw(GOOD), "trades", 0, len(rows), None), (b"", raw(GOOD), "trades", 0, len(rows) + 1, None)]
    names = [*cases, "no key", "empty key"]

    by_spark = parse_trades(spark.createDataFrame(rows, KAFKA_COLUMNS)).orderBy("offset").toArrow()
    records = pa.table({"key": [r[0] for r in rows], "value": [r[1] for r in rows], "topic": ["trades"] * len(rows),
                        "partition": pa.array([0] * len(rows), pa.int32()), "offset": list(range(len(rows))),
                        "timestamp": pa.array([None] * len(rows), pa.timestamp("us", tz="UTC"))})
    by_arrow = parse_records(records)

    def answer(parsed, i):
        values = {c: (parsed[c].cast(pa.int64()) if c == "event_time" else parsed[c])[i].as_py() for c in COMPARED}
        # A bad record's typed fields go nowhere (quarantine keeps the raw value): the reason is the answer.
        return values["reason"] if values["reason"] is not None else values

    differ = {name: (answer(by_spark, i), answer(by_arrow, i)) for i, name in enumerate(names)
              if answer(by_spark, i) != answer(by_arrow, i)}
    assert not differ, differ
    assert sum(r is None for r in by_arrow["reason"].to_pylist()) > 20  # the edges hold valid trades too
