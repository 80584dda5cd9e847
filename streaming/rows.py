"""Helpers shared by the rules and the lake."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc


def one_per_key(rows: pa.Table, keys: Sequence[str], keep: str = "last") -> pa.Table:
    """One row per key, the first or last in `rows` order, in `rows` order."""
    if rows.num_rows <= 1:
        return rows
    indexed = rows.append_column("__row", pa.array(range(rows.num_rows), pa.int64()))
    agg = "max" if keep == "last" else "min"
    chosen = indexed.group_by(list(keys), use_threads=False).aggregate([("__row", agg)])[f"__row_{agg}"]
    return rows.take(pc.take(chosen, pc.sort_indices(chosen))) if len(chosen) < rows.num_rows else rows


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while a share's records are read and parsed: it would walk
    the hundreds of thousands of acyclic objects they make (messages, bytes, dicts) again and
    again, for nothing (docs/performance.md#throughput)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
