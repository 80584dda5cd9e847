"""The benchmark: how fast, how fresh, how heavy. `python -m streaming.bench --help`.

It starts its own embedded broker on a free port, in a temporary directory, and measures in
one run (so the figures can be compared with each other on a shared, noisy machine):

1. broker anchor: a plain confluent-kafka consumer reading the preloaded trades;
2. throughput: the pipeline (both queries) catching up on those trades, Kafka to gold, after
   a warm-up run over other trades (a cold JVM runs its first batches slower);
3. freshness: trades produced at a steady rate, time from produce to visible in gold;
4. dashboard: one page refresh (the data callback reading the tables, then the figures);
5. memory: peak RSS of the JVM, this Python process and the broker.

Each result is checked (gold must hold exactly the trades produced), printed as it comes,
written to docs/benchmarks.md with two plots, and summed up in one final `bench:` line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition

from streaming.cli import add_spark_conf_argument
from streaming.config import Settings, format_duration
from streaming.kafka.clients import EndOffsets
from streaming.kafka.admin import ensure_topic, wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker, port_is_free
from streaming.kafka.reader import MAX_RESPONSE_BYTES
from streaming.simulation.market import SYMBOLS, make_trade, market_open_on

log = logging.getLogger("bench")
REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_DAY = datetime(2026, 3, 2, tzinfo=timezone.utc).date()
PARTITIONS = 3
TARGETS = {  # from the issue; reported against, never asserted in tests
    "throughput": 50_000,  # trades/s sustained, Kafka to gold
    "freshness_p95_s": 2.0,  # at 1,000 trades/s
    "callback_p95_ms": 50.0,
    "rss_mb": 2048.0,
}


@dataclass
class Oracle:
    """What gold must add up to: the exact totals of the trades produced."""

    count: int = 0
    buy: float = 0.0
    sell: float = 0.0

    def add(self, trade: dict) -> None:
        amount = trade["quantity"] * trade["price"]
        self.count += 1
        if trade["side"] == "BUY":
            self.buy += amount
        else:
            self.sell += amount


@dataclass
class Results:
    trades: int = 0
    preload_s: float = 0.0
    broker_msgs_per_s: float = 0.0
    spark_start_s: float = 0.0
    throughput: float = 0.0  # sustained: trades / (last batch end - first batch start)
    throughput_wall: float = 0.0  # trades / (query start .. both queries done)
    warmup_trades: int = 0
    throughput_cold: float = 0.0  # the warm-up's own sustained rate, in a JVM that had run nothing yet
    batches: dict = field(default_factory=dict)  # query -> {"batches", "mean_ms", "max_ms"}
    freshness: list = field(default_factory=list)  # (seconds since start, latency s) per trade
    freshness_rate: float = 0.0
    freshness_missing: int = 0
    callback_ms: list = field(default_factory=list)  # the data callback + the chart figure
    refresh_ms: list = field(default_factory=list)  # every callback of one page refresh
    cpu_s: dict = field(default_factory=dict)  # phase -> {process group: CPU seconds}
    phase_s: dict = field(default_factory=dict)  # phase -> wall seconds
    dashboard_rows: dict = field(default_factory=dict)
    rss_mb: dict = field(default_factory=dict)  # group -> its peak RSS
    peak_total_rss_mb: float = 0.0  # the peak of all groups' RSS summed at one moment
    peak_total_pss_mb: float = 0.0

    def percentile(self, values: list[float], p: float) -> float:
        if not values:
            return float("nan")
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]

    @property
    def ratio_to_broker(self) -> float:
        return self.throughput / self.broker_msgs_per_s if self.broker_msgs_per_s else float("nan")

    def latencies(self) -> list[float]:
        return [latency for _, latency in self.freshness]

    def summary_line(self) -> str:
        return (f"bench: throughput={self.throughput:,.0f} ratio_to_broker={self.ratio_to_broker:.3f} "
                f"freshness_p95_s={self.percentile(self.latencies(), 95):.2f} "
                f"callback_p95_ms={self.percentile(self.callback_ms, 95):.1f} "
                f"rss_mb={self.peak_total_rss_mb:,.0f}")


# -- helpers ---------------------------------------------------------------------------------
def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def new_producer(bootstrap: str, **overrides) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "linger.ms": 5, "queue.buffering.max.messages": 1_000_000, **overrides})


def produce(producer: Producer, topic: str, trade: dict) -> None:
    value = json.dumps(trade, separators=(",", ":")).encode()
    while True:
        try:
            producer.produce(topic, value=value, key=trade["account_id"].encode())
            return
        except BufferError:  # the local queue is full: let deliveries drain
            producer.poll(0.05)


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

    def __init__(self, broker_dir: Path, interval_s: float = 1.0):
        super().__init__("memory", interval_s)
        self.broker_dir = broker_dir
        self.peak_rss = dict.fromkeys(self.GROUPS, 0.0)
        self.peak_total_rss = self.peak_total_pss = 0.0
        self._cpu_ticks: dict[int, tuple[str, int]] = {}  # pid -> (group, user + system ticks last seen)
        self._lock = threading.Lock()

    def groups(self) -> dict[str, list[int]]:
        children = child_pids(os.getpid())
        jvm = [pid for pid in children if process_name(pid) == "java"]
        broker = broker_pid(self.broker_dir)
        return {"JVM": jvm, "Python (driver)": [os.getpid()],
                "Spark Python workers": [pid for pid in children if pid not in jvm],
                "broker": [broker] if broker else []}

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each group's processes (exited ones as last seen)."""
        self.sample()
        with self._lock:
            totals = dict.fromkeys(self.GROUPS, 0.0)
            for group, ticks in self._cpu_ticks.values():
                totals[group] += ticks / os.sysconf("SC_CLK_TCK")
            return totals

    def sample(self) -> None:
        total_rss = total_pss = 0.0
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
        self.peak_total_rss = max(self.peak_total_rss, total_rss)
        self.peak_total_pss = max(self.peak_total_pss, total_pss)

    def tick(self) -> None:
        self.sample()

    def stop(self) -> None:
        super().stop()
        self.sample()


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


def broker_pid(data_dir: Path) -> int | None:
    """The embedded broker's pid, from the control file noida-db keeps in its data dir."""
    try:
        control = json.loads((data_dir / "noida.control.json").read_text())
    except (OSError, ValueError):
        return None
    pid = control.get("pid") if isinstance(control, dict) else None
    return int(pid) if pid else None


# -- 1. preload and the broker anchor --------------------------------------------------------
def preload(bootstrap: str, topic: str, count: int, seed: int = 7) -> Oracle:
    """`count` trades spread evenly over one trading day (09:00-17:00), in event-time order."""
    rng, prices, oracle = random.Random(seed), dict(SYMBOLS), Oracle()
    opening, step = market_open_on(BENCH_DAY), timedelta(hours=8) / max(count, 1)
    producer = new_producer(bootstrap, **{"linger.ms": 50, "batch.num.messages": 10_000})
    for i in range(count):
        trade = make_trade(rng, opening + step * i, prices)
        oracle.add(trade)
        produce(producer, topic, trade)
        if i % 5_000 == 0:
            producer.poll(0)
        if i and i % 200_000 == 0:
            log.info("  preloaded %s trades ...", f"{i:,}")
    if producer.flush(120) != 0:
        raise RuntimeError("the broker did not acknowledge every preloaded trade")
    return oracle


def broker_consume_rate(bootstrap: str, topic: str) -> float:
    """Messages/s of a plain consumer reading the whole topic (assign + consume, values touched)."""
    reader = EndOffsets({"bootstrap.servers": bootstrap}, topic)
    try:
        ends = {int(key.rsplit(":", 1)[1]): end for key, end in reader.read(timeout_s=10).items()}
    finally:
        reader.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-anchor", "enable.auto.commit": False,
                         "enable.partition.eof": False, "receive.message.max.bytes": MAX_RESPONSE_BYTES})
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    remaining, read, value_bytes = sum(ends.values()), 0, 0
    began = time.perf_counter()
    try:
        while read < remaining:
            for msg in consumer.consume(num_messages=10_000, timeout=5.0):
                if msg.error() is None:
                    read += 1
                    value_bytes += len(msg.value())
            if time.perf_counter() - began > 300:
                raise RuntimeError(f"the anchor consumer read only {read:,} of {remaining:,} records in 300 s")
        return read / (time.perf_counter() - began)
    finally:
        consumer.close()


# -- 2. throughput: the pipeline catching up ------------------------------------------------
def check_gold(data_dir: Path, oracle: Oracle, what: str) -> None:
    from deltalake import DeltaTable

    gold = DeltaTable(str(data_dir / "gold" / "trade_summary")).to_pyarrow_table(
        columns=["buy_amount", "sell_amount", "trade_count"])
    count = pa.compute.sum(gold["trade_count"]).as_py() or 0
    buy = pa.compute.sum(gold["buy_amount"]).as_py() or 0.0
    sell = pa.compute.sum(gold["sell_amount"]).as_py() or 0.0
    if count != oracle.count or abs(buy - oracle.buy) > 1e-6 * max(1.0, oracle.buy) \
            or abs(sell - oracle.sell) > 1e-6 * max(1.0, oracle.sell):
        raise RuntimeError(f"{what}: gold holds {count:,} trades (buy {buy:,.2f}, sell {sell:,.2f}), expected "
                           f"{oracle.count:,} (buy {oracle.buy:,.2f}, sell {oracle.sell:,.2f})")


def batch_stats(progress: list[dict]) -> tuple[dict, float, float]:
    """Per query: batches, mean and max duration; and the span from first start to last end."""
    with_rows = [p for p in progress if p.get("numInputRows")]
    durations = [p["durationMs"]["triggerExecution"] for p in with_rows]
    starts = [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() for p in with_rows]
    ends = [s + d / 1000 for s, d in zip(starts, durations)]
    stats = {"batches": len(with_rows), "rows": sum(p["numInputRows"] for p in with_rows),
             "mean_ms": statistics.mean(durations) if durations else 0, "max_ms": max(durations, default=0)}
    return stats, min(starts, default=0.0), max(ends, default=0.0)


def catch_up(spark, settings: Settings, oracle: Oracle, what: str) -> tuple[float, float, dict]:
    """Run the pipeline over a preloaded topic until it has read everything; check gold.
    Returns (sustained trades/s, end-to-end trades/s, per-query batch stats)."""
    from streaming.pipeline import Pipeline

    pipeline = Pipeline(spark, settings)
    began = time.time()
    pipeline.start()
    pipeline.wait_until_done()
    wall = time.time() - began
    failures = pipeline.failed()
    if failures:
        raise RuntimeError(f"{what}: query {failures[0].name} failed: {failures[0].error}")
    span_start, span_end, batches = float("inf"), 0.0, {}
    for query in pipeline.queries:
        batches[query.name], first, last = batch_stats(query.recentProgress)
        span_start, span_end = min(span_start, first), max(span_end, last)
    check_gold(settings.data_dir, oracle, what)
    end_to_end = oracle.count / wall
    return (oracle.count / (span_end - span_start) if span_end > span_start else end_to_end), end_to_end, batches


def run_warmup(spark, settings: Settings, oracle: Oracle, results: Results) -> None:
    """The same pipeline over other trades first, unmeasured: a pipeline that has been running
    has its JVM's hot code compiled, its Python workers started and Spark's code generated."""
    results.warmup_trades = oracle.count
    results.throughput_cold, _, _ = catch_up(spark, settings, oracle, "warm-up run")


def run_throughput(spark, settings: Settings, oracle: Oracle, results: Results) -> None:
    results.throughput, results.throughput_wall, results.batches = catch_up(spark, settings, oracle, "throughput run")


# -- 3. freshness: produce at a steady rate, watch gold ---------------------------------------
class GoldWatcher(Poller):
    """Polls gold's total trade count; records when each new total became visible."""

    def __init__(self, path: Path, interval_s: float = 0.05):
        super().__init__("gold-watcher", interval_s)
        self.path = path
        self.seen: list[tuple[float, int]] = []  # (monotonic time, total trade count)
        self._table, self._version = None, None

    def total(self) -> int:
        return self.seen[-1][1] if self.seen else 0

    def tick(self) -> None:
        from deltalake import DeltaTable

        try:
            if self._table is None:
                self._table = DeltaTable(str(self.path))
            else:
                self._table.update_incremental()
            if self._table.version() != self._version:
                self._version = self._table.version()
                counts = self._table.to_pyarrow_table(columns=["trade_count"])["trade_count"]
                self.seen.append((time.monotonic(), pa.compute.sum(counts).as_py() or 0))
        except Exception as exc:  # noqa: BLE001 - a read racing a commit: try again next tick
            log.debug("gold watcher: %s", exc)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.1)


def latencies(produced: list[float], seen: list[tuple[float, int]], offset: int) -> tuple[list[float], int]:
    """Trade k (1-based, in produce order) is visible once gold's total reaches offset + k:
    its latency is that moment minus its produce time. Returns latencies and how many never showed."""
    out, j = [], 0
    for k, sent_at in enumerate(produced, start=1):
        while j < len(seen) and seen[j][1] < offset + k:
            j += 1
        if j == len(seen):
            return out, len(produced) - k + 1
        out.append(seen[j][0] - sent_at)
    return out, 0


def run_freshness(spark, settings: Settings, rate: float, seconds: float, results: Results) -> None:
    from streaming.pipeline import Pipeline

    bootstrap, topic = settings.kafka_bootstrap, settings.topic
    pipeline = Pipeline(spark, settings)
    pipeline.start()
    watcher = GoldWatcher(settings.data_dir / "gold" / "trade_summary").start()
    rng, prices, oracle = random.Random(11), dict(SYMBOLS), Oracle()
    producer = new_producer(bootstrap)
    market = market_open_on(BENCH_DAY)
    try:
        # Warm-up: the first micro-batches carry Spark's start-up costs; measure after them.
        for i in range(20):
            trade = make_trade(rng, market + timedelta(seconds=i), prices)
            oracle.add(trade)
            produce(producer, topic, trade)
        producer.flush(30)
        wait_until(lambda: watcher.total() >= oracle.count, 180, "the warm-up trades in gold")
        warm = oracle.count
        log.info("  warm: producing %g trades/s for %g s ...", rate, seconds)

        produced: list[float] = []
        began = time.monotonic()
        # The market clock runs 60x, like the simulation: about 12 windows in 3 minutes.
        market_start = market + timedelta(minutes=5)
        while (elapsed := time.monotonic() - began) < seconds:
            due = int(elapsed * rate) - len(produced)
            for _ in range(due):
                trade = make_trade(rng, market_start + timedelta(seconds=elapsed * 60), prices)
                oracle.add(trade)
                produce(producer, topic, trade)
                produced.append(time.monotonic())
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(30)
        try:
            wait_until(lambda: watcher.total() >= oracle.count, 60, "every produced trade in gold")
        except RuntimeError as exc:
            log.warning("  %s", exc)
    finally:
        watcher.stop()
        pipeline.stop()
    results.freshness_rate = len(produced) / seconds
    values, results.freshness_missing = latencies(produced, watcher.seen, warm)
    results.freshness = [(sent - began, latency) for sent, latency in zip(produced, values)]
    if results.freshness_missing == 0:
        check_gold(settings.data_dir, oracle, "freshness run")


# -- 4. dashboard: one page refresh on a full trading day --------------------------------------
def add_corrections_and_late_trades(data_dir: Path, corrections: int, late: int) -> None:
    """Give the day's windows corrections and too-late trades, as a day with late data has."""
    import pandas as pd
    from deltalake import DeltaTable

    from streaming.corrections import CORRECTIONS_SCHEMA, CORRECTIONS_TABLE
    from streaming.delta_sink import publish
    from streaming.lateness import LATE_TRADES_SCHEMA, LATE_TRADES_TABLE

    gold = DeltaTable(str(data_dir / "gold" / "trade_summary")).to_pandas().sort_values("window_start")
    rng, now = random.Random(3), datetime.now(timezone.utc)
    rows = []
    for i in range(corrections):
        w = gold.iloc[i % len(gold)]
        buy, sell, count = float(w.buy_amount), float(w.sell_amount), int(w.trade_count)
        extra_buy, extra_sell = rng.uniform(0, 5_000), rng.uniform(0, 5_000)
        rows.append({"window_start": w.window_start, "window_end": w.window_end,
                     "buy_amount_before": buy - extra_buy, "buy_amount_after": buy,
                     "sell_amount_before": sell - extra_sell, "sell_amount_after": sell,
                     "settlement_amount_before": buy - extra_buy - sell + extra_sell,
                     "settlement_amount_after": buy - sell, "trade_count_before": count - 2,
                     "trade_count_after": count, "late_trades": 2, "corrected_at": now - timedelta(seconds=i),
                     "watermark": w.window_end, "batch_id": i, "query_id": "bench"})
    publish(data_dir / CORRECTIONS_TABLE, pa.Table.from_pylist(rows, schema=CORRECTIONS_SCHEMA),
            ("query_id", "batch_id", "window_start"), "bench-corrections", 0)
    late_rows = []
    for i in range(late):
        w = gold.iloc[i % len(gold)]
        event_time = pd.Timestamp(w.window_start) + pd.Timedelta(seconds=rng.uniform(0, 899))
        late_rows.append({"trade_id": f"late-{i}", "event_time": event_time, "window_start": w.window_start,
                          "window_end": w.window_end, "watermark": event_time + pd.Timedelta(minutes=5),
                          "late_by_seconds": 300.0, "side": "BUY" if i % 2 else "SELL",
                          "amount": rng.uniform(100, 10_000), "topic": "trades", "partition": i % PARTITIONS,
                          "offset": i, "detected_at": now - timedelta(seconds=i), "backfilled_at": None})
    publish(data_dir / LATE_TRADES_TABLE, pa.Table.from_pylist(late_rows, schema=LATE_TRADES_SCHEMA),
            ("trade_id",), "bench-late", 0)


def run_dashboard(data_dir: Path, runs: int, results: Results) -> None:
    """Time a page refresh while gold changes between refreshes, as it does live (a refresh
    that finds no new table version reads nothing and is faster still)."""
    from deltalake import DeltaTable

    from dashboard.app import create_app
    from dashboard.client import draw_chart, draw_panels, refresh_page, store_snapshot
    from streaming.delta_sink import publish

    gold_path = data_dir / "gold" / "trade_summary"
    client = create_app(data_dir).server.test_client()
    figure = refresh_page(client)  # the first call builds Dash's callback map
    results.dashboard_rows = {
        "windows": len(DeltaTable(str(gold_path)).to_pyarrow_table(columns=["window_start"])),
        "corrections": len(DeltaTable(str(data_dir / "gold" / "corrections")).to_pyarrow_table(columns=["batch_id"])),
        "late_trades": len(DeltaTable(str(data_dir / "gold" / "late_trades")).to_pyarrow_table(columns=["trade_id"])),
        "traces": len(figure["data"]),
    }
    window = DeltaTable(str(gold_path)).to_pyarrow_table().slice(0, 1)
    for i in range(runs):
        publish(gold_path, window, ("window_start",), "bench-dashboard", i, bump=("revision",))
        began = time.perf_counter()
        snapshot = store_snapshot(client)
        draw_chart(client, snapshot)
        results.callback_ms.append((time.perf_counter() - began) * 1000)
        draw_panels(client, snapshot)
        results.refresh_ms.append((time.perf_counter() - began) * 1000)


# -- the report --------------------------------------------------------------------------------
def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    memory = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), "0")
    import pyspark

    return {"cpu": f"{os.cpu_count()} cores, {cpu}", "memory": f"{int(memory) / 1024 / 1024:.1f} GiB",
            "python": platform.python_version(), "spark": pyspark.__version__, "os": platform.platform()}


def plot(results: Results, out_dir: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install -r requirements-bench.txt): no plots")
        return []
    names = []
    if results.freshness:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.scatter([t for t, _ in results.freshness], [v for _, v in results.freshness], s=2, color="#1f77b4",
                   alpha=0.4, label="one trade")
        for p, style in ((50, "--"), (95, "-")):
            value = results.percentile(results.latencies(), p)
            ax.axhline(value, color="#ff7f0e", linestyle=style, label=f"p{p} {value:.2f} s")
        ax.axhline(TARGETS["freshness_p95_s"], color="#7f7f7f", linestyle=":", label="target p95")
        ax.set(xlabel="seconds since steady production began", ylabel="produce -> visible in gold (s)",
               title=f"Freshness at {results.freshness_rate:,.0f} trades/s")
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "bench-freshness.png", dpi=110)
        plt.close(fig)
        names.append("bench-freshness.png")
    fig, ax = plt.subplots(figsize=(8, 2.8))
    labels = ["broker: plain consumer", "pipeline: Kafka -> gold", "target"]
    values = [results.broker_msgs_per_s, results.throughput, TARGETS["throughput"]]
    ax.barh(labels, values, color=["#7f7f7f", "#1f77b4", "#ff7f0e"])
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:,.0f}/s", va="center", fontsize=8)
    ax.set(xlabel="trades (records) per second", title=f"Throughput on {results.trades:,} preloaded trades")
    ax.set_xlim(0, max(values) * 1.25)
    fig.tight_layout()
    fig.savefig(out_dir / "bench-throughput.png", dpi=110)
    plt.close(fig)
    names.append("bench-throughput.png")
    return names


def report(results: Results, args: argparse.Namespace, plots: list[str]) -> str:
    p = results.percentile
    lat, cb = results.latencies(), results.callback_ms
    rss_total = results.peak_total_rss_mb

    def verdict(value, target, higher_is_better=False):
        met = value >= target if higher_is_better else value <= target
        return "met" if met else "**not met**"

    rows = [
        ("throughput, Kafka -> gold (sustained)", f"{results.throughput:,.0f} trades/s", f">= {TARGETS['throughput']:,}",
         verdict(results.throughput, TARGETS["throughput"], True)),
        ("ratio to the broker anchor", f"{results.ratio_to_broker:.3f}", "", ""),
        ("freshness p50 / p95 / p99", f"{p(lat, 50):.2f} / {p(lat, 95):.2f} / {p(lat, 99):.2f} s",
         f"p95 <= {TARGETS['freshness_p95_s']:g} s", verdict(p(lat, 95), TARGETS["freshness_p95_s"])),
        ("dashboard data callback + chart figure p50 / p95", f"{p(cb, 50):.1f} / {p(cb, 95):.1f} ms",
         f"p95 <= {TARGETS['callback_p95_ms']:g} ms", verdict(p(cb, 95), TARGETS["callback_p95_ms"])),
        ("whole page refresh (every callback) p50 / p95",
         f"{p(results.refresh_ms, 50):.1f} / {p(results.refresh_ms, 95):.1f} ms", "", ""),
        ("peak RSS, all processes", f"{rss_total:,.0f} MiB", f"<= {TARGETS['rss_mb']:,.0f} MiB",
         verdict(rss_total, TARGETS["rss_mb"])),
    ]
    m = machine()
    lines = [
        "# Benchmarks",
        "",
        f"Measured by `python -m streaming.bench {' '.join(args.argv)}`".rstrip() + " on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. One run measures everything, so the figures",
        "compare with each other; the machine is shared, so expect some spread between runs.",
        "",
        "| figure | measured | target | |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in m.items()],
        f"- Spark master `{args.master}`, {PARTITIONS} topic partitions, embedded noida-db broker"
        + "".join(f", `--conf {key}={value}`" for key, value in args.conf),
        "",
        "## What each figure is",
        "",
        f"- **Broker anchor**: {results.broker_msgs_per_s:,.0f} records/s, a plain confluent-kafka consumer "
        f"reading the {results.trades:,} preloaded trades (assign + consume, each value touched). The pipeline "
        "cannot read faster than this.",
        f"- **Throughput**: both queries (`bronze_silver` and `gold_trade_summary`) catch up on the preloaded "
        f"trades with `--available-now` and `--max-offsets-per-trigger {args.batch_size}`. Sustained = trades / "
        "(first batch start .. last batch end); gold is then checked against the exact totals. "
        f"End to end, including query start-up: {results.throughput_wall:,.0f} trades/s. "
        f"Spark itself took {results.spark_start_s:.1f} s to start (not counted)."
        + (f" Before it, the same pipeline ran over {results.warmup_trades:,} other trades (not counted), as "
           "a pipeline that has been running has its hot code compiled by the JVM, its Python workers "
           f"started and its code generated. That warm-up itself, cold, ran at {results.throughput_cold:,.0f} "
           "trades/s." if results.warmup_trades else ""),
        *[f"  - `{name}`: {s['batches']} batches of up to {args.batch_size:,} records, "
          f"mean {s['mean_ms']:,.0f} ms, max {s['max_ms']:,.0f} ms" for name, s in results.batches.items()],
        f"- **Freshness**: trades produced at {results.freshness_rate:,.0f}/s for {args.freshness_seconds:g} s "
        f"with the default {format_duration(Settings.trigger)} trigger; a trade's latency is from its "
        "`produce()` call to the first read of gold (polled every 50 ms) whose total count includes it. "
        f"{len(lat):,} trades measured" + (f", {results.freshness_missing:,} never showed" if
                                           results.freshness_missing else "") + ".",
        f"- **Dashboard**: the callbacks as the browser runs them, through Dash's HTTP endpoint. The data "
        "callback reads gold, corrections and late trades into the store; the chart callback builds the "
        "figure from it (the target's figure); the whole refresh adds the KPI, feed and health callbacks. "
        "Gold gets a new version before each refresh, as it does live. A full trading day: "
        f"{results.dashboard_rows.get('windows', 0)} windows, {results.dashboard_rows.get('corrections', 0)} "
        f"corrections, {results.dashboard_rows.get('late_trades', 0)} too-late trades; {len(cb)} refreshes.",
        "- **Memory**: every process sampled each second through the run. The peak of their RSS summed "
        f"at one moment is the figure above; PSS, which shares the pages Spark's forked Python workers have "
        f"in common out among them, peaked at {results.peak_total_pss_mb:,.0f} MiB. Each group's own peak RSS: "
        + ", ".join(f"{name} {mb:,.0f} MiB" for name, mb in results.rss_mb.items()) + ".",
        "",
        "## Where the CPU went",
        "",
        f"CPU seconds per process group in each phase (the machine has {os.cpu_count()} cores, so "
        "a phase can use at most that many times its wall time):",
        "",
        "| phase | wall | " + " | ".join(MemorySampler.GROUPS) + " | cores busy |",
        "|---|---|" + "---|" * len(MemorySampler.GROUPS) + "---|",
        *[f"| {name} | {results.phase_s[name]:.1f} s | "
          + " | ".join(f"{cpu[g]:.1f} s" for g in MemorySampler.GROUPS)
          + f" | {sum(cpu.values()) / results.phase_s[name]:.2f} |" for name, cpu in results.cpu_s.items()],
        "",
        *cpu_per_trade_lines(results),
    ]
    for name in plots:
        lines += [f"![{name}]({name})", ""]
    return "\n".join(lines)


def cpu_per_trade_lines(results: Results) -> list[str]:
    """The throughput phase's CPU per trade, against what the target leaves on these cores."""
    cpu = results.cpu_s.get("throughput")
    if not cpu or not results.trades:
        return []
    per_trade = {group: seconds / results.trades * 1e6 for group, seconds in cpu.items()}
    budget = (os.cpu_count() or 1) / TARGETS["throughput"] * 1e6
    return [
        f"Per trade in the throughput phase: {sum(per_trade.values()):.1f} us of CPU ("
        + ", ".join(f"{group} {us:.1f} us" for group, us in per_trade.items()) + f"). {TARGETS['throughput']:,} "
        f"trades/s on {os.cpu_count()} cores leaves {budget:.0f} us per trade for all of them together.",
        "",
    ]


# -- the run -----------------------------------------------------------------------------------
@contextlib.contextmanager
def phase(name: str, memory: MemorySampler, results: Results):
    """Record a phase's wall time and the CPU time each process group spent in it."""
    before, began = memory.cpu_seconds(), time.perf_counter()
    yield
    after = memory.cpu_seconds()
    results.phase_s[name] = time.perf_counter() - began
    results.cpu_s[name] = {group: after[group] - before[group] for group in after}


def drop_topic(bootstrap: str, topic: str) -> None:
    """The broker snapshots all it holds every few seconds: a million trades it no longer
    needs would cost CPU through the later phases."""
    from streaming.kafka.clients import admin as admin_client

    admin = admin_client({"bootstrap.servers": bootstrap})  # kept alive until the deletion is answered
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    except Exception as exc:  # noqa: BLE001 - only a cost, not a wrong figure
        log.warning("    could not delete topic %s: %s", topic, exc)
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.bench",
        description="Measure the pipeline on this machine: broker anchor, throughput, freshness, dashboard "
                    "refresh and memory, in one run with its own broker on a free port. Prints one "
                    "`bench:` line at the end and writes docs/benchmarks.md with plots.")
    parser.add_argument("--trades", type=int, default=1_000_000, help="trades to preload (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=250_000,
                        help="max offsets per trigger while catching up (default: %(default)s)")
    parser.add_argument("--warmup-trades", type=int, default=100_000,
                        help="trades the pipeline runs over first, unmeasured, so that throughput is "
                             "measured on a warm JVM as in a running pipeline; 0: measure cold "
                             "(default: %(default)s)")
    parser.add_argument("--rate", type=float, default=1_000, help="trades/s for freshness (default: %(default)s)")
    parser.add_argument("--freshness-seconds", type=float, default=180,
                        help="how long to produce for freshness (default: %(default)s)")
    parser.add_argument("--callback-runs", type=int, default=200, help="dashboard refreshes (default: %(default)s)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    add_spark_conf_argument(parser)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs",
                        help="where benchmarks.md and the plots go (default: docs/)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv
    for name in ("trades", "batch_size", "callback_runs"):
        if getattr(args, name) <= 0:
            build_parser().error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup_trades < 0:
        build_parser().error("--warmup-trades must be 0 or more")
    if args.rate <= 0 or args.freshness_seconds <= 0:
        build_parser().error("--rate and --freshness-seconds must be positive")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s  %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "streaming", "deltalake"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    work = Path(tempfile.mkdtemp(prefix="trade-summary-bench-"))
    port = free_port()
    broker = EmbeddedBroker(work / "broker", port)
    results, spark = Results(trades=args.trades), None
    try:
        log.info("bench: broker on 127.0.0.1:%d, data in %s", port, work)
        if not port_is_free(port):
            raise RuntimeError(f"port {port} was taken meanwhile; run again")
        broker.start()
        memory = MemorySampler(broker.data_dir).start()
        bootstrap = broker.bootstrap_servers
        wait_until_reachable({"bootstrap.servers": bootstrap}, timeout_s=30)
        for topic in ("bench-warmup", "bench-preload", "bench-fresh"):
            ensure_topic({"bootstrap.servers": bootstrap}, topic, PARTITIONS, 3_600_000)

        from streaming.spark_session import create_spark

        log.info("starting Spark (%s) ...", args.master)
        began = time.perf_counter()
        spark = create_spark(args.master, conf_overrides=args.conf)
        results.spark_start_s = time.perf_counter() - began
        common = dict(bootstrap_servers=bootstrap, producer_enabled=False, dashboard_enabled=False, master=args.master)
        if args.warmup_trades:
            # Before the preload, so that the broker never holds both topics at once.
            log.info("warming up: the pipeline over %s other trades (not measured) ...", f"{args.warmup_trades:,}")
            warm = preload(bootstrap, "bench-warmup", args.warmup_trades, seed=3)
            with phase("warm-up", memory, results):
                run_warmup(spark, Settings(data_dir=work / "warmup", topic="bench-warmup", available_now=True,
                                           max_offsets_per_trigger=args.batch_size, **common), warm, results)
            drop_topic(bootstrap, "bench-warmup")
            log.info("    warm-up done: %s trades/s cold", f"{results.throughput_cold:,.0f}")

        log.info("1/5 preloading %s trades ...", f"{args.trades:,}")
        began = time.perf_counter()
        oracle = preload(bootstrap, "bench-preload", args.trades)
        results.preload_s = time.perf_counter() - began
        results.broker_msgs_per_s = broker_consume_rate(bootstrap, "bench-preload")
        log.info("    broker anchor: %s records/s (plain consumer)", f"{results.broker_msgs_per_s:,.0f}")

        log.info("2/5 throughput: catching up on them ...")
        throughput_dir = work / "throughput"
        with phase("throughput", memory, results):
            run_throughput(spark, Settings(data_dir=throughput_dir, topic="bench-preload", available_now=True,
                                           max_offsets_per_trigger=args.batch_size, **common), oracle, results)
        drop_topic(bootstrap, "bench-preload")
        log.info("    throughput: %s trades/s sustained (%.3f of the broker), %s trades/s end to end; gold exact",
                 f"{results.throughput:,.0f}", results.ratio_to_broker, f"{results.throughput_wall:,.0f}")

        log.info("3/5 freshness at %g trades/s for %g s ...", args.rate, args.freshness_seconds)
        with phase("freshness", memory, results):
            run_freshness(spark, Settings(data_dir=work / "fresh", topic="bench-fresh", **common),
                          args.rate, args.freshness_seconds, results)
        lat = results.latencies()
        log.info("    freshness: p50 %.2f s, p95 %.2f s, p99 %.2f s over %s trades%s",
                 results.percentile(lat, 50), results.percentile(lat, 95), results.percentile(lat, 99),
                 f"{len(lat):,}", f" ({results.freshness_missing:,} never showed)" if results.freshness_missing else "")

        log.info("4/5 dashboard: %d refreshes on a full trading day ...", args.callback_runs)
        add_corrections_and_late_trades(throughput_dir, corrections=150, late=500)
        run_dashboard(throughput_dir, args.callback_runs, results)
        log.info("    data callback + chart: p50 %.1f ms, p95 %.1f ms; whole page refresh: p50 %.1f ms, p95 %.1f ms",
                 results.percentile(results.callback_ms, 50), results.percentile(results.callback_ms, 95),
                 results.percentile(results.refresh_ms, 50), results.percentile(results.refresh_ms, 95))

        log.info("5/5 memory (sampled every second through the run) ...")
        memory.stop()
        results.rss_mb = dict(memory.peak_rss)
        results.peak_total_rss_mb, results.peak_total_pss_mb = memory.peak_total_rss, memory.peak_total_pss
        log.info("    peak RSS: %s; all together at one moment %s MiB RSS, %s MiB PSS",
                 ", ".join(f"{k} {v:,.0f} MiB" for k, v in results.rss_mb.items()),
                 f"{memory.peak_total_rss:,.0f}", f"{memory.peak_total_pss:,.0f}")

        args.out.mkdir(parents=True, exist_ok=True)
        plots = plot(results, args.out)
        (args.out / "benchmarks.md").write_text(report(results, args, plots))
        log.info("wrote %s", args.out / "benchmarks.md")
        print(results.summary_line(), flush=True)
        return 1 if results.freshness_missing else 0
    except KeyboardInterrupt:
        log.info("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line, then clean up
        log.error("bench failed: %s", exc)
        return 1
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if args.keep:
            log.info("data kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
