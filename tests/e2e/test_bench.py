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
         "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"bench: throughput=[\d,]+ ratio_to_broker=[\d.]+ freshness_p95_s=[\d.]+ "
                        r"callback_p95_ms=[\d.]+ rss_mb=[\d,]+ pipeline_rss_mb=[\d,]+ broker_rss_mb=[\d,]+", last), last
    report = (out / "benchmarks.md").read_text()
    assert "gold is then checked against the exact totals" in report and "Where the CPU went" in report
    assert "over 2,000 other trades (not counted)" in report and "| warm-up |" in report
    assert re.search(r"Per trade in the throughput phase: [\d.]+ us of CPU", report)
    assert "gold holds" not in result.stderr  # the bench's own exactness check passed
