"""CSV export of the shown day: its windows with the day's running totals, and its corrections
(all of them, not only the feed's newest), through the page's download callbacks."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from dashboard import ids
from dashboard.client import store_snapshot
from dashboard.dash_app import create_app
from dashboard.panels.export import NOTHING_TO_EXPORT, WINDOW_HEADER, windows_csv
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS
from tests.unit.test_dashboard import WINDOWS, write_gold

UTC = timezone.utc


OUTPUTS = [f"{ids.DOWNLOAD_WINDOWS}.data", f"{ids.DOWNLOAD_CORRECTIONS}.data", f"{ids.EXPORT_MESSAGE}.children"]


def download(client, button: str, target: str, snapshot, past=None) -> dict:
    """Press one of the two export buttons (both are the callback's inputs, in their order);
    `past`: the time machine's snapshot at an instant (None: Live)."""
    payload = {"output": ".." + "...".join(OUTPUTS) + "..",
               "outputs": [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in OUTPUTS],
               "inputs": [{"id": b, "property": "n_clicks", "value": 1 if b == button else 0}
                          for b in (ids.EXPORT_WINDOWS, ids.EXPORT_CORRECTIONS)],
               "state": [{"id": ids.SNAPSHOT, "property": "data", "value": snapshot},
                         {"id": ids.AS_OF, "property": "data", "value": past}],
               "changedPropIds": [f"{button}.n_clicks"]}
    response = client.post("/_dash-update-component", json=payload)
    assert response.status_code == 200, response.data[:500]
    answer = response.get_json()["response"]
    other = ids.DOWNLOAD_CORRECTIONS if target == ids.DOWNLOAD_WINDOWS else ids.DOWNLOAD_WINDOWS
    assert other not in answer  # one file per press
    return answer


def rows(content: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(content)))


def write_corrections(data_dir, count: int) -> None:
    """`count` corrections of the 09:15 window on 2026-03-02, a minute apart, and one on 03-01."""
    at = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    corrections = []
    for i, start in enumerate([datetime(2026, 3, 2, 9, 15, tzinfo=UTC)] * count
                              + [datetime(2026, 3, 1, 16, 45, tzinfo=UTC)]):
        corrections.append({
            "window_start": start, "window_end": start + timedelta(minutes=15),
            "buy_amount_before": 100.0 + i, "buy_amount_after": 101.0 + i, "sell_amount_before": 700.0,
            "sell_amount_after": 700.0, "settlement_amount_before": -600.0 + i, "settlement_amount_after": -599.0 + i,
            "trade_count_before": 2 + i, "trade_count_after": 3 + i, "late_trades": 1,
            "corrected_at": at + timedelta(minutes=i), "watermark": at, "batch_id": i, "query_id": "q"})
    Lake(data_dir).publish(CORRECTIONS, pa.Table.from_pylist(corrections, schema=CORRECTIONS.schema),
                           Batch("fixture", 0))


def test_windows_csv_has_the_header_the_windows_and_the_days_running_totals(tmp_path):
    write_gold(tmp_path, WINDOWS)
    client = create_app(tmp_path).server.test_client()
    answer = download(client, ids.EXPORT_WINDOWS, ids.DOWNLOAD_WINDOWS, store_snapshot(client))
    sent = answer[ids.DOWNLOAD_WINDOWS]["data"]
    assert sent["filename"] == "trade-summary-2026-03-02-windows.csv" and sent["type"] == "text/csv"
    table = rows(sent["content"])
    assert table[0] == WINDOW_HEADER == ["window_start", "window_end", "buy", "sell", "settlement", "trade_count",
                                         "revision", "running_buy", "running_sell", "running_settlement", "final"]
    assert [r[0] for r in table[1:]] == ["2026-03-02T09:00:00+00:00", "2026-03-02T09:15:00+00:00",
                                         "2026-03-02T09:30:00+00:00"]  # the shown day only, oldest first
    assert [r[2:7] for r in table[1:]] == [["1000.0", "400.0", "600.0", "3", "1"],
                                          ["200.0", "700.0", "-500.0", "2", "1"],
                                          ["50.0", "0.0", "50.0", "1", "1"]]
    assert [r[7:10] for r in table[1:]] == [["1000.0", "400.0", "600.0"], ["1200.0", "1100.0", "100.0"],
                                            ["1250.0", "1100.0", "150.0"]]
    assert [r[10] for r in table[1:]] == ["false"] * 3  # no watermark yet: nothing is final


def test_windows_csv_of_the_day_picked(tmp_path):
    write_gold(tmp_path, WINDOWS)
    client = create_app(tmp_path).server.test_client()
    sent = download(client, ids.EXPORT_WINDOWS, ids.DOWNLOAD_WINDOWS,
                    store_snapshot(client, day="2026-03-01"))[ids.DOWNLOAD_WINDOWS]["data"]
    assert sent["filename"] == "trade-summary-2026-03-01-windows.csv"
    assert [r[:3] for r in rows(sent["content"])[1:]] == [["2026-03-01T16:45:00+00:00", "2026-03-01T17:00:00+00:00",
                                                           "99.0"]]


def test_while_the_time_machine_shows_an_instant_the_windows_csv_is_the_chart_then_named_after_it(tmp_path):
    write_gold(tmp_path, WINDOWS)
    client = create_app(tmp_path).server.test_client()
    live = store_snapshot(client)
    past = {**live, "windows": live["windows"][:1],
            "as_of": {"at": "2026-03-02T10:42:00+00:00", "label": "as of 2026-03-02 10:42:00 UTC"}}
    sent = download(client, ids.EXPORT_WINDOWS, ids.DOWNLOAD_WINDOWS, live, past)[ids.DOWNLOAD_WINDOWS]["data"]
    assert sent["filename"] == "trade-summary-2026-03-02-windows-as-of-10-42-00.csv"
    assert [r[0] for r in rows(sent["content"])[1:]] == ["2026-03-02T09:00:00+00:00"]
    for live_again in (None, "junk", {"as_of": "soon"}):  # Live, or a store the time machine never wrote
        sent = download(client, ids.EXPORT_WINDOWS, ids.DOWNLOAD_WINDOWS, live, live_again)[ids.DOWNLOAD_WINDOWS]
        assert sent["data"]["filename"] == "trade-summary-2026-03-02-windows.csv"


def test_corrections_csv_holds_every_correction_of_the_day_not_only_the_feeds_newest(tmp_path):
    write_gold(tmp_path, WINDOWS)
    write_corrections(tmp_path, 30)
    client = create_app(tmp_path).server.test_client()
    snapshot = store_snapshot(client)
    assert len(snapshot["corrections"]) == 25  # the feed's cut
    answer = download(client, ids.EXPORT_CORRECTIONS, ids.DOWNLOAD_CORRECTIONS, snapshot)
    sent = answer[ids.DOWNLOAD_CORRECTIONS]["data"]
    assert sent["filename"] == "trade-summary-2026-03-02-corrections.csv"
    table = rows(sent["content"])
    assert table[0][:4] == ["corrected_at", "window_start", "buy_before", "buy_after"]
    assert len(table) == 1 + 30  # the other day's correction is left out
    assert table[1][:4] == ["2026-03-02T10:00:00+00:00", "2026-03-02T09:15:00+00:00", "100.0", "101.0"]
    assert table[-1][0] == "2026-03-02T10:29:00+00:00"  # oldest first
    assert table[1][-2:] == ["1", "0"]  # late trades, batch id


def test_export_without_a_trading_day_answers_with_a_message_and_no_file(tmp_path):
    client = create_app(tmp_path).server.test_client()
    for button, target in ((ids.EXPORT_WINDOWS, ids.DOWNLOAD_WINDOWS),
                           (ids.EXPORT_CORRECTIONS, ids.DOWNLOAD_CORRECTIONS)):
        for snapshot in (store_snapshot(client), None, "junk", {"day": "../../etc"}, {"day": 5}):
            answer = download(client, button, target, snapshot)
            assert target not in answer and answer[ids.EXPORT_MESSAGE]["children"] == NOTHING_TO_EXPORT


def test_windows_csv_of_an_empty_snapshot_is_the_header_alone():
    assert windows_csv({"windows": []}) == ",".join(WINDOW_HEADER) + "\n"
