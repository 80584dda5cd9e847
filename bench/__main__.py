"""The benchmark: how fast, how fresh, how heavy. `python -m bench --help`.

It starts its own embedded broker on a free port, in a temporary directory, and measures in
one run (so the figures can be compared with each other on a shared, noisy machine): the
broker anchor, throughput, freshness, a dashboard refresh and memory (phases.py says how).
Each result is checked (gold must hold exactly the trades produced), printed as it comes,
written to docs/benchmarks.md with two plots, and summed up in one final `bench:` line.

The package: load.py (trades to Kafka, the broker anchor), sampling.py (processes and gold,
polled while the run goes on), phases.py (the run), results.py and report.py. This module
only reads the command line.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from bench import phases, report
from streaming.config import Settings, duration_text
from streaming.run.cli import add_spark_conf_argument, duration_argument

log = logging.getLogger("bench")
REPO_ROOT = Path(__file__).resolve().parent.parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=report.COMMAND,
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
    parser.add_argument("--trigger", type=duration_argument, default=Settings.trigger, metavar="INTERVAL",
                        help="the pipeline's trigger while measuring freshness, e.g. '500 milliseconds' "
                             f"(default: the pipeline's own, '{duration_text(Settings.trigger)}')")
    parser.add_argument("--callback-runs", type=int, default=200, help="dashboard refreshes (default: %(default)s)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    add_spark_conf_argument(parser)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs",
                        help="where benchmarks.md and the plots go (default: docs/)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv  # for the report's "Measured by" line
    for name in ("trades", "batch_size", "callback_runs"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup_trades < 0:
        parser.error("--warmup-trades must be 0 or more")
    if args.rate <= 0 or args.freshness_seconds <= 0:
        parser.error("--rate and --freshness-seconds must be positive")
    return args


def interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # A SIGTERM (`kill`, `timeout`) stops the run as Ctrl-C does, so its broker and Spark stop too.
    signal.signal(signal.SIGTERM, interrupt)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s  %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "streaming", "deltalake"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        results = phases.run(args)
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
