"""The benchmark's figures from its samples (pure)."""

from bench.results import Results


def test_the_freshness_p95_is_given_for_each_period_of_the_phase_in_order():
    results = Results()
    # 100 trades a minute for three minutes; in the second minute a tenth of them are 2 s late.
    results.freshness = [(minute * 60 + i * 0.6, 0.5 + minute + (2.0 if minute == 1 and i >= 90 else 0.0))
                         for minute in range(3) for i in range(100)]
    assert results.p95_by_period(60) == [0.5, 3.5, 2.5]
    assert results.p95_by_period(180) == [results.percentile(results.latencies(), 95)] == [2.5]
