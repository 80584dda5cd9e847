"""Silver: Kafka records -> typed, validated trades, in two formulations held to the same answers
(tests/integration/test_parse_agreement.py):

* rules.py: the trade's fields, limits and reasons, the one home of what a valid trade is;
* dataframe.py: `parse_trades`, a pure DataFrame -> DataFrame function for Spark jobs over
  bronze's raw records (on Databricks, say), with `valid_trades` and `rejected_records`;
* arrow.py: `parse_records`, what the pipeline's tasks run on the records they read, and the
  split of parsed rows into silver and quarantine rows;
* guard.py: what a trade's own record cannot show: another copy of its trade_id with another
  event time, or an event time far ahead of everything seen.

Both parses keep every record and add a `reason` column: NULL for a valid trade, else a
human-readable explanation of the first problem found, so nothing is dropped without a trace.
"""
