"""Catch-up progress, Kafka trouble and where a restarted query resumes, from the health figures."""

import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone

import pyarrow as pa

from streaming.lake import tables
from streaming.lake.checkpoints import OffsetLogEntry, QueryCheckpoint
from streaming.lake.store import Batch, Lake
from streaming.medallion.lateness import EPOCH, ledger_rows
from streaming.run.health import (
    HealthMonitor,
    Resume,
    catch_up,
    catch_up_line,
    partition_lags,
    resume_point,
    resumed,
    status_line,
    status_time,
    total_lag,
    unreachable_since,
    watermark_after,
)


def query(name, rate):
    return {"name": name, "processed_rows_per_second": rate}


def test_a_query_far_behind_reports_how_much_of_its_backlog_is_done_its_rate_and_what_is_left():
    progress, backlogs = catch_up([query("gold", 25_000.0)], {"gold": 1_000_000}, {})
    assert progress["gold"] == {"lag": 1_000_000, "backlog": 1_000_000, "done": 0, "rate": 25_000.0, "eta_s": 40.0}
    progress, backlogs = catch_up([query("gold", 25_000.0)], {"gold": 750_000}, backlogs)
    assert (progress["gold"]["done"], progress["gold"]["backlog"]) == (250_000, 1_000_000)
    assert catch_up_line(progress) == "gold 250,000 of 1,000,000 records (25%) at 25,000/s, about 30 s left"


def test_a_lag_of_a_few_seconds_of_work_is_not_a_catch_up_and_the_next_backlog_starts_afresh():
    _, backlogs = catch_up([query("gold", 1_000.0)], {"gold": 50_000}, {})
    progress, backlogs = catch_up([query("gold", 1_000.0)], {"gold": 2_000}, backlogs)  # 2 s of work
    assert progress == {} and backlogs == {}
    progress, _ = catch_up([query("gold", 1_000.0)], {"gold": 9_000}, backlogs)
    assert progress["gold"]["backlog"] == 9_000


def test_a_query_that_has_not_run_a_batch_yet_has_no_rate_and_no_estimate():
    progress, _ = catch_up([query("gold", None)], {"gold": 300_000}, {})
    assert progress["gold"]["eta_s"] is None
    assert catch_up_line(progress) == "gold 0 of 300,000 records (0%) at 0/s"


def test_the_page_status_line_shows_the_catch_up_while_it_lasts():
    from dashboard.figures import status_text

    progress, _ = catch_up([query("gold_trade_summary", 10_000.0)], {"gold_trade_summary": 120_000}, {})
    status = {"producer": None, "queries": [], "catch_up": progress}
    assert status_text({"status": status}).startswith(
        "Catching up: gold_trade_summary 0 of 120,000 records (0%) at 10,000/s, about 12 s left")
    assert "Catching up" not in status_text({"status": {**status, "catch_up": {}}})


def test_kafka_unreachable_is_dated_from_the_first_failed_sample_until_one_works():
    from dashboard.figures import status_text

    since = unreachable_since(None, "Timed out", "2026-11-23T10:31:05+00:00")
    assert unreachable_since(since, "Timed out again", "2026-11-23T10:31:35+00:00") == since
    assert unreachable_since(since, None, "2026-11-23T10:32:00+00:00") is None
    status = {"producer": None, "queries": [], "kafka": {"error": "Timed out", "unreachable_since": since}}
    assert status_text({"status": status}).startswith("Kafka unreachable since 10:31:05 UTC: Timed out")
    assert status_line(status).startswith("Kafka unreachable since 10:31:05 UTC")
    assert "unreachable" not in status_text({"status": {**status, "kafka": {"error": None}}})


def status(name="medallion", offsets=None, watermark=None, restarts=0):
    return {"name": name, "processed_offsets": offsets or {}, "watermark": watermark, "restarts": restarts,
            "processed_rows_per_second": None}


def test_a_query_with_no_batch_since_its_restart_is_taken_where_its_checkpoint_resumes():
    resume = Resume({"trades:0": 7_296, "trades:1": 544}, "2026-03-02T10:15:00.000Z")
    [query] = resumed([status()], {"medallion": resume})
    assert (query["processed_offsets"], query["watermark"], query["resumed"]) == (
        {"trades:0": 7_296, "trades:1": 544}, "2026-03-02T10:15:00.000Z", True)
    lags = total_lag(partition_lags({"trades:0": 7_296, "trades:1": 544}, [query]))
    progress, _ = catch_up([query], lags, {})
    assert lags == {"medallion": 0} and progress == {}  # not "0 of 7,840 records"


def test_only_the_records_produced_while_it_was_down_are_its_catch_up():
    [query] = resumed([status()], {"medallion": Resume({"trades:0": 7_296}, None)})
    lags = total_lag(partition_lags({"trades:0": 7_296 + 5_000}, [query]))
    progress, _ = catch_up([query], lags, {})
    assert progress["medallion"]["backlog"] == 5_000


def test_once_a_query_reports_a_batch_its_own_figures_are_kept():
    reported = status(offsets={"trades:0": 8_000}, watermark="2026-03-02T10:16:00.000Z")
    assert resumed([reported], {"medallion": Resume({"trades:0": 7_296}, "2026-03-02T10:15:00.000Z")}) == [reported]
    assert resumed([status()], {}) == [status()]  # nothing known: as reported


def test_an_idle_trigger_after_a_restart_reports_offsets_but_keeps_the_resume_points_watermark():
    idle = status(offsets={"trades:0": 7_296})  # Spark's progress of a trigger without data: no batch ran
    [query] = resumed([idle], {"medallion": Resume({"trades:0": 7_296}, "2026-03-02T10:15:00.000Z")})
    assert query == {**idle, "watermark": "2026-03-02T10:15:00.000Z"}


def test_the_watermark_after_the_trades_is_the_latest_less_the_delay_and_none_before_any_trade():
    latest = datetime(2026, 3, 2, 10, 45, tzinfo=timezone.utc)
    assert watermark_after(latest, timedelta(minutes=30)) == latest - timedelta(minutes=30)
    assert watermark_after(None, timedelta(minutes=30)) is None
    assert watermark_after(datetime(1970, 1, 1, 0, 10, tzinfo=timezone.utc), timedelta(minutes=30)) is None
    assert status_time(latest) == "2026-03-02T10:45:00.000Z"


def write_checkpoint(path, ends_by_batch: list[dict[int, int]], committed: int) -> QueryCheckpoint:
    """Spark's files: metadata, offsets/N (version, batch metadata, source offsets), commits/N."""
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text(json.dumps({"id": "q"}) + "\n")
    for batch_id, ends in enumerate(ends_by_batch):
        source = {"trades": {str(p): o for p, o in ends.items()}}
        (path / "offsets" / str(batch_id)).write_text(f"v1\n{{}}\n{json.dumps(source)}\n")
        if batch_id <= committed:
            (path / "commits" / str(batch_id)).write_text("v1\n{}\n")
    return QueryCheckpoint(path)


def test_a_restarted_query_resumes_at_its_last_committed_batch_with_the_watermark_of_the_trades_before_it(tmp_path):
    lake = Lake(tmp_path / "data")
    lake.ensure_all()
    t0 = datetime(2026, 3, 2, 10, tzinfo=timezone.utc)
    # Batch 0 read offsets 0-1, batch 1 offsets 2-3 (committed); batch 2 (offsets 4-5) was planned, not done.
    trades = [(0, t0), (1, t0 + timedelta(minutes=40)), (2, t0 + timedelta(minutes=50)), (3, t0 + timedelta(minutes=5)),
              (4, t0 + timedelta(hours=3))]
    lake.publish(tables.SILVER, pa.Table.from_pylist([
        {"trade_id": f"t{o}", "account_id": "a", "symbol": "S", "side": "BUY", "quantity": 1, "price": 1.0,
         "amount": 1.0, "channel": "web", "event_time": at, "topic": "trades", "partition": 0, "offset": o,
         "kafka_timestamp": at, "ingested_at": at} for o, at in trades], schema=tables.SILVER.schema), Batch("q", 0))
    for batch_id, (start, end, watermark) in enumerate([(0, 2, EPOCH), (2, 4, t0 + timedelta(minutes=10))]):
        lake.publish(tables.BATCH_WATERMARKS, ledger_rows("q", batch_id, OffsetLogEntry({("trades", 0): end}),
                                                          OffsetLogEntry({("trades", 0): start}), watermark),
                     Batch("q", batch_id))
    checkpoint = write_checkpoint(tmp_path / "checkpoint", [{0: 2}, {0: 4}, {0: 6}], committed=1)
    resume = resume_point(lake, checkpoint, timedelta(minutes=30))
    assert resume == Resume({"trades:0": 4}, "2026-03-02T10:20:00.000Z")  # 10:50 less 30 minutes, not 12:30
    empty = write_checkpoint(tmp_path / "fresh", [{0: 2}], committed=-1)
    assert resume_point(lake, empty, timedelta(minutes=30)) is None


def test_the_monitor_asks_where_a_query_resumes_once_per_restart_until_it_reports_a_batch():
    from streaming.jobs.pipeline import QueryStatus

    asked: list[str] = []
    reported = [QueryStatus("medallion", True, None, None, None, None, None, 0)]

    def resume(name):
        asked.append(name)
        return Resume({"trades:0": 7_296}, "2026-03-02T10:15:00.000Z")

    monitor = HealthMonitor(lambda: reported, lambda: None, None, resume=resume)
    monitor.sample()
    [query] = monitor.sample()["queries"]
    assert asked == ["medallion"] and query["watermark"] == "2026-03-02T10:15:00.000Z" and query["resumed"]
    reported[0] = dataclasses.replace(reported[0], restarts=1)  # restarted after a failure: asked again
    monitor.sample()
    assert asked == ["medallion", "medallion"]
    reported[0] = dataclasses.replace(reported[0], batch_id=7, processed_offsets={"trades:0": 7_400},
                                      watermark="2026-03-02T10:16:00.000Z")
    [query] = monitor.sample()["queries"]
    assert len(asked) == 2 and query["watermark"] == "2026-03-02T10:16:00.000Z" and "resumed" not in query


def shown(snapshot: dict) -> str:
    """The health panel's tables and lines as the page shows them, " | " between cells and lines."""
    from plotly.utils import PlotlyJSONEncoder

    from dashboard.panels.pipeline_health import health_panel
    from tests.unit.test_dashboard_quarantine import texts

    queries, notes, producer, lag, _ = json.loads(json.dumps(health_panel(snapshot), cls=PlotlyJSONEncoder))
    tables = [" | ".join(" | ".join(row) for row in markdown_rows(table)) for table in (queries, lag)]
    return " | ".join([tables[0], *texts(notes), producer, tables[1]])


def markdown_rows(markdown: str) -> list[list[str]]:
    """A Markdown table's rows (its header first), each cell as it shows; a note as one row of one cell."""
    lines = markdown.split("\n")
    if len(lines) == 1:
        return [[re.sub(r"\\(.)", r"\1", lines[0])]]
    return [[re.sub(r"\\(.)", r"\1", cell.strip()) for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            for index, line in enumerate(lines) if index != 1]


def test_a_markdown_table_shows_each_value_as_itself_whatever_markup_it_holds():
    from dashboard.formatting import markdown_table

    nasty = ["a|b", "*bold* _it_", "<b>x</b> & [l](u) ![i](u)", "back\\slash `code` ~s~ #", "two\nlines"]
    table = markdown_table(["Query", "Status"], [["q", value] for value in nasty], "none")
    assert markdown_rows(table) == [["Query", "Status"], *(["q", " ".join(v.split())] for v in nasty)]
    assert len(table.split("\n")) == 2 + len(nasty)  # a row a line: no value breaks out of its cell
    assert markdown_rows(markdown_table(["Query"], [], "No streaming query in this run.")) == [
        ["No streaming query in this run."]]


def test_the_health_panel_says_a_query_is_resuming_from_its_checkpoint_until_its_first_batch():
    query = {"name": "medallion", "active": True, "error": None, "batch_id": None, "input_rows_per_second": None,
             "processed_rows_per_second": None, "batch_duration_ms": None, "watermark": "2026-03-02T10:15:00.000Z"}
    resuming = shown({"status": {"queries": [{**query, "resumed": True}], "producer": None}})
    assert "active, resuming from its checkpoint" in resuming and "2026-03-02 10:15:00" in resuming
    assert "active" in shown({"status": {"queries": [query], "producer": None}})


def test_the_health_panel_says_when_the_embedded_broker_was_restarted_and_how_it_ended():
    def shown_of(broker):
        return shown({"status": {"queries": [], "producer": None, "broker": broker}})

    said = "broker restarted at 18:02:11 (exit signal 9)"
    broker = {"supervised": True, "state": "up", "restart_count": 1, "restarts": [{"said": said}], "error": None}
    assert f"Kafka: {said}" in shown_of(broker)
    assert f"Kafka: {said} · 3 restarts in this run" in shown_of({**broker, "restart_count": 3})
    assert "broker restarted" not in shown_of({**broker, "restart_count": 0, "restarts": []})
    assert "this app does not restart it" in shown_of({**broker, "supervised": False, "state": "ended",
                                                       "restart_count": 0, "restarts": []})
