"""The app's watch over the embedded broker it started (BrokerSupervisor): when the JVM ends while
the app runs, say so with the end of its server.log and start it again on the same port and data
dir, 1, 2, 4 s apart, at most RestartPolicy.tries starts in a row; then give up, for the app to
exit 1. Kafka recovers its log at the start, so nothing it acknowledged is lost; Spark's source
and the producers reconnect by themselves. A broker another command started is not ours to restart.

The decisions (how long to wait, when to give up, how an exit reads) are pure functions beside it.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from datetime import datetime, timezone
from typing import Callable

from streaming.kafka.broker import SERVER_LOG, BrokerError, EmbeddedBroker, is_running

log = logging.getLogger("trade-summary")
KEPT_RESTARTS = 10  # the newest restarts /api/status lists; the count covers them all


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """Three starts in a row: a kill or an out-of-memory exit comes back at the first; the second
    and third ride out a port held for seconds (the dead JVM's sockets, a passing connection). A
    cause still there after that (the port taken by a server, a full disk, a broken setting) does
    not go away by itself, and more tries would only put off the error. A broker up for
    healthy_after_s has earned a fresh count, as a query has (jobs/pipeline.py)."""

    tries: int = 3
    first_delay_s: float = 1.0
    try_timeout_s: float = 45.0  # a start on a busy machine takes 15-20 s here (log recovery included)
    healthy_after_s: float = 300.0

    def delay_s(self, in_a_row: int) -> float:
        """The wait before the start that follows `in_a_row` earlier ones: 1, 2, 4 ... s."""
        return self.first_delay_s * 2 ** in_a_row

    def gives_up(self, in_a_row: int) -> bool:
        return in_a_row >= self.tries

    def in_a_row_after(self, in_a_row: int, up_for_s: float) -> int:
        """The starts in a row so far, once the broker has ended after `up_for_s` up."""
        return 0 if up_for_s >= self.healthy_after_s else in_a_row

    def bound_s(self) -> float:
        """The longest from a death to giving up: every wait, and every start taking its timeout."""
        return sum(self.delay_s(n) for n in range(self.tries)) + self.tries * self.try_timeout_s


def exit_text(code: int) -> str:
    """Popen's return code as a person reads it: -9 -> 'exit signal 9', 3 -> 'exit code 3'."""
    return f"exit signal {-code}" if code < 0 else f"exit code {code}"


def signal_name(code: int) -> str:
    try:
        return f" ({signal.Signals(-code).name})" if code < 0 else ""
    except ValueError:
        return ""


@dataclasses.dataclass(frozen=True)
class BrokerRestart:
    ended_at: datetime
    restarted_at: datetime
    exit: str  # 'exit signal 9'
    took_s: float  # from the death seen to the broker answering again

    def said(self) -> str:
        """'broker restarted at 18:02:11 (exit signal 9)', the time in UTC."""
        return f"broker restarted at {self.restarted_at:%H:%M:%S} ({self.exit})"

    def as_dict(self) -> dict:
        return {"ended_at": self.ended_at.isoformat(timespec="seconds"),
                "restarted_at": self.restarted_at.isoformat(timespec="seconds"),
                "exit": self.exit, "took_s": round(self.took_s, 1), "said": self.said()}


class BrokerSupervisor:
    """Watches `broker` on a thread from start() to stop(); `failure` says why it gave up."""

    POLL_S = 0.5

    def __init__(self, broker: EmbeddedBroker, policy: RestartPolicy = RestartPolicy(),
                 on_give_up: Callable[[str], None] | None = None):
        self.broker = broker
        self.policy = policy
        self.on_give_up = on_give_up
        self.failure: str | None = None
        self.restart_count = 0
        self._restarts: list[BrokerRestart] = []
        self._state = "up"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-supervisor", daemon=True)

    def start(self) -> BrokerSupervisor:
        if self.broker.reused:
            log.info("the embedded broker (pid %s) was started by another command: this app watches it but does "
                     "not restart it if it ends", self.broker.pid)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Before the broker is stopped: no restart after this returns (a start under way ends first)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(self.policy.try_timeout_s + 15)

    def status(self) -> dict:
        """For the health snapshot: the broker's state, its restarts (the newest), why it gave up."""
        with self._lock:
            return {"supervised": not self.broker.reused, "state": self._state, "pid": self.broker.pid,
                    "port": self.broker.port, "restart_count": self.restart_count,
                    "restarts": [r.as_dict() for r in self._restarts], "error": self.failure}

    def _run(self) -> None:
        if self.broker.reused:
            self._watch_reused()
            return
        up_since, in_a_row = time.monotonic(), 0
        while not self._stopping.wait(self.POLL_S):
            code = self.broker.ended()
            if code is None:
                continue
            ended_at, seen = datetime.now(timezone.utc), time.monotonic()
            in_a_row = self.policy.in_a_row_after(in_a_row, seen - up_since)
            self._set_state("restarting")
            log.error("the embedded Kafka broker (pid %s) ended by itself (%s%s); restarting it on port %d. The end "
                      "of its log (%s):\n%s", self.broker.pid, exit_text(code), signal_name(code), self.broker.port,
                      self.broker.data_dir / SERVER_LOG, self.broker.log_end())
            started = self._start_again(in_a_row, exit_text(code))
            if started is None:
                return
            in_a_row = started
            restart = BrokerRestart(ended_at, datetime.now(timezone.utc), exit_text(code), time.monotonic() - seen)
            with self._lock:
                self._restarts = [*self._restarts, restart][-KEPT_RESTARTS:]
                self.restart_count += 1
                self._state = "up"
            up_since = time.monotonic()
            log.info("the embedded Kafka broker is back on port %d (pid %s), %.1f s after it ended: %s",
                     self.broker.port, self.broker.pid, restart.took_s, restart.said())

    def _start_again(self, in_a_row: int, how: str) -> int | None:
        """Starts until one works (the new count in a row), or None: stopping, or given up."""
        error = "no start was tried"
        while not self.policy.gives_up(in_a_row):
            delay = self.policy.delay_s(in_a_row)
            in_a_row += 1
            if self._stopping.wait(delay):
                return None
            try:
                self.broker.start(timeout_s=self.policy.try_timeout_s)
                return in_a_row
            except BrokerError as exc:
                error = str(exc)
                log.error("starting the embedded Kafka broker again failed (start %d of %d in a row): %s",
                          in_a_row, self.policy.tries, error)
            if self._stopping.is_set():
                return None
        waits = ", ".join(f"{self.policy.delay_s(n):g}" for n in range(self.policy.tries))
        full = "No space left" in self.broker.log_end(1000)
        advice = f"Its disk is full: free space there (df -h {self.broker.data_dir}). " if full else ""
        self._give_up(f"the embedded Kafka broker ended ({how}) and did not start again in {self.policy.tries} "
                      f"tries in a row ({waits} s apart); the last said: {error}\n{advice}Its data is kept in "
                      f"{self.broker.data_dir}: start the app again once that is fixed")
        return None

    def _watch_reused(self) -> None:
        pid = self.broker.pid
        while pid is not None and not self._stopping.wait(self.POLL_S):
            if not is_running(pid):
                self._set_state("ended")
                log.error("the embedded broker (pid %d) that another command started has ended; it is not this app's "
                          "to restart, so Kafka stays unreachable until that command (or a new start) brings it "
                          "back. The end of its log (%s):\n%s", pid, self.broker.data_dir / SERVER_LOG,
                          self.broker.log_end())
                return

    def _give_up(self, failure: str) -> None:
        with self._lock:
            self.failure, self._state = failure, "gave up"
        if self.on_give_up is not None:
            self.on_give_up(failure)

    def _set_state(self, state: str) -> None:
        with self._lock:
            self._state = state
