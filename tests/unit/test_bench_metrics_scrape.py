"""The metrics scrape bench's pure parts (python -m bench.metrics_scrape): its blocks, the split of
a run's series into A and B, its lines and verdict, its section of the page (those four:
metrics_scrape_figures.py) and its usage errors; and its throughput bursts (bench/scrape_bursts.py):
their order, trades, clock, idle test, throughput and line, and their loop on a fake producer."""

import argparse
import json
import math
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bench import metrics_scrape as ms
from bench import metrics_scrape_figures as mf
from bench import scrape_bursts as sb
from bench.app_run import LakeRun
from bench.report import KEPT_SECTIONS, kept_section

A = {"batch_median_ms": 200.0, "batch_p95_ms": 250.0, "freshness_p95_s": 0.70, "driver_cpu_s": 50.0}
B = {"batch_median_ms": 204.0, "batch_p95_ms": 300.0, "freshness_p95_s": 0.71, "driver_cpu_s": 51.0}


def test_blocks_alternate_in_pairs_so_a_trend_falls_on_both():
    schedule = mf.blocks(100.0, 60, 20)
    assert schedule == [(100.0, 120.0, "A"), (120.0, 140.0, "B"), (140.0, 160.0, "B"), (160.0, 180.0, "A"),
                        (180.0, 200.0, "A"), (200.0, 220.0, "B")]
    assert mf.blocks(0.0, 10, 20) == [(0.0, 20.0, "A"), (20.0, 40.0, "B")]  # at least one pair
    assert [name for *_, name in mf.blocks(0.0, 120, 20)].count("B") == 6


def test_a_series_splits_by_the_block_each_time_falls_in():
    schedule = mf.blocks(10.0, 40, 20)  # A [10, 30), B [30, 50), B [50, 70), A [70, 90)
    series = [(5.0, 1), (10.0, 2), (29.9, 3), (30.0, 4), (69.0, 5), (89.0, 6), (90.0, 7)]
    assert mf.split(schedule, series) == {"A": [2, 3, 6], "B": [4, 5]}
    assert mf.condition_at(schedule, 50.0) == "B" and mf.condition_at(schedule, 95.0) is None


def test_a_runs_figures_per_condition():
    run = LakeRun("metrics", window=(0.0, 40.0))
    run.batches = [(t + 0.5, 100.0 + t) for t in range(40)]
    run.freshness = [(t + 0.1, 0.5 if t < 20 else 0.6) for t in range(40)]
    result = mf.ScrapeRun(run, schedule=mf.blocks(0.0, 20, 20))
    result.cpu_s["A"]["driver"], result.cpu_s["B"]["driver"] = 10.0, 11.0
    found = result.figures()
    assert found["A"] == {"batch_median_ms": 109.0, "batch_p95_ms": 118.0, "freshness_p95_s": 0.5,
                          "driver_cpu_s": 10.0}
    assert found["B"]["batch_median_ms"] == 129.0 and found["B"]["freshness_p95_s"] == 0.6


def test_the_lines_give_a_then_b_and_the_ratios_b_over_a_with_the_verdict():
    assert mf.ab_line(A, B) == ("metrics-scrape A/B: batch_median_ms=200/204 batch_p95_ms=250/300 "
                                "freshness_p95_s=0.70/0.71 driver_cpu_s=50.0/51.0")
    assert mf.ratio_line(2.0, A, A) == ("metrics-scrape ratios: batch_median_ms=1.00 batch_p95_ms=1.00 "
                                        "freshness_p95_s=1.00 driver_cpu_s=1.00 scrape_p95_le_5ms=yes over_1.1=none "
                                        "verdict=pass")
    assert mf.ratio_line(2.0, A, B).endswith(" batch_p95_ms=1.20 freshness_p95_s=1.01 driver_cpu_s=1.02 "
                                             "scrape_p95_le_5ms=yes over_1.1=batch_p95_ms verdict=fail")
    assert mf.ratio_line(5.01, A, A).endswith("scrape_p95_le_5ms=no over_1.1=none verdict=fail")
    # CPU is shown, not held; a figure that could not be measured is never a pass.
    assert mf.verdict(1.0, mf.ratios(A, {**A, "driver_cpu_s": 99.0})) == (True, [])
    assert mf.verdict(1.0, mf.ratios(A, {**A, "freshness_p95_s": math.nan})) == (False, ["freshness_p95_s"])
    assert mf.verdict(math.nan, mf.ratios(A, A))[0] is False
    line = mf.scrape_line([1.0, 2.0, 3.0, 9.0], 12_345, 1.0)
    assert line == ("metrics-scrape: scrapes=4 interval_s=1 scrape_p50_ms=2.00 scrape_p95_ms=9.00 "
                    "scrape_max_ms=9.00 body_bytes=12345")


def test_the_section_says_the_target_and_its_verdict_and_is_kept_by_a_bench_run(tmp_path, monkeypatch):
    monkeypatch.setattr(mf, "machine", lambda: {"cpu": "2 cores", "memory": "1 GiB", "python": "3", "spark": "4"})
    run = LakeRun("metrics", window=(0.0, 40.0))
    run.batches = [(t + 0.5, 200.0) for t in range(40)]
    run.freshness = [(t + 0.1, 0.7) for t in range(40)]
    result = mf.ScrapeRun(run, schedule=mf.blocks(0.0, 20, 20), scrapes=[(20.0 + t, 2.0, 9_000) for t in range(20)],
                          first_scrape=(30.0, 8_000), parts_ms={"whole scrape (generate_latest)": 1.5})
    result.cpu_s["A"]["driver"] = result.cpu_s["B"]["driver"] = 10.0
    args = argparse.Namespace(argv=[], interval=1.0, rate=1000.0, warm_seconds=30.0, block_seconds=20.0,
                              seconds=20.0)
    text = mf.section(args, result)
    assert text.startswith(mf.HEADING) and "\n## " not in text
    assert "a scrape's p95 <= 5 ms" in text and "**Pass**." in text and "body 9,000 bytes" in text
    assert "verdict=pass" in text and "15x harsher" in text
    assert mf.HEADING in KEPT_SECTIONS
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nfigures\n\n## Soak: x\n\nsoak\n")
    ms.write_section(tmp_path, mf.HEADING, text)
    ms.write_section(tmp_path, mf.HEADING, text)
    assert page.read_text().count(mf.HEADING) == 1
    assert kept_section(page.read_text()).endswith(text.rstrip("\n") + "\n")


@pytest.mark.parametrize("argv", [["--seconds", "0"], ["--interval", "-1"], ["--rate", "0"],
                                  ["--warm-seconds", "-1"], ["--seconds", "10", "--block-seconds", "20"],
                                  ["--block-seconds", "1", "--interval", "1"], ["--seconds", "x"]])
def test_a_wrong_number_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        ms.parse_args(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "error:" in err and "Traceback" not in err


def test_the_defaults_are_the_issues_run():
    args = ms.parse_args([])
    assert (args.seconds, args.interval, args.rate, args.block_seconds) == (120, 1.0, 1_000, 20)
    assert args.out == Path(__file__).resolve().parents[2] / "docs"


# -- the throughput bursts (bench/scrape_bursts.py) -------------------------------------------
def test_bursts_alternate_in_pairs_and_must_be_even():
    assert sb.schedule(4) == ["A", "B", "B", "A"]
    assert sb.schedule(6) == ["A", "B", "B", "A", "A", "B"] and sb.schedule(0) == []
    assert ms.parse_args(["--bursts", "0"]).bursts == 0
    args = ms.parse_args([])
    assert (args.bursts, args.burst_trades) == (4, 1_000_000)


@pytest.mark.parametrize("argv", [["--bursts", "3"], ["--bursts", "-2"], ["--burst-trades", "0"],
                                  ["--bursts", "x"]])
def test_a_wrong_burst_flag_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        ms.parse_args(argv)
    assert stopped.value.code == 2 and "error:" in capsys.readouterr().err


def test_a_bursts_throughput_is_until_gold_includes_all_of_it():
    seen = [(10.0, 500), (11.0, 600), (12.5, 1_499), (13.0, 1_500), (14.0, 1_700)]
    assert sb.absorbed_at(seen, 1_500) == 13.0 and sb.absorbed_at(seen, 1_701) is None
    assert sb.Burst("A", 1_000, seconds=sb.absorbed_at(seen, 500 + 1_000) - 11.0).rate == 500.0  # 1,000 in 2 s
    assert math.isnan(sb.Burst("A", 2_000).rate)  # never all in gold


def test_the_bursts_market_clock_is_the_steady_producers_and_stays_in_the_day():
    opening = datetime(2026, 3, 2, 9, 5, tzinfo=timezone.utc)
    assert sb.market_time(100.0, 60.0, 100.0) == opening
    assert sb.market_time(100.0, 60.0, 160.0) == opening + timedelta(hours=1)
    assert sb.market_time(100.0, 60.0, 100.0 + 9 * 60) == sb.LAST_START == datetime(2026, 3, 2, 16, 55,
                                                                                      tzinfo=timezone.utc)


def test_a_bursts_trades_are_valid_new_and_on_the_clock():
    start = datetime(2026, 3, 2, 13, 0, tzinfo=timezone.utc)
    burst = sb.make_burst(7, 1_000, start)
    trades = [json.loads(value) for _, value in burst]
    assert [key.decode() for key, _ in burst] == [t["account_id"] for t in trades]
    assert len({t["trade_id"] for t in trades}) == 1_000
    assert not {t["trade_id"] for t in trades} & {json.loads(v)["trade_id"] for _, v in sb.make_burst(8, 1_000, start)}
    times = [datetime.fromisoformat(t["event_time"].replace("Z", "+00:00")) for t in trades]
    assert times == sorted(times) and start <= times[0] and times[-1] < start + sb.BURST_SPAN
    assert all(t["side"] in ("BUY", "SELL") and t["quantity"] > 0 and t["price"] > 0 for t in trades)
    assert set(trades[0]) == {"trade_id", "account_id", "symbol", "side", "quantity", "price", "channel",
                              "event_time"}


def test_the_pipeline_is_idle_with_no_batch_in_flight_and_none_lately(tmp_path):
    assert sb.idle(tmp_path, 3.0, 1_000.0)  # no batch yet
    for folder, names in (("offsets", ("0", "1")), ("commits", ("0",))):
        (tmp_path / folder).mkdir()
        for name in names:
            (tmp_path / folder / name).write_text("")
    assert not sb.idle(tmp_path, 3.0, 1e12)  # batch 1 in flight
    (tmp_path / "commits" / "1").write_text("")
    os.utime(tmp_path / "commits" / "1", (1_000.0, 1_000.0))
    assert sb.last_batch(tmp_path) == (1, 1, 1_000.0)
    assert not sb.idle(tmp_path, 3.0, 1_002.0) and sb.idle(tmp_path, 3.0, 1_003.0)


def bursts_run(*rates_a_b: tuple[str, float]) -> sb.BurstRun:
    return sb.BurstRun([sb.Burst(name, 1_000, seconds=1_000 / rate, cpu_s={"driver": 0.01, "broker": 0.002})
                        for name, rate in rates_a_b])


def test_a_conditions_throughput_is_the_median_of_its_bursts():
    run = bursts_run(("warm-up", 50.0), ("A", 100.0), ("B", 95.0), ("B", 99.0), ("A", 104.0))
    assert run.rates() == pytest.approx({"A": 102.0, "B": 97.0})
    assert run.ratio() == pytest.approx(97 / 102)
    assert run.cpu_us_per_trade("A") == pytest.approx(12.0)
    unfinished = bursts_run(("A", 100.0), ("B", 95.0), ("B", 99.0))  # the last A never absorbed
    unfinished.bursts.append(sb.Burst("A", 1_000))
    assert math.isnan(unfinished.rates()["A"]) and math.isnan(unfinished.ratio())
    assert math.isnan(sb.BurstRun().ratio())


def test_throughput_is_held_the_other_way_up_in_the_verdict():
    same = mf.ratios(A, A)
    assert mf.verdict(1.0, same, 0.95) == (True, []) and mf.verdict(1.0, same, None) == (True, [])
    assert mf.verdict(1.0, same, 1 / 1.1) == (True, [])
    assert mf.verdict(1.0, same, 0.90) == (False, ["throughput"])
    assert mf.verdict(1.0, same, math.nan) == (False, ["throughput"])  # not measured: never a pass
    assert mf.ratio_line(2.0, A, A, 0.9).endswith("over_1.1=throughput verdict=fail")
    assert mf.ratio_line(2.0, A, A, 1.0) == mf.ratio_line(2.0, A, A)
    run = bursts_run(("warm-up", 50.0), ("A", 100_000.0), ("B", 95_000.0), ("B", 99_000.0), ("A", 104_000.0))
    run.scrapes = [(1.0, 3.0, 9_000), (2.0, 5.0, 9_000)]
    assert sb.throughput_line(run, mf.RATIO_LIMIT) == (
        "metrics-scrape throughput: bursts=4 burst_trades=1000 A=102000 B=97000 ratio=0.95 ratio_ge_0.91=yes "
        "burst_scrapes=2 burst_scrape_p95_ms=5.00")
    assert "ratio=nan ratio_ge_0.91=no" in sb.throughput_line(sb.BurstRun(), mf.RATIO_LIMIT)


class FakeProducer:
    """What run_bursts asks of a confluent_kafka Producer; gold (the `seen` series) follows at once."""

    def __init__(self):
        self.sent = 0

    def produce(self, topic, value, key):
        json.loads(value)
        self.sent += 1

    def poll(self, timeout):
        return 0

    def flush(self, timeout):
        return 0


def test_run_bursts_scrapes_during_the_b_bursts_only_and_times_each(monkeypatch, tmp_path):
    producer, scraped_at = FakeProducer(), []
    monkeypatch.setattr(sb, "new_producer", lambda bootstrap, **settings: producer)
    monkeypatch.setattr(sb, "IDLE_S", 0.0)

    class Scraping:
        def set(self):
            scraped_at.append(producer.sent)

        def clear(self):
            pass

    def wait(predicate, timeout_s, what):
        assert predicate(), what

    clock = lambda now: datetime(2026, 3, 2, 13, 0, tzinfo=timezone.utc)  # noqa: E731
    run = sb.run_bursts("127.0.0.1:1", "trades", 100, 4, 0.0, lambda: [(time.monotonic(), producer.sent)],
                        tmp_path, clock, Scraping(), lambda: {"driver": producer.sent / 1e4}, wait, lambda text: None)
    assert [b.name for b in run.bursts] == ["warm-up", "A", "B", "B", "A"] and run.error == ""
    assert scraped_at == [200, 300]  # before the B bursts' first sends, after the warm-up's and A's trades
    assert all(b.seconds > 0 and b.sent_s >= 0 and b.cpu_s == {"driver": pytest.approx(0.01)} for b in run.bursts)
    failing = sb.run_bursts("127.0.0.1:1", "trades", 100, 4, 0.0, lambda: [(0.0, 0)], tmp_path, clock, Scraping(),
                            dict, app_wait_failing, lambda text: None)
    assert failing.bursts == [] and "burst 0 in gold" in failing.error


def app_wait_failing(predicate, timeout_s, what):
    if not predicate():
        raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def test_the_section_has_the_bursts_line_row_and_what_limits_them(monkeypatch):
    monkeypatch.setattr(mf, "machine", lambda: {"cpu": "2 cores", "memory": "1 GiB", "python": "3", "spark": "4"})
    run = LakeRun("metrics", window=(0.0, 40.0))
    run.batches = [(t + 0.5, 200.0) for t in range(40)]
    run.freshness = [(t + 0.1, 0.7) for t in range(40)]
    result = mf.ScrapeRun(run, schedule=mf.blocks(0.0, 20, 20), scrapes=[(20.0 + t, 2.0, 9_000) for t in range(20)],
                          first_scrape=(30.0, 8_000))
    result.cpu_s["A"]["driver"] = result.cpu_s["B"]["driver"] = 10.0
    result.bursts = bursts_run(("warm-up", 50.0), ("A", 100_000.0), ("B", 80_000.0), ("B", 85_000.0),
                               ("A", 104_000.0))
    args = argparse.Namespace(argv=[], interval=1.0, rate=1000.0, warm_seconds=30.0, block_seconds=20.0,
                              seconds=20.0, bursts=4, burst_trades=1_000)
    text = mf.section(args, result)
    assert "\n## " not in text and "B/A >= 1/1.1 = 0.91" in text
    assert "**Fail**: scrape p95 2.00 ms, over 1.1: throughput." in text
    assert "metrics-scrape throughput: bursts=4 burst_trades=1000 A=102000 B=82500 ratio=0.81" in text
    assert "| throughput_trades_s (bursts) | 102,000 | 82,500 | 0.81 | **no** (A/B 1.24) |" in text
    assert "What limits the figure" in text and "- **Throughput**" in text
    args.bursts, result.bursts = 0, None
    assert "throughput" not in mf.section(args, result).lower()
