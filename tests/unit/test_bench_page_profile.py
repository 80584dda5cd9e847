"""The page profile's pure parts (python -m bench.page_profile): DevTools' samples summed by
script, and the lines it prints per push."""

from bench.page_profile import by_script, report


def frame(name: str, url: str = "") -> dict:
    return {"functionName": name, "url": url, "lineNumber": 0, "columnNumber": 0, "scriptId": "0"}


PROFILE = {
    "nodes": [{"id": 1, "callFrame": frame("(root)")},
              {"id": 2, "callFrame": frame("(idle)")},
              {"id": 3, "callFrame": frame("e", "http://127.0.0.1:1/_dash-component-suites/dash/plotly.min.js?v=1")},
              {"id": 4, "callFrame": frame("f", "http://127.0.0.1:1/_dash-component-suites/dash/renderer.min.js?v=1")}],
    # each sample is charged the time until the next one
    "samples": [2, 3, 3, 4, 2], "timeDeltas": [0, 1000, 2000, 3000, 4000],
}


def test_the_samples_are_summed_by_the_script_running_in_milliseconds():
    assert by_script(PROFILE) == {"(idle)": 1.0, "plotly.min.js": 5.0, "renderer.min.js": 4.0}


def test_the_report_gives_the_busy_share_and_each_figure_per_push():
    pushed = [(1000.0, 10), (2000.0, 20)]
    seen = [(1000.1, 10), (2000.3, 20)]
    lines = report(2, PROFILE, {"RESET_COMPONENT_STATE": [6, 3.0]}, seen, pushed)
    assert lines[0].startswith("page-profile: 2 pushes in 2 s; main thread busy 90%, 4 ms a push")
    assert "page-profile script: plotly.min.js 2.5 ms a push" in lines
    assert "page-profile action: RESET_COMPONENT_STATE 3.0 a push, 0.50 ms each, 1.5 ms a push" in lines
