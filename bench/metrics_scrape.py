"""`python -m bench.metrics_scrape`: does scraping GET /metrics cost the pipeline anything?

Issue 36 asks that a scrape take at most 5 ms at p95 and cost no measurable throughput. In one
invocation: `python run.py --no-producer` on a fresh data dir (its embedded broker, its page,
no browser), the bench's producer at `--rate` (app_run.py, as the long run uses it), and once
the pipeline has caught up and `--warm-seconds` more, `--seconds` without scraping (A) and
`--seconds` with a scraper GETting /metrics every `--interval` (B; Prometheus's usual interval
is 15 s). A and B are interleaved in blocks of `--block-seconds`, in the order A B B A A B ...,
in the one run: the same JVM, lake and broker, and the machine's drift and the lake's growth fall
on both alike. Measured per block and summed per condition: the medallion batches (from Spark's
checkpoint), freshness (produce() to visible in gold) and the CPU of run.py's processes; and
each scrape's time from GET to body read, with its body's size, taken by a scraper in a process
of its own (scrape_loop), as Prometheus is one.

Then, on the same run.py with the steady producer stopped, throughput (scrape_bursts.py):
`--bursts` bursts of `--burst-trades` trades, sent as fast as the producer can, in the order
A B B A, the scraper GETting /metrics during the B ones only; a burst's trades/s is until gold
includes all of it, and B/A of the conditions' medians is held to the same noise limit.

After the run, one scrape is taken apart in this process (its collectors one by one, on the
run's last health snapshot and its lake), to say what a scrape's time goes to.

The figures, lines and section are metrics_scrape_figures.py's. Prints the `metrics-scrape:`
lines and writes the "## Metrics scrape: " section of docs/benchmarks.md (kept by a normal
`python -m bench`, report.KEPT_SECTIONS).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import requests

from bench import scrape_bursts
from bench.app_run import AppRun, LakeRun, cpu_between
from bench.command_line import WARM_SECONDS, add_app_run_arguments, require_positive, run_tool, tool_parser
from bench.metrics_scrape_figures import (
    COMMAND,
    HEADING,
    RATIO_LIMIT,
    SIDE_BY_SIDE,
    ScrapeRun,
    ab_line,
    blocks,
    body_size,
    percentile,
    ratio_line,
    scrape_line,
    section,
)
from bench.report import write_section
from bench.scrape_bursts import get
from streaming.lake.store import Lake

log = logging.getLogger("bench")
DESCRIPTION = ("Run `python run.py --no-producer` with the bench's producer at a steady rate and compare it "
               "without and with a scraper GETting /metrics every --interval, in interleaved blocks: the "
               "scrape's time and size, batch time, freshness and CPU; then bursts of trades without and with "
               "the scraper: how fast the pipeline absorbs them. Prints `metrics-scrape:` lines and "
               "writes its section of docs/benchmarks.md.")


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        COMMAND, DESCRIPTION,
        ("--seconds", float, 120, "seconds measured without scraping (A), and as many with (B)"),
        ("--block-seconds", float, 20, "A and B alternate in blocks this long (A B B A ...)"),
        ("--interval", float, 1.0, "seconds between scrapes in B (Prometheus's default is 15)"),
        ("--rate", float, 1_000, "trades/s produced"),
        WARM_SECONDS,
        ("--bursts", int, 4, "bursts after the blocks, A B B A ... (an even number; 0: none)"),
        ("--burst-trades", int, 1_000_000, "trades per burst, sent as fast as the producer can"),
    )
    add_app_run_arguments(parser, "the temporary data dir and run.py's log")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    require_positive(parser, args, "seconds", "block_seconds", "interval", "rate", "burst_trades")
    if args.bursts < 0 or args.bursts % 2:
        parser.error("--bursts must be an even number (as many A as B), or 0")
    if args.warm_seconds < 0:
        parser.error("--warm-seconds must be 0 or more")
    if args.block_seconds > args.seconds:
        parser.error("--block-seconds must be at most --seconds")
    if args.interval >= args.block_seconds:
        parser.error("--interval must be shorter than --block-seconds")
    return args


# -- the run (get: scrape_bursts.py) ----------------------------------------------------------
def scrape_loop(base: str, during: list[tuple[float, float]], interval_s: float, out) -> None:
    """The scraper, in a process of its own as Prometheus is (the bench's own threads, the
    producer first, would otherwise hold up its timing): the endpoint's first scrape and the
    side-by-side requests at once, then GET /metrics every interval_s inside each (start, end) of
    `during` (time.monotonic(), which is the machine's); every figure sent back through `out`."""
    session = requests.Session()  # one kept-alive connection, as Prometheus keeps one
    found: dict = {"first": (float("nan"), 0), "side_by_side": {"/metrics": [], "/api/status": []},
                   "scrapes": [], "errors": []}
    try:
        found["first"] = get(session, base + "/metrics")
        for _ in range(SIDE_BY_SIDE):
            for path, times in found["side_by_side"].items():
                times.append(get(session, base + path)[0])
            time.sleep(0.25)
        for begin, end in during:
            due = begin
            while (now := time.monotonic()) < end:
                if now < due:
                    time.sleep(min(due, end) - now)
                    continue
                try:
                    found["scrapes"].append((now, *get(session, base + "/metrics")))
                except Exception as exc:  # noqa: BLE001 - said at the end; the run goes on
                    found["errors"].append(str(exc))
                due = max(due + interval_s, time.monotonic())  # a late scrape does not bunch the next ones
    except Exception as exc:  # noqa: BLE001 - sent back: the bench says it
        found["errors"].append(str(exc))
    out.send(found)
    out.close()


def measure(args: argparse.Namespace, data_dir: Path, say) -> ScrapeRun:
    """run.py on data_dir with the producer; once caught up and warm, the A and B blocks, then the
    bursts; stop it."""
    run = LakeRun("metrics")
    result = ScrapeRun(run)
    context = multiprocessing.get_context("spawn")  # not a fork of this process's threads
    scraper: multiprocessing.process.BaseProcess | None = None
    with AppRun(run, data_dir, args.rate, args.topic, 2 * args.seconds + args.warm_seconds, say) as app:
        try:
            assert app.sampler is not None
            t0, base = app.t0, f"http://127.0.0.1:{app.web_port}"
            say(f"  caught up at {app.caught_up:.1f} s; {args.warm_seconds:g} s more, then {2 * args.seconds:g} s "
                "of A and B blocks ...")
            result.schedule = blocks(app.caught_up + args.warm_seconds, args.seconds, args.block_seconds)
            run.window = (result.schedule[0][0], result.schedule[-1][1])
            # Started now: its first scrape and the side-by-side requests fall in the warm-up, unmeasured.
            receive, send = context.Pipe(duplex=False)
            scraper = context.Process(target=scrape_loop, name="scraper", daemon=True, args=(
                base, [(t0 + b, t0 + e) for b, e, name in result.schedule if name == "B"], args.interval, send))
            scraper.start()
            send.close()
            app.wait_until(run.window[0], "the window")
            ticks = dict(app.sampler.ticks)
            for _, end, name in result.schedule:
                app.wait_until(end, "the block's end")
                now_ticks = dict(app.sampler.ticks)
                for group, seconds in cpu_between(ticks, now_ticks).items():
                    result.cpu_s[name][group] += seconds
                ticks = now_ticks
            if not receive.poll(60):
                raise RuntimeError("the scraper sent no figures")
            found = receive.recv()
            scraper.join(10)
            result.first_scrape, result.side_by_side, result.scrape_errors = (
                found["first"], found["side_by_side"], found["errors"])
            result.scrapes = [(t - t0, ms, size) for t, ms, size in found["scrapes"]]
            app.stop_producing()
            result.status = app.sampler.status or {}
            if args.bursts:
                say(f"  {scrape_bursts.WARM_BURSTS} + {args.bursts} bursts of {args.burst_trades:,} trades, "
                    "the steady producer stopped ...")
                result.bursts = scrape_bursts.measure(
                    args, app.bootstrap, base, app.watcher, app.sampler, t0, context,
                    lambda now: scrape_bursts.market_time(app.producer_began, app.producer.speed, now), app.wait, say)
            app.collect_batches()
            return result
        finally:
            if scraper is not None and scraper.is_alive():
                scraper.terminate()  # by its pid: the process this run started


def take_apart(status: dict, lake: Lake, runs: int = 200) -> dict[str, float]:
    """Median ms of each part of one scrape, in this process, on the run's last health snapshot
    and its lake: each collector rendered alone, the whole scrape, and the tables' refresh (on a
    thread of its own in the app, every 30 s, never in a scrape's path)."""
    from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest

    from streaming.metrics.counters import METRICS
    from streaming.run.metrics import RunCollector, exposition, health_families, table_families, table_figures

    def timed(work: Callable[[], object], times: int = runs) -> float:
        spent = []
        for _ in range(times):
            began = time.perf_counter()
            work()
            spent.append((time.perf_counter() - began) * 1000)
        return statistics.median(spent)

    def alone(add: Callable[[CollectorRegistry], object]) -> Callable[[], bytes]:
        registry = CollectorRegistry()
        add(registry)
        return lambda: generate_latest(registry)

    figures = table_figures(lake)
    collector = RunCollector(lambda: status, None)
    collector._tables = figures  # what a scrape finds kept once the refresh thread has run
    scrape = exposition(lambda: status, lake)
    scrape()  # the first starts the tables' refresh
    time.sleep(1)
    return {
        "whole scrape (generate_latest)": timed(scrape),
        "health snapshot -> families": timed(lambda: health_families(status)),
        "run gauges rendered (health + tables)": timed(alone(lambda r: r.register(collector))),
        "pipeline counters and histograms": timed(alone(lambda r: r.register(METRICS.registry))),
        "process collector (/proc)": timed(alone(lambda r: ProcessCollector(registry=r))),
        "platform and GC collectors": timed(alone(lambda r: (PlatformCollector(registry=r), GCCollector(registry=r)))),
        "table families from kept figures": timed(lambda: table_families(figures)),
        "tables' refresh (background, every 30 s)": timed(lambda: table_figures(lake), 10),
    }


def run(args: argparse.Namespace) -> ScrapeRun:
    work = Path(tempfile.mkdtemp(prefix="trade-summary-metrics-scrape-"))
    try:
        log.info("metrics scrape: python run.py, %g trades/s, %g s each of A (no scrapes) and B (a scrape every "
                 "%g s), in blocks of %g s ...", args.rate, args.seconds, args.interval, args.block_seconds)
        result = measure(args, work / "data", log.info)
        log.info("one scrape taken apart in this process ...")
        try:
            result.parts_ms = take_apart(result.status, Lake(work / "data"))
        except Exception as exc:  # noqa: BLE001 - the run's figures stand without it
            log.warning("  could not take a scrape apart: %s", exc)
        return result
    finally:
        if args.keep:
            log.info("data and log kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def measure_and_report() -> int:
        result = run(args)
        found = result.figures()
        page = write_section(args.out, HEADING, section(args, result))
        log.info("wrote %s", page)
        scrapes = result.scrape_ms()
        print(scrape_line(scrapes, body_size(result), args.interval), flush=True)
        print(ab_line(found["A"], found["B"]), flush=True)
        bursts = result.bursts
        if bursts is not None:
            print(scrape_bursts.throughput_line(bursts, RATIO_LIMIT), flush=True)
        print(ratio_line(percentile(scrapes, 95), found["A"], found["B"],
                         bursts.ratio() if bursts is not None else None), flush=True)
        if result.parts_ms:
            print("metrics-scrape parts (ms, median): "
                  + ", ".join(f"{name} {ms:.2f}" for name, ms in result.parts_ms.items()), flush=True)
        return 1 if result.run.missing or not scrapes or (bursts is not None and bursts.error) else 0

    return run_tool("metrics scrape", measure_and_report)


if __name__ == "__main__":
    sys.exit(main())
