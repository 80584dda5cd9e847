"""The loader's progress lines and short errors, from a query's progress (pure)."""

from streaming.loader import batch_counts, describe_counts
from streaming.pipeline import short_error


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
