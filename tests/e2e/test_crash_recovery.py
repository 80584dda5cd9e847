"""SIGKILL the whole app several times while trades flow; afterwards every offset is in bronze
once, every trade in silver once, and gold equals the exact sums of what was produced.

The broker is external (started by the test fixtures), so only the app dies.
"""

import json
import os
import random
import signal
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

from deltalake import DeltaTable

from streaming.lake.store import Lake
from streaming.lake.tables import BRONZE, GOLD, QUARANTINE, SILVER
from tests.support.corpus import trade
from tests.support.kafka import TopicWriter
from tests.support.process import RunPy
from tests.support.waiting import wait_for

START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


class SteadyProducer(threading.Thread):
    """Sends trades in event-time order (one market second apart), some twice, some broken."""

    def __init__(self, writer: TopicWriter, rate: float = 150):
        super().__init__(daemon=True)
        self.writer, self.rate = writer, rate
        self.stop_event = threading.Event()
        self.records = 0
        self.broken = 0
        self.trades: dict[str, dict] = {}
        self.rng = random.Random(42)

    def run(self):
        n = 0
        while not self.stop_event.is_set():
            n += 1
            at = (START + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
            t = trade(f"c{n}", self.rng.choice(["BUY", "SELL"]), self.rng.randint(1, 50),
                      round(self.rng.uniform(10, 500), 2), at, account_id=f"A{n % 17}")
            copies = 2 if self.rng.random() < 0.1 else 1
            for _ in range(copies):
                self.writer.producer.produce(self.writer.topic, key=t["account_id"].encode(),
                                             value=json.dumps(t).encode())
            self.trades[t["trade_id"]] = t
            self.records += copies
            if n % 50 == 0:
                self.writer.producer.produce(self.writer.topic, value=b"{broken")
                self.records += 1
                self.broken += 1
            self.writer.producer.poll(0)
            time.sleep(1 / self.rate)
        assert self.writer.producer.flush(30) == 0


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def oracle(trades):
    sums = defaultdict(lambda: [0.0, 0.0, 0])
    for t in trades.values():
        at = datetime.fromisoformat(t["event_time"].replace("Z", "+00:00"))
        window = at.replace(minute=at.minute - at.minute % 15, second=0)
        sums[window][0 if t["side"] == "BUY" else 1] += t["quantity"] * t["price"]
        sums[window][2] += 1
    return {w: (round(b, 2), round(s, 2), c) for w, (b, s, c) in sums.items()}


def test_repeated_sigkills_lose_nothing_and_double_nothing(broker, topic, tmp_path):
    data = tmp_path / "data"
    common = ["--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--data-dir", str(data),
              "--no-dashboard", "--no-producer"]
    producer = SteadyProducer(TopicWriter(broker.bootstrap_servers, topic))
    producer.start()
    rng = random.Random(7)
    try:
        for round_ in range(3):
            app = RunPy(*common)
            try:
                app.wait_for_line("query 'medallion' started", 120)
                if round_ == 0:  # let the first batches land, so later kills hit a live pipeline
                    wait_for(lambda: (Path(Lake(data).location(GOLD)) / "_delta_log").exists() or None, 90,
                             what="the first gold commit")
                time.sleep(rng.uniform(2, 6))
                jvms = children_of(app.proc.pid)
                app.proc.send_signal(signal.SIGKILL)
                app.proc.wait(10)
                # Spark's JVM (its own session) must die with us, not linger.
                wait_for(lambda: not any(alive(p) for p in jvms) or None, 30, what="the JVM to exit")
            finally:
                app.kill()
    finally:
        producer.stop_event.set()
        producer.join(60)

    final = RunPy(*common, "--available-now")
    assert final.wait(300) == 0, final.output

    bronze = DeltaTable(Lake(data).location(BRONZE)).to_pandas()
    assert len(bronze) == producer.records
    assert not bronze[["partition", "offset"]].duplicated().any()
    silver = DeltaTable(Lake(data).location(SILVER)).to_pandas()
    assert sorted(silver["trade_id"]) == sorted(producer.trades)
    quarantine = DeltaTable(Lake(data).location(QUARANTINE)).to_pandas()
    assert len(quarantine) == producer.broken
    assert not quarantine[["partition", "offset"]].duplicated().any()
    gold = DeltaTable(Lake(data).location(GOLD)).to_pandas()
    got = {row.window_start.to_pydatetime(): (round(row.buy_amount, 2), round(row.sell_amount, 2), row.trade_count)
           for row in gold.itertuples()}
    assert got == oracle(producer.trades)
