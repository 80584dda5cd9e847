"""The pipeline as a test script, in the spirit of Spark's StreamTest (AddData, ProcessAllAvailable,
CheckAnswer, StopStream, StartStream), over the real thing: `streaming.jobs.pipeline.Pipeline` on the
session's SparkSession, a real topic, real Delta tables.

    stream = StreamTest(spark, settings, writer)
    stream.add(trade("t1", "BUY", 2, 50.0, DAY + "09:01:00Z"), b"{not json")
    stream.process()                                  # start if needed, process all available
    stream.check_gold({"09:00": (100.0, 0.0, 1)})     # window -> (buy, sell, count), exactly
    stream.check_table(QUARANTINE, rows=1)
    stream.restart(forget_last_commit=True)           # a crash between the sink's write and the commit
    stream.check_gold({"09:00": (100.0, 0.0, 1)})

Tables are read as the contract says users read them: `deltalake.DeltaTable(location).to_pandas()`,
at the location the lake gives (`Lake(data_dir).location(table)`).
"""

from __future__ import annotations

import pandas as pd
from deltalake import DeltaTable

from streaming.config import Settings
from streaming.jobs.pipeline import MEDALLION_QUERY, Pipeline
from streaming.lake.checkpoints import Checkpoints
from streaming.lake.store import Lake
from streaming.lake.tables import GOLD, Table


class StreamTest:
    """One pipeline on one topic and data dir, driven step by step; stopped on leaving a `with`."""

    def __init__(self, spark, settings: Settings, writer):
        self.spark, self.settings, self.writer = spark, settings, writer
        self.pipeline: Pipeline | None = None

    def __enter__(self) -> StreamTest:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- actions --------------------------------------------------------------------------------
    def add(self, *records) -> None:
        """Produce trades (dicts) or raw values (bytes) to the topic, acknowledged."""
        self.writer.send(*records)

    def start(self) -> None:
        if self.pipeline is None:
            self.pipeline = Pipeline(self.spark, self.settings)
            self.pipeline.start()

    def process(self) -> None:
        """Start if stopped; return once every query has processed all that Kafka holds."""
        self.start()
        for query in self.pipeline.queries:
            query.processAllAvailable()

    def stop(self) -> None:
        if self.pipeline is not None:
            self.pipeline.stop()
            self.pipeline = None

    def restart(self, forget_last_commit: bool = False, **settings_changes) -> dict[str, int]:
        """Stop, then start again on the same checkpoints (with settings changed, if given).

        forget_last_commit: delete each query's last `commits/<N>` first, as if the app died after
        the sink wrote batch N and before Spark recorded it done; Spark then runs batch N again on
        the same offsets. Returns {query name: N} of the batches forgotten."""
        self.stop()
        forgotten = {}
        if forget_last_commit:
            forgotten[MEDALLION_QUERY] = forget_last_commit_of(self.settings, MEDALLION_QUERY)
        self.settings = self.settings.replace(**settings_changes)
        self.start()
        return forgotten

    # -- checks ---------------------------------------------------------------------------------
    def table(self, table: Table) -> pd.DataFrame:
        return DeltaTable(Lake(self.settings.data_dir).location(table)).to_pandas()

    def gold(self) -> dict[str, tuple[float, float, int]]:
        """Gold as {"HH:MM" of the window start: (buy, sell, count)}, amounts to the cent; every
        row's settlement is checked to be buy - sell on the way."""
        frame, rows = self.table(GOLD), {}
        for row in frame.itertuples():
            buy, sell = round(row.buy_amount, 2), round(row.sell_amount, 2)
            assert round(row.settlement_amount, 2) == round(buy - sell, 2), f"settlement != buy - sell in {row}"
            rows[row.window_start.strftime("%H:%M")] = (buy, sell, row.trade_count)
        assert len(rows) == len(frame), "gold spans several days: compare by full timestamps"
        return rows

    def check_gold(self, expected: dict[str, tuple[float, float, int]]) -> None:
        """Gold holds exactly these windows, with these values (window -> (buy, sell, count))."""
        actual = self.gold()
        assert actual == expected, f"gold is {actual}, expected {expected}"

    def check_table(self, table: Table, rows: int | None = None, **columns: list) -> pd.DataFrame:
        """No key of the catalog twice; then, if given, the number of rows and each named column's
        values (in any order). Returns the table for further checks."""
        frame = self.table(table)
        doubled = frame[frame.duplicated(list(table.keys), keep=False)]
        assert doubled.empty, f"{table.name} holds a key twice:\n{doubled}"
        if rows is not None:
            assert len(frame) == rows, f"{table.name} has {len(frame)} rows, expected {rows}"
        for column, values in columns.items():
            assert sorted(frame[column]) == sorted(values), f"{table.name}.{column}"
        return frame


def forget_last_commit_of(settings: Settings, query_name: str) -> int:
    """Delete the query checkpoint's last commits/<N> (and its .crc); return N."""
    commits = Checkpoints(settings.checkpoint_dir).query(query_name).path / "commits"
    done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    assert done, f"{query_name} has committed no batch yet"
    last = max(done)
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last
