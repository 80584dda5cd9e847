"""The pipeline: Kafka -> Spark Structured Streaming -> the medallion Delta tables, and the run that starts it."""
