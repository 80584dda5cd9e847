"""The benchmark runs end to end on a small load (its figures are not judged here: they go in
docs/benchmarks.md, never in timed assertions) and checks gold against the exact totals itself."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_benchmark_measures_every_figure_and_checks_gold(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--trades", "20000", "--batch-size", "10000",
         "--warmup-trades", "2000", "--freshness-seconds", "10", "--rate", "200", "--callback-runs", "5",
         "--idle-settle-seconds", "2", "--idle-seconds", "3", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"bench: throughput=[\d,]+ ratio_to_broker=[\d.]+ freshness_p95_s=[\d.]+ "
                        r"callback_p95_ms=[\d.]+ rss_mb=[\d,]+ pipeline_rss_mb=[\d,]+ broker_rss_mb=[\d,]+ "
                        r"freshness_p50_s=[\d.]+ freshness_p99_s=[\d.]+ cpu_per_trade_us=\d+ idle_cores=[\d.]+",
                        last), last
    report = (out / "benchmarks.md").read_text()
    assert "gold is then checked against the exact totals" in report and "Where the CPU went" in report
    assert "over 2,000 other trades (not counted)" in report and "| warm-up |" in report
    assert re.search(r"Per trade in the throughput phase: [\d.]+ us of CPU", report)
    assert "gold holds" not in result.stderr  # the bench's own exactness check passed


def test_the_long_run_measures_both_lakes_and_writes_its_section(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--long-run", "--seed-trades", "20000", "--seed-days", "2",
         "--seconds", "10", "--warm-seconds", "0", "--rate", "500", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line, ratios = result.stdout.strip().splitlines()[-2:]
    assert re.fullmatch(r"long-run: trades_seeded=20000 restart_s=[\d.]+/[\d.]+ driver_rss_mb=\d+/\d+ "
                        r"batch_p95_ms=\d+/\d+ freshness_p95_s=[\d.]+/[\d.]+ refresh_p95_ms=[\d.]+/[\d.]+ "
                        r"broker_rss_mb=\d+/\d+", line), line
    assert re.fullmatch(r"long-run ratios: restart_s=[\d.]+ driver_rss_mb=[\d.]+ batch_p95_ms=[\d.]+ "
                        r"freshness_p95_s=[\d.]+ refresh_p95_ms=[\d.]+ broker_rss_mb=[\d.]+ over_1.2=\S+",
                        ratios), ratios
    report = (out / "benchmarks.md").read_text()
    assert "## Long run: 20,000 trades over 2 days" in report and line in report
    assert (out / "bench-long-run.png").exists()
    assert "run.py exited" not in result.stderr and "Traceback" not in result.stderr


def test_the_live_page_bench_measures_a_browser_and_viewers_and_writes_its_section(tmp_path):
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "bench.live_page", "--browser-minutes", "0.3", "--heap-sample-seconds", "6",
         "--viewers", "1,2", "--modes", "push,poll", "--block-seconds", "3", "--settle-seconds", "4",
         "--warm-seconds", "0", "--rate", "300", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    conditions = [line for line in lines if line.startswith("live-page viewers: ")]
    assert [re.search(r"mode=(\w+) viewers=(\d+)", line).groups() for line in conditions] == [
        ("push", "1"), ("push", "2"), ("poll", "1"), ("poll", "2")]
    assert all(" errors=0" in line for line in conditions), conditions
    browser = next(line for line in lines if line.startswith("live-page browser: "))
    assert re.search(r"trades=[1-9]\d* unshown=0 trade_to_pixel_p50_s=[\d.]+ trade_to_pixel_p95_s=[\d.]+ ", browser)
    assert "page_errors=0" in browser, browser
    assert re.fullmatch(r"live-page: trade_to_pixel_p95_s=[\d.]+ heap_growth_mib=-?[\d.]+ push_update_p95_ms=[\d.]+ "
                        r"push_batch_ratio=[\d.]+ poll_update_p95_ms=[\d.]+ poll_batch_ratio=[\d.]+ pixel_p95_s=[\d.]+ "
                        r"missed=\S+ verdict=(pass|fail)", lines[-1]), lines[-1]
    report = (out / "benchmarks.md").read_text()
    assert "## Live page: 0.3 min in Chromium, 1, 2 viewers at 300 trades/s" in report and lines[-1] in report
    assert "Traceback" not in result.stderr
