"""What the panels' callbacks share: the readers, the run's optional parts, the frames' derived values.

The readers hand back the same frame until what they keep changes; what is worked out from a
frame (gold's trading days, a day's late data, a day's history's first-reported values and
span) is kept until then."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from dashboard.data import (
    CORRECTION_COLUMNS,
    GOLD_COLUMNS,
    LATE_TRADE_COLUMNS,
    TableReader,
    first_values,
    history_span,
    late_data,
    trading_days,
)
from dashboard.readers import (
    HISTORY_DAYS_KEPT,
    DayReader,
    HistoryReader,
    LatenessReader,
    QuarantineReader,
    SilverFilterValues,
)
from streaming.lake.store import Lake
from streaming.lake.tables import CORRECTIONS, GOLD, GOLD_VIEW, LATE_TRADES
from streaming.medallion.lateness import LatenessTally


@dataclass(frozen=True)
class Drawing:
    """A panel drawn from the snapshot store: its outputs, worked out by compute(snapshot,
    *choices) from the store and the page's own choices (each (id, prop, the layout's default)).
    The page's server callback and the publisher's push draw it alike: a page in the default view
    with the default choices is sent the outputs themselves and sets them with no request."""

    name: str
    outputs: tuple[tuple[str, str], ...]
    compute: Callable[..., Any]
    choices: tuple[tuple[str, str, Any], ...] = ()
    tab: str | None = None  # the tab it shows in (tabs.TABS), if not on the page's one screen

    def values(self, snapshot: Any, *choices: Any) -> list:
        """The outputs' values, one per output."""
        drawn = self.compute(snapshot, *choices)
        return list(drawn) if len(self.outputs) > 1 else [drawn]

    def for_push(self, snapshot: Any) -> dict:
        """The outputs drawn with the default choices, as push.js sets them: [[id, prop, value]],
        the choices they were drawn with ({"id.prop": value}), and the tab they show in (push.js
        sets them while it is shown, and the newest push's when it is opened)."""
        values = self.values(snapshot, *(default for _, _, default in self.choices))
        return {"name": self.name, "props": [[i, prop, value] for (i, prop), value in zip(self.outputs, values)],
                "choices": {f"{i}.{prop}": default for i, prop, default in self.choices}, "tab": self.tab}


@dataclass(frozen=True)
class PageReaders:
    """Gold whole (small: a row per window; the page needs all its days), and corrections,
    too-late trades and gold's change history of one day at a time (they grow for ever)."""

    gold: TableReader
    corrections: DayReader
    late_trades: DayReader
    history: HistoryReader

    @classmethod
    def of(cls, lake: Lake) -> PageReaders:
        return cls(TableReader(lake, GOLD, GOLD_COLUMNS), DayReader(lake, CORRECTIONS, CORRECTION_COLUMNS),
                   DayReader(lake, LATE_TRADES, LATE_TRADE_COLUMNS), HistoryReader(lake))


@dataclass
class PageContext:
    """status: the health snapshot, read now. Without a simulator, reconciler or lake the
    controls that need them say so on the page."""

    readers: PageReaders
    status: Callable[[], dict]
    simulator: Any = None  # a Simulator
    reconciler: Any = None  # a Reconciler
    lake: Lake | None = None
    filter_values: SilverFilterValues | None = None
    quarantine: QuarantineReader | None = None
    push: Any = None  # the app's push.Publisher, which sets itself here when it is made
    lateness: LatenessReader | None = None
    # What is worked out from a frame is kept until the reader hands back another (gold changes
    # with every micro-batch, a day's corrections far less often).
    _days_of: dict = field(init=False, repr=False)
    _late_of: dict = field(init=False, repr=False)
    _history_of: dict = field(init=False, repr=False)
    _lateness_of: dict = field(init=False, repr=False)

    def __post_init__(self):
        self._days_of = {"gold": None, "days": []}
        self._late_of = {"corrections": None, "late_trades": None, "day": None, "late": None}
        self._history_of = {}  # day -> its day_history
        self._lateness_of = {"day": None, "lateness": None, "answer": None}

    def steady(self) -> bool:
        """Whether no gold step of this process is midway: gold commits beside its corrections
        and history, and a push reads them at one micro-batch."""
        return self.lake is None or self.lake.steady(*GOLD_VIEW)

    def gold_days(self) -> list[str]:
        """trading_days of gold, worked out again only when the reader has read a new frame."""
        gold = self.readers.gold.read()
        if self._days_of["gold"] is not gold:
            self._days_of.update(gold=gold, days=trading_days(gold))
        return self._days_of["days"]

    def drawn(self, drawing: Drawing, snapshot: Any, *choices: Any) -> Any:
        """A panel's outputs drawn from the snapshot store and the page's choices, worked out once
        per push for every page (push.Publisher.shared); without a publisher, now."""
        if self.push is None:
            return drawing.compute(snapshot, *choices)
        return self.push.shared(drawing.name, drawing.compute, snapshot, *choices)

    def lateness_answer(self, day: str | None) -> dict:
        """/api/lateness's answer for the day the page shows (see pick_day)."""
        return self.lateness_of(self.shown_day(day))

    def lateness_of(self, day: str | None) -> dict:
        """/api/lateness's answer for a day (None: no day yet), worked out again only when the
        reader hands back another lateness (a new file of the day, or its ledger rows)."""
        from dashboard.api import lateness_json

        assert self.lateness is not None
        if day is None:
            return lateness_json(LatenessTally.empty(self.lateness.points_us), None, self.lateness.delay)
        lateness = self.lateness.read(day)
        kept = self._lateness_of  # pages ask from several threads: one dict is read, a new one put
        if kept["day"] == day and kept["lateness"] is lateness:
            return kept["answer"]
        answer = lateness_json(lateness, day, self.lateness.delay)
        self._lateness_of = {"day": day, "lateness": lateness, "answer": answer}
        return answer

    def shown_day(self, day: str | None) -> str | None:
        """The day the page shows for the picker's choice (see pick_day)."""
        return pick_day(day, self.gold_days())

    def day_late_data(self, day: str | None) -> dict:
        """late_data of the day, worked out again only when the day's corrections or late trades changed."""
        late_of = self._late_of
        corrections, late_trades = self.readers.corrections.read(day), self.readers.late_trades.read(day)
        if not (late_of["corrections"] is corrections and late_of["late_trades"] is late_trades
                and late_of["day"] == day):
            late_of.update(corrections=corrections, late_trades=late_trades, day=day,
                           late=late_data(corrections, late_trades, day))
        return late_of["late"]

    def day_history(self, day: str | None) -> dict:
        """The day's history in change order ("history"), its corrected windows as first reported
        ("first", first_values) and its span ("span", history_span): worked out again only when
        the reader hands back another table, and then only for the windows that changed (a
        day's history grows all day). The last few days asked are kept."""
        ordered, windows = self.readers.history.read_windows(day)
        days = self._history_of
        kept = days.get(day)
        if kept is not None and kept["history"] is ordered:
            return kept
        had = kept["windows"] if kept is not None else {}
        each = {start: had[start] if start in had and had[start][0] is rows else
                (rows, first_values(rows), history_span(rows)) for start, rows in windows.items()}
        spans = [span for _, _, span in each.values() if span is not None]
        kept = {"history": ordered, "day": day, "windows": each,
                "first": {start: row for _, first, _ in each.values() for start, row in first.items()},
                "span": [min(s[0] for s in spans), max(s[1] for s in spans)] if spans else None}
        # A new dict rather than an update: another request may be reading the one kept.
        others = [(d, k) for d, k in days.items() if d != day][1 - HISTORY_DAYS_KEPT:]
        self._history_of = {**dict(others), day: kept}
        return kept


def pick_day(day: str | None, days: list[str]) -> str | None:
    """The day the page shows for the picker's choice: that day if gold has it, else the newest."""
    return day if day in days else next(iter(days), None)
