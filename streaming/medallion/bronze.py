"""Bronze: every Kafka record exactly as received, once per (topic, partition, offset)."""

from __future__ import annotations

import pyarrow as pa

from streaming.lake.tables import BRONZE


def bronze_rows(parsed: pa.Table) -> pa.Table:
    """A parsed micro-batch (silver.arrow.parse_records + ingested_at) -> bronze rows, raw bytes kept."""
    return pa.table({
        "key": parsed["key"], "value": parsed["value"], "topic": parsed["topic"],
        "partition": parsed["partition"], "offset": parsed["offset"],
        "timestamp": parsed["kafka_timestamp"], "ingested_at": parsed["ingested_at"],
    }).cast(BRONZE.schema)
