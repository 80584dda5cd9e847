"""The benchmark: how fast, how fresh, how heavy. `python -m bench --help`.

It starts its own embedded broker on a free port, in a temporary directory, and measures in
one run (so the figures can be compared with each other on a shared, noisy machine): the
broker anchor, throughput, freshness, a dashboard refresh and memory (phases.py says how).
Each result is checked (gold must hold exactly the trades produced), printed as it comes,
written to docs/benchmarks.md with two plots, and summed up in one final `bench:` line.

The package: load.py (trades to Kafka, the broker anchor), sampling.py (processes and gold,
polled while the run goes on), phases.py (the run), results.py and report.py. This module
only reads the command line.

`python -m bench --long-run` is another benchmark, with options of its own (`--long-run --help`):
the app on a month-old lake against an empty one (long_run.py, with seed.py and app_run.py).
`python -m bench --soak` another (`--soak --help`): the app as shipped for an hour, sampled every
20 s, its last minutes against minutes 3-8 (soak.py, with soak_report.py and app_run.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bench import idle, phases, report
from bench.command_line import (
    add_numbers,
    add_spark_arguments,
    log_to_terminal,
    require_positive,
    stop_on_sigterm,
    tool_parser,
)
from streaming.config import Settings, trigger_text
from streaming.run.argument_types import trigger_argument

log = logging.getLogger("bench")
REPO_ROOT = Path(__file__).resolve().parent.parent


DESCRIPTION = ("Measure the pipeline on this machine: broker anchor, throughput, freshness, dashboard refresh and "
               "memory, in one run with its own broker on a free port. Prints one `bench:` line at the end and "
               "writes docs/benchmarks.md with plots.")


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        report.COMMAND, DESCRIPTION,
        ("--trades", int, 1_000_000, "trades to preload"),
        ("--batch-size", int, 250_000, "max offsets per trigger while catching up"),
        ("--warmup-trades", int, 100_000, "trades the pipeline runs over first, unmeasured, so that throughput is "
                                          "measured on a warm JVM as in a running pipeline; 0: measure cold"),
        ("--rate", float, 1_000, "trades/s for freshness"),
        ("--freshness-seconds", float, 180, "how long to produce for freshness"),
    )
    parser.add_argument("--trigger", type=trigger_argument, default=Settings.trigger, metavar="INTERVAL",
                        help="the pipeline's trigger while measuring freshness, e.g. '500 milliseconds', or 0 "
                             f"(back to back; default: the pipeline's own, {trigger_text(Settings.trigger)})")
    add_numbers(parser, ("--callback-runs", int, 200, "dashboard refreshes"),
                ("--idle-settle-seconds", float, 60, "seconds the idle app settles before it is measured"),
                ("--idle-seconds", float, 30, "seconds the idle app is measured; 0: not measured"))
    add_spark_arguments(parser, master="local[*]")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs",
                        help="where benchmarks.md and the plots go (default: docs/)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    parser.add_argument("--long-run", action="store_true",
                        help="run the long-run benchmark instead: python run.py on a lake seeded with a month of "
                             "trades against an empty one (its own options: python -m bench --long-run --help)")
    parser.add_argument("--soak", action="store_true",
                        help="run the soak instead: python run.py as shipped for an hour at 2,000 trades/s, sampled "
                             "every 20 s, its last minutes against minutes 3-8 (its own options: python -m bench "
                             "--soak --help)")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv  # for the report's "Measured by" line
    require_positive(parser, args, "trades", "batch_size", "callback_runs")
    if args.warmup_trades < 0:
        parser.error("--warmup-trades must be 0 or more")
    if args.idle_seconds < 0 or args.idle_settle_seconds < 0:
        parser.error("--idle-seconds and --idle-settle-seconds must be 0 or more")
    if args.rate <= 0 or args.freshness_seconds <= 0:
        parser.error("--rate and --freshness-seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--long-run" in argv:
        from bench import long_run

        return long_run.main([arg for arg in argv if arg != "--long-run"])
    if "--soak" in argv:
        from bench import soak

        return soak.main([arg for arg in argv if arg != "--soak"])
    args = parse_args(argv)
    stop_on_sigterm()
    log_to_terminal()
    try:
        results = phases.run(args)
        if args.idle_seconds:
            log.info("and idle: python run.py with nothing arriving and no page ...")
            results.idle_cores = idle.idle_cores(args.idle_settle_seconds, args.idle_seconds, say=log.info)
            log.info("    idle: %.3f cores (run.py and every process under it, its broker too)", results.idle_cores)
        log.info("wrote %s", report.write(results, args))
        print(report.summary_line(results), flush=True)
        return 1 if results.freshness_missing else 0
    except KeyboardInterrupt:
        log.info("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line (phases.run has cleaned up)
        log.error("bench failed: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
