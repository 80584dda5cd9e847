"""The simulated market: its clock and trades (pure), the producer that sends them to Kafka, the sample day."""
