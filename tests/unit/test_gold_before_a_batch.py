"""Gold as it stood just before a batch's commit (lookups.key_range_before), which a batch run
again after a crash compares its recount with: found among the table's recent versions, and
said in the log when it is not there."""

from __future__ import annotations

import logging

from streaming.lake.lookups import key_range_before
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import GOLD
from tests.unit.test_page_reads_incremental import WINDOW, publish_gold, window


def test_gold_before_a_batch_has_the_windows_without_that_batchs_trades(tmp_path):
    lake = Lake(tmp_path)
    for batch in range(4):
        publish_gold(lake, batch, [window(0, 1)])
    before = key_range_before(lake, GOLD, Batch("q", 2), window(0, 0), window(0, 2))
    assert before is not None and before["trade_count"].to_pylist() == [2]  # batches 0 and 1
    assert before["buy_amount"].to_pylist() == [2.0]
    assert lake.key_range(GOLD, window(0, 0), window(0, 2))["trade_count"].to_pylist() == [4]


def test_a_batch_gold_does_not_have_gets_nothing_and_no_warning(tmp_path, caplog):
    lake = Lake(tmp_path)
    publish_gold(lake, 0, [window(0, 1)])
    with caplog.at_level(logging.WARNING):
        assert key_range_before(lake, GOLD, Batch("q", 1), window(0, 0), window(0, 2)) is None
        assert key_range_before(lake, GOLD, Batch("other", 0), window(0, 0), window(0, 2)) is None
    assert not caplog.records


def test_a_batch_older_than_the_look_back_gets_nothing_and_the_log_says_so(tmp_path, caplog):
    lake = Lake(tmp_path)
    for batch in range(6):
        publish_gold(lake, batch, [window(0, 1) + (batch % 2) * WINDOW])
    with caplog.at_level(logging.WARNING):
        assert key_range_before(lake, GOLD, Batch("q", 1), window(0, 0), window(0, 3), look_back=3) is None
    assert any(f"{GOLD.name} holds batch 1 of q" in r.getMessage() and "as it is now" in r.getMessage()
               for r in caplog.records)
    assert key_range_before(lake, GOLD, Batch("q", 4), window(0, 0), window(0, 3), look_back=3) is not None
