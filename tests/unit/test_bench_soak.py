"""The soak's pure parts (python -m bench --soak): its 5-minute buckets, the A/B windows and
their ratios, its line, and its sections of the page, one per broker retention."""

import math
import re

from bench import soak, soak_report
from bench.report import KEPT_SECTIONS, kept_section
from bench.soak_report import Sample, SoakRun


def make_run(minutes: float = 60, retention: str | None = None, grow: float = 1.0) -> SoakRun:
    """A sample every 20 s; from half-way on every figure is `grow` times what it was."""
    run = SoakRun(minutes, 2000, retention, 20, soak_report.default_limit(retention),
                  first_start_s=20.0, restart_s=22.0, sigterm_s=3.2)
    for k in range(1, int(minutes * 3) + 1):
        t = k * 20.0
        f = grow if t >= minutes * 30 else 1.0
        run.samples.append(Sample(t, driver_rss_mb=900 * f + k % 3, broker_rss_mb=230 * f, broker_disk_mb=100 * f,
                                  data_disk_mb=400 * f, batch_ms=500.0, lag=1000 * f, trades=2000 * k,
                                  store_ms=10.0 * f, refresh_ms=50.0 * f))
        run.batches.append((t - 5, 400.0 * f))
        run.batches.append((t - 1, 600.0 * f))
    return run


def test_a_long_run_compares_minutes_3_to_8_with_its_last_5():
    assert soak_report.windows(60) == ((3.0, 8.0), (55.0, 60.0), False)
    assert soak_report.windows(20) == ((3.0, 8.0), (15.0, 20.0), False)
    assert soak_report.windows(13) == ((3.0, 8.0), (8.0, 13.0), False)


def test_a_short_run_compares_the_first_third_after_minute_1_with_the_last_third():
    assert soak_report.windows(4) == ((1.0, 2.0), (3.0, 4.0), True)
    (a0, a1), (b0, b1), short = soak_report.windows(3)
    assert short and (a0, b1) == (1.0, 3.0) and math.isclose(a1, 5 / 3) and math.isclose(b0, 7 / 3)
    assert soak_report.window_text((a0, a1)) == "1-1.7"


def test_samples_fall_into_5_minute_buckets_the_last_ending_with_the_run():
    assert soak_report.buckets(20) == [(0.0, 5.0), (5.0, 10.0), (10.0, 15.0), (15.0, 20.0)]
    assert soak_report.buckets(12) == [(0.0, 5.0), (5.0, 10.0), (10.0, 12.0)]
    assert soak_report.buckets(3) == [(0.0, 3.0)]
    run = make_run(20)
    run.samples.append(Sample(1201.5, 2000, 1, 1, 1))  # a sample a moment after the end: the last bucket's
    assert soak_report.figures(run, (15.0, 20.0))["driver_rss_mb"] == 2000
    assert soak_report.figures(run, (10.0, 15.0))["driver_rss_mb"] == 902  # [10, 15): the sample at 15:00 is not in it
    rows = soak_report.table(run)
    assert rows[0].startswith("| minutes | broker RSS peak (MiB) |") and len(rows) == 2 + 4
    assert rows[2].startswith("| 0-5 | 230 | 100 | 902 | 500 | 10.0 | 1000 | 50 | 400 |")
    assert rows[-1].startswith("| 15-20 |")


def test_peaks_and_medians_come_from_the_window_only_and_nan_when_it_is_empty():
    run = make_run(60, grow=1.5)
    a = soak_report.figures(run, (3.0, 8.0))
    b = soak_report.figures(run, (55.0, 60.0))
    assert (a["broker_rss_mb"], b["broker_rss_mb"]) == (230, 345)
    assert (a["batch_median_ms"], b["batch_median_ms"]) == (500, 750)  # every batch from the checkpoint
    assert (a["refresh_median_ms"], a["page_median_ms"], a["lag_median"]) == (10, 50, 1000)
    run.samples[9].store_ms = None  # a refresh that failed is left out, not counted as 0
    assert soak_report.figures(run, (3.0, 8.0))["refresh_median_ms"] == 10
    assert math.isnan(soak_report.figures(SoakRun(60, 1, None, 20, 1.2), (3.0, 8.0))["driver_rss_mb"])


def test_the_ratios_are_b_over_a_and_name_the_checked_ones_over_the_limit():
    flat = make_run(60)
    found = soak_report.ratios(flat)
    assert found["broker_rss_mb"] == 1.0 and math.isclose(found["restart_s"], 1.1)
    assert soak_report.over_limit(flat) == []
    grown = make_run(60, grow=1.25)
    assert soak_report.over_limit(grown) == ["broker_rss_mb", "broker_disk_mb", "driver_rss_mb", "batch_median_ms",
                                             "refresh_median_ms"]  # lag, page and the lake's disk are shown only
    retained = make_run(20, retention="5m", grow=1.25)
    assert retained.limit == 1.3 and soak_report.over_limit(retained) == []
    slow = make_run(60)
    slow.restart_s = 30.0
    assert soak_report.over_limit(slow) == ["restart_s"]
    unmeasured = make_run(60)
    unmeasured.batches = []  # never taken for a pass
    assert soak_report.over_limit(unmeasured) == ["batch_median_ms"]


def test_the_line_gives_each_figure_a_then_b_in_the_issues_order():
    run = make_run(60, grow=1.5)
    line = soak_report.summary_line(run)
    assert line == ("soak: minutes=60 rate=2000 retention=default broker_rss_mb=230/345 broker_disk_mb=100/150 "
                    "driver_rss_mb=902/1352 batch_median_ms=500/750 refresh_median_ms=10.0/15.0 lag_median=1000/1500 "
                    "restart_s=20.0/22.0 sigterm_s=3.2 page_median_ms=50/75 data_disk_mb=400/600")
    assert re.match(r"soak: minutes=\S+ rate=\S+ retention=\S+ broker_rss_mb=\S+/\S+ broker_disk_mb=\S+/\S+ "
                    r"driver_rss_mb=\S+/\S+ batch_median_ms=\S+/\S+ refresh_median_ms=\S+/\S+ lag_median=\S+/\S+ "
                    r"restart_s=\S+/\S+ sigterm_s=\S+", line)
    assert " retention=5m " in soak_report.summary_line(make_run(20, retention="5m"))
    ratios = soak_report.ratio_line(run)
    assert ratios.startswith("soak ratios: windows=3-8/55-60 broker_rss_mb=1.50 broker_disk_mb=1.50 "
                             "driver_rss_mb=1.50 ")
    assert ratios.endswith(" restart_s=1.10 page_median_ms=1.50 data_disk_mb=1.50 over_1.2=broker_rss_mb,"
                           "broker_disk_mb,driver_rss_mb,batch_median_ms,refresh_median_ms sigterm_under_10s=yes")
    run.sigterm_s = 12.0
    assert soak_report.ratio_line(run).endswith(" sigterm_under_10s=no")
    assert soak_report.ratio_line(make_run(3)).startswith("soak ratios: windows=1-1.7/2.3-3 ")


def test_each_retention_keeps_a_section_of_its_own_which_a_bench_run_carries_over(tmp_path):
    assert soak_report.HEADING in KEPT_SECTIONS
    default, retained = make_run(60), make_run(20, retention="5m")
    assert soak_report.title(default) == "## Soak: 60 minutes at 2,000 trades/s"
    assert soak_report.title(retained) == "## Soak: 20 minutes at 2,000 trades/s, broker retention 5m"
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nfigures\n\n## Long run: x\n\nlong\n")
    soak_report.write(tmp_path, soak_report.title(default) + "\n\nfirst\n", None)
    soak_report.write(tmp_path, soak_report.title(retained) + "\n\nretained\n", "5m")
    page.write_text(page.read_text() + "\n## Delta writers: y\n\nwriters\n")
    soak_report.write(tmp_path, "## Soak: 30 minutes at 2,000 trades/s\n\nsecond\n", None)
    text = page.read_text()
    assert text == ("# Benchmarks\n\nfigures\n\n## Long run: x\n\nlong\n\n## Soak: 30 minutes at 2,000 trades/s\n\n"
                    "second\n\n## Soak: 20 minutes at 2,000 trades/s, broker retention 5m\n\nretained\n\n"
                    "## Delta writers: y\n\nwriters\n")
    kept = kept_section(text)
    assert "second\n" in kept and "retained\n" in kept and "first" not in kept


def test_the_section_has_the_line_the_ratios_the_table_and_the_plot():
    run = make_run(20, retention="5m", grow=1.25)
    machine = {"cpu": "2 cores", "memory": "24 GiB", "python": "3.11", "spark": "4.0"}
    text = soak_report.section(run, ["--minutes", "20", "--broker-retention", "5m"], machine, "bench-soak-x.png")
    assert text.startswith("## Soak: 20 minutes at 2,000 trades/s, broker retention 5m\n\nMeasured by "
                           "`python -m bench --soak --minutes 20 --broker-retention 5m` on ")
    assert "\n## " not in text  # the next section ends it
    assert soak_report.summary_line(run) in text and soak_report.ratio_line(run) in text
    assert "| broker RSS, peak (MiB) | 230 | 288 | 1.25 | yes |" in text
    assert "| Kafka lag, median (records) | 1000 | 1250 | 1.25 | not held to it |" in text
    assert "| SIGTERM to exit (s), after the run | | 3.2 | | yes (< 10 s) |" in text
    assert "| 15-20 | 288 |" in text
    assert text.rstrip().endswith("![bench-soak-x.png](bench-soak-x.png)")
    short = soak_report.section(make_run(3), [], machine, None)
    assert "first third after minute 1" in short and "![" not in short
    assert soak_report.plot_name(None) == "bench-soak.png"
    assert soak_report.plot_name("5m") == "bench-soak-retention-5m.png"


def test_the_command_line_defaults_and_limit():
    args = soak.parse_args([])
    assert (args.minutes, args.rate, args.sample_seconds, args.broker_retention, args.limit, args.keep) == (
        60, 2000, 20, None, 1.2, False)
    assert soak.parse_args(["--broker-retention", "5m"]).limit == 1.3
    assert soak.parse_args(["--broker-retention", "5m", "--limit", "1.5"]).limit == 1.5
    assert soak.progress(make_run(3).samples[2], 180).startswith("soak 1:00/3:00: broker 230 MiB, 100 MiB on disk")
