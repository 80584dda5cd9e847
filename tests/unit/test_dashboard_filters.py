"""Dashboard: the channel and symbol drill-down takes its options from silver, not the simulator."""

import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.client import call, store_snapshot
from dashboard.dash_app import create_app
from dashboard.readers import SilverFilterValues
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD, SILVER

UTC = timezone.utc
ROOT = Path(__file__).resolve().parents[2]
OPTIONS = [f"{ids.CHANNEL_FILTER}.options", f"{ids.SYMBOL_FILTER}.options"]


def publish_silver(data_dir, trades, batch_id=0, ingested_at=None):
    """trades: (trade_id, symbol, side, amount, channel, HH:MM on 2026-03-02)."""
    ingested_at = ingested_at or datetime.now(UTC)
    rows = [{"trade_id": t, "account_id": "A", "symbol": symbol, "side": side, "quantity": 1, "price": amount,
             "amount": amount, "channel": channel,
             "event_time": datetime(2026, 3, 2, int(hm[:2]), int(hm[3:]), tzinfo=UTC), "topic": "trades",
             "partition": 0, "offset": batch_id * 1000 + i, "kafka_timestamp": ingested_at, "ingested_at": ingested_at}
            for i, (t, symbol, side, amount, channel, hm) in enumerate(trades)]
    Lake(data_dir).publish(SILVER, pa.Table.from_pylist(rows, schema=SILVER.schema), Batch("fixture", batch_id))


def publish_gold_window(data_dir):
    start = datetime(2026, 3, 2, 9, tzinfo=UTC)
    window = pa.table({"window_start": [start], "window_end": [start + timedelta(minutes=15)], "buy_amount": [110.0],
                       "sell_amount": [0.0], "settlement_amount": [110.0], "trade_count": [2], "revision": [1],
                       "updated_at": [datetime.now(UTC)], "batch_id": [0]}).cast(GOLD.schema)
    Lake(data_dir).publish(GOLD, window, Batch("fixture", 0))


def filter_options(client, shown_channels=None, shown_symbols=None, day=None) -> dict:
    """The options callback as the filter interval fires it, with the options the page shows."""
    return call(client, OPTIONS, {f"{ids.FILTER_TICK}.n_intervals": 1, f"{ids.DAY_PICKER}.value": day},
                {OPTIONS[0]: shown_channels or [], OPTIONS[1]: shown_symbols or []})


TRADES = [("k1", "NVDA", "BUY", 10.0, "kiosk", "09:01"), ("w1", "AAPL", "BUY", 100.0, "web", "09:02"),
          ("k2", "ZZZZ", "SELL", 4.0, "kiosk", "09:20"), ("m1", "AAPL", "SELL", 1.0, "mobile", "09:16")]


def test_filter_options_are_the_channels_and_symbols_found_in_silver_sorted(tmp_path):
    publish_silver(tmp_path, TRADES)
    client = create_app(tmp_path).server.test_client()
    options = filter_options(client)
    assert options[ids.CHANNEL_FILTER]["options"] == [
        {"label": "Kiosk", "value": "kiosk"}, {"label": "Mobile", "value": "mobile"}, {"label": "Web", "value": "web"}]
    assert options[ids.SYMBOL_FILTER]["options"] == [
        {"label": "AAPL", "value": "AAPL"}, {"label": "NVDA", "value": "NVDA"}, {"label": "ZZZZ", "value": "ZZZZ"}]


def test_the_page_starts_with_no_filter_options_and_fills_them_on_its_own_slower_interval(tmp_path):
    publish_silver(tmp_path, TRADES)
    client = create_app(tmp_path, refresh_ms=2000).server.test_client()
    page = client.get("/_dash-layout").get_json()

    def component(node, id_):
        if isinstance(node, dict):
            if node.get("props", {}).get("id") == id_:
                return node["props"]
            return component(node.get("props", {}).get("children"), id_)
        for child in node if isinstance(node, list) else []:
            found = component(child, id_)
            if found is not None:
                return found
        return None

    assert component(page, ids.CHANNEL_FILTER)["options"] == []
    assert component(page, ids.SYMBOL_FILTER)["options"] == []
    assert component(page, ids.FILTER_TICK)["interval"] > component(page, ids.TICK)["interval"]
    # Neither the data tick nor a filter choice fills them: only the filter interval does, and a change of day.
    inputs = {d["output"]: [i["id"] for i in d["inputs"]] for d in client.get("/_dash-dependencies").get_json()}
    assert [inputs[o] for o in inputs if ids.CHANNEL_FILTER + ".options" in o] == [[ids.FILTER_TICK, ids.DAY_PICKER]]


@pytest.mark.parametrize("silver", ["not created", "empty"])
def test_no_filter_options_without_trades_in_silver_and_the_page_still_works(tmp_path, silver):
    if silver == "empty":
        Lake(tmp_path).ensure(SILVER)
    publish_gold_window(tmp_path)
    client = create_app(tmp_path).server.test_client()
    assert client.get("/").status_code == 200
    options = filter_options(client, [{"label": "Web", "value": "web"}])
    assert options[ids.CHANNEL_FILTER]["options"] == []  # a stale option is taken away
    assert ids.SYMBOL_FILTER not in options  # already empty on the page: not sent again
    snapshot = store_snapshot(client)
    assert [w["buy_amount"] for w in snapshot["windows"]] == [110.0] and not snapshot["drill_down"]
    drill = store_snapshot(client, channel="web")
    assert drill["drill_down"] and drill["windows"] == []


def test_options_already_on_the_page_are_not_sent_again(tmp_path):
    publish_silver(tmp_path, TRADES)
    client = create_app(tmp_path).server.test_client()
    first = filter_options(client)
    assert filter_options(client, first[ids.CHANNEL_FILTER]["options"], first[ids.SYMBOL_FILTER]["options"]) == {}


def test_a_channel_and_symbol_that_arrive_later_are_added_to_the_options(tmp_path):
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    publish_silver(tmp_path, TRADES[1:2], 0, earlier)  # web, AAPL
    client = create_app(tmp_path).server.test_client()
    first = filter_options(client)
    assert [o["value"] for o in first[ids.CHANNEL_FILTER]["options"]] == ["web"]

    publish_silver(tmp_path, TRADES[:1], 1, earlier + timedelta(minutes=1))  # kiosk, NVDA
    later = filter_options(client, first[ids.CHANNEL_FILTER]["options"], first[ids.SYMBOL_FILTER]["options"])
    assert [o["value"] for o in later[ids.CHANNEL_FILTER]["options"]] == ["kiosk", "web"]
    assert [o["value"] for o in later[ids.SYMBOL_FILTER]["options"]] == ["AAPL", "NVDA"]


def test_silver_is_read_again_only_when_its_version_changes_and_then_only_its_new_files(tmp_path):
    publish_silver(tmp_path, TRADES)
    values = SilverFilterValues(Lake(tmp_path))
    assert values.read("2026-03-02") == (["kiosk", "mobile", "web"], ["AAPL", "NVDA", "ZZZZ"])
    assert values.read("2026-03-02") == (["kiosk", "mobile", "web"], ["AAPL", "NVDA", "ZZZZ"])
    followed = values.increments("2026-03-02")
    assert followed.files_read == 1
    publish_silver(tmp_path, [("d1", "MSFT", "BUY", 3.0, "desktop", "09:40")], 1)
    assert values.read("2026-03-02") == (["desktop", "kiosk", "mobile", "web"], ["AAPL", "MSFT", "NVDA", "ZZZZ"])
    assert followed.files_read == 2  # only the new version's file


def test_a_silver_table_made_anew_is_read_whole_again(tmp_path):
    publish_silver(tmp_path, TRADES[:2], 0)
    publish_silver(tmp_path, TRADES[2:], 1)
    values = SilverFilterValues(Lake(tmp_path))
    assert values.read()[0] == ["kiosk", "mobile", "web"]
    shutil.rmtree(tmp_path / "silver")
    publish_silver(tmp_path, [("p1", "IBM", "BUY", 1.0, "phone", "09:05")], 0,
                   datetime.now(UTC) - timedelta(days=1))  # older than anything read before
    assert values.read() == (["phone"], ["IBM"])


def test_drill_down_by_a_channel_only_silver_knows_filters_the_windows(tmp_path):
    publish_gold_window(tmp_path)
    publish_silver(tmp_path, TRADES)
    client = create_app(tmp_path).server.test_client()
    chosen = filter_options(client)[ids.CHANNEL_FILTER]["options"][0]["value"]
    assert chosen == "kiosk"
    kiosk = store_snapshot(client, channel=chosen)
    assert [(w["window_start"][11:16], w["buy_amount"], w["sell_amount"], w["trade_count"]) for w in kiosk["windows"]] \
        == [("09:00", 10.0, 0.0, 1), ("09:15", 0.0, 4.0, 1)]
    aapl = store_snapshot(client, symbol="AAPL")
    assert [(w["window_start"][11:16], w["buy_amount"], w["sell_amount"]) for w in aapl["windows"]] \
        == [("09:00", 100.0, 0.0), ("09:15", 0.0, 1.0)]
    assert store_snapshot(client, channel="kiosk", symbol="AAPL")["windows"] == []


def test_the_dashboard_does_not_import_the_simulator():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, dashboard.dash_app; "
                               "print(sorted(m for m in sys.modules if m.startswith('streaming.simulation')))"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
