"""The exactly-once panel: per partition, Kafka's end offset against what bronze, silver and
quarantine hold, and gold's trade count against silver's on-time trades; through Dash's own
callback endpoint, from fixture tables."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from dashboard import ids
from dashboard.app import create_app
from dashboard.client import call
from dashboard.data import exactly_once_evidence
from streaming.lake import tables
from streaming.lake.store import Batch, Lake
from tests.unit.test_dashboard_quarantine import texts

UTC = timezone.utc
AT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)


def lake_with_a_batch(data_dir) -> Lake:
    """Partition 0: offsets 0-5; offsets 0-3 are trades t0-t3, 4 is t0 again (a redelivery), 5 is
    not JSON. t3 was too late. Gold counts t0-t2. Partition 1: offset 0, a trade the stream has
    not counted yet (silver is a batch ahead of gold)."""
    lake, batch = Lake(data_dir), Batch("fixture", 0)
    lake.ensure_all()
    records = [("trades", 0, o) for o in range(6)] + [("trades", 1, 0)]
    lake.publish(tables.BRONZE, pa.Table.from_pylist([
        {"key": b"a", "value": b"{}", "topic": t, "partition": p, "offset": o, "timestamp": AT, "ingested_at": AT}
        for t, p, o in records], schema=tables.BRONZE.schema), batch)
    trades = [("t0", 0, 0), ("t1", 0, 1), ("t2", 0, 2), ("t3", 0, 3), ("t9", 1, 0)]
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


def test_each_offset_is_once_in_bronze_and_gold_equals_silvers_on_time_trades_up_to_what_it_counted(tmp_path):
    evidence = exactly_once_evidence(lake_with_a_batch(tmp_path), {"trades:0": 6, "trades:1": 1, "trades:2": 0})
    by = {p["partition"]: p for p in evidence["partitions"]}
    assert by["trades:0"] == {"partition": "trades:0", "kafka_end": 6, "bronze": 6, "bronze_doubled": 0, "silver": 4,
                              "quarantine": 1, "redeliveries": 1, "counted_to": 6}
    assert (by["trades:1"]["bronze"], by["trades:1"]["silver"], by["trades:1"]["counted_to"]) == (1, 1, None)
    assert by["trades:2"]["kafka_end"] == 0 and by["trades:2"]["bronze"] == 0
    assert (evidence["gold_trades"], evidence["silver_on_time"], evidence["silver_doubled"]) == (3, 3, 0)


def test_the_panel_counts_on_demand_and_says_whether_gold_matches(tmp_path):
    lake_with_a_batch(tmp_path)
    status = {"kafka": {"partitions": [{"partition": "trades:0", "end_offset": 6, "lag": {}}]}}
    client = create_app(tmp_path, health=lambda: status).server.test_client()
    answer = call(client, [f"{ids.EXACTLY_ONCE_TABLE}.children", f"{ids.EXACTLY_ONCE_MESSAGE}.children"],
                  {f"{ids.EXACTLY_ONCE_CHECK}.n_clicks": 1})
    shown = texts(answer[ids.EXACTLY_ONCE_TABLE]["children"])
    assert "trades:0" in shown and "Redeliveries dropped" in shown
    assert any("Gold counts 3 trades" in t and ": equal." in t for t in shown)
    assert answer[ids.EXACTLY_ONCE_MESSAGE]["children"].startswith("Counted at ")
