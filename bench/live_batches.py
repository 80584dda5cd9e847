"""`python -m bench.live_batches`: where a live micro-batch's time goes (issue 47).

The pipeline in this process on an embedded broker, fed `--rate` trades/s for `--seconds`
(bench's freshness phase, phases.run_freshness), with `--trigger`. Prints the freshness
p50/p95/p99, then for the batches that read records the p50 and p95 of each of Spark's durationMs
phases and of the sink's own (streaming/metrics/phase_times.py), and the CPU seconds each process
group used per trade. With `--floor`, first the same load through an empty foreachBatch query:
Spark's own fixed cost, on the same machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from bench.command_line import add_numbers, add_spark_arguments, require_positive, run_tool
from bench.load import BENCH_DAY, PARTITIONS, kafka_config, new_producer, produce
from bench.phases import FRESH_RETENTION_MS, RAMP_S, phase, run_freshness
from bench.results import Results
from bench.sampling import MemorySampler
from streaming.config import Settings, parse_trigger, trigger_text
from streaming.kafka.admin import ensure_topic, wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker, free_port
from streaming.kafka.range_reader import RangeReader
from streaming.simulation.market import SYMBOLS, make_trade, market_open_on

log = logging.getLogger("bench")
TOPIC, FLOOR_TOPIC = "bench-fresh", "bench-floor"
FLOOR_SECONDS = 30


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.live_batches", description=__doc__.split("\n\n")[1])
    add_numbers(parser, ("--rate", float, 1_000, "trades/s produced"),
                ("--seconds", float, 60, "seconds of producing, measured"))
    parser.add_argument("--trigger", type=parse_trigger, default=Settings.trigger, metavar="INTERVAL",
                        help="the pipeline's trigger (default: the pipeline's own, "
                             f"{trigger_text(Settings.trigger)})")
    parser.add_argument("--idle", action="store_true",
                        help="also the app idle: `run.py --no-producer --no-dashboard`, its cores over 30 s after 60")
    parser.add_argument("--floor", action="store_true",
                        help="first the same load through an empty foreachBatch query (Spark's fixed cost)")
    add_spark_arguments(parser, "local[*]")
    return parser


def percentiles(rows: list[dict], key: str) -> str:
    values = sorted(row[key] for row in rows if key in row)
    if not values:
        return "-"
    at = lambda p: values[min(len(values) - 1, max(0, round(p / 100 * len(values)) - 1))]  # noqa: E731
    return f"{at(50):7.1f} {at(95):7.1f}  ({len(values)})"


def table(title: str, rows: list[dict]) -> list[str]:
    keys = list(dict.fromkeys(key for row in rows for key in row))
    return [f"  {title}: ms, p50 p95 (batches)"] + [f"    {key:<18} {percentiles(rows, key)}" for key in keys]


def read_all(batch, batch_id) -> None:
    batch.coalesce(1).toArrow()


def run_floor(spark, bootstrap: str, args: argparse.Namespace, work) -> tuple[list[dict], list[float]]:
    """The same load through a foreachBatch query that does `work` (nothing, or read the batch to
    Arrow in one task): what Spark's own batch costs. Its batches after the first three, and each
    of their trades' wait from produce() to its batch's call: the freshness of a sink that
    took no time."""
    frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", FLOOR_TOPIC).option("startingOffsets", "latest").load())
    called: dict[int, float] = {}

    def timed(batch, batch_id) -> None:
        called[batch_id] = time.time()
        work(batch, batch_id)

    query = (frame.writeStream.foreachBatch(timed)
             .trigger(processingTime=f"{int(args.trigger.total_seconds() * 1000)} milliseconds").start())
    producer, rng, prices = new_producer(bootstrap), random.Random(5), dict(SYMBOLS)
    market, began, sent = market_open_on(BENCH_DAY), time.monotonic(), 0
    while (elapsed := time.monotonic() - began) < FLOOR_SECONDS:
        for _ in range(int(elapsed * args.rate) - sent):
            produce(producer, FLOOR_TOPIC, make_trade(rng, market + timedelta(seconds=elapsed), prices))
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(30)
    time.sleep(2 * args.trigger.total_seconds() + 1)  # the last trades' batch
    progress = query.recentProgress[3:]
    query.stop()
    return [dict(p.durationMs) for p in progress], waits_to_call(bootstrap, progress, called)


def waits_to_call(bootstrap: str, progress, called: dict[int, float]) -> list[float]:
    """Seconds from each trade's produce() (its create time) to the call of the batch that read it."""
    reader, waits = RangeReader(kafka_config(bootstrap), timeout_s=10), []
    try:
        for p in progress:
            if p.batchId not in called or not p.sources:
                continue
            start, end = (json.loads(offsets or "{}").get(FLOOR_TOPIC, {})
                          for offsets in (p.sources[0].startOffset, p.sources[0].endOffset))
            ranges = pa.table({"topic": [FLOOR_TOPIC] * len(end), "partition": [int(k) for k in end],
                               "start_offset": [start.get(k, 0) for k in end], "end_offset": list(end.values())})
            records = reader.read(ranges)
            if records is None:
                raise RuntimeError(f"could not read the floor's batch {p.batchId} back: {reader.gave_up}")
            stamps = records["timestamp"].cast(pa.int64()).to_pylist()  # microseconds
            waits += [called[p.batchId] - stamp / 1e6 for stamp in stamps]
    finally:
        reader.close()
    return waits


def freshness_line(title: str, waits: list[float]) -> str:
    ordered = sorted(waits) or [float("nan")]
    at = lambda p: ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]  # noqa: E731
    return f"  {title}: p50 {at(50):.3f} s, p95 {at(95):.3f} s, p99 {at(99):.3f} s over {len(waits)} trades"


def measure(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="trade-summary-live-batches-"))
    broker, results, spark = EmbeddedBroker(work / "broker", free_port()), Results(), None
    try:
        broker.start()
        memory = MemorySampler(broker.pid).start()
        wait_until_reachable(kafka_config(broker.bootstrap_servers), timeout_s=30)
        for topic in (TOPIC, FLOOR_TOPIC):
            ensure_topic(kafka_config(broker.bootstrap_servers), topic, PARTITIONS, FRESH_RETENTION_MS)
        from streaming.run.spark_session import create_spark

        spark = create_spark(args.master, conf_overrides=args.conf)
        lines = []
        if args.floor:
            log.info("the floor: an empty foreachBatch, then one reading each batch, at %g trades/s ...", args.rate)
            for title, work_done in (("Spark, empty foreachBatch", lambda batch, batch_id: None),
                                     ("Spark, foreachBatch reading the batch to Arrow (one task)", read_all)):
                rows, waits = run_floor(spark, broker.bootstrap_servers, args, work_done)
                lines += table(title, rows) + [freshness_line("produce() to the call", waits)]
        log.info("the pipeline at %g trades/s for %g s, trigger %s ...", args.rate, args.seconds, args.trigger)
        settings = Settings(data_dir=work / "fresh", topic=TOPIC, trigger=args.trigger, producer_enabled=False,
                            dashboard_enabled=False, master=args.master, bootstrap_servers=broker.bootstrap_servers)
        with phase("freshness", memory, results):
            run_freshness(spark, settings, args.rate, args.seconds, results)
        memory.stop()
        latencies = results.latencies()
        lines.append("  freshness: p50 %.3f s, p95 %.3f s, p99 %.3f s over %d trades" % tuple(
            [results.percentile(latencies, p) for p in (50, 95, 99)] + [len(latencies)]))
        lines.append(freshness_line(f"before them, {RAMP_S:g} s at the rate from idle", results.freshness_ramp))
        lines += table("Spark durationMs", results.spark_phases) + table("the sink", results.sink_phases)
        trades = len(latencies) + results.freshness_missing + len(results.freshness_ramp) or 1
        cpu = results.cpu_s.get("freshness", {})
        lines.append("  CPU per trade, us: " + ", ".join(f"{group} {seconds / trades * 1e6:.0f}"
                                                       for group, seconds in sorted(cpu.items())))
        if args.idle:
            from bench.idle import idle_cores

            spark.stop()
            spark = None
            trigger = f"--trigger={args.trigger.total_seconds() * 1000:g}ms"
            lines.append(f"  idle: {idle_cores(extra=[trigger], say=log.info):.3f} cores")
        print("live-batches:\n" + "\n".join(lines), flush=True)
        return 0
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    require_positive(parser, args, "rate", "seconds")
    return run_tool("live batches", lambda: measure(args))


if __name__ == "__main__":
    sys.exit(main())
