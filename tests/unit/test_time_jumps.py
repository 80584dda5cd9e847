"""silver.time_jump_reasons: a trade far ahead of everything seen is quarantined, not counted."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa

from streaming.lake.tables import UTC_TIME
from streaming.medallion.silver.guard import split_time_jumps, time_jump_reasons, with_reasons

UTC = timezone.utc
DAY = timedelta(days=1)
SENT = datetime(2026, 3, 2, 12, tzinfo=UTC)


def trades(*rows) -> pa.Table:
    """(event_time, kafka_timestamp or None, partition, offset) per trade, in arrival order."""
    return pa.table({
        "trade_id": [f"t{i}" for i in range(len(rows))],
        "event_time": pa.array([r[0] for r in rows], UTC_TIME),
        "kafka_timestamp": pa.array([r[1] for r in rows], UTC_TIME),
        "topic": ["trades"] * len(rows),
        "partition": pa.array([r[2] for r in rows], pa.int32()),
        "offset": pa.array([r[3] for r in rows], pa.int64()),
    })


def jumped(table, latest, jump=DAY) -> list[bool]:
    return [reason is not None for reason in time_jump_reasons(table, latest, jump).to_pylist()]


def test_a_trade_years_ahead_of_the_latest_seen_and_of_its_kafka_time_jumps():
    far = datetime(2999, 1, 1, tzinfo=UTC)
    table = trades((SENT, SENT, 0, 1), (far, SENT, 0, 2), (SENT + timedelta(minutes=1), SENT, 0, 3))
    assert jumped(table, SENT - timedelta(minutes=5)) == [False, True, False]
    reason = time_jump_reasons(table, SENT, DAY)[1].as_py()
    assert "2999-01-01T00:00:00Z" in reason and "--max-event-time-jump" in reason


def test_within_the_span_of_the_latest_seen_or_of_the_kafka_time_is_no_jump():
    ahead_of_clock = SENT + 3 * DAY  # a fast simulated market: ahead of Kafka time, close to the latest seen
    after_weekend = SENT + 3 * DAY  # a feed back after a quiet weekend: far past the latest seen, but sent now
    assert jumped(trades((ahead_of_clock, SENT, 0, 1)), latest=SENT + 2.5 * DAY) == [False]
    assert jumped(trades((after_weekend, after_weekend, 0, 1)), latest=SENT) == [False]


def test_with_nothing_seen_the_first_trade_is_judged_against_its_kafka_timestamp_and_then_the_trades_before_it():
    table = trades((SENT + 2 * DAY, SENT, 0, 1), (SENT, SENT, 0, 2), (SENT + 0.5 * DAY, SENT, 0, 3),
                   (SENT + 1.2 * DAY, SENT, 0, 4))
    # the 3rd moves "seen" to +0.5 days, so the 4th (+1.2) is within a day of it
    assert jumped(table, latest=None) == [True, False, False, False]


def test_a_jumper_does_not_count_as_seen_so_a_second_one_at_the_same_time_jumps_too():
    far = datetime(2200, 1, 1, tzinfo=UTC)
    assert jumped(trades((far, SENT, 0, 1), (far, SENT, 0, 2)), latest=SENT) == [True, True]


def test_partitions_are_judged_in_offset_order_each_on_its_own():
    table = trades((SENT + 1.5 * DAY, SENT, 1, 8), (SENT + 0.8 * DAY, SENT, 1, 7), (SENT + 1.5 * DAY, SENT, 0, 3))
    assert jumped(table, latest=SENT) == [False, False, True]


def test_the_last_representable_times_do_not_overflow():
    last = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert jumped(trades((last, None, 0, 1)), latest=None, jump=timedelta(days=999_999)) == [False]
    assert jumped(trades((last, last, 0, 1)), latest=last) == [False]


def test_jumpers_leave_the_trades_and_their_records_get_the_reason():
    far = datetime(2999, 1, 1, tzinfo=UTC)
    new = trades((SENT, SENT, 0, 1), (far, SENT, 0, 2))
    kept, jumpers, reasons = split_time_jumps(new, SENT, DAY)
    assert kept["offset"].to_pylist() == [1] and jumpers["offset"].to_pylist() == [2]
    records = new.select(["topic", "partition", "offset"]).append_column(
        "reason", pa.array([None, None], pa.string()))
    marked = with_reasons(records, jumpers, reasons)
    assert marked["reason"][0].as_py() is None and "2999" in marked["reason"][1].as_py()
