"""The README's commands, word for word, as a newcomer runs them: in a fresh clone of HEAD, from
its root, with no flags, the default relative data dir and no Java parts fetched yet. Ports come
from TRADE_SUMMARY_PORT / TRADE_SUMMARY_BROKER_PORT only when 8050 / 9092 are taken."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streaming.kafka.broker import EmbeddedBroker, port_is_free
from tests.support.kafka import free_port
from tests.support.process import REPO, Command
from tests.support.readme import commands, run_command
from tests.support.waiting import wait_for


@pytest.fixture
def clone(tmp_path):
    """A fresh clone of HEAD; afterwards any broker a failed run left in its data dir is stopped."""
    root = tmp_path / "trade-summary"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(root)], check=True, timeout=120)
    yield root
    EmbeddedBroker(root / "data" / "broker", 0).stop()


@pytest.fixture
def user_env():
    """The environment of a user whose `python` is the one running these tests, with ports moved
    only off ones already taken."""
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for variable, port in (("TRADE_SUMMARY_PORT", 8050), ("TRADE_SUMMARY_BROKER_PORT", 9092)):
        if not port_is_free(port):
            env[variable] = str(free_port())
    return env


class Shell(Command):
    """One README line run by bash in the clone. Stopped as a user's Ctrl-C stops it: the signal
    reaches run.py (bash's child, or bash itself once it execs it), and bash exits with its code."""

    def __init__(self, line: str, cwd: Path, env: dict):
        super().__init__(["bash", "-c", line], cwd=cwd, env=env)

    def run_py(self) -> int:
        def child():
            pid = self.proc.pid  # bash may exec a list's last command itself
            for candidate in [pid, *Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]:
                if "run.py" in Path(f"/proc/{candidate}/cmdline").read_text():
                    return int(candidate)
            return None

        return wait_for(child, 300, what="run.py under bash")

    def stop(self, timeout_s: float = 60) -> int:
        os.kill(self.run_py(), signal.SIGTERM)
        return self.wait(timeout_s)


def api(env: dict, path: str) -> dict:
    port = env.get("TRADE_SUMMARY_PORT", "8050")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return json.loads(answer.read())


def summary_with_trades(app: Shell, env: dict, path: str = "/api/summary"):
    """The app's summary once it counts a trade; the app's own output if it ended first (a port
    another app on this machine took, say)."""
    if app.proc.poll() is not None:
        raise AssertionError(f"the README's command ended ({app.proc.returncode}) first:\n{app.output}")
    try:
        answer = api(env, path)
    except OSError:
        return None
    return answer if sum(w["trades"] for w in answer["windows"]) > 0 else None


def lake(clone: Path, table: str):
    return DeltaTable(str(clone / "data" / table)).to_pandas()


def assert_reads_like_a_product(output: str) -> None:
    """No traceback, no stray ERROR or warning, no line per jar."""
    assert "Traceback" not in output and "could not" not in output, output
    assert not re.search(r"\bERROR\b", output), output
    assert not re.search(r"^\S+\s+\d+\s+\S+\.jar$", output, re.MULTILINE), output


def test_the_readmes_run_command_starts_in_a_fresh_clone_resumes_and_stops_cleanly(clone, user_env):
    first = Shell(run_command(), clone, user_env)
    try:
        before = wait_for(lambda: summary_with_trades(first, user_env), 300, interval_s=1, what="a gold window")
        assert first.stop() == 0, first.output
    finally:
        first.kill()
    assert_reads_like_a_product(first.output)
    assert re.search(r"the Java parts: 86 jars, [\d.]+ MiB, fetched in", first.output), first.output
    assert (clone / "data" / "gold" / "trade_summary").is_dir()  # the relative ./data, in the clone
    counted = lake(clone, "gold/trade_summary").set_index("window_start")["trade_count"]
    assert counted.sum() >= sum(w["trades"] for w in before["windows"])

    again = Shell(run_command(), clone, user_env)
    try:
        after = wait_for(lambda: summary_with_trades(again, user_env), 180, interval_s=1,
                         what="the page after a restart")
        resumed = {w["window_start"]: w["trades"] for w in after["windows"]}
        for window_start, trades in counted.items():  # neither reset nor lost
            assert resumed.get(window_start.strftime("%Y-%m-%dT%H:%M:%SZ"), 0) >= trades
        time.sleep(5)  # a few more batches after the restart
        assert again.stop() == 0, again.output
    finally:
        again.kill()
    assert_reads_like_a_product(again.output)
    assert "fetching" not in again.output  # the Java parts are fetched once
    # Neither doubled: every trade the lake holds is counted once, on time or too late.
    gold, silver = lake(clone, "gold/trade_summary"), lake(clone, "silver/trades")
    assert gold["trade_count"].sum() + len(lake(clone, "gold/late_trades")) == silver["trade_id"].nunique() \
        == len(silver)
    assert gold["trade_count"].sum() > counted.sum()


def test_the_readmes_loader_example_shows_the_sample_day(clone, user_env):
    load, run = commands("Common flags")[-2:]
    loader = Shell(load, clone, user_env)
    try:
        assert loader.wait(600) == 0, loader.output
    finally:
        loader.kill()
    assert_reads_like_a_product(loader.output)
    assert "364 records sent" in loader.output

    app = Shell(run, clone, user_env)
    try:
        day = wait_for(lambda: summary_with_trades(app, user_env, "/api/summary?day=2026-03-02"), 300, interval_s=1,
                       what="the sample day's windows")
        assert day["day"] == "2026-03-02"
        status = wait_for(lambda: _caught_up(user_env), 120, interval_s=1, what="the pipeline caught up")
        assert status["producer"]["enabled"] is False
        assert app.stop() == 0, app.output
    finally:
        app.kill()
    assert_reads_like_a_product(app.output)
    gold, silver = lake(clone, "gold/trade_summary"), lake(clone, "silver/trades")
    assert len(silver) == 360  # the sample day's valid trades (tests/unit/test_sample_day.py)
    assert gold["trade_count"].sum() + len(lake(clone, "gold/late_trades")) == 360
    assert len(lake(clone, "silver/quarantine")) == 3  # of the 364 lines, 3 are bad and 1 is a repeat


def _caught_up(env: dict):
    try:
        status = api(env, "/api/status")
    except OSError:
        return None
    lag = status.get("kafka", {}).get("total_lag", {})
    return status if lag and all(value == 0 for value in lag.values()) else None
