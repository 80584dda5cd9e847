"""The page's late-trade controls drive a real simulator (its producer talks to the test broker)."""

import json
from datetime import datetime, timedelta, timezone

from dashboard import ids
from dashboard.client import call
from dashboard.dash_app import create_app

UTC = timezone.utc


def test_late_trade_controls_on_the_page_change_the_running_simulator(broker, tmp_path):
    from streaming.config import Simulation
    from streaming.simulation.simulator import TradeSimulator

    simulator = TradeSimulator({"bootstrap.servers": broker.bootstrap_servers}, "unused", Simulation(),
                               timedelta(minutes=15), timedelta(minutes=30),
                               market_start=datetime(2026, 3, 2, 9, tzinfo=UTC), enabled=False)
    try:
        client = create_app(tmp_path, simulator=simulator).server.test_client()
        page = client.get("/_dash-layout").get_json()
        assert ids.LATE_SHARE_INPUT in json.dumps(page) and "watermark 30 min" in json.dumps(page)

        def apply(late, beyond, minutes, beyond_by=20):
            return call(client, [f"{ids.LATE_MESSAGE}.children"], {f"{ids.LATE_APPLY}.n_clicks": 1}, {
                f"{ids.LATE_SHARE_INPUT}.value": late, f"{ids.BEYOND_SHARE_INPUT}.value": beyond,
                f"{ids.MAX_LATENESS_INPUT}.value": minutes,
                f"{ids.MAX_BEYOND_INPUT}.value": beyond_by})[ids.LATE_MESSAGE]["children"]

        assert "30 % of trades late" in apply(30, 50, 10)
        sim = simulator.simulation
        assert (sim.late_share, sim.beyond_watermark_share, sim.max_lateness, sim.max_beyond) == \
            (0.3, 0.5, timedelta(minutes=10), timedelta(minutes=20))
        assert "less than the watermark" in apply(30, 50, 45)
        assert simulator.simulation.max_lateness == timedelta(minutes=10)  # unchanged
    finally:
        simulator.stop()
