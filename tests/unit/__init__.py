"""Pure tests: no broker, no Spark, no subprocess (Delta on a tmp dir at most). The fast lane."""
