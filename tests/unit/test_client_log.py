"""librdkafka's repeated complaints reach the log once per kind and window, with a count."""

import logging

from streaming.kafka.clients import OncePerKind


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def records(texts):
    return [logging.LogRecord("streaming.librdkafka", logging.ERROR, __file__, 1, text, (), None) for text in texts]


def test_a_repeated_connection_failure_is_logged_once_then_with_the_count_of_its_repeats():
    clock = Clock()
    keep = OncePerKind(window_s=60, clock=clock)
    refused = [f"Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after {ms}ms in state CONNECT)"
               for ms in range(1600)]
    passed = [r for r in records(refused[:1599]) if keep.filter(r)]
    assert [r.getMessage() for r in passed] == [refused[0]]
    clock.now = 61
    (last,) = [r for r in records(refused[1599:]) if keep.filter(r)]
    assert last.getMessage().endswith("(and 1598 more like it in the last 60 s)")


def test_messages_of_another_kind_are_not_held_back():
    keep = OncePerKind(window_s=60, clock=Clock())
    texts = ["Connect to ipv4#127.0.0.1:9092 failed", "Metadata request timed out", "Broker: Not leader for partition"]
    assert [r.getMessage() for r in records(texts) if keep.filter(r)] == texts
