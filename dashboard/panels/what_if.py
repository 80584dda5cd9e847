"""The Lateness tab: how late the shown day's trades arrived behind the stream's front, and how many
each watermark delay would have left out (the what-if of --watermark; semantics.md#lateness).

Drawn from /api/lateness's answer (api.lateness_json) over the page's LatenessReader, for the
day the picker shows, while the tab is open; the figures and the sentence are pure functions of
that answer and the delay chosen on the slider."""

from __future__ import annotations

import math

from dash import ClientsideFunction, Dash, Input, Output, State, dcc, html, no_update

from dashboard import ids
from dashboard.context import PageContext
from dashboard.figures import BASE_LAYOUT, BUY_COLOR, SELL_COLOR, axis, empty_figure
from dashboard.inputs import choice


def layout() -> html.Section:
    return html.Section(className="panel lateness", children=[
        html.H2("Lateness: what each watermark delay would have left out"),
        dcc.Store(id=ids.LATENESS_TICK, data=0),
        dcc.Store(id=ids.LATENESS_TAB, data=ids.TAB_LATENESS),
        html.P(id=ids.LATENESS_SENTENCE, className="lateness-sentence", role="status",
               children="Open this tab to see the shown day's lateness."),
        html.Label(["Delay to try ", dcc.Slider(id=ids.LATENESS_DELAY, min=0, max=1, step=1, value=None, marks={},
                                                included=False, allow_direct_input=False)],
                   className="lateness-delay"),
        html.Div(className="lateness-graphs", children=[
            dcc.Graph(id=ids.LATENESS_DISTRIBUTION, config={"displaylogo": False, "responsive": True}),
            dcc.Graph(id=ids.LATENESS_CURVE, config={"displaylogo": False, "responsive": True}),
        ]),
    ])


def minutes(seconds: float) -> str:
    """'45 minutes', '1 minute', '2 hours', '90 seconds'."""
    if seconds % 3600 == 0 and seconds >= 3600:
        hours = int(seconds // 3600)
        return f"{hours} hour{'s' if hours != 1 else ''}"
    if seconds % 60 == 0:
        whole = int(seconds // 60)
        return f"{whole} minute{'s' if whole != 1 else ''}"
    return f"{seconds:g} seconds"


def sentence(answer: dict, delay_s: float | None) -> str:
    """'With 45 minutes, 3 of 41,200 trades (0.007%) would have been too late, and windows final
    15 minutes later.' for the delay chosen (the run's own when None)."""
    if not answer.get("day"):
        return "No trading day yet: the lateness shows once trades arrive."
    run = answer["watermark_s"]
    chosen = delay_s if delay_s is not None else run
    point = next((p for p in answer["curve"] if p["delay_s"] == chosen), None)
    if point is None or not answer["trades"]:
        return f"{answer['day']}: no trade judged yet."
    verb = "were" if chosen == run else "would have been"
    text = (f"{answer['day']}: with {minutes(chosen)}, {point['too_late']:,} of {answer['trades']:,} trades "
            f"({point['share']:.3%}) {verb} too late")
    if chosen == run:
        text += f" (the run's delay, --watermark {minutes(run)})."
    else:
        text += f", and windows final {minutes(abs(chosen - run))} {'later' if chosen > run else 'sooner'}."
    if answer.get("closed_when_quiet"):
        n = answer["closed_when_quiet"]
        text += (f" {n:,} of them came for windows closed when the input went quiet (--close-idle-after): "
                 "too late at any delay.")
    if answer.get("not_judged"):
        text += f" {answer['not_judged']:,} trades of the last batch are not judged yet."
    return text


def distribution_figure(answer: dict) -> dict:
    """The day's trades by lateness (bars, log scale), the run's delay marked."""
    bins = [b for b in answer.get("distribution", []) if b["trades"]]
    closed = answer.get("closed_when_quiet") or 0
    if not bins and not closed:
        return empty_figure("No trade of this day judged yet.")
    labels = [bin_label(b) for b in answer["distribution"]]
    run_label = next((label for b, label in zip(answer["distribution"], labels)
                      if b["from_s"] <= answer["watermark_s"] and (b["to_s"] is None
                                                                   or answer["watermark_s"] < b["to_s"])), None)
    counts = [b["trades"] for b in answer["distribution"]]
    colors = [BUY_COLOR] * len(counts)
    if closed:  # too late at any delay: a bar of its own, apart from the lateness bins
        labels, counts, colors = [*labels, "window closed (quiet)"], [*counts, closed], [*colors, "#6b7280"]
    bar = dict(type="bar", x=labels, y=counts, marker=dict(color=colors),
               hovertemplate="%{x}: %{y:,} trades<extra></extra>", name="trades")
    shapes = [] if run_label is None else [dict(type="line", xref="x", yref="paper", x0=run_label, x1=run_label,
                                                y0=0, y1=1, line=dict(color="#6b7280", dash="dash", width=1))]
    return dict(data=[bar], layout=dict(
        BASE_LAYOUT, height=260, margin=dict(l=60, r=12, t=36, b=60), shapes=shapes, showlegend=False,
        title=dict(text="Trades by how far behind the front they arrived", font=dict(size=13), x=0),
        xaxis=axis(title=dict(text="lateness (dashed: the watermark's delay falls in this bin)")),
        yaxis=axis(type="log", title=dict(text="trades"), tickformat=",")))


def bin_label(b: dict) -> str:
    if b["from_s"] == 0 and b["to_s"] is not None and b["to_s"] < 1e-3:
        return "0 (moved the front)"
    low = short(b["from_s"])
    return f"{low}+" if b["to_s"] is None else f"{low}-{short(b['to_s'])}"


def short(seconds: float) -> str:
    if seconds < 1:
        return "0"
    if seconds < 60:
        return f"{seconds:g}s"
    if seconds < 3600:
        return f"{seconds / 60:g}m"
    return f"{seconds / 3600:g}h"


def curve_figure(answer: dict, delay_s: float | None) -> dict:
    """The what-if: the share of the day's trades too late against the delay; the run's delay and
    the one chosen marked."""
    curve = answer.get("curve", [])
    if not answer.get("trades"):
        return empty_figure("The what-if shows once trades are judged.")
    x = [p["delay_s"] / 60 for p in curve]
    line = dict(type="scatter", mode="lines+markers", x=x, y=[p["share"] * 100 for p in curve], name="too late",
                line=dict(color=SELL_COLOR, width=2), customdata=[p["too_late"] for p in curve],
                hovertemplate="%{x:g} min: %{customdata:,} trades (%{y:.3f}%)<extra></extra>")
    marks = [(answer["watermark_s"], "#6b7280", "--watermark")]
    if delay_s is not None and delay_s != answer["watermark_s"]:
        marks.append((delay_s, SELL_COLOR, "chosen"))
    # On a log axis a shape's x is the value, an annotation's its log10 (Plotly's rule).
    shapes = [dict(type="line", xref="x", yref="paper", x0=s / 60, x1=s / 60, y0=0, y1=1,
                   line=dict(color=color, dash="dash", width=1)) for s, color, _ in marks]
    annotations = [dict(x=math.log10(s / 60), y=1, yref="paper", text=text, showarrow=False, xanchor="left",
                        yanchor="bottom", font=dict(size=11, color=color)) for s, color, text in marks]
    return dict(data=[line], layout=dict(
        BASE_LAYOUT, height=260, margin=dict(l=60, r=12, t=36, b=60), shapes=shapes, annotations=annotations,
        showlegend=False, title=dict(text="Too late, by the delay (what-if)", font=dict(size=13), x=0),
        xaxis=axis(title=dict(text="watermark delay"), type="log", tickvals=x,
                   ticktext=[short(p["delay_s"]) for p in curve]),
        yaxis=axis(title=dict(text="too late (%)"), rangemode="tozero")))


def slider_delays(answer: dict) -> list[float]:
    """The what-if's delays in seconds, the slider's positions in order."""
    return [p["delay_s"] for p in answer.get("curve", [])]


def slider_marks(answer: dict) -> dict:
    """Position -> '1m', '45m', '2h': evenly spaced, whatever the delays' spread."""
    return {i: short(delay) for i, delay in enumerate(slider_delays(answer))}


def chosen_delay(answer: dict, position) -> float | None:
    """The delay at the slider's position (None: the run's own)."""
    delays = slider_delays(answer)
    return delays[position] if isinstance(position, int) and 0 <= position < len(delays) else None


def register(app: Dash, context: PageContext) -> None:
    # The tab opened or another day move the tick, and so does a push (assets/push.js), only while
    # the tab is open (assets/what_if.js): hidden, the tab costs no request.
    app.clientside_callback(ClientsideFunction("whatIf", "follow"), Output(ids.LATENESS_TICK, "data"),
                            Input(ids.PAGE_TABS, "value"), Input(ids.DAY_PICKER, "value"),
                            State(ids.LATENESS_TAB, "data"), prevent_initial_call=True)

    # The slider is an input and, once, an output (the run's delay at the first draw): one request a draw.
    @app.callback(Output(ids.LATENESS_SENTENCE, "children"), Output(ids.LATENESS_DISTRIBUTION, "figure"),
                  Output(ids.LATENESS_CURVE, "figure"), Output(ids.LATENESS_DELAY, "marks"),
                  Output(ids.LATENESS_DELAY, "min"), Output(ids.LATENESS_DELAY, "max"),
                  Output(ids.LATENESS_DELAY, "value"),
                  Input(ids.LATENESS_TICK, "data"), Input(ids.LATENESS_DELAY, "value"), State(ids.PAGE_TABS, "value"),
                  State(ids.DAY_PICKER, "value"), prevent_initial_call=True)
    def draw_lateness(_tick, position, tab, day):
        if choice(tab) != ids.TAB_LATENESS or context.lateness is None:
            return (no_update,) * 7
        answer = context.lateness_answer(choice(day))
        marks = slider_marks(answer)
        if not isinstance(position, int):  # the first draw: the slider at the run's delay
            run = short(answer["watermark_s"])
            position = next((i for i, label in marks.items() if label == run), None)
            start = position if position is not None else no_update
        else:
            start = no_update
        chosen = chosen_delay(answer, position)
        return (sentence(answer, chosen), distribution_figure(answer), curve_figure(answer, chosen), marks, 0,
                max(len(marks) - 1, 1), start)
