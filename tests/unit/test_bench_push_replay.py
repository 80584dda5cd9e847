"""The push replay's pure parts (python -m bench.push_replay): its variants and the lines it prints."""

from bench.push_replay import VARIANTS, build_parser, report
from dashboard.panels import DRAWN_FROM_SNAPSHOT


def test_the_variants_are_no_panel_each_pushed_panel_alone_and_all_of_them():
    names = [drawing.name for drawing in DRAWN_FROM_SNAPSHOT]
    assert VARIANTS[0] == () and VARIANTS[-1] == tuple(names)
    assert [variant[0] for variant in VARIANTS[1:-1]] == names


def test_each_variant_is_reported_with_its_median_its_fewest_and_its_cost_over_the_push_alone():
    lines = report({"none": [20.0, 22.0, 30.0], "chart": [60.0, 64.0, 90.0]})
    assert lines == ["push-replay: none: p50 22 ms, min 20 ms",
                     "push-replay: chart: p50 64 ms, min 60 ms, +42 ms over none"]


def test_the_defaults_replay_fifteen_pushes_per_variant():
    args = build_parser().parse_args([])
    assert (args.pushes, args.rate) == (15, 1_000)
