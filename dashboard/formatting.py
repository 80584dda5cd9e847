"""Shared pieces of the panels' text and markup: money, a change before → after, a feed table, a message's class."""

from __future__ import annotations

import re

from dash import html

# What Markdown would read as markup in a table cell: escaped, a value shows as itself.
MARKDOWN_MARKUP = re.compile(r"([\\`*_\[\]<>~|&!#])")


def money(value: float, decimals: int = 2) -> str:
    """$1,234,567.89; negative as −$1,234.00."""
    sign = "−" if value < 0 else ""
    return f"{sign}${abs(value):,.{decimals}f}"


def change(before: float, after: float) -> str:
    return f"{money(before)} → {money(after)}" if before != after else money(after)


def feed_table(headers: list[str], rows: list[list], empty: str) -> html.Table | html.P:
    """A panel's rows as an HTML table, or the `empty` note when there are none."""
    if not rows:
        return html.P(empty, className="empty-note")
    return html.Table(className="feed", children=[
        html.Thead(html.Tr([html.Th(h) for h in headers])),
        html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows]),
    ])


def markdown_text(value) -> str:
    """A value as Markdown that shows as itself, on one line."""
    return MARKDOWN_MARKUP.sub(r"\\\1", " ".join(str(value).split()))


def markdown_table(headers: list[str], rows: list[list], empty: str) -> str:
    """A panel's rows as one Markdown table, or the `empty` note, for a dcc.Markdown: one component
    however many cells, so a push that changes a cell makes no component anew (feed_table's cells
    are each a component, which Dash makes anew whenever the table changes)."""
    if not rows:
        return markdown_text(empty)
    line = "| {} |".format
    return "\n".join([line(" | ".join(markdown_text(h) for h in headers)), line(" | ".join("---" for _ in headers)),
                      *(line(" | ".join(markdown_text(cell) for cell in row)) for row in rows)])


def message_class(text, errors: tuple[str, ...]) -> str:
    """The class of a control's message line: "message error" when the text opens with one of the
    panel's `errors` (its ways of saying a value or action was refused), "message ok" for any
    other text (what was done), "message" when there is none."""
    if not isinstance(text, str) or not text.strip():
        return "message"
    return "message error" if text.startswith(errors) else "message ok"
