"""`python -m bench --soak`: does the app as shipped stay flat over a long run?

Starts `python run.py --rate R` as a user would (its embedded broker, its producer, its page;
free ports on 127.0.0.1, a fresh temporary data dir, its own session, its output to a log file
in that dir), times its first start (launch to the first batch in gold), and samples it every
`--sample-seconds` for `--minutes`: the RSS of the driver (run.py's Python and Spark's JVM) and
of the broker (app_run.Processes finds them), the disk of the data dir and of the broker's dir,
`/api/status` (batch duration, lag, trades sent) and one page refresh through Dash's endpoint.
At the end it sends run.py SIGTERM and times its exit, starts it again on the same dir to time
the restart, and stops it. soak_report.py windows the samples and writes the line, the ratios
and the "## Soak: " section of docs/benchmarks.md (one per broker retention) with a plot.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import app_run, soak_report
from bench.app_run import LakeRun, Page, Processes, launch, wait_for
from bench.broker_soak import disk_mib
from bench.command_line import require_positive, run_tool, tool_parser
from bench.report import machine
from bench.sampling import GoldWatcher
from bench.soak_report import Sample, SoakRun
from dashboard.client import draw_chart, draw_panels, draw_quarantine, store_quarantine, store_snapshot
from streaming.config import Settings
from streaming.lake.store import Lake
from streaming.run.argument_types import duration_argument

log = logging.getLogger("bench")
REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 600.0
DESCRIPTION = ("Run `python run.py` as shipped (embedded broker, producer, page) for a number of minutes at a "
               "steady rate, sampled every few seconds: broker and driver memory, disk, batch duration, lag and "
               "one page refresh; then time its SIGTERM and a restart on the same data. Prints a per-5-minute "
               "table, one `soak:` line and the ratios of the last minutes to minutes 3-8, and writes its section "
               "of docs/benchmarks.md with a plot.")


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        soak_report.COMMAND, DESCRIPTION,
        ("--minutes", float, 60, "minutes run.py runs, from its start"),
        ("--rate", float, 2_000, "trades/s run.py's own producer sends (run.py --rate)"),
        ("--sample-seconds", float, 20, "seconds between samples"),
    )
    parser.add_argument("--broker-retention", metavar="DURATION",
                        help="passed to run.py (e.g. 5m); its own section of the page (default: run.py's own)")
    parser.add_argument("--limit", type=float,
                        help="the largest ratio of B to A (the last minutes to minutes 3-8) that passes "
                             "(default: 1.2, or 1.3 with --broker-retention)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs",
                        help="where benchmarks.md and the plot go (default: docs/)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir and run.py's logs")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    require_positive(parser, args, "minutes", "rate", "sample_seconds")
    if args.minutes < 2:
        parser.error("--minutes must be 2 or more (the windows start after minute 1)")
    if args.broker_retention is not None:
        try:  # run.py's own check, before anything starts
            duration_argument(args.broker_retention)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            parser.error(f"--broker-retention: {exc}")
    if args.limit is None:
        args.limit = soak_report.default_limit(args.broker_retention)
    elif args.limit <= 0:
        parser.error("--limit must be positive")
    return args


# -- run.py, started and stopped --------------------------------------------------------------
class App:
    """One `python run.py` on the soak's data dir and ports, and every process it started."""

    def __init__(self, args: argparse.Namespace, data_dir: Path, ports: list[int], log_file: Path):
        self.data_dir, self.log_file = data_dir, log_file
        broker_port, web_port = ports
        self.arguments = ["--data-dir", str(data_dir), "--rate", f"{args.rate:g}", "--host", "127.0.0.1",
                          "--port", str(web_port), "--broker-port", str(broker_port)]
        if args.broker_retention:
            self.arguments += ["--broker-retention", args.broker_retention]
        self.page = Page(web_port)
        self.process: subprocess.Popen | None = None
        self.processes: Processes | None = None
        self.seen: dict[int, int] = {}  # pid -> its start time (ticks since boot), to never signal a reused pid

    def start(self, lake_run: LakeRun, interval_s: float) -> float:
        """Launch; returns the monotonic time of the launch."""
        t0 = time.monotonic()
        self.process = launch(self.arguments, self.log_file)
        self.processes = Processes(lake_run, self.process.pid, t0, self.log_file, self.page, self.data_dir,
                                   interval_s)
        return t0

    def note_pids(self) -> None:
        """Remember run.py's descendants (Spark's JVM and the broker run in sessions of their own)."""
        if self.processes is not None:
            for pids in self.processes.groups().values():
                for pid in pids:
                    self.seen.setdefault(pid, _start_time(pid))

    def wait(self, predicate, timeout_s: float, what: str) -> None:
        assert self.process is not None
        wait_for(predicate, timeout_s, what, self.process, self.log_file)

    def sigterm(self, timeout_s: float = 60.0) -> float:
        """SIGTERM to run.py's pid; seconds until it exited (it is killed after timeout_s)."""
        assert self.process is not None
        self.note_pids()
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("run.py had not exited %.0f s after SIGTERM: killed", timeout_s)
            self.process.kill()
            self.process.wait(30)
        return time.monotonic() - began

    def alive(self) -> list[int]:
        return [pid for pid, began in self.seen.items() if _start_time(pid) == began]

    def left_running(self, grace_s: float = 10.0) -> list[int]:
        """Processes of run.py still there grace_s after it exited."""
        deadline = time.monotonic() + grace_s
        while (alive := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return alive

    def stop(self) -> None:
        """Whatever is still running of it, by pid: SIGTERM (app_run.stop), then SIGKILL."""
        if self.process is None:
            return
        self.note_pids()
        app_run.stop(self.process, self.processes.broker_pid if self.processes else None, timeout_s=60)
        for pid in self.left_running(grace_s=10.0):
            log.warning("pid %d (%s) outlived run.py: killed", pid, _command(pid))
            _signal(pid, signal.SIGKILL)


def _start_time(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
    except OSError:
        return "?"


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


# -- sampling ---------------------------------------------------------------------------------
def timed_refresh(page: Page) -> tuple[float, float]:
    """One page refresh as dashboard/client.refresh_page runs it: (store read ms, whole refresh ms)."""
    began = time.monotonic()
    snapshot = store_snapshot(page)
    stored = time.monotonic()
    draw_chart(page, snapshot)
    draw_panels(page, snapshot)
    draw_quarantine(page, store_quarantine(page))
    return (stored - began) * 1000, (time.monotonic() - began) * 1000


def sample(app: App, lake_run: LakeRun, t: float) -> Sample:
    assert app.processes is not None
    app.processes.tick()  # RSS, /api/status, the checkpoint's batches, the log's milestones
    app.note_pids()
    rss = lake_run.rss[-1][1]
    found = Sample(t, driver_rss_mb=rss["driver"], broker_rss_mb=rss["broker"],
                   broker_disk_mb=disk_mib(Settings(data_dir=app.data_dir).broker_dir),
                   data_disk_mb=disk_mib(app.data_dir))
    status = app.processes.status or {}
    query = next((q for q in status.get("queries", []) if q.get("batch_duration_ms") is not None), None)
    found.batch_ms = query["batch_duration_ms"] if query else None
    lags = (status.get("kafka") or {}).get("total_lag") or {}
    found.lag = sum(lags.values()) if lags else None
    found.trades = (status.get("producer") or {}).get("sent")
    if status:
        try:
            found.store_ms, found.refresh_ms = timed_refresh(app.page)
        except Exception as exc:  # noqa: BLE001 - counted and said; the soak goes on
            log.warning("page refresh failed at %.0f s: %s", t, exc)
    return found


def progress(found: Sample, total_s: float) -> str:
    def ms(value):
        return "-" if value is None else f"{value:,.0f} ms"

    return (f"soak {_clock(found.t)}/{_clock(total_s)}: broker {found.broker_rss_mb:,.0f} MiB, "
            f"{found.broker_disk_mb:,.0f} MiB on disk; driver {found.driver_rss_mb:,.0f} MiB; data dir "
            f"{found.data_disk_mb:,.0f} MiB; batch {ms(found.batch_ms)}; lag "
            f"{'-' if found.lag is None else format(found.lag, ',.0f')}; trades "
            f"{'-' if found.trades is None else format(found.trades, ',')}; refresh {ms(found.refresh_ms)} "
            f"(store {ms(found.store_ms)})")


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


class FirstBatch:
    """When the first batch that adds trades to gold became visible (gold looked at every 10 ms
    until then: the poll stops once it is found)."""

    def __init__(self, data_dir: Path, t0: float):
        self.watcher, self.t0 = GoldWatcher(Lake(data_dir)), t0
        self.watcher.tick()
        self.before = self.watcher.total()
        self.watcher.start()

    def seconds(self) -> float | None:
        found = next((t for t, total in self.watcher.seen if total > self.before), None)
        if found is None:
            return None
        self.watcher.stop()
        return found - self.t0

    def stop(self) -> None:
        self.watcher.stop()


# -- the run ----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> SoakRun:
    soak = SoakRun(args.minutes, args.rate, args.broker_retention, args.sample_seconds, args.limit)
    work = Path(tempfile.mkdtemp(prefix="trade-summary-soak-"))
    data_dir, ports = work / "data", app_run.free_ports(2)
    app = App(args, data_dir, ports, work / "run.log")
    again = App(args, data_dir, ports, work / "run-restart.log")
    watchers: list[FirstBatch | None] = [None, None]
    try:
        lake_run = LakeRun("soak")
        t0 = app.start(lake_run, args.sample_seconds)
        assert app.process is not None and app.processes is not None
        log.info("soak: python run.py %s (pid %d), log %s", " ".join(app.arguments), app.process.pid,
                 app.log_file)
        first = watchers[0] = FirstBatch(data_dir, t0)
        total_s, k = args.minutes * 60, 1
        while (due := k * args.sample_seconds) <= total_s + 1e-6:
            app.wait(lambda: time.monotonic() - t0 >= due, due + 60, f"the sample at {due:.0f} s")
            if math.isnan(soak.first_start_s) and (seconds := first.seconds()) is not None:
                soak.first_start_s = seconds
                log.info("soak: first batch in gold %.1f s after start", seconds)
            soak.samples.append(found := sample(app, lake_run, time.monotonic() - t0))
            log.info("%s", progress(found, total_s))
            k += 1
        if math.isnan(soak.first_start_s):
            raise RuntimeError(f"no batch reached gold in {args.minutes:g} minutes (log: {app.log_file})")
        app.processes.collect_batches()
        soak.batches = list(lake_run.batches)
        signalled = time.monotonic()
        soak.sigterm_s = app.sigterm()
        lingering = [_command(pid) for pid in app.alive()]
        log.info("soak: run.py exited %.1f s after SIGTERM (exit code %s)", soak.sigterm_s, app.process.returncode)
        if left := app.left_running():
            soak.notes.append(f"still running 10 s after run.py exited: {', '.join(map(_command, left))}")
            log.warning("soak: %s", soak.notes[-1])
        soak.gone_s = time.monotonic() - signalled
        if lingering:
            log.info("soak: its processes all gone %.1f s after SIGTERM; still there at its exit: %s", soak.gone_s,
                     "; ".join(lingering))
        app.stop()
        log.info("soak: restarting on the same data dir ...")
        t1 = again.start(LakeRun("restart"), args.sample_seconds)
        restarted = watchers[1] = FirstBatch(data_dir, t1)
        again.wait(lambda: restarted.seconds() is not None, START_TIMEOUT_S, "the first new batch in gold")
        soak.restart_s = restarted.seconds() or math.nan
        log.info("soak: first new batch in gold %.1f s after the restart; stopping it", soak.restart_s)
        restart_sigterm = again.sigterm()
        log.info("soak: the restarted run.py exited %.1f s after SIGTERM", restart_sigterm)
        return soak
    finally:
        for watcher in watchers:
            if watcher is not None:
                watcher.stop()
        for each in (again, app):
            each.stop()
        if args.keep:
            log.info("soak: data dir and logs kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(soak: SoakRun, args: argparse.Namespace) -> Path:
    """Print the table, the line and the ratios; write the page's section and the plot."""
    _, _, short = soak_report.windows(soak.minutes)
    print("\n".join(soak_report.table(soak)), flush=True)
    if short:
        print(f"(a run under {soak_report.SHORT_MINUTES} minutes: A is the first third after minute 1, "
              "B the last third)", flush=True)
    print(soak_report.summary_line(soak), flush=True)
    print(soak_report.ratio_line(soak), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    text = soak_report.section(soak, args.argv, machine(), soak_report.plot(soak, args.out))
    return soak_report.write(args.out, text, soak.retention)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    def measure_and_report() -> int:
        soak = run(args)
        log.info("wrote %s", report(soak, args))
        return 0

    return run_tool("soak", measure_and_report)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
