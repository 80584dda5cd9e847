"""The quarantine panel: counts of bad records per reason (the shown day's and all time), the
newest ones with their raw value as escaped text, filterable by reason. Through Dash's own
callback endpoint, from a fixture silver/quarantine table."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.client import call, draw_quarantine, store_quarantine
from dashboard.dash_app import create_app
from dashboard.readers import QuarantineReader, shown_value
from streaming.lake import tables
from streaming.lake.store import Batch, Lake
from tests.unit.test_dashboard import WINDOWS, write_gold

UTC = timezone.utc
HOSTILE = "<img src=x onerror=alert(1)>"
SHOWN_DAY = datetime(2026, 3, 2, 12, tzinfo=UTC)  # the fixture gold's latest day
NOW = datetime(2026, 3, 3, 8, tzinfo=UTC)


def bad_record(offset: int, reason: str, value: bytes, kafka_time: datetime, seconds_ago: int) -> dict:
    return {"key": b"acct-1", "value": value, "topic": "trades", "partition": offset % 3, "offset": offset,
            "kafka_timestamp": kafka_time, "reason": reason, "ingested_at": NOW - timedelta(seconds=seconds_ago)}


def publish(data_dir, rows: list[dict], batch: int = 0) -> None:
    Lake(data_dir).publish(tables.QUARANTINE, pa.Table.from_pylist(rows, schema=tables.QUARANTINE.schema),
                           Batch("fixture", batch))


@pytest.fixture
def client(tmp_path):
    write_gold(tmp_path, WINDOWS)  # gold's latest day: 2026-03-02
    rows = [bad_record(i, "invalid JSON", b'{"trade_id": ' + str(i).encode(), SHOWN_DAY, 100 + i) for i in range(30)]
    rows += [bad_record(100 + i, "missing field: price", b'{"trade_id": "x"}', SHOWN_DAY - timedelta(days=1), 50 + i)
             for i in range(4)]
    rows += [bad_record(200, "invalid JSON", HOSTILE.encode(), SHOWN_DAY, 1),
             bad_record(201, "not UTF-8", b"\xff\xfe{\"side\": \"BUY\"}", SHOWN_DAY, 2)]
    publish(tmp_path, rows)
    return create_app(tmp_path).server.test_client()


def texts(component) -> list[str]:
    """Every text in a rendered component tree (as Dash sends it), depth first."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, (int, float)) or component is None:
        return []
    if isinstance(component, list):
        return [t for child in component for t in texts(child)]
    return texts(component.get("props", {}).get("children"))


def rows_of(table) -> list[list[str]]:
    """The body rows of a rendered feed table, each as its cells' text."""
    body = table["props"]["children"][1]["props"]["children"]
    return [[" ".join(texts(cell["props"]["children"])) for cell in tr["props"]["children"]] for tr in body]


def test_counts_per_reason_for_the_shown_day_and_of_all_time(client):
    view = store_quarantine(client)
    assert view["day"] == "2026-03-02"
    assert view["reasons"] == [{"reason": "invalid JSON", "day": 31, "total": 31},
                               {"reason": "missing field: price", "day": 0, "total": 4},
                               {"reason": "not UTF-8", "day": 1, "total": 1}]
    assert (view["day_total"], view["total"]) == (32, 36)
    drawn = draw_quarantine(client, view)
    assert rows_of(drawn[ids.QUARANTINE_COUNTS]["children"])[-1] == ["total", "32", "36"]


def test_counts_follow_the_day_picked(client):
    view = store_quarantine(client, day="2026-03-01")
    assert {r["reason"]: r["day"] for r in view["reasons"]} == {"invalid JSON": 0, "missing field: price": 4,
                                                                "not UTF-8": 0}


def test_the_newest_bad_records_come_first_and_are_at_most_25(client):
    rows = store_quarantine(client)["rows"]
    assert len(rows) == 25
    assert [(r["partition"], r["offset"]) for r in rows[:3]] == [(200 % 3, 200), (201 % 3, 201), (100 % 3, 100)]
    assert rows[0]["reason"] == "invalid JSON" and rows[0]["kafka_timestamp"].startswith("2026-03-02T12:00:00")


def test_the_reason_filter_lists_only_that_reasons_records(client):
    view = store_quarantine(client, reason="missing field: price")
    assert [r["offset"] for r in view["rows"]] == [100, 101, 102, 103]
    assert view["reason"] == "missing field: price"
    drawn = draw_quarantine(client, view)
    assert {o["value"] for o in drawn[ids.QUARANTINE_REASON]["options"]} == {
        "invalid JSON", "missing field: price", "not UTF-8"}
    assert all(row[1] == "missing field: price" for row in rows_of(drawn[ids.QUARANTINE_LIST]["children"]))


def test_a_reason_with_quotes_is_a_value_not_sql(client):
    view = store_quarantine(client, reason="x' OR '1'='1")
    assert view["rows"] == []


def test_a_hostile_value_is_rendered_as_text_never_as_html(client):
    drawn = draw_quarantine(client, store_quarantine(client))
    listing = drawn[ids.QUARANTINE_LIST]["children"]
    assert HOSTILE in texts(listing)
    dumped = json.dumps(drawn)
    assert "dangerouslySetInnerHTML" not in dumped and '"type": "Img"' not in dumped
    assert all(component["type"] in {"Table", "Thead", "Tbody", "Tr", "Th", "Td", "Code"}
               for component in walk(listing))


def walk(component):
    if isinstance(component, dict):
        yield component
        yield from walk(component.get("props", {}).get("children"))
    elif isinstance(component, list):
        for child in component:
            yield from walk(child)


def test_bytes_that_are_not_utf8_are_shown_escaped_with_a_binary_note(client):
    rows = store_quarantine(client, reason="not UTF-8")["rows"]
    assert rows[0]["value"] == '(binary, 17 bytes) \\xff\\xfe{"side": "BUY"}'


def test_a_long_value_is_cut_to_200_characters_and_control_characters_escaped():
    shown = shown_value(b"a\nb" + b"x" * 500)
    assert shown.startswith("a\\nbxx") and shown.endswith("… (503 bytes)")
    assert len(shown) == 200 + len("… (503 bytes)")
    assert shown_value(None) == "(no value)"


def test_quarantine_is_read_again_only_when_its_version_changes(tmp_path):
    publish(tmp_path, [bad_record(1, "invalid JSON", b"{", SHOWN_DAY, 1)])
    reader = QuarantineReader(Lake(tmp_path))
    counts, newest = reader.read()
    again = reader.read()
    assert again[0] is counts and again[1] is newest
    publish(tmp_path, [bad_record(2, "bad side", b"{}", SHOWN_DAY, 0)], batch=1)
    counts, newest = reader.read()
    assert sum(c["n"] for c in counts) == 2 and newest[0]["offset"] == 2


def test_without_a_quarantine_table_the_panel_says_nothing_was_quarantined(tmp_path):
    client = create_app(tmp_path).server.test_client()
    view = store_quarantine(client)
    assert view["reasons"] == [] and view["rows"] == []
    drawn = call(client, [f"{ids.QUARANTINE_COUNTS}.children", f"{ids.QUARANTINE_LIST}.children",
                          f"{ids.QUARANTINE_REASON}.options"], {f"{ids.QUARANTINE_STORE}.data": view})
    assert "No bad record" in " ".join(texts(drawn[ids.QUARANTINE_LIST]["children"]))
    assert drawn[ids.QUARANTINE_REASON]["options"] == []


def whole_read(data_dir, reason: str | None) -> tuple[dict, list[int]]:
    """The counts per (reason, day) and the newest offsets, from every row of the table."""
    rows = Lake(data_dir).read(tables.QUARANTINE).to_pylist()
    counts: dict = {}
    for r in rows:
        key = (r["reason"], r["kafka_timestamp"].strftime("%Y-%m-%d"))
        counts[key] = counts.get(key, 0) + 1
    shown = sorted((r for r in rows if reason is None or r["reason"] == reason),
                   key=lambda r: (r["ingested_at"], r["partition"], r["offset"]), reverse=True)[:25]
    return counts, [r["offset"] for r in shown]


def test_the_reader_following_new_files_agrees_with_a_whole_read_through_writes_and_compactions(tmp_path):
    import random
    rng, reader, offset = random.Random(7), QuarantineReader(Lake(tmp_path)), 0
    reasons = ["invalid JSON", "bad side", "missing trade_id"]
    for batch in range(45):  # the writer compacts every 20 versions
        rows = [bad_record(offset + i, rng.choice(reasons), b"{}", SHOWN_DAY - timedelta(days=rng.randint(0, 3)),
                           rng.randint(0, 10_000)) for i in range(rng.randint(1, 40))]
        offset += len(rows)
        publish(tmp_path, rows, batch)
        if batch % 7 == 0:
            Lake(tmp_path).open(tables.QUARANTINE).optimize.compact()
        reason = rng.choice([None, *reasons])
        counts, newest = reader.read(reason)
        expected_counts, expected_newest = whole_read(tmp_path, reason)
        assert {(c["reason"], c["day"]): c["n"] for c in counts} == expected_counts
        assert [r["offset"] for r in newest] == expected_newest
