"""Shared fixtures (one embedded Kafka broker and one SparkSession for the whole run, a fresh
topic per test) and the lanes: tests/unit is the fast lane, tests/integration and tests/e2e are
marked `integration` and `e2e` by folder, so `-m "not integration and not e2e"` runs the pure tests.
Helpers live in tests/support/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.kafka import TopicWriter, new_topic, running_broker

HERE = Path(__file__).resolve().parent
LANES = {"integration": pytest.mark.integration, "e2e": pytest.mark.e2e}
# A unit test that uses one of these is not pure.
NOT_PURE = {"broker", "topic", "writer", "spark"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(item.path).resolve()
        lane = path.relative_to(HERE).parts[0] if path.is_relative_to(HERE) else None
        impure = sorted(NOT_PURE & set(item.fixturenames))
        if lane in LANES:
            item.add_marker(LANES[lane])
        elif lane == "unit" and impure:
            raise pytest.UsageError(f"{item.nodeid} uses {impure}: it belongs in tests/integration, not tests/unit")


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("broker")) as embedded:
        yield embedded


@pytest.fixture
def topic(broker) -> str:
    return new_topic(broker.bootstrap_servers)


@pytest.fixture
def writer(broker, topic) -> TopicWriter:
    return TopicWriter(broker.bootstrap_servers, topic)


@pytest.fixture(scope="session")
def spark():
    from streaming.run.spark_session import create_spark

    session = create_spark("local[2]", app_name="trade-summary-tests", shuffle_partitions=2)
    yield session
    session.stop()
