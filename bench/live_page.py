"""`python -m bench.live_page`: the page pushed live, measured as issue 35 asks.

In one invocation: `python run.py --no-producer` on a fresh data dir (its embedded broker, its
page) with the bench's producer at `--rate` (app_run.py, as the long run uses it), and once the
pipeline has caught up and `--warm-seconds` more:

1. A real browser (browser_page.py): Chromium at 1440x900 on the page, left open
   `--browser-minutes`. Trade to pixel, from each trade's produce() to the next frame painted
   after the page's "Trades counted" reached it; and the page's JS heap after a GC every
   `--heap-sample-seconds`, its growth over the open time.
2. Simulated viewers (viewers.py): blocks of 1, 10 and 30 pages at once, first each on the live
   connection (push), then each refreshing every 2 s as before the push (poll; what a page does
   while its connection is down), in the order 1 10 30 30 10 1 per mode, so a trend over the run
   falls on every count alike. Each block starts its viewers, lets them settle
   `--settle-seconds` (unmeasured: their processes start and connect), then measures
   `--block-seconds`: each page's update time, and the pipeline's batches and freshness in the
   same seconds.

The figures, lines and section are live_page_figures.py's. Prints `live-page` lines, one
`live-page:` summary line, and writes the "## Live page: " section of docs/benchmarks.md (kept
by a normal `python -m bench`, report.KEPT_SECTIONS).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.app_run import AppRun, LakeRun, Processes
from bench.browser_page import watch_page
from bench.command_line import WARM_SECONDS, add_app_run_arguments, require_positive, run_tool, tool_parser
from bench.live_page_figures import (
    COMMAND,
    HEADING,
    Block,
    PageRun,
    latencies_within,
    lines,
    percentile,
    schedule,
    section,
    watched,
)
from bench.report import write_section
from bench.viewers import MODES, run_viewers

log = logging.getLogger("bench")
PROCESS_VIEWERS = 10  # viewers per process: their own interpreter locks, not the bench's
DESCRIPTION = ("Run `python run.py --no-producer` with the bench's producer at a steady rate; open the page in "
               "Chromium for --browser-minutes (trade to pixel, JS heap); then blocks of 1, 10 and 30 simulated "
               "viewers on the live connection and polling (each page's update time, the pipeline's batches and "
               "freshness). Prints `live-page` lines and writes its section of docs/benchmarks.md.")


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        COMMAND, DESCRIPTION,
        ("--browser-minutes", float, 30, "minutes the browser keeps the page open; 0: no browser"),
        ("--heap-sample-seconds", float, 60, "seconds between the page's heap samples"),
        ("--block-seconds", float, 30, "seconds measured per viewer block"),
        ("--settle-seconds", float, 10, "seconds a block's viewers start and connect before it is measured"),
        ("--rate", float, 1_000, "trades/s produced"),
        WARM_SECONDS,
    )
    parser.add_argument("--viewers", default="1,10,30", type=counts_argument,
                        help="viewer counts, comma-separated (default: %(default)s); 0 or empty: no viewer blocks")
    parser.add_argument("--modes", default=",".join(MODES), type=modes_argument,
                        help="push (the live connection), poll (a refresh every 2 s), or both (default: %(default)s)")
    add_app_run_arguments(parser, "the temporary data dir and run.py's log")
    return parser


def counts_argument(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected counts such as 1,10,30, got {text!r}") from None
    if any(count < 0 for count in counts):
        raise argparse.ArgumentTypeError("viewer counts must be 0 or more")
    return [count for count in counts if count > 0]


def modes_argument(text: str) -> list[str]:
    modes = [part.strip() for part in text.split(",") if part.strip()]
    if not modes or any(mode not in MODES for mode in modes):
        raise argparse.ArgumentTypeError(f"expected {' or '.join(MODES)}, comma-separated, got {text!r}")
    return list(dict.fromkeys(modes))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    require_positive(parser, args, "heap_sample_seconds", "block_seconds", "rate")
    for name in ("browser_minutes", "settle_seconds", "warm_seconds"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be 0 or more")
    if not args.viewers and not args.browser_minutes:
        parser.error("nothing to measure: give --viewers or --browser-minutes")
    return args


# -- the run ----------------------------------------------------------------------------------
def run_blocks(port: int, blocks: list[Block], t0: float, settle_s: float, sampler: Processes, result: PageRun,
               say) -> None:
    """Each block's viewers in processes of their own (PROCESS_VIEWERS each), started `settle_s`
    before its measured seconds and ended with them; their updates kept by block, and the CPU
    seconds of run.py's driver and of the viewers' processes in its measured seconds."""
    context = multiprocessing.get_context("spawn")  # not a fork of this process's threads
    for block in blocks:
        ends = t0 + block.end
        while time.monotonic() < t0 + block.begin - settle_s:
            time.sleep(0.05)
        workers, pipes = [], []
        for first in range(0, block.viewers, PROCESS_VIEWERS):
            receive, send = context.Pipe(duplex=False)
            worker = context.Process(target=run_viewers, name="viewers", daemon=True,
                                     args=(port, block.mode, min(PROCESS_VIEWERS, block.viewers - first),
                                           t0 + block.begin, ends, send))
            worker.start()
            send.close()
            workers.append(worker)
            pipes.append(receive)
        while time.monotonic() < t0 + block.begin:
            time.sleep(0.05)
        ticks = dict(sampler.ticks)
        updates, errors, viewers_cpu = [], [], 0.0
        for worker, receive in zip(workers, pipes):
            if receive.poll(max(0.0, ends - time.monotonic()) + 90):
                found = receive.recv()
                updates += [(t - t0, ms) for t, ms in found["updates"] if t - t0 >= block.begin]
                errors += found["errors"]
                viewers_cpu += found["cpu_s"]
            else:
                errors.append("a viewer process sent nothing")
            worker.join(10)
            if worker.is_alive():
                worker.terminate()  # by its pid: the process this run started
        result.updates[block], result.errors[block] = updates, errors
        result.cpu_s[block] = {"driver": sampler.cpu_since(ticks)["driver"], "viewers": viewers_cpu}
        p95 = percentile([ms for _, ms in updates], 95)
        say(f"  {block.mode} x{block.viewers}: {len(updates):,} updates, p95 {p95:.0f} ms"
            + (f", {len(errors)} errors ({errors[0]})" if errors else ""))


def measure(args: argparse.Namespace, data_dir: Path, say) -> PageRun:
    """run.py on data_dir with the producer; once caught up and warm, the browser, then the
    viewer blocks; stop it."""
    run = LakeRun("live-page")
    result = PageRun(run)
    blocks_s = len(args.modes) * 2 * len(args.viewers) * (args.settle_seconds + args.block_seconds)
    planned_s = args.warm_seconds + args.browser_minutes * 60 + blocks_s
    with AppRun(run, data_dir, args.rate, args.topic, planned_s, say) as app:
        say(f"  caught up at {app.caught_up:.1f} s; {args.warm_seconds:g} s more, then the measurements ...")
        app.wait_until(app.caught_up + args.warm_seconds, "the warm-up")
        if args.browser_minutes:
            result.browser = watch_page(f"http://127.0.0.1:{app.web_port}/", args.browser_minutes * 60,
                                        args.heap_sample_seconds, say)
        if args.viewers:
            result.blocks = schedule(app.now(), args.modes, args.viewers, args.settle_seconds, args.block_seconds)
            run.window = (result.blocks[0].begin, result.blocks[-1].end)
            say(f"  viewer blocks: {', '.join(f'{b.mode} x{b.viewers}' for b in result.blocks)} ...")
            assert app.sampler is not None
            run_blocks(app.web_port, result.blocks, app.t0, args.settle_seconds, app.sampler, result, say)
        app.finish()
        if result.browser is not None and (window := watched(result.browser.seen)) is not None:
            for stage, shown in (("gold", app.watcher.seen), ("push", result.browser.pushed)):
                result.stages[stage] = latencies_within(app.producer.sent, shown, window)[0]
            result.stages["pixel"], result.pixel_unshown = latencies_within(app.producer.sent, result.browser.seen,
                                                                            window)
        return result


def run(args: argparse.Namespace) -> PageRun:
    work = Path(tempfile.mkdtemp(prefix="trade-summary-live-page-"))
    try:
        log.info("live page: python run.py at %g trades/s; the browser for %g min; viewers %s, %s ...", args.rate,
                 args.browser_minutes, ",".join(map(str, args.viewers)) or "none", ",".join(args.modes))
        return measure(args, work / "data", log.info)
    finally:
        if args.keep:
            log.info("data and log kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def measure_and_report() -> int:
        result = run(args)
        log.info("wrote %s", write_section(args.out, HEADING, section(args, result)))
        for line in lines(result):
            print(line, flush=True)
        return 1 if result.run.missing else 0

    return run_tool("live page bench", measure_and_report)


if __name__ == "__main__":
    sys.exit(main())
