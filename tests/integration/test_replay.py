"""Replay from a Kafka time with fresh checkpoints, as a script: results are corrected, never
partial or doubled."""

import time
from datetime import datetime, timedelta, timezone

from streaming.lake.checkpoints import Checkpoints
from streaming.lake.tables import BRONZE, SILVER
from streaming.medallion.lateness import LATENESS
from tests.support.corpus import DAY, trade


def lateness_of(stream) -> dict[str, int]:
    silver = stream.table(SILVER)
    return dict(zip(silver["trade_id"], silver[LATENESS].tolist()))


def test_replay_from_a_time_rebuilds_gold_without_partial_or_double_counts(stream, settings):
    a1 = trade("a1", "BUY", 10, 10.0, DAY + "09:01:00Z")
    stream.add(a1, trade("a2", "SELL", 1, 50.0, DAY + "09:20:00Z"),
               trade("a3", "BUY", 1, 1.0, DAY + "10:30:00Z"), trade("a5", "BUY", 2, 1.0, DAY + "10:31:00Z"))
    stream.process()
    stream.add(trade("a4", "SELL", 100, 100.0, DAY + "09:02:00Z"))  # too late (watermark 10:01)
    stream.process()
    time.sleep(0.2)
    replay_time = datetime.now(timezone.utc)
    time.sleep(0.2)
    stream.add(trade("b1", "BUY", 1, 7.0, DAY + "10:05:00Z"),
               trade("b2", "SELL", 5, 5.0, DAY + "09:30:00Z"),  # too late as well
               trade("b3", "BUY", 3, 1.0, DAY + "10:40:00Z"),  # 10:30 straddles the replay time
               a1, b"{not json")
    stream.process()
    expected = {"09:00": (100.0, 0.0, 1), "09:15": (0.0, 50.0, 1), "10:00": (7.0, 0.0, 1), "10:30": (6.0, 0.0, 3)}
    stream.check_gold(expected)
    judged_live = lateness_of(stream)
    assert judged_live["b2"] >= settings.watermark // timedelta(microseconds=1) > judged_live["b1"]

    stream.restart(replay_from=replay_time)
    stream.process()
    stream.check_gold(expected)
    stream.check_table(BRONZE, rows=10)
    stream.check_table(SILVER, rows=8)
    assert lateness_of(stream) == judged_live  # the replay keeps each trade's lateness judged live
    assert list(Checkpoints(settings.checkpoint_dir).set_aside_root.iterdir()), "old checkpoints are kept aside"

    # Stopped and restarted half way: the replay's checkpoints resume with the same baseline.
    stream.restart(replay_from=None)
    stream.add(trade("b4", "BUY", 1, 1.0, DAY + "10:32:00Z"))
    stream.process()
    stream.check_gold({**expected, "10:30": (7.0, 0.0, 4)})
