"""Pipeline health: one snapshot of the queries, the Kafka lag and the producer, sampled on a
thread so the dashboard, `/api/status` and the terminal log all read the same figures.

Lag per partition = the topic's end offset minus the offset a query has processed up to. Until a
query reports its first batch after a (re)start, it has processed up to where its checkpoint
resumes, with the watermark that point gives (resume_point): not from offset 0, with none.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable, Mapping

from confluent_kafka import KafkaException

from streaming.config import status_time
from streaming.kafka.clients import EndOffsets
from streaming.lake.checkpoints import QueryCheckpoint
from streaming.lake.lookups import idle_closes, latest_event_time_before, ledger_watermark
from streaming.lake.store import Lake
from streaming.medallion.lateness import CLOSER_PREFIX, EPOCH, close_in_force, closes_of

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a query resumes after a (re)start: its checkpoint's committed offsets and the
    watermark its next batch applies."""

    offsets: dict[str, int]  # "topic:partition" -> the next offset to process
    watermark: str | None  # as QueryStatus writes it; None before any trade


def newest_watermark(status: dict) -> datetime | None:
    """The newest watermark of a health snapshot's queries, as an aware UTC time; None before any."""
    marks = [datetime.fromisoformat(q["watermark"]) for q in status.get("queries", []) if q.get("watermark")]
    return max(marks).astimezone(timezone.utc) if marks else None


def watermark_after(latest: datetime | None, delay: timedelta) -> datetime | None:
    """The watermark after trades up to `latest` (the sink's rule): None until it passes the epoch."""
    return latest - delay if latest is not None and latest - delay > EPOCH else None


def resume_point(lake: Lake, checkpoint: QueryCheckpoint, delay: timedelta) -> Resume | None:
    """Where the query of this checkpoint resumes (None before it has committed a batch): the
    offsets its last committed batch read to, and the watermark over silver's trades before
    them (or an idle close's, when later), found as the sink finds it on its first batch after a
    restart."""
    if not checkpoint.started:
        return None
    last = checkpoint.last_committed_batch()
    entry = checkpoint.offset_log(last) if last is not None else None
    if last is None or entry is None or not entry.ends:
        return None
    bound = ledger_watermark(lake, checkpoint.query_id, last)  # the last batch's: at or below the latest
    latest = latest_event_time_before(lake, entry.ends, bound if bound and bound > EPOCH else None)
    closed = close_in_force(closes_of(idle_closes(lake, CLOSER_PREFIX)), checkpoint.query_id, last + 1, entry.ends)
    marks = (watermark_after(latest, delay), closed)
    return Resume({f"{t}:{p}": o for (t, p), o in entry.ends.items()},
                  status_time(max((m for m in marks if m is not None), default=None)))


def resumed(queries: list[dict], resumes: Mapping[str, Resume | None]) -> list[dict]:
    """The queries, each taken at its resume point for what it has not reported since it
    (re)started: no batch yet, processed up to its committed offsets ("resumed" True); no
    watermark yet (its sink sets one after a batch with trades, not after an idle trigger), the
    resume point's."""
    taken = []
    for query in queries:
        resume = resumes.get(query["name"])
        if resume is not None and not query["processed_offsets"]:
            query = {**query, "processed_offsets": dict(resume.offsets), "resumed": True}
        if resume is not None and not query["watermark"]:
            query = {**query, "watermark": resume.watermark}
        taken.append(query)
    return taken


def partition_lags(end_offsets: Mapping[str, int], queries: list[dict]) -> list[dict]:
    """Per "topic:partition": its end offset and each query's lag (end - processed)."""
    rows = []
    for key in sorted(end_offsets, key=lambda k: (k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1]))):
        end = end_offsets[key]
        lags = {q["name"]: max(end - q["processed_offsets"].get(key, 0), 0) for q in queries}
        rows.append({"partition": key, "end_offset": end, "lag": lags})
    return rows


# A query is catching up while its lag is more than this many seconds of its own work.
CATCH_UP_SECONDS = 3.0
MIN_CATCH_UP_RECORDS = 1_000


def catch_up(queries: list[dict], lags: Mapping[str, int], backlogs: Mapping[str, int]) -> tuple[dict, dict]:
    """The queries catching up on a backlog, each with its progress: (per query {"lag",
    "backlog", "done", "rate", "eta_s"}, the backlogs to carry to the next sample). A backlog is
    the largest lag since the query was last caught up; the rate is Spark's processed rows per
    second of its last batch."""
    progress, carried = {}, {}
    for query in queries:
        name, lag = query["name"], lags.get(query["name"], 0)
        rate = query.get("processed_rows_per_second") or 0.0
        if lag <= MIN_CATCH_UP_RECORDS or (rate > 0 and lag / rate <= CATCH_UP_SECONDS):
            continue  # caught up: its next backlog starts afresh
        backlog = max(lag, backlogs.get(name, 0))
        carried[name] = backlog
        progress[name] = {"lag": lag, "backlog": backlog, "done": backlog - lag, "rate": rate,
                          "eta_s": lag / rate if rate > 0 else None}
    return progress, carried


def catch_up_line(progress: dict) -> str:
    """'medallion 250,000 of 1,000,000 records (25%) at 24,500/s, about 31 s left; ...'"""
    return "; ".join(f"{name} {catch_up_figures(p)}" for name, p in progress.items())


def catch_up_figures(p: dict) -> str:
    """One query's catch-up: '250,000 of 1,000,000 records (25%) at 24,500/s, about 31 s left'."""
    eta = f", about {p['eta_s']:,.0f} s left" if p["eta_s"] is not None else ""
    return f"{p['done']:,} of {p['backlog']:,} records ({p['done'] / p['backlog']:.0%}) at {p['rate']:,.0f}/s{eta}"


def total_lag(partitions: list[dict]) -> dict[str, int]:
    totals: dict[str, int] = collections.defaultdict(int)
    for row in partitions:
        for name, lag in row["lag"].items():
            totals[name] += lag
    return dict(totals)


class HealthMonitor:
    """Samples every `interval_s`; keeps the total lag of the last `history_s` for a sparkline.
    resume: a query's name -> where it resumes (resume_point), asked once per (re)start of a
    query that has reported no batch or no watermark yet. broker: the embedded broker's
    supervision (BrokerSupervisor.status), when the run has one."""

    def __init__(self, queries: Callable[[], list], producer: Callable[[], DataclassInstance | None],
                 end_offsets: EndOffsets | None, interval_s: float = 2.0, history_s: float = 300.0,
                 resume: Callable[[str], Resume | None] | None = None,
                 broker: Callable[[], dict] | None = None):
        self._queries = queries
        self._broker = broker
        self._resume = resume
        self._resumes: dict[tuple[str, int], Resume | None] = {}  # by (query name, its restarts)
        self._producer = producer
        self._end_offsets = end_offsets
        self.interval_s = interval_s
        self._history: collections.deque = collections.deque(maxlen=max(int(history_s / interval_s), 2))
        self._latest: dict = {}
        self._backlogs: dict[str, int] = {}
        self._unreachable_since: str | None = None  # when Kafka's end offsets first failed, till they work
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)

    def start(self) -> "HealthMonitor":
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if self._end_offsets is not None:
            self._end_offsets.close()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - health must never take the app down
                log.warning("health sample failed: %s", exc)

    def sample(self) -> dict:
        queries = [dataclasses.asdict(q) for q in self._queries()]
        queries = resumed(queries, {q["name"]: self._resume_of(q) for q in queries
                                    if not q["processed_offsets"] or not q["watermark"]})
        producer = self._producer()
        kafka: dict = {"error": None, "partitions": [], "total_lag": {}}
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if self._end_offsets is not None:
            try:
                kafka["partitions"] = partition_lags(self._end_offsets.read(), queries)
                kafka["total_lag"] = total_lag(kafka["partitions"])
            except KafkaException as exc:
                kafka["error"] = str(exc)
        self._unreachable_since = unreachable_since(self._unreachable_since, kafka["error"], now)
        kafka["unreachable_since"] = self._unreachable_since
        snapshot = {
            "at": now,
            "queries": queries,
            "producer": dataclasses.asdict(producer) if producer is not None else None,
            "kafka": kafka,
            "broker": self._broker() if self._broker is not None else None,
        }
        with self._lock:
            snapshot["catch_up"], self._backlogs = catch_up(queries, kafka["total_lag"], self._backlogs)
            if kafka["total_lag"]:
                self._history.append({"at": now, "lag": max(kafka["total_lag"].values())})
            snapshot["lag_history"] = list(self._history)
            self._latest = snapshot
        return snapshot

    def _resume_of(self, query: dict) -> Resume | None:
        """The query's resume point, read once per (re)start (the checkpoint and the ledger)."""
        if self._resume is None:
            return None
        key = (query["name"], query.get("restarts", 0))
        if key not in self._resumes:
            try:
                self._resumes[key] = self._resume(query["name"])
            except Exception as exc:  # noqa: BLE001 - without it the lag counts from offset 0
                log.warning("where query '%s' resumes is unknown: %s", query["name"], exc)
                self._resumes[key] = None
        return self._resumes[key]

    def snapshot(self) -> dict:
        with self._lock:
            return self._latest or {"at": None, "queries": [], "producer": None, "catch_up": {}, "broker": None,
                                    "kafka": {"error": None, "partitions": [], "total_lag": {}}, "lag_history": []}


def unreachable_since(since: str | None, error: str | None, now: str) -> str | None:
    """Since when Kafka has been unreachable: kept from the first failed sample until one works."""
    return None if error is None else since or now


def kafka_trouble(snapshot: dict) -> str | None:
    """'Kafka unreachable since 10:31:05 UTC: <error>' while the health samples fail, else None."""
    kafka = snapshot.get("kafka") or {}
    since = kafka.get("unreachable_since")
    if not since:
        return None
    return f"Kafka unreachable since {since[11:19]} UTC: {(kafka.get('error') or '')[:200]}"


def quiet_close_line(query: dict) -> str | None:
    """'input quiet for 15 min: windows up to 16:59:58 closed' while an idle close holds."""
    closed = query.get("closed_when_quiet")
    if not closed:
        return None
    quiet = closed["quiet_s"]
    said = f"{quiet / 60:.0f} min" if quiet >= 60 else f"{quiet:.0f} s"
    return f"input quiet for {said}: windows up to {closed['windows_up_to'][11:19]} closed"


def status_line(snapshot: dict) -> str:
    """One terminal line: each query's batch, rates, duration, watermark, lag; the producer."""
    trouble = kafka_trouble(snapshot)
    parts = [trouble] if trouble else []
    lags = snapshot.get("kafka", {}).get("total_lag", {})
    for q in snapshot.get("queries", []):
        state = "FAILED" if q["error"] else "active" if q["active"] else "stopped"
        parts.append(f"{q['name']} {state}: batch {q['batch_id']}, {q['input_rows_per_second'] or 0:,.0f} in/s, "
                     f"{q['processed_rows_per_second'] or 0:,.0f} processed/s, {q['batch_duration_ms'] or 0} ms, "
                     f"watermark {q['watermark'] or '-'}, lag {lags.get(q['name'], '-')}"
                     + (f" ({quiet_close_line(q)})" if quiet_close_line(q) else ""))
    producer = snapshot.get("producer")
    if producer:
        parts.append(f"producer {'on' if producer['enabled'] else 'off'}: {producer['rate']:g}/s, "
                     f"sent {producer['sent']:,}, failed {producer['failed']:,}")
    return "; ".join(parts)

