"""The landing-zone loader (Spark as a Kafka producer): the pure transformation, seed-style
iterations against the real broker, exact gold totals for what it loaded, and `run.py load`."""

import json
import os
import shutil
import time

import pytest
from deltalake import DeltaTable

from streaming.config import LoadSettings, Settings, UsageError
from streaming.lake.tables import GOLD, QUARANTINE, SILVER
from streaming.loader import (
    CORRUPT_COLUMN,
    TRADE_FILE_SCHEMA,
    batch_counts,
    check_filter,
    describe_counts,
    short_error,
    start_load_query,
    to_kafka_records,
)
from streaming.simulation.sample_day import DEFAULT_DIR as SAMPLE_DAY
from streaming.simulation.sample_day import summary, trading_day
from tests.conftest import count_since, read_topic, run_once, trade
from tests.helpers_process import RunPy

DAY = "2026-03-02T"
MOBILE = "channel = 'mobile'"
BAD_JSON = '{"trade_id": "x1", "account_id": "ACC-9", "side": "BUY", '
MISTYPED = json.dumps(trade("x2", "SELL", 1, 9.0, DAY + "09:07:00Z", account_id="ACC-8", channel="mobile")
                      ).replace('"quantity": 1', '"quantity": "ten"')
# One file per iteration. The mobile trades, by window: 09:00 buy 20 sell 10; 09:15 buy 4.5
# sell 6; 09:30 buy 20. The two bad lines of the second file are sent whatever the filter.
ITERATIONS = [
    ("morning-1.jsonl", [
        trade("a1", "BUY", 10, 2.0, DAY + "09:01:00Z", channel="mobile"),
        trade("a2", "SELL", 1, 5.0, DAY + "09:02:00Z", channel="web"),
        trade("a3", "BUY", 3, 1.5, DAY + "09:20:00Z", channel="mobile", account_id="ACC-2"),
        trade("a4", "BUY", 100, 1.0, DAY + "09:03:00Z", channel="desktop"),
    ]),
    ("morning-2.jsonl", [
        trade("b1", "SELL", 4, 2.5, DAY + "09:05:00Z", channel="mobile"),
        trade("b2", "BUY", 7, 1.0, DAY + "09:06:00Z", channel="web"),
        BAD_JSON,
        MISTYPED,
    ]),
    ("morning-3.jsonl", [
        trade("c1", "SELL", 2, 3.0, DAY + "09:16:00Z", channel="mobile", account_id="ACC-3"),
        trade("c2", "BUY", 1, 10.0, DAY + "09:31:00Z", channel="mobile"),
        trade("c3", "BUY", 5, 2.0, DAY + "09:32:00Z", channel="mobile", account_id="ACC-2"),
        trade("c4", "BUY", 8, 8.0, DAY + "09:33:00Z", channel="laptop"),
    ]),
]
RUNNING_COUNTS = [2, 5, 8]


def line(record) -> str:
    return record if isinstance(record, str) else json.dumps(record)


def drop_file(landing, name, records) -> None:
    """Write elsewhere, then move in: a file source must never see a half-written file."""
    staging = landing.parent / f".{name}.tmp"
    staging.write_text("".join(f"{line(r)}\n" for r in records))
    os.replace(staging, landing / name)


def load_once(spark, settings: LoadSettings):
    query = start_load_query(spark, settings)
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return query


@pytest.fixture
def landing(tmp_path):
    path = tmp_path / "landing"
    path.mkdir()
    return path


def test_lines_become_keys_and_values_and_unparsed_lines_skip_the_filter(spark, landing):
    records = [trade("t1", "BUY", 2, 10.5, DAY + "09:01:00Z", channel="mobile"),
               trade("t2", "SELL", 1, 3.0, DAY + "09:02:00Z", channel="web"), BAD_JSON, MISTYPED]
    drop_file(landing, "day.jsonl", records)
    with open(landing / "day.jsonl", "ab") as f:
        f.write(b'{"trade_id": "t3", "account_id": "ACC-\xff"}\n')  # not UTF-8
    lines = (spark.read.schema(TRADE_FILE_SCHEMA).option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
             .json(str(landing)))

    everything = {(r.key, bytes(r.value)) for r in to_kafka_records(lines, None, "account_id").collect()}
    assert len(everything) == 5
    mobile = {(r.key, bytes(r.value)) for r in to_kafka_records(lines, MOBILE, "account_id").collect()}
    assert mobile == {
        ("ACC-1", b'{"trade_id":"t1","account_id":"ACC-1","symbol":"AAPL","side":"BUY","quantity":2,'
                  b'"price":10.5,"channel":"mobile","event_time":"2026-03-02T09:01:00Z"}'),
        (None, BAD_JSON.encode()),  # not JSON: no key to find
        ("ACC-8", MISTYPED.encode()),  # sent as read, keyed by the field it does have
        (None, b'{"trade_id": "t3", "account_id": "ACC-\xff"}'),  # bytes untouched
    }
    by_symbol = to_kafka_records(lines, "price > 5", "symbol").collect()
    assert {r.key for r in by_symbol} == {"AAPL", None}


@pytest.mark.parametrize("where, message", [
    ("chanel = 'mobile'", "Did you mean"),
    ("channel = ", "Syntax error"),
    ("quantity", "not a boolean"),
    ("channel = 'mobile') OR (1 = 1", "Syntax error"),
])
def test_a_bad_where_is_a_usage_error_naming_the_fields(spark, where, message):
    with pytest.raises(UsageError, match=message) as error:
        check_filter(spark, where, "account_id")
    assert "--where" in str(error.value) and "channel (string)" in str(error.value)


def test_a_key_that_is_not_a_trade_field_is_a_usage_error(spark):
    with pytest.raises(UsageError, match="--key 'acount_id' is not a trade field"):
        check_filter(spark, None, "acount_id")


def test_progress_lines_and_errors_are_short():
    progress = {"batchId": 3, "numInputRows": 12, "observedMetrics": {
        "loader_read": {"lines": 12, "files": 2, "unparsed": 1}, "loader_sent": {"records": 5}}}
    counts = batch_counts(progress)
    assert counts == {"files": 2, "lines": 12, "unparsed": 1, "records": 5}
    assert describe_counts(counts, "trades") == (
        "2 files, 12 lines read, 5 records sent to 'trades' "
        "(1 lines did not match the trade schema: sent as read, for quarantine)")
    assert batch_counts({"batchId": 4, "numInputRows": 0, "observedMetrics": {}}) is None
    failure = RuntimeError("[STREAM_FAILED] Query terminated with exception: Traceback (most recent call last):\n"
                           '  File "x.py", line 1\nstreaming.kafka_sink.KafkaSinkError: Kafka said no\n SQLSTATE')
    assert short_error(failure) == "Kafka said no"


def test_seed_iterations_send_exact_running_counts_once_each_and_gold_is_exact(spark, broker, topic, landing,
                                                                               tmp_path):
    data = tmp_path / "data"
    settings = LoadSettings(data_dir=data, bootstrap_servers=broker.bootstrap_servers, topic=topic,
                            source_dir=landing, where=MOBILE, max_files_per_trigger=1, available_now=True)
    since_ms = int(time.time() * 1000)
    for (name, records), expected in zip(ITERATIONS, RUNNING_COUNTS):
        drop_file(landing, name, records)
        load_once(spark, settings)
        assert count_since(broker.bootstrap_servers, topic, since_ms) == expected, name

    query = load_once(spark, settings)  # a restart on the same checkpoint, no new file
    assert not any(p["numInputRows"] for p in query.recentProgress)
    assert count_since(broker.bootstrap_servers, topic, since_ms) == RUNNING_COUNTS[-1]
    values = [m.value() for m in read_topic(broker.bootstrap_servers, topic)]
    sent_ids = sorted(json.loads(v)["trade_id"] for v in values if v != BAD_JSON.encode())
    assert sent_ids == ["a1", "a3", "b1", "c1", "c2", "c3", "x2"]

    pipeline = Settings(data_dir=data, bootstrap_servers=broker.bootstrap_servers, topic=topic)
    run_once(spark, pipeline)
    gold = DeltaTable(str((pipeline.data_dir / GOLD.name))).to_pandas().sort_values("window_start")
    assert [w.strftime("%H:%M") for w in gold["window_start"]] == ["09:00", "09:15", "09:30"]
    assert list(gold["buy_amount"]) == [20.0, 4.5, 20.0]
    assert list(gold["sell_amount"]) == [10.0, 6.0, 0.0]
    assert list(gold["settlement_amount"]) == [10.0, -1.5, 20.0]
    assert list(gold["trade_count"]) == [2, 2, 2]
    silver = DeltaTable(str((pipeline.data_dir / SILVER.name))).to_pandas()
    assert sorted(silver["trade_id"]) == ["a1", "a3", "b1", "c1", "c2", "c3"]
    reasons = sorted(DeltaTable(str((pipeline.data_dir / QUARANTINE.name))).to_pandas()["reason"])
    assert len(reasons) == 2
    assert "quantity must be a positive integer, got ten" in reasons[0]
    assert "not a JSON object" in reasons[1]


def test_files_go_one_per_batch_and_sent_files_are_archived(spark, broker, topic, landing, tmp_path):
    archive = tmp_path / "archive"
    settings = LoadSettings(data_dir=tmp_path / "data", bootstrap_servers=broker.bootstrap_servers, topic=topic,
                            source_dir=landing, max_files_per_trigger=1, clean_source="archive", archive_dir=archive,
                            available_now=True)
    for name, records in ITERATIONS:
        drop_file(landing, name, records)
    since_ms = int(time.time() * 1000) - 60_000
    query = load_once(spark, settings)
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [4, 4, 4]  # a file a batch
    assert count_since(broker.bootstrap_servers, topic, since_ms) == 12
    # Spark archives a batch's files when the next batch starts: all but the last batch's file.
    archived = sorted(p.name for p in archive.rglob("*.jsonl"))
    assert len(archived) == 2 and set(archived) < {name for name, _ in ITERATIONS}
    assert sorted(p.name for p in landing.iterdir()) == sorted({name for name, _ in ITERATIONS} - set(archived))


def test_the_sample_day_is_reproducible_and_holds_what_the_readme_says():
    files = trading_day()
    assert sorted(files) == sorted(p.name for p in SAMPLE_DAY.iterdir())
    for name, lines in files.items():
        assert (SAMPLE_DAY / name).read_text() == "".join(f"{x}\n" for x in lines), f"regenerate {name}"
    day = summary(files)
    assert day["lines"] == 364 and day["valid_trades"] == 360
    assert day["by_channel"]["mobile"] == 106


def test_run_py_load_help_and_a_missing_directory():
    app = RunPy("load", "--help")
    assert app.wait(30) == 0
    assert all(flag in app.output for flag in ("--from DIR", "--where", "--key", "--clean-source", "--available-now"))
    app = RunPy("load", "--from", "/nonexistent/landing")
    assert app.wait(30) == 2
    assert "--from /nonexistent/landing: no such directory" in app.output and "Traceback" not in app.output


def test_run_py_load_with_a_bad_where_is_a_usage_error_before_kafka_is_touched(broker, topic, landing, tmp_path):
    app = RunPy("load", "--from", str(landing), "--where", "chanel = 'mobile'", "--available-now",
                "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--data-dir", str(tmp_path / "d"))
    assert app.wait(180) == 2, app.output
    assert "error: --where \"chanel = 'mobile'\"" in app.output
    assert "Did you mean" in app.output and "Traceback" not in app.output
    assert "Kafka ready" not in app.output


def test_run_py_load_sends_the_sample_day_then_picks_up_new_files_and_stops_on_sigterm(broker, topic, landing,
                                                                                      tmp_path):
    for sample in SAMPLE_DAY.iterdir():
        shutil.copy(sample, landing / sample.name)
    args = ("load", "--from", str(landing), "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
            "--data-dir", str(tmp_path / "data"))
    since_ms = int(time.time() * 1000)
    app = RunPy(*args, "--available-now")
    assert app.wait(300) == 0, app.output
    assert "done: 4 files, 364 lines read, 364 records sent" in app.output
    assert "2 lines did not match the trade schema" in app.output and "Traceback" not in app.output
    assert count_since(broker.bootstrap_servers, topic, since_ms) == 364

    watching = RunPy(*args, "--trigger", "1 second")  # restarts on the checkpoint, keeps watching
    try:
        watching.wait_for_line("watching", 180)
        drop_file(landing, "late-capture.jsonl", ITERATIONS[0][1])
        watching.wait_for_line("batch 1: 1 file, 4 lines read, 4 records sent", 120)
        code, took = watching.terminate()
        assert code == 0 and took < 30, watching.output
    finally:
        watching.kill()
    assert "Traceback" not in watching.output
    assert count_since(broker.bootstrap_servers, topic, since_ms) == 364 + 4  # the day was not sent again
