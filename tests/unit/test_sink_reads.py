"""Which live batches the driver may fetch from Kafka itself (pure): only those whose every range
starts where the batch before ended, as the offset log says. A query's first batch has no batch
before: its ledger starts at 0, while Spark may have started past it (a replay from a time)."""

import pyarrow as pa

from streaming.sink.medallion_sink import starts_known


def ledger(*partitions: int) -> pa.Table:
    n = len(partitions)
    return pa.table({"topic": ["trades"] * n, "partition": list(partitions), "start_offset": [0] * n,
                     "end_offset": [10] * n})


def test_the_driver_reads_a_batch_only_when_the_offset_log_gives_every_range_its_start():
    assert starts_known(ledger(0, 1), frozenset({("trades", 0), ("trades", 1), ("trades", 2)}))
    assert not starts_known(ledger(0, 1), frozenset())  # a query's first batch
    assert not starts_known(ledger(0, 3), frozenset({("trades", 0), ("trades", 1)}))  # a partition added since
    assert starts_known(ledger(), frozenset())  # nothing read: nothing to guess
