"""Records that retention removed before the pipeline read them (here a delete-records call,
which moves a partition's start offset as retention does): with --fail-on-data-loss false the
pipeline reads on from what the broker still holds, and counts the loss in the ledger, in its
status and on the health panel, where a restart still finds it."""

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.kafka.clients import consumer, watermark_offsets
from streaming.lake.tables import BATCH_WATERMARKS, BRONZE, SILVER
from tests.support.corpus import DAY, trade


def remove_all_but_last(bootstrap: str, topic: str, kept: int) -> dict[int, int]:
    """Move each partition's start to `kept` records before its end, as retention does; returns
    how many records each partition lost."""
    client = consumer({"bootstrap.servers": bootstrap}, "test")
    try:
        ends = watermark_offsets(client, topic, 5.0)
    finally:
        client.close()
    starts = {p: max(low, high - kept) for p, (low, high) in ends.items()}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [TopicPartition(topic, p, start) for p, start in starts.items() if start > ends[p][0]]
    for future in admin.delete_records(wanted, operation_timeout=10).values():
        future.result(timeout=15)
    return {p: starts[p] - ends[p][0] for p in ends}


def test_records_removed_before_they_were_read_are_counted_as_lost_and_the_rest_are_read(stream, broker, topic):
    stream.add(trade("t1", "BUY", 1, 10.0, DAY + "09:01:00Z"))
    stream.process()
    stream.stop()
    stream.add(*[trade(f"u{i}", "BUY", 1, 1.0, DAY + "09:02:00Z", account_id=f"ACC-{i % 7}") for i in range(30)])
    removed = remove_all_but_last(broker.bootstrap_servers, topic, kept=2)
    lost = sum(removed.values()) - 1  # t1 was read before its offset went
    kept = 30 - lost

    stream.restart(fail_on_data_loss=False)
    stream.process()
    stream.check_table(BRONZE, rows=1 + kept)
    stream.check_table(SILVER, rows=1 + kept)
    ledger = stream.check_table(BATCH_WATERMARKS)
    assert ledger["records_lost"].sum() == lost
    [status] = stream.pipeline.status()
    assert status.records_lost == lost
    assert f"{lost:,} lost" in (status.data_loss or "") and "--broker-retention" in status.data_loss

    stream.restart(fail_on_data_loss=False)  # the count is the ledger's: a restart still shows it
    stream.add(trade("t2", "SELL", 1, 5.0, DAY + "09:03:00Z"))
    stream.process()
    [status] = stream.pipeline.status()
    assert status.records_lost == lost
    stream.check_table(BATCH_WATERMARKS)
    assert stream.table(BATCH_WATERMARKS)["records_lost"].sum() == lost


def test_a_new_pipeline_on_a_topic_that_retention_already_shortened_counts_no_loss(stream, broker, topic):
    stream.add(*[trade(f"u{i}", "BUY", 1, 1.0, DAY + "09:02:00Z", account_id=f"ACC-{i % 7}") for i in range(20)])
    removed = remove_all_but_last(broker.bootstrap_servers, topic, kept=2)
    stream.process()  # the first batch starts at the earliest offset the broker holds
    stream.check_table(BRONZE, rows=20 - sum(removed.values()))
    [status] = stream.pipeline.status()
    assert status.records_lost == 0 and status.data_loss is None
    assert stream.table(BATCH_WATERMARKS)["records_lost"].sum() == 0
