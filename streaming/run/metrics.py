"""GET /metrics: the Prometheus text of a run. The pipeline's counters (streaming/metrics), the
gauges read from the health snapshot at scrape time (lag, offsets, queries, producer, Kafka),
the tables' versions and sizes, and the library's process collectors (memory, CPU, GC).

Nothing runs between scrapes: the health snapshot is already sampled, and the tables' figures
are refreshed on a thread a scrape starts when they are older than TABLES_EVERY_S, so a scrape
never waits for a table's log."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streaming.jobs.reconcile import BackfillReport, Reconciler
from streaming.lake import tables
from streaming.lake.store import Lake
from streaming.metrics.counters import METRICS, PREFIX, PipelineMetrics

log = logging.getLogger(__name__)
TABLES_EVERY_S = 30.0
# A scrape's answer: (body, Content-Type).
Scrape = Callable[[], "tuple[bytes, str]"]


def topic_partition(key: str) -> tuple[str, str]:
    """'trades:2' -> ('trades', '2')."""
    topic, _, partition = key.rpartition(":")
    return topic, partition


def _gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=list(labels))


def _counter(name: str, documentation: str, labels: Iterable[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", documentation, labels=list(labels))


def iso_seconds(text: str | None) -> float | None:
    """'2026-03-02T09:02:00.000Z' -> Unix seconds; None for none."""
    return None if not text else datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def health_families(snapshot: dict) -> list[Metric]:
    """The health snapshot (/api/status's) as metric families: what a scrape reads, computed
    from figures already sampled."""
    kafka = snapshot.get("kafka") or {}
    end = _gauge("kafka_end_offset", "The topic partition's end offset (the next offset Kafka will write)",
                 ["topic", "partition"])
    committed = _gauge("consumer_committed_offset", "The next offset the query will process, from its "
                       "progress or its checkpoint (Spark commits no consumer-group offsets)",
                       ["query", "topic", "partition"])
    lag = _gauge("consumer_lag", "Records in Kafka the query has not processed: end offset - committed offset",
                 ["query", "topic", "partition"])
    queries = snapshot.get("queries") or []
    processed = {q["name"]: q.get("processed_offsets") or {} for q in queries}
    for row in kafka.get("partitions") or []:
        topic, partition = topic_partition(row["partition"])
        end.add_metric([topic, partition], row["end_offset"])
        for name, behind in row["lag"].items():
            lag.add_metric([name, topic, partition], behind)
            if row["partition"] in processed.get(name, {}):
                committed.add_metric([name, topic, partition], processed[name][row["partition"]])
    unreachable = _gauge("kafka_unreachable", "1 while the health samples cannot read Kafka's end offsets")
    unreachable.add_metric([], 1 if kafka.get("unreachable_since") or kafka.get("error") else 0)
    active = _gauge("query_active", "1 while the streaming query runs", ["query"])
    failed = _gauge("query_failed", "1 when the query has failed (until it is restarted)", ["query"])
    restarts = _counter("query_restarts", "Restarts of the query from its checkpoint after a failure", ["query"])
    watermark = _gauge("watermark_timestamp_seconds", "The watermark the query's next batch applies", ["query"])
    quiet = _gauge("seconds_since_last_trade", "Wall-clock seconds since the query last wrote new trades (since "
                   "its start, before any)", ["query"])
    closed = _gauge("closed_when_quiet", "1 while an idle close (--close-idle-after) holds the watermark at the "
                    "latest event time seen, with no trade since", ["query"])
    for query in queries:
        active.add_metric([query["name"]], 1 if query.get("active") else 0)
        failed.add_metric([query["name"]], 1 if query.get("error") else 0)
        restarts.add_metric([query["name"]], query.get("restarts") or 0)
        if (seconds := iso_seconds(query.get("watermark"))) is not None:
            watermark.add_metric([query["name"]], seconds)
        if (last_trade := iso_seconds(query.get("last_trade_at"))) is not None:
            quiet.add_metric([query["name"]], max(0.0, time.time() - last_trade))
        closed.add_metric([query["name"]], 1 if query.get("closed_when_quiet") else 0)
    families: list[Metric] = [end, committed, lag, unreachable, active, failed, restarts, watermark, quiet, closed]
    broker = snapshot.get("broker")
    if broker and broker.get("supervised"):  # the embedded broker this app started and keeps up
        broker_restarts = _counter("broker_restarts", "Restarts of the embedded Kafka broker after it ended by itself")
        broker_restarts.add_metric([], broker.get("restart_count") or 0)
        families.append(broker_restarts)
    producer = snapshot.get("producer")
    if producer:
        for name, doc, value in (("producer_sent", "Trades the simulation sent to Kafka", producer["sent"]),
                                 ("producer_failed", "Trades the simulation failed to send", producer["failed"])):
            family = _counter(name, doc)
            family.add_metric([], value)
            families.append(family)
        for name, doc, value in (("producer_rate", "The simulation's rate, trades per second", producer["rate"]),
                                 ("producer_enabled", "1 while the simulation is on", 1 if producer["enabled"] else 0)):
            gauge = _gauge(name, doc)
            gauge.add_metric([], value)
            families.append(gauge)
    return families


def table_figures(lake: Lake) -> dict[str, tuple[int, int, int]]:
    """Each existing table's (version, live bytes, live files)."""
    figures = {}
    for table in tables.ALL:
        opened = lake.open(table)
        if opened is None:
            continue
        actions = pa.table(opened.get_add_actions(flatten=True))
        size = pc.sum(actions["size_bytes"]).as_py() if actions.num_rows else 0
        figures[table.name] = (opened.version(), int(size or 0), actions.num_rows)
    return figures


def table_families(figures: dict[str, tuple[int, int, int]]) -> list[Metric]:
    version = _gauge("table_version", "The Delta table's latest version", ["table"])
    size = _gauge("table_size_bytes", "Bytes of the Delta table's live data files", ["table"])
    files = _gauge("table_files", "The Delta table's live data files", ["table"])
    for name, (v, b, f) in sorted(figures.items()):
        version.add_metric([name], v)
        size.add_metric([name], b)
        files.add_metric([name], f)
    return [version, size, files]


class RunCollector(Collector):
    """The gauges of a run, read at scrape time."""

    def __init__(self, status: Callable[[], dict], lake: Lake | None, tables_every_s: float = TABLES_EVERY_S):
        self.status = status
        self.lake = lake
        self.tables_every_s = tables_every_s
        self._tables: dict[str, tuple[int, int, int]] = {}
        self._tables_at = float("-inf")
        self._refreshing = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        yield from health_families(self.status())
        self._refresh_tables_now_and_then()
        yield from table_families(self._tables)

    def _refresh_tables_now_and_then(self) -> None:
        if self.lake is None or time.monotonic() - self._tables_at < self.tables_every_s:
            return
        if self._refreshing.acquire(blocking=False):
            self._tables_at = time.monotonic()
            threading.Thread(target=self._refresh_tables, name="metrics-tables", daemon=True).start()

    def _refresh_tables(self) -> None:
        try:
            assert self.lake is not None
            self._tables = table_figures(self.lake)
        except Exception as exc:  # noqa: BLE001 - a table being rewritten: the last figures stay
            log.warning("table figures for /metrics: %s", exc)
        finally:
            self._refreshing.release()


def exposition(status: Callable[[], dict], lake: Lake | None = None,
               pipeline: PipelineMetrics = METRICS) -> Scrape:
    """The scrape function of a run: its registry's text in Prometheus's format."""
    registry = CollectorRegistry()
    registry.register(pipeline.registry)  # a registry collects like a collector
    registry.register(RunCollector(status, lake))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)

    def scrape() -> tuple[bytes, str]:
        # The classic text format, which every Prometheus 2 reads (the names need no escaping).
        return generate_latest(registry), CONTENT_TYPE_PLAIN_0_0_4

    return scrape


class MeteredReconciler(Reconciler):
    """The page's reconciler, counting the windows its backfills set."""

    def backfill(self, window_starts: list[str]) -> BackfillReport:
        report = super().backfill(window_starts)
        METRICS.backfills.inc(len(report.backfilled))
        return report
