"""bench.time_machine and the seed's history of gold: each window's changes end at its gold row,
in time order, with valid causes; the visits' cold and warm; and no to nonsense on the command line."""

import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench import seed, time_machine
from bench.report import KEPT_SECTIONS
from streaming.lake import tables
from streaming.lake.store import Lake
from streaming.medallion.gold import MEASURES
from streaming.medallion.history import CAUSES, LATE, ON_TIME, as_of, in_change_order

WALL_OPEN = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)
DAY = datetime(2026, 2, 2, tzinfo=timezone.utc)


def gold_windows(trade_counts: list[int]) -> pa.Table:
    """Gold rows of consecutive 15-minute windows from 09:00, with these trade counts."""
    starts = [DAY + timedelta(hours=9, minutes=15 * i) for i in range(len(trade_counts))]
    buy = [1000.0 * n + 0.37 for n in trade_counts]
    sell = [900.0 * n + 0.11 for n in trade_counts]
    return pa.table({
        "window_start": pa.array(starts, tables.UTC_TIME),
        "window_end": pa.array([s + timedelta(minutes=15) for s in starts], tables.UTC_TIME),
        "buy_amount": buy, "sell_amount": sell, "settlement_amount": [b - s for b, s in zip(buy, sell)],
        "trade_count": pa.array(trade_counts, pa.int64()),
    })


def by_window(history: pa.Table) -> dict:
    found: dict = {}
    for row in history.to_pylist():
        found.setdefault(row["window_start"], []).append(row)
    return found


@pytest.mark.parametrize("plan, on_time", [(seed.DESIGN_RATE, 30), (seed.REAL_TIME, 1800)])
def test_each_windows_changes_run_up_to_its_gold_row_in_time_order(plan, on_time):
    gold = gold_windows([5_000 + 7 * i for i in range(32)])
    history = seed.history_rows(gold, plan, WALL_OPEN, np.random.default_rng(3))
    assert history.schema == tables.SUMMARY_HISTORY.schema
    windows = by_window(history)
    assert len(windows) == 32
    for final in gold.to_pylist():
        changes = windows[final["window_start"]]
        assert {m: changes[-1][m] for m in MEASURES} == {m: final[m] for m in MEASURES}  # to the bit
        times = [c["changed_at"] for c in changes]
        assert times == sorted(times) and len(set(times)) == len(times)
        counts = [c["trade_count"] for c in changes]
        assert all(a < b for a, b in zip(counts, counts[1:]))  # every change changes the window
        assert all(a <= b for a, b in zip([c["buy_amount"] for c in changes], [c["buy_amount"] for c in changes][1:]))
        causes = [c["cause"] for c in changes]
        assert causes.count(ON_TIME) == on_time and set(causes) <= {ON_TIME, LATE} <= set(CAUSES)
        assert causes == sorted(causes, key=lambda c: c == LATE)  # late ones come after the window closed
        batches = [c["batch_id"] for c in changes]
        assert batches == sorted(batches) and len(set(batches)) == len(batches)
    # The day's market ran from its first batch at `plan.speed`: the changes follow one another over the day.
    first_changes = [windows[w][0]["changed_at"] for w in sorted(windows)]
    assert first_changes == sorted(first_changes) and first_changes[0] >= WALL_OPEN
    span = first_changes[-1] - first_changes[0]
    assert abs(span - timedelta(minutes=15 * 31 / plan.speed)) < timedelta(seconds=1)


def test_a_few_windows_change_late_and_a_window_of_few_trades_changes_fewer_times():
    gold = gold_windows([4_000] * 2_000 + [3])
    history = seed.history_rows(gold, seed.DESIGN_RATE, WALL_OPEN, np.random.default_rng(5))
    late = history.filter(pc.equal(history["cause"], LATE))
    late_windows = pc.count_distinct(late["window_start"]).as_py()
    assert 0.01 * 2_000 <= late_windows <= 0.03 * 2_000
    per_window = pc.value_counts(late["window_start"]).field("counts").to_pylist()
    assert 1 <= min(per_window) and max(per_window) <= 3
    small = by_window(history)[gold["window_start"][-1].as_py()]
    assert [c["trade_count"] for c in small] == [1, 2, 3][-len(small):] and len(small) <= 3
    # The keys are unique: history is APPEND_ONCE_PER_BATCH by (query_id, batch_id, window_start).
    keys = history.group_by(["query_id", "batch_id", "window_start"]).aggregate([])
    assert keys.num_rows == history.num_rows


def test_gold_rows_take_their_last_changes_time_and_count():
    gold = seed.gold_rows(gold_windows([100, 200]), 0, WALL_OPEN + timedelta(days=2))
    history = seed.history_rows(gold, seed.DESIGN_RATE, WALL_OPEN, np.random.default_rng(1))
    stamped = seed.stamped(gold, history)
    last = as_of(in_change_order(history), None)
    assert stamped["updated_at"].to_pylist() == last["changed_at"].to_pylist()
    assert stamped["revision"].to_pylist() == [len(v) for _, v in sorted(by_window(history).items())]
    assert stamped.select(["window_start", *MEASURES]).equals(gold.select(["window_start", *MEASURES]))


def test_a_seeded_lake_holds_the_history_of_every_gold_window_by_day(tmp_path):
    plan = seed.SeedPlan(6_000, 3, "trades", WALL_OPEN)
    result = seed.seed_lake(tmp_path / "lake", plan, chunk=2_500)
    lake = Lake(tmp_path / "lake")
    gold = lake.read(tables.GOLD).sort_by("window_start")
    history = in_change_order(lake.read(tables.SUMMARY_HISTORY))
    assert result.changes == history.num_rows > 30 * gold.num_rows * 0.9
    last = as_of(history, None)
    assert last.select(["window_start", *MEASURES]).equals(gold.select(["window_start", *MEASURES]))
    assert last["changed_at"].to_pylist() == gold["updated_at"].to_pylist()
    # A day's changes were made over that day's wall time, the days one after the other.
    for index in range(plan.days):
        day = plan.first_day + timedelta(days=index)
        made = history.filter(pc.equal(pc.cast(history["window_start"], pa.date32()), pa.scalar(day, pa.date32())))
        low, high = pc.min_max(made["changed_at"]).values()
        assert plan.wall_start(index) <= low.as_py() and high.as_py() < plan.wall_start(index) + timedelta(hours=1)
    opened = lake.open(tables.SUMMARY_HISTORY)
    assert opened is not None and len(opened.file_uris()) == plan.days  # a file a day
    assert set(opened.get_add_actions(flatten=True).column("partition.day").to_pylist()) == {
        plan.first_day + timedelta(days=i) for i in range(plan.days)}


def test_the_stress_days_visits_are_cold_and_the_lru_says_which_are():
    rng = random.Random(2)
    order = time_machine.visits([f"d{i}" for i in range(30)], 40, "stress", 5, rng)
    assert len(order) == 45 and order.count("stress") == 5
    assert all(a != b for a, b in zip(order, order[1:]))
    cold = time_machine.colds(order)
    assert all(c for day, c in zip(order, cold) if day == "stress")
    assert time_machine.colds(["a", "b", "a", "c", "d", "e", "f", "a"], kept=4) == [
        True, True, False, True, True, True, True, True]


def test_the_section_is_kept_by_a_normal_bench_run():
    assert time_machine.HEADING in KEPT_SECTIONS


@pytest.mark.parametrize("argv", [["--days", "0"], ["--requests", "-1"], ["--draws", "31"], ["--stress-trades", "-1"],
                                  ["--per-day", "x"], ["--trades", "0"], ["--per-day", "300"]])
def test_a_wrong_number_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        time_machine.main(argv)
    assert stopped.value.code == 2 and "error:" in capsys.readouterr().err
