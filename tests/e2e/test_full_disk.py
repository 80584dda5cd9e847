"""A full disk under --data-dir: micro-batches fail clearly (the cause, not a traceback), the
query is restarted from its checkpoint, and once space is back the pipeline carries on with
every table exact: each record once in bronze, each trade once in silver, gold equal to them."""

import json
import signal
import urllib.request

import pytest
from deltalake import DeltaTable

from streaming.lake.store import Lake
from streaming.lake.tables import BRONZE, GOLD, SILVER
from tests.support.corpus import DAY, trade
from tests.support.disk import fill, small_filesystem
from tests.support.kafka import TopicWriter, free_port, new_topic, running_broker
from tests.support.process import RunPy
from tests.support.waiting import wait_for


@pytest.fixture
def own_broker(tmp_path):
    with running_broker(tmp_path / "own-broker") as broker:  # on the roomy disk
        yield broker


def table(data, which):
    location = Lake(data).location(which)
    return DeltaTable(location).to_pandas() if DeltaTable.is_deltatable(location) else None


def gold_trades(data) -> int:
    gold = table(data, GOLD)
    return 0 if gold is None else int(gold["trade_count"].sum())


def status(web: int) -> dict:
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/status", timeout=10).read())["queries"][0]


def test_a_full_disk_fails_batches_clearly_and_the_pipeline_carries_on_once_space_is_back(own_broker, tmp_path):
    with small_filesystem(tmp_path / "small", "96m") as disk:
        data, web = disk / "data", free_port()
        topic = new_topic(own_broker.bootstrap_servers)
        writer = TopicWriter(own_broker.bootstrap_servers, topic)
        app = RunPy("--no-producer", "--bootstrap-servers", own_broker.bootstrap_servers, "--topic", topic,
                    "--data-dir", str(data), "--port", str(web))
        try:
            app.wait_for_line("query 'medallion' started")
            writer.send(*(trade(f"a{i}", "BUY", 1, 10.0, DAY + f"09:{i:02d}:00Z", account_id=f"A{i}")
                          for i in range(5)))
            wait_for(lambda: gold_trades(data) == 5, 90, what="the first trades in gold")

            filler = fill(disk)
            writer.send(*(trade(f"b{i}", "SELL", 1, 2.0, DAY + f"09:{10 + i:02d}:00Z", account_id=f"B{i}")
                          for i in range(5)))
            app.wait_for_line("No space left on device", timeout_s=120)
            filler.unlink()

            wait_for(lambda: gold_trades(data) == 10, 180, what="gold to carry on once space is back")
            # The failed batch may have completed every table before Spark's own checkpoint write
            # failed: gold can be whole while the query waits out its restart backoff.
            wait_for(lambda: (query := status(web))["active"] and query["restarts"] >= 1, 60,
                     what="the query to run again after its restart")
            query = status(web)
            bronze, silver = table(data, BRONZE), table(data, SILVER)
            assert len(bronze) == 10 and not bronze.duplicated(["partition", "offset"]).any()
            assert sorted(silver["trade_id"]) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
            assert gold_trades(data) == 10
            assert "Traceback" not in (query["last_restart_error"] or "")
            code, _ = app.terminate(signal.SIGTERM)
            assert code == 0, app.output
        finally:
            app.kill()
