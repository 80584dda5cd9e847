"""How a replay's part from bronze is cut and said (streaming/jobs/bronze_replay.py)."""

from datetime import datetime, timezone

import pyarrow as pa

from streaming.jobs.bronze_replay import ReplayPlan, as_kafka_records, chunks, said_where_from
from streaming.lake.tables import BRONZE

SINCE = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def test_chunks_move_every_partition_on_by_its_share_until_each_reaches_the_brokers_start():
    plan = ReplayPlan(SINCE, {("t", 0): (0, 10), ("t", 1): (5, 8)}, {("t", 0): 10, ("t", 1): 8, ("t", 2): 3})
    cut = [list(zip(c["partition"].to_pylist(), c["start_offset"].to_pylist(), c["end_offset"].to_pylist()))
           for c in chunks(plan, records_per_chunk=8)]
    assert cut == [[(0, 0, 4), (1, 5, 8)], [(0, 4, 8)], [(0, 8, 10)]]
    assert plan.bronze_records == 13


def test_bronze_rows_become_records_in_the_shape_sparks_kafka_source_gives():
    row = {"key": b"k", "value": b"{}", "topic": "t", "partition": 1, "offset": 7, "timestamp": SINCE,
           "ingested_at": SINCE}
    records = as_kafka_records(pa.Table.from_pylist([row], BRONZE.schema))
    assert records.column_names[-1] == "timestampType" and records.to_pylist()[0]["offset"] == 7


def test_the_log_says_where_each_part_comes_from():
    plan = ReplayPlan(SINCE, {("t", 0): (1_200, 90_412)}, {("t", 0): 90_412, ("t", 1): 17})
    said = said_where_from(plan)
    assert "bronze gives t/0 offsets 1,200 to 90,411" in said and "then Kafka from offsets t/0 90,412, t/1 17" in said
    assert "reading it all from Kafka" in said_where_from(None)
