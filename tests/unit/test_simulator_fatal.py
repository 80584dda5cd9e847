"""A producer that hits a fatal error (librdkafka reports it through error_cb; e.g. 'out of order
sequence number' from a broker that lost records it had acknowledged) is unusable: the simulator
says so (failed, last_error, producer_restarts), replaces it and carries on, and still stops
promptly. A fake producer stands in for librdkafka's."""

import time
from datetime import datetime, timedelta, timezone

from confluent_kafka import KafkaError

from streaming.config import Simulation
from streaming.simulation import simulator as simulation
from tests.support.waiting import wait_for


class FakeProducer:
    """Acknowledges every record at once; the first one made turns fatal after 100 records."""

    made = 0

    def __init__(self, config: dict, error_cb):
        FakeProducer.made += 1
        self.breaks = FakeProducer.made == 1
        self.error_cb, self.sent, self.pending = error_cb, 0, 0

    def produce(self, topic, key=None, value=None, on_delivery=None):
        if self.breaks and self.sent >= 100:
            self.pending += 1  # stuck, as in a broken producer
            return
        self.sent += 1
        on_delivery(None, None)

    def poll(self, timeout=0):
        if self.breaks and self.sent >= 100 and self.pending:
            self.error_cb(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "out of order sequence number",
                                     fatal=True))
        return 0

    def flush(self, timeout=None):
        return 0

    def purge(self, **_):
        self.pending = 0

    def __len__(self):
        return self.pending


def test_a_fatal_producer_error_is_reported_and_the_simulation_carries_on(monkeypatch):
    FakeProducer.made = 0
    monkeypatch.setattr(simulation.clients, "producer", lambda config, **kw: FakeProducer(config, kw["error_cb"]))
    simulator = simulation.TradeSimulator({"bootstrap.servers": "unused:1"}, "trades", Simulation(rate=2000),
                                          timedelta(minutes=15), timedelta(minutes=30),
                                          market_start=datetime(2026, 3, 2, 9, tzinfo=timezone.utc))
    simulator.start()
    try:
        replaced = wait_for(lambda: simulator.stats() if simulator.stats().producer_restarts else None, 10,
                            what="the producer to be replaced after its fatal error")
        assert "fatal producer error" in replaced.last_error and "out of order" in replaced.last_error
        assert replaced.failed > 0  # its unacknowledged trades
        sent = simulator.stats().sent
        wait_for(lambda: simulator.stats().sent > sent + 500, 10, what="trades sent by the new producer")
        assert simulator._thread.is_alive() and FakeProducer.made == 2
    finally:
        began = time.monotonic()
        simulator.stop(timeout_s=5)
        assert time.monotonic() - began < 15
