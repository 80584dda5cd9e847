"""A batch's input, counted where the records were read: Spark counts only rows its source's
plan produced, and the sink's tasks read Kafka themselves."""

from types import SimpleNamespace

from streaming.pipeline import counted_progress


def report(batch_id, at, rows=0, duration_ms=500):
    return {"batchId": batch_id, "timestamp": f"2026-03-02T09:00:0{at}.000Z", "numInputRows": rows,
            "inputRowsPerSecond": 0.0, "processedRowsPerSecond": 0.0, "durationMs": {"triggerExecution": duration_ms}}


def test_a_batch_whose_tasks_read_kafka_takes_its_input_and_rates_from_the_sink():
    sink = SimpleNamespace(records_read={1: 1000, 2: 3000}, called_at={})
    first, second = counted_progress([report(1, 0), report(2, 2)], sink)
    def figures(r):
        return r["numInputRows"], r["processedRowsPerSecond"], r["inputRowsPerSecond"]

    assert figures(first) == (1000, 2000, 2000)
    assert figures(second) == (3000, 6000, 1500)  # input: over the time since the batch before started


def test_spark_s_own_count_and_batches_that_read_nothing_stay_as_they_are():
    sink = SimpleNamespace(records_read={1: 1000}, called_at={})
    counted = counted_progress([report(1, 0, rows=1000, duration_ms=250), report(2, 1)], sink)
    assert counted[0]["processedRowsPerSecond"] == 0.0 and counted[0]["numInputRows"] == 1000
    assert counted[1]["numInputRows"] == 0
    assert counted_progress([report(3, 0)], None)[0]["numInputRows"] == 0


def test_a_lone_report_takes_the_input_rate_over_the_time_between_the_sink_s_batches():
    sink = SimpleNamespace(records_read={2: 3000}, called_at={1: 100.0, 2: 102.0})
    assert counted_progress([report(2, 2)], sink)[0]["inputRowsPerSecond"] == 1500
