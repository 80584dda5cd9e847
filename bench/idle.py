"""The app idle (issue 47's bound): `python run.py --no-producer --no-dashboard` on a fresh data
dir with its embedded broker, nothing arriving and no page open; after `settle_s`, the CPU of
run.py and every process under it (Spark's JVM, its Python workers, the broker) over `window_s`,
in cores. Read from /proc only: asking the app would be work for it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.app_run import free_ports, launch, stop

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, CPU ticks of the process and its waited-for children) from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(int(value) for value in fields[11:15])


def tree_cpu_seconds(root: int) -> dict[int, float]:
    """pid -> CPU seconds, for root and every process under it."""
    stats = {int(name): stat for name in os.listdir("/proc") if name.isdigit() and (stat := _stat(int(name)))}
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _) in stats.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return {pid: stats[pid][1] / TICK for pid in tree if pid in stats}


def idle_cores(settle_s: float = 60.0, window_s: float = 30.0, extra: list[str] | None = None, say=print) -> float:
    """The idle app's cores over window_s, settle_s after its query started."""
    work = Path(tempfile.mkdtemp(prefix="trade-summary-idle-"))
    broker_port, port = free_ports(2)
    process = launch(["--data-dir", str(work / "data"), "--broker-port", str(broker_port), "--port", str(port),
                      "--no-producer", "--no-dashboard", *(extra or [])], work / "run.log")
    try:
        deadline = time.monotonic() + 300
        while "query 'medallion' started" not in (work / "run.log").read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"run.py did not start: {(work / 'run.log').read_text()[-2000:]}")
            time.sleep(0.5)
        say(f"  idle: run.py up; settling {settle_s:g} s, then measuring {window_s:g} s ...")
        time.sleep(settle_s)
        before, began = tree_cpu_seconds(process.pid), time.monotonic()
        time.sleep(window_s)
        after, elapsed = tree_cpu_seconds(process.pid), time.monotonic() - began
        return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items()) / elapsed
    finally:
        stop(process, None)
        shutil.rmtree(work, ignore_errors=True)
