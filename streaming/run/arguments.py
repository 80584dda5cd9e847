"""The argparse parsers of `python run.py` and `python run.py load`, built argument group by argument group."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

from streaming.config import (
    CLEAN_SOURCE_MODES,
    CLOSE_IDLE_AFTER,
    EMBEDDED_RETENTION,
    NEW_TOPIC_RETENTION,
    LoadSettings,
    Settings,
    Simulation,
    UsageError,
    duration_text,
    parse_instant,
)
from streaming.lake.locations import checkpoint_location, data_location, local_directory, storage_option_pair
from streaming.run.argument_types import (
    argtype,
    bootstrap_servers,
    clock_speed,
    count,
    duration_argument,
    duration_or_off,
    host_name,
    port,
    positive_int,
    rate,
    share,
    spark_conf_pair,
    trigger_argument,
    true_or_false,
)
from streaming.run.spark_session import IDLE_LOOK_MS
from streaming.run.users import ROLES


class _Parser(argparse.ArgumentParser):
    """Usage errors as UsageError, not an exit: the command prints them (and a test reads them)."""

    def error(self, message):  # noqa: D401 - argparse API
        raise UsageError(message)


_ENV_EPILOG = (
    "Every flag can also be set in the environment as TRADE_SUMMARY_<FLAG>, e.g.\n"
    "TRADE_SUMMARY_DATA_DIR=/srv/trades or TRADE_SUMMARY_NO_PRODUCER=1; a flag wins.\n"
    "Kafka client settings (SASL, TLS) come from --kafka-config FILE or from\n"
    "TRADE_SUMMARY_KAFKA_<SETTING> (TRADE_SUMMARY_KAFKA_SASL_PASSWORD -> sasl.password).\n"
    "Secrets are never printed.\n\n"
)

# Each command's help: its description above the flags; below them, the epilog above, then how it stops.
RUN_DESCRIPTION = """\
Trade Summary: simulated brokerage trades -> Kafka -> Spark Structured Streaming
-> Delta tables -> a live 15-minute trade summary chart.

With no flags it starts an embedded Kafka broker, the streaming pipeline, the
producer simulation and the dashboard at http://127.0.0.1:8050 .

`python run.py load --help`: load trade files from a landing zone into the topic."""
RUN_ON_STOP = "Ctrl-C (SIGINT) or SIGTERM stops everything cleanly; a restart resumes where it stopped."
LOAD_DESCRIPTION = """\
Load trade files from a landing zone into the trades topic, with Spark Structured
Streaming as the Kafka producer: historical or externally captured trades join the
live pipeline. Each file holds JSON trades, one per line (the topic's message format).
Lines are read with the trade schema, kept if they match --where, keyed by --key and
sent as JSON. A line that does not match the schema is sent as read, so the pipeline
quarantines it with a reason. The checkpoint remembers the files sent: a restart
sends no file twice, and files added later are picked up while it runs.

Example: python run.py load --from samples/trading-day --where "channel = 'mobile'" --available-now"""
USERS_DESCRIPTION = """\
Who may log in when the app runs with --auth-file FILE: a viewer sees the page and
reads /api/*; an operator may also act (producer switch and rate, late-trade and
chaos knobs, backfill). The file holds a salted scrypt hash per user, never a
password, and is written atomically, readable by its owner only (0600). A running
app reads it again when it changes.

Example: python run.py users add alice --role operator --auth-file users.txt"""
USERS_ON_STOP = "Exit code 0 when done, 1 when the file cannot be read or changed, 2 for a usage error."
LOAD_ON_STOP = "Ctrl-C (SIGINT) or SIGTERM stops between micro-batches; a restart resumes from the checkpoint."


def _add_duration(group, flag: str, meaning: str, default: timedelta | None = None, shown_default: str = "") -> None:
    """A DURATION flag ('15 minutes', '500 milliseconds'); its help ends with the default as a user would write it."""
    shown = shown_default if default is None else f"'{duration_text(default)}'"
    group.add_argument(flag, type=duration_argument, default=default, metavar="DURATION",
                       help=f"{meaning} (default: {shown})")


def add_spark_conf_argument(parser) -> None:
    """--conf KEY=VALUE (repeatable), for every command that starts Spark, and the benchmark."""
    parser.add_argument("--conf", type=spark_conf_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting, as spark-submit's --conf (repeatable; wins over ours), "
                             "e.g. --conf spark.driver.memory=2g")


def add_spark_arguments(group) -> None:
    """--master, --driver-host and --conf, for every command that starts Spark."""
    group.add_argument("--master", default="local[*]",
                       help="Spark master URL, e.g. spark://host:7077, yarn, k8s://... (default: %(default)s)")
    group.add_argument("--driver-host", metavar="ADDRESS",
                       help="on a cluster, the address or name the executors connect back to the driver at; "
                            "the driver binds to it when it is this machine's, else (NAT, a Kubernetes service) "
                            "to the address that reaches the master (default: 127.0.0.1 for a local master or one "
                            "on this machine, else the address this machine reaches the master from; --conf "
                            "spark.driver.host and spark.driver.bindAddress win)")
    add_spark_conf_argument(group)


def _add_kafka_arguments(kafka) -> None:
    kafka.add_argument("--bootstrap-servers", type=bootstrap_servers, metavar="HOST:PORT[,...]",
                       help="use this Kafka; no embedded broker is started (default: embedded broker)")
    kafka.add_argument("--broker-port", type=port, default=9092, metavar="N",
                       help="port of the embedded broker on 127.0.0.1 (default: %(default)s)")
    kafka.add_argument("--topic", default="trades", metavar="NAME", help="trades topic (default: %(default)s)")
    kafka.add_argument("--broker-retention", type=duration_argument, metavar="DURATION",
                       help="how long the topic keeps records (e.g. 90s, 5m, 2h, 7d), set when the topic is created "
                            "and on an existing topic at start; bronze is the long-term copy, and records removed "
                            "before the pipeline read them are a data loss (default: "
                            f"{duration_text(EMBEDDED_RETENTION)} with the embedded broker; with --bootstrap-servers "
                            f"{duration_text(NEW_TOPIC_RETENTION)} for a topic created here, an existing topic keeps "
                            "its own)")
    kafka.add_argument("--kafka-config", type=Path, metavar="FILE",
                       help="client.properties file with Kafka client settings (security.protocol, "
                            "sasl.mechanisms, sasl.username, sasl.password, ssl.ca.location, ...)")
    kafka.add_argument("--broker-dir", type=argtype(local_directory), metavar="PATH",
                       help="the embedded broker's data, on this machine (default: <data-dir>/broker for a "
                            "local data dir, ./data/broker otherwise)")


def _command_parser(prog: str, description: str, on_stop: str) -> argparse.ArgumentParser:
    """A command's parser: its own description, the shared epilog and the Kafka flags."""
    parser = _Parser(prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=description,
                     epilog=_ENV_EPILOG + on_stop)
    _add_kafka_arguments(parser.add_argument_group("Kafka"))
    return parser


def build_parser() -> argparse.ArgumentParser:
    """`python run.py`: Kafka, what to run, streaming, producer simulation."""
    parser = _command_parser("python run.py", RUN_DESCRIPTION, RUN_ON_STOP)
    _add_run_arguments(parser.add_argument_group("what to run"))
    _add_access_arguments(parser.add_argument_group("who may do what"))
    _add_streaming_arguments(parser.add_argument_group("streaming"))
    _add_simulation_arguments(parser.add_argument_group("producer simulation"))
    return parser


def _add_run_arguments(run) -> None:
    run.add_argument("--data-dir", type=argtype(data_location), default=Path("data"), metavar="PATH|URI",
                     help="where the Delta tables live: a local path, or a URI such as s3://bucket/prefix, "
                          "gs://bucket/prefix, abfss://container@account.dfs.core.windows.net/prefix or file:///path. "
                          "A local data dir also holds the checkpoints and the embedded broker's data "
                          "(default: ./data)")
    run.add_argument("--storage-option", dest="storage_option", type=argtype(storage_option_pair),
                     action="append", default=[], metavar="KEY=VALUE",
                     help="an object-store setting, as deltalake names it (repeatable; wins over the "
                          "environment's AWS_*, AZURE_* and GOOGLE_* variables), e.g. --storage-option "
                          "AWS_REGION=eu-west-1. Values of secret keys are never printed")
    run.add_argument("--checkpoint-dir", type=argtype(checkpoint_location), metavar="PATH|URI",
                     help="where Spark's checkpoints live: a local path, a shared mount, or a Hadoop URI "
                          "(hdfs://, s3a:// where the cluster has the Hadoop AWS jars) "
                          "(default: <data-dir>/checkpoints; required when --data-dir is a URI)")
    run.add_argument("--no-producer", action="store_true",
                     help="start with the producer simulation off (the dashboard can turn it on)")
    run.add_argument("--no-dashboard", action="store_true", help="run the pipeline only (headless)")
    run.add_argument("--host", default="127.0.0.1",
                     help="bind address of the dashboard, its API and /metrics (default: %(default)s)")
    run.add_argument("--port", type=port, default=8050,
                     help="port of the dashboard, its API and /metrics (--no-dashboard too; default: %(default)s)")
    run.add_argument("--allow-host", dest="allow_host", type=host_name, action="append", default=[], metavar="NAME",
                     help="another host name or address the dashboard answers to, as the browser sends it in "
                          "the Host header (repeatable; 127.0.0.1, localhost and a specific --host address "
                          "are always allowed, on any port), e.g. --allow-host dash.internal")
    add_spark_arguments(run)
    run.add_argument("--refresh-ms", type=positive_int, default=Settings.refresh_ms, metavar="MS",
                     help="how often the page polls, in milliseconds, while its live connection (pushed "
                          "updates) is down (default: %(default)s)")
    run.add_argument("--max-pages", type=positive_int, default=Settings.max_pages, metavar="N",
                     help="pages live at once, each holding a connection that the server pushes updates on; "
                          "the server's threads are sized for them, and a page beyond them refreshes every "
                          "--refresh-ms instead (default: %(default)s)")
    run.add_argument("--log-every", type=positive_int, default=Settings.log_every_batches, metavar="N",
                     help="log a status line every N gold micro-batches (default: %(default)s)")


def _add_access_arguments(access) -> None:
    access.add_argument("--auth-file", type=Path, metavar="FILE",
                        help="turn logins on with the users in FILE (`python run.py users add NAME --role "
                             "viewer|operator --auth-file FILE`): browsers log in with a form, scripts with "
                             "HTTP Basic on every route (default: no logins; only on 127.0.0.1 or localhost)")
    access.add_argument("--metrics-token-file", type=Path, metavar="FILE",
                        help="/metrics takes only `Authorization: Bearer <token>` with the token in FILE (its "
                             "first line, at least 16 characters), as Prometheus' authorization.credentials_file "
                             "sends it (default: /metrics as the other routes)")
    access.add_argument("--insecure-no-login", action="store_true",
                        help="serve an address other than 127.0.0.1, localhost or ::1 with no logins: anyone "
                             "who reaches the port may act on the run (default: such an address needs --auth-file, "
                             "unless --available-now, which serves nothing)")


def build_users_parser() -> argparse.ArgumentParser:
    """`python run.py users add|remove|list`: the users file of --auth-file."""
    parser = _Parser(prog="python run.py users", formatter_class=argparse.RawDescriptionHelpFormatter,
                     description=USERS_DESCRIPTION, epilog=USERS_ON_STOP)
    commands = parser.add_subparsers(dest="action", metavar="{add,remove,list}", required=True,
                                     parser_class=_Parser)
    add = commands.add_parser("add", help="add a user (asks for the password twice)",
                              description="Add a user, with the password asked twice at the terminal or read "
                                          "from stdin (--password-stdin).")
    add.add_argument("name", metavar="NAME", help="the user's name")
    add.add_argument("--role", choices=ROLES, required=True,
                     help="viewer: sees the page and reads /api/*; operator: may also act")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from stdin's first line (scripts) instead of asking")
    remove = commands.add_parser("remove", help="remove a user", description="Remove a user.")
    remove.add_argument("name", metavar="NAME", help="the user's name")
    listing = commands.add_parser("list", help="list the users' names and roles",
                                  description="List the users' names and roles (never their hashes).")
    for sub in (add, remove, listing):
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
        sub.add_argument("--auth-file", type=Path, required=True, metavar="FILE",
                         help="the users file (created by the first `users add`)")
    return parser


def _add_streaming_arguments(stream) -> None:
    _add_duration(stream, "--window", "tumbling window length", Settings.window)
    _add_duration(stream, "--watermark", "how late a trade may arrive and still count", Settings.watermark)
    stream.add_argument("--trigger", type=trigger_argument, default=Settings.trigger, metavar="DURATION",
                        help="micro-batch interval: a batch starts at most this often, at once after one "
                             f"that ran longer; 0 runs them back to back; with nothing new, Spark looks every "
                             f"{IDLE_LOOK_MS} ms; an interval such as '2 seconds' makes fewer, larger files "
                             f"(default: '{duration_text(Settings.trigger)}')")
    _add_duration(stream, "--max-event-time-jump",
                  "quarantine a trade whose event time is more than this ahead of the latest event time seen and "
                  "of its Kafka timestamp, instead of letting it move the watermark", Settings.max_event_time_jump)
    stream.add_argument("--close-idle-after", type=duration_or_off, metavar="DURATION|off",
                        help="after this much wall-clock time with no new trade, the watermark moves up to the latest "
                             "event time seen, so every window up to it is final (recorded in the ledger like any "
                             "watermark; a trade for a closed window that comes later is too late) "
                             f"(default: '{duration_text(CLOSE_IDLE_AFTER)}' with the embedded broker, off "
                             "with --bootstrap-servers; off: windows wait for newer trades)")
    stream.add_argument("--fail-on-data-loss", type=true_or_false, default=True, metavar="true|false",
                        help="whether the pipeline stops when Kafka no longer holds offsets it expects (a broker "
                             "that lost its tail, retention, a recreated topic); with false it logs the loss and "
                             "reads on from what the broker holds (default: true, as Spark's failOnDataLoss)")
    _add_duration(stream, "--kafka-retry-timeout",
                  "how long the pipeline keeps trying to reach an unreachable Kafka, with no micro-batch meanwhile, "
                  "before the query fails and is restarted (--max-query-restarts)", Settings.kafka_retry_timeout)
    stream.add_argument("--available-now", action="store_true",
                        help="process everything already in Kafka, then exit 0 (catch-up / cron use)")
    stream.add_argument("--max-offsets-per-trigger", type=positive_int, metavar="N",
                        help="read at most N Kafka records per micro-batch (backpressure)")
    stream.add_argument("--max-query-restarts", type=count, default=Settings.max_query_restarts, metavar="N",
                        help="restart a failed query from its checkpoint up to N times in a row, waiting 1, 2, 4 "
                             "... s (at most a minute) between tries; after that the app exits with code 1 (5 "
                             "minutes without a failure start the count afresh) "
                             "(default: %(default)s; 0: exit at the first failure)")
    stream.add_argument("--replay-from", type=argtype(parse_instant), metavar="ISO-8601",
                        help="reprocess from this Kafka time with fresh checkpoints (old ones kept aside); what "
                             "the broker no longer holds is read from bronze first")


def _add_simulation_arguments(sim) -> None:
    sim.add_argument("--rate", type=rate, default=Simulation.rate, metavar="N",
                     help="trades per second (default: %(default)s)")
    sim.add_argument("--clock-speed", type=clock_speed, default=Simulation.clock_speed, metavar="X",
                     help="market seconds per real second (default: %(default)s)")
    sim.add_argument("--late-share", type=share, default=Simulation.late_share, metavar="SHARE",
                     help="share of trades sent late (default: %(default)s)")
    sim.add_argument("--beyond-watermark-share", type=share, default=Simulation.beyond_watermark_share,
                     metavar="SHARE",
                     help="of the late trades, the share later than the watermark (default: %(default)s)")
    _add_duration(sim, "--max-lateness", "how late a late trade within the watermark is at most, in market time",
                  shown_default="90%% of the watermark")
    _add_duration(sim, "--max-beyond", "how far beyond the watermark a too-late trade is at most, in market time",
                  shown_default="as long as the watermark")
    sim.add_argument("--duplicate-share", type=share, default=Simulation.duplicate_share, metavar="SHARE",
                     help="share of trades delivered twice (default: %(default)s)")
    sim.add_argument("--malformed-share", type=share, default=Simulation.malformed_share, metavar="SHARE",
                     help="share of malformed messages (default: %(default)s)")


def build_load_parser() -> argparse.ArgumentParser:
    """`python run.py load`: Kafka, what to load, streaming."""
    parser = _command_parser("python run.py load", LOAD_DESCRIPTION, LOAD_ON_STOP)
    _add_load_arguments(parser.add_argument_group("what to load"))
    _add_load_streaming_arguments(parser.add_argument_group("streaming"))
    return parser


def _add_load_arguments(load) -> None:
    load.add_argument("--from", dest="source_dir", type=Path, required=True, metavar="DIR",
                      help="landing directory of JSON-lines trade files (files are picked up in "
                           "modification-time order; write them elsewhere and move them in)")
    load.add_argument("--where", metavar="CONDITION",
                      help="Spark SQL condition on the trade fields, e.g. \"channel = 'mobile'\" or "
                           "\"symbol IN ('AAPL', 'MSFT') AND quantity >= 10\" (default: every trade)")
    load.add_argument("--key", dest="key_column", default="account_id", metavar="FIELD",
                      help="trade field used as the Kafka key (default: %(default)s, as the topic's format says)")
    load.add_argument("--data-dir", type=argtype(data_location), default=Path("data"), metavar="PATH|URI",
                      help="the pipeline's data dir: a local one holds the loader's checkpoints and the embedded "
                           "broker's data; with a URI (s3://...) give --checkpoint (default: ./data)")
    load.add_argument("--checkpoint", type=argtype(checkpoint_location), metavar="DIR",
                      help="checkpoint directory (default: one per landing directory and topic under "
                           "<data-dir>/loader-checkpoints/)")
    add_spark_arguments(load)


def _add_load_streaming_arguments(stream) -> None:
    stream.add_argument("--max-files-per-trigger", type=positive_int, default=LoadSettings.max_files_per_trigger,
                        metavar="N", help="at most N new files per micro-batch (default: %(default)s)")
    stream.add_argument("--clean-source", choices=CLEAN_SOURCE_MODES, default="off",
                        help="what to do with a file once it is sent: leave it, move it to --archive-dir, "
                             "or delete it (default: %(default)s)")
    stream.add_argument("--archive-dir", type=Path, metavar="DIR",
                        help="with --clean-source archive: where sent files go, under their full path "
                             "(default: <data-dir>/loader-archive)")
    _add_duration(stream, "--trigger", "how often to look for new files", LoadSettings.trigger)
    stream.add_argument("--available-now", action="store_true",
                        help="load the files there now, then exit 0 (catch-up / cron use)")
