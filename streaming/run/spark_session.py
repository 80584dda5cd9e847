"""The one SparkSession of a run, with delta-spark and Spark's Kafka connector on its class path
(jars.py fetches them)."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterable

from streaming.jars import check_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG4J_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"
FAIR_SCHEDULER_POOLS = Path(__file__).resolve().parent / "fairscheduler.xml"


# Checkpoints live under --data-dir on the local disk. Without Hadoop's native library, its
# default local file system starts a `chmod` (and, through FileContext, `readlink`) process for
# every file it writes or renames, in every micro-batch; these settings start no such process.
# Renames stay atomic (rename(2)); no .crc side files. Measured: docs/spark.md#spark-settings
LOCAL_CHECKPOINT_FILES = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
}


# Every stage of every micro-batch serialises its task binary into a 1 MB buffer and
# broadcasts it in a buffer of one broadcast block (4 MB by default). With a 1 GiB heap G1's
# regions are 1 MB, so both are "humongous" objects, and each forces a young collection.
# Smaller blocks and larger regions avoid them on executors (docs/spark.md#spark-settings).
BROADCAST_BLOCK_SIZE = "256k"
EXECUTOR_JVM_OPTIONS = "-XX:G1HeapRegionSize=4m"

# The driver (in local mode also the executor) holds no micro-batch: the serial collector and a
# heap that starts small take less memory than G1 for the same throughput, and freed native
# memory goes back to the OS every 5 s (docs/performance.md#memory). Java 17 builds older than
# the trim option ignore it.
DRIVER_JVM_OPTIONS = ("-XX:+UseSerialGC -Xms64m "
                      "-XX:+IgnoreUnrecognizedVMOptions -XX:TrimNativeHeapInterval=5000")


# Spark's Python daemon, whose workers start sooner (python_daemon.py).
PYTHON_DAEMON = "streaming.run.python_daemon"


# delta-spark's SQL and catalog: spark.read.format("delta"), DeltaTable.forPath, MERGE.
DELTA_SESSION = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def _package_zip() -> str:
    """The `streaming` package zipped, for Python workers on a cluster."""
    target = Path(tempfile.mkdtemp(prefix="trade-summary-pyfiles-")) / "streaming.zip"
    with zipfile.ZipFile(target, "w") as zf:
        for path in (REPO_ROOT / "streaming").rglob("*.py"):
            zf.write(path, path.relative_to(REPO_ROOT))
    return str(target)


def is_local_master(master: str) -> bool:
    return master.strip().startswith("local")


def default_shuffle_partitions(master: str) -> int:
    """One shuffle partition per local core (the reconciliation's recompute shuffles; the
    stream does not). On a cluster, 8 until the executors are counted (size_to_cluster)."""
    master = master.strip()
    if master == "local":
        return 1
    match = re.fullmatch(r"local\[(\d+|\*)(,\d+)?\]", master)
    if match is None:
        return 8
    return (os.cpu_count() or 2) if match.group(1) == "*" else max(1, int(match.group(1)))


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def master_hosts(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs a master URL names: spark://a:7077,b:7077, k8s://https://api:443,
    mesos://...; none for local[*] or yarn (whose address is in the Hadoop configuration)."""
    url = master.strip()
    url = url[len("k8s://"):] if url.startswith("k8s://") else url
    match = re.match(r"^[a-z]+://(.+)$", url)
    if match is None:
        return []
    hosts = []
    for part in match.group(1).split("/")[0].split(","):
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            host, port = part, ""
        hosts.append((host.strip("[]"), int(port) if port else 7077))
    return hosts


def reaching_address(host: str, port: int) -> str | None:
    """This machine's address on the route to host:port (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return probe.getsockname()[0]
    except OSError:
        return None


def driver_address(master: str, driver_host: str | None) -> str:
    """The address the driver binds and advertises: --driver-host; 127.0.0.1 for a local master
    or one on this machine (the security default); else the address on the route to the master."""
    if driver_host:
        return driver_host
    hosts = master_hosts(master)
    if is_local_master(master) or (hosts and all(h in LOOPBACK for h, _ in hosts)):
        return "127.0.0.1"
    for host, port in hosts:
        address = reaching_address(host, port)
        if address:
            return address
    try:
        return socket.gethostbyname(socket.getfqdn())
    except OSError:
        return "127.0.0.1"


def can_bind(host: str) -> bool:
    """Whether `host` is an address (or a name of one) of this machine."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
        return True
    except OSError:
        return False


def bind_address(master: str, advertised: str) -> str:
    """Where the driver listens: the address it advertises when that is this machine's; else
    (NAT, a Kubernetes service name) the address on the route to the master."""
    if can_bind(advertised):
        return advertised
    return driver_address(master, None)


def size_to_cluster(spark, wait_s: float = 60.0) -> int:
    """On a cluster: wait (up to wait_s) for the first executors, then size the shuffles to the
    cores they bring. Returns the cores counted (0 if none came)."""
    context = spark.sparkContext
    tracker = context._jsc.sc().statusTracker()
    deadline = time.monotonic() + wait_s
    while len(tracker.getExecutorInfos()) <= 1 and time.monotonic() < deadline:  # the driver is one
        time.sleep(0.5)
    executors = len(tracker.getExecutorInfos()) - 1
    if executors <= 0:
        log.warning("no executor joined within %.0f s: is the cluster up, with free cores and memory? "
                    "Spark keeps waiting for one", wait_s)
        return 0
    cores = int(context.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(cores))
    log.info("%d executor%s with %d cores in all; shuffles use %d partitions", executors,
             "" if executors == 1 else "s", cores, cores)
    return cores


# With nothing new, Spark sleeps this long before it asks the broker again (or till the
# trigger's next tick, if later). A trade after a quiet spell waits for that look: the price of
# an idle app under issue 47's 0.05 of a core (docs/idle.md).
IDLE_LOOK_MS = 1500


def _prepare_environment(bind: str) -> None:
    """The environment the JVM and Spark's Python workers read when they start."""
    # Python workers must import `streaming` (the source's reader is pickled by reference).
    python_path = os.environ.get("PYTHONPATH", "")
    if str(REPO_ROOT) not in python_path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), python_path) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", bind)
    # glibc gives each thread that allocates its own arena, and librdkafka's and the JVM's threads
    # kept much freed memory that way while catching up (docs/performance.md#memory).
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def create_spark(master: str = "local[*]", app_name: str = "trade-summary", shuffle_partitions: int | None = None,
                 conf_overrides: Iterable[tuple[str, str]] = (), driver_host: str | None = None) -> SparkSession:
    """The session, with our settings and then `conf_overrides` (the user's --conf) over them.
    On a cluster master the driver advertises `driver_address(...)` so executors can connect
    back (and binds it, or the address on the route to the master: bind_address),
    and shuffles are sized to the executors' cores unless --conf says otherwise."""
    check_java()
    conf_overrides = list(conf_overrides)
    address = dict(conf_overrides).get("spark.driver.host") or driver_address(master, driver_host)
    bind = bind_address(master, address)
    _prepare_environment(bind)

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from streaming.jars import spark_classpath

    conf = (
        SparkConf().setMaster(master).setAppName(app_name)
        .set("spark.sql.session.timeZone", "UTC")
        # Small batches: a handful of shuffle partitions keeps per-batch overhead low.
        .set("spark.sql.shuffle.partitions", str(shuffle_partitions or default_shuffle_partitions(master)))
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.bindAddress", bind)
        .set("spark.driver.host", address)
        .set("spark.python.worker.reuse", "true")
        .set("spark.sql.execution.arrow.pyspark.enabled", "true")
        # The stream and the page's reconciliation share the cores (see fairscheduler.xml).
        .set("spark.scheduler.mode", "FAIR")
        .set("spark.scheduler.allocation.file", FAIR_SCHEDULER_POOLS.as_uri())
        .set("spark.driver.extraJavaOptions",
             f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} {DRIVER_JVM_OPTIONS}")
        .set("spark.executor.extraJavaOptions", EXECUTOR_JVM_OPTIONS)
        .set("spark.broadcast.blockSize", BROADCAST_BLOCK_SIZE)
        # A trigger that found nothing new waits this long for the next look (Spark: 10 ms), so
        # a short --trigger, or 0 (back to back), asks Kafka twice a second when idle.
        .set("spark.sql.streaming.pollingDelay", f"{IDLE_LOOK_MS}ms")
    )
    for key, value in LOCAL_CHECKPOINT_FILES.items():
        conf.set(key, value)
    if is_local_master(master):  # executors elsewhere could not import it before their first task
        conf.set("spark.python.daemon.module", PYTHON_DAEMON)
    if not {"spark.jars", "spark.jars.packages"} & set(dict(conf_overrides)):  # else the user's own
        conf.set("spark.jars", ",".join(spark_classpath(echo=log.info)))
    for key, value in DELTA_SESSION.items():
        conf.set(key, value)
    # delta-spark reads a table's log in this many tasks (50 by default): a handful of small
    # tables' logs take a core each at most, and 50 tasks made every read and MERGE slow.
    conf.set("spark.databricks.delta.snapshotPartitions", str(shuffle_partitions or default_shuffle_partitions(master)))
    for key, value in conf_overrides:
        conf.set(key, value)
    if SparkContext._active_spark_context is None:
        # The JVM gets its own session, so a SIGTERM or Ctrl-C sent to our process group
        # (a supervisor, `timeout`, a closing terminal) reaches only us, and we stop the
        # queries in order. The JVM still exits when we do: it watches its stdin pipe.
        gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True, "stderr": subprocess.PIPE})
        _forward_stderr(gateway.proc.stderr)
        SparkContext(conf=conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local_master(master):
        spark.sparkContext.addPyFile(_package_zip())
        if shuffle_partitions is None and "spark.sql.shuffle.partitions" not in dict(conf_overrides):
            size_to_cluster(spark)
    return spark


# What the JVM says at every start that tells a user nothing: Spark's launcher adds the vector
# module itself and the JVM announces it; Spark names the shell's log level, which the session
# sets to ERROR right after.
JVM_NOISE = ("WARNING: Using incubator modules: jdk.incubator.vector",
             'Setting default log level to "WARN".',
             "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).")


def _forward_stderr(stream: IO[bytes]) -> None:
    """The Spark JVM's stderr, copied to ours line by line but for JVM_NOISE (a thread, until the
    JVM exits: a full pipe would stall it)."""

    def copy() -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            if line.rstrip() not in JVM_NOISE:
                sys.stderr.write(line)
                sys.stderr.flush()

    threading.Thread(target=copy, name="spark-jvm-stderr", daemon=True).start()
