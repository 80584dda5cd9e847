"""One app per data dir. A second `python run.py` on the same data dir would share the first
one's broker, checkpoints and tables: its queries fail on Spark's concurrent-checkpoint check,
and stopping it would stop the first one's broker. So the app holds an exclusive lock on a file
in the data dir for as long as it runs, with who holds it written inside for the message.

The lock is the kernel's (flock): it goes with the process, so an app that was killed leaves
no stale lock behind. `python run.py load` takes no lock: loading into a running app's topic
is allowed.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import datetime, timezone
from pathlib import Path


class AlreadyRunning(RuntimeError):
    """Another app holds the data dir; the message names it."""


class InstanceLock:
    def __init__(self, path: Path):
        self.path = path  # Settings.lock_file: in a local data dir, else beside the checkpoints
        self._fd: int | None = None

    def acquire(self, about: dict) -> None:
        """Take the data dir, recording `about` (ports, ...) with this process's id; raise
        AlreadyRunning, naming the holder, if another process has it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._read(fd)
            os.close(fd)
            raise AlreadyRunning(f"another Trade Summary is running on {self.path.parent} ({describe(holder)}): "
                                 "stop it first, or give this one another --data-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "started_at": datetime.now(timezone.utc).isoformat(
            timespec="seconds"), **about}).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the lock
            self._fd = None

    @staticmethod
    def _read(fd: int) -> dict:
        try:
            return json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            return {}


def describe(holder: dict) -> str:
    parts = [f"PID {holder['pid']}" if "pid" in holder else "PID unknown"]
    parts += [f"{name} {holder[name]}" for name in ("dashboard", "broker") if holder.get(name)]
    if holder.get("started_at"):
        parts.append(f"since {holder['started_at']}")
    return ", ".join(parts)
