"""What the tests share besides fixtures: Kafka helpers, `python run.py` as a process, the
trade maker and the bad-input corpus, and the StreamTest-style harness."""
