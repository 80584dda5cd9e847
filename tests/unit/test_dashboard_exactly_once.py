"""The exactly-once panel: per partition, the offset gold's ledger has read up to against what
bronze, silver and quarantine hold below it, all at one point, and gold's trade count against
silver's on-time trades; through Dash's own callback endpoint, from fixture tables."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from dashboard import ids
from dashboard.client import call
from dashboard.dash_app import create_app
from dashboard.data import exactly_once_evidence, partition_evidence
from dashboard.panels.exactly_once import counted_when
from streaming.lake import tables
from streaming.lake.store import Batch, Lake
from tests.unit.test_dashboard_quarantine import texts

UTC = timezone.utc
AT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)


def lake_with_a_batch(data_dir) -> Lake:
    """Partition 0: offsets 0-5; offsets 0-3 are trades t0-t3, 4 is t0 again (a redelivery), 5 is
    not JSON. t3 was too late. Gold counts t0-t2. Then the next batch, written to bronze and silver
    but not yet to gold and its ledger: partition 0's offset 6 (t6) and partition 1's offset 0 (t9)."""
    lake, batch = Lake(data_dir), Batch("fixture", 0)
    lake.ensure_all()
    records = [("trades", 0, o) for o in range(7)] + [("trades", 1, 0)]
    lake.publish(tables.BRONZE, pa.Table.from_pylist([
        {"key": b"a", "value": b"{}", "topic": t, "partition": p, "offset": o, "timestamp": AT, "ingested_at": AT}
        for t, p, o in records], schema=tables.BRONZE.schema), batch)
    trades = [("t0", 0, 0), ("t1", 0, 1), ("t2", 0, 2), ("t3", 0, 3), ("t6", 0, 6), ("t9", 1, 0)]
    lake.publish(tables.SILVER, pa.Table.from_pylist([
        {"trade_id": tid, "account_id": "a", "symbol": "S", "side": "BUY", "quantity": 1, "price": 1.0, "amount": 1.0,
         "channel": "web", "event_time": AT, "topic": "trades", "partition": p, "offset": o, "kafka_timestamp": AT,
         "ingested_at": AT} for tid, p, o in trades], schema=tables.SILVER.schema), batch)
    lake.publish(tables.QUARANTINE, pa.Table.from_pylist([
        {"key": b"a", "value": b"{", "topic": "trades", "partition": 0, "offset": 5, "kafka_timestamp": AT,
         "reason": "value is not a JSON object", "ingested_at": AT}], schema=tables.QUARANTINE.schema), batch)
    lake.publish(tables.LATE_TRADES, pa.Table.from_pylist([
        {"trade_id": "t3", "event_time": AT, "window_start": AT, "window_end": AT + timedelta(minutes=15),
         "watermark": AT, "late_by_seconds": 0.0, "side": "BUY", "amount": 1.0, "topic": "trades", "partition": 0,
         "offset": 3, "detected_at": AT, "backfilled_at": None}], schema=tables.LATE_TRADES.schema), batch)
    lake.publish(tables.GOLD, pa.Table.from_pylist([
        {"window_start": AT.replace(minute=0), "window_end": AT.replace(minute=15), "buy_amount": 3.0,
         "sell_amount": 0.0, "settlement_amount": 3.0, "trade_count": 3, "revision": 1, "updated_at": AT,
         "batch_id": 0}], schema=tables.GOLD.schema), batch)
    lake.publish(tables.BATCH_WATERMARKS, pa.Table.from_pylist([
        {"query_id": "fixture", "batch_id": 0, "topic": "trades", "partition": 0, "start_offset": 0, "end_offset": 6,
         "watermark": AT}], schema=tables.BATCH_WATERMARKS.schema), batch)
    return lake


def test_every_table_is_counted_up_to_the_offsets_the_ledger_recorded_and_no_further(tmp_path):
    evidence = exactly_once_evidence(lake_with_a_batch(tmp_path), ["trades:0", "trades:1", "trades:2"])
    by = {p["partition"]: p for p in evidence["partitions"]}
    # Bronze and silver already hold the next batch (offset 6): it is not in this count, so no
    # row shows more in bronze than the offsets read up to.
    assert by["trades:0"] == {"partition": "trades:0", "counted_to": 6, "bronze": 6, "bronze_doubled": 0,
                              "offsets_reused": 0, "not_in_bronze": 0, "silver": 4, "quarantine": 1,
                              "redeliveries": 1}
    assert (by["trades:1"]["counted_to"], by["trades:1"]["bronze"], by["trades:1"]["silver"]) == (None, 0, 0)
    assert by["trades:2"]["bronze"] == 0
    assert (evidence["gold_trades"], evidence["silver_on_time"], evidence["silver_doubled"]) == (3, 3, 0)


def test_each_rows_figures_add_up_to_the_offset_read_up_to():
    # 10 offsets read; 0-1 removed by Kafka before they were read; 8-9 given out again by a
    # broker that lost its tail; offset 5's record written twice (never: shown).
    row = partition_evidence("trades:0", 10, {"records": 11, "distinct_records": 10, "offsets": 8}, 7, 1)
    assert (row["not_in_bronze"], row["offsets_reused"], row["bronze_doubled"], row["redeliveries"]) == (2, 2, 1, 3)
    assert row["counted_to"] == 8 + row["not_in_bronze"]
    assert row["bronze"] == 8 + row["offsets_reused"] + row["bronze_doubled"]
    assert partition_evidence("trades:1", None, None, 0, 0)["bronze"] == 0  # nothing read yet


def test_the_panel_counts_on_demand_says_when_and_whether_gold_matches(tmp_path):
    lake_with_a_batch(tmp_path)
    status = {"kafka": {"partitions": [{"partition": "trades:0", "end_offset": 6, "lag": {}}]}}
    client = create_app(tmp_path, health=lambda: status).server.test_client()
    answer = call(client, [f"{ids.EXACTLY_ONCE_TABLE}.children", f"{ids.EXACTLY_ONCE_MESSAGE}.children"],
                  {f"{ids.EXACTLY_ONCE_CHECK}.n_clicks": 1})
    shown = texts(answer[ids.EXACTLY_ONCE_TABLE]["children"])
    assert "trades:0" in shown and "Redeliveries dropped" in shown and "Read up to offset" in shown
    assert any(t.startswith("Figures at ") and "ledger had recorded" in t for t in shown)
    assert any("Gold counts 3 trades" in t and ": equal." in t for t in shown)
    assert answer[ids.EXACTLY_ONCE_MESSAGE]["children"].startswith("Counted at ")


def test_the_point_counted_at_is_said_in_utc():
    assert counted_when({"at": datetime(2026, 3, 2, 10, 31, 5, tzinfo=UTC)}).startswith("Figures at 10:31:05 UTC")
