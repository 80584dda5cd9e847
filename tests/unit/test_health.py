"""Catch-up progress and Kafka trouble from the health figures (pure)."""

from streaming.run.health import catch_up, catch_up_line, status_line, unreachable_since


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
