import random
from datetime import date, datetime, timedelta, timezone

from streaming.simulation.market import (
    SYMBOLS,
    MarketClock,
    late_delay,
    make_trade,
    next_trading_moment,
    resume_market_time,
)

UTC = timezone.utc


def test_clock_starts_at_the_opening_bell_on_an_empty_topic():
    assert resume_market_time(None, date(2026, 3, 2)) == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_clock_resumes_after_the_latest_event_time_instead_of_restarting_at_nine():
    latest = datetime(2026, 3, 2, 11, 42, 10, tzinfo=UTC)
    assert resume_market_time(latest, date(2026, 3, 9)) == latest + timedelta(seconds=1)


def test_clock_resuming_after_the_close_moves_to_the_next_opening():
    latest = datetime(2026, 3, 2, 16, 59, 59, 500000, tzinfo=UTC)
    assert resume_market_time(latest, date(2026, 3, 2)) == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def test_market_clock_runs_sixty_times_faster_and_skips_the_night():
    clock = MarketClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC), speed=60)
    assert clock.advance(1.0) == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    clock = MarketClock(datetime(2026, 3, 2, 16, 59, tzinfo=UTC), speed=60)
    assert clock.advance(120) == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
    assert next_trading_moment(datetime(2026, 3, 2, 7, 0, tzinfo=UTC)) == datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_generated_trades_follow_the_message_format():
    rng = random.Random(7)
    prices = dict(SYMBOLS)
    when = datetime(2026, 3, 2, 9, 32, tzinfo=UTC)
    trades = [make_trade(rng, when, prices) for _ in range(200)]
    for t in trades:
        assert set(t) == {"trade_id", "account_id", "symbol", "side", "quantity", "price", "channel", "event_time"}
        assert t["side"] in ("BUY", "SELL") and t["quantity"] > 0 and t["price"] > 0
        assert t["channel"] in ("desktop", "web", "mobile", "laptop") and t["symbol"] in SYMBOLS
        assert t["event_time"] == "2026-03-02T09:32:00.000Z"
    assert len({t["trade_id"] for t in trades}) == 200
    assert {t["side"] for t in trades} == {"BUY", "SELL"}


def test_late_delays_land_within_or_beyond_the_watermark_as_asked():
    rng = random.Random(1)
    window, watermark = timedelta(minutes=15), timedelta(minutes=30)
    within = [late_delay(rng, window, watermark, beyond_share=0.0) for _ in range(500)]
    beyond = [late_delay(rng, window, watermark, beyond_share=1.0) for _ in range(500)]
    assert all(window <= d < watermark for d in within)
    assert all(d > watermark for d in beyond)


def test_late_delays_within_the_watermark_respect_the_maximum_lateness():
    rng = random.Random(2)
    window, watermark = timedelta(minutes=15), timedelta(minutes=30)
    delays = [late_delay(rng, window, watermark, 0.0, max_lateness=timedelta(minutes=10)) for _ in range(500)]
    assert all(timedelta(minutes=5) <= d <= timedelta(minutes=10) for d in delays)


def test_too_late_delays_go_beyond_the_watermark_by_at_most_the_maximum():
    rng = random.Random(3)
    window, watermark = timedelta(minutes=15), timedelta(minutes=30)
    delays = [late_delay(rng, window, watermark, 1.0, max_beyond=timedelta(minutes=5)) for _ in range(500)]
    assert all(watermark < d <= watermark + timedelta(minutes=5) for d in delays)
