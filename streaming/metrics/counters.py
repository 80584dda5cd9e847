"""What the pipeline counts for Prometheus (GET /metrics): one process-wide PipelineMetrics that
the sink updates once per micro-batch, never once per trade, from figures it already has (row
counts, Delta file statistics, Arrow columns). The run's collector (streaming/run/metrics.py)
adds the gauges read from the health snapshot at scrape time.

Its own room, after the sink and before the lake: the sink updates it and the run exposes it, and
the sink may not import the run."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prometheus_client import CollectorRegistry, Counter, Histogram

from streaming.lake.files import DataFile
from streaming.lake.locations import arrow_filesystem
from streaming.medallion.silver import rules

PREFIX = "tradesummary"
OUTCOMES = ("on_time", "late_applied", "too_late", "duplicate", "quarantined")
BATCH_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_RECORDS = (0, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
FRESHNESS_SECONDS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0)


def outcomes(records: int, kept: int, too_late: int, late_applied: int, quarantined: int) -> dict[str, int]:
    """A batch's records by outcome. kept: the trades new to silver (too late or not);
    late_applied: those of them a correction added to a past window; a duplicate is a record
    bronze got that neither silver kept nor quarantine took (its trade_id was seen before)."""
    return {"on_time": max(kept - too_late - late_applied, 0), "late_applied": late_applied, "too_late": too_late,
            "duplicate": max(records - kept - quarantined, 0), "quarantined": quarantined}


def stat_time(text: str | None) -> datetime | None:
    """A time of Delta's file statistics ('2026-03-02T09:02:00.123Z') as UTC."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def oldest_arrival(files: Iterable[DataFile], column: str = "timestamp") -> datetime | None:
    """The earliest Kafka timestamp among bronze files, from their statistics (no file is read)."""
    times = [stat_time(json.loads(f.stats).get("minValues", {}).get(column)) for f in files if f.rows]
    return min((t for t in times if t is not None), default=None)


def single_reason(stats: str) -> str | None:
    """The one reason every row of a quarantine file has, when its statistics show it (the same
    least and greatest reason, no null); None when the file must be read."""
    parsed = json.loads(stats)
    low, high = parsed.get("minValues", {}).get("reason"), parsed.get("maxValues", {}).get("reason")
    return low if low is not None and low == high and not parsed.get("nullCount", {}).get("reason") else None


def _template(text: str) -> re.Pattern:
    """A rule's reason template ('price %s is over the limit of %.0f') as a pattern of its reasons."""
    return re.compile(".*".join(re.escape(piece) for piece in re.split(r"%[-.0-9]*[sdf]", text)), re.DOTALL)


# A quarantine reason's kind, the label: the reason's text names values (a side, a price), too
# many for a label. The silver rules' templates, then the guard's two sentences (silver/guard.py).
REASON_KINDS = tuple((name.lower(), _template(getattr(rules, name))) for name in (
    "EMPTY_VALUE", "TOO_LARGE", "NOT_UTF8", "NOT_AN_OBJECT", "MISSING_FIELD", "NULL_FIELD", "EMPTY_FIELD",
    "BAD_SIDE", "BAD_QUANTITY", "QUANTITY_OVER", "BAD_PRICE", "PRICE_OVER", "TIME_WITHOUT_ZONE", "INVALID_TIME",
    "MISSING_KEY")) + (("conflicting_trade", re.compile(r"trade_id .* is already a trade", re.DOTALL)),
                       ("event_time_jump", re.compile(r"event_time .* is more than .* ahead", re.DOTALL)))


def reason_kind(reason: str | None) -> str:
    """'side must be BUY or SELL, got HOLD' -> 'bad_side'; 'other' for a reason no rule gives."""
    if reason is None:
        return "unknown"
    return next((kind for kind, pattern in REASON_KINDS if pattern.fullmatch(reason) or
                 (kind in ("conflicting_trade", "event_time_jump") and pattern.match(reason))), "other")


def reason_counts(reasons: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """Records per reason kind (reason_kind)."""
    counts = pc.value_counts(reasons)
    return merge_counts(*({reason_kind(pair["values"]): int(pair["counts"])} for pair in counts.to_pylist()))


def merge_counts(*parts: Mapping[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for key, count in part.items():
            total[key] = total.get(key, 0) + count
    return total


def quarantine_reasons(files: Iterable[DataFile], location: str,
                       storage_options: Mapping[str, str] | None) -> dict[str, int]:
    """The quarantined records of a batch's files per reason: from the statistics, and reading
    the reason column only of a file that holds more than one."""
    parts: list[dict[str, int]] = []
    for file in files:
        if not file.rows:
            continue
        reason = single_reason(file.stats)
        if reason is not None:
            parts.append({reason_kind(reason): file.rows})
            continue
        filesystem, root = arrow_filesystem(location, storage_options)
        path = f"{root.rstrip('/')}/{file.path}" if root else file.path
        parts.append(reason_counts(pq.read_table(path, columns=["reason"], filesystem=filesystem)["reason"]))
    return merge_counts(*parts)


class PipelineMetrics:
    """The counters and histograms of the pipeline, in their own registry (the run's collector
    and the library's process collectors join them in the one exposed)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        name = f"{PREFIX}_"
        self.batch_seconds = Histogram(name + "batch_duration_seconds", "Time the sink took to write a micro-batch "
                                       "to every table", ["query"], buckets=BATCH_SECONDS, registry=registry)
        self.batch_records = Histogram(name + "batch_records", "Kafka records per micro-batch", ["query"],
                                       buckets=BATCH_RECORDS, registry=registry)
        self.freshness = Histogram(name + "freshness_seconds", "From the arrival in Kafka of a batch's oldest "
                                   "record to the batch's gold commit", buckets=FRESHNESS_SECONDS, registry=registry)
        self.records = Counter(name + "records_read", "Kafka records written to bronze", ["query"],
                               registry=registry)
        self.trades = Counter(name + "trades", "Records by outcome: on_time, late_applied (a correction), too_late, "
                              "duplicate, quarantined", ["outcome"], registry=registry)
        self.quarantined = Counter(name + "quarantined_records", "Records quarantined, by the kind of reason "
                                   "(the rule they fail)", ["reason"], registry=registry)
        self.corrections = Counter(name + "corrections", "Corrections of past windows written", registry=registry)
        self.backfills = Counter(name + "backfilled_windows", "Windows a backfill set from silver",
                                 registry=registry)
        self.replays = Counter(name + "replays", "Replays started (--replay-from)", registry=registry)
        self.read_again = Counter(name + "batches_read_again", "Batches whose records silver may have had: "
                                  "recounted from silver (a replay, a batch run again)", ["query"], registry=registry)
        self.data_loss = Counter(name + "data_loss_events", "Times Kafka no longer held records the pipeline had "
                                 "to read (a broker crash, retention)", registry=registry)
        self.records_lost = Counter(name + "records_lost", "Records Kafka removed before they were read",
                                    registry=registry)
        for outcome in OUTCOMES:  # every outcome shows from the start, at 0
            self.trades.labels(outcome)

    def batch_written(self, query: str, records: int, kept: int, too_late: int, reasons: Mapping[str, int],
                      oldest: datetime | None, read_again: bool = False) -> None:
        """One batch's counts, after its gold commit (the freshness ends now)."""
        late_applied, self._late_applied = self._late_applied, 0
        self.records.labels(query).inc(records)
        self.batch_records.labels(query).observe(records)
        counts = outcomes(records, kept, too_late, late_applied, sum(reasons.values()))
        for outcome, count in counts.items():
            if count:
                self.trades.labels(outcome).inc(count)
        for reason, count in reasons.items():
            self.quarantined.labels(reason).inc(count)
        if read_again:
            self.read_again.labels(query).inc()
        if oldest is not None:
            self.freshness.observe(max((datetime.now(timezone.utc) - oldest).total_seconds(), 0.0))

    _late_applied = 0  # the late trades of the corrections written since the last batch_written

    def corrected(self, corrections: pa.Table) -> pa.Table:
        """Counts the corrections a gold step writes (and the late trades in them); returns them."""
        if corrections.num_rows:
            self.corrections.inc(corrections.num_rows)
            self._late_applied += int(pc.sum(corrections["late_trades"]).as_py() or 0)
        return corrections

    def lost(self, records: int) -> None:
        self.data_loss.inc()
        if records:
            self.records_lost.inc(records)


METRICS = PipelineMetrics()
