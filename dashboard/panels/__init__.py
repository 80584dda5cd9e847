"""The page's panels: one module each, holding the panel's layout and its callbacks."""

from dashboard.panels import (
    chart,
    corrections_feed,
    exactly_once,
    export,
    kpis,
    pipeline_health,
    producer,
    quarantine,
    reconciliation,
    tabs,
    time_slider,
    too_late,
    what_if,
)

__all__ = ["chart", "corrections_feed", "exactly_once", "export", "kpis", "pipeline_health", "producer", "quarantine",
           "reconciliation", "tabs", "time_slider", "too_late", "what_if", "WITH_CALLBACKS", "DRAWN_FROM_SNAPSHOT"]

# The panels with callbacks, in page order (the too-late list has none of its own: the
# corrections panel's callback draws it, with the rest of the late data, in one request).
WITH_CALLBACKS = (kpis, chart, time_slider, export, producer, corrections_feed, tabs, quarantine, reconciliation,
                  exactly_once, pipeline_health, what_if)

# The panels drawn from the snapshot store alone (and the page's choices): the push carries their
# outputs, which a page in the default view sets with no request (assets/push.js).
DRAWN_FROM_SNAPSHOT = (kpis.DRAWING, chart.DRAWING, corrections_feed.DRAWING, pipeline_health.DRAWING,
                       time_slider.SLIDER)
