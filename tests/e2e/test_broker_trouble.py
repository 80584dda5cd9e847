"""A broker that stalls: the pipeline rides it out by restarting its queries from their
checkpoints, and ends with exit code 1 only when the restarts run out. The broker is the
test's own (started here, stopped cleanly), since the test freezes it with SIGSTOP."""

import json
import os
import signal
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streaming.kafka.admin import wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker
from tests.support.corpus import DAY, trade
from tests.support.kafka import TopicWriter, free_port, new_topic
from tests.support.process import RunPy
from tests.support.waiting import wait_for


@pytest.fixture
def own_broker(tmp_path):
    broker = EmbeddedBroker(tmp_path / "own-broker", free_port())
    broker.start()
    pid = json.loads((broker.data_dir / "noida.control.json").read_text())["pid"]
    try:
        wait_until_reachable({"bootstrap.servers": broker.bootstrap_servers})
        yield broker, pid
    finally:
        os.kill(pid, signal.SIGCONT)
        broker.stop()


def gold_rows(data: Path) -> int:
    gold = data / "gold" / "trade_summary"
    return len(DeltaTable(str(gold)).to_pandas()) if (gold / "_delta_log").exists() else 0


def test_a_broker_that_stalls_for_a_while_does_not_stop_the_pipeline_for_good(own_broker, tmp_path):
    broker, pid = own_broker
    topic, data = new_topic(broker.bootstrap_servers), tmp_path / "data"
    writer = TopicWriter(broker.bootstrap_servers, topic)
    app = RunPy("--no-dashboard", "--no-producer", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                "--data-dir", str(data), "--max-query-restarts", "20")
    try:
        app.wait_for_line("query 'medallion' started")
        writer.send(trade("b1", "BUY", 1, 10.0, DAY + "09:01:00Z"))
        wait_for(lambda: gold_rows(data) == 1, 90, what="the first gold row")

        os.kill(pid, signal.SIGSTOP)  # the broker answers nothing
        app.wait_for_line("restarting it from its checkpoint", timeout_s=120)
        os.kill(pid, signal.SIGCONT)

        writer.send(trade("b2", "SELL", 1, 10.0, DAY + "09:20:00Z"))
        wait_for(lambda: gold_rows(data) == 2, 180, what="gold to carry on after the stall")
        app.wait_for_line("restarted from its checkpoint", timeout_s=60)
        code, _ = app.terminate()
        assert code == 0, app.output
    finally:
        app.kill()


def test_queries_that_fail_for_good_end_the_app_with_exit_code_1(own_broker, tmp_path):
    broker, pid = own_broker
    topic, data = new_topic(broker.bootstrap_servers), tmp_path / "data"
    app = RunPy("--no-dashboard", "--no-producer", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                "--data-dir", str(data), "--max-query-restarts", "0")
    try:
        app.wait_for_line("query 'medallion' started")
        os.kill(pid, signal.SIGSTOP)
        assert app.wait(180) == 1, app.output
        assert "failed for good after 0 restarts" in app.output and "cannot reach Kafka" in app.output
    finally:
        os.kill(pid, signal.SIGCONT)
        app.kill()
