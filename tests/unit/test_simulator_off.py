"""A simulation turned off with nothing in flight waits to be turned on: it serves its producer
seldom, not twenty times a second, and sends again as soon as it is turned on. A counting
producer stands in for librdkafka's."""

import time
from datetime import datetime, timedelta, timezone

from streaming.config import Simulation
from streaming.simulation import simulator as simulation
from tests.support.waiting import wait_for


class CountingProducer:
    """Acknowledges every record at once and counts the loop's polls."""

    def __init__(self, config: dict, error_cb):
        self.sent = self.polls = 0

    def produce(self, topic, key=None, value=None, on_delivery=None):
        self.sent += 1
        on_delivery(None, None)

    def poll(self, timeout=0):
        self.polls += 1
        return 0

    def flush(self, timeout=None):
        return 0

    def __len__(self):
        return 0


def test_an_off_simulation_waits_to_be_turned_on_and_sends_as_soon_as_it_is(monkeypatch):
    monkeypatch.setattr(simulation.clients, "producer", lambda config, **kw: CountingProducer(config, kw["error_cb"]))
    monkeypatch.setattr(simulation.TradeSimulator, "OFF_WAIT_S", 120.0)  # only a wake-up can end its wait
    simulator = simulation.TradeSimulator({"bootstrap.servers": "unused:1"}, "trades", Simulation(rate=500),
                                          timedelta(minutes=15), timedelta(minutes=30),
                                          market_start=datetime(2026, 3, 2, 9, tzinfo=timezone.utc), enabled=False)
    producer = simulator._producer
    simulator.start()
    try:
        wait_for(lambda: producer.polls >= 1, 10, what="the loop's first poll")
        time.sleep(0.3)  # six ticks of a loop that would poll while off
        assert (producer.polls, producer.sent) == (1, 0)

        simulator.set_enabled(True)
        wait_for(lambda: simulator.stats().sent >= 100, 10, what="trades once turned on")

        simulator.set_enabled(False)
        time.sleep(0.3)  # into its wait
    finally:
        simulator.stop(timeout_s=5)
    assert not simulator._thread.is_alive()  # stop() ended the wait
