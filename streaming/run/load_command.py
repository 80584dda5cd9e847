"""`python run.py load`'s lifecycle: Spark, then Kafka, then the load query; stopped between micro-batches."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streaming.config import LoadSettings
from streaming.run.command import Command

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("trade-summary")


class Loader(Command[LoadSettings]):
    """`python run.py load`: trade files from a landing zone -> the trades topic."""

    def __init__(self, settings: LoadSettings):
        super().__init__(settings)
        self.query: StreamingQuery | None = None
        self._last_logged_batch = -1
        self.totals = {"files": 0, "lines": 0, "records": 0, "unparsed": 0}

    def start(self) -> None:
        from streaming.jobs.loader import check_filter, check_key, start_load_query

        s = self.settings
        log.info("Trade Summary loader: %s", s.describe())
        check_key(s.key_column)
        self._check_java()
        spark = self._start_spark()
        check_filter(spark, s.where, s.key_column)  # a wrong --where fails before Kafka is touched
        self._check_stop()
        self._start_kafka()
        self._check_stop()
        self.query = start_load_query(spark, s)
        pace = ": loading what is there, then exiting" if s.available_now else f" every {s.trigger.total_seconds():g} s"
        log.info("watching %s for trade files%s", s.source_dir, pace)

    def run_until_stopped(self) -> int:
        from streaming.jobs.pipeline import short_error

        query = self.query
        assert query is not None, "run_until_stopped() comes after start()"
        while not self.stopping.wait(1.0) and query.isActive:
            self._log_progress(query)
        self._log_progress(query)
        if query.isActive:
            return 0  # stopped by a signal; stop() ends the query between micro-batches
        error = query.exception()
        if error is not None:
            log.error("loading failed: %s", short_error(error))
            return 1
        log.info("done: %s in total", self._describe(self.totals))
        return 0

    def _log_progress(self, query: StreamingQuery) -> None:
        from streaming.jobs.loader import new_batch_counts

        for batch_id, counts in new_batch_counts(query.recentProgress, self._last_logged_batch):
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
