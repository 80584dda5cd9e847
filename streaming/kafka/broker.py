"""The embedded Kafka broker: noida-db's Kafka service, with its data under <data-dir>/broker.

noida-db keeps data in RAM and snapshots it every few seconds and on a clean `down`, so it
is always stopped with `down`, never killed. Each snapshot is a new `kafka.json` put in place of
the last one, so a hard link keeps the last good one while `down` writes its own.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from pathlib import Path

log = logging.getLogger(__name__)

SNAPSHOT = "kafka.json"
PARSE_SNAPSHOTS_UP_TO_BYTES = 64 * 1024 * 1024  # a bigger one is checked by its end only


class BrokerError(RuntimeError):
    """The embedded broker could not be started; the message says what to do."""


def _noida_binary() -> str:
    try:
        import noida_db
    except ImportError:
        raise BrokerError("noida-db is not installed: run `pip install -r requirements.txt`") from None
    binary = Path(noida_db.__file__).parent / "noida-db"
    if not binary.exists():
        raise BrokerError(f"noida-db binary missing at {binary}: "
                          "reinstall with `pip install --force-reinstall noida-db`")
    return str(binary)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _clean_output(text: str) -> str:
    # The binary warns about a GLIBC symbol version on this platform; it is harmless.
    return "\n".join(line for line in text.splitlines() if "GLIBC_" not in line).strip()


class EmbeddedBroker:
    """noida-db's Kafka on 127.0.0.1:<port>, reused if this data dir's broker is already up."""

    def __init__(self, data_dir: Path, port: int):
        self.data_dir = Path(data_dir)
        self.port = port
        self.reused = False

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [_noida_binary(), *args, "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=timeout,
        )

    def running_port(self) -> int | None:
        """The Kafka port of this data dir's broker if it is running, else None."""
        if not (self.data_dir / "noida.control.json").exists():
            return None
        status = _clean_output(self._run("status", timeout=15).stdout)
        for line in status.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "kafka" and ":" in parts[2]:
                return int(parts[2].rsplit(":", 1)[1])
        return None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        existing = self.running_port()
        if existing is not None:
            if existing != self.port:
                raise BrokerError(
                    f"the broker of {self.data_dir} is already running on port {existing}, not {self.port}: "
                    f"use --broker-port {existing}, or stop it with `noida-db down --data-dir {self.data_dir}`"
                )
            self.reused = True
            log.info("reusing the embedded broker already running for %s on port %d", self.data_dir, self.port)
            return
        if not port_is_free(self.port):
            raise BrokerError(
                f"port {self.port} is already in use, so the embedded Kafka broker cannot start: "
                f"choose another with --broker-port N, or use that Kafka with --bootstrap-servers 127.0.0.1:{self.port}"
            )
        result = self._run("up", "--only", "kafka", "--kafka-port", str(self.port))
        if result.returncode != 0:
            detail = _clean_output(result.stdout + "\n" + result.stderr)
            if "already in use" in detail:
                raise BrokerError(
                    f"port {self.port} is already in use, so the embedded Kafka broker cannot start: "
                    "choose another with --broker-port N"
                )
            raise BrokerError(f"the embedded Kafka broker did not start:\n{detail}")

    def stop(self) -> None:
        """Stop cleanly so the last writes are snapshotted to disk, and check that they were.
        Raises BrokerError, saying what is kept and what to do, when the save failed."""
        snapshot, kept = self.data_dir / SNAPSHOT, self.data_dir / (SNAPSHOT + ".before-stop")
        if snapshot.exists():
            kept.unlink(missing_ok=True)
            os.link(snapshot, kept)
        began = time.time()
        try:
            result = self._run("down", timeout=60)
        except subprocess.TimeoutExpired:
            raise BrokerError(f"the embedded broker did not stop within 60 s; its data dir is {self.data_dir}") \
                from None
        problem = None if result.returncode == 0 else _clean_output(result.stdout + result.stderr)
        problem = problem or snapshot_problem(snapshot, began)
        if problem is None:
            kept.unlink(missing_ok=True)
            return
        if kept.exists():
            if snapshot.exists() and os.path.samefile(kept, snapshot):
                kept.unlink()  # nothing replaced it
            else:
                os.replace(kept, snapshot)  # the broker starts again from the last good snapshot
            saved_at = time.strftime("%H:%M:%S", time.gmtime(snapshot.stat().st_mtime))
            outcome = (f"its last good snapshot (saved at {saved_at} UTC) is kept, so the records acknowledged "
                       "after it are lost")
        else:
            outcome = "no earlier snapshot exists, so its records are lost"
        raise BrokerError(f"the embedded broker could not save its data in {self.data_dir} ({problem}): {outcome}. "
                          f"Free space there (df -h {self.data_dir}) before starting again; the pipeline reads on "
                          "from what the broker holds (docs/operations.md#when-kafka-loses-records).")


def snapshot_problem(snapshot: Path, written_after: float) -> str | None:
    """Why the snapshot `down` should just have written is not a whole one, or None."""
    try:
        stat = snapshot.stat()
        if stat.st_mtime < written_after - 1:
            return "no new snapshot was written"
        if stat.st_size <= PARSE_SNAPSHOTS_UP_TO_BYTES:
            json.loads(snapshot.read_bytes())
            return None
        with snapshot.open("rb") as file:
            file.seek(-64, os.SEEK_END)
            return None if file.read().rstrip().endswith(b"}") else "the snapshot is cut short"
    except FileNotFoundError:
        return "no snapshot was written"
    except (OSError, ValueError) as exc:
        return f"the snapshot is unreadable: {exc}"
