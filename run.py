#!/usr/bin/env python3
"""Trade Summary: the one entry point. `python run.py --help` explains every flag."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone

from streaming.broker import BrokerError
from streaming.settings import Settings, UsageError, build_parser, parse_settings

log = logging.getLogger("trade-summary")
STATUS_EVERY_S = 30


class StartupError(RuntimeError):
    """A problem the user can fix; printed without a traceback."""


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s  %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "werkzeug", "streaming.librdkafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class App:
    """Starts the parts in order and stops them in reverse; stop() is safe at any point."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.stopping = threading.Event()
        self.broker = None
        self.simulator = None
        self.spark = None
        self.pipeline = None
        self.web = None

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request_stop)

    def _request_stop(self, signum, _frame) -> None:
        if not self.stopping.is_set():
            log.info("received %s", signal.Signals(signum).name)
            self.stopping.set()

    # -- start ----------------------------------------------------------------------------
    def start(self) -> None:
        from streaming.broker import EmbeddedBroker, port_is_free
        from streaming.kafka_admin import KafkaUnreachable, ensure_topic, wait_until_reachable
        from streaming.spark_session import JavaMissing, check_java

        s = self.settings
        log.info("Trade Summary: %s", s.describe())
        try:
            check_java()
        except JavaMissing as exc:
            raise StartupError(str(exc)) from None
        if s.dashboard_enabled and not s.available_now and not port_is_free(s.port, s.host):
            raise StartupError(f"port {s.port} on {s.host} is already in use, so the dashboard cannot start: "
                               "choose another with --port N")

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
        self._check_stop()

        if not s.available_now:
            self._start_simulator()
        self._start_pipeline()
        if s.dashboard_enabled and not s.available_now:
            self._start_dashboard()

    def _check_stop(self) -> None:
        if self.stopping.is_set():
            raise KeyboardInterrupt

    def _start_simulator(self) -> None:
        from streaming.producer import TradeSimulator, latest_event_time, resume_market_time

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
        from streaming.pipeline import Pipeline
        from streaming.spark_session import create_spark

        s = self.settings
        log.info("starting Spark (%s) ...", s.master)
        began = time.monotonic()
        self.spark = create_spark(s.master)
        self.install_signal_handlers()  # SparkContext replaces the SIGINT handler with its own
        log.info("Spark %s up in %.1f s", self.spark.version, time.monotonic() - began)
        self._check_stop()
        self.pipeline = Pipeline(self.spark, s)
        self.pipeline.start()
        for query in self.pipeline.queries:
            log.info("query '%s' started (checkpoint in %s)", query.name, s.checkpoint_dir / query.name)

    def _start_dashboard(self) -> None:
        from werkzeug.serving import make_server

        from dashboard.app import create_app
        from streaming.reconcile import Reconciler

        s = self.settings
        app = create_app(s.data_dir, s.refresh_ms, self.simulator, self.pipeline.status, Reconciler(self.spark, s))
        self.web = make_server(s.host, s.port, app.server, threaded=True)
        threading.Thread(target=self.web.serve_forever, name="dashboard", daemon=True).start()
        log.info("dashboard at http://%s:%d", s.host, s.port)

    # -- run ------------------------------------------------------------------------------
    def run_until_stopped(self) -> int:
        if self.settings.available_now:
            self.pipeline.wait_until_done()
            return self._report_failures(final=True)
        last_status = time.monotonic()
        reported: set[str] = set()
        while not self.stopping.wait(1.0):
            for failed in self.pipeline.failed():
                if failed.name not in reported:
                    reported.add(failed.name)
                    log.error("query '%s' failed: %s", failed.name, failed.error)
            if time.monotonic() - last_status >= STATUS_EVERY_S:
                last_status = time.monotonic()
                self._log_status()
        return 0

    def _report_failures(self, final: bool) -> int:
        failures = self.pipeline.failed()
        for failed in failures:
            log.error("query '%s' failed: %s", failed.name, failed.error)
        if final and not failures:
            log.info("caught up: everything available in Kafka is processed")
        return 1 if failures else 0

    def _log_status(self) -> None:
        parts = []
        for q in self.pipeline.status():
            parts.append(f"{q.name}: batch {q.batch_id}, {q.input_rows_per_second or 0:.0f} rows/s in, "
                         f"watermark {q.watermark or '-'}")
        if self.simulator is not None:
            st = self.simulator.stats()
            parts.append(f"producer {'on' if st.enabled else 'off'}: sent {st.sent:,}, failed {st.failed:,}")
        log.info("status: %s", "; ".join(parts))

    # -- stop -----------------------------------------------------------------------------
    def stop(self) -> None:
        log.info("stopping ...")
        if self.web is not None:
            self.web.shutdown()
        if self.simulator is not None:
            self.simulator.stop()
            log.info("producer stopped (%s trades sent)", f"{self.simulator.stats().sent:,}")
        if self.pipeline is not None:
            self.pipeline.stop()
            log.info("queries stopped")
        if self.spark is not None:
            self.spark.stop()
        if self.broker is not None:
            self.broker.stop()
            log.info("embedded broker stopped, data saved in %s", self.broker.data_dir)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        settings = parse_settings(argv, os.environ)
    except UsageError as exc:
        build_parser().print_usage(sys.stderr)
        print(f"error: {exc}\nRun `python run.py --help` for all flags.", file=sys.stderr)
        return 2

    setup_logging()
    app = App(settings)

    app.install_signal_handlers()

    code = 0
    try:
        app.start()
        code = app.run_until_stopped()
    except KeyboardInterrupt:
        code = 0
    except (StartupError, BrokerError) as exc:
        log.error("error: %s", exc)
        code = 1
    except Exception as exc:  # noqa: BLE001 - a bug: keep the traceback, still stop cleanly
        log.exception("unexpected error: %s", exc)
        code = 1
    finally:
        app.stop()
    log.info("stopped")
    return code


if __name__ == "__main__":
    sys.exit(main())
