"""The simulated market, as pure functions: a clock that runs faster than the wall clock, the
trades it makes and how late a late trade is. simulator.py sends them to Kafka; sample_day.py
writes a day of them to files.
"""

from __future__ import annotations

import random
import uuid
from datetime import date, datetime, timedelta, timezone
from datetime import time as dtime

MARKET_OPEN = dtime(9, 0)
MARKET_CLOSE = dtime(17, 0)
SYMBOLS = {  # a handful of liquid names with plausible prices
    "AAPL": 228.0, "MSFT": 415.0, "NVDA": 135.0, "AMZN": 198.0,
    "GOOGL": 172.0, "META": 560.0, "JPM": 215.0, "TSLA": 245.0,
}
CHANNELS = ("desktop", "web", "mobile", "laptop")
CHANNEL_WEIGHTS = (0.35, 0.25, 0.3, 0.1)
ACCOUNTS = 250


# -- the market clock ------------------------------------------------------------------------
def market_open_on(day: date) -> datetime:
    return datetime.combine(day, MARKET_OPEN, tzinfo=timezone.utc)


def next_trading_moment(moment: datetime) -> datetime:
    """The moment itself while the market is open; else the next opening (09:00 UTC)."""
    moment = moment.astimezone(timezone.utc)
    if moment.time() < MARKET_OPEN:
        return market_open_on(moment.date())
    if moment.time() >= MARKET_CLOSE:
        return market_open_on(moment.date() + timedelta(days=1))
    return moment


def resume_market_time(latest_event_time: datetime | None, today: date) -> datetime:
    """Where the simulated market starts: just after the latest trade on the topic, or at
    today's opening when the topic is empty. A restart never rewinds to 09:00."""
    if latest_event_time is None:
        return market_open_on(today)
    return next_trading_moment(latest_event_time + timedelta(seconds=1))


class MarketClock:
    """Market time that advances `speed` times faster than the wall clock, only while running."""

    def __init__(self, start: datetime, speed: float):
        self._market = start
        self.speed = speed

    def now(self) -> datetime:
        return self._market

    def advance(self, wall_seconds: float) -> datetime:
        self._market = next_trading_moment(self._market + timedelta(seconds=wall_seconds * self.speed))
        return self._market


# -- trades -------------------------------------------------------------------------------
def format_event_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_trade(rng: random.Random, event_time: datetime, prices: dict[str, float]) -> dict:
    """One trade as on the topic (PRODUCT.md). Prices follow a small random walk in `prices`."""
    symbol = rng.choice(tuple(prices))
    prices[symbol] = max(1.0, prices[symbol] * (1 + rng.gauss(0, 0.0008)))
    return {
        "trade_id": uuid.UUID(int=rng.getrandbits(128)).hex,
        "account_id": f"ACC-{rng.randrange(1, ACCOUNTS + 1):05d}",
        "symbol": symbol,
        "side": "BUY" if rng.random() < 0.52 else "SELL",
        "quantity": max(1, int(rng.lognormvariate(3.0, 1.0))),
        "price": round(prices[symbol], 2),
        "channel": rng.choices(CHANNELS, CHANNEL_WEIGHTS)[0],
        "event_time": format_event_time(event_time),
    }


def late_delay(rng: random.Random, window: timedelta, watermark: timedelta, beyond_share: float,
               max_lateness: timedelta | None = None, max_beyond: timedelta | None = None) -> timedelta:
    """How late a late trade is. Within the watermark (up to `max_lateness`) it lands in an
    earlier window (a correction); beyond it (by up to `max_beyond`), Spark drops it (too late)."""
    if rng.random() < beyond_share:
        return watermark + timedelta(seconds=rng.uniform(0.1, 1.0) * (max_beyond or watermark).total_seconds())
    high = min(max_lateness, watermark) if max_lateness else watermark * 0.9
    low = min(window, watermark * 0.5, high * 0.5 if max_lateness else high)
    return timedelta(seconds=rng.uniform(low.total_seconds(), high.total_seconds()))


MALFORMED_SAMPLES = (
    b"{not json",
    b"[]",
    b'{"trade_id": "x", "side": "HOLD"}',
    b'{"trade_id": "x", "account_id": "a", "symbol": "AAPL", "side": "BUY", "quantity": -5, '
    b'"price": 10, "channel": "web", "event_time": "2026-03-02T09:32:00Z"}',
    b"\xff\xfe\x00binary",
)
