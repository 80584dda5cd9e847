"""What both commands share: check Java, start and stop Kafka and Spark, signals, logging, and run_command (exit
codes)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Generic, TypeVar

from streaming.config import LoadSettings, Settings, UsageError
from streaming.kafka.broker import BrokerError
from streaming.kafka.clients import LOGGER_NAME as LIBRDKAFKA_LOGGER
from streaming.run.terminal import Terminal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.kafka.broker import EmbeddedBroker

log = logging.getLogger("trade-summary")


class StartupError(RuntimeError):
    """A problem the user can fix; printed without a traceback."""


TERMINAL = Terminal()


def setup_logging() -> None:
    handler = TERMINAL.handler()
    handler.setFormatter(logging.Formatter("%(asctime)s  %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    for noisy in ("py4j", "werkzeug", "waitress", LIBRDKAFKA_LOGGER):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# A command's settings: `python run.py`'s or `python run.py load`'s (both name Kafka and Spark).
SettingsT = TypeVar("SettingsT", Settings, LoadSettings)


class Command(Generic[SettingsT]):
    """What both commands share: signals, Java, Kafka (embedded or not), Spark, stopping."""

    def __init__(self, settings: SettingsT):
        self.settings: SettingsT = settings
        self.stopping = threading.Event()
        self.broker: EmbeddedBroker | None = None
        self.spark: SparkSession | None = None
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
        """Java is there, and the Java parts this command runs are fetched (the first start
        fetches them all at once: a progress line a part, then the total)."""
        from streaming import jars

        try:
            jars.check_java()
            needed = [jars.SPARK, jars.KAFKA] if self.settings.embedded_broker else [jars.SPARK]
            jars.ensure_all(needed, echo=log.info)
        except (jars.JavaMissing, jars.JarsMissing) as exc:
            raise StartupError(str(exc)) from None

    def _start_kafka(self) -> None:
        """Start (or reuse) the embedded broker unless --bootstrap-servers; make sure the topic exists."""
        from streaming.kafka.admin import (
            KafkaUnreachable,
            apply_retention,
            ensure_topic,
            retention_text,
            wait_until_reachable,
        )
        from streaming.kafka.broker import EmbeddedBroker

        s = self.settings
        if s.embedded_broker:
            log.info("starting the embedded Kafka broker on 127.0.0.1:%d (data in %s) ...", s.broker_port, s.broker_dir)
            self.broker = broker = EmbeddedBroker(s.broker_dir, s.broker_port)
            broker.start()
        try:
            wait_until_reachable(s.kafka_client_config(), timeout_s=30)
        except KafkaUnreachable as exc:
            raise StartupError(f"{exc}. Check --bootstrap-servers and the client settings.") from None
        created = ensure_topic(s.kafka_client_config(), s.topic, s.topic_partitions, s.topic_retention_ms)
        log.info("Kafka ready at %s; topic '%s' %s", s.kafka_bootstrap, s.topic,
                 f"created ({s.topic_partitions} partitions, retention {retention_text(s.topic_retention_ms)})"
                 if created else "found")
        retention = s.retention_at_start(reused_broker=self.broker is not None and self.broker.reused)
        if not created and retention is not None:
            retention_ms = int(retention.total_seconds() * 1000)
            try:
                had = apply_retention(s.kafka_client_config(), s.topic, retention_ms)
            except RuntimeError as exc:
                raise StartupError(f"{exc} (--broker-retention: leave it out to keep another Kafka's topic "
                                   "as it is)") from None
            if had is not None:
                log.info("topic '%s': retention set to %s (it was %s; --broker-retention)", s.topic,
                         retention_text(retention_ms), retention_text(had))

    def _start_spark(self) -> SparkSession:
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
            self.spark = spark = create_spark(self.settings.master, conf_overrides=conf,
                                              driver_host=self.settings.driver_host)
        except JarsMissing as exc:
            raise StartupError(str(exc)) from None
        self.install_signal_handlers()  # SparkContext replaces the SIGINT handler with its own
        log.info("Spark %s up in %.1f s", spark.version, time.monotonic() - began)
        return spark

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


def run_command(command_class, parse, build_parser, argv: list[str], help_command: str) -> int:
    """Parse, start, run until stopped, stop whatever happens. Exit code: 0 stopped cleanly (a
    signal, --available-now done), 1 a failure (or a broker that ended by itself), 2 a usage error."""
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
