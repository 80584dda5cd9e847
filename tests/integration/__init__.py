"""Tests against the real embedded broker, the shared SparkSession and Delta tables (marked `integration`)."""
