"""Which Delta writer is faster for the pipeline's per-micro-batch writes: delta-rs (deltalake,
as streaming/lake/store.py writes today) or delta-spark? `python -m bench.delta_writers --help`.

Every writer gets fresh tables made by `Lake.ensure` (the lake's schemas and properties:
checkpoint every 10 commits, 15 minutes of log) and the same pre-built micro-batches
(micro_batches.py), made as the pipeline makes them (Kafka-like JSON records -> silver.parse_records -> silver rows;
on-time trades -> gold.window_sums -> sinks.gold_rows): by default 500 trades per 500 ms batch
at 1,000 trades/s, the simulator's clock (60 market seconds per second) and late trades, so
gold gets ~1-3 window rows per batch. The writers take turns, batch by batch (the one that goes
first alternates), so a noisy, shared machine weighs on all of them alike.

Operations, each idempotent (the batch recorded in the same commit as an app transaction):

* silver append, ~500 rows:
  - `deltalake files+commit`: files.write_file + Lake.commit_files (the pipeline's hot path,
    except that there Spark's tasks write the Parquet file);
  - `deltalake write_deltalake`: the batch check + write_deltalake(mode="append") with
    CommitProperties(app_transactions=...) (Lake._append);
  - `delta-spark`: spark.createDataFrame(arrow) + df.write.format("delta").mode("append")
    .option("txnAppId", ...).option("txnVersion", batch_id); the write alone is also reported.
* gold MERGE-add, ~2 rows:
  - `deltalake`: Lake.publish(GOLD, rows, batch, write=Write.ADD);
  - `delta-spark`: DeltaTable.forPath(...).merge(...).whenMatchedUpdate(...)
    .whenNotMatchedInsertAll().execute(), with the same condition and update expressions, made
    idempotent by spark.databricks.delta.write.txnAppId/txnVersion.

The tables' compaction (partitions.compact_now_and_then) is switched off for all writers: it is
the same delta-rs OPTIMIZE whoever commits the batches, and would make the figures lumpy.
delta-spark runs in the pipeline's session (spark_session.create_spark) with one setting
tuned for small tables, DELTA_SPARK_TUNING (--conf overrides it). --max-minutes bounds the run
on a loaded machine: no new batch starts after it, and the figures cover the batches done.

Afterwards it checks that every writer's tables read back the same, through deltalake's
to_pandas() and delta-spark, and equal what was written; and that replaying the last batch
leaves every table at its version. Prints a Markdown table of p50/p95/max per operation.
Temporary tables go under a temp dir, removed at the end (unless --keep).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from bench.command_line import add_numbers, add_spark_arguments, log_to_terminal, stop_on_sigterm, tool_parser
from bench.micro_batches import GOLD, SILVER, MicroBatch, make_batches
from streaming.lake.files import write_file
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import Write

log = logging.getLogger("bench.delta_writers")

# delta-spark rebuilds a table's state (its files, app transactions) in a Spark job of this many
# partitions whenever it reads a new version, by default 50: tiny tasks that, on 2 cores, made
# each append take seconds. Tuned to the cores here, as a pipeline writing through delta-spark would.
DELTA_SPARK_TUNING = (("spark.databricks.delta.snapshotPartitions", "2"),)

DL_FILES, DL_APPEND, SPARK = "deltalake files+commit", "deltalake write_deltalake", "delta-spark"
DL = "deltalake"


# -- the writers ------------------------------------------------------------------------------
class Timings:
    def __init__(self):
        self.ms: dict[str, list[float]] = defaultdict(list)

    def add(self, name: str, seconds: float) -> None:
        self.ms[name].append(seconds * 1000)


def commit(table, batch: Batch) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id=batch.app_id(table), version=int(batch.id))])


class DeltaRs:
    """The lake's own writes (delta-rs)."""

    def __init__(self, root: Path, writer: str):
        self.lake, self.writer = Lake(root), writer
        for table in (SILVER, GOLD):
            self.lake.ensure(table)

    def silver_files(self, batch: MicroBatch, timings: Timings, key: str) -> bool:
        """files.write_file + Lake.commit_files, as a task and the driver do."""
        started = time.perf_counter()
        file = write_file(self.lake.location(SILVER), batch.silver.select(SILVER.columns))
        written = time.perf_counter()
        done = self.lake.commit_files(SILVER, [file], Batch(self.writer, batch.id))
        ended = time.perf_counter()
        timings.add(key, ended - started)
        timings.add(key + ": Parquet file", written - started)
        timings.add(key + ": commit", ended - written)
        return done

    def silver_append(self, batch: MicroBatch, timings: Timings, key: str) -> bool:
        """Lake._append: write_deltalake into the open table, after the batch check."""
        started = time.perf_counter()
        this = Batch(self.writer, batch.id)
        done = not self.lake.published(SILVER, this)  # (the table's lock: uncontended here, left out)
        if done:
            write_deltalake(self.lake.open(SILVER), batch.silver, mode="append", commit_properties=commit(SILVER, this))
        timings.add(key, time.perf_counter() - started)
        return done

    def gold_add(self, batch: MicroBatch, timings: Timings, key: str) -> bool:
        started = time.perf_counter()
        done = self.lake.publish(GOLD, batch.gold, Batch(self.writer, batch.id), write=Write.ADD)
        timings.add(key, time.perf_counter() - started)
        return done


def spark_literal(value: datetime) -> str:
    return f"TIMESTAMP '{value.astimezone(timezone.utc).strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"


class DeltaSpark:
    """delta-spark writing the same tables (made by Lake.ensure, as the pipeline's are)."""

    def __init__(self, spark, root: Path, writer: str):
        self.spark, self.lake, self.writer = spark, Lake(root), writer
        for table in (SILVER, GOLD):
            self.lake.ensure(table)
        self.silver_path = self.lake.spark_location(SILVER)
        self.gold_path = self.lake.spark_location(GOLD)

    def silver_append(self, batch: MicroBatch, timings: Timings, key: str) -> bool:
        before = self.version(self.silver_path)
        started = time.perf_counter()
        frame = self.spark.createDataFrame(batch.silver)
        created = time.perf_counter()
        (frame.write.format("delta").mode("append")
         .option("txnAppId", Batch(self.writer, batch.id).app_id(SILVER)).option("txnVersion", batch.id)
         .save(self.silver_path))
        ended = time.perf_counter()
        timings.add(key, ended - started)
        timings.add(key + ": createDataFrame", created - started)
        timings.add(key + ": write", ended - created)
        return self.version(self.silver_path) != before

    def gold_add(self, batch: MicroBatch, timings: Timings, key: str) -> bool:
        """The lake's Write.ADD MERGE (store.Lake._merge), in delta-spark's API."""
        from delta.tables import DeltaTable as SparkDeltaTable

        before = self.version(self.gold_path)
        conf = self.spark.conf
        rows = batch.gold
        low, high = pc.min_max(rows["window_start"]).values()
        condition = (f"t.`window_start` = s.`window_start` AND t.`window_start` >= {spark_literal(low.as_py())} "
                     f"AND t.`window_start` <= {spark_literal(high.as_py())}")
        updates = {f"`{c}`": f"s.`{c}`" for c in GOLD.columns if c not in GOLD.keys}
        updates.update({f"`{c}`": f"t.`{c}` + s.`{c}`" for c in GOLD.sums})
        updates.update({f"`{c}`": f"t.`{c}` + 1" for c in GOLD.bump})
        started = time.perf_counter()
        source = self.spark.createDataFrame(rows)
        created = time.perf_counter()
        conf.set("spark.databricks.delta.write.txnAppId", Batch(self.writer, batch.id).app_id(GOLD))
        conf.set("spark.databricks.delta.write.txnVersion", str(batch.id))
        try:
            (SparkDeltaTable.forPath(self.spark, self.gold_path).alias("t")
             .merge(source.alias("s"), condition).whenMatchedUpdate(set=updates).whenNotMatchedInsertAll().execute())
        finally:
            ended = time.perf_counter()
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        timings.add(key, ended - started)
        timings.add(key + ": createDataFrame", created - started)
        timings.add(key + ": MERGE", ended - created)
        return self.version(self.gold_path) != before

    def version(self, location: str) -> int:
        return self.lake.open(SILVER if location == self.silver_path else GOLD).version()


# -- checks -----------------------------------------------------------------------------------
def normalized(frame: pd.DataFrame, keys: list[str], columns: list[str]) -> pd.DataFrame:
    frame = frame[columns].copy()
    for name in columns:
        column = frame[name]
        if pd.api.types.is_datetime64_any_dtype(column):
            column = column.dt.tz_localize("UTC") if column.dt.tz is None else column.dt.tz_convert("UTC")
            frame[name] = column.astype("datetime64[us, UTC]")
        elif pd.api.types.is_integer_dtype(column):
            frame[name] = column.astype("int64")
    return frame.sort_values(keys).reset_index(drop=True)


def expected_gold(batches: list[MicroBatch]) -> pd.DataFrame:
    """What the ADD MERGEs must leave: per window, the sums added batch after batch."""
    rows: dict = {}
    for batch in batches:
        for row in batch.gold.to_pylist():
            have = rows.get(row["window_start"])
            if have is None:
                rows[row["window_start"]] = dict(row)
            else:
                have.update({c: row[c] for c in ("window_end", "updated_at", "batch_id")})
                for c in GOLD.sums:
                    have[c] = have[c] + row[c]
                have["revision"] += 1
    return pd.DataFrame(list(rows.values()))


def check_tables(spark, places: dict[str, Lake], batches: list[MicroBatch]) -> list[str]:
    """Every writer's tables, read by deltalake and by delta-spark, equal each other and what
    was written. Returns the problems (none: all equal)."""
    problems = []
    wanted = {
        SILVER: normalized(pa.concat_tables([b.silver for b in batches]).to_pandas(), ["trade_id"], SILVER.columns),
        GOLD: normalized(expected_gold(batches), ["window_start"], GOLD.columns),
    }
    for table, keys in ((SILVER, ["trade_id"]), (GOLD, ["window_start"])):
        for writer, lake in places.items():
            location = lake.location(table)
            reads = {
                "deltalake": DeltaTable(location).to_pandas(),
                "delta-spark": spark.read.format("delta").load(lake.spark_location(table)).toPandas(),
            }
            for reader, frame in reads.items():
                got = normalized(frame, keys, table.columns)
                try:
                    pd.testing.assert_frame_equal(got, wanted[table], check_exact=True, check_dtype=False)
                except AssertionError as exact:
                    try:
                        pd.testing.assert_frame_equal(got, wanted[table], check_dtype=False, rtol=1e-12)
                        problems.append(f"{table.name} by {writer}, read by {reader}: equal only to 1e-12 ({exact})")
                    except AssertionError as error:
                        problems.append(f"{table.name} by {writer}, read by {reader}: {error}")
    return problems


def log_files(location: str) -> tuple[int, int]:
    """(commits, checkpoints) in the table's _delta_log."""
    names = os.listdir(Path(location) / "_delta_log")
    return (sum(n.endswith(".json") and n[:20].isdigit() for n in names),
            sum(n.endswith(".checkpoint.parquet") for n in names))


# -- the run ----------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run(args: argparse.Namespace) -> int:
    from streaming.run.spark_session import create_spark

    started = time.monotonic()
    log.info("making %d batches of %d trades", args.warmup + args.batches, args.trades)
    batches = make_batches(args.warmup + args.batches, args.trades, timedelta(milliseconds=args.trigger_ms),
                           args.seed)
    gold_rows_per_batch = [b.gold.num_rows for b in batches]
    silver_rows_per_batch = [b.silver.num_rows for b in batches]
    root = Path(tempfile.mkdtemp(prefix="delta-writers-"))
    spark = None
    try:
        log.info("starting Spark (%s)", args.master)
        spark = create_spark(args.master, app_name="delta-writers", conf_overrides=[*DELTA_SPARK_TUNING, *args.conf])
        writer_id = str(uuid.uuid4())  # a query id, as the pipeline's app transactions carry
        files, append = DeltaRs(root / "deltalake-files", writer_id), DeltaRs(root / "deltalake-append", writer_id)
        sparked = DeltaSpark(spark, root / "delta-spark", writer_id)
        silver_ops: list[tuple[str, Callable]] = [(f"silver append: {DL_FILES}", files.silver_files),
                                                  (f"silver append: {DL_APPEND}", append.silver_append),
                                                  (f"silver append: {SPARK}", sparked.silver_append)]
        # deltalake's gold MERGE runs on the files+commit lake; the write_deltalake lake gets the
        # same gold too (unmeasured), so that every lake ends up with the same tables.
        gold_ops: list[tuple[str, Callable]] = [(f"gold MERGE add: {DL}", files.gold_add),
                                                (f"gold MERGE add: {SPARK}", sparked.gold_add)]
        timings, warm = Timings(), Timings()
        loads = [os.getloadavg()[0]]
        deadline = started + args.max_minutes * 60
        for batch in batches:
            if batch.id > args.warmup + 4 and time.monotonic() > deadline:
                log.info("--max-minutes reached: %d batches measured of %d", batch.id - args.warmup, args.batches)
                batches = batches[:batch.id]
                break
            measured = batch.id >= args.warmup
            into = timings if measured else warm
            for ops in (silver_ops, gold_ops):
                for key, op in (reversed(ops) if batch.id % 2 else ops):  # who goes first alternates
                    if not op(batch, into, key):
                        raise RuntimeError(f"{key}: batch {batch.id} was not written")
            append.gold_add(batch, Timings(), "unmeasured")
            if batch.id % 50 == 49:
                loads.append(os.getloadavg()[0])
                log.info("batch %d of %d (%.0f s)", batch.id + 1, len(batches), time.monotonic() - started)
        loads.append(os.getloadavg()[0])

        # Replaying the last batch must change nothing.
        last, replayed = batches[-1], []
        for key, op in silver_ops + gold_ops:
            if op(last, Timings(), key):
                replayed.append(key)
        if append.gold_add(last, Timings(), "replay"):
            replayed.append("gold by write_deltalake lake")

        places = {DL_FILES: files.lake, DL_APPEND: append.lake, SPARK: sparked.lake}
        problems = check_tables(spark, places, batches)
        problems += [f"{key}: the last batch, replayed, was written again" for key in replayed]
        growth = {(table.name, writer): (DeltaTable(lake.location(table)).version(),
                                         *log_files(lake.location(table)))
                  for table in (SILVER, GOLD) for writer, lake in places.items()}
        report(args, timings, growth, problems, silver_rows_per_batch, gold_rows_per_batch, loads,
               time.monotonic() - started)
        return 1 if problems else 0
    finally:
        if spark is not None:
            spark.stop()
        if args.keep:
            log.info("kept %s", root)
        else:
            shutil.rmtree(root, ignore_errors=True)


def report(args, timings: Timings, growth: dict, problems: list[str], silver_rows: list[int], gold_rows: list[int],
           loads: list[float], seconds: float) -> None:
    measured = len(next(iter(timings.ms.values())))
    quarter = max(1, measured // 4)
    print()
    print(f"{measured} measured batches per writer (after {args.warmup} unmeasured), interleaved; "
          f"silver rows/batch: median {statistics.median(silver_rows):.0f}; gold rows/batch: "
          f"min {min(gold_rows)}, median {statistics.median(gold_rows):.0f}, max {max(gold_rows)}; "
          f"master {args.master}; load average 1 min: {', '.join(f'{x:.1f}' for x in loads)}; {seconds:.0f} s")
    print()
    print(f"| operation | writer | p50 ms | p95 ms | max ms | p50 first {quarter} | p50 last {quarter} |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, values in timings.ms.items():
        operation, writer = name.split(": ", 1)
        print(f"| {operation} | {writer} | {percentile(values, 50):.1f} | {percentile(values, 95):.1f} | "
              f"{max(values):.1f} | {percentile(values[:quarter], 50):.1f} | {percentile(values[-quarter:], 50):.1f} |")
    print()
    print("| table | writer | last version | commit files in _delta_log | checkpoints |")
    print("|---|---|---:|---:|---:|")
    for (table, writer), (version, commits, checkpoints) in growth.items():
        print(f"| {table} | {writer} | {version} | {commits} | {checkpoints} |")
    print()
    if problems:
        print("CHECK FAILED:")
        for problem in problems:
            print(f"  - {problem}")
    else:
        print("check: every writer's silver and gold read back equal (deltalake to_pandas() and "
              "spark.read.format('delta')) and equal to what was written; replaying the last batch changed nothing")
    sys.stdout.flush()


DESCRIPTION = ("Time the pipeline's per-micro-batch Delta writes (silver append, gold MERGE-add) by delta-rs "
               "(deltalake) and by delta-spark, interleaved, on fresh temporary tables; then check that all "
               "writers' tables read back equal. Prints a Markdown table of p50/p95/max.")


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(
        "python -m bench.delta_writers", DESCRIPTION,
        ("--batches", int, 50, "measured batches per writer"),
        ("--warmup", int, 5, "batches written first, unmeasured, for a warm JVM"),
        ("--trades", int, 500, "trades per batch"),
        ("--trigger-ms", int, 500, "the trigger: market time per batch follows from it"),
        ("--max-minutes", float, 10, "start no new batch after this long (a loaded machine): the figures are over "
                                     "the batches done"),
    )
    add_spark_arguments(parser, master="local[2]")
    add_numbers(parser, ("--seed", int, 7, "random seed of the trades"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary tables")
    return parser


def main(argv: list[str] | None = None) -> int:
    stop_on_sigterm()  # then Spark stops and the tables are removed
    args = build_parser().parse_args(argv)
    if args.batches < 4 or args.warmup < 0 or args.trades <= 0 or args.trigger_ms <= 0:
        build_parser().error("--batches must be at least 4; --warmup 0 or more; --trades and --trigger-ms positive")
    log_to_terminal()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
