"""A real Prometheus (Debian's, tests/install-prometheus.sh) scraping /metrics behind
--metrics-token-file with the scrape config docs/monitoring.md shows: `authorization:
{credentials_file: ...}` gets the figures, a wrong token gets none."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest

from streaming.config import Settings
from streaming.run.users import Logins, add_user
from streaming.run.web import WebServer, bind_address
from tests.support.kafka import free_port
from tests.support.waiting import wait_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="Prometheus: bash tests/install-prometheus.sh")
TOKEN = "0123456789abcdef0123456789abcdef"


def test_prometheus_scrapes_with_the_token_file_and_a_wrong_token_gets_nothing(tmp_path):
    from run import serve_metrics

    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "prometheus.token").write_text(TOKEN + "\n")
    (tmp_path / "wrong.token").write_text("f" * 32 + "\n")
    add_user(tmp_path / "users.txt", "bob", "viewer", "bob's password")
    logins = Logins(tmp_path / "users.txt", tmp_path / "token", tmp_path / "session.key")
    server = serve_metrics(None, lambda: (b"tradesummary_probe 1\n", "text/plain; version=0.0.4"), ("127.0.0.1",),
                           logins=logins)
    app_port, web_port = free_port(), free_port()
    web = WebServer(server, bind_address("127.0.0.1", app_port), Settings.max_pages, "metrics")
    target = {"static_configs": [{"targets": [f"127.0.0.1:{app_port}"]}]}
    (tmp_path / "prometheus.yml").write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {"job_name": "with-token", **target,
             "authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "prometheus.token")}},
            {"job_name": "wrong-token", **target,
             "authorization": {"credentials_file": str(tmp_path / "wrong.token")}},
        ]}))
    prometheus = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                   f"--web.listen-address=127.0.0.1:{web_port}", "--log.level=warn"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up() -> dict[str, float] | None:
        url = f"http://127.0.0.1:{web_port}/api/v1/query?" + urllib.parse.urlencode({"query": "up"})
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                rows = json.loads(answer.read())["data"]["result"]
        except OSError:
            return None
        found = {row["metric"]["job"]: float(row["value"][1]) for row in rows}
        return found if len(found) == 2 else None

    try:
        assert wait_for(up, 60, what="both jobs scraped") == {"with-token": 1.0, "wrong-token": 0.0}
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(15)
        except subprocess.TimeoutExpired:
            prometheus.kill()
        web.shutdown()
