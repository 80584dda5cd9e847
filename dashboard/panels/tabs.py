"""The tabs under the chart: a tab bar, and which tab's panel shows.

Every panel stays in the page (the hidden ones with display: none): their callbacks, stores and
intervals keep running. (dcc.Tabs renders only the chosen tab's children, which would stop the
time machine's Play interval in another tab.) A panel a push draws (Drawing.tab) is set while its
tab is shown, and from the newest push when it is opened (assets/push.js); so Play, left running
in another tab, ends at the slider's end as it was when its tab was left."""

from __future__ import annotations

from dash import Dash, Input, Output, dcc, html, no_update

from dashboard import ids
from dashboard.context import PageContext
from dashboard.inputs import choice

# (panel id, tab label), in the tab bar's order.
TABS = ((ids.TAB_TOO_LATE, "Too late"), (ids.TAB_LATENESS, "Lateness"), (ids.TAB_QUARANTINE, "Quarantine"),
        (ids.TAB_TIME_MACHINE, "Time machine"),
        (ids.TAB_RECONCILIATION, "Reconciliation"), (ids.TAB_EXACTLY_ONCE, "Exactly once"),
        (ids.TAB_HEALTH, "Health"), (ids.TAB_SIMULATION, "Simulation"), (ids.TAB_EXPORT, "Export"))
FIRST = TABS[0][0]
SHOWN: dict = {}
HIDDEN = {"display": "none"}


def tab_styles(chosen) -> list[dict]:
    """Each tab panel's style, in TABS order: the chosen one shown (the first for anything else)."""
    chosen = chosen if isinstance(chosen, str) and chosen in dict(TABS) else FIRST
    return [SHOWN if panel == chosen else HIDDEN for panel, _ in TABS]


def layout(contents: dict[str, list]) -> html.Section:
    """The tab bar and one panel per tab; `contents`: panel id -> its children."""
    return html.Section(className="tabs", children=[
        dcc.RadioItems(id=ids.PAGE_TABS, className="tab-bar", value=FIRST, inline=True,
                       options=[{"label": label, "value": panel} for panel, label in TABS]),
        *[html.Div(id=panel, className="tab-panel", role="tabpanel", style=style, children=contents[panel])
          for (panel, _), style in zip(TABS, tab_styles(FIRST))],
    ])


def register(app: Dash, context: PageContext) -> None:
    @app.callback(*[Output(panel, "style") for panel, _ in TABS], Input(ids.PAGE_TABS, "value"),
                  prevent_initial_call=True)
    def show_tab(chosen):
        return tab_styles(choice(chosen))

    @app.callback(Output(ids.PAGE_TABS, "value"), Input(ids.REVISION_WINDOW, "data"), prevent_initial_call=True)
    def open_revisions(window):
        """A window clicked on a chart: its revisions show in the time machine's tab."""
        return ids.TAB_TIME_MACHINE if choice(window) is not None else no_update
