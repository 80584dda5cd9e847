"""The phases of one bench run, in order, with the run around them (`run`): its own broker on
a free port and a temporary data dir, one Spark session, the memory sampler throughout.

1. broker anchor: a plain confluent-kafka consumer reading the preloaded trades (load.py);
2. throughput: the pipeline (the one query) catching up on those trades, Kafka to gold, after
   a warm-up run over other trades (a cold JVM runs its first batches slower);
3. freshness: trades produced at a steady rate, time from produce to visible in gold;
4. dashboard: one page refresh (the data callback reading the tables, then the figures);
5. memory: peak RSS of the JVM, this Python process and the broker (sampling.py).

Gold is checked against the exact totals of the trades produced after each pipeline run.
Every table is read and written through the project's lake, never by path.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from bench.load import (
    BENCH_DAY,
    PARTITIONS,
    Oracle,
    broker_consume_rate_apart,
    drop_topic,
    kafka_config,
    new_producer,
    preload,
    produce,
)
from bench.results import Results
from bench.sampling import GoldWatcher, MemorySampler
from streaming.config import Settings
from streaming.kafka.admin import ensure_topic, wait_until_reachable
from streaming.kafka.broker import EmbeddedBroker, free_port, port_is_free
from streaming.lake import tables
from streaming.lake.store import Batch, Lake
from streaming.simulation.market import SYMBOLS, make_trade, market_open_on

log = logging.getLogger("bench")
TOPICS = ("bench-warmup", "bench-preload", "bench-fresh")
TOPIC_RETENTION_MS = 3_600_000
# The freshness topic keeps two minutes, far more than the pipeline lags: the broker's disk stays small.
FRESH_RETENTION_MS = 120_000


@contextlib.contextmanager
def phase(name: str, memory: MemorySampler, results: Results):
    """Record a phase's wall time and the CPU time each process group spent in it."""
    before, began = memory.cpu_seconds(), time.perf_counter()
    memory.phase = name
    try:
        yield
    finally:
        memory.phase = f"after {name}"
    after = memory.cpu_seconds()
    results.phase_s[name] = time.perf_counter() - began
    results.cpu_s[name] = {group: after[group] - before[group] for group in after}


# -- 2. throughput: the pipeline catching up ------------------------------------------------
def check_gold(data_dir: Path, oracle: Oracle, what: str) -> None:
    gold = Lake(data_dir).read(tables.GOLD, columns=["buy_amount", "sell_amount", "trade_count"])
    count = pc.sum(gold["trade_count"]).as_py() or 0
    buy = pc.sum(gold["buy_amount"]).as_py() or 0.0
    sell = pc.sum(gold["sell_amount"]).as_py() or 0.0
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
    from streaming.jobs.pipeline import Pipeline

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
        batches[query.name], first, last = batch_stats(pipeline.progress(query))
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


def keep_batch_phases(pipeline, results: Results) -> None:
    """The live batches' phases: the sink's own, and Spark's durationMs of the batches that read
    records (Spark keeps the last 100)."""
    sink = pipeline.sinks.get("medallion")
    if sink is not None:
        results.sink_phases = [{k: v * 1000 for k, v in batch.items() if k != "records"}
                               for batch in sink.phases.batches()]
    for query in pipeline.queries:
        results.spark_phases += [dict(progress["durationMs"]) for progress in pipeline.progress(query)
                                 if progress.get("numInputRows")]


# The seconds at the rate before the measured ones. From idle Spark looks for records every
# 1.5 s (docs/idle.md) and its first batches catch up: the seconds after a quiet spell are a
# figure of their own (Results.freshness_ramp), not the rate's.
RAMP_S = 10.0


def run_freshness(spark, settings: Settings, rate: float, seconds: float, results: Results) -> None:
    from streaming.jobs.pipeline import Pipeline

    bootstrap, topic = settings.kafka_bootstrap, settings.topic
    pipeline = Pipeline(spark, settings)
    pipeline.start()
    watcher = GoldWatcher(pipeline.lake).start()
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
        log.info("  warm: producing %g trades/s for %g s, then %g s measured ...", rate, RAMP_S, seconds)

        produced: list[float] = []
        began = time.monotonic()
        # The market clock runs 60x, like the simulation: about 12 windows in 3 minutes.
        market_start = market + timedelta(minutes=5)
        while (elapsed := time.monotonic() - began) < RAMP_S + seconds:
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
        keep_batch_phases(pipeline, results)
        pipeline.stop()
    values, results.freshness_missing = latencies(produced, watcher.seen, warm)
    ramp = sum(1 for sent in produced if sent - began < RAMP_S)
    results.freshness_rate = (len(produced) - ramp) / seconds
    results.freshness_ramp = values[:ramp]
    results.freshness = [(sent - began - RAMP_S, latency) for sent, latency in zip(produced[ramp:], values[ramp:])]
    if results.freshness_missing == 0:
        check_gold(settings.data_dir, oracle, "freshness run")


# -- 4. dashboard: one page refresh on a full trading day --------------------------------------
def add_corrections_and_late_trades(lake: Lake, corrections: int, late: int) -> None:
    """Give the day's windows corrections and too-late trades, as a day with late data has."""
    import pandas as pd

    gold = lake.read(tables.GOLD).to_pandas().sort_values("window_start")
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
    lake.publish(tables.CORRECTIONS, pa.Table.from_pylist(rows, schema=tables.CORRECTIONS.schema),
                 Batch("bench-corrections", 0))
    late_rows = []
    for i in range(late):
        w = gold.iloc[i % len(gold)]
        event_time = pd.Timestamp(w.window_start) + pd.Timedelta(seconds=rng.uniform(0, 899))
        late_rows.append({"trade_id": f"late-{i}", "event_time": event_time, "window_start": w.window_start,
                          "window_end": w.window_end, "watermark": event_time + pd.Timedelta(minutes=5),
                          "late_by_seconds": 300.0, "side": "BUY" if i % 2 else "SELL",
                          "amount": rng.uniform(100, 10_000), "topic": "trades", "partition": i % PARTITIONS,
                          "offset": i, "detected_at": now - timedelta(seconds=i), "backfilled_at": None})
    lake.publish(tables.LATE_TRADES, pa.Table.from_pylist(late_rows, schema=tables.LATE_TRADES.schema),
                 Batch("bench-late", 0))


def run_dashboard(lake: Lake, runs: int, results: Results) -> None:
    """Time a page refresh while gold changes between refreshes, as it does live (a refresh
    that finds no new table version reads nothing and is faster still)."""
    from dashboard.client import draw_chart, draw_panels, refresh_page, store_snapshot
    from dashboard.dash_app import create_app

    client = create_app(lake).server.test_client()
    figure = refresh_page(client)  # the first call builds Dash's callback map
    results.dashboard_rows = {
        "windows": lake.read(tables.GOLD, columns=["window_start"]).num_rows,
        "corrections": lake.read(tables.CORRECTIONS, columns=["batch_id"]).num_rows,
        "late_trades": lake.read(tables.LATE_TRADES, columns=["trade_id"]).num_rows,
        "traces": len(figure["data"]),
    }
    window = lake.read(tables.GOLD).slice(0, 1)
    for i in range(runs):
        # Gold's policy: an upsert of the window that bumps its revision, a new table version.
        lake.publish(tables.GOLD, window, Batch("bench-dashboard", i))
        began = time.perf_counter()
        snapshot = store_snapshot(client)
        draw_chart(client, snapshot)
        results.callback_ms.append((time.perf_counter() - began) * 1000)
        draw_panels(client, snapshot)
        results.refresh_ms.append((time.perf_counter() - began) * 1000)


# -- the run -----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> Results:
    """Every phase, in one run, so that the figures compare with each other on a shared,
    noisy machine. Stops Spark and the broker and removes the data (unless --keep) at the end."""
    work = Path(tempfile.mkdtemp(prefix="trade-summary-bench-"))
    port = free_port()
    broker = EmbeddedBroker(work / "broker", port)
    results, spark = Results(trades=args.trades), None
    try:
        log.info("bench: broker on 127.0.0.1:%d, data in %s", port, work)
        if not port_is_free(port):
            raise RuntimeError(f"port {port} was taken meanwhile; run again")
        broker.start()
        memory = MemorySampler(broker.pid).start()
        bootstrap = broker.bootstrap_servers
        wait_until_reachable(kafka_config(bootstrap), timeout_s=30)
        for topic in TOPICS:
            ensure_topic(kafka_config(bootstrap), topic, PARTITIONS,
                         FRESH_RETENTION_MS if topic == "bench-fresh" else TOPIC_RETENTION_MS)

        from streaming.run.spark_session import create_spark

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
        results.broker_msgs_per_s = broker_consume_rate_apart(bootstrap, "bench-preload", memory.tools.add)
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
            run_freshness(spark, Settings(data_dir=work / "fresh", topic="bench-fresh", trigger=args.trigger, **common),
                          args.rate, args.freshness_seconds, results)
        lat = results.latencies()
        log.info("    freshness: p50 %.2f s, p95 %.2f s, p99 %.2f s over %s trades%s",
                 results.percentile(lat, 50), results.percentile(lat, 95), results.percentile(lat, 99),
                 f"{len(lat):,}", f" ({results.freshness_missing:,} never showed)" if results.freshness_missing else "")
        if long_run := results.long_run_text(args.freshness_seconds):
            log.info("    freshness %s", long_run)
        log.info("    %s", results.ramp_text(RAMP_S))

        log.info("4/5 dashboard: %d refreshes on a full trading day ...", args.callback_runs)
        day = Lake(throughput_dir)
        add_corrections_and_late_trades(day, corrections=150, late=500)
        memory.phase = "dashboard"
        run_dashboard(day, args.callback_runs, results)
        log.info("    data callback + chart: p50 %.1f ms, p95 %.1f ms; whole page refresh: p50 %.1f ms, p95 %.1f ms",
                 results.percentile(results.callback_ms, 50), results.percentile(results.callback_ms, 95),
                 results.percentile(results.refresh_ms, 50), results.percentile(results.refresh_ms, 95))

        log.info("5/5 memory (sampled every second through the run) ...")
        memory.stop()
        results.rss_mb = dict(memory.peak_rss)
        results.peak_total_rss_mb, results.peak_total_pss_mb = memory.peak_total_rss, memory.peak_total_pss
        results.peak_pipeline_rss_mb = memory.peak_pipeline_rss
        results.pipeline_peak_phase = memory.pipeline_peak_phase
        results.pipeline_peak_parts = memory.pipeline_peak_parts
        log.info("    peak RSS: %s; all together at one moment %s MiB RSS, %s MiB PSS",
                 ", ".join(f"{k} {v:,.0f} MiB" for k, v in results.rss_mb.items()),
                 f"{memory.peak_total_rss:,.0f}", f"{memory.peak_total_pss:,.0f}")
        return results
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if args.keep:
            log.info("data kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)
