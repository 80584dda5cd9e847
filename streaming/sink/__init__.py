"""The foreachBatch sink: one micro-batch -> every table, as steps (medallion_sink: the batch and
which way it is written; task_writes: the tasks' writes; read_before: records read again;
seen_ids: the dedup index; gold_step: gold, corrections, too-late trades and the ledger)."""
