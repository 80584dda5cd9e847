"""A run of the app: the command line, the lifecycle (start in order, stop in reverse), the one
SparkSession, the health snapshot and the terminal."""
