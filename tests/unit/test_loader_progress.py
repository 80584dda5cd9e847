"""The loader's progress lines and short errors, from a query's progress (pure)."""

from streaming.jobs.loader import batch_counts, describe_counts, new_batch_counts
from streaming.jobs.pipeline import short_error


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


def test_an_idle_trigger_reporting_the_next_batch_id_does_not_hide_that_batch():
    read = {"loader_read": {"lines": 4, "files": 1, "unparsed": 0}, "loader_sent": {"records": 4}}
    reports = [
        {"batchId": 0, "numInputRows": 364, "observedMetrics": read},  # from before a restart: logged
        {"batchId": 1, "numInputRows": 0, "observedMetrics": {}},  # idle: the id of the batch to come
        {"batchId": 1, "numInputRows": 4, "observedMetrics": read},
        {"batchId": 2, "numInputRows": 0, "observedMetrics": {}},
    ]
    four = {"files": 1, "lines": 4, "unparsed": 0, "records": 4}
    assert new_batch_counts(reports, last_logged=0) == [(1, four)]
    assert new_batch_counts(reports[:2], last_logged=0) == []
    assert new_batch_counts(reports, last_logged=1) == []
