"""The page's reads that follow a table file by file, on an S3-compatible store (moto's server on
127.0.0.1): the added files are read through deltalake's own object store, as on a disk."""

import pandas as pd
import pytest

from dashboard.data import CORRECTION_COLUMNS, on_day
from dashboard.readers import DayReader, SilverFilterValues
from streaming.lake.store import Lake
from streaming.lake.tables import CORRECTIONS
from tests.support.cluster import s3_server
from tests.unit.test_page_reads_incremental import (
    canonical,
    compact,
    day_of,
    publish_corrections,
    publish_silver,
    window,
)


@pytest.fixture
def s3(tmp_path):
    with s3_server(tmp_path / "s3") as server:
        server.create_bucket("lake")
        yield server


def test_a_day_on_object_storage_is_followed_through_appends_and_a_compaction(s3):
    lake = Lake("s3://lake/trades", s3.env)
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    for batch in range(4):
        publish_corrections(lake, batch, [window(batch % 2, batch)])
        expected = on_day(lake.read(CORRECTIONS, CORRECTION_COLUMNS).to_pandas(), day_of(1))
        pd.testing.assert_frame_equal(canonical(reader.read(day_of(1))), canonical(expected))
    compact(lake, CORRECTIONS)
    assert len(reader.read(day_of(1))) == 2
    followed = reader.increments(day_of(1))
    assert followed.files_read == 3 and followed.whole_reads == 0  # two appends, then the compacted file


def test_silver_s_channels_of_a_day_on_object_storage(s3):
    lake = Lake("s3://lake/trades", s3.env)
    publish_silver(lake, 0, [("web", "AAPL", window(0, 40)), ("mobile", "MSFT", window(1, 40))])
    assert SilverFilterValues(lake).read(day_of(0)) == (["web"], ["AAPL"])
