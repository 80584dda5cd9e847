"""The lifecycle of a command: start the parts in order, stop them in reverse, whatever happens
in between. `App` is `python run.py` (broker, simulation, pipeline, dashboard); `Loader` is
`python run.py load`. `main(argv)` is the entry point; a test can start an App in-process.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from streaming.config import KafkaTarget, LoadSettings, Settings, UsageError
from streaming.kafka.broker import BrokerError
from streaming.kafka.clients import LOGGER_NAME as LIBRDKAFKA_LOGGER
from streaming.lake.store import Lake
from streaming.run.cli import build_load_parser, build_parser, parse_load_settings, parse_settings
from streaming.run.instance import AlreadyRunning, InstanceLock
from streaming.run.terminal import Terminal, progress_bar

log = logging.getLogger("trade-summary")
# (lake, refresh_ms, simulator, health snapshot, reconciler) -> a Dash app (its .server is served).
DashboardFactory = Callable[..., Any]


class StartupError(RuntimeError):
    """A problem the user can fix; printed without a traceback."""


TERMINAL = Terminal()


def setup_logging() -> None:
    handler = TERMINAL.handler()
    handler.setFormatter(logging.Formatter("%(asctime)s  %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    for noisy in ("py4j", "werkzeug", LIBRDKAFKA_LOGGER):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class Command:
    """What both commands share: signals, Java, Kafka (embedded or not), Spark, stopping."""

    def __init__(self, settings: KafkaTarget):
        self.settings = settings
        self.stopping = threading.Event()
        self.broker = None
        self.spark = None
        self._owns_spark = False  # a session already running in this process (a test's) is left running
        self.broker_failed = False  # the embedded broker ended by itself or could not be stopped: exit code 1

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request_stop)

    def _request_stop(self, signum, _frame) -> None:
        if not self.stopping.is_set():
            log.info("received %s", signal.Signals(signum).name)
            self.stopping.set()

    def _check_stop(self) -> None:
        if self.stopping.is_set():
            raise KeyboardInterrupt

    def _check_java(self) -> None:
        from streaming.jars import JavaMissing, check_java

        try:
            check_java()
        except JavaMissing as exc:
            raise StartupError(str(exc)) from None

    def _start_kafka(self) -> None:
        """Start (or reuse) the embedded broker unless --bootstrap-servers; make sure the topic exists."""
        from streaming.kafka.admin import KafkaUnreachable, ensure_topic, wait_until_reachable
        from streaming.kafka.broker import EmbeddedBroker

        s = self.settings
        if s.embedded_broker:
            log.info("starting the embedded Kafka broker on 127.0.0.1:%d (data in %s) ...", s.broker_port, s.broker_dir)
            self.broker = EmbeddedBroker(s.broker_dir, s.broker_port)
            self.broker.start()
        try:
            wait_until_reachable(s.kafka_client_config(), timeout_s=30)
        except KafkaUnreachable as exc:
            raise StartupError(f"{exc}. Check --bootstrap-servers and the client settings.") from None
        created = ensure_topic(s.kafka_client_config(), s.topic, s.topic_partitions, s.topic_retention_ms)
        log.info("Kafka ready at %s; topic '%s' %s", s.kafka_bootstrap, s.topic,
                 f"created ({s.topic_partitions} partitions)" if created else "found")

    def _start_spark(self) -> None:
        from pyspark import SparkContext

        from streaming.jars import JarsMissing
        from streaming.run.spark_session import create_spark

        conf = self.settings.spark_conf
        # Keys only: a value may be a secret (a storage key, a token).
        log.info("starting Spark (%s)%s ...", self.settings.master,
                 f" with --conf {', '.join(key for key, _ in conf)}" if conf else "")
        began = time.monotonic()
        self._owns_spark = SparkContext._active_spark_context is None
        try:
            self.spark = create_spark(self.settings.master, conf_overrides=conf,
                                      driver_host=self.settings.driver_host)
        except JarsMissing as exc:
            raise StartupError(str(exc)) from None
        self.install_signal_handlers()  # SparkContext replaces the SIGINT handler with its own
        log.info("Spark %s up in %.1f s", self.spark.version, time.monotonic() - began)

    def _stop_spark_and_broker(self, keep_reused_broker: bool = False) -> None:
        if self.spark is not None and self._owns_spark:
            self.spark.stop()
        if self.broker is not None:
            if keep_reused_broker and self.broker.reused:
                log.info("the embedded broker was already running before this command; it keeps running")
                return
            try:
                self.broker.stop()
            except BrokerError as exc:
                log.error("%s", exc)
                self.broker_failed = True
                return
            log.info("embedded broker stopped; its data stays in %s", self.broker.data_dir)


class App(Command):
    """Starts the parts in order and stops them in reverse; stop() is safe at any point."""

    def __init__(self, settings: Settings, dashboard: DashboardFactory | None = None):
        super().__init__(settings)
        self.dashboard = dashboard
        self.lake = Lake(settings.data_dir, settings.storage_options)
        self.simulator = None
        self.pipeline = None
        self.health = None
        self.web = None
        self.instance = InstanceLock(settings.lock_file)
        self._catch_up_logged_at = float("-inf")  # when progress through a backlog was last logged

    # -- start ----------------------------------------------------------------------------
    def start(self) -> None:
        from streaming.kafka.broker import port_is_free

        s = self.settings
        log.info("Trade Summary: %s", s.describe())
        self._take_data_dir()
        self._check_java()
        self._check_tables_reachable()
        if s.dashboard_enabled and not s.available_now and not port_is_free(s.port, s.host):
            raise StartupError(f"port {s.port} on {s.host} is already in use, so the dashboard cannot start: "
                               "choose another with --port N")
        self._start_kafka()
        self._check_stop()

        if not s.available_now:
            self._start_simulator()
        self._start_pipeline()
        if s.dashboard_enabled and not s.available_now:
            self._start_dashboard()

    def _take_data_dir(self) -> None:
        s = self.settings
        about = {"dashboard": f"http://{s.host}:{s.port}" if s.dashboard_enabled and not s.available_now else None,
                 "broker": f"127.0.0.1:{s.broker_port}" if s.embedded_broker else None}
        try:
            self.instance.acquire(about)
        except AlreadyRunning as exc:
            raise StartupError(str(exc)) from None

    def _check_tables_reachable(self) -> None:
        """An object store that cannot be reached fails the start at once, in a line, before
        the broker and Spark start."""
        from streaming.lake.locations import StorageUnreachable, check_reachable

        try:
            check_reachable(self.settings.data_dir, self.settings.storage_options)
        except StorageUnreachable as exc:
            raise StartupError(f"{exc}. Check the bucket, the credentials and the endpoint (AWS_*, AZURE_*, "
                               "GOOGLE_* variables or --storage-option)") from None

    def _start_simulator(self) -> None:
        from streaming.simulation.market import resume_market_time
        from streaming.simulation.simulator import TradeSimulator, latest_event_time

        s = self.settings
        latest = latest_event_time(s.kafka_client_config(), s.topic)
        start = resume_market_time(latest, datetime.now(timezone.utc).date())
        self.simulator = TradeSimulator(s.kafka_client_config(), s.topic, s.simulation, s.window, s.watermark,
                                        market_start=start, enabled=s.producer_enabled)
        self.simulator.start()
        state = f"on, {s.simulation.rate:g} trades/s" if s.producer_enabled else "off (turn it on from the dashboard)"
        log.info("producer simulation %s; market clock %s at %s at %gx", state, "resumes" if latest else "starts",
                 start.strftime("%Y-%m-%d %H:%M"), s.simulation.clock_speed)

    def _start_pipeline(self) -> None:
        from streaming.jobs.pipeline import Pipeline

        s = self.settings
        self._start_spark()
        self._check_stop()
        self.pipeline = Pipeline(self.spark, s, self.lake)
        self.pipeline.start()
        for query in self.pipeline.queries:
            log.info("query '%s' started (checkpoint in %s)", query.name, self.pipeline.checkpoints.query(query.name))
        self._start_health()

    def _start_health(self) -> None:
        from streaming.kafka.clients import EndOffsets
        from streaming.run.health import HealthMonitor

        s = self.settings
        producer = (lambda: self.simulator.stats()) if self.simulator is not None else (lambda: None)
        self.health = HealthMonitor(self.pipeline.status, producer,
                                    EndOffsets(s.kafka_client_config(), s.topic)).start()

    def _start_dashboard(self) -> None:
        from werkzeug.serving import make_server

        from streaming.jobs.reconcile import Reconciler

        s = self.settings
        if self.dashboard is None:
            raise StartupError("no dashboard in this build: run with --no-dashboard, or start it with `python run.py`")
        # The Host names it answers to: the local ones (always), the bind address when it is a
        # specific one (the dashboard ignores 0.0.0.0 and ::) and --allow-host. Positional: run.py's
        # factory passes its arguments on as they come.
        app = self.dashboard(self.lake, s.refresh_ms, self.simulator, self.health.snapshot,
                             Reconciler(self.spark, s, self.lake), (s.host, *s.allowed_hosts))
        self.web = make_server(s.host, s.port, app.server, threaded=True)
        threading.Thread(target=self.web.serve_forever, name="dashboard", daemon=True).start()
        log.info("dashboard at http://%s:%d", s.host, s.port)

    # -- run ------------------------------------------------------------------------------
    def run_until_stopped(self) -> int:
        if self.settings.available_now:
            while any(q.isActive for q in self.pipeline.queries) and not self.stopping.wait(1.0):
                self._report_catch_up(self.health.snapshot())
            return self._report_failures(final=True)
        from streaming.run.health import status_line

        logged_at_batch = -1
        while not self.stopping.wait(1.0):
            failed_for_good = self.pipeline.restart_failed(self.settings.max_query_restarts)
            if failed_for_good:
                for query in failed_for_good:
                    log.error("query '%s' failed for good after %d restarts: %s", query.name, query.restarts,
                              query.error)
                return 1
            snapshot = self.health.snapshot()
            self._report_catch_up(snapshot)
            batch = max((q["batch_id"] or 0 for q in snapshot["queries"]), default=0)
            if batch // self.settings.log_every_batches > logged_at_batch // self.settings.log_every_batches:
                logged_at_batch = batch
                log.info("status: %s", status_line(snapshot))
        return 0

    def _report_catch_up(self, snapshot: dict, every_s: float = 5.0) -> None:
        """While a query works through a backlog: how far along it is, as a progress bar on a TTY
        (redrawn each second) and otherwise as a line every few seconds; a line when it has
        caught up."""
        from streaming.run.health import catch_up_line

        progress, now = snapshot.get("catch_up") or {}, time.monotonic()
        if progress and TERMINAL.is_tty:
            self._catch_up_logged_at = now
            TERMINAL.show_bar(progress_bar(progress))
        elif progress and now - self._catch_up_logged_at >= every_s:
            self._catch_up_logged_at = now
            log.info("catching up: %s", catch_up_line(progress))
        elif not progress and self._catch_up_logged_at > float("-inf"):
            self._catch_up_logged_at = float("-inf")
            TERMINAL.clear_bar()
            log.info("caught up with Kafka")

    def _report_failures(self, final: bool) -> int:
        failures = self.pipeline.failed()
        for failed in failures:
            log.error("query '%s' failed: %s", failed.name, failed.error)
        if final and not failures:
            log.info("caught up: everything available in Kafka is processed")
        return 1 if failures else 0

    # -- stop -----------------------------------------------------------------------------
    def stop(self) -> None:
        TERMINAL.clear_bar()
        log.info("stopping ...")
        if self.web is not None:
            self.web.shutdown()
        if self.simulator is not None:
            self.simulator.stop()
            log.info("producer stopped (%s trades sent)", f"{self.simulator.stats().sent:,}")
        if self.health is not None:
            self.health.stop()
        if self.pipeline is not None:
            self.pipeline.stop()
            log.info("queries stopped")
        self._stop_spark_and_broker()
        self.instance.release()


class Loader(Command):
    """`python run.py load`: trade files from a landing zone -> the trades topic."""

    def __init__(self, settings: LoadSettings):
        super().__init__(settings)
        self.query = None
        self._last_logged_batch = -1
        self.totals = {"files": 0, "lines": 0, "records": 0, "unparsed": 0}

    def start(self) -> None:
        from streaming.jobs.loader import check_filter, check_key, start_load_query

        s = self.settings
        log.info("Trade Summary loader: %s", s.describe())
        check_key(s.key_column)
        self._check_java()
        self._start_spark()
        check_filter(self.spark, s.where, s.key_column)  # a wrong --where fails before Kafka is touched
        self._check_stop()
        self._start_kafka()
        self._check_stop()
        self.query = start_load_query(self.spark, s)
        pace = ": loading what is there, then exiting" if s.available_now else f" every {s.trigger.total_seconds():g} s"
        log.info("watching %s for trade files%s", s.source_dir, pace)

    def run_until_stopped(self) -> int:
        from streaming.jobs.pipeline import short_error

        while not self.stopping.wait(1.0) and self.query.isActive:
            self._log_progress()
        self._log_progress()
        if self.query.isActive:
            return 0  # stopped by a signal; stop() ends the query between micro-batches
        error = self.query.exception()
        if error is not None:
            log.error("loading failed: %s", short_error(error))
            return 1
        log.info("done: %s in total", self._describe(self.totals))
        return 0

    def _log_progress(self) -> None:
        from streaming.jobs.loader import new_batch_counts

        for batch_id, counts in new_batch_counts(self.query.recentProgress, self._last_logged_batch):
            self._last_logged_batch = batch_id
            for name, value in counts.items():
                self.totals[name] += value
            log.info("batch %d: %s", batch_id, self._describe(counts))

    def _describe(self, counts: dict[str, int]) -> str:
        from streaming.jobs.loader import describe_counts

        return describe_counts(counts, self.settings.topic)

    def stop(self) -> None:
        from streaming.jobs.pipeline import stop_queries

        log.info("stopping ...")
        if self.query is not None:
            stop_queries([self.query])
        # A broker that was already up belongs to a running app: leave it running.
        self._stop_spark_and_broker(keep_reused_broker=True)


def run_command(command_class, parse, build_parser, argv: list[str], help_command: str) -> int:
    def usage_error(exc: UsageError) -> int:
        build_parser().print_usage(sys.stderr)
        print(f"error: {exc}\nRun `{help_command}` for all flags.", file=sys.stderr)
        return 2

    try:
        settings = parse(argv, os.environ)
    except UsageError as exc:
        return usage_error(exc)

    setup_logging()
    command = command_class(settings)
    command.install_signal_handlers()

    code = 0
    try:
        command.start()
        code = command.run_until_stopped()
    except KeyboardInterrupt:
        code = 0
    except UsageError as exc:  # found only once Spark can check it, e.g. a --where condition
        code = usage_error(exc)
    except (StartupError, BrokerError) as exc:
        log.error("error: %s", exc)
        code = 1
    except Exception as exc:  # noqa: BLE001 - a bug: keep the traceback, still stop cleanly
        log.exception("unexpected error: %s", exc)
        code = 1
    finally:
        command.stop()
    log.info("stopped")
    return 1 if command.broker_failed else code


def main(argv: list[str] | None = None, dashboard: DashboardFactory | None = None) -> int:
    """dashboard: the web app's factory (dashboard.app.create_app), handed in by run.py, so that
    the pipeline's package never imports the dashboard."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["load"]:
        return run_command(Loader, parse_load_settings, build_load_parser, argv[1:], "python run.py load --help")
    return run_command(functools.partial(App, dashboard=dashboard), parse_settings, build_parser, argv,
                       "python run.py --help")
