"""Figure building: snapshot dicts -> Plotly figures. Pure; no I/O."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import accumulate

from dashboard import ids
from streaming.run.health import catch_up_line, kafka_trouble, newest_watermark, quiet_close_line

# The seed's meaning: buy blue, sell orange, settlement grey (a colour-blind-safe pair + grey).
BUY_COLOR = "#1f77b4"
SELL_COLOR = "#ff7f0e"
SETTLEMENT_COLOR = "#7f7f7f"


def utc_time(text: str) -> datetime:
    """An ISO 8601 time as an aware UTC datetime (a time without a zone is taken as UTC)."""
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def window_rows(snapshot: dict | None) -> list[dict]:
    """The snapshot's windows, oldest first, each with its start as a UTC datetime (`start`).
    Plain Python: for a day's few dozen windows, pandas would cost more than the work."""
    rows = [dict(w, start=utc_time(w["window_start"])) for w in (snapshot or {}).get("windows", [])]
    return sorted(rows, key=lambda w: w["start"])


def _window_ms(rows: list[dict]) -> float | None:
    """The window's length in milliseconds (the axis ticks at each window), from the first row."""
    end = rows[0].get("window_end") if rows else None
    return (utc_time(end) - rows[0]["start"]).total_seconds() * 1000 if isinstance(end, str) else None


AMOUNTS = ("buy_amount", "sell_amount", "settlement_amount")


def running_totals(rows: list[dict]) -> list[dict]:
    """Cumulative buy, sell and settlement over the day, window by window (as first reported too)."""
    columns = [c for c in (*AMOUNTS, *(f"{a}_first" for a in AMOUNTS)) if rows and c in rows[0]]
    totals = {c: list(accumulate(float(w[c]) for w in rows)) for c in columns}
    return [dict(w, **{c: totals[c][i] for c in columns}) for i, w in enumerate(rows)]


def first_reported_traces(rows: list[dict], x: list[str], hover: str) -> list[dict]:
    """Faint dashed lines of the values the chart first showed for each window, before any
    late trade corrected them."""
    return [
        scatter(x, [w[f"{measure}_first"] for w in rows], f"{label} as first reported", hover,
                mode="lines", legendgroup="first-reported", opacity=0.5,
                line=dict(color=color, width=1.5, dash="dash"))
        for label, measure, color in (("Buy", "buy_amount", BUY_COLOR), ("Sell", "sell_amount", SELL_COLOR),
                                      ("Settlement", "settlement_amount", SETTLEMENT_COLOR))
        if rows and f"{measure}_first" in rows[0]
    ]


# Figures are plain dicts in Plotly's JSON shape: building go.Figure objects (validation, and
# deep copies of a template) cost most of a refresh. The look of plotly_white, spelled out:
GRID = "#ebf0f8"
CHART_HEIGHT = 430  # px: with the KPI cards and the feed beside it, one screen at 1440x900
# A chart's box: the figure's height with the box's padding and border. Plotly's responsive resize
# takes its height from the box, so a box sized by its own content can collapse and stay so.
CHART_BOX = {"height": f"{CHART_HEIGHT + 14}px"}
WINDOW_TICKS = 6  # a day spanning fewer windows gets a tick at each (they fit on a phone too)
BASE_LAYOUT = dict(paper_bgcolor="white", plot_bgcolor="white", font=dict(color="#2a3f5f"),
                   hoverlabel=dict(align="left"))


def axis(**options) -> dict:
    return {"gridcolor": GRID, "linecolor": GRID, "zerolinecolor": GRID, "ticks": "", "automargin": True, **options}


def scatter(x, y, name: str, hover: str, **options) -> dict:
    """A scatter trace; times as ISO strings, numbers as plain floats (JSON-ready)."""
    xs = [v.isoformat() if hasattr(v, "isoformat") else v for v in x]
    return dict(type="scatter", x=xs, y=[float(v) for v in y], name=name, hovertemplate=hover, **options)


def empty_figure(message: str) -> dict:
    return dict(data=[], layout=dict(
        BASE_LAYOUT, height=CHART_HEIGHT, margin=dict(l=60, r=20, t=30, b=50),
        xaxis=dict(visible=False), yaxis=dict(visible=False),
        annotations=[dict(text=message, showarrow=False, font=dict(size=16, color="#555"),
                          xref="paper", yref="paper", x=0.5, y=0.5)],
    ))


def correction_story(correction: dict) -> str:
    """'09:30 window: buy $1,200.00 → $1,700.00 at 10:31:05 UTC, 2 late trades'."""
    changes = [f"{label} ${correction[f'{m}_before']:,.2f} → ${correction[f'{m}_after']:,.2f}"
               for label, m in (("buy", "buy_amount"), ("sell", "sell_amount"))
               if correction[f"{m}_before"] != correction[f"{m}_after"]]
    n = correction["late_trades"]
    return (f"{correction['window_start'][11:16]} window: {', '.join(changes) or 'unchanged amounts'}"
            f" at {correction['corrected_at'][11:19]} UTC, {n} late trade{'s' if n != 1 else ''}")


def was_corrected(window: dict) -> bool:
    """Whether a window record's values as first reported (its `*_first`) differ from its current ones."""
    return any(window.get(f"{m}_first", window[m]) != window[m] for m in (*AMOUNTS, "trade_count") if m in window)


def earlier_story(window: dict) -> str:
    """'09:30 window: first reported buy $1,200.00, sell $300.00; now $1,700.00, $300.00'."""
    first = ", ".join(f"{label} ${window[f'{m}_first']:,.2f}" for label, m in (("buy", "buy_amount"),
                                                                              ("sell", "sell_amount")))
    return (f"{window['start']:%H:%M} window: first reported {first}; now ${window['buy_amount']:,.2f}, "
            f"${window['sell_amount']:,.2f} (corrected before the feed's newest corrections)")


def corrected_windows(rows: list[dict], corrections: list[dict]) -> dict[str, list[str]]:
    """Window start (ISO, UTC) -> what changed it, for every corrected window of `rows`
    (window_rows): those the feed's corrections (newest first) name, told by them, and those whose
    values as first reported differ from their current ones (corrected earlier than the feed
    reaches), told by that difference. A drill-down's windows have no `*_first` and no corrections."""
    stories: dict[str, list[str]] = {}
    for correction in corrections:
        stories.setdefault(utc_time(correction["window_start"]).isoformat(), []).append(correction_story(correction))
    shown = {w["start"].isoformat(): w for w in rows}
    for start, window in shown.items():
        if start not in stories and was_corrected(window):
            stories[start] = [earlier_story(window)]
    return {start: lines for start, lines in stories.items() if start in shown}


def current_watermark(snapshot: dict | None) -> datetime | None:
    return newest_watermark((snapshot or {}).get("status", {}))


def finality(snapshot: dict | None, rows: list[dict]) -> list[bool] | None:
    """Per window: whether it is final, against the live snapshot's watermark; None for a
    snapshot that carries none to judge by (the time machine's, at an earlier instant)."""
    if snapshot is None or "status" not in snapshot or "as_of" in snapshot:
        return None
    watermark = current_watermark(snapshot)
    return [is_final(utc_time(w["window_end"]), watermark) if w.get("window_end") else False for w in rows]


def is_final(window_end: datetime, watermark: datetime | None) -> bool:
    """Whether a window is final: it ends at or before the watermark, so no trade can change it
    but as a too-late one (semantics.md#the-watermark)."""
    return watermark is not None and window_end <= watermark


def summary_figure(snapshot: dict | None, mode: str = ids.MODE_WINDOW, first_reported: bool = False) -> dict:
    """The trade summary chart: total buy, total sell and settlement per window (or running),
    optionally with the values as first reported beside the corrected ones."""
    rows = window_rows(snapshot)
    if not rows:
        return empty_figure("Waiting for the first trades… the chart fills as windows are processed.")
    if mode == ids.MODE_RUNNING:
        rows = running_totals(rows)
    x = [w["start"].isoformat() for w in rows]
    hover = "%{fullData.name}: %{y:$,.2f}<extra></extra>"
    watermark = current_watermark(snapshot)
    # A window still open (right of the watermark) is drawn hollow: its totals may still grow.
    judged = finality(snapshot, rows) if mode == ids.MODE_WINDOW else None
    final = judged if judged is not None else [True] * len(rows)
    symbols = ["circle" if done else "circle-open" for done in final]
    # customdata: the window start with its zone, which a click hands back (Plotly's x has none).
    data = [
        scatter(x, [w["buy_amount"] for w in rows], "Total buy", hover, mode="lines+markers",
                line=dict(color=BUY_COLOR, width=2.5), customdata=x, marker=dict(symbol=symbols, size=7)),
        scatter(x, [w["sell_amount"] for w in rows], "Total sell", hover, mode="lines+markers",
                line=dict(color=SELL_COLOR, width=2.5), customdata=x, marker=dict(symbol=symbols, size=7)),
        scatter(x, [w["settlement_amount"] for w in rows], "Settlement (buy − sell)", hover, mode="lines+markers",
                line=dict(color=SETTLEMENT_COLOR, width=2, dash="dot"), customdata=x,
                marker=dict(symbol=symbols, size=7)),
    ]
    if not all(final):  # the legend says what a hollow marker means
        data.append(dict(type="scatter", x=[None], y=[None], name="Not final yet (right of the watermark)",
                         mode="markers", hoverinfo="skip", marker=dict(symbol="circle-open", size=9, color="#6b7280")))
    if first_reported:
        data += first_reported_traces(rows, x, hover)
    # Corrected windows: a marker on the buy line whose hover tells what changed. Every corrected
    # window of the day, also those corrected before the feed's newest corrections.
    # A drill-down shows silver's windows, which corrections of the streaming totals do not describe.
    drill_down = (snapshot or {}).get("drill_down")
    stories = corrected_windows(window_rows(snapshot), [] if drill_down else (snapshot or {}).get("corrections", []))
    corrected = [(start, w) for start, w in zip(x, rows) if start in stories]
    if corrected:
        data.append(scatter(
            [start for start, _ in corrected], [w["buy_amount"] for _, w in corrected], "Corrected by late trades",
            "%{hovertext}<extra></extra>", mode="markers",
            marker=dict(symbol="diamond-open", size=14, color="#d62728", line=dict(width=2)),
            hovertext=["<br>".join(stories[start][:3]) for start, _ in corrected],
        ))
    shapes, annotations = [], []
    if not all(final):  # a faint band over the windows still open, to the last one's end
        first_open, end = x[final.index(False)], rows[-1].get("window_end") or x[-1]
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=first_open, x1=end, y0=0, y1=1, layer="below",
                           fillcolor="#9ca3af", opacity=0.12, line=dict(width=0)))
    if watermark is not None and rows[0]["start"] <= watermark <= rows[-1]["start"] + timedelta(hours=1):
        # Windows ending left of the watermark are final; right of it they may still change.
        shapes.append(dict(type="line", xref="x", yref="paper", x0=watermark.isoformat(), x1=watermark.isoformat(),
                           y0=0, y1=1, line=dict(color="#6b7280", dash="dash", width=1)))
        annotations.append(dict(x=watermark.isoformat(), y=1, yref="paper", text="watermark", showarrow=False,
                                xanchor="left", yanchor="bottom", font=dict(size=11, color="#6b7280")))
    day = rows[0]["start"].strftime("%a %d %b %Y")  # short: a phone's chart is some 250 px wide
    # Ticks: one per window while the day spans few (none between windows); else Plotly picks
    # round steps for the width, kept level.
    window_ms = _window_ms(rows)
    span_ms = (rows[-1]["start"] - rows[0]["start"]).total_seconds() * 1000
    dtick = window_ms if window_ms and span_ms < WINDOW_TICKS * window_ms else None
    return dict(data=data, layout=dict(
        BASE_LAYOUT, height=CHART_HEIGHT, hovermode="x unified", shapes=shapes, annotations=annotations,
        margin=dict(l=60, r=12, t=28, b=40),
        # Under the plot: at the top the mode bar would cover it on a narrow screen.
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0),
        xaxis=axis(title=dict(text=f"Window start, UTC · {day}", standoff=6), type="date", tickformat="%H:%M",
                   hoverformat="%H:%M window", dtick=dtick, tickangle=0),
        yaxis=axis(title=dict(text="Amount (USD)" + (" · running total" if mode == ids.MODE_RUNNING else "")),
                   tickprefix="$", tickformat=".3~s", zeroline=True, zerolinecolor="#bbb"),
        uirevision="keep-zoom",
    ))


def as_of_figure(figure: dict, label: str | None) -> dict:
    """A chart of gold as it stood at an earlier instant, saying so in its top left corner (the
    mode bar takes the right one)."""
    layout = dict(figure.get("layout") or {})
    layout["annotations"] = [*layout.get("annotations", []), dict(
        text=label or "an earlier instant", xref="paper", yref="paper", x=0, y=1.02, xanchor="left",
        yanchor="bottom", showarrow=False, font=dict(size=12, color="#b45309"))]
    return {**figure, "layout": layout}


def lag_sparkline(snapshot: dict | None) -> dict:
    """The total Kafka lag (the slowest query's) over the last minutes."""
    history = (snapshot or {}).get("status", {}).get("lag_history", [])
    trace = scatter([h["at"] for h in history], [h["lag"] for h in history], "lag",
                    "%{x|%H:%M:%S} UTC: %{y:,} records behind<extra></extra>", mode="lines",
                    line=dict(color=BUY_COLOR, width=1.5), fill="tozeroy")
    # Tick labels by the step Plotly picks for the span and width (dtickrange in ms, ends included):
    # HH:MM alone repeats ("16:06, 16:06, 16:06") when ticks are under a minute apart.
    ticks: dict = dict(tickformat="%H:%M:%S", tickformatstops=[
        dict(dtickrange=[None, 999], value="%H:%M:%S.%1f"), dict(dtickrange=[1000, 59_999], value="%H:%M:%S"),
        dict(dtickrange=[60_000, None], value="%H:%M")])
    times = sorted({h["at"] for h in history})
    if len(times) <= 3:  # the first seconds: a tick per sample, not per 2 ms (one) or 0.5 s (two or three)
        ticks = dict(tickformat="%H:%M:%S", tickmode="array", tickvals=times)
    return dict(data=[trace], layout=dict(
        BASE_LAYOUT, height=90, margin=dict(l=40, r=10, t=20, b=20), showlegend=False,
        title=dict(text="Total lag, last minutes", font=dict(size=12), x=0, y=0.98),
        xaxis=axis(showgrid=False, type="date", **ticks),
        yaxis=axis(rangemode="tozero", tickformat=","),
    ))


def status_text(snapshot: dict | None) -> str:
    status = (snapshot or {}).get("status", {})
    producer = status.get("producer")
    parts = []
    if producer is None:
        parts.append("Producer: not available")
    else:
        state = "on" if producer["enabled"] else "off"
        parts.append(f"Producer {state} · {producer['rate']:g} trades/s · sent {producer['sent']:,}"
                     + (f" · failed {producer['failed']:,}" if producer["failed"] else "")
                     + f" · market time {producer['market_time'][11:16]}")
    if status.get("catch_up"):
        parts.insert(0, f"Catching up: {catch_up_line(status['catch_up'])}")
    trouble = kafka_trouble(status)
    if trouble:
        parts.insert(0, trouble)
    queries = status.get("queries", [])
    for query in queries:
        if query.get("error"):
            parts.append(f"Query {query['name']} FAILED: {query['error'][:200]}")
    batches = [q["last_batch_at"] for q in queries if q.get("last_batch_at")]
    parts.append(f"Last batch {max(batches)[11:19] + ' UTC' if batches else '—'}")
    watermarks = [q["watermark"] for q in queries if q.get("watermark")]
    parts.append(f"Watermark {max(watermarks)[:16].replace('T', ' ') if watermarks else '— (no trades yet)'}")
    parts.extend(line[0].upper() + line[1:] for line in map(quiet_close_line, queries) if line)
    return "  ·  ".join(parts)
