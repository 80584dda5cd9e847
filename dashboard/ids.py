"""Component ids, in one place so layout and callbacks cannot drift apart."""

TICK = "tick"
SNAPSHOT = "snapshot"
DRAW = "draw-from-snapshot"  # moved with SNAPSHOT by the server: the panels drawn from it redraw
CHART_DRAW = "draw-chart"  # moved by push.js: the chart alone redraws (its choices are not the push's)
CHART = "trade-summary-chart"
CHART_MODE = "chart-mode"
STATUS_LINE = "status-line"
PRODUCER_SWITCH = "producer-switch"
RATE_INPUT = "rate-input"
RATE_APPLY = "rate-apply"
CONTROL_MESSAGE = "control-message"
CORRECTIONS_FEED = "corrections-feed"
LATE_TRADES_LIST = "late-trades-list"
LATE_COUNTERS = "late-counters"

MODE_WINDOW = "window"
MODE_RUNNING = "running"

FIRST_REPORTED = "first-reported-toggle"

LATE_SHARE_INPUT = "late-share-input"
BEYOND_SHARE_INPUT = "beyond-watermark-share-input"
MAX_BEYOND_INPUT = "max-beyond-input"
MAX_LATENESS_INPUT = "max-lateness-input"
LATE_APPLY = "late-apply"
LATE_MESSAGE = "late-message"

RECONCILE_CHECK = "reconcile-check"
RECONCILE_RESULT = "reconcile-result"
RECONCILE_TABLE = "reconcile-table"
BACKFILL_CHOICE = "backfill-choice"
BACKFILL_APPLY = "backfill-apply"
RECONCILE_MESSAGE = "reconcile-message"

HEALTH_QUERIES = "health-queries"
HEALTH_NOTES = "health-notes"  # Kafka's data loss and the broker's restarts, when there are any
HEALTH_PRODUCER = "health-producer"
KAFKA_LAG = "kafka-lag"
LAG_SPARKLINE = "lag-sparkline"

KPI_CARDS = "kpi-cards"
KPI_VALUES = ("kpi-buy-value", "kpi-sell-value", "kpi-settlement-value", "kpi-trades-value",
              "kpi-corrections-value", "kpi-too-late-value")  # the cards' values, in their order
DAY_PICKER = "day-picker"
CHANNEL_FILTER = "channel-filter"
SYMBOL_FILTER = "symbol-filter"
# A slower interval that refreshes the channel and symbol options from silver.
FILTER_TICK = "filter-tick"
CHART_NOTE = "chart-note"

# The quarantine panel's own store, filled on the data tick.
QUARANTINE_STORE = "quarantine-store"
QUARANTINE_REASON = "quarantine-reason"
QUARANTINE_COUNTS = "quarantine-counts"
QUARANTINE_LIST = "quarantine-list"

EXPORT_WINDOWS = "export-windows"
EXPORT_CORRECTIONS = "export-corrections"
DOWNLOAD_WINDOWS = "download-windows"
DOWNLOAD_CORRECTIONS = "download-corrections"
EXPORT_MESSAGE = "export-message"

DUPLICATE_SHARE_INPUT = "duplicate-share-input"
MALFORMED_SHARE_INPUT = "malformed-share-input"
CHAOS_APPLY = "chaos-apply"
CHAOS_MESSAGE = "chaos-message"

# The time machine: the chart as it stood at an instant of the shown day, from gold's change history.
TM_SLIDER = "time-machine-slider"  # the instant, in epoch seconds, over the day's changes
TM_CHOSEN = "time-machine-chosen"  # the slider's value, passed on only when it means another instant
TM_PLAY = "time-machine-play"
TM_SPEED = "time-machine-speed"  # how fast Play goes: 1, 10, 60 or 600 times the wall clock
TM_PLAY_TICK = "time-machine-play-tick"
TM_LIVE = "time-machine-live"
TM_LABEL = "time-machine-label"
AS_OF = "as-of-snapshot"
AS_OF_CHART = "as-of-chart"  # the chart drawn from AS_OF, shown in the live chart's place
# A window clicked on either chart, and each change of it.
REVISION_WINDOW = "revision-window"
REVISIONS = "window-revisions"

# The exactly-once panel
EXACTLY_ONCE_CHECK = "exactly-once-check"
EXACTLY_ONCE_MESSAGE = "exactly-once-message"
EXACTLY_ONCE_TABLE = "exactly-once-table"

# Push: the default view's snapshot streamed to the page (dashboard/push.py, assets/push.js)
PUSHED = "pushed-snapshot"  # the snapshot as last pushed; copied into SNAPSHOT in the default view
PUSH_STATE = "push-state"  # the connection indicator: Live, or Reconnecting… (the fallback TICK polls then)
PUSH_CONFIG = "push-config"  # where push.js connects and which components it sets

# The page's tabs under the chart: a tab bar and one panel per tab, all kept in the page (hidden
# ones with display: none), so their callbacks and intervals keep running.
PAGE_TABS = "page-tabs"
TAB_TOO_LATE = "tab-too-late"
TAB_QUARANTINE = "tab-quarantine"
TAB_EXACTLY_ONCE = "tab-exactly-once"
TAB_HEALTH = "tab-health"
TAB_RECONCILIATION = "tab-reconciliation"
TAB_TIME_MACHINE = "tab-time-machine"
TAB_EXPORT = "tab-export"
TAB_SIMULATION = "tab-simulation"
TAB_LATENESS = "tab-lateness"

LATENESS_SENTENCE = "lateness-sentence"
LATENESS_DELAY = "lateness-delay"
LATENESS_DISTRIBUTION = "lateness-distribution"
LATENESS_CURVE = "lateness-curve"
LATENESS_TICK = "lateness-tick"  # moved by the tab opened, another day or a push, while the tab is open
LATENESS_TAB = "lateness-tab-id"
