"""A live batch's records fetched in the driver (kafka/range_reader.py) are the records Spark's
Kafka source gives for the same offset ranges: the same columns, values and order of use."""

from __future__ import annotations

import pyarrow as pa

from streaming.kafka.options import source_options
from streaming.kafka.range_reader import KAFKA_RECORDS, RangeReader
from tests.support.kafka import read_topic


def ranges(topic: str, spans: dict[int, tuple[int, int]]) -> pa.Table:
    parts = sorted(spans)
    return pa.table({"topic": [topic] * len(parts), "partition": parts,
                     "start_offset": [spans[p][0] for p in parts], "end_offset": [spans[p][1] for p in parts]})


def through_spark(spark, broker, topic: str, spans: dict[int, tuple[int, int]]) -> pa.Table:
    def offsets(at: int) -> str:
        return "{" + f'"{topic}": {{' + ", ".join(f'"{p}": {spans[p][at]}' for p in sorted(spans)) + "}}"

    options = source_options({"bootstrap.servers": broker.bootstrap_servers}, topic)
    options.update(startingOffsets=offsets(0), endingOffsets=offsets(1))
    options.pop("startingOffsetsByTimestampStrategy", None)
    rows = spark.read.format("kafka").options(**options).load().toArrow().cast(KAFKA_RECORDS)
    return rows.sort_by([("partition", "ascending"), ("offset", "ascending")])


def test_the_driver_reads_the_records_spark_reads_for_the_same_ranges(spark, broker, writer, topic):
    writer.send(*[{"account_id": f"A{i}", "n": i} for i in range(40)])
    writer.send_raw(key=None, value=b"not json")
    writer.send_raw(key=b"k", value=None)  # a tombstone
    ends = {}
    for record in read_topic(broker.bootstrap_servers, topic):
        ends[record.partition()] = max(ends.get(record.partition(), 0), record.offset() + 1)
    spans = {p: (1 if end > 2 else 0, end) for p, end in ends.items()}  # each range but the first record
    reader = RangeReader({"bootstrap.servers": broker.bootstrap_servers})
    try:
        read = reader.read(ranges(topic, spans))
        again = reader.read(ranges(topic, spans))  # the same consumer, assigned anew
    finally:
        reader.close()

    expected = through_spark(spark, broker, topic, spans)
    assert read is not None and read.num_rows == sum(e - s for s, e in spans.values()) == expected.num_rows
    assert read.equals(expected) and again.equals(expected)
    assert None in read["key"].to_pylist() and None in read["value"].to_pylist()


def test_a_range_kafka_does_not_hold_is_left_to_spark_and_the_reader_reads_on(broker, writer, topic):
    writer.send(*[{"account_id": "one-key", "n": i} for i in range(3)])
    partition = read_topic(broker.bootstrap_servers, topic)[0].partition()
    reader = RangeReader({"bootstrap.servers": broker.bootstrap_servers}, timeout_s=5)
    try:
        assert reader.read(ranges(topic, {partition: (5, 9)})) is None  # past the end: never reached
        assert reader.read(ranges(topic, {partition: (0, 3)})).num_rows == 3  # and it reads on after
    finally:
        reader.close()
    assert reader.gave_up is not None


def test_a_reader_that_cannot_even_start_is_left_to_spark_rather_than_failing_the_batch(broker, writer, topic):
    writer.send({"account_id": "one-key", "n": 0})
    partition = read_topic(broker.bootstrap_servers, topic)[0].partition()
    reader = RangeReader({"bootstrap.servers": broker.bootstrap_servers, "no.such.setting": "1"})
    assert reader.read(ranges(topic, {partition: (0, 1)})) is None
    assert reader.gave_up is not None and "no.such.setting" in reader.gave_up
    reader.close()
