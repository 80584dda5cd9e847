"""The live page bench's pure parts (python -m bench.live_page): its blocks, its figures per
condition, trade to pixel from the painted counts, the server-sent events a viewer reads, its
lines and verdict, its section of the page and its usage errors."""

import math
from pathlib import Path

import pytest

from bench import live_page as lp
from bench import live_page_figures as report
from bench.app_run import LakeRun
from bench.browser_page import BrowserRun
from bench.report import KEPT_SECTIONS, kept_section
from bench.viewers import server_events


def test_each_mode_takes_the_counts_up_and_down_again_after_a_settle():
    blocks = report.schedule(100.0, ["push", "poll"], [1, 10], settle_s=5, block_s=20)
    assert [(b.mode, b.viewers) for b in blocks] == [("push", 1), ("push", 10), ("push", 10), ("push", 1),
                                                     ("poll", 1), ("poll", 10), ("poll", 10), ("poll", 1)]
    assert (blocks[0].begin, blocks[0].end) == (105.0, 125.0)
    assert (blocks[1].begin, blocks[1].end) == (130.0, 150.0)  # its own settle first
    assert blocks[-1].end == 100.0 + 8 * 25


def page_run() -> report.PageRun:
    """Two conditions, push x1 and push x30, two blocks each, with known series."""
    run = LakeRun("live-page")
    result = report.PageRun(run, blocks=report.schedule(0.0, ["push"], [1, 30], settle_s=10, block_s=10))
    # Blocks: x1 [10, 20), x30 [30, 40), x30 [50, 60), x1 [70, 80).
    run.batches = [(t + 0.5, 100.0 if t < 20 or t >= 70 else 130.0) for t in range(80)]
    run.freshness = [(t + 0.2, 0.5) for t in range(80)]
    for block in result.blocks:
        result.updates[block] = [(block.begin + i, 40.0 * block.viewers ** 0.5) for i in range(10 * block.viewers)]
    result.errors[result.blocks[1]] = ["a viewer process sent nothing"]
    result.cpu_s = {block: {"driver": 10.0, "viewers": block.viewers / 10} for block in result.blocks}
    return result


def test_a_conditions_figures_come_from_its_own_blocks_only():
    result = page_run()
    assert result.conditions() == [("push", 1), ("push", 30)]
    one, many = result.figures("push", 1), result.figures("push", 30)
    assert one["batch_median_ms"] == 100.0 and many["batch_median_ms"] == 130.0  # the settles left out
    assert one["update_p95_ms"] == 40.0 and many["update_p95_ms"] == pytest.approx(40.0 * 30 ** 0.5)
    assert one["updates_per_viewer_s"] == pytest.approx(1.0) and many["errors"] == 1
    assert one["driver_cpu_per_s"] == pytest.approx(1.0) and many["viewers_cpu_per_s"] == pytest.approx(0.3)
    assert result.batch_ratio("push") == pytest.approx(1.3)
    assert math.isnan(result.batch_ratio("poll"))


def test_trade_to_pixel_counts_only_trades_produced_while_the_page_was_watched():
    sent = [float(t) for t in range(20)]  # trade k+1 sent at t = k
    painted = [(5.5, 6), (10.2, 11), (15.9, 16), (30.0, 20)]  # (t, trades counted)
    window = report.watched(painted, tail_s=5.0)
    assert window == (5.5, 25.0)
    found, unshown = report.latencies_within(sent, painted, window)
    # Sent after the first paint and by 25.0: trades sent at 6..19.
    assert len(found) == 14 and unshown == 0
    assert found[0] == pytest.approx(10.2 - 6.0) and found[-1] == pytest.approx(30.0 - 19.0)
    found, unshown = report.latencies_within(sent, painted[:3], window)
    assert len(found) == 10 and unshown == 4  # trades sent at 16..19 never painted
    assert report.watched(painted[:1]) is None and report.watched([(0.0, 1), (3.0, 2)], tail_s=5.0) is None


def test_a_viewer_reads_each_event_as_the_browser_would():
    class Stream:
        def iter_lines(self, chunk_size=None):
            yield from [b"retry: 1000", b"", b"id: 7-1", b"event: snapshot", b'data: {"a": 1}', b"",
                        b": keep-alive", b"", b"event: bye", b"data: ", b"", b"data: two", b"data: lines", b""]

    assert list(server_events(Stream())) == [("snapshot", '{"a": 1}'), ("bye", ""), ("message", "two\nlines")]


def with_browser(result: report.PageRun, growth: float, pixel_s: float) -> report.PageRun:
    result.browser = BrowserRun(heap=[(0.0, 10.0), (60.0, 10.0 + growth)], seen=[(0.0, 1), (1.0, 2)])
    result.stages = {"gold": [0.5] * 100, "push": [0.6] * 100, "pixel": [pixel_s] * 100}
    return result


def test_the_verdict_holds_every_measured_target_and_never_passes_a_missing_figure():
    result = with_browser(page_run(), growth=3.0, pixel_s=0.4)
    assert report.failed(result) == ["push_batch_ratio"]  # 1.3 > 1.2
    line = report.summary_line(result)
    assert line.startswith("live-page: trade_to_pixel_p95_s=0.40 heap_growth_mib=3.00 ")
    assert line.endswith(" pixel_p95_s=0.40 missed=push_batch_ratio verdict=fail")
    result.run.batches = [(t + 0.5, 100.0) for t in range(80)]
    assert report.summary_line(result).endswith("missed=none verdict=pass")
    assert report.failed(with_browser(result, growth=25.0, pixel_s=0.6)) == ["trade_to_pixel_p95_s",
                                                                             "heap_growth_mib"]
    result.browser.heap = result.browser.heap[:1]  # one sample: no growth measured
    assert "heap_growth_mib" in report.failed(result)
    no_browser = page_run()
    assert set(report.targets(no_browser)) == {"push_update_p95_ms", "push_batch_ratio"}


def test_the_lines_say_each_condition_then_the_browser_then_the_summary():
    found = report.lines(with_browser(page_run(), growth=1.0, pixel_s=0.5))
    assert found[0].startswith("live-page viewers: mode=push viewers=1 update_p50_ms=40 update_p95_ms=40 ")
    assert found[1].startswith("live-page viewers: mode=push viewers=30 ")
    assert found[2].startswith("live-page browser: open_min=1.00 trades=100 unshown=0 trade_to_pixel_p50_s=0.50")
    assert found[3].startswith("live-page: ")


def test_its_section_is_kept_by_the_main_bench(tmp_path: Path):
    args = lp.parse_args(["--viewers", "1,30", "--modes", "push", "--browser-minutes", "1"])
    text = report.section(args, with_browser(page_run(), growth=1.0, pixel_s=0.5))
    assert text.startswith(report.HEADING) and "\n## " not in text
    assert report.HEADING in KEPT_SECTIONS
    page = f"# Benchmarks\n\n## Machine\n\nx\n\n{text}\n## Embedded broker: y\n"
    assert text.strip() in kept_section(page)


@pytest.mark.parametrize("argv, error", [
    (["--viewers", "1,x"], "expected counts"),
    (["--viewers", "-1"], "0 or more"),
    (["--modes", "push,stream"], "expected push or poll"),
    (["--block-seconds", "0"], "--block-seconds must be positive"),
    (["--browser-minutes", "-1"], "--browser-minutes must be 0 or more"),
    (["--viewers", "0", "--browser-minutes", "0"], "nothing to measure"),
])
def test_a_wrong_flag_gets_a_usage_error(argv, error, capsys):
    with pytest.raises(SystemExit) as exit_:
        lp.parse_args(argv)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


def test_the_defaults_measure_what_the_issue_asks():
    args = lp.parse_args([])
    assert args.viewers == [1, 10, 30] and args.modes == ["push", "poll"] and args.browser_minutes == 30
