"""The metrics scrape bench's pure parts (python -m bench.metrics_scrape): its blocks, the split of
a run's series into A and B, its lines and verdict, its section of the page and its usage errors."""

import argparse
import math
from pathlib import Path

import pytest

from bench import metrics_scrape as ms
from bench.app_run import LakeRun
from bench.report import KEPT_SECTIONS, kept_section

A = {"batch_median_ms": 200.0, "batch_p95_ms": 250.0, "freshness_p95_s": 0.70, "driver_cpu_s": 50.0}
B = {"batch_median_ms": 204.0, "batch_p95_ms": 300.0, "freshness_p95_s": 0.71, "driver_cpu_s": 51.0}


def test_blocks_alternate_in_pairs_so_a_trend_falls_on_both():
    schedule = ms.blocks(100.0, 60, 20)
    assert schedule == [(100.0, 120.0, "A"), (120.0, 140.0, "B"), (140.0, 160.0, "B"), (160.0, 180.0, "A"),
                        (180.0, 200.0, "A"), (200.0, 220.0, "B")]
    assert ms.blocks(0.0, 10, 20) == [(0.0, 20.0, "A"), (20.0, 40.0, "B")]  # at least one pair
    assert [name for *_, name in ms.blocks(0.0, 120, 20)].count("B") == 6


def test_a_series_splits_by_the_block_each_time_falls_in():
    schedule = ms.blocks(10.0, 40, 20)  # A [10, 30), B [30, 50), B [50, 70), A [70, 90)
    series = [(5.0, 1), (10.0, 2), (29.9, 3), (30.0, 4), (69.0, 5), (89.0, 6), (90.0, 7)]
    assert ms.split(schedule, series) == {"A": [2, 3, 6], "B": [4, 5]}
    assert ms.condition_at(schedule, 50.0) == "B" and ms.condition_at(schedule, 95.0) is None


def test_a_runs_figures_per_condition():
    run = LakeRun("metrics", window=(0.0, 40.0))
    run.batches = [(t + 0.5, 100.0 + t) for t in range(40)]
    run.freshness = [(t + 0.1, 0.5 if t < 20 else 0.6) for t in range(40)]
    result = ms.ScrapeRun(run, schedule=ms.blocks(0.0, 20, 20))
    result.cpu_s["A"]["driver"], result.cpu_s["B"]["driver"] = 10.0, 11.0
    found = result.figures()
    assert found["A"] == {"batch_median_ms": 109.0, "batch_p95_ms": 118.0, "freshness_p95_s": 0.5,
                          "driver_cpu_s": 10.0}
    assert found["B"]["batch_median_ms"] == 129.0 and found["B"]["freshness_p95_s"] == 0.6


def test_the_lines_give_a_then_b_and_the_ratios_b_over_a_with_the_verdict():
    assert ms.ab_line(A, B) == ("metrics-scrape A/B: batch_median_ms=200/204 batch_p95_ms=250/300 "
                                "freshness_p95_s=0.70/0.71 driver_cpu_s=50.0/51.0")
    assert ms.ratio_line(2.0, A, A) == ("metrics-scrape ratios: batch_median_ms=1.00 batch_p95_ms=1.00 "
                                        "freshness_p95_s=1.00 driver_cpu_s=1.00 scrape_p95_le_5ms=yes over_1.1=none "
                                        "verdict=pass")
    assert ms.ratio_line(2.0, A, B).endswith(" batch_p95_ms=1.20 freshness_p95_s=1.01 driver_cpu_s=1.02 "
                                             "scrape_p95_le_5ms=yes over_1.1=batch_p95_ms verdict=fail")
    assert ms.ratio_line(5.01, A, A).endswith("scrape_p95_le_5ms=no over_1.1=none verdict=fail")
    # CPU is shown, not held; a figure that could not be measured is never a pass.
    assert ms.verdict(1.0, ms.ratios(A, {**A, "driver_cpu_s": 99.0})) == (True, [])
    assert ms.verdict(1.0, ms.ratios(A, {**A, "freshness_p95_s": math.nan})) == (False, ["freshness_p95_s"])
    assert ms.verdict(math.nan, ms.ratios(A, A))[0] is False
    line = ms.scrape_line([1.0, 2.0, 3.0, 9.0], 12_345, 1.0)
    assert line == ("metrics-scrape: scrapes=4 interval_s=1 scrape_p50_ms=2.00 scrape_p95_ms=9.00 "
                    "scrape_max_ms=9.00 body_bytes=12345")


def test_the_section_says_the_target_and_its_verdict_and_is_kept_by_a_bench_run(tmp_path, monkeypatch):
    monkeypatch.setattr(ms, "machine", lambda: {"cpu": "2 cores", "memory": "1 GiB", "python": "3", "spark": "4"})
    run = LakeRun("metrics", window=(0.0, 40.0))
    run.batches = [(t + 0.5, 200.0) for t in range(40)]
    run.freshness = [(t + 0.1, 0.7) for t in range(40)]
    result = ms.ScrapeRun(run, schedule=ms.blocks(0.0, 20, 20), scrapes=[(20.0 + t, 2.0, 9_000) for t in range(20)],
                          first_scrape=(30.0, 8_000), parts_ms={"whole scrape (generate_latest)": 1.5})
    result.cpu_s["A"]["driver"] = result.cpu_s["B"]["driver"] = 10.0
    args = argparse.Namespace(argv=[], interval=1.0, rate=1000.0, warm_seconds=30.0, block_seconds=20.0,
                              seconds=20.0)
    text = ms.section(args, result)
    assert text.startswith(ms.HEADING) and "\n## " not in text
    assert "a scrape's p95 <= 5 ms" in text and "**Pass**." in text and "body 9,000 bytes" in text
    assert "verdict=pass" in text and "15x harsher" in text
    assert ms.HEADING in KEPT_SECTIONS
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nfigures\n\n## Soak: x\n\nsoak\n")
    ms.write_section(tmp_path, ms.HEADING, text)
    ms.write_section(tmp_path, ms.HEADING, text)
    assert page.read_text().count(ms.HEADING) == 1
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
    assert args.out == Path(ms.REPO_ROOT) / "docs"
