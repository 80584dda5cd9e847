"""Bronze: every Kafka record exactly as received, once per (topic, partition, offset)."""

from __future__ import annotations

import pyarrow as pa

BRONZE_TABLE = "bronze/trades_raw"
BRONZE_KEYS = ("topic", "partition", "offset")
UTC_TIME = pa.timestamp("us", tz="UTC")
BRONZE_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", UTC_TIME), ("ingested_at", UTC_TIME),
])


def bronze_rows(parsed: pa.Table) -> pa.Table:
    """A parsed micro-batch (silver.parse_trades + ingested_at) -> bronze rows, raw bytes kept."""
    return pa.table({
        "key": parsed["key"], "value": parsed["value"], "topic": parsed["topic"],
        "partition": parsed["partition"], "offset": parsed["offset"],
        "timestamp": parsed["kafka_timestamp"], "ingested_at": parsed["ingested_at"],
    }).cast(BRONZE_SCHEMA)
