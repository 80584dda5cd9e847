"""The simulation survives its broker losing records: a broker killed and restarted gives out
again the sequence numbers the idempotent producer had sent, a fatal error for that producer.
The simulator says so (failed, last_error, the log), replaces its producer and carries on; and
it still stops promptly. The broker here is the test's own, since the test kills it."""

import json
import os
import signal
import time
from datetime import datetime, timedelta, timezone

from streaming.config import Simulation
from streaming.kafka.admin import wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker
from streaming.simulation.simulator import TradeSimulator
from tests.support.kafka import free_port, new_topic
from tests.support.waiting import wait_for


def kill(broker: EmbeddedBroker) -> None:
    pid = json.loads((broker.data_dir / "noida.control.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
             or None, 10, what="the broker to die")


def test_a_fatal_producer_error_is_reported_and_the_simulation_carries_on(tmp_path):
    broker = EmbeddedBroker(tmp_path / "broker", free_port())
    broker.start()
    simulator = None
    try:
        wait_until_reachable({"bootstrap.servers": broker.bootstrap_servers})
        topic = new_topic(broker.bootstrap_servers)
        simulator = TradeSimulator({"bootstrap.servers": broker.bootstrap_servers}, topic, Simulation(rate=500),
                                   timedelta(minutes=15), timedelta(minutes=30),
                                   market_start=datetime(2026, 3, 2, 9, tzinfo=timezone.utc))
        simulator.start()
        wait_for(lambda: simulator.stats().sent > 1000, 30, what="trades acknowledged")
        kill(broker)  # it loses the last seconds of what it had acknowledged
        broker = EmbeddedBroker(tmp_path / "broker", broker.port)
        broker.start()
        wait_until_reachable({"bootstrap.servers": broker.bootstrap_servers})

        replaced = wait_for(lambda: simulator.stats() if simulator.stats().producer_restarts else None, 60,
                            what="the producer to be replaced after its fatal error")
        assert "fatal producer error" in replaced.last_error and replaced.failed > 0
        sent = simulator.stats().sent
        wait_for(lambda: simulator.stats().sent > sent + 500, 30, what="trades sent by the new producer")
        assert simulator._thread.is_alive()
    finally:
        if simulator is not None:
            began = time.monotonic()
            simulator.stop(timeout_s=5)
            assert time.monotonic() - began < 15
        broker.stop()
