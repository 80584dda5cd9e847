"""`python run.py`'s lifecycle: start the broker, simulation, pipeline and dashboard in order, stop them in reverse.

A test can start an App in-process; main.py runs it from the command line.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

from streaming.config import Settings
from streaming.lake.store import Lake
from streaming.run.command import TERMINAL, Command, StartupError
from streaming.run.instance import AlreadyRunning, InstanceLock
from streaming.run.terminal import progress_bar

if TYPE_CHECKING:
    from streaming.jobs.pipeline import Pipeline
    from streaming.kafka.supervisor import BrokerSupervisor
    from streaming.run.health import HealthMonitor
    from streaming.run.web import WebServer
    from streaming.simulation.simulator import TradeSimulator

log = logging.getLogger("trade-summary")
# (lake, refresh_ms, simulator, health snapshot, reconciler, hosts, max_pages=) -> a Dash app (its .server is served).
DashboardFactory = Callable[..., Any]
# (the dashboard's Flask server or None, scrape, allowed hosts) -> that server with GET /metrics, or
# a bare one behind the dashboard's Host guard (--no-dashboard). run.py hands it in, as the dashboard.
MetricsFactory = Callable[..., Any]
BROKER_GONE_STOP_S = 15  # how long a query may take to stop once the embedded broker is given up


class App(Command[Settings]):
    """Starts the parts in order and stops them in reverse; stop() is safe at any point."""

    def __init__(self, settings: Settings, dashboard: DashboardFactory | None = None,
                 metrics: MetricsFactory | None = None):
        super().__init__(settings)
        self.dashboard = dashboard
        self.metrics = metrics
        self.lake = Lake(settings.data_dir, settings.storage_options, upkeep_in_background=True)
        self.simulator: TradeSimulator | None = None
        self.pipeline: Pipeline | None = None
        self.health: HealthMonitor | None = None
        self.supervisor: BrokerSupervisor | None = None  # the embedded broker's watch, when there is one
        self.web: WebServer | None = None
        self._web_sockets: list[socket.socket] = []  # the page's address, bound at start, served once all is up
        self.instance = InstanceLock(settings.lock_file)
        self._catch_up_logged_at = float("-inf")  # when progress through a backlog was last logged

    # -- start ----------------------------------------------------------------------------
    def start(self) -> None:
        s = self.settings
        log.info("Trade Summary: %s", s.describe())
        self._take_data_dir()
        self._check_java()
        self._check_tables_reachable()
        self._bind_web_address()
        self._start_kafka()
        self._supervise_broker()
        self._check_stop()

        if not s.available_now:
            self._start_simulator()
        self._start_pipeline()
        if s.dashboard_enabled and not s.available_now:
            self._start_dashboard()
        elif self.metrics is not None and not s.available_now:
            self._start_metrics_alone()

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

    def _bind_web_address(self) -> None:
        """The page's (or /metrics') address is bound now, before Spark and the broker bind ports of
        their own, and served once everything is up. Taken, it fails the start for the dashboard, and
        costs only /metrics without one (the pipeline runs on, as before there were metrics)."""
        from streaming.run.web import AddressUnusable, bind_address

        s = self.settings
        if s.available_now or (not s.dashboard_enabled and self.metrics is None):
            return
        try:
            self._web_sockets = bind_address(s.host, s.port)
        except AddressUnusable as exc:
            if s.dashboard_enabled:
                raise StartupError(f"the dashboard cannot start: {exc}") from None
            log.warning("/metrics is not served: %s", exc)

    def _supervise_broker(self) -> None:
        from streaming.kafka.supervisor import BrokerSupervisor

        if self.broker is not None:
            self.supervisor = BrokerSupervisor(self.broker).start()

    def _start_simulator(self) -> None:
        from streaming.simulation.market import resume_market_time
        from streaming.simulation.simulator import TradeSimulator, latest_event_time

        s = self.settings
        latest = latest_event_time(s.kafka_client_config(), s.topic)
        start = resume_market_time(latest, datetime.now(timezone.utc).date())
        self.simulator = simulator = TradeSimulator(s.kafka_client_config(), s.topic, s.simulation, s.window,
                                                    s.watermark, market_start=start, enabled=s.producer_enabled)
        simulator.start()
        state = f"on, {s.simulation.rate:g} trades/s" if s.producer_enabled else "off (turn it on from the dashboard)"
        log.info("producer simulation %s; market clock %s at %s at %gx", state, "resumes" if latest else "starts",
                 start.strftime("%Y-%m-%d %H:%M"), s.simulation.clock_speed)

    def _start_pipeline(self) -> None:
        from streaming.jobs.pipeline import Pipeline

        s = self.settings
        spark = self._start_spark()
        self._check_stop()
        self.pipeline = pipeline = Pipeline(spark, s, self.lake)
        pipeline.start()
        for query in pipeline.queries:
            log.info("query '%s' started (checkpoint in %s)", query.name, pipeline.checkpoints.query(query.name))
        self._start_health(pipeline)

    def _start_health(self, pipeline: Pipeline) -> None:
        from streaming.kafka.clients import EndOffsets
        from streaming.run.health import HealthMonitor, resume_point

        s = self.settings
        simulator = self.simulator
        producer = (lambda: simulator.stats()) if simulator is not None else (lambda: None)

        def resume(name: str):  # until a query's first batch after the start: its checkpoint's lag and watermark
            return resume_point(pipeline.lake, pipeline.checkpoints.query(name), s.watermark)

        self.health = HealthMonitor(pipeline.status, producer, EndOffsets(s.kafka_client_config(), s.topic),
                                    resume=resume, broker=self.supervisor.status if self.supervisor else None).start()
        if s.replay_from is not None:
            from streaming.metrics.counters import METRICS

            METRICS.replays.inc()

    def _scrape(self):
        """/metrics's scrape: the health snapshot with the producer's counters read now, as /api/status."""
        from streaming.run.metrics import exposition

        health, simulator = self.health, self.simulator

        def status() -> dict:
            snapshot = health.snapshot() if health is not None else {}
            if simulator is not None:
                snapshot = {**snapshot, "producer": dataclasses.asdict(simulator.stats())}
            return snapshot

        return exposition(status, self.lake)

    def _start_metrics_alone(self) -> None:
        """--no-dashboard: /metrics alone on the dashboard's address, when it could be bound."""
        s = self.settings
        assert self.metrics is not None
        if not self._web_sockets:
            return
        self._serve(self.metrics(None, self._scrape(), (s.host, *s.allowed_hosts)), "metrics")

    def _start_dashboard(self) -> None:
        from streaming.run.metrics import MeteredReconciler

        s = self.settings
        if self.dashboard is None:
            raise StartupError("no dashboard in this build: run with --no-dashboard, or start it with `python run.py`")
        # Spark and the health monitor are up by now (start() starts the pipeline first); the page
        # does without either, as when a test starts the dashboard alone.
        health = self.health.snapshot if self.health is not None else None
        reconciler = MeteredReconciler(self.spark, s, self.lake) if self.spark is not None else None
        # The Host names it answers to: the local ones (always), the bind address when it is a
        # specific one (the dashboard ignores 0.0.0.0 and ::) and --allow-host. Positional: run.py's
        # factory passes its arguments on as they come.
        app = self.dashboard(self.lake, s.refresh_ms, self.simulator, health, reconciler, (s.host, *s.allowed_hosts),
                             max_pages=s.max_pages, watermark=s.watermark)
        if self.metrics is not None:
            self.metrics(app.server, self._scrape(), (s.host, *s.allowed_hosts))
        # Stopping, the pages' live connections end first: their threads are then free to go.
        self._serve(app.server, "dashboard", on_stop=app.server.extensions["dashboard.push"].stop)

    def _serve(self, server, what: str, on_stop: Callable[[], None] | None = None) -> None:
        from streaming.run.web import WebServer

        s = self.settings
        self.web = WebServer(server, self._web_sockets, s.max_pages, what, on_stop)
        log.info("%s at http://%s:%d%s", what, s.host, s.port, "/metrics" if what == "metrics" else "")

    # -- run ------------------------------------------------------------------------------
    def run_until_stopped(self) -> int:
        pipeline, health = self.pipeline, self.health
        assert pipeline is not None and health is not None, "run_until_stopped() comes after start()"
        if self.settings.available_now:
            while any(q.isActive for q in pipeline.queries) and not self.stopping.wait(1.0):
                if self._broker_gave_up():
                    return 1
                self._report_catch_up(health.snapshot())
            return self._report_failures(pipeline, final=True)
        from streaming.run.health import kafka_trouble, status_line

        logged_at_batch = -1
        while not self.stopping.wait(1.0):
            if self._broker_gave_up():
                return 1
            failed_for_good = pipeline.restart_failed(self.settings.max_query_restarts)
            if failed_for_good:
                for query in failed_for_good:
                    log.error("query '%s' failed for good after %d restarts: %s", query.name, query.restarts,
                              query.error)
                return 1
            snapshot = health.snapshot()
            # A broker down, or records not read yet, is not a quiet market.
            if kafka_trouble(snapshot) or any(snapshot["kafka"].get("total_lag", {}).values()):
                pipeline.hold_quiet()
            else:
                self._close_quiet_windows(pipeline)
            self._report_catch_up(snapshot)
            batch = max((q["batch_id"] or 0 for q in snapshot["queries"]), default=0)
            if batch // self.settings.log_every_batches > logged_at_batch // self.settings.log_every_batches:
                logged_at_batch = batch
                log.info("status: %s", status_line(snapshot))
        return 0

    @staticmethod
    def _close_quiet_windows(pipeline) -> None:
        try:
            pipeline.close_quiet_windows()
        except Exception as exc:  # noqa: BLE001 - tried again in a second; the batches go on meanwhile
            log.warning("closing the windows of quiet input failed: %s", exc)

    def _broker_gave_up(self) -> bool:
        """The embedded broker ended and could not be started again: the app stops, exit code 1."""
        failure = self.supervisor.failure if self.supervisor is not None else None
        if failure is not None:
            log.error("error: %s", failure)
        return failure is not None

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

    def _report_failures(self, pipeline: Pipeline, final: bool) -> int:
        failures = pipeline.failed()
        for failed in failures:
            log.error("query '%s' failed: %s", failed.name, failed.error)
        if final and not failures:
            log.info("caught up: everything available in Kafka is processed")
        return 1 if failures else 0

    # -- stop -----------------------------------------------------------------------------
    def stop(self) -> None:
        TERMINAL.clear_bar()
        log.info("stopping ...")
        if self.supervisor is not None:  # no restart of a broker on its way down
            self.supervisor.stop()
        if self.web is not None:
            self.web.shutdown()
        else:  # stopped before it was served
            for sock in self._web_sockets:
                sock.close()
        if self.simulator is not None:
            self.simulator.stop()
            log.info("producer stopped (%s trades sent)", f"{self.simulator.stats().sent:,}")
        if self.health is not None:
            self.health.stop()
        if self.pipeline is not None:
            if self.supervisor is not None and self.supervisor.failure is not None and self.spark is not None:
                # Kafka is gone for good: a query waiting on it would hold the stop for --kafka-retry-timeout.
                self.spark.conf.set("spark.sql.streaming.stopTimeout", f"{BROKER_GONE_STOP_S}s")
            self.pipeline.stop()
            log.info("queries stopped")
        self._stop_spark_and_broker()
        self.instance.release()
