"""A real Prometheus server (Debian's, tests/install-prometheus.sh) scraping `python run.py`'s
GET /metrics on the dashboard's port: its query API gives the lag and the trade counters, and they agree
with /api/status's figures and with the tables' row counts; promtool lints the scraped text."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest
from deltalake import DeltaTable

from tests.support.corpus import trade
from tests.support.kafka import TopicWriter, free_port
from tests.support.process import RunPy
from tests.support.waiting import wait_for

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                reason="Prometheus: bash tests/install-prometheus.sh")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read()


@pytest.fixture
def prometheus(tmp_path):
    """Start one scraping the app at the given port every second; yields (app port, query function)."""
    app_port, web_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "trade-summary", "metrics_path": "/metrics",
                            "static_configs": [{"targets": [f"127.0.0.1:{app_port}"]}]}]}))
    server = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{web_port}", "--log.level=warn"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def query(expression: str) -> dict[tuple, float]:
        """An instant query's result: each series' labels (without job and instance) -> its value."""
        answer = json.loads(get(f"http://127.0.0.1:{web_port}/api/v1/query?"
                                + urllib.parse.urlencode({"query": expression})))
        assert answer["status"] == "success", answer
        return {tuple(sorted((k, v) for k, v in row["metric"].items() if k not in ("job", "instance", "__name__"))):
                float(row["value"][1]) for row in answer["data"]["result"]}

    try:
        yield app_port, query
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)


def rows(path) -> int:
    return len(DeltaTable(str(path)).to_pandas())


def test_prometheus_scrapes_the_lag_and_trade_counters_and_they_agree_with_the_status_and_tables(
        tmp_path, broker, topic, prometheus):
    app_port, query = prometheus
    data = tmp_path / "data"
    app = RunPy("--no-producer", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                "--data-dir", str(data), "--port", str(app_port), "--window", "15 minutes",
                "--watermark", "30 minutes")
    writer = TopicWriter(broker.bootstrap_servers, topic)
    try:
        app.wait_for_line(f"dashboard at http://127.0.0.1:{app_port}")
        # Batch one: three on-time trades; the latest (10:00) sets the watermark at 09:30.
        writer.send(trade("p1", "BUY", 4, 25.0, "2026-03-02T09:05:00Z"),
                    trade("p2", "SELL", 1, 40.0, "2026-03-02T09:20:00Z"),
                    trade("p3", "BUY", 2, 10.0, "2026-03-02T10:00:00Z"))
        wait_for(lambda: (data / "gold" / "trade_summary" / "_delta_log").exists()
                 and rows(data / "gold" / "trade_summary") == 3, 120, what="three gold windows")
        # Then a late trade for a window the chart showed (a correction), one too late, a
        # duplicate of p1 and a record that is not JSON.
        writer.send(trade("p4", "BUY", 1, 5.0, "2026-03-02T09:40:00Z"),
                    trade("p5", "SELL", 1, 7.0, "2026-03-02T09:10:00Z"),
                    trade("p1", "BUY", 4, 25.0, "2026-03-02T09:05:00Z"))
        writer.send_raw(key=b"ACC-1", value=b"not json")
        wait_for(lambda: rows(data / "bronze" / "trades_raw") == 7 and rows(data / "gold" / "late_trades") == 1
                 and rows(data / "silver" / "quarantine") == 1, 120, what="the second batch in every table")

        tables = {name: rows(data / name) for name in ("bronze/trades_raw", "silver/trades", "silver/quarantine",
                                                        "gold/late_trades", "gold/corrections")}
        late_applied = int(DeltaTable(str(data / "gold" / "corrections")).to_pandas()["late_trades"].sum())
        expected = {"on_time": tables["silver/trades"] - tables["gold/late_trades"] - late_applied,
                    "late_applied": late_applied, "too_late": tables["gold/late_trades"], "duplicate": 1,
                    "quarantined": tables["silver/quarantine"]}
        assert tables["silver/trades"] == 5 and late_applied == 1, tables

        def scraped_counters():
            got = {dict(labels)["outcome"]: value for labels, value in query("tradesummary_trades_total").items()}
            return got if got == expected else None

        wait_for(scraped_counters, 60, what=f"Prometheus's trade counters at {expected}")
        assert sum(query("tradesummary_records_read_total").values()) == tables["bronze/trades_raw"]
        assert sum(query("tradesummary_corrections_total").values()) == tables["gold/corrections"]
        assert query("tradesummary_quarantined_records_total") == {(("reason", "not_an_object"),): 1.0}

        # The lag and offsets: Prometheus's series against /api/status's, per partition, once caught up.
        def offsets_agree():
            status = json.loads(get(f"http://127.0.0.1:{app_port}/api/status"))
            partitions = {row["partition"].rsplit(":", 1)[1]: row for row in status["kafka"]["partitions"]}
            ends = {dict(k)["partition"]: v for k, v in query("tradesummary_kafka_end_offset").items()}
            lags = {dict(k)["partition"]: v for k, v in query('tradesummary_consumer_lag{query="medallion"}').items()}
            done = {dict(k)["partition"]: v for k, v in query("tradesummary_consumer_committed_offset").items()}
            if sum(ends.values()) != 7 or ends != {p: row["end_offset"] for p, row in partitions.items()}:
                return None
            if lags != {p: row["lag"]["medallion"] for p, row in partitions.items()} or any(lags.values()):
                return None
            return done, ends

        done, ends = wait_for(offsets_agree, 60, what="Prometheus's offsets and lag as /api/status gives them")
        assert done == ends  # every record processed: the committed offsets are the end offsets
        text = get(f"http://127.0.0.1:{app_port}/metrics")
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30)
        assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()
        gold_version = DeltaTable(str(data / "gold" / "trade_summary")).version()
        # The tables' figures are refreshed every 30 s (streaming/run/metrics.py TABLES_EVERY_S).
        wait_for(lambda: query('tradesummary_table_version{table="gold/trade_summary"}') == {(("table",
                 "gold/trade_summary"),): gold_version}, 90, what=f"gold's version {gold_version} in Prometheus")
        assert query('tradesummary_table_size_bytes{table="silver/trades"}')[(("table", "silver/trades"),)] > 0
        assert query("process_resident_memory_bytes")
        code, _ = app.terminate()
        assert code == 0, app.output
    finally:
        app.kill()
