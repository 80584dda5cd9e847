"""Many viewers cost what one does: the panels drawn from the snapshot store work a push out once
for every page (panel_cache.PanelCache, context.drawn). A real app on a real Delta lake, called through
Dash's HTTP endpoint as the browser does (dashboard/client.py)."""

from __future__ import annotations

import copy
import json
import threading
from datetime import timedelta

import pytest

from dashboard import ids
from dashboard.client import chart_choices, draw_chart, from_store, outputs_of, store_snapshot
from dashboard.dash_app import create_app
from dashboard.panel_cache import PanelCache
from dashboard.panels import kpis, pipeline_health
from dashboard.push import Publisher
from streaming.lake.store import Lake
from tests.unit.test_push import DAY, write_window

PANELS = {"chart": 1, "kpis": 1, "feeds": 1, "health": 1, "slider": 1}
KPIS = outputs_of(kpis.DRAWING)
SLIDER = [f"{ids.TM_SLIDER}.min", f"{ids.TM_SLIDER}.max", f"{ids.TM_SLIDER}.marks", f"{ids.TM_SLIDER}.disabled"]
SLIDER_AT_REST = {f"{ids.TM_SLIDER}.min": 0, f"{ids.TM_SLIDER}.max": 0, f"{ids.TM_SLIDER}.disabled": True}


@pytest.fixture
def lake(tmp_path) -> Lake:
    lake = Lake(tmp_path)
    write_window(lake, 0, "09:00", 100.0)
    return lake


@pytest.fixture
def app(lake):
    return create_app(lake)


@pytest.fixture
def publisher(app) -> Publisher:
    return app.server.extensions["dashboard.push"]


def page_store(publisher: Publisher) -> dict:
    """What a page's snapshot store holds after push.js copied the latest push into it."""
    return json.loads(publisher.latest()[1])


def draw_page(client, snapshot: dict) -> dict:
    """Every callback drawn from the store, as a page runs them when the store changes."""
    outputs = {"chart": draw_chart(client, snapshot)}
    for name, wanted in (("kpis", KPIS),
                         ("feeds", [f"{ids.STATUS_LINE}.children", f"{ids.LATE_COUNTERS}.children",
                                    f"{ids.CORRECTIONS_FEED}.children", f"{ids.LATE_TRADES_LIST}.children"]),
                         ("health", outputs_of(pipeline_health.DRAWING))):
        outputs[name] = from_store(client, wanted, snapshot)
    outputs["slider"] = from_store(client, SLIDER, snapshot, state=SLIDER_AT_REST)
    return outputs


def test_thirty_pages_of_one_push_cost_one_drawing_of_each_panel(app, publisher):
    assert publisher.check()
    client = app.server.test_client()
    pages = [draw_page(client, page_store(publisher)) for _ in range(30)]
    assert dict(publisher.panels.computations) == PANELS
    assert all(page == pages[0] for page in pages)
    mine = {key: value for key, value in page_store(publisher).items() if key != "push_id"}
    assert draw_page(client, mine) == pages[0]  # what each page would have drawn itself


def test_pages_asking_at_once_wait_for_the_first_drawing_rather_than_each_drawing(app, publisher):
    publisher.check()
    snapshot, results = page_store(publisher), []

    def page():
        results.append(draw_page(app.server.test_client(), snapshot))

    threads = [threading.Thread(target=page) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 30 and all(result == results[0] for result in results)
    assert dict(publisher.panels.computations) == PANELS


def test_a_new_push_is_drawn_once_more_and_each_choice_of_a_page_once(app, publisher, lake):
    publisher.check()
    client = app.server.test_client()
    draw_page(client, page_store(publisher))
    write_window(lake, 1, "09:15", 50.0)
    publisher.min_gap_s = publisher.gold_gap_s = 0.0
    assert publisher.check()
    for _ in range(3):
        draw_page(client, page_store(publisher))
        draw_chart(client, page_store(publisher), first_reported=False)
    assert dict(publisher.panels.computations) == {**{name: 2 for name in PANELS}, "chart": 3}
    assert [w["buy_amount"] for w in page_store(publisher)["windows"]] == [100.0, 50.0]


def test_a_view_of_the_pages_own_is_drawn_from_what_it_uploads_and_not_kept(app, publisher, lake):
    write_window(lake, 1, "09:00", 7.0, DAY - timedelta(days=1))
    publisher.check()
    client = app.server.test_client()
    earlier = store_snapshot(client, day="2026-03-01")
    assert "push_id" not in earlier
    figure = draw_chart(client, earlier)
    draw_chart(client, earlier)
    assert figure["data"] and publisher.panels.computations["chart"] == 0


def test_a_store_naming_a_push_is_drawn_from_the_servers_copy_of_that_push(app, publisher):
    publisher.check()
    client = app.server.test_client()
    forged = copy.deepcopy(page_store(publisher))
    forged["kpis"]["trades"] = 999_999
    first = from_store(client, KPIS, forged)
    honest = from_store(client, KPIS, page_store(publisher))
    assert first == honest and "999,999" not in json.dumps(first)


@pytest.mark.parametrize("push_id", ["0123abcd-1", "{epoch}-99", 1, None])
def test_a_push_from_before_a_restart_or_unknown_is_drawn_as_uploaded(app, publisher, push_id):
    publisher.check()
    client = app.server.test_client()
    old = {**page_store(publisher), "push_id": push_id.format(epoch=publisher.epoch)
           if isinstance(push_id, str) else push_id}
    old["kpis"] = {**old["kpis"], "trades": 424_242}
    answer = from_store(client, KPIS, old)
    assert "424,242" in json.dumps(answer) and publisher.panels.computations["kpis"] == 0


def test_pages_polling_the_default_view_share_the_publishers_snapshot(app, publisher, lake):
    client = app.server.test_client()
    snapshots = [store_snapshot(client) for _ in range(10)]
    assert all(snapshot == snapshots[0] for snapshot in snapshots) and publisher.computations == 1
    write_window(lake, 1, "09:15", 50.0)  # seen by the next poll, whatever the push's gap
    assert [w["buy_amount"] for w in store_snapshot(client)["windows"]] == [100.0, 50.0]
    assert publisher.computations == 2


def test_the_cache_keeps_the_newest_entries_and_forgets_a_failure():
    cache, calls = PanelCache(size=2), []

    def drawing(value):
        calls.append(value)
        return value

    for key in ("a", "b", "a", "c", "a", "b"):  # "b" is the least recently used when "c" comes
        cache.outputs((key,), lambda key=key: drawing(key))
    assert calls == ["a", "b", "c", "b"]

    def failing():
        raise RuntimeError("read failed")

    with pytest.raises(RuntimeError):
        cache.outputs(("x",), failing)
    assert cache.outputs(("x",), lambda: "drawn") == "drawn"


def test_callers_meanwhile_wait_for_the_first_callers_drawing():
    cache, started, release, results = PanelCache(), threading.Event(), threading.Event(), []

    def slow():
        started.set()
        release.wait(10)
        return "figure"

    first = threading.Thread(target=lambda: results.append(cache.outputs(("chart", "p-1"), slow)))
    first.start()
    started.wait(10)
    others = [threading.Thread(target=lambda: results.append(cache.outputs(("chart", "p-1"), slow)))
              for _ in range(5)]
    for thread in others:
        thread.start()
    release.set()
    for thread in (first, *others):
        thread.join(10)
    assert results == ["figure"] * 6 and cache.computations["chart"] == 1


def test_the_panels_a_push_carries_are_what_the_pages_callbacks_draw_from_it(app, publisher, lake):
    # Two formulations of one drawing: the publisher's, which a page in the default view sets
    # with no request (push.js), and the server callback's, run for the same store.
    write_window(lake, 1, "09:15", 50.0)
    publisher.check()
    client = app.server.test_client()
    store = page_store(publisher)
    snapshot = {key: value for key, value in store.items() if key != "panels"}
    drawn = {**draw_page(client, snapshot),  # the chart with the layout's choices, as pushed
             "chart": from_store(client, [f"{ids.CHART}.figure"], snapshot, chart_choices()),
             "slider": from_store(client, SLIDER, snapshot, state={**SLIDER_AT_REST, f"{ids.TM_SLIDER}.min": -1})}
    for panel in store["panels"]:
        answer = drawn[panel["name"]]
        for component, prop, value in panel["props"]:
            assert answer[component][prop] == value, (panel["name"], component, prop)
    assert {panel["name"] for panel in store["panels"]} == set(PANELS)
