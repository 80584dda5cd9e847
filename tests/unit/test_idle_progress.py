"""A quiet query's status stays its last batch's: Spark reports every 10 s with no new data, with
the last batch's id and a new time, and an idle page must not be told anything new (pure)."""

from streaming.jobs.pipeline import ran_a_batch, with_records_read, without_a_batch

BATCH = {"batchId": 41, "timestamp": "2026-03-02T10:00:00.000Z", "numInputRows": 12,
         "durationMs": {"addBatch": 180, "getBatch": 0, "latestOffset": 3, "queryPlanning": 9,
                        "triggerExecution": 215, "walCommit": 11}}
IDLE = {"batchId": 41, "timestamp": "2026-03-02T10:00:10.000Z", "numInputRows": 0,
        "durationMs": {"latestOffset": 2, "triggerExecution": 2}}


def test_a_report_of_a_batch_that_ran_counts_and_an_idle_one_does_not():
    assert ran_a_batch(BATCH)
    assert not ran_a_batch(IDLE)
    assert not ran_a_batch({})  # no report yet


def test_an_idle_report_before_any_batch_tells_no_time_but_keeps_where_the_query_stands():
    idle = {**IDLE, "sources": [{"endOffset": {"trades": {"0": 5}}}]}
    quiet = without_a_batch(idle)
    assert "timestamp" not in quiet and "durationMs" not in quiet
    assert quiet["sources"] == idle["sources"] and quiet["batchId"] == 41


def test_a_batch_the_sink_read_itself_reports_the_sinks_count_and_rates_from_it():
    read_here = {**BATCH, "numInputRows": 0, "inputRowsPerSecond": 0.0, "processedRowsPerSecond": 0.0}
    counted = with_records_read(read_here, {41: (430, 0.5)}.get)
    assert counted["numInputRows"] == 430 and counted["inputRowsPerSecond"] == 860.0
    assert counted["processedRowsPerSecond"] == 430 / 0.215
    assert with_records_read(BATCH, {41: (999, 0.5)}.get) == BATCH  # Spark counted it: Spark's count stays
    assert with_records_read(IDLE, {41: (430, 0.5)}.get) == IDLE  # an idle report tells of no batch
    assert with_records_read(read_here, {}.get) == read_here  # a batch from before this sink
