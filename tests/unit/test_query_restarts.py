"""A failed query's restarts: backoff grows with the failures in a row, and a query that has run
a while since its last restart starts counting afresh (so a long run is not ended by failures
days apart), while the total stays for the health panel."""

from streaming.jobs.pipeline import HEALTHY_AFTER_S, Restarts


def test_backoff_doubles_with_each_restart_in_a_row_up_to_a_minute():
    restarts = Restarts()
    waits = []
    for _ in range(8):
        waits.append(restarts.backoff_s())
        restarts.in_a_row += 1
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60]


def test_a_query_healthy_for_a_while_after_its_last_restart_counts_afresh_and_keeps_its_total():
    restarts = Restarts(count=3, in_a_row=3, restarted_at=100.0)
    restarts.forget_if_healthy(100.0 + HEALTHY_AFTER_S - 1)
    assert restarts.in_a_row == 3
    restarts.forget_if_healthy(100.0 + HEALTHY_AFTER_S)
    assert restarts.in_a_row == 0 and restarts.count == 3 and restarts.backoff_s() == 1
