"""The embedded broker killed under the real app: the app brings it back by itself and loses or
doubles no acknowledged trade; or, when it cannot come back, the app ends with exit code 1 in the
supervisor's bound (streaming/kafka/supervisor.py). Each test prints what it measured."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from bench.sampling import child_pids
from streaming.kafka.broker import EmbeddedBroker, is_running
from streaming.kafka.supervisor import RestartPolicy
from tests.support.corpus import trade
from tests.support.kafka import TopicWriter, free_port
from tests.support.process import ARTIFACTS, RunPy
from tests.support.waiting import wait_for

BACK_WITHIN_S = 30  # the bound: kill to the broker answering again


@pytest.fixture
def stray_broker_guard(tmp_path):
    """If run.py dies uncleanly, stop the broker it left in the data dir."""
    yield
    EmbeddedBroker(tmp_path / "data" / "broker", 0).stop()  # its state file says which process, if any


def api_status(web: int) -> dict:
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/status", timeout=10).read())


def broker_pid(data: Path) -> int:
    return int(json.loads((data / "broker" / "broker.json").read_text())["pid"])


def kill_broker_jvm(data: Path) -> tuple[int, float]:
    """SIGKILL the app's broker JVM; (its pid, when)."""
    pid = broker_pid(data)
    os.kill(pid, signal.SIGKILL)
    return pid, time.time()


def keep_threads(pid: int) -> Path:
    """jstack of every JVM under `pid`, into test-artifacts/."""
    folder = ARTIFACTS / "broker-supervision"
    folder.mkdir(parents=True, exist_ok=True)
    for child in child_pids(pid):
        if b"java" in Path(f"/proc/{child}/cmdline").read_bytes():
            done = subprocess.run(["jstack", str(child)], capture_output=True, text=True, timeout=60)
            (folder / f"jstack-{child}.txt").write_text(done.stdout + done.stderr)
    return folder


def windows_of(data: Path, starts: set[datetime]) -> dict[datetime, tuple[float, float, int]]:
    """Gold's (buy, sell, trades) of these windows."""
    gold = data / "gold" / "trade_summary"
    if not (gold / "_delta_log").exists():
        return {}
    frame = DeltaTable(str(gold)).to_pandas()
    found = {}
    for row in frame.itertuples():
        start = row.window_start.to_pydatetime().replace(tzinfo=None)
        if start in starts:
            found[start] = (round(row.buy_amount, 2), round(row.sell_amount, 2), int(row.trade_count))
    return found


def oracle(trades: list[dict]) -> dict[datetime, tuple[float, float, int]]:
    """Each 15-minute window's (buy, sell, trades) of these trades."""
    sums: dict[datetime, list] = {}
    for t in trades:
        at = datetime.fromisoformat(t["event_time"].replace("Z", ""))
        start = at.replace(minute=at.minute - at.minute % 15, second=0)
        buy, sell, count = sums.setdefault(start, [0.0, 0.0, 0])
        amount = t["quantity"] * t["price"]
        sums[start] = [buy + amount * (t["side"] == "BUY"), sell + amount * (t["side"] == "SELL"), count + 1]
    return {start: (round(b, 2), round(s, 2), n) for start, (b, s, n) in sums.items()}


def test_a_killed_broker_is_brought_back_by_the_app_with_every_acknowledged_trade_counted_once(
        tmp_path, stray_broker_guard):
    data, port, web = tmp_path / "data", free_port(), free_port()
    # The simulator on at 1x: its market stays hours before the test's windows, which it never touches.
    app = RunPy("--data-dir", str(data), "--broker-port", str(port), "--port", str(web), "--clock-speed", "1")
    try:
        app.wait_for_line(f"dashboard at http://127.0.0.1:{web}")
        market = wait_for(lambda: api_status(web)["producer"]["market_time"], 60, what="the market's time")
        base = datetime.fromisoformat(market.replace("Z", "")).replace(minute=0, second=0, microsecond=0)
        base += timedelta(hours=3)

        def trades(prefix: str, first_minute: int, count: int) -> list[dict]:
            return [trade(f"{prefix}{i}", "BUY" if i % 3 else "SELL", 1 + i % 4, 10.0 + i,
                          f"{base + timedelta(minutes=first_minute + i % 40):%Y-%m-%dT%H:%M:%S}Z",
                          account_id=f"T{i % 5}") for i in range(count)]

        before = trades("before-", 0, 60)
        TopicWriter(f"127.0.0.1:{port}", "trades").send(*before)  # acks=all: each one acknowledged
        expected = oracle(before)
        wait_for(lambda: windows_of(data, set(expected)) == expected, 120, interval_s=1,
                 what="gold to hold the trades sent before the kill")
        sent_at_kill = api_status(web)["producer"]["sent"]

        pid, killed_at = kill_broker_jvm(data)
        app.wait_for_line("the embedded Kafka broker is back", BACK_WITHIN_S)
        back_at = time.time()
        assert app.proc.poll() is None and broker_pid(data) != pid and is_running(broker_pid(data))
        assert f"ended by itself (exit signal 9 (SIGKILL)); restarting it on port {port}" in app.output

        after = trades("after-", 20, 40)  # later than the first ones: within the watermark
        TopicWriter(f"127.0.0.1:{port}", "trades").send(*after)
        expected = oracle(before + after)
        wait_for(lambda: windows_of(data, set(expected)) == expected, 180, interval_s=1,
                 what="gold to equal the oracle of every trade the test sent")
        commits = data / "checkpoints" / "medallion" / "commits"
        first_batch_at = min(f.stat().st_mtime for f in commits.iterdir()
                             if f.name.isdigit() and f.stat().st_mtime > back_at)
        sent = wait_for(lambda: (s := api_status(web)["producer"]["sent"]) > sent_at_kill + 100 and s, 120,
                        interval_s=1, what="the simulator's sent count to grow again")
        broker = wait_for(lambda: (b := api_status(web)["broker"])["restart_count"] == 1 and b, 30, interval_s=1,
                          what="/api/status to report the restart")
        assert broker["state"] == "up" and broker["error"] is None
        assert broker["restarts"][0]["said"].startswith("broker restarted at")
        assert broker["restarts"][0]["said"].endswith("(exit signal 9)")
        queries = api_status(web)["queries"]
        assert all(q["error"] is None for q in queries)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{web}/metrics", timeout=10).read().decode()
        assert "\ntradesummary_broker_restarts_total 1.0\n" in metrics
        print(f"\nkill -> broker back {back_at - killed_at:.1f} s; kill -> first new batch "
              f"{first_batch_at - killed_at:.1f} s; the test's acknowledged trades {len(before) + len(after)} "
              f"({len(before)} before the kill); simulator sent {sent_at_kill} at the kill, {sent} after; "
              f"restart said: {broker['restarts'][0]}; query restarts {[q['restarts'] for q in queries]}")
        print("\n".join(line for line in app.output.splitlines() if "broker" in line or "query" in line))
        code, _ = app.terminate(timeout_s=90)
        assert code == 0, app.output
    finally:
        app.kill()


def test_a_broker_that_cannot_come_back_ends_the_app_with_exit_code_1_within_the_bound(tmp_path, stray_broker_guard):
    data, port = tmp_path / "data", free_port()
    app = RunPy("--no-dashboard", "--no-producer", "--data-dir", str(data), "--broker-port", str(port),
                "--port", str(free_port()))
    taken = socket.socket()
    try:
        app.wait_for_line("query 'medallion' started")
        pid, killed_at = kill_broker_jvm(data)
        wait_for(lambda: not is_running(pid), 15, interval_s=0.05, what="the killed broker to end")
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the dead broker's TIME_WAITs
        taken.bind(("127.0.0.1", port))
        taken.listen()
        app.wait_for_line("did not start again in 3 tries", RestartPolicy().bound_s())
        gave_up_after = time.time() - killed_at
        try:
            code = app.wait(120)
        except subprocess.TimeoutExpired:  # keep what its JVMs were doing for whoever looks
            raise AssertionError(f"run.py did not stop (threads in {keep_threads(app.proc.pid)}):\n{app.output}")
        assert code == 1, app.output
        assert f"port {port} is already in use" in app.output and "Traceback" not in app.output
        print(f"\nkill -> given up {gave_up_after:.1f} s (bound {RestartPolicy().bound_s():.0f} s), "
              f"-> exit 1 {time.time() - killed_at:.1f} s")
    finally:
        taken.close()
        app.kill()
