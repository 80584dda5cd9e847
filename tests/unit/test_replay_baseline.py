"""A replay's baseline: what silver already holds from before the replay time (pure)."""

from datetime import datetime, timezone

import pandas as pd
import pyarrow as pa

from streaming.replay import baseline_from_silver


def test_baseline_sums_each_trade_before_the_replay_time_once():
    silver = pd.DataFrame({
        "trade_id": ["a", "b", "a", "c"], "side": ["BUY", "SELL", "BUY", "BUY"], "amount": [10.0, 4.0, 10.0, 1.0],
        "event_time": pd.to_datetime(["2026-03-02 09:14:59", "2026-03-02 09:15:00", "2026-03-02 09:14:59",
                                      "2026-03-02 09:01:00"], utc=True),
        "kafka_timestamp": pd.to_datetime(["2026-03-02 10:00", "2026-03-02 10:00", "2026-03-02 10:00",
                                           "2026-03-02 12:00"], utc=True),
    })
    base = baseline_from_silver(pa.Table.from_pandas(silver), datetime(2026, 3, 2, 11, tzinfo=timezone.utc),
                                pd.Timedelta("15min"))
    assert sorted(base.skip_trade_ids) == ["a", "b"]
    assert base.windows == {pd.Timestamp("2026-03-02 09:00", tz="UTC"): (10.0, 0.0, 1),
                            pd.Timestamp("2026-03-02 09:15", tz="UTC"): (0.0, 4.0, 1)}
