"""Which tables a writer of this process is midway through (streaming/lake/midway.py), through
Lake.writing: a reader that wants tables at one step looks while none is midway."""

import threading

from streaming.lake import midway
from streaming.lake.store import Lake
from streaming.lake.tables import BATCH_WATERMARKS, GOLD, GOLD_VIEW, GOLD_WRITES, SUMMARY_HISTORY


def test_tables_a_writer_holds_are_midway_until_it_settles_them_though_it_still_holds_their_locks(tmp_path):
    lake = Lake(tmp_path)
    assert lake.steady(*GOLD_WRITES)
    with lake.writing(*GOLD_WRITES) as held:
        assert not lake.steady(GOLD) and not lake.steady(BATCH_WATERMARKS)
        held.settle(*GOLD_VIEW)
        assert lake.steady(*GOLD_VIEW)
        assert not lake.steady(BATCH_WATERMARKS) and not lake.steady(*GOLD_WRITES)
    assert lake.steady(*GOLD_WRITES)


def test_a_write_inside_a_held_step_leaves_the_step_midway(tmp_path):
    lake = Lake(tmp_path)
    with lake.writing(*GOLD_WRITES):
        with lake.writing(GOLD):  # as a publish inside the gold step
            pass
        assert not lake.steady(GOLD)
        seen = midway.settles()
        with lake.writing(SUMMARY_HISTORY) as inner:
            inner.settle(SUMMARY_HISTORY)  # not the inner writer's to settle: the step holds it
        assert not lake.steady(SUMMARY_HISTORY) and midway.settles() == seen


def test_a_reader_waiting_is_woken_when_a_writer_settles_and_not_before(tmp_path):
    lake = Lake(tmp_path)
    seen = midway.settles()
    midway.wait_for_settled(seen, 0.05)
    assert midway.settles() == seen  # nothing settled: the wait ran out
    taken, go, done = threading.Event(), threading.Event(), threading.Event()

    def writer() -> None:
        with lake.writing(*GOLD_WRITES) as held:
            taken.set()
            go.wait(10)
            held.settle(*GOLD_VIEW)
            done.wait(10)  # the ledger still to come

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert taken.wait(10)
        seen = midway.settles()
        go.set()
        midway.wait_for_settled(seen, 10)
        assert midway.settles() != seen and lake.steady(*GOLD_VIEW) and not lake.steady(BATCH_WATERMARKS)
    finally:
        go.set()
        done.set()
        thread.join(10)
    assert lake.steady(*GOLD_WRITES)
