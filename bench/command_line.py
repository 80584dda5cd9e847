"""What the benchmark's commands share on the command line: numeric flags, Spark flags, SIGTERM and logging."""

from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path
from typing import Callable

from streaming.run.arguments import add_spark_conf_argument

# (flag, type, default, meaning): the help says the meaning, then the default.
Number = tuple[str, Callable[[str], float], float, str]
WARM_SECONDS: Number = ("--warm-seconds", float, 30,
                        "seconds after the pipeline has caught up with its start, before measuring")
DOCS = Path(__file__).resolve().parent.parent / "docs"
log = logging.getLogger("bench")


def tool_parser(prog: str, description: str, *numbers: Number) -> argparse.ArgumentParser:
    """A tool's parser, opening with its numeric flags."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_numbers(parser, *numbers)
    return parser


def add_numbers(parser: argparse.ArgumentParser, *numbers: Number) -> None:
    for flag, kind, default, meaning in numbers:
        parser.add_argument(flag, type=kind, default=default, help=f"{meaning} (default: %(default)s)")


def require_positive(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """A usage error for the first of these options that is not above zero."""
    for name in names:
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")


def add_app_run_arguments(parser: argparse.ArgumentParser, kept: str) -> None:
    """--topic, --out and --keep, as each benchmark that runs `python run.py` takes them; `kept`
    says what --keep keeps."""
    parser.add_argument("--topic", default="trades", help="the live topic (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DOCS, help="where benchmarks.md and any plot go (default: docs/)")
    parser.add_argument("--keep", action="store_true", help=f"keep {kept}")


def run_tool(what: str, work: Callable[[], int]) -> int:
    """work() with SIGTERM taken as Ctrl-C and the tool's log lines on the terminal: an interrupt
    exits 130, a failure is one readable line and exits 1 (work cleans up after itself)."""
    stop_on_sigterm()
    log_to_terminal()
    try:
        return work()
    except KeyboardInterrupt:
        log.info("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line
        log.error("%s failed: %s", what, exc)
        return 1


def add_spark_arguments(parser: argparse.ArgumentParser, master: str) -> None:
    """--master (the tool's own default) and --conf KEY=VALUE, as the pipeline takes it."""
    parser.add_argument("--master", default=master, help="Spark master (default: %(default)s)")
    add_spark_conf_argument(parser)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm() -> None:
    """A SIGTERM (`kill`, `timeout`) stops a run as Ctrl-C does, so its broker, Spark and temporary files go too."""
    signal.signal(signal.SIGTERM, _interrupt)


def log_to_terminal() -> None:
    """Timestamped INFO lines from the tool; only warnings from Spark's gateway, the product and deltalake."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s  %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "streaming", "deltalake"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
