"""The Kafka source's pure parts: how offsets are capped and grouped into tasks, the options it
takes, and the error when no broker answers (no Spark, no broker)."""

import pytest

from streaming.kafka.options import KafkaSourceError, SourceOptions, parse_starting_offsets
from streaming.kafka.reader import KafkaPartitionRange, KafkaStreamReader, cap_offsets, even_shares, group_ranges
from tests.support.kafka import free_port


def test_cap_offsets_spreads_the_limit_over_partitions_by_backlog():
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 105}
    end = cap_offsets(start, latest, 20)
    assert end == {("t", 0): 10, ("t", 1): 10, ("t", 2): 15}
    assert cap_offsets(start, latest, 1000) == latest


def test_cap_offsets_never_stalls_a_partition_with_a_small_limit():
    end = cap_offsets({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 1)
    assert end[("t", 1)] == 1 and end[("t", 0)] >= 1


def test_the_offset_cap_is_spent_in_full_so_no_tiny_batch_trails():
    start = {("t", p): 0 for p in range(3)}
    latest = {("t", 0): 100_000, ("t", 1): 100_001, ("t", 2): 99_999}
    end = cap_offsets(start, latest, 100_000)
    assert sum(end.values()) == 100_000 and all(end[tp] <= latest[tp] for tp in latest)


def test_batches_of_many_partitions_are_read_in_one_wave_of_tasks():
    ranges = [KafkaPartitionRange("t", p, 0, n) for p, n in enumerate((100, 50, 60, 10))]
    groups = group_ranges(ranges, 2, min_records_per_task=100)
    assert sorted(sorted(r.partition for r in g.ranges) for g in groups) == [[0, 3], [1, 2]]  # 110 records each
    assert sum(len(g.ranges) for g in group_ranges(ranges, None)) == 4 == len(group_ranges(ranges, None))


def test_a_small_batch_is_read_by_one_task():
    ranges = [KafkaPartitionRange("t", p, 0, n) for p, n in enumerate((400, 350, 300))]
    assert [len(g.ranges) for g in group_ranges(ranges, 2)] == [3]
    assert len(group_ranges(ranges, 2, min_records_per_task=500)) == 2


def test_starting_offsets_accepts_spark_forms_and_rejects_others():
    assert parse_starting_offsets("earliest", ("t",)) == "earliest"
    assert parse_starting_offsets('{"t": {"0": 5, "1": -2}}', ("t",)) == {"t": {"0": 5, "1": -2}}
    with pytest.raises(KafkaSourceError, match="startingOffsets"):
        parse_starting_offsets("yesterday", ("t",))


def test_missing_required_options_are_named():
    with pytest.raises(KafkaSourceError, match="kafka.bootstrap.servers"):
        SourceOptions.parse({"subscribe": "t"})
    with pytest.raises(KafkaSourceError, match="subscribe"):
        SourceOptions.parse({"kafka.bootstrap.servers": "h:1"})


def test_an_unreachable_broker_gives_a_clear_error():
    reader = KafkaStreamReader(SourceOptions.parse({
        "kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "subscribe": "t",
        "kafkaConsumer.pollTimeoutMs": "2000",
    }))
    with pytest.raises(KafkaSourceError, match="cannot reach Kafka at 127.0.0.1"):
        reader.initialOffset()


def test_an_unreachable_broker_means_no_new_batch_until_the_retry_time_is_spent_then_a_clear_error():
    options = {"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "subscribe": "t",
               "kafkaConsumer.pollTimeoutMs": "500"}
    start = {"t": {"0": 5}}
    patient = KafkaStreamReader(SourceOptions.parse({**options, "fetchOffset.retryTimeoutMs": "60000"}))
    assert patient.latestOffset(start, None) == start
    assert patient.latestOffset(start, None) == start
    impatient = KafkaStreamReader(SourceOptions.parse({**options, "fetchOffset.retryTimeoutMs": "0"}))
    with pytest.raises(KafkaSourceError, match="cannot reach Kafka at 127.0.0.1.*after 0 s of trying"):
        impatient.latestOffset(start, None)


def test_offsets_the_broker_no_longer_has_are_data_loss_and_say_which():
    from streaming.kafka.reader import data_losses

    marks = {("t", 0): (0, 1159), ("t", 1): (500, 900), ("t", 2): (0, 40)}
    losses = data_losses({("t", 0): 1161, ("t", 1): 420, ("t", 2): 40}, marks)
    assert [(loss.partition, loss.expected) for loss in losses] == [(0, 1161), (1, 420)]
    assert "offsets 1159 to 1160 are gone" in str(losses[0])
    assert "offsets 420 to 499 were removed (retention)" in str(losses[1])
    assert data_losses({("t", 3): 7}, marks) == []  # a partition missing from metadata for a moment


def test_fail_on_data_loss_is_true_by_default_and_takes_only_true_or_false():
    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    assert SourceOptions.parse(base).fail_on_data_loss is True
    assert SourceOptions.parse({**base, "failOnDataLoss": "False"}).fail_on_data_loss is False
    with pytest.raises(KafkaSourceError, match="failOnDataLoss must be 'true' or 'false'"):
        SourceOptions.parse({**base, "failOnDataLoss": "sometimes"})


def test_a_catch_up_batch_is_cut_into_equal_tasks_in_whole_waves_of_cores():
    three = [KafkaPartitionRange("t", p, 0, 83_000) for p in range(3)]
    assert [len(g.ranges) for g in group_ranges(three, 2)] == [2, 1]  # the source: whole partitions
    shares = even_shares(three, 2, max_records_per_task=100_000)
    assert [sum(r.until_offset - r.from_offset for r in g.ranges) for g in shares] == [62_250] * 4
    pieces = sorted((r.partition, r.from_offset, r.until_offset) for g in shares for r in g.ranges)
    for p in range(3):  # every offset read once
        mine = [(lo, hi) for q, lo, hi in pieces if q == p]
        assert mine[0][0] == 0 and mine[-1][1] == 83_000
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))


def test_whole_partitions_stay_whole_where_they_balance_and_a_small_batch_is_one_task():
    two = [KafkaPartitionRange("t", p, 0, 50_000) for p in range(2)]
    assert [[r.value for r in g.ranges] for g in even_shares(two, 2, 100_000)] == [[("t", 0, 0, 50_000)],
                                                                                   [("t", 1, 0, 50_000)]]
    small = [KafkaPartitionRange("t", p, 0, 1_000) for p in range(3)]
    assert [len(g.ranges) for g in even_shares(small, 2, 100_000)] == [3]
