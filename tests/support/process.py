"""Running `python run.py ...` as a user would, and stopping it by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"  # screenshots and logs worth keeping from a run (not in git)


class Command:
    """A command run as a user would, its output (stdout and stderr) kept line by line."""

    def __init__(self, argv: list[str], cwd: Path = REPO, env: dict | None = None):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={**os.environ, **(env or {})},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise AssertionError(f"run.py exited ({self.proc.returncode}) before {text!r}:\n{self.output}")
            time.sleep(0.2)
        raise AssertionError(f"no {text!r} from run.py within {timeout_s} s:\n{self.output}")

    def terminate(self, sig=signal.SIGTERM, timeout_s: float = 30) -> tuple[int, float]:
        began = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"run.py did not stop within {timeout_s} s of {sig!r}:\n{self.output}")
        self._reader.join(5)
        return code, time.monotonic() - began

    def wait(self, timeout_s: float = 60) -> int:
        code = self.proc.wait(timeout_s)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class RunPy(Command):
    """`python run.py ARGS` from the repository's root, with the interpreter running the tests."""

    def __init__(self, *args: str, env: dict | None = None):
        super().__init__([sys.executable, "run.py", *args], env=env)
