"""How many of a day's trades each watermark delay would have left out (/api/lateness), on the real
pipeline: trades arriving a known time behind the stream's front, then the curve, checked point by
point against a count by hand and at the run's own delay against gold/late_trades; a restart
changes neither. The lateness each batch stores beside its trades is the one derived from the
ledger, also when a batch runs again."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd

from dashboard.api import lateness_points
from dashboard.dash_app import create_app
from dashboard.readers import LatenessReader
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, LATE_TRADES, SILVER
from streaming.medallion.lateness import LATENESS, trade_lateness
from tests.support.corpus import DAY, trade

FRONT = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
BEHIND_MINUTES = (1, 15, 30, 60, 90)
MINUTE_US = 60_000_000


def at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_curve_counts_the_trades_each_delay_would_have_left_out(stream, settings):
    stream.add(trade("front", "BUY", 1, 10.0, at(FRONT)))
    stream.process()
    stream.add(*(trade(f"behind-{m}", "SELL", 1, 10.0, at(FRONT - timedelta(minutes=m))) for m in BEHIND_MINUTES),
               trade("ahead", "BUY", 1, 10.0, at(FRONT + timedelta(minutes=5))))
    stream.process()

    curve = lateness_curve(settings)

    by_hand = {minutes * 60.0: sum(1 for behind in BEHIND_MINUTES if behind >= minutes)
               for minutes in (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120)}
    assert {point["delay_s"]: point["too_late"] for point in curve["curve"]} == by_hand
    assert curve["trades"] == 7 and curve["not_judged"] == 0 and curve["watermark_s"] == 1800.0
    at_the_watermark = next(p for p in curve["curve"] if p["delay_s"] == settings.watermark.total_seconds())
    late = stream.table(LATE_TRADES)
    assert at_the_watermark["too_late"] == len(late[pd.to_datetime(late["event_time"]).dt.date.astype(str)
                                                    == DAY[:10]]) == 3
    assert at_the_watermark["share"] == 3 / 7

    stream.restart()
    stream.process()
    assert lateness_curve(settings) == curve


def test_the_lateness_stored_beside_each_trade_is_the_one_derived_from_the_ledger(stream, settings):
    stream.add(trade("front", "BUY", 1, 10.0, at(FRONT)))
    stream.process()
    stream.add(trade("behind-50", "SELL", 1, 10.0, at(FRONT - timedelta(minutes=50))),
               trade("ahead", "BUY", 1, 10.0, at(FRONT + timedelta(minutes=5))))
    stream.process()
    first = stored_and_derived(stream, settings)
    assert first == {"front": 0, "behind-50": 50 * MINUTE_US, "ahead": 0}

    stream.restart(forget_last_commit=True)  # the last batch runs again, through the driver's MERGEs
    stream.process()
    assert stored_and_derived(stream, settings) == first

    tally = LatenessReader(Lake(settings.data_dir), timedelta(minutes=45), lateness_points(timedelta(minutes=45)))
    day = tally.read(DAY[:10])  # measured from the front whatever the delay
    assert (day.judged, day.too_late(45 * MINUTE_US), day.too_late(60 * MINUTE_US)) == (3, 1, 0)


def stored_and_derived(stream, settings) -> dict[str, int]:
    """Silver's lateness per trade, checked equal to lateness.trade_lateness's from the ledger."""
    silver = stream.table(SILVER)
    derived = trade_lateness(silver, stream.table(BATCH_WATERMARKS), settings.watermark)
    assert silver[LATENESS].tolist() == derived.tolist()
    return dict(zip(silver["trade_id"], silver[LATENESS].tolist()))


def lateness_curve(settings) -> dict:
    client = create_app(Lake(settings.data_dir), watermark=settings.watermark).server.test_client()
    answer = client.get(f"/api/lateness?day={DAY[:10]}")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_json()
