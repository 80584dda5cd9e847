"""The simulation survives its broker being killed (SIGKILL) and restarted: the producer rides the
outage out and carries on sending, the broker kept every trade it had acknowledged, and the
idempotent producer's retries across the restart are not written twice; the simulator still
stops promptly. (A producer's fatal error, which a broker that lost acknowledged records used to
cause, is tests/unit/test_simulator_fatal.py.) The broker here is the test's own, since the
test kills it."""

import time
from datetime import datetime, timedelta, timezone

from streaming.config import Simulation
from streaming.kafka import clients
from streaming.kafka.broker import EmbeddedBroker
from streaming.simulation.simulator import TradeSimulator
from tests.support.kafka import free_port, kill_broker, new_topic
from tests.support.waiting import wait_for


def records_in(bootstrap: str, topic: str) -> int:
    consumer = clients.consumer({"bootstrap.servers": bootstrap}, "recovery-check")
    try:
        return sum(high - low for low, high in clients.watermark_offsets(consumer, topic, 10).values())
    finally:
        consumer.close()


def simulator_on(bootstrap: str, topic: str, rate: float) -> TradeSimulator:
    return TradeSimulator({"bootstrap.servers": bootstrap}, topic, Simulation(rate=rate, seed=5),
                          timedelta(minutes=15), timedelta(minutes=30),
                          market_start=datetime(2026, 3, 2, 9, tzinfo=timezone.utc))


def stop_promptly(simulator: TradeSimulator) -> None:
    began = time.monotonic()
    simulator.stop(timeout_s=5)
    assert time.monotonic() - began < 15


def test_a_broker_killed_and_restarted_under_the_simulation_loses_and_doubles_no_trade(tmp_path):
    broker = EmbeddedBroker(tmp_path / "broker", free_port())
    broker.start()
    simulator = None
    try:
        topic = new_topic(broker.bootstrap_servers)
        simulator = simulator_on(broker.bootstrap_servers, topic, rate=500)
        simulator.start()
        wait_for(lambda: simulator.stats().sent > 1000, 30, what="trades acknowledged")
        kill_broker(broker)  # mid-stream: batches in flight, none of them acknowledged yet
        acknowledged = simulator.stats().sent
        broker = EmbeddedBroker(tmp_path / "broker", broker.port)
        broker.start()
        wait_for(lambda: simulator.stats().sent > acknowledged + 1000, 60, what="trades sent after the restart")
        assert simulator._thread.is_alive()
        stop_promptly(simulator)
        stats, simulator = simulator.stats(), None
        assert stats.failed == 0 and stats.producer_restarts == 0, stats
        assert records_in(broker.bootstrap_servers, topic) == stats.sent  # none lost, none written twice
    finally:
        if simulator is not None:
            stop_promptly(simulator)
        broker.stop()
