"""Spark's Python workers on a local master come from our daemon (run/python_daemon.py): they
import the installed pyspark rather than Spark's zip of it, and the pipeline starts them before
its first batch needs them (pipeline.start_python_workers)."""

from __future__ import annotations

import os
import sys
import time
from typing import Iterator

import pyarrow as pa

from streaming.jobs.pipeline import start_python_workers

WORKER = pa.schema([("pyspark", pa.string()), ("worker_module_before_task", pa.bool_()), ("age_s", pa.float64())])
WORKER_DDL = "pyspark string, worker_module_before_task boolean, age_s double"


def about_the_worker(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Where this worker's pyspark was imported from, and how long ago the worker process started."""
    import pyspark

    for _ in batches:
        pass
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
    uptime = float(open("/proc/uptime").read().split()[0])
    yield pa.RecordBatch.from_pylist([{"pyspark": pyspark.__file__, "worker_module_before_task": "pyspark.worker" in
                                       sys.modules, "age_s": uptime - started}], schema=WORKER)


def test_python_workers_import_the_installed_pyspark_not_sparks_zip(spark):
    rows = spark.range(4, numPartitions=2).mapInArrow(about_the_worker, WORKER_DDL).toArrow().to_pylist()

    assert len(rows) == 2
    assert all(".zip" not in row["pyspark"] and row["worker_module_before_task"] for row in rows), rows


def test_a_job_after_the_start_runs_in_workers_started_before_it(spark):
    start_python_workers(spark).join(120)

    began = time.monotonic()
    rows = spark.range(2, numPartitions=2).mapInArrow(about_the_worker, WORKER_DDL).toArrow().to_pylist()
    took = time.monotonic() - began

    assert all(row["age_s"] > took for row in rows), (rows, took)
