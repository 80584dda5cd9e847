"""A run of the app: the command line (arguments, environment, cli), the lifecycles (command, app,
load_command, main), the one SparkSession, the health snapshot and the terminal."""
