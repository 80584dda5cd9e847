"""GET /metrics: the pure parts of the exposition (outcomes, statistics, the health snapshot as
metric families), the route behind the Host guard, the text's lint, and the alert rules with
promtool (Debian's prometheus package, tests/install-prometheus.sh)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming.config import Settings, status_time
from streaming.lake.files import DataFile, file_stats
from streaming.metrics.counters import (
    PipelineMetrics,
    oldest_arrival,
    outcomes,
    quarantine_reasons,
    reason_counts,
    reason_kind,
    single_reason,
)
from streaming.run.metrics import exposition, health_families, table_families, topic_partition

REPO = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool: bash tests/install-prometheus.sh")

SNAPSHOT = {
    "at": "2026-03-02T10:00:00+00:00",
    "queries": [{"name": "medallion", "active": True, "error": None, "restarts": 2,
                 "watermark": "2026-03-02T09:30:00.000Z", "processed_offsets": {"trades:0": 70, "trades:1": 10}}],
    "kafka": {"error": None, "unreachable_since": None, "total_lag": {"medallion": 50},
              "partitions": [{"partition": "trades:0", "end_offset": 100, "lag": {"medallion": 30}},
                             {"partition": "trades:1", "end_offset": 30, "lag": {"medallion": 20}}]},
    "producer": {"enabled": True, "rate": 250.0, "sent": 1234, "failed": 3},
}


def samples(families) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def scraped(text: str) -> dict[tuple[str, tuple], float]:
    return samples(text_string_to_metric_families(text))


def test_a_batchs_records_split_into_outcomes_that_add_up_to_the_records():
    split = outcomes(records=100, kept=80, too_late=5, late_applied=10, quarantined=7)
    assert split == {"on_time": 65, "late_applied": 10, "too_late": 5, "duplicate": 13, "quarantined": 7}
    assert sum(split.values()) == 100


def test_a_file_of_one_reason_is_counted_from_its_statistics_and_a_mixed_one_is_read(tmp_path):
    one = pa.table({"reason": ["empty value"] * 3, "offset": [1, 2, 3]})
    mixed = pa.table({"reason": ["empty value", "side must be BUY or SELL, got HOLD",
                                 "side must be BUY or SELL, got buy"], "offset": [4, 5, 6]})
    assert single_reason(file_stats(one)) == "empty value"
    assert single_reason(file_stats(mixed)) is None
    import pyarrow.parquet as pq

    pq.write_table(mixed, tmp_path / "mixed.parquet")
    files = [DataFile("one.parquet", 0, 3, file_stats(one)),  # never read: the statistics say it
             DataFile("mixed.parquet", 0, 3, file_stats(mixed))]
    assert quarantine_reasons(files, str(tmp_path), None) == {"empty_value": 4, "bad_side": 2}


def test_a_reason_is_labelled_by_its_rule_not_by_the_values_it_names():
    assert reason_kind("price 1e99 is over the limit of 1000000") == "price_over"
    assert reason_kind("missing field 'side'") == reason_kind("missing field 'price'") == "missing_field"
    assert reason_kind("value is not valid UTF-8") == "not_utf8"
    assert reason_kind("value is 99 bytes, over the 10-byte limit") == "too_large"
    assert reason_kind("trade_id t-1 is already a trade with event_time 2026-03-02T09:00:00Z") == "conflicting_trade"
    assert reason_kind("event_time 2027-01-01T00:00:00Z is more than 1 day ahead of the latest event "
                       "(--max-event-time-jump)") == "event_time_jump"
    assert reason_counts(pa.array(["a reason no rule gives", None, "empty value"])) == \
        {"other": 1, "unknown": 1, "empty_value": 1}


def test_the_oldest_arrival_comes_from_the_bronze_files_statistics():
    early = datetime(2026, 3, 2, 9, 0, 0, 123000, tzinfo=timezone.utc)
    files = [DataFile("a", 0, 2, file_stats(pa.table({"timestamp": pa.array([early.replace(second=5), early],
                                                                             pa.timestamp("us", "UTC"))}))),
             DataFile("b", 0, 0, json.dumps({"minValues": {}})),
             DataFile("c", 0, 1, file_stats(pa.table({"timestamp": pa.array([early.replace(minute=1)],
                                                                             pa.timestamp("us", "UTC"))})))]
    assert oldest_arrival(files) == early


def test_a_batch_written_moves_the_counters_and_both_histograms():
    metrics = PipelineMetrics()
    metrics.corrected(pa.table({"late_trades": [2, 1]}))
    metrics.batch_written("medallion", records=10, kept=8, too_late=1, reasons={"not_an_object": 1},
                          oldest=datetime.now(timezone.utc))
    got = samples(metrics.registry.collect())
    assert got[("tradesummary_trades_total", (("outcome", "on_time"),))] == 4
    assert got[("tradesummary_trades_total", (("outcome", "late_applied"),))] == 3
    assert got[("tradesummary_trades_total", (("outcome", "duplicate"),))] == 1
    assert got[("tradesummary_quarantined_records_total", (("reason", "not_an_object"),))] == 1
    assert got[("tradesummary_corrections_total", ())] == 2
    assert got[("tradesummary_records_read_total", (("query", "medallion"),))] == 10
    assert got[("tradesummary_freshness_seconds_count", ())] == 1
    assert got[("tradesummary_batch_records_sum", (("query", "medallion"),))] == 10


def test_the_health_snapshot_gives_lag_and_both_offsets_per_topic_and_partition():
    got = samples(health_families(SNAPSHOT))
    part0 = (("partition", "0"), ("query", "medallion"), ("topic", "trades"))
    assert got[("tradesummary_consumer_lag", part0)] == 30
    assert got[("tradesummary_consumer_committed_offset", part0)] == 70
    assert got[("tradesummary_kafka_end_offset", (("partition", "1"), ("topic", "trades")))] == 30
    assert got[("tradesummary_query_restarts_total", (("query", "medallion"),))] == 2
    assert got[("tradesummary_producer_sent_total", ())] == 1234
    assert got[("tradesummary_producer_enabled", ())] == 1
    assert got[("tradesummary_kafka_unreachable", ())] == 0
    assert got[("tradesummary_watermark_timestamp_seconds", (("query", "medallion"),))] == \
        datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc).timestamp()


def test_kafka_unreachable_and_no_producer_show_as_such():
    snapshot = {**SNAPSHOT, "producer": None,
                "kafka": {"error": "timed out", "unreachable_since": "2026-03-02T10:00:00+00:00", "partitions": []}}
    got = samples(health_families(snapshot))
    assert got[("tradesummary_kafka_unreachable", ())] == 1
    assert not any(name.startswith("tradesummary_producer") for name, _ in got)


def test_the_embedded_brokers_restarts_are_counted_only_where_the_app_supervises_it():
    broker = {"supervised": True, "state": "up", "restart_count": 1, "restarts": [], "error": None}
    got = samples(health_families({**SNAPSHOT, "broker": broker}))
    assert got[("tradesummary_broker_restarts_total", ())] == 1
    for unsupervised in (None, {**broker, "supervised": False}):  # --bootstrap-servers; a reused broker
        assert not any(name.startswith("tradesummary_broker") for name, _ in
                       samples(health_families({**SNAPSHOT, "broker": unsupervised})))


def test_an_empty_snapshot_still_scrapes():
    assert samples(health_families({}))[("tradesummary_kafka_unreachable", ())] == 0


def test_a_topic_with_colons_keeps_them():
    assert topic_partition("a:b:7") == ("a:b", "7")


def test_tables_are_labelled_by_their_catalog_name():
    got = samples(table_families({"gold/trade_summary": (12, 4096, 3)}))
    assert got[("tradesummary_table_version", (("table", "gold/trade_summary"),))] == 12
    assert got[("tradesummary_table_size_bytes", (("table", "gold/trade_summary"),))] == 4096


def test_the_exposition_holds_the_pipeline_the_snapshot_and_the_process():
    text, content_type = exposition(lambda: SNAPSHOT)()
    assert content_type.startswith("text/plain; version=0.0.4")
    names = {name for name, _ in scraped(text.decode())}
    assert {"tradesummary_consumer_lag", "tradesummary_trades_total", "tradesummary_freshness_seconds_bucket",
            "process_resident_memory_bytes", "python_gc_objects_collected_total"} <= names


def test_metrics_are_served_on_the_dashboards_server_and_alone_behind_the_host_guard():
    from run import serve_metrics

    scrape = exposition(lambda: SNAPSHOT)
    alone = serve_metrics(None, scrape, ("127.0.0.1", "metrics.internal")).test_client()
    answer = alone.get("/metrics", headers={"Host": "metrics.internal:8050"})
    assert answer.status_code == 200 and answer.content_type.startswith("text/plain; version=0.0.4")
    assert "tradesummary_consumer_lag" in answer.get_data(as_text=True)
    assert alone.get("/metrics", headers={"Host": "evil.example"}).status_code == 403


@needs_promtool
def test_the_scraped_text_passes_promtools_lint():
    text, _ = exposition(lambda: SNAPSHOT)()
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


@needs_promtool
def test_the_alert_rules_are_valid_and_their_unit_tests_pass():
    folder = REPO / "docs" / "prometheus"
    for command in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]):
        done = subprocess.run([PROMTOOL, *command], cwd=folder, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_run_serves_metrics_on_the_dashboards_port_and_alone_with_no_dashboard(tmp_path):
    from types import SimpleNamespace

    from run import create_dashboard, serve_metrics
    from streaming.run.app import App
    from tests.support.kafka import free_port

    for dashboard in (True, False):
        settings = Settings(data_dir=tmp_path / str(dashboard), host="127.0.0.1", port=free_port(),
                            dashboard_enabled=dashboard)
        app = App(settings, dashboard=create_dashboard, metrics=serve_metrics)
        app.health = SimpleNamespace(snapshot=lambda: SNAPSHOT)  # type: ignore[assignment]
        app._bind_web_address()
        app._start_dashboard() if dashboard else app._start_metrics_alone()
        try:
            text = get_text(f"http://127.0.0.1:{settings.port}/metrics")
            assert 'tradesummary_consumer_lag{partition="0",query="medallion",topic="trades"} 30.0' in text
            status = 200 if dashboard else 404  # /api/status is the page's: not served without it
            assert http_status(f"http://127.0.0.1:{settings.port}/api/status") == status
        finally:
            assert app.web is not None
            app.web.shutdown()


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_grafana_board_parses_and_names_only_metrics_the_app_exports():
    import re

    board = json.loads((REPO / "docs" / "grafana" / "trade-summary.json").read_text())
    pipeline = PipelineMetrics()
    pipeline.batch_seconds.labels("medallion").observe(0.2)
    pipeline.batch_written("medallion", 2, 1, 0, {"empty_value": 1}, datetime.now(timezone.utc))
    text, _ = exposition(lambda: SNAPSHOT, pipeline=pipeline)()
    families = list(text_string_to_metric_families(text.decode()))
    exported = {f.name for f in families} | {s.name for f in families for s in f.samples}
    named = {name for panel in board["panels"] for target in panel["targets"]
             for name in re.findall(r"\b(?:tradesummary|process)_\w+", target["expr"])}
    assert len(board["panels"]) >= 10 and named
    assert sorted(named - exported) == []


def test_the_seconds_since_the_last_trade_count_up_and_an_idle_close_shows():
    a_minute_ago = status_time(datetime.now(timezone.utc) - timedelta(minutes=1))
    quiet = {**SNAPSHOT["queries"][0], "last_trade_at": a_minute_ago,
             "closed_when_quiet": {"windows_up_to": "2026-03-02T16:59:58.000Z", "quiet_s": 900}}
    got = samples(health_families({**SNAPSHOT, "queries": [quiet]}))
    medallion = (("query", "medallion"),)
    assert 60 <= got[("tradesummary_seconds_since_last_trade", medallion)] < 120
    assert got[("tradesummary_closed_when_quiet", medallion)] == 1
    assert samples(health_families(SNAPSHOT))[("tradesummary_closed_when_quiet", medallion)] == 0
