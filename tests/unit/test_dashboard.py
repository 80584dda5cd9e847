"""Dashboard: data access, figures and the registered callbacks, from a fixture gold table."""

import json
from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.client import call, chart_choices, decode, from_store, outputs_of, refresh_page, store_snapshot
from dashboard.dash_app import create_app
from dashboard.data import (
    CORRECTION_COLUMNS,
    GOLD_COLUMNS,
    LATE_TRADE_COLUMNS,
    TableReader,
    first_values,
    json_records,
    on_day,
    silver_windows,
    snapshot_from,
)
from dashboard.figures import BUY_COLOR, SELL_COLOR, SETTLEMENT_COLOR, summary_figure
from dashboard.panels import kpis
from dashboard.panels.producer import late_knobs, validate_rate
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS, GOLD, LATE_TRADES, SILVER, SUMMARY_HISTORY
from streaming.medallion.history import LATE, ON_TIME, in_change_order

UTC = timezone.utc


def write_gold(data_dir, windows):
    """windows: (HH:MM on 2026-03-02, buy, sell, count), plus one window on the previous day."""
    starts = [datetime(2026, 3, 1, 16, 45, tzinfo=UTC)] + [
        datetime(2026, 3, 2, int(hm[:2]), int(hm[3:]), tzinfo=UTC) for hm, *_ in windows]
    values = [(99.0, 1.0, 1)] + [(b, s, c) for _, b, s, c in windows]
    now = datetime.now(UTC)
    table = pa.table({
        "window_start": starts, "window_end": [s + timedelta(minutes=15) for s in starts],
        "buy_amount": [v[0] for v in values], "sell_amount": [v[1] for v in values],
        "settlement_amount": [v[0] - v[1] for v in values], "trade_count": [v[2] for v in values],
        "revision": [1] * len(starts), "updated_at": [now] * len(starts), "batch_id": [0] * len(starts),
    }).cast(GOLD.schema)
    Lake(data_dir).publish(GOLD, table, Batch("fixture", 0))


WINDOWS = [("09:00", 1000.0, 400.0, 3), ("09:15", 200.0, 700.0, 2), ("09:30", 50.0, 0.0, 1)]
KPI_OUTPUTS = outputs_of(kpis.DRAWING)


@pytest.fixture
def snapshot(tmp_path):
    write_gold(tmp_path, WINDOWS)
    return snapshot_from(TableReader(Lake(tmp_path), GOLD, GOLD_COLUMNS).read())


def test_snapshot_holds_the_latest_trading_day_in_order(snapshot):
    assert [w["window_start"][11:16] for w in snapshot["windows"]] == ["09:00", "09:15", "09:30"]
    assert snapshot["windows"][1]["settlement_amount"] == -500.0


def test_chart_has_buy_sell_and_settlement_lines_in_the_seed_colours(snapshot):
    fig = summary_figure(snapshot, ids.MODE_WINDOW)
    assert [t["name"] for t in fig["data"]][:3] == ["Total buy", "Total sell", "Settlement (buy − sell)"]
    assert [t["line"]["color"] for t in fig["data"][:3]] == [BUY_COLOR, SELL_COLOR, SETTLEMENT_COLOR]
    assert fig["data"][0]["y"] == [1000.0, 200.0, 50.0]
    assert fig["data"][2]["y"] == [600.0, -500.0, 50.0]
    assert fig["layout"]["xaxis"]["tickformat"] == "%H:%M"  # 09:00, 09:15, ...
    assert fig["layout"]["hovermode"] == "x unified"  # one hover shows all three values


def test_windows_right_of_the_watermark_are_drawn_hollow_under_a_band_and_the_legend_says_why(snapshot):
    with_watermark = {**snapshot, "status": {"queries": [{"watermark": "2026-03-02T09:30:00Z"}]}}

    fig = summary_figure(with_watermark, ids.MODE_WINDOW)

    assert fig["data"][0]["marker"]["symbol"] == ["circle", "circle", "circle-open"]  # 09:00 and 09:15 ended
    assert fig["data"][-1]["name"] == "Not final yet (right of the watermark)"
    [band] = [shape for shape in fig["layout"]["shapes"] if shape["type"] == "rect"]
    assert band["x0"].startswith("2026-03-02T09:30")
    done = {**snapshot, "status": {"queries": [{"watermark": "2026-03-02T10:00:00Z"}]}}
    assert "Not final yet (right of the watermark)" not in [t["name"] for t in summary_figure(done)["data"]]


def test_the_time_machines_chart_at_an_earlier_instant_draws_no_window_open(snapshot):
    earlier = {**snapshot, "as_of": {"at": "2026-03-02T09:40:00+00:00", "label": "as of"}}  # no status to judge by
    fig = summary_figure(earlier, ids.MODE_WINDOW)
    assert fig["data"][0]["marker"]["symbol"] == ["circle"] * 3
    assert not [shape for shape in fig["layout"]["shapes"] if shape["type"] == "rect"]


def test_running_totals_accumulate_over_the_day(snapshot):
    fig = summary_figure(snapshot, ids.MODE_RUNNING)
    assert fig["data"][0]["y"] == [1000.0, 1200.0, 1250.0]
    assert fig["data"][2]["y"] == [600.0, 100.0, 150.0]


def test_empty_state_says_it_is_waiting(tmp_path):
    snapshot = snapshot_from(TableReader(Lake(tmp_path), GOLD, GOLD_COLUMNS).read())
    fig = summary_figure(snapshot)
    assert fig["data"] == [] and "Waiting for the first trades" in fig["layout"]["annotations"][0]["text"]


def test_the_table_is_reread_only_when_its_version_changes(tmp_path):
    write_gold(tmp_path, WINDOWS[:1])
    reader = TableReader(Lake(tmp_path), GOLD, GOLD_COLUMNS)
    first = reader.read()
    assert reader.read() is first
    write_gold(tmp_path, WINDOWS)  # same app id and version: skipped as already done, no new version
    assert reader.read() is first
    late_window = pa.table({"window_start": [datetime(2026, 3, 2, 10, tzinfo=UTC)],
                            "window_end": [datetime(2026, 3, 2, 10, 15, tzinfo=UTC)], "buy_amount": [1.0],
                            "sell_amount": [0.0], "settlement_amount": [1.0], "trade_count": [1], "revision": [1],
                            "updated_at": [datetime.now(UTC)], "batch_id": [1]}).cast(GOLD.schema)
    Lake(tmp_path).publish(GOLD, late_window, Batch("fixture", 1))  # a new version
    again = reader.read()
    assert again is not first and len(again) == len(first) + 1


def dash_post(client, output, inputs):
    return call(client, [output], {f"{i['id']}.{i['property']}": i["value"] for i in inputs})


def test_registered_callbacks_build_three_traces_from_the_gold_table(tmp_path):
    write_gold(tmp_path, WINDOWS)
    app = create_app(tmp_path)
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    snapshot = store_snapshot(client)
    figure = from_store(client, [f"{ids.CHART}.figure"], snapshot, chart_choices())[ids.CHART]["figure"]
    assert [t["name"] for t in figure["data"]][:3] == ["Total buy", "Total sell", "Settlement (buy − sell)"]
    assert decode(figure["data"][1]["y"]) == [400.0, 700.0, 0.0]


@pytest.mark.parametrize("value, ok", [(10, True), ("2.5", True), (0, False), (-1, False), (None, False),
                                        ("abc", False), (1e9, False)])
def test_rate_validation_gives_a_message_not_a_traceback(value, ok):
    assert (validate_rate(value) is None) == ok


def test_status_line_shows_producer_last_batch_watermark_and_failures():
    from dashboard.figures import status_text

    snapshot = {"status": {
        "producer": {"enabled": True, "rate": 20.0, "sent": 12345, "failed": 0, "market_time": "2026-03-02T10:31:00Z"},
        "queries": [
            {"name": "bronze_silver", "error": None, "last_batch_at": "2026-11-22T05:36:58.100Z", "watermark": None},
            {"name": "gold_trade_summary", "error": None, "last_batch_at": "2026-11-22T05:36:57.900Z",
             "watermark": "2026-03-02T10:01:00.000Z"},
        ]}}
    text = status_text(snapshot)
    assert "Producer on" in text and "sent 12,345" in text
    assert "Last batch 05:36:58 UTC" in text and "Watermark 2026-03-02 10:01" in text
    snapshot["status"]["queries"][1]["error"] = "boom"
    assert "gold_trade_summary FAILED: boom" in status_text(snapshot)


def test_status_line_says_when_quiet_input_closed_the_windows():
    from dashboard.figures import status_text

    quiet = {"name": "medallion", "error": None, "last_batch_at": "2026-11-22T16:00:00.000Z",
             "watermark": "2026-03-02T16:59:58.000Z",
             "closed_when_quiet": {"windows_up_to": "2026-03-02T16:59:58.000Z", "quiet_s": 903}}
    assert "Input quiet for 15 min: windows up to 16:59:58 closed" in status_text({"status": {"queries": [quiet]}})
    quiet["closed_when_quiet"] = {"windows_up_to": "2026-03-02T16:59:58.000Z", "quiet_s": 20}
    assert "Input quiet for 20 s" in status_text({"status": {"queries": [quiet]}})
    assert "quiet" not in status_text({"status": {"queries": [{**quiet, "closed_when_quiet": None}]}})


def write_corrections_and_late_trades(data_dir):

    at = datetime(2026, 11, 22, 10, 31, 5, tzinfo=UTC)
    start = datetime(2026, 3, 2, 9, 15, tzinfo=UTC)
    correction = {"window_start": start, "window_end": start + timedelta(minutes=15),
                  "buy_amount_before": 200.0, "buy_amount_after": 230.0, "sell_amount_before": 700.0,
                  "sell_amount_after": 700.0, "settlement_amount_before": -500.0, "settlement_amount_after": -470.0,
                  "trade_count_before": 2, "trade_count_after": 3, "late_trades": 1, "corrected_at": at,
                  "watermark": datetime(2026, 3, 2, 9, 1, tzinfo=UTC), "batch_id": 4, "query_id": "q"}
    Lake(data_dir).publish(CORRECTIONS, pa.Table.from_pylist([correction], schema=CORRECTIONS.schema),
                           Batch("fixture", 0))
    late = {"trade_id": "t7-abcdef", "event_time": datetime(2026, 3, 2, 9, 5, tzinfo=UTC),
            "window_start": datetime(2026, 3, 2, 9, 0, tzinfo=UTC), "window_end": start,
            "watermark": datetime(2026, 3, 2, 10, 0, tzinfo=UTC), "late_by_seconds": 3300.0, "side": "SELL",
            "amount": 10000.0, "topic": "trades", "partition": 0, "offset": 9, "detected_at": at}
    Lake(data_dir).publish(LATE_TRADES, pa.Table.from_pylist([late], schema=LATE_TRADES.schema), Batch("fixture", 0))


def test_callbacks_mark_corrections_list_too_late_trades_and_draw_the_watermark(tmp_path):
    write_gold(tmp_path, WINDOWS)
    write_corrections_and_late_trades(tmp_path)
    app = create_app(tmp_path, health=lambda: HEALTH)
    client = app.server.test_client()
    snapshot = store_snapshot(client)
    assert snapshot["counters"] == {"corrections": 1, "late_but_counted": 1, "too_late": 1}

    figure = from_store(client, [f"{ids.CHART}.figure"], snapshot, chart_choices())[ids.CHART]["figure"]
    marker = next(t for t in figure["data"] if t["name"] == "Corrected by late trades")
    assert marker["hovertext"] == ["09:15 window: buy $200.00 → $230.00 at 10:31:05 UTC, 1 late trade"]
    assert any(shape["type"] == "line" and shape["x0"].startswith("2026-03-02T09:40")
               for shape in figure["layout"]["shapes"])

    feeds = from_store(client, [f"{i}.children" for i in (ids.STATUS_LINE, ids.LATE_COUNTERS, ids.CORRECTIONS_FEED,
                                                          ids.LATE_TRADES_LIST)], snapshot)
    text = json.dumps(feeds)
    assert "1 late but counted" in text and "1 too late to count" in text
    assert "$200.00 \\u2192 $230.00" in text and "09:15" in text  # the feed row
    assert "t7-abcdef" in text and "55.0 min" in text  # the too-late list
    assert "Watermark 2026-03-02 09:40" in text


def chart(client, snapshot, first_reported: bool, mode=ids.MODE_WINDOW):
    return from_store(client, [f"{ids.CHART}.figure"], snapshot,
                      chart_choices(mode, ["on"] if first_reported else []))[ids.CHART]["figure"]


def history_rows(changes) -> pa.Table:
    """changes: (HH:MM on 2026-03-02, buy, sell, count, seconds after 10:00, cause), in change order."""
    rows = []
    for hm, buy, sell, count, after, cause in changes:
        start = datetime(2026, 3, 2, int(hm[:2]), int(hm[3:]), tzinfo=UTC)
        rows.append({"window_start": start, "window_end": start + timedelta(minutes=15), "buy_amount": buy,
                     "sell_amount": sell, "settlement_amount": buy - sell, "trade_count": count,
                     "changed_at": datetime(2026, 3, 2, 10, tzinfo=UTC) + timedelta(seconds=after), "cause": cause,
                     "batch_id": after, "query_id": "q"})
    return in_change_order(pa.Table.from_pylist(rows, schema=SUMMARY_HISTORY.schema))


def test_first_reported_toggle_shows_the_values_before_the_first_correction(tmp_path):
    # 09:15 was first reported with buy 200 and corrected to 230 by a late trade: gold's history says so.
    write_gold(tmp_path, [("09:00", 1000.0, 400.0, 3), ("09:15", 230.0, 700.0, 3), ("09:30", 50.0, 0.0, 1)])
    write_corrections_and_late_trades(tmp_path)
    Lake(tmp_path).publish(SUMMARY_HISTORY, history_rows([
        ("09:00", 1000.0, 400.0, 3, 0, ON_TIME), ("09:15", 200.0, 700.0, 2, 0, ON_TIME),
        ("09:15", 230.0, 700.0, 3, 60, LATE), ("09:30", 50.0, 0.0, 1, 60, ON_TIME)]), Batch("q", 0))
    client = create_app(tmp_path).server.test_client()
    snapshot = store_snapshot(client)

    plain = chart(client, snapshot, first_reported=False)
    assert not [t for t in plain["data"] if "first reported" in t["name"]]

    figure = chart(client, snapshot, first_reported=True)
    traces = {t["name"]: t for t in figure["data"]}
    assert decode(traces["Total buy"]["y"]) == [1000.0, 230.0, 50.0]
    assert decode(traces["Buy as first reported"]["y"]) == [1000.0, 200.0, 50.0]
    assert decode(traces["Settlement as first reported"]["y"]) == [600.0, -500.0, 50.0]
    assert traces["Buy as first reported"]["line"]["dash"] == "dash"

    running = {t["name"]: t for t in chart(client, snapshot, True, ids.MODE_RUNNING)["data"]}
    assert decode(running["Buy as first reported"]["y"]) == [1000.0, 1200.0, 1250.0]


@pytest.mark.parametrize("late, beyond, minutes, beyond_by, message", [
    (5, 20, 27, 30, None), (0, 0, 0.5, 0.5, None), (101, 20, 27, 30, "late share"),
    (5, -1, 27, 30, "beyond-watermark"), (5, 20, 30, 30, "less than the watermark"), ("x", 20, 27, 30, "late share"),
    (5, 20, None, 30, "less than the watermark"), (5, 20, 27, 0, "how far beyond"), (5, 20, 27, None, "how far beyond"),
])
def test_late_trade_knobs_are_validated_with_a_message(late, beyond, minutes, beyond_by, message):
    knobs = late_knobs(late, beyond, minutes, 30, beyond_by)
    if message is None:
        assert knobs["max_lateness"] == timedelta(minutes=minutes)
        assert knobs["max_beyond"] == timedelta(minutes=beyond_by)
    else:
        assert message in knobs


HEALTH = {
    "at": "2026-11-22T10:31:07+00:00",
    "queries": [
        {"name": "bronze_silver", "active": True, "error": None, "batch_id": 120,
         "last_batch_at": "2026-11-22T10:31:06.500Z",
         "watermark": None, "input_rows_per_second": 21.0, "rows_dropped_by_watermark": 0,
         "processed_rows_per_second": 40.0, "batch_duration_ms": 510, "state_rows": 0,
         "processed_offsets": {"trades:0": 40, "trades:1": 38}},
        {"name": "gold_trade_summary", "active": False, "error": "StreamingQueryException: boom", "batch_id": 9,
         "last_batch_at": "2026-11-22T10:31:06.000Z", "watermark": "2026-03-02T09:40:00.000Z",
         "input_rows_per_second": 20.0, "rows_dropped_by_watermark": 2, "processed_rows_per_second": 35.5,
         "batch_duration_ms": 1210, "state_rows": 1234, "processed_offsets": {"trades:0": 30, "trades:1": 38}},
    ],
    "producer": None,
    "kafka": {"error": None, "partitions": [
        {"partition": "trades:0", "end_offset": 42, "lag": {"bronze_silver": 2, "gold_trade_summary": 12}},
        {"partition": "trades:1", "end_offset": 38, "lag": {"bronze_silver": 0, "gold_trade_summary": 0}}],
        "total_lag": {"bronze_silver": 2, "gold_trade_summary": 12}},
    "lag_history": [{"at": "2026-11-22T10:31:05+00:00", "lag": 20}, {"at": "2026-11-22T10:31:07+00:00", "lag": 12}],
}


def test_health_panel_shows_each_query_the_lag_per_partition_and_a_failure(tmp_path):
    from dashboard.panels import pipeline_health
    from tests.unit.test_health import markdown_rows

    client = create_app(tmp_path, health=lambda: HEALTH).server.test_client()
    snapshot = store_snapshot(client)
    panel = from_store(client, outputs_of(pipeline_health.DRAWING), snapshot)
    queries = markdown_rows(panel[ids.HEALTH_QUERIES]["children"])
    assert any("FAILED: StreamingQueryException: boom" in row[1] for row in queries)
    assert any(row[5] == "1,210 ms" and row[4] in ("36/s", "35/s") for row in queries)  # processed rows/s, rounded
    lag = markdown_rows(panel[ids.KAFKA_LAG]["children"])
    assert lag[0] == ["Partition", "End offset", "Lag bronze_silver", "Lag gold_trade_summary"]
    assert lag[-1] == ["total", "", "2", "12"]
    assert decode(panel[ids.LAG_SPARKLINE]["figure"]["data"][0]["y"]) == [20, 12]


def test_api_status_returns_the_snapshot_as_json(tmp_path):
    client = create_app(tmp_path, health=lambda: HEALTH).server.test_client()
    response = client.get("/api/status")
    assert response.status_code == 200 and response.is_json
    assert response.get_json()["kafka"]["total_lag"] == {"bronze_silver": 2, "gold_trade_summary": 12}
    assert client.post("/api/status").status_code == 405  # read-only


def test_lag_is_the_end_offset_minus_what_each_query_processed():
    from streaming.jobs.pipeline import processed_offsets
    from streaming.run.health import partition_lags, total_lag

    progress = {"sources": [{"endOffset": '{"trades": {"0": 30, "1": 38}}'}]}
    queries = [{"name": "gold", "processed_offsets": processed_offsets(progress)}]
    rows = partition_lags({"trades:1": 38, "trades:0": 42, "trades:10": 5}, queries)
    assert [(r["partition"], r["lag"]["gold"]) for r in rows] == [("trades:0", 12), ("trades:1", 0), ("trades:10", 5)]
    assert total_lag(rows) == {"gold": 17}


def test_kpi_cards_sum_the_day_with_currency_and_thousands_separators(tmp_path):
    write_gold(tmp_path, WINDOWS)
    write_corrections_and_late_trades(tmp_path)
    client = create_app(tmp_path).server.test_client()
    snapshot = store_snapshot(client)
    assert snapshot["kpis"] == {"buy": 1250.0, "sell": 1100.0, "settlement": 150.0, "trades": 6,
                                "corrections": 1, "too_late": 1}
    drawn = from_store(client, KPI_OUTPUTS, snapshot)
    assert [drawn[i]["children"] for i in ids.KPI_VALUES] == ["$1,250", "$1,100", "$150", "6", "1", "1"]
    assert "Mon 02 Mar 2026" in json.dumps(drawn) and "Sun 01 Mar 2026" in json.dumps(drawn)


def test_a_page_refresh_as_the_benchmark_runs_it_draws_every_panel(tmp_path):
    # dashboard/client.refresh_page (the long run's and the soak's page read) calls each panel's
    # callback by its outputs: each must match the panel's registered callback.
    write_gold(tmp_path, WINDOWS)
    figure = refresh_page(create_app(tmp_path).server.test_client())
    assert [t["name"] for t in figure["data"]][:3] == ["Total buy", "Total sell", "Settlement (buy − sell)"]


def test_day_picker_shows_an_earlier_trading_day(tmp_path):
    write_gold(tmp_path, WINDOWS)  # plus one 16:45 window on 2026-03-01
    client = create_app(tmp_path).server.test_client()
    assert store_snapshot(client)["days"] == ["2026-03-02", "2026-03-01"]
    earlier = store_snapshot(client, day="2026-03-01")
    assert [w["window_start"][:16] for w in earlier["windows"]] == ["2026-03-01T16:45"]
    assert earlier["kpis"]["buy"] == 99.0 and earlier["day"] == "2026-03-01"


def test_drill_down_by_channel_and_symbol_recomputes_windows_from_silver(tmp_path):

    write_gold(tmp_path, WINDOWS)
    now = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    trades = [("m1", "AAPL", "BUY", 10.0, "mobile", "09:01"), ("m2", "MSFT", "SELL", 4.0, "mobile", "09:20"),
              ("w1", "AAPL", "BUY", 100.0, "web", "09:02"), ("m3", "AAPL", "SELL", 1.0, "mobile", "09:16")]
    rows = [{"trade_id": t, "account_id": "A", "symbol": sym, "side": side, "quantity": 1, "price": amount,
             "amount": amount, "channel": channel, "event_time": datetime(2026, 3, 2, 9, int(hm[3:]), tzinfo=UTC),
             "topic": "trades", "partition": 0, "offset": i, "kafka_timestamp": now, "ingested_at": now}
            for i, (t, sym, side, amount, channel, hm) in enumerate(trades)]
    Lake(tmp_path).publish(SILVER, pa.Table.from_pylist(rows, schema=SILVER.schema), Batch("fixture", 0))
    client = create_app(tmp_path).server.test_client()

    mobile = store_snapshot(client, channel="mobile")
    assert [(w["window_start"][11:16], w["buy_amount"], w["sell_amount"], w["trade_count"])
            for w in mobile["windows"]] == [("09:00", 10.0, 0.0, 1), ("09:15", 0.0, 5.0, 2)]
    mobile_apple = store_snapshot(client, channel="mobile", symbol="AAPL")
    assert [(w["window_start"][11:16], w["settlement_amount"]) for w in mobile_apple["windows"]] \
        == [("09:00", 10.0), ("09:15", -1.0)]
    note = from_store(client, KPI_OUTPUTS,
                      mobile_apple)[ids.CHART_NOTE]["children"]
    assert "channel mobile · symbol AAPL" in note and "from silver" in note


def test_a_backfilled_too_late_trade_no_longer_counts_as_too_late(tmp_path):
    write_gold(tmp_path, WINDOWS)
    write_corrections_and_late_trades(tmp_path)
    gold = TableReader(Lake(tmp_path), GOLD, GOLD_COLUMNS).read()
    corrections = TableReader(Lake(tmp_path), CORRECTIONS, CORRECTION_COLUMNS).read()
    late_trades = TableReader(Lake(tmp_path), LATE_TRADES, LATE_TRADE_COLUMNS).read()
    assert snapshot_from(gold, corrections, late_trades)["counters"]["too_late"] == 1

    backfilled = late_trades.assign(backfilled_at=pd.Timestamp("2026-11-22T11:00:00Z"))
    snapshot = snapshot_from(gold, corrections, backfilled)
    assert snapshot["counters"]["too_late"] == 0 and snapshot["kpis"]["too_late"] == 0
    assert snapshot["late_trades"][0]["backfilled_at"].startswith("2026-11-22T11:00")  # still listed


def test_a_drill_down_shows_no_correction_markers_or_ghosts_of_the_streaming_totals(tmp_path):
    write_gold(tmp_path, [("09:00", 1000.0, 400.0, 3), ("09:15", 230.0, 700.0, 3)])
    write_corrections_and_late_trades(tmp_path)
    gold = TableReader(Lake(tmp_path), GOLD, GOLD_COLUMNS).read()
    corrections = TableReader(Lake(tmp_path), CORRECTIONS, CORRECTION_COLUMNS).read()
    trades = pd.DataFrame({"trade_id": ["m9"], "side": ["BUY"], "amount": [10.0],
                           "event_time": [pd.Timestamp("2026-03-02T09:16:00Z")]})
    drill = silver_windows(trades, pd.Timedelta(minutes=15))
    snapshot = snapshot_from(gold, corrections, None, None, drill)
    assert [(w["buy_amount"], w["buy_amount_first"]) for w in snapshot["windows"]] == [(10.0, 10.0)]
    names = [t["name"] for t in summary_figure(snapshot, first_reported=True)["data"]]
    assert "Corrected by late trades" not in names
    streaming = [t["name"] for t in summary_figure(snapshot_from(gold, corrections))["data"]]
    assert "Corrected by late trades" in streaming


def test_on_day_keeps_that_utc_day_oldest_first_whether_times_are_typed_or_strings():
    times = ["2026-03-02T10:00:00+00:00", "2026-03-01T23:59:59+00:00", "2026-03-02T09:00:00+01:00",
             "2026-03-03T00:00:00+00:00"]
    for column in (pd.Series(times), pd.to_datetime(pd.Series(times), utc=True)):
        frame = pd.DataFrame({"window_start": column, "n": [1, 2, 3, 4]})
        assert on_day(frame, "2026-03-02")["n"].tolist() == [3, 1]  # 09:00+01:00 is 08:00 UTC


def test_first_values_are_each_corrected_windows_values_before_its_first_change_that_was_not_on_time():
    first = first_values(history_rows([
        ("09:00", 100.0, 0.0, 1, 0, ON_TIME), ("09:00", 150.0, 0.0, 2, 5, ON_TIME), ("09:00", 170.0, 0.0, 3, 9, LATE),
        ("09:00", 190.0, 0.0, 4, 12, LATE), ("09:15", 40.0, 0.0, 1, 9, LATE), ("09:30", 7.0, 0.0, 1, 9, ON_TIME)]))
    assert set(first) == {"2026-03-02T09:00:00+00:00", "2026-03-02T09:15:00+00:00"}  # 09:30 was never corrected
    assert first["2026-03-02T09:00:00+00:00"]["buy_amount"] == 150.0
    assert first["2026-03-02T09:15:00+00:00"]["buy_amount"] == 0.0  # first seen through a late trade: nothing before


def test_json_records_gives_plain_json_values():
    frame = pd.DataFrame({"at": pd.to_datetime(["2026-03-02T09:00:00Z", None], utc=True), "amount": [1.5, float("nan")],
                          "count": [3, 4], "side": ["BUY", None]})
    records = json_records(frame, ("at",))
    assert records == [{"at": "2026-03-02T09:00:00+00:00", "amount": 1.5, "count": 3, "side": "BUY"},
                       {"at": None, "amount": None, "count": 4, "side": None}]
    assert type(records[0]["count"]) is int
    json.dumps(records)


def test_the_refresh_keeps_the_day_s_corrections_until_they_change_and_agrees_with_snapshot_from(tmp_path):
    write_gold(tmp_path, WINDOWS)
    client = create_app(tmp_path, health=lambda: HEALTH).server.test_client()
    lake = Lake(tmp_path)

    def pure(day=None):
        readers = [TableReader(lake, table, columns) for table, columns in
                   ((GOLD, GOLD_COLUMNS), (CORRECTIONS, CORRECTION_COLUMNS), (LATE_TRADES, LATE_TRADE_COLUMNS))]
        expected = snapshot_from(*(reader.read() for reader in readers), day)
        return {key: value for key, value in expected.items() if key not in ("filters", "status")}

    def served(day=None):
        snapshot = store_snapshot(client, day=day)  # with the time machine's span of the day's history
        return {key: value for key, value in snapshot.items() if key not in ("filters", "status", "history_span")}

    assert served() == pure() and served()["counters"]["corrections"] == 0
    write_corrections_and_late_trades(tmp_path)  # new versions: the kept day's data is worked out again
    assert served() == pure() and served()["counters"] == {"corrections": 1, "late_but_counted": 1, "too_late": 1}
    assert served("2026-03-01") == pure("2026-03-01") and served("2026-03-01")["counters"]["corrections"] == 0
