"""The producer simulation: the market of market.py, sent to Kafka.

`TradeSimulator` runs the market on a thread with an idempotent producer and exposes
thread-safe controls and counters for the dashboard.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Mapping

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from streaming.config import Simulation
from streaming.kafka import clients
from streaming.simulation.market import (
    MALFORMED_SAMPLES,
    SYMBOLS,
    MarketClock,
    format_event_time,
    late_delay,
    make_trade,
    market_open_on,
)

log = logging.getLogger(__name__)


@dataclass
class SimulatorStats:
    enabled: bool
    rate: float
    market_time: str
    sent: int
    failed: int
    late: int
    too_late: int
    duplicates: int
    malformed: int
    last_error: str | None
    producer_restarts: int = 0  # a producer that hit a fatal error is replaced by a new one


class TradeSimulator:
    """Produces simulated trades on a background thread; start/stop/knobs are thread-safe."""

    TICK_S = 0.05
    OFF_WAIT_S = 1.0  # while off with nothing in flight: the producer's callbacks are still served, seldom

    def __init__(
        self,
        client_config: Mapping[str, str],
        topic: str,
        simulation: Simulation,
        window: timedelta,
        watermark: timedelta,
        market_start: datetime,
        enabled: bool = True,
    ):
        self.topic = topic
        self.window = window
        self.watermark = watermark
        self._sim = simulation
        self._rng = random.Random(simulation.seed)
        self._prices = dict(SYMBOLS)
        self._clock = MarketClock(market_start, simulation.clock_speed)
        self._lock = threading.Lock()
        self._enabled = threading.Event()
        if enabled:
            self._enabled.set()
        self._stopping = threading.Event()
        self._wake = threading.Event()  # turned on, or stopping: ends the loop's wait while off
        self._counts = dict(sent=0, failed=0, late=0, too_late=0, duplicates=0, malformed=0, producer_restarts=0)
        self._last_error: str | None = None
        self._client_config = dict(client_config)
        self._fatal: str | None = None  # set by librdkafka's error callback: the producer is unusable
        self._producer = self._new_producer()
        self._thread = threading.Thread(target=self._run, name="trade-simulator", daemon=True)

    # -- controls ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def set_enabled(self, enabled: bool) -> None:
        (self._enabled.set if enabled else self._enabled.clear)()
        if enabled:
            self._wake.set()

    @property
    def enabled(self) -> bool:
        return self._enabled.is_set()

    def configure(self, **knobs) -> Simulation:
        """Change simulation knobs (rate, late_share, ...) while running."""
        with self._lock:
            self._sim = dataclasses.replace(self._sim, **knobs)
            self._clock.speed = self._sim.clock_speed
            return self._sim

    @property
    def simulation(self) -> Simulation:
        with self._lock:
            return self._sim

    def stats(self) -> SimulatorStats:
        with self._lock:
            return SimulatorStats(
                enabled=self.enabled, rate=self._sim.rate, market_time=format_event_time(self._clock.now()),
                last_error=self._last_error, **self._counts,
            )

    def stop(self, timeout_s: float = 10.0) -> None:
        """Within 2 x timeout_s, whatever state the producer is in."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if self._fatal is not None:  # a flush would serve callbacks of a broken producer, which hangs
            self._discard_producer()
            return
        remaining = self._producer.flush(timeout_s)
        if remaining:
            log.warning("%d trades were not acknowledged by Kafka before shutdown", remaining)

    # -- the producer -----------------------------------------------------------------------
    def _new_producer(self):
        self._fatal = None
        return clients.producer(self._client_config, error_cb=self._on_error)

    def _on_error(self, err) -> None:
        """librdkafka's client-level errors. A fatal one (e.g. the broker lost records the
        idempotent producer had sent: 'out of order sequence number') makes the producer
        unusable; the loop replaces it. The others (a broker down for a while) it rides out."""
        if err.fatal():
            self._fatal = err.str()
            with self._lock:
                self._last_error = f"fatal producer error: {err.str()}"

    def _discard_producer(self) -> int:
        """Drop the broken producer without serving its callbacks; returns how many of its
        trades were never acknowledged (counted as failed: Kafka may or may not hold them)."""
        lost = len(self._producer)
        try:
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        except Exception:  # noqa: BLE001 - a broken producer may refuse even this
            pass
        with self._lock:
            self._counts["failed"] += lost
        return lost

    def _replace_producer(self, reason: str) -> None:
        lost = self._discard_producer()
        self._producer = self._new_producer()
        with self._lock:
            self._counts["producer_restarts"] += 1
            self._last_error = f"fatal producer error: {reason}"
        log.error("the simulator's producer failed for good (%s); %d trades unacknowledged; a new producer "
                  "carries on", reason, lost)

    # -- the loop -------------------------------------------------------------------------
    def _on_delivery(self, err, _msg) -> None:
        with self._lock:
            if err is None:
                self._counts["sent"] += 1
            else:
                self._counts["failed"] += 1
                self._last_error = err.str()

    def _send(self, key: bytes | None, value: bytes) -> None:
        while not self._stopping.is_set():
            try:
                self._producer.produce(self.topic, key=key, value=value, on_delivery=self._on_delivery)
                return
            except BufferError:  # local queue full: serve delivery reports, then retry
                self._producer.poll(0.1)
            except KafkaException as exc:
                if not (exc.args[0].fatal() or exc.args[0].code() == KafkaError._FATAL):
                    raise
                self._replace_producer(self._fatal or exc.args[0].str())  # and send it again with the new one

    def _emit_one(self, sim: Simulation) -> None:
        rng = self._rng
        if rng.random() < sim.malformed_share:
            self._send(None, rng.choice(MALFORMED_SAMPLES))
            with self._lock:
                self._counts["malformed"] += 1
            return
        event_time = self._clock.now()
        late = rng.random() < sim.late_share
        if late:
            delay = late_delay(rng, self.window, self.watermark, sim.beyond_watermark_share, sim.max_lateness,
                               sim.max_beyond)
            # Nothing trades before the opening bell; too early in the day it is just on time.
            late = event_time - delay >= market_open_on(event_time.date())
            event_time = event_time - delay if late else event_time
        trade = make_trade(rng, event_time, self._prices)
        payload = json.dumps(trade, separators=(",", ":")).encode()
        key = trade["account_id"].encode()
        self._send(key, payload)
        duplicate = rng.random() < sim.duplicate_share
        if duplicate:
            self._send(key, payload)
        with self._lock:
            if late:
                self._counts["late" if delay <= self.watermark else "too_late"] += 1
            if duplicate:
                self._counts["duplicates"] += 1

    def _run(self) -> None:
        budget = 0.0
        last = time.monotonic()
        while not self._stopping.is_set():
            now = time.monotonic()
            elapsed, last = now - last, now
            try:
                if self._fatal is not None:
                    self._replace_producer(self._fatal)
                if self._enabled.is_set():
                    sim = self.simulation
                    with self._lock:
                        self._clock.advance(elapsed)
                    budget = min(budget + elapsed * sim.rate, max(1.0, sim.rate))  # no burst after a stall
                    while budget >= 1 and not self._stopping.is_set():
                        self._emit_one(sim)
                        budget -= 1
                else:
                    budget = 0.0
                self._producer.poll(0)  # serve delivery callbacks
            except Exception as exc:  # noqa: BLE001 - the simulation must not die quietly: say it, go on
                log.exception("the simulator hit an error and carries on: %s", exc)
                with self._lock:
                    self._last_error = str(exc)
                self._stopping.wait(1.0)
            if self._enabled.is_set() or len(self._producer):
                self._stopping.wait(self.TICK_S)
            else:  # off and nothing in flight: no reason to wake twenty times a second
                self._wake.wait(self.OFF_WAIT_S)
                self._wake.clear()
                last = time.monotonic()  # the market's clock does not run while the simulation is off


def latest_event_time(client_config: Mapping[str, str], topic: str, tail: int = 50,
                      timeout_s: float = 10.0) -> datetime | None:
    """The largest event_time among the last `tail` records of each partition, or None.

    Reads a known offset range with assign (no subscription) and closes the consumer.
    """
    consumer = clients.consumer(client_config, "clock", **{"enable.partition.eof": True})
    latest: datetime | None = None
    try:
        ranges = {p: (max(low, high - tail), high)
                  for p, (low, high) in _end_offsets(consumer, topic, timeout_s).items() if high > low}
        if not ranges:
            return None
        consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in ranges.items()])
        pending = set(ranges)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                partition, offset = msg.partition(), msg.offset()
                if msg.error() is not None or partition is None or offset is None:
                    pending.discard(partition)  # end of partition
                    continue
                if offset >= ranges[partition][1] - 1:
                    pending.discard(partition)
                moment = _event_time_of(msg.value())
                if moment is not None and (latest is None or moment > latest):
                    latest = moment
    except KafkaException as exc:
        log.warning("could not read the latest event time from '%s': %s", topic, exc)
    finally:
        consumer.close()
    return latest


# What a broker answers for a topic whose partitions' leaders are not serving yet.
NOT_READY = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)


def _end_offsets(consumer, topic: str, timeout_s: float) -> dict[int, tuple[int, int]]:
    """watermark_offsets, asked again while the broker says it is not ready yet (a topic just
    created has leaders in its metadata a moment before they answer)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return clients.watermark_offsets(consumer, topic, timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
            if (error.code() not in NOT_READY and not error.retriable()) or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _event_time_of(value: bytes | None) -> datetime | None:
    if value is None:
        return None
    try:
        text = json.loads(value)["event_time"]
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return moment.astimezone(timezone.utc) if moment.tzinfo else None
    except Exception:  # malformed records have no usable time
        return None
