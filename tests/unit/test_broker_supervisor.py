"""The embedded broker's supervision: its backoff, its give-up rule, how an exit reads, and the
watch itself over a stand-in broker (the real one's kill and restart: tests/e2e/test_broker_supervision.py)."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

from streaming.kafka.broker import BrokerError
from streaming.kafka.supervisor import BrokerRestart, BrokerSupervisor, RestartPolicy, exit_text
from tests.support.waiting import wait_for


def test_starts_in_a_row_wait_1_2_4_seconds_and_three_are_the_most():
    policy = RestartPolicy()
    assert [policy.delay_s(n) for n in range(3)] == [1.0, 2.0, 4.0]
    assert [policy.gives_up(n) for n in range(4)] == [False, False, False, True]


def test_the_give_up_bound_is_every_wait_and_every_start_at_its_timeout():
    policy = RestartPolicy(tries=3, first_delay_s=1.0, try_timeout_s=45.0)
    assert policy.bound_s() == 1 + 2 + 4 + 3 * 45


def test_a_broker_up_for_five_minutes_starts_its_count_afresh_and_a_shorter_one_does_not():
    policy = RestartPolicy()
    assert policy.in_a_row_after(2, up_for_s=299) == 2
    assert policy.in_a_row_after(2, up_for_s=300) == 0


def test_an_exit_reads_as_its_signal_or_its_code():
    assert exit_text(-9) == "exit signal 9"
    assert exit_text(3) == "exit code 3"


def test_a_restart_is_said_with_its_time_and_exit():
    restart = BrokerRestart(datetime(2026, 3, 2, 18, 2, 0, tzinfo=timezone.utc),
                            datetime(2026, 3, 2, 18, 2, 11, tzinfo=timezone.utc), "exit signal 9", 11.2)
    assert restart.said() == "broker restarted at 18:02:11 (exit signal 9)"
    assert restart.as_dict()["restarted_at"] == "2026-03-02T18:02:11+00:00"


class StandInBroker:
    """What the supervisor asks of an EmbeddedBroker; `fail_starts` starts fail before one works."""

    def __init__(self, fail_starts: int = 0, reused: bool = False):
        self.reused, self.pid, self.port, self.data_dir = reused, 100, 9092, Path("/nonexistent")
        self.fail_starts, self.starts = fail_starts, 0
        self.code: int | None = None
        self.lock = threading.Lock()

    def ended(self) -> int | None:
        with self.lock:
            return self.code

    def start(self, timeout_s: float) -> None:
        with self.lock:
            self.starts += 1
            if self.starts <= self.fail_starts:
                raise BrokerError(f"port {self.port} is already in use")
            self.code, self.pid = None, self.pid + 1

    said = "[2026-03-02 18:02:00] INFO Kafka Server started"

    def log_end(self, lines: int = 15) -> str:
        return self.said

    def die(self, code: int) -> None:
        with self.lock:
            self.code = code


QUICK = RestartPolicy(first_delay_s=0.01, try_timeout_s=1.0)


def test_a_broker_that_ends_is_started_again_and_its_restart_is_counted():
    broker = StandInBroker(fail_starts=1)
    supervisor = BrokerSupervisor(broker, QUICK).start()  # type: ignore[arg-type]
    try:
        broker.die(-9)
        status = wait_for(lambda: (s := supervisor.status())["restart_count"] == 1 and s, 10, what="a restart")
        assert broker.starts == 2 and status["state"] == "up" and status["error"] is None
        assert status["restarts"][0]["exit"] == "exit signal 9" and status["pid"] == 101
    finally:
        supervisor.stop()


def test_a_broker_that_cannot_start_again_is_given_up_after_three_tries_with_the_reason():
    broker = StandInBroker(fail_starts=99)
    failures: list[str] = []
    supervisor = BrokerSupervisor(broker, QUICK, on_give_up=failures.append).start()  # type: ignore[arg-type]
    try:
        broker.die(1)
        wait_for(lambda: bool(failures), 10, what="the supervisor to give up")
        assert broker.starts == 3 and supervisor.status()["state"] == "gave up"
        assert "ended (exit code 1) and did not start again in 3 tries" in failures[0]
        assert "port 9092 is already in use" in failures[0] and supervisor.failure == failures[0]
    finally:
        supervisor.stop()


def test_a_broker_on_a_full_disk_is_given_up_with_where_to_free_space():
    broker = StandInBroker(fail_starts=99)
    broker.said = "ERROR Error while writing to checkpoint file: java.io.IOException: No space left on device"
    supervisor = BrokerSupervisor(broker, QUICK).start()  # type: ignore[arg-type]
    try:
        broker.die(1)
        wait_for(lambda: supervisor.failure is not None, 10, what="the supervisor to give up")
        assert "Its disk is full: free space there (df -h /nonexistent)" in (supervisor.failure or "")
    finally:
        supervisor.stop()


def test_a_reused_broker_is_never_started_again():
    broker = StandInBroker(reused=True)
    broker.pid = 2 ** 22 + 1  # above Linux's pid_max: no such process, as a broker that has ended
    supervisor = BrokerSupervisor(broker, QUICK).start()  # type: ignore[arg-type]
    try:
        wait_for(lambda: supervisor.status()["state"] == "ended", 10, what="the reused broker seen ended")
        assert broker.starts == 0 and supervisor.status()["supervised"] is False
    finally:
        supervisor.stop()
