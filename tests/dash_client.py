"""The Dash callback client lives in the app package (the benchmark uses it too)."""

from dashboard.client import call, decode, refresh_page, store_snapshot  # noqa: F401
