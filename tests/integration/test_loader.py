"""The landing-zone loader (Spark as a Kafka producer): the transformation and its checks,
seed-style iterations against the real broker, and exact gold totals for what it loaded."""

import json
import time

import pytest

from streaming.config import LoadSettings, Settings, UsageError
from streaming.jobs.loader import CORRUPT_COLUMN, TRADE_FILE_SCHEMA, check_filter, start_load_query, to_kafka_records
from streaming.lake.tables import QUARANTINE, SILVER
from tests.support.corpus import DAY, trade
from tests.support.harness import StreamTest
from tests.support.kafka import count_since, read_topic
from tests.support.landing import BAD_JSON, ITERATIONS, MISTYPED, MOBILE, RUNNING_COUNTS, drop_file


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

    with StreamTest(spark, Settings(data_dir=data, bootstrap_servers=broker.bootstrap_servers, topic=topic),
                    writer=None) as stream:
        stream.process()
    stream.check_gold({"09:00": (20.0, 10.0, 2), "09:15": (4.5, 6.0, 2), "09:30": (20.0, 0.0, 2)})
    stream.check_table(SILVER, trade_id=["a1", "a3", "b1", "c1", "c2", "c3"])
    reasons = sorted(stream.check_table(QUARANTINE, rows=2)["reason"])
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
