"""One `python run.py` measured from outside, as a user starts it (long_run.py runs it on each lake):
its own embedded broker and page on free ports on 127.0.0.1, `--no-producer`, and the bench's
producer at a steady rate instead, so that each trade's send time is known exactly.

While it runs: gold's total (sampling.GoldWatcher: when each trade became visible), the RSS and
CPU of its processes each second (the driver: run.py's Python and Spark's JVM; Spark's Python
workers; the broker's JVM), its log's milestones, and the page refreshed every 2 s through its
HTTP endpoint as the browser does (dashboard/client.py). The measured window opens
`warm_seconds` after the pipeline has caught up with what was produced while it started (its
first batches run on a cold JVM, on an empty lake as on a full one), and lasts `seconds`.
Batch durations come from Spark's offset and commit logs in the run's checkpoint (the time each
batch's offsets were written to the time it was committed), every batch, read each second
(Spark keeps the last 100); /api/status's
`batch_duration_ms` (Spark's triggerExecution of the last batch, sampled) is kept as a check.
The run is stopped with SIGTERM by its pid.

AppRun is one such run, from its start to every trade accounted for, for each bench that runs
the app this way (the long run's measure(), bench.metrics_scrape, bench.live_page).
"""

from __future__ import annotations

import bisect
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pyarrow.compute as pc
import requests

from bench.load import BENCH_DAY, PARTITIONS, kafka_config, new_producer, produce
from bench.phases import latencies
from bench.sampling import GoldWatcher, Poller, child_pids, cpu_ticks, proc_kib, process_name
from dashboard import ids
from dashboard.client import call, refresh_page
from streaming.config import Settings
from streaming.jobs.pipeline import MEDALLION_QUERY
from streaming.kafka import clients
from streaming.kafka.broker import MAIN_CLASS, free_port
from streaming.lake import tables
from streaming.lake.checkpoints import Checkpoints
from streaming.lake.store import Lake
from streaming.simulation.market import SYMBOLS, make_trade, market_open_on

REPO = Path(__file__).resolve().parent.parent
REFRESH_S = 2.0  # the page's own interval (--refresh-ms 2000)
FILTER_REFRESH_S = 30.0  # the drill-down's options (dashboard/panels/chart.py FILTER_REFRESH_MS)
# run.py's log lines that mark its start-up, in order.
MILESTONES = {"broker up": re.compile(r"embedded Kafka broker up"), "topic ready": re.compile(r"Kafka ready at"),
              "Spark up": re.compile(r"Spark \S+ up in"), "query started": re.compile(r"query '\w+' started"),
              "page up": re.compile(r"dashboard at http")}
GROUPS = ("driver", "workers", "broker")


class Page:
    """The app's page over HTTP: what dashboard/client.py's calls need of a Flask test client."""

    def __init__(self, port: int):
        self.base, self.session = f"http://127.0.0.1:{port}", requests.Session()

    def post(self, path: str, json: dict):
        response = self.session.post(self.base + path, json=json, timeout=60)
        response.data, response.get_json = response.content, response.json  # type: ignore[attr-defined]
        return response

    def status(self) -> dict | None:
        try:
            response = self.session.get(self.base + "/api/status", timeout=5)
            return response.json() if response.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return None

    def filter_options(self) -> None:
        options = [f"{ids.CHANNEL_FILTER}.options", f"{ids.SYMBOL_FILTER}.options"]
        call(self, options, {f"{ids.FILTER_TICK}.n_intervals": 0, f"{ids.DAY_PICKER}.value": None},
             dict.fromkeys(options))


@dataclass
class LakeRun:
    """What one run measured; times are seconds since run.py was started."""

    name: str
    seeded: int = 0  # gold's trade count before the run
    restart_s: float = float("nan")
    window: tuple[float, float] = (0.0, 0.0)
    rss: list = field(default_factory=list)  # (t, {group: MiB}); "run.py": the driver's Python alone
    cpu_s: dict = field(default_factory=dict)  # group -> CPU seconds in the window
    batches: list = field(default_factory=list)  # (t batch start, ms), from the checkpoint
    status_ms: dict = field(default_factory=dict)  # batch id -> Spark's triggerExecution ms (sampled)
    freshness: list = field(default_factory=list)  # (t sent, latency s)
    missing: int = 0
    refresh_ms: list = field(default_factory=list)  # (t, ms)
    filter_ms: list = field(default_factory=list)  # (t, ms)
    milestones: dict = field(default_factory=dict)  # name -> t

    def in_window(self, series: list) -> list:
        return [v for t, v in series if self.window[0] <= t <= self.window[1]]

    def peak(self, group: str, window: bool = True) -> float:
        return max((sample[group] for t, sample in self.rss if not window or self.window[0] <= t <= self.window[1]),
                   default=0.0)


class Processes(Poller):
    """run.py's processes each second: RSS per group, CPU ticks per pid, and its log's milestones."""

    def __init__(self, run: LakeRun, pid: int, t0: float, log_file: Path, page: Page, data_dir: Path,
                 interval_s: float = 1.0):
        super().__init__("processes", interval_s)
        self.run, self.pid, self.t0, self.log_file, self.page = run, pid, t0, log_file, page
        self.ticks: dict[int, tuple[str, int]] = {}
        self.broker_pid: int | None = None
        self.checkpoint = Checkpoints(Settings(data_dir=data_dir).checkpoint_dir).query(MEDALLION_QUERY).path
        self.wall_minus_t0 = time.time() - time.monotonic() + t0
        self.batches_seen: set[str] = set()
        self.status: dict | None = None  # /api/status at the last tick

    def groups(self) -> dict[str, list[int]]:
        children = child_pids(self.pid)
        javas = [pid for pid in children if process_name(pid) == "java"]
        brokers = [pid for pid in javas if MAIN_CLASS in _command_line(pid)]
        self.broker_pid = brokers[0] if brokers else self.broker_pid
        spark = [pid for pid in javas if pid not in brokers]
        return {"driver": [self.pid, *spark], "broker": brokers,
                "workers": [pid for pid in children if pid not in javas], "run.py": [self.pid]}

    def tick(self) -> None:
        now, sample = time.monotonic() - self.t0, {}
        for group, pids in self.groups().items():
            sample[group] = sum(proc_kib(pid, "VmRSS") for pid in pids) / 1024
            for pid in pids if group in GROUPS else ():  # "run.py" is the driver's Python, already counted
                if (ticks := cpu_ticks(pid)) is not None:
                    self.ticks[pid] = (group, ticks)
        self.run.rss.append((now, sample))
        self.status = status = self.page.status()
        for query in (status or {}).get("queries", []):
            if query.get("batch_id") is not None and query.get("batch_duration_ms") is not None:
                self.run.status_ms[query["batch_id"]] = (now, query["batch_duration_ms"])
        self.collect_batches()
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        for name, marker in MILESTONES.items():
            if name not in self.run.milestones and marker.search(text):
                self.run.milestones[name] = now

    def collect_batches(self) -> None:
        """(t the batch's offsets were written, ms until its commit) of each batch committed since
        the last look: Spark keeps only its last 100 batches' logs (minBatchesToRetain)."""
        try:
            names = [n for n in os.listdir(self.checkpoint / "commits") if n.isdigit() and n not in self.batches_seen]
        except OSError:
            return
        for name in sorted(names, key=int):
            try:
                start = (self.checkpoint / "offsets" / name).stat().st_mtime
                end = (self.checkpoint / "commits" / name).stat().st_mtime
            except OSError:
                continue
            self.batches_seen.add(name)
            self.run.batches.append((start - self.wall_minus_t0, (end - start) * 1000))

    def cpu_since(self, before: dict[int, tuple[str, int]]) -> dict[str, float]:
        return cpu_between(before, self.ticks)


def cpu_between(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]]) -> dict[str, float]:
    """CPU seconds per group between two of Processes' tick maps (pid -> (group, ticks))."""
    totals = dict.fromkeys(GROUPS, 0.0)
    for pid, (group, ticks) in after.items():
        totals[group] += (ticks - before.get(pid, (group, 0))[1]) / os.sysconf("SC_CLK_TCK")
    return totals


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


class Producer(threading.Thread):
    """Trades to the topic at `rate` per second, each one's send time kept (monotonic). The
    market clock runs `speed` times the wall clock from 09:05 on the bench's day."""

    def __init__(self, bootstrap: str, topic: str, rate: float, speed: float):
        super().__init__(name="producer", daemon=True)
        self.bootstrap, self.topic, self.rate, self.speed = bootstrap, topic, rate, speed
        self.sent: list[float] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        rng, prices, producer = random.Random(11), dict(SYMBOLS), new_producer(self.bootstrap)
        market, began = market_open_on(BENCH_DAY) + timedelta(minutes=5), time.monotonic()
        while not self.stopping.is_set():
            elapsed = time.monotonic() - began
            for _ in range(int(elapsed * self.rate) - len(self.sent)):
                produce(producer, self.topic, make_trade(rng, market + timedelta(seconds=elapsed * self.speed), prices))
                self.sent.append(time.monotonic())
            producer.poll(0)
            time.sleep(0.002)
        if producer.flush(30) != 0:
            raise RuntimeError("the broker did not acknowledge every trade")

    def sent_before(self, moment: float) -> int:
        return bisect.bisect_right(self.sent, moment)


class Refresher(threading.Thread):
    """The page as a browser keeps it: a refresh every REFRESH_S, the drill-down's options at
    load and every FILTER_REFRESH_S."""

    def __init__(self, page: Page, lake_run: LakeRun, t0: float):
        super().__init__(name="refresher", daemon=True)
        self.page, self.lake_run, self.t0 = page, lake_run, t0
        self.stopping = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        next_filter = 0.0
        while not self.stopping.is_set():
            began = time.monotonic()
            try:
                if began >= next_filter:
                    self.page.filter_options()
                    self.lake_run.filter_ms.append((began - self.t0, (time.monotonic() - began) * 1000))
                    next_filter = began + FILTER_REFRESH_S
                    began = time.monotonic()
                refresh_page(self.page)
                self.lake_run.refresh_ms.append((began - self.t0, (time.monotonic() - began) * 1000))
            except Exception as exc:  # noqa: BLE001 - said at the end; the run goes on
                self.error = exc
            self.stopping.wait(max(0.0, REFRESH_S - (time.monotonic() - began)))


def wait_for(predicate, timeout_s: float, what: str, process: subprocess.Popen, log_file: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if process.poll() is not None:
            tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise RuntimeError(f"run.py exited ({process.returncode}) while waiting for {what}:\n{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def topic_ready(bootstrap: str, topic: str, port: int) -> bool:
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", port)) != 0:
            return False
    try:  # every topic's metadata: asking for the topic by name would have the broker make it, one partition
        found = clients.admin(kafka_config(bootstrap)).list_topics(timeout=2).topics.get(topic)
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return found is not None and found.error is None and len(found.partitions) == PARTITIONS


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1."""
    ports: list[int] = []
    while len(ports) < count:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


def launch(arguments: list[str], log_file: Path) -> subprocess.Popen:
    """`python run.py ARGUMENTS` from the repository, as a user starts it: in a session of its own,
    its output to log_file, without this shell's TRADE_SUMMARY_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRADE_SUMMARY_")}
    with open(log_file, "w") as out:
        return subprocess.Popen([sys.executable, "run.py", *arguments], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def stop(process: subprocess.Popen, broker_pid: int | None, timeout_s: float = 180) -> None:
    """SIGTERM by pid and wait; a run.py that does not end is killed, and its broker with it."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
            return
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
    if broker_pid is not None and Path(f"/proc/{broker_pid}").exists() and MAIN_CLASS in _command_line(broker_pid):
        os.kill(broker_pid, signal.SIGTERM)


class AppRun:
    """One `python run.py --no-producer` on data_dir with the bench's producer at `rate`: entered,
    it is up and has caught up with what was produced while it started (caught_up, seconds since
    t0); finish() stops the producer and accounts for every trade (the run's freshness and
    batches); leaving stops it all, run.py by its pid. `planned_s` is how long the producer will
    run, for its market clock: the whole run inside the day's market hours, at 60x or slower."""

    def __init__(self, run: LakeRun, data_dir: Path, rate: float, topic: str, planned_s: float, say):
        self.run, self.data_dir, self.topic, self.say = run, data_dir, topic, say
        self.broker_port, self.web_port = free_ports(2)
        self.bootstrap, self.log_file = f"127.0.0.1:{self.broker_port}", data_dir.parent / f"run-{run.name}.log"
        self.page, self.watcher = Page(self.web_port), GoldWatcher(Lake(data_dir))
        self.producer = Producer(self.bootstrap, topic, rate, speed=min(60.0, 7.5 * 3600 / (planned_s + 300)))
        self.process: subprocess.Popen | None = None
        self.sampler: Processes | None = None
        self.t0 = self.caught_up = self.producer_began = 0.0

    def __enter__(self) -> AppRun:
        arguments = ["--data-dir", str(self.data_dir), "--broker-port", str(self.broker_port), "--host", "127.0.0.1",
                     "--port", str(self.web_port), "--topic", self.topic, "--no-producer"]
        run, seeded = self.run, self.run.seeded
        self.t0 = time.monotonic()
        self.process = launch(arguments, self.log_file)
        self.sampler = Processes(run, self.process.pid, self.t0, self.log_file, Page(self.web_port),
                                 self.data_dir).start()  # a session per thread
        self.say(f"  {run.name}: run.py (pid {self.process.pid}) on broker port {self.broker_port}, "
                 f"page port {self.web_port}")
        try:
            self.watcher.start()
            self.wait(lambda: topic_ready(self.bootstrap, self.topic, self.broker_port), 180, "the topic")
            self.producer_began = time.monotonic()  # its market clock's start
            self.producer.start()
            self.wait(lambda: self.watcher.total() > seeded, 600, "the first batch in gold")
            run.restart_s = next(t for t, total in self.watcher.seen if total > seeded) - self.t0
            self.say(f"  {run.name}: first batch in gold {run.restart_s:.1f} s after start")
            self.wait(lambda: self.page.status() is not None, 180, "the page")
            self.on_page()
            self.wait(lambda: self.watcher.total() - seeded >= self.producer.sent_before(time.monotonic() - 3), 600,
                      "the pipeline to catch up")
            self.caught_up = self.now()
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def on_page(self) -> None:
        """Called once the page answers, before the pipeline has caught up."""

    def now(self) -> float:
        return time.monotonic() - self.t0

    def wait(self, predicate, timeout_s: float, what: str) -> None:
        assert self.process is not None
        wait_for(predicate, timeout_s, what, self.process, self.log_file)

    def wait_until(self, t: float, what: str) -> None:
        """Until `t` seconds since t0."""
        self.wait(lambda: self.now() >= t, max(0.0, t - self.now()) + 60, what)

    def finish(self) -> None:
        """Stop producing and account for every trade (stop_producing); the checkpoint's batches."""
        self.stop_producing()
        self.collect_batches()

    def collect_batches(self) -> None:
        assert self.sampler is not None
        self.sampler.stop()
        self.sampler.collect_batches()

    def stop_producing(self) -> None:
        """Stop producing; wait for every trade in gold (a shortfall is said, and counted in
        run.missing); the run's freshness."""
        run, seeded = self.run, self.run.seeded
        self.producer.stopping.set()
        self.producer.join(60)
        try:
            self.wait(lambda: self.watcher.total() - seeded >= len(self.producer.sent), 90, "every trade in gold")
        except RuntimeError as exc:
            self.say(f"  {run.name}: {exc}")
        values, run.missing = latencies(self.producer.sent, self.watcher.seen, seeded)
        run.freshness = [(sent - self.t0, latency) for sent, latency in zip(self.producer.sent, values)]

    def __exit__(self, *exc_info) -> None:
        self.producer.stopping.set()
        self.watcher.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.process is not None:
            stop(self.process, self.sampler.broker_pid if self.sampler is not None else None)
            self.say(f"  {self.run.name}: run.py stopped (exit code {self.process.returncode})")


class RefreshedRun(AppRun):
    """An AppRun whose page is refreshed every 2 s as a browser would (Refresher) from when it answers."""

    refresher: Refresher | None = None

    def on_page(self) -> None:
        self.refresher = Refresher(self.page, self.run, self.t0)
        self.refresher.start()

    def stop_producing(self) -> None:
        assert self.refresher is not None
        self.refresher.stopping.set()
        super().stop_producing()
        if self.refresher.error is not None:
            self.say(f"  {self.run.name}: a page refresh failed: {self.refresher.error}")

    def __exit__(self, *exc_info) -> None:
        if self.refresher is not None:
            self.refresher.stopping.set()
        super().__exit__(*exc_info)


def measure(name: str, data_dir: Path, seconds: float, warm_seconds: float, rate: float, topic: str,
            say) -> LakeRun:
    """Start run.py on data_dir, produce, wait until it has caught up and `warm_seconds` more,
    measure `seconds`, stop it."""
    seeded = Lake(data_dir).read(tables.GOLD, columns=["trade_count"])["trade_count"]
    run = LakeRun(name, seeded=pc.sum(seeded).as_py() or 0)
    with RefreshedRun(run, data_dir, rate, topic, seconds + warm_seconds, say) as app:
        say(f"  {name}: caught up at {app.caught_up:.1f} s; {warm_seconds:g} s more, then {seconds:g} s measured ...")
        run.window = (app.caught_up + warm_seconds, app.caught_up + warm_seconds + seconds)
        app.wait_until(run.window[0], "the window")
        assert app.sampler is not None
        window_ticks = dict(app.sampler.ticks)
        app.wait_until(run.window[1], "the window's end")
        run.cpu_s = app.sampler.cpu_since(window_ticks)
        app.finish()
        return run
