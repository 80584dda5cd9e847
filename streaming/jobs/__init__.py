"""What runs on Spark: the streaming query, the reconciliation and backfill, the loader."""
