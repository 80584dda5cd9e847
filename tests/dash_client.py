"""The Dash callback client lives in the app package (the benchmark uses it too)."""

from dashboard.client import call, decode, store_snapshot  # noqa: F401
