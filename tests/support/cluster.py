"""A real Spark standalone cluster (a master and workers from the pyspark package's spark-class)
and an S3-compatible server (moto in server mode), on 127.0.0.1 and free ports, each stopped
by its own process group."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyspark

from tests.support.kafka import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def _start(command: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@dataclass
class Cluster:
    url: str
    worker_dirs: list[Path]
    processes: list[subprocess.Popen] = field(default_factory=list)


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """A master and `workers` workers of `cores` cores and `memory` each; yields once all have
    registered."""
    env = {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, web_port = free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", [])
    root.mkdir(parents=True, exist_ok=True)
    try:
        cluster.processes.append(_start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(web_port)], root / "master.log", env))
        for n in range(workers):
            work_dir = root / f"worker-{n}"
            work_dir.mkdir()
            cluster.worker_dirs.append(work_dir)
            cluster.processes.append(_start(
                [spark_class, "org.apache.spark.deploy.worker.Worker", cluster.url, "--host", "127.0.0.1",
                 "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir),
                 "--webui-port", str(free_port())], root / f"worker-{n}.log", env))
        deadline = time.monotonic() + 120
        alive = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                alive = _get_json(f"http://127.0.0.1:{web_port}/json/").get("aliveworkers", 0)
            if alive >= workers:
                break
            if any(p.poll() is not None for p in cluster.processes):
                break
            time.sleep(1)
        if alive < workers:
            logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(root.glob("*.log")))
            raise AssertionError(f"{alive} of {workers} workers registered with the master:\n{logs}")
        yield cluster
    finally:
        for proc in reversed(cluster.processes):
            _stop(proc)


@dataclass
class S3Server:
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        """What the pipeline reads, as a user would set it (deltalake's standard variables)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "test-key-id",
                "AWS_SECRET_ACCESS_KEY": "test-secret-never-printed", "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true"}

    def create_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass


@contextlib.contextmanager
def s3_server(root: Path) -> Iterator[S3Server]:
    """moto's S3 on 127.0.0.1 (it keeps its objects in memory)."""
    port = free_port()
    moto = str(Path(sys.executable).with_name("moto_server"))
    command = [moto] if Path(moto).exists() else [sys.executable, "-m", "moto.server"]
    root.mkdir(parents=True, exist_ok=True)
    proc = _start([*command, "-H", "127.0.0.1", "-p", str(port)], root / "moto.log")
    server = S3Server(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{server.endpoint}/", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the S3 server did not start:\n{(root / 'moto.log').read_text()}") from None
                time.sleep(0.3)
        yield server
    finally:
        _stop(proc)
