"""The embedded broker alone over a long run: its cold (storage formatted) and warm start
times; the RSS and CPU of its JVM and its disk, sampled while the simulator produces at a
steady rate and a consumer reads what arrives (the broker serves fetches as it would the
pipeline); and the time it takes to stop on SIGTERM. Prints a JSON line per sample and a
summary; the data dirs are removed.

    python -m bench.broker_soak --minutes 20 --rate 2000
    python -m bench.broker_soak --minutes 0 --starts 5     # start and stop times only
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from confluent_kafka import OFFSET_END, TopicPartition

from bench.load import kafka_config
from bench.sampling import cpu_ticks, proc_kib
from streaming.config import KafkaTarget, Simulation
from streaming.kafka import broker as embedded
from streaming.kafka import clients
from streaming.kafka.admin import ensure_topic
from streaming.kafka.broker import free_port
from streaming.simulation.market import market_open_on
from streaming.simulation.simulator import TradeSimulator

log = logging.getLogger("bench")
TOPIC = "trades"
PERIODS_MIN = ((3, 8), (16, 20))


def disk_mib(path: Path) -> float:
    """Blocks in use under path (sparse index files count as what they occupy)."""
    used = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                used += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return used / 2**20


class Reader(threading.Thread):
    """Reads every partition from its end onwards, as long as it runs: counts what arrives."""

    def __init__(self, bootstrap: str):
        super().__init__(name="soak-reader", daemon=True)
        self.records = 0
        self._stopping = threading.Event()
        self._consumer = clients.consumer(kafka_config(bootstrap), "soak")

    def run(self) -> None:
        parts = clients.partitions_of(self._consumer, TOPIC, 10)
        self._consumer.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in parts])
        while not self._stopping.is_set():
            self.records += sum(1 for m in self._consumer.consume(1000, timeout=0.5) if m.error() is None)
        self._consumer.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)


def period(samples: list[dict], first_min: float, last_min: float) -> dict:
    inside = [s for s in samples if first_min * 60 <= s["t_s"] <= last_min * 60]
    if not inside:
        return {}
    return {"rss_mib_mean": statistics.fmean(s["rss_mib"] for s in inside),
            "rss_mib_max": max(s["rss_mib"] for s in inside),
            "cores_mean": statistics.fmean(s["cores"] for s in inside),
            "cores_max": max(s["cores"] for s in inside), "samples": len(inside)}


def time_starts(work: Path, count: int) -> dict[str, list[float]]:
    """Seconds to start in a new dir (the storage formatted), to start again, and to stop."""
    timed: dict[str, list[float]] = {"cold_start_s": [], "warm_start_s": [], "idle_stop_s": []}
    for i in range(count):
        broker = embedded.EmbeddedBroker(work / f"starts-{i}", free_port())
        try:
            for key, action in (("cold_start_s", broker.start), ("idle_stop_s", broker.stop),
                                ("warm_start_s", broker.start)):
                began = time.perf_counter()
                action()
                timed[key].append(round(time.perf_counter() - began, 2))
        finally:
            broker.stop()
    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.broker_soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=2000.0, help="trades per second")
    parser.add_argument("--sample-s", type=float, default=20.0)
    parser.add_argument("--starts", type=int, default=1, help="cold and warm starts to time, each in a new dir")
    parser.add_argument("--jvm-options", help="instead of the broker's own, e.g. \"-Xmx256m -XX:+UseG1GC\"")
    parser.add_argument("--out", type=Path, help="also write the samples and summary here (JSON)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s  %(message)s", datefmt="%H:%M:%S")
    if args.jvm_options:
        embedded.JVM_OPTIONS = tuple(shlex.split(args.jvm_options))

    work = Path(tempfile.mkdtemp(prefix="trade-summary-broker-soak-"))
    broker = embedded.EmbeddedBroker(work / "broker", free_port())
    summary: dict = {"jvm_options": list(embedded.JVM_OPTIONS), "rate": args.rate, "minutes": args.minutes}
    samples: list[dict] = []
    simulator = reader = None
    try:
        summary.update(time_starts(work, args.starts))
        print(json.dumps({key: summary[key] for key in ("cold_start_s", "warm_start_s", "idle_stop_s")}), flush=True)
        if args.minutes <= 0:
            if args.out:
                args.out.write_text(json.dumps({"summary": summary}, indent=1) + "\n")
            return 0
        broker.start()
        config = kafka_config(broker.bootstrap_servers)
        defaults = KafkaTarget()
        ensure_topic(config, TOPIC, defaults.topic_partitions, defaults.topic_retention_ms)
        reader = Reader(broker.bootstrap_servers)
        reader.start()
        today = datetime.now(timezone.utc).date()
        simulator = TradeSimulator(config, TOPIC, Simulation(rate=args.rate, seed=1), timedelta(minutes=15),
                                   timedelta(minutes=30), market_start=market_open_on(today))
        simulator.start()
        start, ticks_hz = time.monotonic(), os.sysconf("SC_CLK_TCK")
        last_t, last_ticks = start, cpu_ticks(broker.pid)
        while time.monotonic() - start < args.minutes * 60:
            time.sleep(args.sample_s)
            now, ticks = time.monotonic(), cpu_ticks(broker.pid)
            if ticks is None:
                raise RuntimeError("the broker's JVM is gone")
            stats = simulator.stats()
            sample = {"t_s": round(now - start, 1), "rss_mib": round(proc_kib(broker.pid, "VmRSS") / 1024, 1),
                      "cores": round((ticks - last_ticks) / ticks_hz / (now - last_t), 3),
                      "disk_mib": round(disk_mib(broker.data_dir), 1), "sent": stats.sent, "failed": stats.failed,
                      "read": reader.records}
            samples.append(sample)
            print(json.dumps(sample), flush=True)
            last_t, last_ticks = now, ticks
        simulator.stop()
        simulator = None
        reader.stop()
        reader = None
        summary["sent"], summary["read"] = samples[-1]["sent"], samples[-1]["read"]
        summary["rss_peak_mib"] = proc_kib(broker.pid, "VmHWM") / 1024
        summary["disk_mib"] = disk_mib(broker.data_dir)
        summary["cpu_s"] = cpu_ticks(broker.pid) / ticks_hz
        for first, last in PERIODS_MIN:
            summary[f"minutes_{first}_{last}"] = period(samples, first, last)
        began = time.perf_counter()
        broker.stop()
        summary["stop_s"] = time.perf_counter() - began
        print(json.dumps({"summary": summary}, indent=1), flush=True)
        if args.out:
            args.out.write_text(json.dumps({"summary": summary, "samples": samples}, indent=1) + "\n")
        return 0
    finally:
        if simulator is not None:
            simulator.stop()
        if reader is not None:
            reader.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
