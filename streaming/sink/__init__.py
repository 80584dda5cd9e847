"""The foreachBatch sink: one micro-batch -> every table, as steps (the tasks' writes, the
seen-ids index, the gold step), through the lake."""
