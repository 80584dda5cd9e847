"""A broker that stalls: the pipeline rides it out (the source tries again each trigger for
--kafka-retry-timeout, and the page says Kafka is unreachable meanwhile), and ends with exit code
1 only when the retries and then the query's restarts run out. The broker is the
test's own (started here, stopped cleanly), since the test freezes it with SIGSTOP."""

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streaming.kafka.admin import wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker
from tests.support.corpus import DAY, trade
from tests.support.kafka import TopicWriter, free_port, new_topic
from tests.support.process import RunPy
from tests.support.waiting import wait_for

STALL_S = 60  # as long as the stall that used to fail the pipeline for good


@pytest.fixture
def own_broker(tmp_path):
    broker = EmbeddedBroker(tmp_path / "own-broker", free_port())
    broker.start()
    pid = broker.pid
    try:
        wait_until_reachable({"bootstrap.servers": broker.bootstrap_servers})
        yield broker, pid
    finally:
        os.kill(pid, signal.SIGCONT)
        broker.stop()


def gold_rows(data: Path) -> int:
    gold = data / "gold" / "trade_summary"
    return len(DeltaTable(str(gold)).to_pandas()) if (gold / "_delta_log").exists() else 0


def api_status(web: int) -> dict:
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/status", timeout=10).read())


def test_a_broker_that_stalls_for_a_while_is_ridden_out_and_said_while_it_lasts(own_broker, tmp_path):
    broker, pid = own_broker
    topic, data, web = new_topic(broker.bootstrap_servers), tmp_path / "data", free_port()
    writer = TopicWriter(broker.bootstrap_servers, topic)
    app = RunPy("--no-producer", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                "--data-dir", str(data), "--port", str(web))
    try:
        app.wait_for_line(f"dashboard at http://127.0.0.1:{web}")
        writer.send(trade("b1", "BUY", 1, 10.0, DAY + "09:01:00Z"))
        wait_for(lambda: gold_rows(data) == 1, 90, what="the first gold row")

        os.kill(pid, signal.SIGSTOP)  # the broker answers nothing, for longer than a Kafka request waits
        stalled = time.monotonic()
        wait_for(lambda: api_status(web)["kafka"].get("unreachable_since"), 60, interval_s=1,
                 what="/api/status to say Kafka is unreachable")
        time.sleep(max(0.0, STALL_S - (time.monotonic() - stalled)))
        os.kill(pid, signal.SIGCONT)

        writer.send(trade("b2", "SELL", 1, 10.0, DAY + "09:20:00Z"))
        wait_for(lambda: gold_rows(data) == 2, 180, what="gold to carry on after the stall")
        try:
            wait_for(lambda: api_status(web)["kafka"].get("unreachable_since") is None, 60, interval_s=1,
                     what="/api/status to stop saying Kafka is unreachable")
        except AssertionError as failed:  # what the app said and logged, to tell why
            raise AssertionError(f"{failed}: {api_status(web)['kafka']}\n{app.output[-8000:]}") from None
        assert all(q["restarts"] == 0 and q["error"] is None for q in api_status(web)["queries"]), app.output
        code, _ = app.terminate()
        assert code == 0, app.output
    finally:
        app.kill()


def test_queries_that_fail_for_good_end_the_app_with_exit_code_1(own_broker, tmp_path):
    broker, pid = own_broker
    topic, data = new_topic(broker.bootstrap_servers), tmp_path / "data"
    app = RunPy("--no-dashboard", "--no-producer", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                "--data-dir", str(data), "--max-query-restarts", "0", "--kafka-retry-timeout", "5 seconds")
    try:
        app.wait_for_line("query 'medallion' started")
        os.kill(pid, signal.SIGSTOP)
        assert app.wait(180) == 1, app.output
        assert "failed for good after 0 restarts" in app.output and "cannot reach Kafka" in app.output
    finally:
        os.kill(pid, signal.SIGCONT)
        app.kill()
