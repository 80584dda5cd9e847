"""Kafka plumbing: the embedded broker, topic administration, librdkafka clients, and the
options for Spark's format("kafka")."""
