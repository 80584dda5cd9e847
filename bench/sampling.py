"""Sampling while the bench runs: the processes of the run (from /proc: their memory and CPU
time) and gold's total trade count (when each new total became visible).

Both are `Poller`s, daemon threads that tick at a fixed interval until stopped.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pyarrow.compute as pc

from streaming.lake import tables
from streaming.lake.locations import is_remote
from streaming.lake.log_tail import commit_file
from streaming.lake.store import Lake

log = logging.getLogger("bench")


# -- /proc -------------------------------------------------------------------------------------
def child_pids(pid: int) -> list[int]:
    """Every descendant of `pid` (the JVM and Spark's Python workers), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def proc_kib(pid: int, field: str, file: str = "status") -> int:
    """A memory figure of /proc/<pid>/status (VmRSS, VmHWM) or smaps_rollup (Pss), in KiB."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of a process, in clock ticks (not its children: they are sampled too)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# -- pollers -----------------------------------------------------------------------------------
class Poller:
    """Calls tick() every `interval_s` on a daemon thread until stopped."""

    def __init__(self, name: str, interval_s: float):
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class MemorySampler(Poller):
    """Samples every process of the run each second: the JVM, this Python driver, Spark's
    Python workers and the broker. Keeps each group's peak RSS and the peak of their sum at
    one moment (RSS counts pages shared by forked workers in each of them; PSS shares them out)."""

    GROUPS = ("JVM", "Python (driver)", "Spark Python workers", "broker")

    def __init__(self, broker_pid: int | None, interval_s: float = 1.0):
        super().__init__("memory", interval_s)
        self.broker_pid = broker_pid
        self.peak_rss = dict.fromkeys(self.GROUPS, 0.0)
        self.peak_total_rss = self.peak_total_pss = self.peak_pipeline_rss = 0.0
        self.phase = "set-up"  # set by whoever runs the phases
        self.tools: set[int] = set()  # the benchmark's own helper processes: not the pipeline's
        # At the pipeline's peak: the phase, and each group's RSS and number of processes.
        self.pipeline_peak_phase = ""
        self.pipeline_peak_parts: dict[str, tuple[float, int]] = {}
        self._cpu_ticks: dict[int, tuple[str, int]] = {}  # pid -> (group, user + system ticks last seen)
        self._lock = threading.Lock()

    def groups(self) -> dict[str, list[int]]:
        # The broker's JVM is a child of this process too (started detached, but by it).
        children = [pid for pid in child_pids(os.getpid()) if pid not in self.tools and pid != self.broker_pid]
        jvm = [pid for pid in children if process_name(pid) == "java"]
        return {"JVM": jvm, "Python (driver)": [os.getpid()],
                "Spark Python workers": [pid for pid in children if pid not in jvm],
                "broker": [self.broker_pid] if self.broker_pid else []}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each group's processes (exited ones as last seen)."""
        self.sample()
        with self._lock:
            totals = dict.fromkeys(self.GROUPS, 0.0)
            for group, ticks in self._cpu_ticks.values():
                totals[group] += ticks / os.sysconf("SC_CLK_TCK")
            return totals

    def sample(self) -> None:
        total_rss = total_pss = broker_rss = 0.0
        parts: dict[str, tuple[float, int]] = {}
        for name, pids in self.groups().items():
            for pid in pids:
                ticks = cpu_ticks(pid)
                if ticks is not None:
                    with self._lock:
                        self._cpu_ticks[pid] = (name, ticks)
            rss = sum(proc_kib(pid, "VmRSS") for pid in pids) / 1024
            total_rss += rss
            total_pss += sum(proc_kib(pid, "Pss", "smaps_rollup") for pid in pids) / 1024
            self.peak_rss[name] = max(self.peak_rss[name], rss)
            parts[name] = (rss, len(pids))
            broker_rss += rss if name == "broker" else 0.0
        self.peak_total_rss = max(self.peak_total_rss, total_rss)
        if total_rss - broker_rss > self.peak_pipeline_rss:
            self.peak_pipeline_rss = total_rss - broker_rss
            self.pipeline_peak_phase = self.phase
            self.pipeline_peak_parts = {name: part for name, part in parts.items() if name != "broker"}
        self.peak_total_pss = max(self.peak_total_pss, total_pss)

    def tick(self) -> None:
        self.sample()

    def stop(self) -> None:
        super().stop()
        self.sample()


class GoldWatcher(Poller):
    """Watches gold's total trade count; records when each new total became visible. In a local
    lake that is when its commit's file appeared in the log (a stat every 10 ms), else when a
    look every 50 ms found the version: the instrument adds no read to what it times."""

    def __init__(self, lake: Lake, interval_s: float | None = None):
        location = lake.location(tables.GOLD)
        self._local = None if is_remote(location) else location
        super().__init__("gold-watcher", interval_s or (0.01 if self._local else 0.05))
        self.lake = lake
        self.seen: list[tuple[float, int]] = []  # (monotonic time, total trade count)
        self._version: int | None = None

    def total(self) -> int:
        return self.seen[-1][1] if self.seen else 0

    def tick(self) -> None:
        try:
            if (self._local and self._version is not None
                    and not commit_file(self._local, self._version + 1).exists()):
                return
            noticed = time.monotonic()
            gold = self.lake.open(tables.GOLD)  # kept open per thread: only what is new is read
            if gold is None or gold.version() == self._version:
                return
            # A version that came after the one noticed is timed once read, a little late.
            one_more = self._local is not None and self._version is not None and gold.version() == self._version + 1
            self._version = gold.version()
            counts = self.lake.read(tables.GOLD, columns=["trade_count"])["trade_count"]
            self.seen.append((noticed if one_more else time.monotonic(), pc.sum(counts).as_py() or 0))
        except Exception as exc:  # noqa: BLE001 - a read racing a commit: try again next tick
            log.debug("gold watcher: %s", exc)
