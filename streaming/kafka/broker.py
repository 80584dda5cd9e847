"""The embedded Kafka broker: Apache Kafka in KRaft mode (one node, broker and controller), run
from the jars of jars/kafka, with its data under <data-dir>/broker.

The JVM runs detached (a session of its own), so that a second command on the same data dir
(`run.py load` while the app runs) reuses it: a small state file says which process and port it
is. Kafka writes every record to its log before acknowledging it, so a killed broker loses
nothing acknowledged; it is still stopped with SIGTERM, which closes the log cleanly and spares
the next start a recovery scan.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from streaming.kafka.broker_config import (
    log4j2_properties,
    new_cluster_id,
    offsets_topic_partitions,
    server_properties,
)

log = logging.getLogger(__name__)

STATE = "broker.json"  # {"pid", "port", "controller_port"} of the running broker
LOG_DIRS = "kafka-logs"  # Kafka's own data: the topics and the KRaft metadata log
SERVER_LOG = "server.log"  # the broker's log (log4j2, rotated)
CONSOLE_LOG = "console.log"  # the JVM's stdout and stderr (a crash, an out-of-memory exit)
MAIN_CLASS = "kafka.Kafka"
# One node serving one app needs a small heap; the serial collector, with freed native memory
# given back to the OS every 5 s, keeps it smallest (docs/benchmarks.md#embedded-broker-apache-kafka-440;
# Java 17 builds older than the trim option ignore it). A JVM out of heap exits, to be seen.
JVM_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:+IgnoreUnrecognizedVMOptions",
               "-XX:TrimNativeHeapInterval=5000", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
# How the JVM ends when stopped: on SIGTERM (128 + 15, after Kafka's shutdown hook), or SIGKILL.
STOPPED_CODES = (143, 0, -signal.SIGTERM, -signal.SIGKILL)
PICKED_PORTS_FROM = 10000  # free_port() leaves the well-known services below alone


class BrokerError(RuntimeError):
    """The embedded broker could not be started or stopped; the message says what to do."""


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(besides: tuple[int, ...] = ()) -> int:
    """A free port of 127.0.0.1 outside the kernel's ephemeral range: a port numbered by the kernel
    (bind to 0) can be handed out again, to the broker's, Spark's or an outgoing connection's
    socket, before whoever picked it binds it."""
    low, high = _ephemeral_range()
    choices = [*range(PICKED_PORTS_FROM, low), *range(high + 1, 65536)]
    for port in random.sample(choices, min(len(choices), 200)):
        if port not in besides and port_is_free(port):
            return port
    while True:  # no room outside the range: the kernel's pick, as a last resort
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in besides:
            return port


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _log_end(path: Path, lines: int = 15) -> str:
    """The last lines of a log, but for Java stack frames."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 64 * 1024))
            text = file.read().decode(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if not line.startswith(("\tat ", "\t... "))]
    return "\n".join(kept[-lines:])


def is_running(pid: int) -> bool:
    """Alive, or still ending: a killed JVM's main thread is a zombie while its other threads
    (and the sockets they share) are torn down. A zombie alone (exited, not yet reaped by its
    parent) is not running."""
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
    except OSError:
        return False
    return not (status.get("State", "").split()[:1] in (["Z"], ["X"]) and status.get("Threads", "").strip() == "1")


def _command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _java() -> str:
    from streaming.jars import JavaMissing, check_java

    try:
        check_java()
    except JavaMissing as exc:
        raise BrokerError(f"the embedded Kafka broker runs on Java too: {exc}") from None
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    assert java is not None  # check_java() found it just so
    return java


def _classpath() -> str:
    from streaming import jars

    try:
        return jars.kafka_classpath(echo=log.info)
    except jars.JarsMissing as exc:
        raise BrokerError(str(exc)) from None


class EmbeddedBroker:
    """Apache Kafka on 127.0.0.1:<port>, reused if this data dir's broker is already up."""

    def __init__(self, data_dir: Path, port: int):
        self.data_dir = Path(data_dir)
        self.port = port
        self.reused = False
        self._pid: int | None = None
        self._process: subprocess.Popen | None = None  # when this object started the JVM

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker JVM's pid once started (or found running), None before and after."""
        return self._pid

    @property
    def _properties(self) -> Path:
        return self.data_dir / "server.properties"

    def _running_state(self) -> dict | None:
        """The state file's contents if its process is alive and is this data dir's broker; a
        stale file (the broker was killed, or the pid is someone else's now) counts as none."""
        try:
            state = json.loads((self.data_dir / STATE).read_text())
            pid = int(state["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        command = _command_line(pid)
        if is_running(pid) and MAIN_CLASS in command and str(self._properties) in command:
            return state
        return None

    def running_port(self) -> int | None:
        """The Kafka port of this data dir's broker if it is running, else None."""
        state = self._running_state()
        return int(state["port"]) if state else None

    def log_end(self, lines: int = 15) -> str:
        """The last lines of its server.log, for a message about how it ended."""
        return _log_end(self.data_dir / SERVER_LOG, lines)

    def ended(self) -> int | None:
        """How the JVM this object started ended (its exit code, or minus the signal that killed
        it); None while it runs, and for a broker it reused or has not started."""
        return self._process.poll() if self._process is not None else None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the broker (formatting its storage the first time) and return once it answers,
        within timeout_s; a broker this object started that has ended is started again."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        state = self._running_state()
        if state is not None:
            if int(state["port"]) != self.port:
                raise BrokerError(
                    f"the broker of {self.data_dir} is already running on port {state['port']}, not {self.port}: "
                    f"use --broker-port {state['port']}, or stop it with `kill {state['pid']}`"
                )
            self.reused, self._pid = True, int(state["pid"])
            log.info("reusing the embedded broker already running for %s on port %d", self.data_dir, self.port)
            return
        self._wait_while_the_last_one_ends()
        if not port_is_free(self.port):
            raise self._port_in_use()
        java, classpath = _java(), _classpath()
        controller_port = free_port(besides=(self.port,))
        log_dirs, log4j = self.data_dir / LOG_DIRS, self.data_dir / "log4j2.properties"
        self._properties.write_text(server_properties(log_dirs, self.port, controller_port,
                                                      offsets_topic_partitions(log_dirs)))
        log4j.write_text(log4j2_properties(self.data_dir / SERVER_LOG))
        command = [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
        if not (log_dirs / "meta.properties").exists():
            if (self.data_dir / "kafka.json").exists():
                log.warning("%s holds the snapshot (kafka.json) of the embedded broker before Apache Kafka, which is "
                            "not carried over: the topic starts empty, and what the pipeline had read is in bronze. "
                            "Delete the file once you no longer need it.", self.data_dir)
            self._format(command)
        began = time.monotonic()
        with (self.data_dir / CONSOLE_LOG).open("wb") as console:
            self._process = process = subprocess.Popen(
                [*command, MAIN_CLASS, str(self._properties)], cwd=self.data_dir,
                stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self._pid = process.pid
        (self.data_dir / STATE).write_text(json.dumps(
            {"pid": self._pid, "port": self.port, "controller_port": controller_port}) + "\n")
        try:
            self._wait_until_up(process, began + timeout_s)
        except BrokerError:
            self._end(self._pid, quiet=True)
            (self.data_dir / STATE).unlink(missing_ok=True)
            self._pid, self._process = None, None
            raise
        log.info("embedded Kafka broker up in %.1f s (pid %d)", time.monotonic() - began, self._pid)

    def _wait_while_the_last_one_ends(self, timeout_s: float = 15) -> None:
        """A broker just killed holds its port until all its threads are gone."""
        try:
            pid = int(json.loads((self.data_dir / STATE).read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        deadline = time.monotonic() + timeout_s
        while is_running(pid) and not any(_command_line(pid)) and time.monotonic() < deadline:
            time.sleep(0.1)

    def _port_in_use(self) -> BrokerError:
        return BrokerError(
            f"port {self.port} is already in use, so the embedded Kafka broker cannot start: "
            f"choose another with --broker-port N, or use that Kafka with --bootstrap-servers 127.0.0.1:{self.port}"
        )

    def _format(self, command: list[str]) -> None:
        result = subprocess.run(
            [*command, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(), "-c", str(self._properties)],
            cwd=self.data_dir, capture_output=True, text=True, timeout=120,
        )
        if result.returncode != 0:
            raise BrokerError(f"could not format the embedded broker's storage in {self.data_dir}:\n"
                              + (result.stderr + result.stdout).strip()[-3000:])

    def _wait_until_up(self, process: subprocess.Popen, deadline: float) -> None:
        """Until the broker answers a metadata request and gives an idempotent producer its id;
        a broker that exits or never answers is a BrokerError with the end of its log."""
        from confluent_kafka import KafkaException

        from streaming.kafka import clients

        admin, began = None, time.monotonic()
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise self._failed(f"exited with code {process.returncode}")
            if admin is None:
                with socket.socket() as sock:  # until the port listens, librdkafka would log each refusal
                    sock.settimeout(1)
                    if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                        admin = clients.admin({"bootstrap.servers": self.bootstrap_servers})
            if admin is not None:
                try:
                    if admin.list_topics(timeout=2).brokers:
                        break
                except KafkaException:
                    pass
            time.sleep(0.2)
        else:
            raise self._failed(f"did not answer within {deadline - began:.0f} s")
        self._wait_for_a_producer_id(process, deadline)

    def _wait_for_a_producer_id(self, process: subprocess.Popen, deadline: float) -> None:
        """A new broker makes the first idempotent producer wait for its id ('Coordinator load in
        progress', a warning and seconds of backoff): a quiet producer of its own takes that wait."""
        from confluent_kafka import Producer

        quiet = logging.getLogger(__name__ + ".warm-up")
        quiet.setLevel(logging.CRITICAL)
        states: list[str] = []
        producer = Producer({
            "bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True, "logger": quiet,
            "retry.backoff.ms": 50, "retry.backoff.max.ms": 200, "statistics.interval.ms": 100,
            "stats_cb": lambda stats: states.append(json.loads(stats).get("eos", {}).get("idemp_state")),
        })
        while not states or states[-1] != "Assigned":
            if process.poll() is not None:
                raise self._failed(f"exited with code {process.returncode}")
            if time.monotonic() > deadline:
                raise self._failed("gave no producer id in time")
            producer.poll(0.05)

    def _failed(self, what: str) -> BrokerError:
        logs = (_log_end(self.data_dir / name) for name in (SERVER_LOG, CONSOLE_LOG))
        detail = "\n".join(text for text in logs if text)
        if "Address already in use" in detail:
            return self._port_in_use()
        return BrokerError(f"the embedded Kafka broker {what} (its log: {self.data_dir / SERVER_LOG}):\n{detail}")

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown that closes the log), then SIGKILL after STOP_TIMEOUT_S
        as a last resort: Kafka recovers its log at the next start. Stops this data dir's broker
        even when another command started it. Raises BrokerError if it cannot be stopped, or if
        the broker this object started ended by itself (a full disk, a crash)."""
        own = self._process
        ended_before = own.poll() if own is not None else None
        pid: int | None
        if own is not None and ended_before is None:
            pid = own.pid
        else:
            state = self._running_state()
            pid = int(state["pid"]) if state else None
        if pid is not None:
            began = time.monotonic()
            if self._end(pid):
                log.info("embedded Kafka broker stopped in %.1f s", time.monotonic() - began)
        if self._running_state() is None:
            (self.data_dir / STATE).unlink(missing_ok=True)
        self._pid, self._process = None, None
        if own is not None and own.returncode not in STOPPED_CODES:
            raise self._ended_by_itself(own.returncode, before_stop=ended_before is not None)

    def _ended_by_itself(self, code: int, before_stop: bool) -> BrokerError:
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        when = " before it was asked to stop, so Kafka was unreachable from then on" if before_stop else ""
        full = "No space left" in _log_end(self.data_dir / SERVER_LOG, 1000)
        advice = (f" Its disk is full: free space there (df -h {self.data_dir}) before starting again; the records "
                  "it acknowledged are kept." if full else "")
        return BrokerError(f"the embedded Kafka broker ended by itself ({how}){when}.{advice} The end of its log "
                           f"({self.data_dir / SERVER_LOG}):\n{_log_end(self.data_dir / SERVER_LOG)}")

    def _end(self, pid: int, quiet: bool = False) -> bool:
        """SIGTERM, wait, SIGKILL. True if it stopped on SIGTERM."""
        try:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)  # a stopped process would not act on SIGTERM
        except ProcessLookupError:
            return True
        except PermissionError:
            raise BrokerError(f"not allowed to stop the embedded broker (pid {pid}) of {self.data_dir}") from None
        if self._wait_for_exit(pid, STOP_TIMEOUT_S):
            return True
        if not quiet:
            log.warning("the embedded broker (pid %d) did not stop within %.0f s of SIGTERM: killing it; Kafka "
                        "recovers its log at the next start (see %s)", pid, STOP_TIMEOUT_S,
                        self.data_dir / SERVER_LOG)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not self._wait_for_exit(pid, 15):
            raise BrokerError(f"the embedded broker (pid {pid}) of {self.data_dir} did not end even on SIGKILL: "
                              "its port and data dir stay taken until it does")
        return False

    def _wait_for_exit(self, pid: int, timeout_s: float) -> bool:
        if self._process is not None and self._process.pid == pid:
            try:
                self._process.wait(timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout_s
        while is_running(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True
