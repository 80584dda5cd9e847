"""Spark's Python daemon on a local master (spark.python.daemon.module): pyspark's own, which
forks a Python worker per task slot, started so that a fresh worker is ready sooner
(docs/spark.md#a-starts-first-batch):

- Spark puts its copies of pyspark and py4j, as zips, first on the workers' path. Python compiles
  a module imported from a zip anew in every process, so each fresh worker spent over a second
  compiling pyspark. When the zips are the installed pyspark's own (pip's layout: they sit inside
  the package), they are dropped and the installed package, compiled once, is imported instead.
- The worker module is imported before the fork, so every worker has it. pyspark imports it after
  the fork because a module may start threads, which a fork does not copy; this one starts none.
  numpy, pyarrow and pandas do, so they are still imported by each worker, after its fork.

Only this module's name is passed to Spark: pyspark.daemon does the work."""

from __future__ import annotations

import importlib.machinery
import os
import sys


def installed_copies(path: list[str]) -> list[str]:
    """The zips on `path` that lie inside the pyspark package importable without them."""
    plain = [entry for entry in path if not entry.endswith(".zip")]
    pyspark = importlib.machinery.PathFinder.find_spec("pyspark", plain)
    py4j = importlib.machinery.PathFinder.find_spec("py4j", plain)
    if pyspark is None or pyspark.origin is None or py4j is None:
        return []
    package = os.path.realpath(os.path.dirname(pyspark.origin)) + os.sep
    return [entry for entry in path if entry.endswith(".zip") and os.path.realpath(entry).startswith(package)]


def main() -> None:
    for entry in installed_copies(sys.path):
        sys.path.remove(entry)
    import pyspark.worker  # noqa: F401 - before the fork: each worker finds it imported
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
