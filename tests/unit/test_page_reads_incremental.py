"""The page's reads follow the tables file by file: real Delta tables written through the Lake
(appends, compactions, MERGEs, a table made anew), each read compared with a whole read of the same day."""

import random
import shutil
from datetime import datetime, timedelta, timezone

import pandas as pd
import pyarrow as pa
import pytest

from dashboard import ids
from dashboard.client import call, store_snapshot
from dashboard.dash_app import create_app
from dashboard.data import CORRECTION_COLUMNS, GOLD_COLUMNS, LATE_TRADE_COLUMNS, TableReader, on_day
from dashboard.readers import DayReader, SilverFilterValues
from streaming.lake.increments import Span
from streaming.lake.store import Batch, Lake
from streaming.lake.tables import CORRECTIONS, GOLD, LATE_TRADES, SILVER, Table, Write

UTC = timezone.utc
FIRST_DAY = datetime(2026, 3, 2, tzinfo=UTC)
WINDOW = timedelta(minutes=15)


def day_of(n: int) -> str:
    return (FIRST_DAY + timedelta(days=n)).date().isoformat()


def window(day: int, slot: int) -> datetime:
    return FIRST_DAY + timedelta(days=day) + slot * WINDOW


def rows_of(table: Table, columns: dict) -> pa.Table:
    """The given columns, and every other column of the table filled: numbers 0, text "x", times null
    (as the sink writes them: a number is never null)."""
    count = len(next(iter(columns.values())))

    def filler(kind: pa.DataType) -> pa.Array:
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            return pa.array([0] * count, kind)
        return pa.array(["x"] * count, kind) if pa.types.is_string(kind) else pa.nulls(count, kind)

    full = {f.name: columns[f.name] if f.name in columns else filler(f.type) for f in table.schema}
    return pa.table(full).cast(table.schema)


def publish_corrections(lake: Lake, batch: int, windows: list[datetime], query: str = "q") -> None:
    lake.publish(CORRECTIONS, rows_of(CORRECTIONS, {
        "window_start": windows, "window_end": [w + WINDOW for w in windows],
        "buy_amount_before": [float(batch)] * len(windows), "buy_amount_after": [batch + 1.0] * len(windows),
        "late_trades": [1] * len(windows), "corrected_at": [FIRST_DAY + timedelta(seconds=batch)] * len(windows),
        "batch_id": [batch] * len(windows), "query_id": [query] * len(windows)}), Batch(query, batch))


def publish_late_trades(lake: Lake, batch: int, trades: list[tuple[str, datetime]], backfilled: bool = False) -> None:
    ids, starts = [t for t, _ in trades], [w for _, w in trades]
    rows = rows_of(LATE_TRADES, {
        "trade_id": ids, "event_time": starts, "window_start": starts, "window_end": [w + WINDOW for w in starts],
        "side": ["BUY"] * len(ids), "amount": [float(batch)] * len(ids),
        "detected_at": [FIRST_DAY + timedelta(seconds=batch)] * len(ids),
        "backfilled_at": [FIRST_DAY + timedelta(hours=batch) if backfilled else None for _ in ids]})
    lake.publish(LATE_TRADES, rows, Batch("q" if not backfilled else "backfill", batch),
                 write=Write.UPSERT if backfilled else None)


def publish_gold(lake: Lake, batch: int, windows: list[datetime]) -> None:
    lake.publish(GOLD, rows_of(GOLD, {
        "window_start": windows, "window_end": [w + WINDOW for w in windows], "buy_amount": [1.0] * len(windows),
        "sell_amount": [0.5] * len(windows), "settlement_amount": [0.5] * len(windows),
        "trade_count": [1] * len(windows), "revision": [1] * len(windows),
        "updated_at": [FIRST_DAY + timedelta(seconds=batch)] * len(windows), "batch_id": [batch] * len(windows)}),
        Batch("q", batch), write=Write.ADD)


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in one order, whatever order the files gave them in."""
    return frame.sort_values(list(frame.columns), kind="stable", ignore_index=True)


def whole_day(lake: Lake, table: Table, columns: list[str], day: str) -> pd.DataFrame:
    """The other formulation: the whole table read through delta-rs's engine, cut to the day."""
    return on_day(lake.read(table, columns).to_pandas(), day)


def assert_same_day(reader: DayReader, lake: Lake, table: Table, columns: list[str], day: str) -> None:
    pd.testing.assert_frame_equal(canonical(reader.read(day)), canonical(whole_day(lake, table, columns, day)))


def compact(lake: Lake, table: Table) -> None:
    opened = lake.open(table)
    if opened is not None:
        opened.optimize.compact()


def test_a_day_read_after_appends_equals_a_whole_read_of_that_day(tmp_path):
    lake = Lake(tmp_path)
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    assert reader.read(day_of(1)).empty
    for batch in range(6):
        publish_corrections(lake, batch, [window(batch % 3, batch), window(1, 40 + batch)])
        assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(1))
    assert len(reader.read(day_of(1))) == 6 + 2  # a window a batch, and the batches of that day
    assert reader.increments(day_of(1)).files_read == 6


def test_only_the_files_whose_statistics_overlap_the_day_are_read(tmp_path):
    lake = Lake(tmp_path)
    for day in range(30):
        publish_corrections(lake, day, [window(day, slot) for slot in range(36, 40)])
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    assert len(reader.read(day_of(17))) == 4
    assert reader.increments(day_of(17)).files_read == 1  # one of 30 files
    publish_corrections(lake, 30, [window(3, 10)])  # another day's correction: nothing to read
    before = reader.read(day_of(17))
    assert reader.read(day_of(17)) is before and reader.increments(day_of(17)).files_read == 1


def test_a_day_read_after_a_compaction_equals_a_whole_read_and_drops_the_replaced_files(tmp_path):
    lake = Lake(tmp_path)
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    for batch in range(8):
        publish_corrections(lake, batch, [window(batch % 2, batch)])
    assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(0))
    compact(lake, CORRECTIONS)
    assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(0))
    followed = reader.increments(day_of(0))
    assert len(followed.parts) == 1  # the compacted file only: the four it replaced are dropped
    assert len(reader.read(day_of(0))) == 4


def test_the_writer_s_own_compaction_every_twenty_versions_is_followed(tmp_path):
    lake = Lake(tmp_path)
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    for batch in range(45):  # versions 0..44: the writer compacts at 20 and 40
        publish_corrections(lake, batch, [window(batch % 3, batch % 96)])
        if batch % 7 == 0:
            assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(2))
    assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(2))


def test_a_day_read_after_a_merge_that_rewrites_a_file_equals_a_whole_read(tmp_path):
    lake = Lake(tmp_path)
    reader = DayReader(lake, LATE_TRADES, LATE_TRADE_COLUMNS)
    publish_late_trades(lake, 0, [("t1", window(0, 1)), ("t2", window(0, 2)), ("t3", window(1, 3))])
    publish_late_trades(lake, 1, [("t4", window(0, 4))])
    assert reader.read(day_of(0))["backfilled_at"].isna().all()
    publish_late_trades(lake, 2, [("t2", window(0, 2))], backfilled=True)  # an upsert rewrites the first file
    assert_same_day(reader, lake, LATE_TRADES, LATE_TRADE_COLUMNS, day_of(0))
    shown = reader.read(day_of(0)).set_index("trade_id")
    assert shown["backfilled_at"].notna().to_dict() == {"t1": False, "t2": True, "t4": False}


def test_gold_is_followed_through_the_merges_that_add_to_its_windows(tmp_path):
    lake = Lake(tmp_path)
    reader = TableReader(lake, GOLD, GOLD_COLUMNS)
    for batch in range(5):
        publish_gold(lake, batch, [window(batch % 2, 0), window(batch % 2, batch + 1)])
        pd.testing.assert_frame_equal(canonical(reader.read()),
                                      canonical(lake.read(GOLD, GOLD_COLUMNS).to_pandas()))
    assert reader.read().set_index("window_start").loc[window(0, 0), "trade_count"] == 3


@pytest.mark.parametrize("new_versions", [2, 9], ids=["version gone back", "a newer version"])
def test_a_table_deleted_and_made_anew_is_read_afresh(tmp_path, new_versions):
    lake = Lake(tmp_path)
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    for batch in range(5):
        publish_corrections(lake, batch, [window(0, batch)])
    assert len(reader.read(day_of(0))) == 5
    shutil.rmtree(tmp_path / CORRECTIONS.name)
    assert reader.read(day_of(0)).empty  # the log is gone
    for batch in range(new_versions):
        publish_corrections(lake, batch, [window(0, 50 + batch)], query="another")
    assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(0))
    assert len(reader.read(day_of(0))) == new_versions


def test_a_table_made_anew_while_the_reader_looked_away_is_read_afresh(tmp_path):
    lake = Lake(tmp_path)
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    for batch in range(5):
        publish_corrections(lake, batch, [window(0, batch)])
    assert len(reader.read(day_of(0))) == 5
    shutil.rmtree(tmp_path / CORRECTIONS.name)
    for batch in range(2):
        publish_corrections(lake, batch, [window(0, 60 + batch)], query="another")
    assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(0))


def test_a_table_made_anew_without_rows_of_the_day_shows_none_of_the_old_ones(tmp_path):
    lake = Lake(tmp_path)
    for batch in range(3):
        publish_corrections(lake, batch, [window(0, batch)])
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    assert len(reader.read(day_of(0))) == 3
    shutil.rmtree(tmp_path / CORRECTIONS.name)
    publish_corrections(lake, 0, [window(5, 1)], query="another")  # version 0 < 2, another day
    assert reader.read(day_of(0)).empty


def test_a_table_with_deletion_vectors_enabled_is_read_whole_for_the_day(tmp_path):
    lake = Lake(tmp_path)
    publish_corrections(lake, 0, [window(0, 1), window(1, 1)])
    opened = lake.open(CORRECTIONS)
    assert opened is not None
    opened.alter.set_table_properties({"delta.enableDeletionVectors": "true"})
    publish_corrections(lake, 1, [window(0, 2)])
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    assert_same_day(reader, lake, CORRECTIONS, CORRECTION_COLUMNS, day_of(0))
    followed = reader.increments(day_of(0))
    assert followed.whole_reads == 1 and followed.files_read == 0


def test_the_reader_keeps_the_last_two_days_asked(tmp_path):
    lake = Lake(tmp_path)
    for day in range(3):
        publish_corrections(lake, day, [window(day, 1)])
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    first = reader.read(day_of(0))
    reader.read(day_of(1))
    assert reader.read(day_of(0)) is first  # still kept
    reader.read(day_of(2))  # day 1 is now the least recently asked
    assert reader.read(day_of(0)) is first
    assert len(reader.read(day_of(1))) == 1  # read again, afresh


def test_no_day_or_text_that_is_not_a_day_reads_nothing(tmp_path):
    lake = Lake(tmp_path)
    publish_corrections(lake, 0, [window(0, 1)])
    reader = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    for day in (None, "", "2026-3-2", "yesterday", "2026-02-30"):
        assert reader.read(day).empty and list(reader.read(day).columns) == CORRECTION_COLUMNS


def test_incremental_and_whole_reads_agree_over_random_writes(tmp_path):
    """Random appends on random days, MERGEs that rewrite files, compactions: after each write the
    followed days, the followed too-late trades and gold equal whole reads of the same."""
    lake, rng = Lake(tmp_path), random.Random(20260302)
    corrections = DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS)
    late = DayReader(lake, LATE_TRADES, LATE_TRADE_COLUMNS)
    gold = TableReader(lake, GOLD, GOLD_COLUMNS)
    known: list[tuple[str, datetime]] = []
    for batch in range(60):
        step = rng.random()
        if step < 0.4:
            publish_corrections(lake, batch, [window(rng.randrange(4), rng.randrange(96))
                                              for _ in range(rng.randrange(1, 5))])
        elif step < 0.6:
            trades = [(f"t{batch}-{n}", window(rng.randrange(4), rng.randrange(96)))
                      for n in range(rng.randrange(1, 4))]
            known.extend(trades)
            publish_late_trades(lake, batch, trades)
        elif step < 0.7 and known:
            publish_late_trades(lake, batch, rng.sample(known, min(2, len(known))), backfilled=True)
        elif step < 0.9:
            publish_gold(lake, batch, [window(rng.randrange(4), rng.randrange(96)) for _ in range(3)])
        else:
            compact(lake, rng.choice([CORRECTIONS, LATE_TRADES, GOLD]))
        for day in (day_of(rng.randrange(4)), day_of(3)):
            assert_same_day(corrections, lake, CORRECTIONS, CORRECTION_COLUMNS, day)
            assert_same_day(late, lake, LATE_TRADES, LATE_TRADE_COLUMNS, day)
        pd.testing.assert_frame_equal(canonical(gold.read()), canonical(lake.read(GOLD, GOLD_COLUMNS).to_pandas()))
    assert corrections.increments(day_of(3)).log_follows > 0  # most versions followed from the log's JSON


def test_a_file_is_read_for_a_day_when_its_statistics_overlap_it_or_do_not_say():
    day = Span.utc_day("window_start", "2026-03-02")
    assert day.start == datetime(2026, 3, 2, tzinfo=UTC) and day.end == datetime(2026, 3, 3, tzinfo=UTC)
    # A row at 00:00:00.000500 has a maximum cut down to midnight: the file is read.
    assert day.overlaps(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
    assert day.overlaps(None, None) and day.overlaps(datetime(2026, 3, 2, 23, tzinfo=UTC), None)
    assert not day.overlaps(datetime(2026, 3, 3, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC))
    assert not day.overlaps(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 1, 23, 59, 59, 998000, tzinfo=UTC))
    with pytest.raises(ValueError):
        Span.utc_day("window_start", "2026-02-30")


def publish_silver(lake: Lake, batch: int, trades: list[tuple[str, str, datetime]]) -> None:
    """trades: (channel, symbol, event time)."""
    ids = [f"s{batch}-{n}" for n in range(len(trades))]
    lake.publish(SILVER, rows_of(SILVER, {
        "trade_id": ids, "channel": [c for c, _, _ in trades], "symbol": [s for _, s, _ in trades],
        "side": ["BUY"] * len(ids), "event_time": [t for _, _, t in trades], "offset": list(range(len(ids)))}),
        Batch("q", batch))


def test_the_filter_values_are_those_of_the_day_asked_read_from_that_day_s_files(tmp_path):
    lake = Lake(tmp_path)
    publish_silver(lake, 0, [("web", "AAPL", window(0, 40)), ("kiosk", "NVDA", window(0, 41))])
    publish_silver(lake, 1, [("mobile", "MSFT", window(1, 40))])
    values = SilverFilterValues(lake)
    assert values.read(day_of(0)) == (["kiosk", "web"], ["AAPL", "NVDA"])
    assert values.read(day_of(1)) == (["mobile"], ["MSFT"])
    assert values.read() == (["mobile"], ["MSFT"])  # no day given: silver's newest
    assert values.increments(day_of(0)).files_read == 1
    publish_silver(lake, 2, [("web", "IBM", window(1, 41)), ("desktop", "IBM", window(0, 42))])
    compact(lake, SILVER)
    assert values.read(day_of(0)) == (["desktop", "kiosk", "web"], ["AAPL", "IBM", "NVDA"])
    assert values.read(day_of(1)) == (["mobile", "web"], ["IBM", "MSFT"])
    assert values.read("2026-01-01") == ([], [])


def test_the_page_s_drill_down_options_follow_the_day_shown(tmp_path):
    lake = Lake(tmp_path)
    publish_gold(lake, 0, [window(0, 40), window(1, 40)])
    publish_silver(lake, 0, [("web", "AAPL", window(0, 40)), ("mobile", "MSFT", window(1, 40))])
    client = create_app(lake).server.test_client()
    options = [f"{ids.CHANNEL_FILTER}.options", f"{ids.SYMBOL_FILTER}.options"]

    def shown(day):
        answer = call(client, options, {f"{ids.FILTER_TICK}.n_intervals": 1, f"{ids.DAY_PICKER}.value": day},
                      {options[0]: [], options[1]: []})
        return [o["value"] for o in answer[ids.CHANNEL_FILTER]["options"]]

    assert shown(None) == ["mobile"]  # the newest day, as the chart shows it
    assert shown(day_of(0)) == ["web"]
    assert shown("not a day") == ["mobile"]
    web = store_snapshot(client, day=day_of(0), channel="web")
    assert web["drill_down"] and [w["buy_amount"] for w in web["windows"]] == [0.0]
