"""The pipeline's settings for one test (its own topic and data dir) and the harness over them."""

import pytest

from streaming.config import Settings
from tests.support.harness import StreamTest


@pytest.fixture
def settings(broker, topic, tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", bootstrap_servers=broker.bootstrap_servers, topic=topic)


@pytest.fixture
def stream(spark, settings, writer):
    with StreamTest(spark, settings, writer) as running:
        yield running
