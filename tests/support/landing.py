"""Trade files for the landing-zone loader: three files of mixed channels (two bad lines in the
second), the mobile counts after each, and a safe way to drop a file in."""

from __future__ import annotations

import json
import os

from tests.support.corpus import DAY, trade

MOBILE = "channel = 'mobile'"
BAD_JSON = '{"trade_id": "x1", "account_id": "ACC-9", "side": "BUY", '
MISTYPED = json.dumps(trade("x2", "SELL", 1, 9.0, DAY + "09:07:00Z", account_id="ACC-8", channel="mobile")
                      ).replace('"quantity": 1', '"quantity": "ten"')
# One file per iteration. The mobile trades, by window: 09:00 buy 20 sell 10; 09:15 buy 4.5
# sell 6; 09:30 buy 20. The two bad lines of the second file are sent whatever the filter.
ITERATIONS = [
    ("morning-1.jsonl", [
        trade("a1", "BUY", 10, 2.0, DAY + "09:01:00Z", channel="mobile"),
        trade("a2", "SELL", 1, 5.0, DAY + "09:02:00Z", channel="web"),
        trade("a3", "BUY", 3, 1.5, DAY + "09:20:00Z", channel="mobile", account_id="ACC-2"),
        trade("a4", "BUY", 100, 1.0, DAY + "09:03:00Z", channel="desktop"),
    ]),
    ("morning-2.jsonl", [
        trade("b1", "SELL", 4, 2.5, DAY + "09:05:00Z", channel="mobile"),
        trade("b2", "BUY", 7, 1.0, DAY + "09:06:00Z", channel="web"),
        BAD_JSON,
        MISTYPED,
    ]),
    ("morning-3.jsonl", [
        trade("c1", "SELL", 2, 3.0, DAY + "09:16:00Z", channel="mobile", account_id="ACC-3"),
        trade("c2", "BUY", 1, 10.0, DAY + "09:31:00Z", channel="mobile"),
        trade("c3", "BUY", 5, 2.0, DAY + "09:32:00Z", channel="mobile", account_id="ACC-2"),
        trade("c4", "BUY", 8, 8.0, DAY + "09:33:00Z", channel="laptop"),
    ]),
]
RUNNING_COUNTS = [2, 5, 8]


def line(record) -> str:
    return record if isinstance(record, str) else json.dumps(record)


def drop_file(landing, name, records) -> None:
    """Write elsewhere, then move in: a file source must never see a half-written file."""
    staging = landing.parent / f".{name}.tmp"
    staging.write_text("".join(f"{line(r)}\n" for r in records))
    os.replace(staging, landing / name)
