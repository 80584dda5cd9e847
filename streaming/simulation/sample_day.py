"""A sample trading day for `python run.py load`: four JSON-lines files, one trade per line, for
2026-03-02 09:00-17:00 UTC. Deterministic (a fixed seed), so `python -m streaming.simulation.sample_day`
rewrites samples/trading-day/ byte for byte and prints what the files hold.

The last file also holds what a captured feed does: one trade delivered twice and three bad
lines (invalid JSON, a mistyped quantity, an unknown side), so that loading the day shows
where each ends up (the duplicate counts once; the bad lines land in silver/quarantine).
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

from streaming.simulation.market import SYMBOLS, make_trade

DAY = date(2026, 3, 2)
SEED = 20260302
SESSIONS = (  # (from, to, trades): one file each
    (time(9), time(11), 110),
    (time(11), time(13), 70),
    (time(13), time(15), 80),
    (time(15), time(17), 100),
)
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "samples" / "trading-day"
BAD_LINES = (
    '{"trade_id":"bad-json-1","account_id":"ACC-00007","symbol":"AAPL","side":"BUY","quantity":5,',
    '{"trade_id":"bad-type-1","account_id":"ACC-00008","symbol":"MSFT","side":"SELL","quantity":"ten",'
    '"price":415.0,"channel":"mobile","event_time":"2026-03-02T15:40:00.000Z"}',
    '{"trade_id":"bad-side-1","account_id":"ACC-00009","symbol":"NVDA","side":"HOLD","quantity":3,'
    '"price":135.0,"channel":"mobile","event_time":"2026-03-02T16:20:00.000Z"}',
)


def file_name(start: time, end: time) -> str:
    return f"trades-{start:%H%M}-{end:%H%M}.jsonl"


def trading_day(seed: int = SEED) -> dict[str, list[str]]:
    """File name -> its lines, in time order within each file."""
    rng = random.Random(seed)
    prices = dict(SYMBOLS)
    files = {}
    for start, end, count in SESSIONS:
        opening = datetime.combine(DAY, start, tzinfo=timezone.utc)
        seconds = int((datetime.combine(DAY, end) - datetime.combine(DAY, start)).total_seconds())
        moments = sorted(opening + timedelta(seconds=rng.randrange(seconds)) for _ in range(count))
        files[file_name(start, end)] = [json.dumps(make_trade(rng, m, prices), separators=(",", ":"))
                                        for m in moments]
    last = files[file_name(*SESSIONS[-1][:2])]
    last.insert(31, last[30])  # a trade captured twice
    for position, line in zip((12, 47, 88), BAD_LINES):
        last.insert(position, line)
    return files


def summary(files: dict[str, list[str]]) -> dict:
    """What the day holds: lines, distinct valid trades by channel, and their buy/sell totals."""
    trades: dict[str, dict] = {}
    for lines in files.values():
        for line in lines:
            try:
                trade = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(trade.get("quantity"), int) and trade.get("side") in ("BUY", "SELL"):
                trades.setdefault(trade["trade_id"], trade)  # the first copy wins
    amounts: dict[str, float] = {"BUY": 0.0, "SELL": 0.0}
    for trade in trades.values():
        amounts[trade["side"]] += trade["quantity"] * trade["price"]
    return {
        "lines": sum(len(lines) for lines in files.values()),
        "valid_trades": len(trades),
        "by_channel": dict(sorted(Counter(t["channel"] for t in trades.values()).items())),
        "buy_amount": round(amounts["BUY"], 2),
        "sell_amount": round(amounts["SELL"], 2),
    }


def write(directory: Path) -> dict[str, list[str]]:
    directory.mkdir(parents=True, exist_ok=True)
    files = trading_day()
    for name, lines in files.items():
        (directory / name).write_text("".join(f"{line}\n" for line in lines))
    return files


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR
    written = write(target)
    print(f"wrote {', '.join(written)} to {target}")
    print(json.dumps(summary(written), indent=2))
