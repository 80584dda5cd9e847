"""Silver's guard: what a trade's own record cannot show. A trade_id's first copy wins (another
event time under its id is a conflict), and an event time far ahead of everything seen is a clock
error; either record goes to quarantine with its reason instead of silver."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.medallion.lateness import EPOCH
from streaming.medallion.silver.arrow import silver_rows
from streaming.rows import one_per_key


class EarlierTrades(Protocol):
    """What silver held before the batch, as far as the guard needs to know."""

    def first_copies(self, trades: pa.Table) -> pa.Table:
        """Silver's rows of these trades' ids, at any event time: trade_id, event_time, topic,
        partition, offset."""

    def same_trades(self, trades: pa.Table) -> pa.Table:
        """Silver's (trade_id, event_time) among these trades' event times."""


class NothingEarlier:
    """A task's view: it cannot read silver, so the driver checks the ids it kept afterwards."""

    def first_copies(self, trades: pa.Table) -> pa.Table:
        return trades.slice(0, 0)

    def same_trades(self, trades: pa.Table) -> pa.Table:
        return trades.slice(0, 0)


def screened(rows: pa.Table, latest_seen: datetime | None, max_jump: timedelta,
             earlier: EarlierTrades = NothingEarlier()) -> tuple[pa.Table, pa.Table]:
    """Parsed rows (arrow.parse_records + ingested_at) -> (the rows with a reason set on each
    record the guard quarantines, the trades new to silver that stay, in silver's columns).

    A trade_id's first copy wins, in the rows and then in silver: a copy with another event time
    conflicts. Of the first copies, those silver does not hold at their event time are new, and
    a new one far ahead of everything seen (`latest_seen`, then its partition) jumps."""
    valid = silver_rows(rows)
    first_copies = one_per_key(valid, ["trade_id"], keep="first")
    rejected: list[tuple[pa.Table, pa.Array]] = []
    if first_copies.num_rows < valid.num_rows:  # copies of a trade_id in the rows
        _, in_rows, in_rows_reasons = split_conflicts(valid, first_copies)
        rejected.append((in_rows, in_rows_reasons))
    first_copies, in_silver, in_silver_reasons = split_conflicts(first_copies, earlier.first_copies(first_copies))
    new = new_to_silver(first_copies, earlier.same_trades(first_copies))
    new, jumped, jump_reasons = split_time_jumps(new, latest_seen, max_jump)
    rejected = [(trades, reasons) for trades, reasons in (*rejected, (in_silver, in_silver_reasons),
                                                          (jumped, jump_reasons)) if trades.num_rows]
    if rejected:
        rows = with_reasons(rows, pa.concat_tables([trades for trades, _ in rejected]),
                            pa.concat_arrays([reasons for _, reasons in rejected]))
    return rows, new


def new_to_silver(trades: pa.Table, existing: pa.Table) -> pa.Table:
    """The trades (one per trade_id) whose (trade_id, event_time) is not among `existing`'s."""
    if existing.num_rows == 0 or trades.num_rows == 0:
        return trades
    key = lambda rows: pc.binary_join_element_wise(  # noqa: E731
        rows["trade_id"], pc.cast(pc.cast(rows["event_time"], pa.int64()), pa.string()), "\x00")
    return trades.filter(pc.invert(pc.is_in(key(trades), key(existing).combine_chunks())))


# -- event-time sanity: a trade far ahead of everything seen is quarantined -------------------------
_NO_TIME = np.iinfo(np.int64).min
_LAST_TIME = np.iinfo(np.int64).max


def _micros(moment: datetime | None) -> int:
    return _NO_TIME if moment is None else (moment - EPOCH) // timedelta(microseconds=1)


def _moment(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=int(micros))).isoformat().replace("+00:00", "Z")


def time_jump_reasons(trades: pa.Table, latest_seen: datetime | None, max_jump: timedelta) -> pa.Array:
    """Per trade: why its event time is implausibly far ahead, or null.

    A trade jumps when its event time is more than `max_jump` past both the latest event time
    seen before it and its own Kafka timestamp. Seen before it: `latest_seen` (the trades of
    earlier micro-batches), then the trades before it in its Kafka partition that did not jump
    themselves. With nothing seen yet, the Kafka timestamp alone is the reference; with it, a
    feed that resumes after a quiet weekend is not mistaken for a jump.
    trades: event_time, kafka_timestamp, partition, offset (at microsecond precision)."""
    n = trades.num_rows
    reasons: list[str | None] = [None] * n
    if n == 0:
        return pa.array(reasons, pa.string())
    jump = max_jump // timedelta(microseconds=1)
    event = pc.cast(trades["event_time"], pa.int64()).to_numpy(zero_copy_only=False)
    sent = pc.fill_null(pc.cast(trades["kafka_timestamp"], pa.int64()), _NO_TIME).to_numpy(zero_copy_only=False)
    latest = _micros(latest_seen)

    def bound(reference):  # reference + jump, short of overflowing; with no reference at all, no bound
        return np.where(reference == _NO_TIME, _LAST_TIME, np.minimum(reference, _LAST_TIME - jump) + jump)

    # Only a trade past the batch's own reference can jump: the rest never needs the sequential pass.
    if not (event > bound(np.maximum(latest, sent))).any():
        return pa.array(reasons, pa.string())
    partitions = trades["partition"].to_numpy(zero_copy_only=False)
    offsets = trades["offset"].to_numpy(zero_copy_only=False)
    for partition in np.unique(partitions[event > bound(np.maximum(latest, sent))]):
        rows = np.flatnonzero(partitions == partition)
        running = latest
        for i in rows[np.argsort(offsets[rows], kind="stable")]:
            reference = max(running, int(sent[i]))
            if event[i] > int(bound(reference)):
                seen = _moment(running) if running != _NO_TIME else "none yet"
                reasons[i] = (f"event_time {_moment(event[i])} is more than {max_jump} ahead of the latest event "
                              f"time seen ({seen}) and of its Kafka timestamp "
                              f"({_moment(sent[i]) if sent[i] != _NO_TIME else 'none'}): a clock error? "
                              "(--max-event-time-jump)")
            else:
                running = max(running, int(event[i]))
    return pa.array(reasons, pa.string())


def with_reasons(records: pa.Table, rejected: pa.Table, reasons: pa.Array) -> pa.Table:
    """arrow.parse_records() rows with `reasons` set on the records of `rejected` (matched by Kafka
    record), which then go to quarantine instead of silver."""
    if rejected.num_rows == 0:
        return records

    def record_key(rows):
        return pc.binary_join_element_wise(rows["topic"], pc.cast(rows["partition"], pa.string()),
                                           pc.cast(rows["offset"], pa.string()), "\x00")

    position = pc.index_in(record_key(records), value_set=record_key(rejected).combine_chunks())
    new_reason = pc.take(reasons, position)
    return records.set_column(records.schema.get_field_index("reason"), "reason",
                              pc.coalesce(records["reason"], new_reason))


def split_time_jumps(new: pa.Table, latest_seen: datetime | None,
                     max_jump: timedelta) -> tuple[pa.Table, pa.Table, pa.Array]:
    """Trades new to silver -> (those that stay, those that jump, the jumpers' reasons)."""
    reasons = time_jump_reasons(new, latest_seen, max_jump)
    jumped = pc.is_valid(reasons)
    if not pc.any(jumped).as_py():
        return new, new.slice(0, 0), reasons.slice(0, 0)
    return new.filter(pc.invert(jumped)), new.filter(jumped), reasons.filter(jumped)


# -- a known trade_id with another event time: the first copy wins, the other is quarantined ---------
def conflict_reasons(trades: pa.Table, first_copies: pa.Table) -> pa.Array:
    """Per trade: why it conflicts with the first copy of its trade_id, or null. A record with
    the trade_id of another Kafka record but another event time is not a redelivery: it would
    count the trade twice. first_copies: trade_id, event_time, topic, partition, offset."""
    reasons: list[str | None] = [None] * trades.num_rows
    if trades.num_rows == 0 or first_copies.num_rows == 0:
        return pa.array(reasons, pa.string())
    columns = ["trade_id", "event_time", "topic", "partition", "offset"]
    mine = trades.select(columns).append_column("row", pa.array(range(trades.num_rows), pa.int64()))
    first = first_copies.select(columns).rename_columns(["trade_id", *(f"first_{c}" for c in columns[1:])])
    pairs = mine.join(first, "trade_id", join_type="inner", use_threads=False)
    same_record = functools.reduce(pc.and_, [pc.equal(pairs[c], pairs[f"first_{c}"]) for c in columns[2:]])
    # The same record read again (a replay after a parser fix) replaces its own row: no conflict.
    hits = pairs.filter(pc.and_(pc.not_equal(pairs["event_time"], pairs["first_event_time"]), pc.invert(same_record)))
    for hit in hits.to_pylist():
        first_time, this_time = _moment(_micros(hit["first_event_time"])), _moment(_micros(hit["event_time"]))
        reasons[hit["row"]] = (f"trade_id {hit['trade_id']} is already a trade with event_time {first_time} "
                               f"({hit['first_topic']}/{hit['first_partition']} offset {hit['first_offset']}); "
                               f"this record says {this_time}: the first copy wins")
    return pa.array(reasons, pa.string())


def split_conflicts(trades: pa.Table, first_copies: pa.Table) -> tuple[pa.Table, pa.Table, pa.Array]:
    """Trades -> (those that stay, those that conflict with a first copy, their reasons)."""
    if first_copies.num_rows == 0:  # a task's share, with no silver to ask: nothing to compare
        return trades, trades.slice(0, 0), pa.array([], pa.string())
    reasons = conflict_reasons(trades, first_copies)
    conflicting = pc.is_valid(reasons)
    if not pc.any(conflicting).as_py():
        return trades, trades.slice(0, 0), reasons.slice(0, 0)
    return trades.filter(pc.invert(conflicting)), trades.filter(conflicting), reasons.filter(conflicting)
