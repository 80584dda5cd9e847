"""--broker-retention on a real broker: an existing topic takes the retention, and a segment
roll short enough for it to act; a topic that has it already is left alone."""

from streaming.kafka.admin import apply_retention
from tests.support.kafka import new_topic, topic_settings


def test_an_existing_topic_takes_the_retention_once(broker):
    topic = new_topic(broker.bootstrap_servers)  # created with an hour
    client = {"bootstrap.servers": broker.bootstrap_servers}

    assert apply_retention(client, topic, 300_000) == 3_600_000
    settings = topic_settings(broker.bootstrap_servers, topic)
    assert (settings["retention.ms"], settings["segment.ms"]) == ("300000", "75000")

    assert apply_retention(client, topic, 300_000) is None  # already so: nothing altered
