"""The embedded broker's settings: one __consumer_offsets partition on a new data dir, and as many
as an existing one holds (the real broker: tests/integration/test_broker_offsets_topic.py); no
more request threads than cores."""

import os

from streaming.kafka.broker_config import offsets_topic_partitions, request_threads, server_properties


def test_a_new_data_dir_gets_one_offsets_partition(tmp_path):
    assert offsets_topic_partitions(tmp_path / "kafka-logs") == 1
    (tmp_path / "kafka-logs" / "trades-0").mkdir(parents=True)  # a topic, but no group ever committed
    assert offsets_topic_partitions(tmp_path / "kafka-logs") == 1


def test_a_data_dir_with_offsets_partitions_keeps_as_many_as_it_holds(tmp_path):
    logs = tmp_path / "kafka-logs"
    for n in range(50):
        (logs / f"__consumer_offsets-{n}").mkdir(parents=True)
    (logs / "__consumer_offsets-7.1f2e3d-delete").mkdir()  # a partition being deleted is not one
    assert offsets_topic_partitions(logs) == 50


def test_the_setting_is_written_to_server_properties(tmp_path):
    text = server_properties(tmp_path, 9092, 9093, offsets_partitions=1)
    assert "offsets.topic.num.partitions=1\n" in text


def test_the_broker_has_a_request_thread_per_core_up_to_kafkas_eight(tmp_path):
    threads = request_threads()
    assert 1 <= threads <= 8
    assert threads <= len(os.sched_getaffinity(0))
    assert f"num.io.threads={threads}\n" in server_properties(tmp_path, 9092, 9093)
