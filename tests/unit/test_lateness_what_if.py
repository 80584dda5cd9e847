"""A trade's lateness (how far behind its batch's front it arrived) and the what-if of the delay
(medallion/lateness.py): pure pandas, checked against counts done by hand and against
too_late_trades, the other formulation of the same rule."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from streaming.medallion.lateness import (
    CLOSED,
    LATENESS,
    LatenessTally,
    close_in_force,
    closes_of,
    greatest_lateness,
    judged_delay,
    quiet_close_rows,
    quiet_closer,
    reached_closes,
    stamped,
    too_late_counts,
    too_late_trades,
    trade_lateness,
    with_close,
)

T = lambda text: pd.Timestamp(text, tz="UTC")  # noqa: E731
EPOCH = T("1970-01-01")
DELAY = timedelta(minutes=30)
MINUTE_US = 60_000_000


def ledger(*rows) -> pd.DataFrame:
    """(query, batch, partition, start, end, front or None, watermark) rows."""
    frame = pd.DataFrame(rows, columns=["query_id", "batch_id", "partition", "start_offset", "end_offset", "front",
                                        "watermark"])
    frame["front"] = pd.to_datetime(frame["front"], utc=True)
    return frame.assign(topic="t")


def test_lateness_is_how_far_behind_the_front_of_its_batch_and_zero_for_a_trade_that_moved_it():
    trades = pd.DataFrame({"event_time": [T("2026-03-02 09:50"), T("2026-03-02 10:20"), T("2026-03-02 08:00"),
                                          T("2026-03-02 09:00"), T("2026-03-02 09:59")],
                           "topic": "t", "partition": [0, 0, 0, 1, 0], "offset": [5, 10, 11, 0, 40]})
    ranges = ledger(("q", 0, 0, 0, 10, None, EPOCH),  # before any front
                    ("q", 1, 0, 10, 12, T("2026-03-02 10:00"), T("2026-03-02 09:30")),
                    ("q", 1, 1, 0, 1, T("2026-03-02 10:00"), T("2026-03-02 09:30")))

    lateness = trade_lateness(trades, ranges, DELAY)

    assert lateness.tolist()[:4] == [0, 0, 120 * MINUTE_US, 60 * MINUTE_US]
    assert lateness.isna().tolist() == [False, False, False, False, True]  # offset 40: no batch's ledger yet


def test_a_ledger_row_written_before_fronts_were_takes_its_watermark_plus_the_delay():
    trades = pd.DataFrame({"event_time": [T("2026-03-02 09:00")], "topic": "t", "partition": [0], "offset": [3]})
    old_row = ledger(("q", 4, 0, 0, 10, None, T("2026-03-02 09:30")))

    assert trade_lateness(trades, old_row, DELAY).tolist() == [60 * MINUTE_US]


def test_a_record_read_under_two_checkpoints_takes_its_greatest_lateness():
    trades = pd.DataFrame({"event_time": [T("2026-03-02 09:00")], "topic": "t", "partition": [0], "offset": [3]})
    two = ledger(("live", 1, 0, 0, 10, T("2026-03-02 09:45"), T("2026-03-02 09:15")),
                 ("replay", 0, 0, 0, 10, None, EPOCH))

    assert trade_lateness(trades, two, DELAY).tolist() == [45 * MINUTE_US]


def test_too_late_counts_are_the_trades_at_or_beyond_each_delay():
    lateness = pd.Series([0, 60 * MINUTE_US, 30 * MINUTE_US, 29 * MINUTE_US, pd.NA], dtype="Int64")

    counts = too_late_counts(lateness, [timedelta(minutes=m) for m in (1, 29, 30, 45, 60, 61)])

    assert counts == [3, 3, 2, 1, 1, 0]


def test_at_the_delay_in_force_the_what_if_counts_exactly_the_too_late_trades():
    rng = np.random.default_rng(7)
    n, batches = 2_000, 40
    start = T("2026-03-02 09:00")
    event_time = start + pd.to_timedelta(np.sort(rng.integers(0, 3 * 3600, n)), unit="s") \
        - pd.to_timedelta(rng.choice([0, 0, 0, 600, 1800, 2400, 5400], n), unit="s")
    trades = pd.DataFrame({"trade_id": [f"t{i}" for i in range(n)], "event_time": event_time, "topic": "t",
                           "partition": 0, "offset": np.arange(n)})
    cuts = np.linspace(0, n, batches + 1, dtype=int)
    rows = []
    for b in range(batches):
        before = trades["event_time"].iloc[:cuts[b]]
        front = before.max() if cuts[b] else None
        watermark = EPOCH if front is None else max(EPOCH, front - pd.Timedelta(DELAY))
        rows.append(("q", b, 0, int(cuts[b]), int(cuts[b + 1]), front, watermark))
    ranges = ledger(*rows)

    [at_delay] = too_late_counts(trade_lateness(trades, ranges, DELAY), [DELAY])

    assert at_delay == len(too_late_trades(trades, ranges)) > 0


def test_a_queries_first_batch_holds_only_the_records_no_other_range_holds():
    # A replay's first batch is recorded from offset 0, over records the live query read first.
    trades = pd.DataFrame({"event_time": [T("2026-03-02 09:59"), T("2026-03-02 13:00")], "topic": "t",
                           "partition": [0, 0], "offset": [3, 11]})
    ranges = ledger(("live", 5, 0, 0, 10, T("2026-03-02 10:00"), T("2026-03-02 09:30")),
                    ("replay", 0, 0, 0, 12, T("2026-03-02 14:00"), T("2026-03-02 13:30")))

    assert trade_lateness(trades, ranges, DELAY).tolist() == [1 * MINUTE_US, 60 * MINUTE_US]


def test_a_front_near_the_epoch_leaves_nothing_out_as_the_sinks_watermark_does_not_go_below_it():
    trades = pd.DataFrame({"trade_id": ["old"], "event_time": [T("1969-12-31 23:20")], "topic": "t", "partition": [0],
                           "offset": [0]})
    ranges = ledger(("q", 1, 0, 0, 1, T("1970-01-01 00:10"), EPOCH))

    assert too_late_counts(trade_lateness(trades, ranges, DELAY), [DELAY]) == [0] == [len(too_late_trades(trades,
                                                                                                         ranges))]


def test_after_an_idle_close_a_trade_for_a_closed_window_is_too_late_at_any_delay():
    close = T("2026-03-02 16:59:58")  # the front when the input went quiet: the watermark moved up to it
    trades = pd.DataFrame({"trade_id": ["closed", "open", "before"],
                           "event_time": [T("2026-03-02 16:50"), T("2026-03-02 17:05"), T("2026-03-02 16:00")],
                           "topic": "t", "partition": [0, 0, 0], "offset": [10, 11, 12]})
    the_close = pd.DataFrame(quiet_close_rows("q", 2, {("t", 0): 10}, close.to_pydatetime()).to_pylist())
    batch = ledger(("q", 2, 0, 10, 13, close, close)).assign(closed_to=close)
    ranges = pd.concat([batch, the_close], ignore_index=True)

    lateness = trade_lateness(trades, ranges, DELAY)

    assert lateness.tolist() == [CLOSED, 0, CLOSED]  # 16:00 was 1 h behind too, but the close decides
    assert too_late_counts(lateness, [timedelta(minutes=1), DELAY, timedelta(hours=2)]) == [2, 2, 2]
    assert sorted(too_late_trades(trades, ranges)["trade_id"]) == ["before", "closed"]


def test_an_idle_closes_ledger_rows_are_empty_ranges_of_their_own_writer_at_the_ends_read():
    close = T("2026-03-02 16:59:58").to_pydatetime()
    rows = quiet_close_rows("q", 7, {("t", 1): 40, ("t", 0): 12}, close).to_pylist()

    assert [(r["query_id"], r["batch_id"], r["partition"], r["start_offset"], r["end_offset"]) for r in rows] == \
        [(quiet_closer("q"), 7, 0, 12, 12), (quiet_closer("q"), 7, 1, 40, 40)]
    assert {(r["watermark"], r["front"], r["closed_to"]) for r in rows} == {(close, close, close)}
    assert with_close(close - DELAY, close) == close and with_close(close, None) == close


def test_a_batch_judged_under_an_idle_close_trails_its_front_by_less_than_the_delay():
    front = T("2026-03-02 16:59:58").to_pydatetime()
    closed = pa.table({"watermark": [front], "front": [front]})
    ruled = pa.table({"watermark": [front - DELAY], "front": [front]})
    before_fronts = pa.table({"watermark": [front - DELAY], "front": pa.array([None], pa.timestamp("us", "UTC"))})

    assert judged_delay(closed, DELAY) == timedelta(0)  # windows past: those up to the front, not beyond
    assert judged_delay(ruled, DELAY) == DELAY
    assert judged_delay(before_fronts, DELAY) == DELAY


def test_a_close_is_in_force_for_the_batches_that_read_on_from_where_it_was_made():
    close = T("2026-03-02 16:59:58").to_pydatetime()
    later = T("2026-03-02 17:30:00").to_pydatetime()
    closes = closes_of(pa.concat_tables([quiet_close_rows("live", 7, {("t", 0): 12, ("t", 1): 40}, close),
                                         quiet_close_rows("live", 9, {("t", 0): 15, ("t", 1): 41}, later)]))

    # The live query's own: from the batch each came before (a batch run again comes before it).
    assert close_in_force(closes, "live", 7, {("t", 0): 12, ("t", 1): 40}) == close
    assert close_in_force(closes, "live", 6, {("t", 0): 11, ("t", 1): 40}) is None
    assert close_in_force(closes, "live", 9, {("t", 0): 3, ("t", 1): 3}) == later  # offsets gone back: still
    assert reached_closes(closes, "live", 8, {}) == (close, closes[1:])  # the other still ahead
    # A replay's (another query): once every partition is read up to where each was made.
    assert close_in_force(closes, "replay", 2, {("t", 0): 12, ("t", 1): 40}) == close
    assert close_in_force(closes, "replay", 1, {("t", 0): 11, ("t", 1): 40}) is None
    assert close_in_force(closes, "replay", 5, {("t", 0): 20, ("t", 1): 45}) == later
    assert close_in_force(closes, "replay", 0, {}) is None  # its first batch: where it starts is not known


# -- the lateness stored beside each trade (silver's lateness_us) against the ledger's ------------
def silver_batch(times: list[pd.Timestamp], first_offset: int = 0) -> pa.Table:
    n = len(times)
    return pa.table({"event_time": pa.array(times, pa.timestamp("us", tz="UTC")), "topic": ["t"] * n,
                     "partition": pa.array([0] * n, pa.int32()),
                     "offset": list(range(first_offset, first_offset + n)), LATENESS: pa.nulls(n, pa.int64())})


def test_the_lateness_a_batch_stamps_is_the_one_derived_from_its_ledger_rows():
    times = [T("2026-03-02 09:50"), T("2026-03-02 10:20"), T("2026-03-02 08:00"), T("2026-03-02 10:00"),
             T("1970-01-01 00:00:01"), T("1969-12-31 23:00")]
    cases = [(None, None), (T("2026-03-02 10:00"), None), (T("2026-03-02 10:00"), T("2026-03-02 09:55")),
             (T("1970-01-01 00:10"), None)]
    for batch, (front, closed_to) in enumerate(cases):
        trades = silver_batch(times, first_offset=10 * batch)
        ranges = ledger(("q", batch + 1, 0, 10 * batch, 10 * batch + len(times), front,
                         EPOCH if front is None else max(EPOCH, front - DELAY))).assign(closed_to=closed_to)
        ranges["closed_to"] = pd.to_datetime(ranges["closed_to"], utc=True)

        stored = stamped(trades, None if front is None else front.to_pydatetime(),
                         None if closed_to is None else closed_to.to_pydatetime())[LATENESS].to_pylist()

        assert stored == trade_lateness(trades.drop_columns([LATENESS]).to_pandas(), ranges, DELAY).tolist()
    assert stamped(silver_batch([T("1970-01-01 00:00:01")]), T("1970-01-01 00:10").to_pydatetime(),
                   None)[LATENESS].to_pylist() == [(10 * 60 - 1) * 1_000_000]


def test_a_record_read_again_keeps_the_greatest_lateness_silver_had_for_it():
    again = stamped(silver_batch([T("2026-03-02 09:00"), T("2026-03-02 09:50"), T("2026-03-02 09:55"),
                                  T("2026-03-02 09:58")]), T("2026-03-02 10:00").to_pydatetime(), None)
    again = again.append_column("trade_id", pa.array(["a", "b", "c", "d"]))
    before = pa.table({"trade_id": ["b", "x", "d"], "topic": ["t"] * 3, "partition": pa.array([0, 0, 0], pa.int32()),
                       "offset": [1, 2, 3], LATENESS: pa.array([90 * MINUTE_US, 60 * MINUTE_US, None], pa.int64())})

    # a: new; b: greater before; c: another trade had its offset (a broker that gave offsets out
    # again); d: before without a lateness, so judged from the ledger when read.
    assert greatest_lateness(again, before)[LATENESS].to_pylist() == [60 * MINUTE_US, 90 * MINUTE_US,
                                                                     5 * MINUTE_US, None]


def test_a_tally_counts_as_too_late_counts_and_adds_up_over_files():
    rng = np.random.default_rng(3)
    figures = np.concatenate([rng.integers(0, 3 * 60 * MINUTE_US, 5_000), [0] * 50, [CLOSED] * 3, [-1] * 7])
    points = (0, 1, MINUTE_US, 30 * MINUTE_US, 60 * MINUTE_US, CLOSED)

    whole = LatenessTally.of(figures, points)
    parts = LatenessTally.of(figures[:1234], points) + LatenessTally.of(figures[1234:], points)

    assert whole == parts
    assert list(whole.at_least) == [int(np.sum((figures >= p) & (figures != -1))) for p in points]
    assert (whole.judged, whole.not_judged, whole.too_late(CLOSED)) == (5_053, 7, 3)
