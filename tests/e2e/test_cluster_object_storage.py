"""The pipeline on a Spark standalone cluster (a master and two one-core workers) with its
tables on an S3-compatible store and its checkpoints on a local dir, fed by an external
broker: the tables are exact, the executors wrote the table files, and a SIGTERM and restart
continue exactly, with the dashboard reading the tables from the store and never showing a
secret.
"""

import json
import signal
import urllib.request
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.parquet as pq
from deltalake import DeltaTable

from dashboard.client import store_snapshot
from streaming.lake.files import WRITTEN_BY
from streaming.lake.locations import arrow_filesystem
from streaming.lake.store import Lake
from streaming.lake.tables import BRONZE, GOLD, QUARANTINE, SILVER
from tests.support.cluster import s3_server, standalone_cluster
from tests.support.corpus import trade
from tests.support.kafka import TopicWriter, free_port
from tests.support.process import RunPy
from tests.support.waiting import wait_for

START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def trades(first: int, count: int) -> list[dict]:
    """`count` trades a market second apart from trade `first` on, over several accounts."""
    made = []
    for n in range(first, first + count):
        at = (START + timedelta(seconds=7 * n)).isoformat().replace("+00:00", "Z")
        made.append(trade(f"k{n}", "BUY" if n % 3 else "SELL", 1 + n % 9, 10.0 + n % 50, at, account_id=f"A{n % 11}"))
    return made


def expected_gold(sent: list[dict]) -> dict:
    sums = defaultdict(lambda: [0.0, 0.0, 0])
    for t in {t["trade_id"]: t for t in sent}.values():
        at = datetime.fromisoformat(t["event_time"].replace("Z", "+00:00"))
        window = at.replace(minute=at.minute - at.minute % 15, second=0)
        sums[window][0 if t["side"] == "BUY" else 1] += t["quantity"] * t["price"]
        sums[window][2] += 1
    return {w: (round(b, 2), round(s, 2), c) for w, (b, s, c) in sums.items()}


def read(lake: Lake, table, options: dict):
    return DeltaTable(lake.location(table), storage_options=options).to_pandas()


def gold_of(lake: Lake, options: dict) -> dict:
    return {row.window_start.to_pydatetime(): (round(row.buy_amount, 2), round(row.sell_amount, 2), row.trade_count)
            for row in read(lake, GOLD, options).itertuples()}


def writers_of(lake: Lake, table, options: dict) -> list[dict]:
    """Who wrote each file of the table (the Parquet metadata the task puts in)."""
    filesystem, _ = arrow_filesystem(lake.location(table), options)
    found = []
    location = lake.location(table).rstrip("/") + "/"
    for path in DeltaTable(lake.location(table), storage_options=options).file_uris():
        name = path.removeprefix(location)  # under its day's directory, in bronze and silver
        metadata = pq.read_metadata(name, filesystem=filesystem).metadata or {}
        found.append(json.loads(metadata.get(WRITTEN_BY, b"{\"cwd\": \"(not written by a task)\"}")))
    return found


class DashboardOverHttp:
    """The few calls dashboard.client makes of a Flask test client, against a running dashboard."""

    class Answer:
        def __init__(self, status_code: int, data: bytes):
            self.status_code, self.data = status_code, data

        def get_json(self):
            return json.loads(self.data)

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def post(self, path: str, json: dict):
        request = urllib.request.Request(self.base + path, data=_dumps(json), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return self.Answer(response.status, response.read())

    def get_text(self, path: str) -> str:
        with urllib.request.urlopen(self.base + path, timeout=30) as response:
            return response.read().decode()


def _dumps(value) -> bytes:
    return json.dumps(value).encode()


def test_a_standalone_cluster_writes_exact_tables_to_object_storage_and_restarts(broker, topic, tmp_path):
    with s3_server(tmp_path / "s3") as s3, standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        s3.create_bucket("lake")
        options = s3.env
        lake = Lake("s3://lake/trades", options)
        args = ["--no-dashboard", "--no-producer", "--master", cluster.url, "--data-dir", "s3://lake/trades",
                "--checkpoint-dir", str(tmp_path / "checkpoints"), "--broker-dir", str(tmp_path / "unused-broker"),
                "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--trigger", "2 seconds",
                # The endpoint by flag and the credentials from the environment, as a user may
                # split them; an http:// endpoint needs no AWS_ALLOW_HTTP.
                "--storage-option", f"AWS_ENDPOINT_URL={s3.endpoint}"]
        app_env = {k: v for k, v in options.items() if k not in ("AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP")}
        writer = TopicWriter(broker.bootstrap_servers, topic)
        first = trades(0, 300)
        writer.send(*first, *first[:20], b"{broken", b"\xff not utf-8")  # 20 copies and 2 bad records

        app = RunPy(*args, env=app_env)
        try:
            app.wait_for_line("query 'medallion' started", 240)
            wait_for(lambda: (gold_of(lake, options) == expected_gold(first)
                              and len(read(lake, BRONZE, options)) == 322) or None, 240, 2,
                     what="gold to match the first trades and bronze to hold every record")
            code, _ = app.terminate(signal.SIGTERM, 60)
            assert code == 0, app.output
        finally:
            app.kill()
        assert "test-secret-never-printed" not in app.output

        bronze = read(lake, BRONZE, options)
        assert len(bronze) == 322 and not bronze[["partition", "offset"]].duplicated().any()
        assert sorted(read(lake, SILVER, options)["trade_id"]) == sorted(t["trade_id"] for t in first)
        assert len(read(lake, QUARANTINE, options)) == 2
        # The executors wrote the files: their working dirs are under the workers' work dirs.
        writers = writers_of(lake, BRONZE, options) + writers_of(lake, SILVER, options)
        worker_dirs = [str(d.resolve()) for d in cluster.worker_dirs]
        elsewhere = [w for w in writers if not any(w["cwd"].startswith(d) for d in worker_dirs)]
        assert writers and not elsewhere, (elsewhere, worker_dirs)
        assert not (tmp_path / "unused-broker").exists()  # an external broker: no embedded one started

        second = trades(300, 200)
        writer.send(*second, *first[:5], b"[1, 2]")
        web = free_port()  # this time with the dashboard, which reads the tables from the store too
        app = RunPy(*[a for a in args if a != "--no-dashboard"], "--port", str(web), env=app_env)
        try:
            wait_for(lambda: (gold_of(lake, options) == expected_gold(first + second)
                              and len(read(lake, BRONZE, options)) == 322 + 206) or None, 300, 2,
                     what="gold to match every trade after the restart and bronze to hold every record")
            page = DashboardOverHttp(web)
            assert store_snapshot(page)["kpis"]["trades"] == 500
            shown = page.get_text("/") + page.get_text("/_dash-layout") + page.get_text("/api/status")
            assert "test-secret-never-printed" not in shown
            code, _ = app.terminate(signal.SIGTERM, 60)
            assert code == 0, app.output
        finally:
            app.kill()

        bronze = read(lake, BRONZE, options)
        assert len(bronze) == 322 + 206 and not bronze[["partition", "offset"]].duplicated().any()
        silver = read(lake, SILVER, options)
        assert len(silver) == 500 and not silver["trade_id"].duplicated().any()
        assert len(read(lake, QUARANTINE, options)) == 3
        assert (Path(tmp_path / "checkpoints") / "medallion" / "commits").is_dir()
