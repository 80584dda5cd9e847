"""The push: one publisher per app works the default view out once per change and streams it to
every page (GET /api/events). Real Delta tables through the Lake; a clock the tests move."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.client import store_quarantine
from dashboard.context import PageContext, PageReaders
from dashboard.dash_app import create_app, empty_status
from dashboard.push import EVENTS_PATH, FILTER_LOOK_S, Publisher, event_stream
from dashboard.readers import QuarantineReader, SilverFilterValues
from dashboard.refresh import is_default_view, needs_own_snapshot, view_snapshot
from streaming.lake import tables
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD
from tests.unit.test_dashboard_filters import publish_silver

UTC = timezone.utc
DAY = datetime(2026, 3, 2, tzinfo=UTC)


def write_window(lake: Lake, batch: int, hm: str, buy: float, day: datetime = DAY,
                 updated_at: datetime | None = None) -> None:
    """One gold window of `day` at HH:MM (a new one, or new values for it), as batch `batch`."""
    start = day.replace(hour=int(hm[:2]), minute=int(hm[3:]))
    lake.publish(GOLD, pa.table({
        "window_start": [start], "window_end": [start + timedelta(minutes=15)], "buy_amount": [buy],
        "sell_amount": [0.0], "settlement_amount": [buy], "trade_count": [1], "revision": [batch + 1],
        "updated_at": [updated_at or datetime.now(UTC)], "batch_id": [batch]}).cast(GOLD.schema),
        Batch("fixture", batch))


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Status:
    """The health snapshot the page would show; the tests change it."""

    def __init__(self):
        self.value = empty_status()

    def __call__(self) -> dict:
        return dict(self.value)


@pytest.fixture
def lake(tmp_path) -> Lake:
    lake = Lake(tmp_path)
    write_window(lake, 0, "09:00", 100.0)
    return lake


@pytest.fixture
def status() -> Status:
    return Status()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def publisher(lake, status, clock) -> Publisher:
    context = PageContext(PageReaders.of(lake), status, lake=lake, quarantine=QuarantineReader(lake))
    return Publisher(context, clock=clock)


def pushed(publisher: Publisher) -> dict:
    return json.loads(publisher.latest()[1])


def later(clock: Clock, seconds: float = 1.0) -> None:
    clock.now += seconds


def test_a_change_of_gold_gives_one_push_and_no_change_gives_none(publisher, lake, clock):
    assert publisher.check()
    assert [w["buy_amount"] for w in pushed(publisher)["windows"]] == [100.0]
    later(clock)
    assert not publisher.check()
    write_window(lake, 1, "09:15", 50.0)
    later(clock)
    assert publisher.check()
    assert [w["buy_amount"] for w in pushed(publisher)["windows"]] == [100.0, 50.0]
    later(clock)
    assert not publisher.check()
    assert publisher.latest()[0] == 2


def test_the_pushed_snapshot_is_what_the_server_works_out_for_the_default_view(publisher):
    publisher.check()
    expected = view_snapshot(publisher.context, None, None, None)
    extra = ("status", "quarantine", "quarantine_changes", "filter_changes", "push_id", "panels")
    shared = {key: value for key, value in pushed(publisher).items() if key not in extra}
    assert shared == json.loads(json.dumps(expected))
    assert pushed(publisher)["push_id"] == f"{publisher.epoch}-{publisher.latest()[0]}"  # the event's id
    assert pushed(publisher)["history_span"] == expected["history_span"]  # the time machine's slider


def test_each_new_gold_version_is_pushed_at_once(publisher, lake, clock):
    assert publisher.check()
    write_window(lake, 1, "09:15", 50.0)
    assert publisher.check()  # no wait: the push goes out at gold's commit
    assert [w["buy_amount"] for w in pushed(publisher)["windows"]] == [100.0, 50.0]


def test_with_a_gold_gap_the_versions_within_it_go_out_together(lake, status, clock):
    context = PageContext(PageReaders.of(lake), status, lake=lake, quarantine=QuarantineReader(lake))
    publisher = Publisher(context, clock=clock, gold_gap_s=0.2)
    assert publisher.check()
    write_window(lake, 1, "09:15", 50.0)
    later(clock, 0.1)
    assert not publisher.check()  # too soon after the last push: not even a look
    write_window(lake, 2, "09:30", 25.0)
    later(clock, 0.2)
    assert publisher.check()  # past the gap: gold's new version waits for no more
    assert publisher.latest()[0] == 2
    assert [w["buy_amount"] for w in pushed(publisher)["windows"]] == [100.0, 50.0, 25.0]


def test_a_gold_step_midway_is_pushed_once_it_is_done(publisher, lake, clock):
    assert publisher.check()
    midway, finish = threading.Event(), threading.Event()

    def gold_step() -> None:  # gold committed, its corrections and history still committing
        with lake.writing(*tables.GOLD_WRITES):
            write_window(lake, 1, "09:15", 50.0)
            midway.set()
            finish.wait(10)

    writer = threading.Thread(target=gold_step)
    writer.start()
    assert midway.wait(10)
    later(clock)
    assert not publisher.check()
    finish.set()
    writer.join(10)
    assert publisher.check()
    assert [w["buy_amount"] for w in pushed(publisher)["windows"]] == [100.0, 50.0]


def test_a_gold_step_is_pushed_once_it_settles_gold_s_view_though_its_ledger_is_still_to_come(publisher, lake,
                                                                                            clock):
    assert publisher.check()
    settled, finish = threading.Event(), threading.Event()

    def gold_step() -> None:  # gold, its corrections and history in; the ledger waits for silver
        with lake.writing(*tables.GOLD_WRITES) as held:
            write_window(lake, 1, "09:15", 50.0)
            held.settle(*tables.GOLD_VIEW)
            settled.set()
            finish.wait(10)

    writer = threading.Thread(target=gold_step)
    writer.start()
    try:
        assert settled.wait(10)
        later(clock)
        assert publisher.check()
        assert [w["buy_amount"] for w in pushed(publisher)["windows"]] == [100.0, 50.0]
    finally:
        finish.set()
        writer.join(10)


def lag(*levels: int) -> list[dict]:
    """A lag history: a sample every 2 s at these levels."""
    return [{"at": f"2026-03-02T10:00:{2 * i:02d}+00:00", "lag": level} for i, level in enumerate(levels)]


def test_a_status_change_alone_waits_for_the_gap_after_the_last_push(publisher, status, lake, clock):
    assert publisher.check()
    status.value = {**status.value, "lag_history": lag(5)}
    later(clock, 0.3)
    assert not publisher.check()  # gold as pushed: the status waits
    later(clock, 0.2)
    assert publisher.check()
    assert pushed(publisher)["status"]["lag_history"] == lag(5)
    status.value = {**status.value, "lag_history": lag(5, 3)}
    write_window(lake, 1, "09:15", 50.0)
    later(clock, 0.25)
    assert publisher.check()  # with gold: at once, and the status with it
    assert pushed(publisher)["status"]["lag_history"] == lag(5, 3)
    assert len(pushed(publisher)["windows"]) == 2


def test_an_idle_app_pushes_nothing_while_only_the_clock_moves(publisher, status, clock):
    status.value = {**status.value, "at": "2026-03-02T10:00:00+00:00", "lag_history": lag(0)}
    assert publisher.check()
    for second in range(1, 30):  # the health monitor's samples: a new time, the same lag
        status.value = {**status.value, "at": f"2026-03-02T10:00:{second:02d}+00:00",
                        "lag_history": lag(*[0] * (second + 1))}
        later(clock)
        assert not publisher.check()
    status.value = {**status.value, "lag_history": lag(*[0] * 30, 7)}
    later(clock)
    assert publisher.check()  # the lag moved: pushed, with the samples and time as they are now
    assert pushed(publisher)["status"]["lag_history"][-1]["lag"] == 7
    assert pushed(publisher)["status"]["at"] == "2026-03-02T10:00:29+00:00"


def test_a_polling_page_working_the_view_out_does_not_hold_gold_s_push_back(publisher, lake, clock):
    assert publisher.check()
    write_window(lake, 1, "09:15", 50.0)
    assert len(publisher.default_snapshot()["windows"]) == 2  # a page polling while its connection is down
    later(clock, 0.25)
    assert publisher.check()  # gold is new to the pages on the live connection
    assert len(pushed(publisher)["windows"]) == 2


def test_a_slow_page_skips_to_the_newest_push(publisher, lake, clock):
    publisher.check()
    seen, _ = publisher.wait_newer(0, 0)
    for batch, hm in ((1, "09:15"), (2, "09:30"), (3, "09:45")):
        write_window(lake, batch, hm, 10.0)
        later(clock)
        publisher.check()
    seq, payload = publisher.wait_newer(seen, 0)
    assert (seen, seq) == (1, 4)
    assert payload is not None and len(json.loads(payload)["windows"]) == 4
    assert publisher.wait_newer(seq, 0) == (seq, None)  # nothing newer: nothing sent


def test_many_pages_share_one_computation_per_change(publisher, lake, clock):
    publisher.check()
    pages = [publisher.wait_newer(0, 0) for _ in range(30)]
    assert len(set(pages)) == 1 and publisher.computations == 1
    write_window(lake, 1, "09:15", 50.0)
    later(clock)
    publisher.check()
    pages = [publisher.wait_newer(seq, 0) for seq, _ in pages]
    assert len(set(pages)) == 1 and pages[0][0] == 2 and publisher.computations == 2


def test_a_status_change_alone_is_pushed_without_working_the_data_out_again(publisher, status, clock):
    publisher.check()
    status.value = {**status.value, "lag_history": lag(12)}
    later(clock)
    assert publisher.check()
    assert pushed(publisher)["status"]["lag_history"] == lag(12)
    assert publisher.computations == 1


def test_a_change_that_leaves_the_default_view_as_it_was_is_not_pushed(publisher, lake, clock):
    earlier = DAY - timedelta(days=1)
    write_window(lake, 1, "09:00", 5.0, earlier, updated_at=earlier)
    publisher.check()
    later(clock)
    write_window(lake, 2, "09:00", 7.0, earlier, updated_at=earlier)  # gold changed, the newest day did not
    assert not publisher.check()
    assert publisher.computations == 2 and publisher.latest()[0] == 1


def test_a_new_bad_record_moves_the_quarantine_count_so_pages_refill_their_panel(publisher, lake, clock):
    publisher.check()
    before, push_id = pushed(publisher)["quarantine_changes"], pushed(publisher)["push_id"]
    lake.publish(tables.QUARANTINE, pa.Table.from_pylist([{
        "key": b"a", "value": b"{", "topic": "trades", "partition": 0, "offset": 1,
        "kafka_timestamp": DAY, "reason": "invalid JSON", "ingested_at": DAY}], schema=tables.QUARANTINE.schema),
        Batch("fixture", 0))
    later(clock)
    assert publisher.check()
    assert pushed(publisher)["quarantine_changes"] == before + 1
    assert publisher.computations == 1  # gold did not change
    assert pushed(publisher)["quarantine"]["total"] == 1
    # The snapshot itself did not change: its push_id stays, so pages leave their store as it is.
    assert pushed(publisher)["push_id"] == push_id and publisher.latest()[0] == 2


def test_a_new_channel_or_symbol_of_the_newest_day_moves_the_filter_count_at_the_next_read_and_nothing_else_does(
        lake, status, clock):
    context = PageContext(PageReaders.of(lake), status, lake=lake, filter_values=SilverFilterValues(lake))
    publisher = Publisher(context, clock=clock)
    publish_silver(lake.root, [("a", "AAPL", "BUY", 1.0, "web", "09:01")], batch_id=0)
    publisher.follow_filter_values()
    publisher.check()
    before = pushed(publisher)["filter_changes"]
    publish_silver(lake.root, [("b", "AAPL", "SELL", 2.0, "web", "09:02")], batch_id=1)  # nothing new to choose
    write_window(lake, 1, "09:15", 50.0)
    later(clock, FILTER_LOOK_S)
    publisher.follow_filter_values()
    assert publisher.check()
    assert pushed(publisher)["filter_changes"] == before
    publish_silver(lake.root, [("c", "NVDA", "BUY", 3.0, "kiosk", "09:03")], batch_id=2)
    later(clock)
    publisher.follow_filter_values()  # sooner than FILTER_LOOK_S after the last read: not read
    write_window(lake, 2, "09:30", 50.0)
    assert publisher.check() and pushed(publisher)["filter_changes"] == before
    later(clock, FILTER_LOOK_S)
    publisher.follow_filter_values()
    assert publisher.check()
    assert pushed(publisher)["filter_changes"] == before + 1


def test_the_pushed_quarantine_view_is_what_the_panel_s_callback_works_out_for_the_default_view(lake):
    lake.publish(tables.QUARANTINE, pa.Table.from_pylist([{
        "key": b"a", "value": b"{", "topic": "trades", "partition": 0, "offset": 1,
        "kafka_timestamp": DAY, "reason": "invalid JSON", "ingested_at": DAY}], schema=tables.QUARANTINE.schema),
        Batch("fixture", 0))
    app = create_app(lake)
    publisher = app.server.extensions["dashboard.push"]
    publisher.check()
    view = store_quarantine(app.server.test_client())
    assert pushed(publisher)["quarantine"] == view and view["day_total"] == 1


def test_the_stream_sends_the_latest_at_once_then_a_keep_alive_and_ends_when_the_publisher_stops(publisher):
    publisher.check()
    stream = event_stream(publisher, keep_alive_s=0.05)
    assert next(stream).startswith("retry: ")
    event = next(stream)
    assert event.startswith(f"id: {publisher.epoch}-1\nevent: snapshot\ndata: {{") and event.endswith("\n\n")
    assert json.loads(event.split("data: ", 1)[1]) == pushed(publisher)
    assert next(stream) == ": keep-alive\n\n"
    publisher.stop()
    assert list(stream) == []


def test_a_stream_says_bye_and_ends_after_its_time_so_no_page_holds_a_thread_for_ever(publisher):
    publisher.check()
    events = list(event_stream(publisher, stream_s=0.2, keep_alive_s=0.05))
    assert len(events) >= 3 and events[-1] == "event: bye\ndata: \n\n"


def test_a_page_reconnecting_to_the_same_server_is_not_sent_what_it_has(publisher, lake, clock):
    publisher.check()
    had = f"{publisher.epoch}-1"
    assert publisher.resume_after(had) == 1
    stream = event_stream(publisher, had, keep_alive_s=0.05)
    next(stream)
    assert next(stream) == ": keep-alive\n\n"
    write_window(lake, 1, "09:15", 50.0)
    later(clock)
    publisher.check()
    assert next(stream).startswith(f"id: {publisher.epoch}-2\n")


@pytest.mark.parametrize("last", [None, "", "0123abcd-1", "garbage", "{epoch}-99", "{epoch}-x"])
def test_a_page_from_before_a_restart_or_with_an_unknown_id_gets_the_latest_at_once(publisher, last):
    publisher.check()
    assert publisher.resume_after(None if last is None else last.format(epoch=publisher.epoch)) == 0


def test_the_publisher_thread_pushes_a_change_to_a_waiting_page(lake, status):
    context = PageContext(PageReaders.of(lake), status, lake=lake)
    publisher = Publisher(context, poll_s=0.02, min_gap_s=0.05)
    publisher.subscribe()
    try:
        first, payload = publisher.wait_newer(0, 10)
        assert first >= 1 and payload is not None
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(publisher.wait_newer(first, 10)))
        waiter.start()
        write_window(lake, 1, "09:15", 50.0)
        waiter.join(15)
        assert got and got[0][0] > first and len(json.loads(got[0][1])["windows"]) == 2
    finally:
        publisher.unsubscribe()
        publisher.stop()
    assert publisher.subscribers == 0


def test_api_events_streams_the_snapshot_behind_the_host_guard(lake):
    client = create_app(lake).server.test_client()
    assert client.get(EVENTS_PATH, headers={"Host": "evil.example"}).status_code == 403
    response = client.get(EVENTS_PATH, buffered=False)
    try:
        assert response.status_code == 200 and response.mimetype == "text/event-stream"
        chunks = iter(response.response)
        assert next(chunks).startswith(b"retry: ")
        snapshot = json.loads(next(chunks).decode().split("data: ", 1)[1])
        assert [w["buy_amount"] for w in snapshot["windows"]] == [100.0]
    finally:
        response.close()


def test_the_default_view_is_the_newest_day_without_filters():
    days = ["2026-03-02", "2026-03-01"]
    assert is_default_view(None, None, None, days)
    assert is_default_view("2026-03-02", None, None, days)
    assert is_default_view("1999-01-01", None, None, days)  # a day gold lacks shows the newest
    assert not is_default_view("2026-03-01", None, None, days)
    assert not is_default_view(None, "web", None, days) and not is_default_view(None, None, "AAPL", days)


def test_the_server_works_a_snapshot_out_for_a_view_of_its_own_or_on_the_tick_only():
    assert needs_own_snapshot(default_view=False, by_tick=False)
    assert needs_own_snapshot(default_view=True, by_tick=True)  # the fallback while the push is down
    assert not needs_own_snapshot(default_view=True, by_tick=False)  # the push fills the store


def update(client, changed: str, day=None) -> int:
    """The snapshot callback as the page calls it, with `changed` as the trigger: its HTTP status."""
    inputs = [{"id": ids.TICK, "property": "n_intervals", "value": 1},
              {"id": ids.DAY_PICKER, "property": "value", "value": day},
              {"id": ids.CHANNEL_FILTER, "property": "value", "value": None},
              {"id": ids.SYMBOL_FILTER, "property": "value", "value": None}]
    return client.post("/_dash-update-component", json={
        "output": f"..{ids.SNAPSHOT}.data...{ids.DRAW}.data..",
        "outputs": [{"id": ids.SNAPSHOT, "property": "data"}, {"id": ids.DRAW, "property": "data"}], "inputs": inputs,
        "state": [{"id": ids.DRAW, "property": "data", "value": 0}],
        "changedPropIds": [changed] if changed else []}).status_code


def test_a_page_on_the_default_view_leaves_its_store_to_the_push(lake):
    write_window(lake, 1, "09:00", 100.0, DAY - timedelta(days=1))
    client = create_app(lake).server.test_client()
    assert update(client, "") == 204  # the page's first call: the push brings the snapshot
    assert update(client, f"{ids.DAY_PICKER}.value") == 204
    assert update(client, f"{ids.TICK}.n_intervals") == 200  # the fallback tick
    assert update(client, f"{ids.DAY_PICKER}.value", day="2026-03-01") == 200  # a day of its own
