"""The lake: the catalog of Delta tables, the store that writes and reads them (the only home of SQL and table
paths), data files, lookups by name, delta-spark, and Spark's checkpoints."""
