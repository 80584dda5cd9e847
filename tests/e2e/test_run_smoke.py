"""Smoke tests of `python run.py`: the real app, on free ports, stopped by SIGTERM."""

import json
import socket
import sys
import urllib.error
import urllib.request

import pyspark
import pytest
from deltalake import DeltaTable

from bench.sampling import child_pids
from streaming.kafka.broker import EmbeddedBroker
from tests.support.corpus import trade
from tests.support.kafka import TopicWriter, free_port
from tests.support.process import REPO, Command, RunPy
from tests.support.waiting import wait_for


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def stray_broker_guard(tmp_path):
    """If run.py dies uncleanly, stop the broker it left in the data dir."""
    yield
    EmbeddedBroker(tmp_path / "data" / "broker", 0).stop()  # its state file says which process, if any


def test_headless_run_fills_gold_from_produced_trades_and_exits_0_on_sigterm(tmp_path, stray_broker_guard):
    data, port = tmp_path / "data", free_port()
    app = RunPy("--no-dashboard", "--no-producer", "--data-dir", str(data), "--broker-port", str(port),
                "--window", "15 minutes", "--watermark", "30 minutes", "--conf", "spark.driver.memory=700m")
    try:
        app.wait_for_line("topic 'trades' created")
        app.wait_for_line("with --conf spark.driver.memory")  # the key only: a value may be a secret
        app.wait_for_line(f"Spark {pyspark.__version__} up in ")  # the JVM runs
        assert "700m" not in app.output
        jvm = next(command_line(pid) for pid in child_pids(app.proc.pid) if "-Xmx700m" in command_line(pid))
        assert "-XX:+UseSerialGC" in jvm  # the driver holds no batch: a small collector (docs/spark.md)
        writer = TopicWriter(f"127.0.0.1:{port}", "trades")
        writer.send(trade("s1", "BUY", 4, 25.0, "2026-03-02T09:05:00Z"),
                    trade("s2", "SELL", 1, 40.0, "2026-03-02T09:20:00Z"))
        app.wait_for_line("query 'medallion' started")
        gold = data / "gold" / "trade_summary"

        def two_windows():
            if not (gold / "_delta_log").exists():
                return None
            frame = DeltaTable(str(gold)).to_pandas()
            return frame if len(frame) == 2 else None

        frame = wait_for(two_windows, 90, what="two gold windows").sort_values("window_start")
        assert list(frame["buy_amount"]) == [100.0, 0.0]
        assert list(frame["sell_amount"]) == [0.0, 40.0]
        assert list(frame["settlement_amount"]) == [100.0, -40.0]
        code, took = app.terminate()
        assert code == 0, app.output
        assert took < 30
        assert "embedded broker stopped" in app.output and "Traceback" not in app.output
    finally:
        app.kill()


def test_a_second_app_on_the_same_data_dir_is_refused_at_once_and_the_first_carries_on(tmp_path,
                                                                                      stray_broker_guard):
    data, port = tmp_path / "data", free_port()
    first = RunPy("--no-dashboard", "--no-producer", "--data-dir", str(data), "--broker-port", str(port))
    second = None
    try:
        first.wait_for_line("query 'medallion' started")
        second = RunPy("--no-producer", "--data-dir", str(data), "--broker-port", str(port),
                       "--port", str(free_port()))
        assert second.wait(60) == 1, second.output
        assert f"another Trade Summary is running on {data} (PID {first.proc.pid}" in second.output
        assert "Traceback" not in second.output and "embedded broker stopped" not in second.output

        TopicWriter(f"127.0.0.1:{port}", "trades").send(trade("d1", "BUY", 2, 10.0, "2026-03-02T09:05:00Z"))
        gold = data / "gold" / "trade_summary"
        wait_for(lambda: len(DeltaTable(str(gold)).to_pandas()) == 1, 90, what="the first app's gold row")
        code, _ = first.terminate()
        assert code == 0 and "embedded broker stopped" in first.output, first.output
    finally:
        first.kill()
        if second is not None:
            second.kill()


def test_dashboard_serves_the_page_and_its_data(tmp_path, stray_broker_guard):
    port, web = free_port(), free_port()
    app = RunPy("--no-producer", "--data-dir", str(tmp_path / "data"), "--broker-port", str(port),
                "--port", str(web), "--log-every", "1", "--close-idle-after", "10 seconds")
    try:
        app.wait_for_line(f"dashboard at http://127.0.0.1:{web}")
        page = urllib.request.urlopen(f"http://127.0.0.1:{web}/", timeout=10).read().decode()
        assert "<title>Trade Summary</title>" in page
        layout = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/_dash-layout", timeout=10).read())
        assert "trade-summary-chart" in json.dumps(layout)

        # Three trades: /api/status shows the query past them, and no lag left on any partition.
        TopicWriter(f"127.0.0.1:{port}", "trades").send(
            *(trade(f"h{i}", "BUY", 1, 10.0, f"2026-03-02T09:0{i}:00Z", account_id=f"A{i}") for i in range(3)))

        def caught_up():
            status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/status", timeout=10).read())
            partitions = status["kafka"]["partitions"]
            done = (sum(p["end_offset"] for p in partitions) == 3 and len(status["queries"]) == 1
                    and all(lag == 0 for lag in status["kafka"]["total_lag"].values()))
            return status if done else None

        status = wait_for(caught_up, 90, interval_s=1, what="/api/status to show the pipeline caught up")
        assert {q["name"] for q in status["queries"]} == {"medallion"}
        assert all(q["active"] and q["error"] is None for q in status["queries"])
        assert [p["partition"] for p in status["kafka"]["partitions"]] == ["trades:0", "trades:1", "trades:2"]
        assert status["producer"]["enabled"] is False and status["lag_history"]
        # The chart's window as of now, and as of before the trades: from gold's history.
        summary = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/summary", timeout=10).read())
        assert summary["day"] == "2026-03-02"
        assert [(w["window_start"], w["buy"], w["net"], w["trades"], w["cause"]) for w in summary["windows"]] == [
            ("2026-03-02T09:00:00Z", 30.0, 30.0, 3, "on_time")]
        before = json.loads(urllib.request.urlopen(
            f"http://127.0.0.1:{web}/api/summary?day=2026-03-02&as_of=2000-01-01T00:00:00Z", timeout=10).read())
        assert before["windows"] == []
        lateness = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/lateness", timeout=10).read())
        assert (lateness["day"], lateness["watermark_s"]) == ("2026-03-02", 1800.0)
        assert lateness["trades"] + lateness["not_judged"] == 3 and all(p["too_late"] == 0 for p in lateness["curve"])
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(f"http://127.0.0.1:{web}/api/summary?day=tomorrow", timeout=10)
        assert bad.value.code == 400 and "YYYY-MM-DD" in json.loads(bad.value.read())["error"]
        app.wait_for_line("status: medallion active")
        # 10 s with no new trade: the watermark moves up to the latest event time seen.
        app.wait_for_line("input quiet for 10 seconds: windows up to 2026-03-02T09:02:00+00:00 closed", 60)

        def closed():  # in the health snapshot's next sample
            status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/status", timeout=10).read())
            return status["queries"][0] if status["queries"][0]["closed_when_quiet"] else None

        query = wait_for(closed, 10, interval_s=0.5, what="/api/status to show the idle close")
        assert query["watermark"] == query["closed_when_quiet"]["windows_up_to"] == "2026-03-02T09:02:00.000Z"
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{web}/metrics", timeout=10).read().decode()
        assert 'tradesummary_closed_when_quiet{query="medallion"} 1.0' in metrics
        code, _ = app.terminate()
        assert code == 0, app.output
    finally:
        app.kill()


def test_a_taken_broker_port_is_named_with_the_flag_to_change_it(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        app = RunPy("--no-dashboard", "--data-dir", str(tmp_path / "data"), "--broker-port", str(port))
        code = app.wait(60)
    assert code == 1
    assert f"port {port} is already in use" in app.output and "--broker-port" in app.output
    assert "Traceback" not in app.output


def test_a_taken_dashboard_port_is_named_with_the_flag_to_change_it(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        app = RunPy("--data-dir", str(tmp_path / "data"), "--broker-port", str(free_port()), "--port", str(port))
        code = app.wait(60)
    assert code == 1 and f"port {port}" in app.output and "--port" in app.output


def test_a_wrong_flag_prints_usage_without_a_traceback():
    app = RunPy("--window", "soon")
    assert app.wait(30) == 2
    assert "invalid duration 'soon'" in app.output and "Traceback" not in app.output


def test_an_unreachable_kafka_is_a_clear_error(tmp_path):
    app = RunPy("--no-dashboard", "--data-dir", str(tmp_path / "data"),
                "--bootstrap-servers", f"127.0.0.1:{free_port()}")
    assert app.wait(90) == 1
    assert "cannot reach Kafka at 127.0.0.1" in app.output and "Traceback" not in app.output


def test_missing_java_is_a_clear_error(tmp_path):
    app = RunPy("--no-dashboard", "--data-dir", str(tmp_path / "data"),
                env={"JAVA_HOME": str(tmp_path / "no-jdk")})
    assert app.wait(60) == 1
    assert "Java is required by Spark" in app.output and "Traceback" not in app.output


def test_relative_paths_are_taken_from_the_directory_run_py_starts_in(tmp_path):
    # The broker's JVM runs in its own data dir and Spark's in another: a relative path handed on
    # as given would point elsewhere (the README's own `python run.py` died so).
    desk, port = tmp_path / "desk", free_port()
    desk.mkdir()
    app = Command([sys.executable, str(REPO / "run.py"), "--no-dashboard", "--no-producer", "--data-dir", "lake",
                   "--broker-dir", "kafka", "--checkpoint-dir", "ck", "--broker-port", str(port)], cwd=desk)
    try:
        app.wait_for_line("query 'medallion' started", 180)
        TopicWriter(f"127.0.0.1:{port}", "trades").send(trade("r1", "BUY", 2, 10.0, "2026-03-02T09:05:00Z"))
        gold = desk / "lake" / "gold" / "trade_summary"
        wait_for(lambda: (gold / "_delta_log").exists() and len(DeltaTable(str(gold)).to_pandas()) == 1, 90,
                 what="the trade in gold under the start directory")
        code, _ = app.terminate()
        assert code == 0, app.output
    finally:
        app.kill()
        EmbeddedBroker(desk / "kafka", 0).stop()
    assert (desk / "kafka" / "server.properties").exists() and (desk / "ck" / "medallion").is_dir()
    assert not (REPO / "lake").exists() and not (desk / "kafka" / "kafka").exists()
