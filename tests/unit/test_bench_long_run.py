"""The long run's pure parts (python -m bench --long-run): its line, the figures of a run, its
section of the page, and the seeding, on a tiny scale."""

import re
from datetime import datetime, time, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc

from bench import long_run
from bench.app_run import LakeRun
from bench.load import BENCH_DAY, PARTITIONS
from bench.report import KEPT_SECTIONS, kept_section
from bench.seed import SeedPlan, SeedTrades, parsed_rows, seed_lake
from streaming.config import Settings
from streaming.lake import tables
from streaming.lake.store import Lake
from streaming.medallion.gold import window_sums
from streaming.medallion.silver.arrow import silver_rows

EMPTY = {"restart_s": 13.62, "driver_rss_mb": 366.4, "batch_p95_ms": 142.2, "freshness_p95_s": 0.7012,
         "refresh_p95_ms": 20.04, "broker_rss_mb": 230.0}
FULL = {"restart_s": 25.2, "driver_rss_mb": 802.0, "batch_p95_ms": 147.0, "freshness_p95_s": 0.72,
        "refresh_p95_ms": 21.0, "broker_rss_mb": 231.0}
WALL_END = datetime(2026, 11, 25, 12, tzinfo=timezone.utc)


def test_the_line_gives_each_figure_empty_then_full_in_the_issues_order():
    line = long_run.summary_line(30_000_000, EMPTY, FULL)
    assert line == ("long-run: trades_seeded=30000000 restart_s=13.6/25.2 driver_rss_mb=366/802 "
                    "batch_p95_ms=142/147 freshness_p95_s=0.70/0.72 refresh_p95_ms=20.0/21.0 broker_rss_mb=230/231")
    assert re.fullmatch(r"long-run: trades_seeded=\d+ restart_s=[\d.]+/[\d.]+ driver_rss_mb=\d+/\d+ "
                        r"batch_p95_ms=\d+/\d+ freshness_p95_s=[\d.]+/[\d.]+ refresh_p95_ms=[\d.]+/[\d.]+ "
                        r"broker_rss_mb=\d+/\d+", line)


def test_the_ratios_are_full_over_empty_and_name_those_over_the_limit():
    line = long_run.ratio_line(EMPTY, FULL)
    assert line.startswith("long-run ratios: restart_s=1.85 driver_rss_mb=2.19 batch_p95_ms=1.03 ")
    assert line.endswith(" over_1.2=restart_s,driver_rss_mb")
    assert long_run.ratio_line(EMPTY, EMPTY).endswith(" over_1.2=none")
    # A figure that could not be measured is never taken for a pass.
    assert long_run.ratio_line({**EMPTY, "refresh_p95_ms": float("nan")}, FULL).endswith(
        "over_1.2=restart_s,driver_rss_mb,refresh_p95_ms")


def test_a_runs_figures_come_from_its_measured_window_only():
    run = LakeRun("full", seeded=10, restart_s=20.0, window=(30.0, 40.0))
    run.rss = [(25.0, {"driver": 900.0, "workers": 1.0, "broker": 300.0}),
               (31.0, {"driver": 700.0, "workers": 1.0, "broker": 200.0}),
               (39.0, {"driver": 750.0, "workers": 1.0, "broker": 210.0})]
    run.batches = [(20.0, 4000.0)] + [(30.0 + i / 10, float(i)) for i in range(100)]
    run.freshness = [(35.0, 0.5)]
    run.refresh_ms = [(29.0, 900.0), (32.0, 20.0)]
    found = long_run.figures(run)
    assert found == {"restart_s": 20.0, "driver_rss_mb": 750.0, "batch_p95_ms": 94.0, "freshness_p95_s": 0.5,
                     "refresh_p95_ms": 20.0, "broker_rss_mb": 210.0}
    assert run.peak("driver", window=False) == 900.0


def test_the_section_replaces_its_own_and_keeps_every_other(tmp_path):
    assert long_run.HEADING in KEPT_SECTIONS  # a normal bench run carries it over
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nfigures\n\n## Embedded broker: x\n\nsoak\n")
    long_run.write(tmp_path, f"{long_run.HEADING}1 trades\n\nfirst\n")
    long_run.write(tmp_path, f"{long_run.HEADING}2 trades\n\nsecond\n")
    text = page.read_text()
    assert text == "# Benchmarks\n\nfigures\n\n## Embedded broker: x\n\nsoak\n\n## Long run: 2 trades\n\nsecond\n"
    assert kept_section(text).endswith("## Long run: 2 trades\n\nsecond\n")
    page.write_text(text + "\n## Delta writers: y\n\nwriters\n")
    long_run.write(tmp_path, f"{long_run.HEADING}3 trades\n\nthird\n")
    assert page.read_text().endswith("## Long run: 3 trades\n\nthird\n\n## Delta writers: y\n\nwriters\n")


def test_seeded_trades_are_valid_unique_and_spread_over_the_days_before_the_live_one():
    plan = SeedPlan(3_000, 3, "trades", WALL_END)
    trades = SeedTrades(plan)
    records = pa.concat_tables([trades.records(0, 1_700), trades.records(1_700, 1_300)])
    rows = parsed_rows(records)  # raises unless every record is a valid trade
    silver = silver_rows(rows)
    assert silver.num_rows == 3_000
    assert pc.count_distinct(silver["trade_id"]).as_py() == 3_000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in silver["trade_id"].to_pylist()[:50])
    times = silver["event_time"].to_pylist()
    days = sorted({t.date() for t in times})
    assert days == [BENCH_DAY - timedelta(days=n) for n in (3, 2, 1)]
    assert all(time(9) <= t.time() < time(17) for t in times) and times == sorted(times)
    per_day = [sum(1 for t in times if t.date() == day) for day in days]
    assert per_day == [1_000, 1_000, 1_000]
    # Not the live topic's partitions; each partition's offsets run on from 0 across chunks.
    for p in range(PARTITIONS, 2 * PARTITIONS):
        offsets = sorted(o for o, q in zip(silver["offset"].to_pylist(), silver["partition"].to_pylist()) if q == p)
        assert offsets == list(range(len(offsets))) and offsets
    assert set(silver["topic"].to_pylist()) == {"trades"}
    kafka = silver["kafka_timestamp"].to_pylist()
    assert kafka == sorted(kafka) and WALL_END - timedelta(days=3) <= kafka[0] and kafka[-1] <= WALL_END
    assert all(i > k for i, k in zip(silver["ingested_at"].to_pylist(), kafka))
    assert set(silver["symbol"].to_pylist()) <= {"AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "META", "JPM", "TSLA"}


def test_a_tiny_seeded_lake_has_every_trade_in_bronze_silver_and_gold(tmp_path):
    result = seed_lake(tmp_path / "lake", SeedPlan(5_000, 2, "trades", WALL_END), chunk=2_000)
    lake = Lake(tmp_path / "lake")
    silver = lake.read(tables.SILVER)
    assert result.trades == silver.num_rows == lake.read(tables.BRONZE, ["offset"]).num_rows == 5_000
    assert pc.count_distinct(silver["trade_id"]).as_py() == 5_000
    gold = lake.read(tables.GOLD).sort_by("window_start")
    expected = window_sums(silver, Settings.window)
    assert gold.num_rows == result.windows == expected.num_rows
    assert gold["window_start"].to_pylist() == expected["window_start"].to_pylist()
    assert gold["trade_count"].to_pylist() == expected["trade_count"].to_pylist()
    assert abs(pc.sum(gold["buy_amount"]).as_py() - pc.sum(expected["buy_amount"]).as_py()) < 1e-6 * 5_000
    assert set(result.bytes) == {t.name for t in (tables.BRONZE, tables.SILVER, tables.GOLD, tables.SUMMARY_HISTORY)}
