"""MERGEs into a table: through delta-rs's engine, or, for a small table keyed by one column
(gold: a row per window), by rewriting the few files the rows fall in.

delta-rs plans and runs every MERGE through its SQL engine: about 25 ms for a micro-batch's two
windows, however few rows (docs/live-batch.md#gold-by-rewrite), on the path from a trade to the
chart. Rewriting does what that MERGE does, under the table's lock: the files whose statistics
may hold a key of the rows are read whole, the rows folded into theirs by the table's policy
(`merged`, the MERGE's own rule, held to it by tests/unit/test_lake_merges.py), and written as
one new file that replaces them in one commit, which records the batch as any write does.
A table whose files a plain Parquet read would get wrong (deletion vectors, column mapping,
...: `plain_table`) takes the engine. Steps that `Lake.at_once` runs in parallel write different
tables: the writers' one open copy of a table is used by one thread at a time.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from streaming.lake.files import STATS_SLACK, DataFile, LiveFile, files_root, live_files, read_live_file, write_file
from streaming.lake.log_commit import plain_table
from streaming.lake.sql import key_ranges, quote
from streaming.lake.tables import Table, Write, same_values

IN_TARGET, IN_SOURCE = "__in_target", "__in_source"


def engine_merge(table: Table, opened: DeltaTable, rows: pa.Table, commit: CommitProperties, write: Write,
                 narrow: bool) -> None:
    """delta-rs's MERGE of `rows` (one per key) into the table, by the table's policy."""
    matched_on = [*table.keys, *(table.narrow_on if narrow else ())]
    merge = opened.merge(
        rows,
        predicate=" AND ".join([same_values(tuple(matched_on)), *key_ranges(rows, matched_on)]),
        source_alias="s",
        target_alias="t",
        commit_properties=commit,
    )
    if write in (Write.UPSERT, Write.ADD) or table.replace_when:
        updates = {quote(c): f"s.{quote(c)}" for c in rows.column_names if c not in table.keys}
        if write is Write.ADD:
            updates.update({quote(c): f"t.{quote(c)} + s.{quote(c)}" for c in table.sums})
        updates.update({quote(c): f"t.{quote(c)} + 1" for c in table.bump})
        merge = merge.when_matched_update(updates, predicate=table.replace_when if write is Write.FIRST_COPY_WINS
                                          else None)
    merge.when_not_matched_insert_all().execute()


def merged(target: pa.Table, source: pa.Table, table: Table, write: Write) -> pa.Table:
    """The rows a table holding `target` holds once `source` (one row per key) is merged in by
    UPSERT or ADD, as engine_merge's MERGE computes them: a key in both takes the source's
    values, its `sums` added to the target's (ADD) and its `bump` columns one more than the
    target's; a source key new to the target is inserted as it is; the target's other rows stay.
    In key order."""
    assert write in (Write.UPSERT, Write.ADD) and not table.replace_when
    keys = list(table.keys)
    names = table.stored_schema.names
    joined = target.select(names).append_column(IN_TARGET, pa.repeat(True, target.num_rows)).join(
        source.select(names).append_column(IN_SOURCE, pa.repeat(True, source.num_rows)),
        keys, join_type="full outer", left_suffix="__t", right_suffix="__s", use_threads=False)
    in_target, in_source = pc.is_valid(joined[IN_TARGET]), pc.is_valid(joined[IN_SOURCE])
    both = pc.and_(in_target, in_source)
    columns = {}
    for name in names:
        if name in keys:
            columns[name] = joined[name]
            continue
        was, new = joined[f"{name}__t"], joined[f"{name}__s"]
        if name in table.bump:  # before sums, as in engine_merge's updates
            new = pc.if_else(both, pc.add(was, pa.scalar(1, was.type)), new)
        elif write is Write.ADD and name in table.sums:
            new = pc.if_else(both, pc.add(was, new), new)
        columns[name] = pc.if_else(in_source, new, was)
    result = pa.table(columns).cast(table.stored_schema)
    return result.sort_by([(key, "ascending") for key in keys])


def _touched(files: list[LiveFile], low, high) -> list[LiveFile]:
    """The files whose statistics may hold a key in [low, high] (a bound not stated: any)."""
    return [f for f in files if (f.low is None or f.low <= high) and (f.high is None or f.high + STATS_SLACK >= low)]


def can_rewrite(table: Table) -> bool:
    """Whether the table's UPSERT and ADD MERGEs may be done by rewriting its files."""
    return table.merge_by_rewrite and len(table.keys) == 1 and not table.partition_by and not table.replace_when


def live_of(opened: DeltaTable, table: Table) -> list[LiveFile] | None:
    """The open table's live files with the min/max of its key, as delta-rs lists them; None
    when a plain Parquet read of them would be wrong (plain_table, files.live_files)."""
    return live_files(opened, table.keys[0]) if plain_table(opened, table) else None


def files_holding(table: Table, location: str, storage_options: Mapping[str, str] | None, live: list[LiveFile],
                  low, high) -> tuple[list[LiveFile], pa.Table]:
    """Of the table's `live` files, those whose statistics may hold a key in [low, high], and all
    their rows, read as plain Parquet."""
    touched = _touched(live, low, high) if isinstance(low, datetime) else live
    schema = table.stored_schema
    root = files_root(location, storage_options)
    rows = pa.concat_tables([read_live_file(root, f.path, schema) for f in touched]
                            ) if touched else schema.empty_table()
    return touched, rows


def key_range(table: Table, location: str, storage_options: Mapping[str, str] | None, live: list[LiveFile],
              low: datetime, high: datetime) -> pa.Table:
    """The table's rows whose key lies in [low, high], read as plain Parquet from those of its
    `live` files that may hold them."""
    rows = files_holding(table, location, storage_options, live, low, high)[1]
    key, kind = pc.field(table.keys[0]), rows.schema.field(table.keys[0]).type
    return rows.filter((key >= pa.scalar(low, kind)) & (key <= pa.scalar(high, kind))).select(
        table.columns).cast(table.schema)


# Commits a rewrite: the file written, and the live files it replaces.
Replace = Callable[[DataFile, list[LiveFile]], None]


def rewrite_merge(table: Table, location: str, storage_options: Mapping[str, str] | None, live: list[LiveFile],
                  rows: pa.Table, write: Write, replace: Replace) -> None:
    """`rows` (one per key) merged into the table, whose `live` files are read as plain Parquet,
    by rewriting the files they fall in into one, which `replace` commits in their place."""
    key = table.keys[0]
    touched, target = files_holding(table, location, storage_options, live, pc.min(rows[key]).as_py(),
                                    pc.max(rows[key]).as_py())
    result = merged(target, rows, table, write)
    replace(write_file(location, result, storage_options), touched)


def replace_by_engine(opened: DeltaTable, table: Table, commit: CommitProperties) -> Replace:
    """A rewrite's commit through delta-rs."""
    def replace(written: DataFile, touched: list[LiveFile]) -> None:
        now_ms = int(time.time() * 1000)
        opened.create_write_transaction(
            [AddAction(written.path, written.size, {}, now_ms, True, written.stats),
             *(RemoveAction(f.path, True, now_ms) for f in touched)],
            mode="append", schema=table.stored_schema, commit_properties=commit)
    return replace
