"""The figures of one bench run, filled in by the phases and read by the report, and the
targets they are reported against (from the issue; never asserted in tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# A freshness phase of two or more of these also reports the p95 of each.
LONG_RUN_PERIOD_S = 300
TARGETS = {
    "throughput": 50_000,  # trades/s sustained, Kafka to gold, warm
    "ratio_to_broker": 0.15,  # the same throughput over the broker anchor of the same run
    "freshness_p95_s": 0.4,  # at 1,000 trades/s (issue 47)
    "callback_p95_ms": 25.0,
    "pipeline_rss_mb": 2048.0,  # driver, JVM and Python workers; the broker stands in for the user's Kafka
}


def percentile(values: list[float], p: float) -> float:
    """The bench's own rule, for every figure: the nearest rank (no interpolation); nan for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


@dataclass
class Results:
    trades: int = 0
    preload_s: float = 0.0
    broker_msgs_per_s: float = 0.0
    spark_start_s: float = 0.0
    throughput: float = 0.0  # sustained: trades / (last batch end - first batch start)
    throughput_wall: float = 0.0  # trades / (query start .. done)
    warmup_trades: int = 0
    throughput_cold: float = 0.0  # the warm-up's own sustained rate, in a JVM that had run nothing yet
    batches: dict = field(default_factory=dict)  # query -> {"batches", "mean_ms", "max_ms"}
    freshness: list = field(default_factory=list)  # (seconds since start, latency s) per trade
    freshness_rate: float = 0.0
    freshness_missing: int = 0
    freshness_ramp: list = field(default_factory=list)  # the latencies (s) of the trades before those measured
    callback_ms: list = field(default_factory=list)  # the data callback + the chart figure
    refresh_ms: list = field(default_factory=list)  # every callback of one page refresh
    cpu_s: dict = field(default_factory=dict)  # phase -> {process group: CPU seconds}
    phase_s: dict = field(default_factory=dict)  # phase -> wall seconds
    dashboard_rows: dict = field(default_factory=dict)
    rss_mb: dict = field(default_factory=dict)  # group -> its peak RSS
    peak_total_rss_mb: float = 0.0  # the peak of all groups' RSS summed at one moment
    peak_pipeline_rss_mb: float = 0.0  # the same without the broker
    pipeline_peak_phase: str = ""  # when that peak came
    pipeline_peak_parts: dict = field(default_factory=dict)  # group -> (RSS MiB, processes) at that peak
    peak_total_pss_mb: float = 0.0
    # The freshness phase's live batches: the sink's phases (PhaseTimes) and Spark's durationMs, each ms
    sink_phases: list = field(default_factory=list)
    spark_phases: list = field(default_factory=list)
    idle_cores: float = float("nan")  # run.py idle, with its broker: bench/idle.py

    @property
    def cpu_per_trade_us(self) -> float:
        """Every process's CPU in the freshness phase (the bench's producer in the driver's
        process included), per trade produced."""
        trades = len(self.freshness) + self.freshness_missing + len(self.freshness_ramp)
        cpu = sum(self.cpu_s.get("freshness", {}).values())
        return cpu / trades * 1e6 if trades else float("nan")

    @staticmethod
    def percentile(values: list[float], p: float) -> float:
        return percentile(values, p)

    @property
    def ratio_to_broker(self) -> float:
        return self.throughput / self.broker_msgs_per_s if self.broker_msgs_per_s else float("nan")

    def latencies(self) -> list[float]:
        return [latency for _, latency in self.freshness]

    def ramp_text(self, ramp_s: float) -> str:
        """The trades produced before those measured, from idle, as a clause."""
        ramp = self.freshness_ramp
        return (f"the {ramp_s:g} s at the rate before them, from idle: p50 {percentile(ramp, 50):.2f} s, "
                f"p95 {percentile(ramp, 95):.2f} s over {len(ramp):,} trades" if ramp else "")

    def p95_by_period(self, period_s: float) -> list[float]:
        """The freshness p95 of the trades produced in each `period_s` of the phase, in order:
        whether a long run stays as fresh as its start."""
        periods: dict[int, list[float]] = {}
        for sent, latency in self.freshness:
            periods.setdefault(int(sent // period_s), []).append(latency)
        return [self.percentile(periods[k], 95) for k in sorted(periods)]

    def long_run_text(self, phase_s: float) -> str | None:
        """The p95 of each LONG_RUN_PERIOD_S, as text, for a phase of two or more of them."""
        if phase_s < 2 * LONG_RUN_PERIOD_S:
            return None
        p95s = ", ".join(f"{v:.2f}" for v in self.p95_by_period(LONG_RUN_PERIOD_S))
        return f"p95 by {LONG_RUN_PERIOD_S // 60} minutes: {p95s} s"


def print_taken(tool: str, lines: list[str], taken: dict) -> None:
    """A tool's report lines, then every figure it took as one JSON line (to look at again later)."""
    print("\n".join(lines), flush=True)
    print(f"{tool}: {json.dumps({key: [round(value, 1) for value in values] for key, values in taken.items()})}")
