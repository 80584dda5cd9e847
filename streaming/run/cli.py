"""The command line: argparse parsers, the TRADE_SUMMARY_* environment overlay and usage
errors. `parse_settings(argv, environ)` and `parse_load_settings(...)` are the only places that
read flags or environment variables; they return the frozen settings of config.py.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Mapping, Sequence

from streaming.config import (
    CLEAN_SOURCE_MODES,
    MAX_RATE,
    MIN_RATE,
    LoadSettings,
    Settings,
    Simulation,
    UsageError,
    duration_text,
    parse_duration,
    parse_instant,
    parse_kafka_properties,
)
from streaming.lake.locations import (
    checkpoint_location,
    data_location,
    is_remote,
    local_directory,
    options_for_tasks,
    storage_option_pair,
)

ENV_PREFIX = "TRADE_SUMMARY_"
# Kafka client settings from the environment: TRADE_SUMMARY_KAFKA_SASL_PASSWORD -> sasl.password
KAFKA_ENV_PREFIX = ENV_PREFIX + "KAFKA_"


def _whole_number(minimum: int):
    """An argparse type: a whole number of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            least = "a positive number" if minimum == 1 else f"{minimum} or more"
            raise argparse.ArgumentTypeError(f"expected {least}, got {text!r}")
        return value

    return parse


_positive_int = _whole_number(1)
_count = _whole_number(0)


def spark_conf_pair(text: str) -> tuple[str, str]:
    """'spark.driver.memory=2g' -> ('spark.driver.memory', '2g'), as spark-submit's --conf takes it."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not value.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. spark.driver.memory=2g; got {text!r}")
    if not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{key!r} is not a Spark setting: Spark's keys start with 'spark.'")
    return key, value.strip()


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 1-65535")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not MIN_RATE <= value <= MAX_RATE:
        raise argparse.ArgumentTypeError(
            f"expected a rate between {MIN_RATE:g} and {MAX_RATE:.0f} trades/s, got {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {text!r}")
    return value


def _true_or_false(text: str) -> bool:
    if text.strip().lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.strip().lower() == "true"


def _argtype(parse):
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


duration_argument = _argtype(parse_duration)


def _bootstrap(text: str) -> str:
    servers = [s.strip() for s in text.split(",") if s.strip()]
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}")
    if not servers:
        raise argparse.ArgumentTypeError("expected HOST:PORT[,HOST:PORT...]")
    return ",".join(servers)


def _host_name(text: str) -> str:
    """--allow-host: a host name or address, without a scheme, path or port ('dash.internal')."""
    name = text.strip()
    with_port = name.count(":") == 1  # an IPv6 address has more
    if not name or with_port or any(c in name for c in "/@ \t"):
        raise argparse.ArgumentTypeError(f"expected a host name or address such as dash.internal, got {text!r}")
    return name


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # noqa: D401 - argparse API
        raise UsageError(message)


_ENV_EPILOG = (
    "Every flag can also be set in the environment as TRADE_SUMMARY_<FLAG>, e.g.\n"
    "TRADE_SUMMARY_DATA_DIR=/srv/trades or TRADE_SUMMARY_NO_PRODUCER=1; a flag wins.\n"
    "Kafka client settings (SASL, TLS) come from --kafka-config FILE or from\n"
    "TRADE_SUMMARY_KAFKA_<SETTING> (TRADE_SUMMARY_KAFKA_SASL_PASSWORD -> sasl.password).\n"
    "Secrets are never printed.\n\n"
)


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


def _add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    kafka = parser.add_argument_group("Kafka")
    kafka.add_argument("--bootstrap-servers", type=_bootstrap, metavar="HOST:PORT[,...]",
                       help="use this Kafka; no embedded broker is started (default: embedded broker)")
    kafka.add_argument("--broker-port", type=_port, default=9092, metavar="N",
                       help="port of the embedded broker on 127.0.0.1 (default: %(default)s)")
    kafka.add_argument("--topic", default="trades", metavar="NAME", help="trades topic (default: %(default)s)")
    kafka.add_argument("--kafka-config", type=Path, metavar="FILE",
                       help="client.properties file with Kafka client settings (security.protocol, "
                            "sasl.mechanisms, sasl.username, sasl.password, ssl.ca.location, ...)")
    kafka.add_argument("--broker-dir", type=_argtype(local_directory), metavar="PATH",
                       help="the embedded broker's data, on this machine (default: <data-dir>/broker for a "
                            "local data dir, ./data/broker otherwise)")


def _command_parser(prog: str, description: str, on_stop: str) -> argparse.ArgumentParser:
    """A command's parser: its own description, the shared epilog and the Kafka flags."""
    parser = _Parser(prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=description,
                     epilog=_ENV_EPILOG + on_stop)
    _add_kafka_arguments(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = _command_parser(
        "python run.py",
        "Trade Summary: simulated brokerage trades -> Kafka -> Spark Structured Streaming\n"
        "-> Delta tables -> a live 15-minute trade summary chart.\n\n"
        "With no flags it starts an embedded Kafka broker, the streaming pipeline, the\n"
        "producer simulation and the dashboard at http://127.0.0.1:8050 .\n\n"
        "`python run.py load --help`: load trade files from a landing zone into the topic.",
        "Ctrl-C (SIGINT) or SIGTERM stops everything cleanly; a restart resumes where it stopped.",
    )

    run = parser.add_argument_group("what to run")
    run.add_argument("--data-dir", type=_argtype(data_location), default=Path("data"), metavar="PATH|URI",
                     help="where the Delta tables live: a local path, or a URI such as s3://bucket/prefix, "
                          "gs://bucket/prefix, abfss://container@account.dfs.core.windows.net/prefix or file:///path. "
                          "A local data dir also holds the checkpoints and the embedded broker's data "
                          "(default: ./data)")
    run.add_argument("--storage-option", dest="storage_option", type=_argtype(storage_option_pair),
                     action="append", default=[], metavar="KEY=VALUE",
                     help="an object-store setting, as deltalake names it (repeatable; wins over the "
                          "environment's AWS_*, AZURE_* and GOOGLE_* variables), e.g. --storage-option "
                          "AWS_REGION=eu-west-1. Values of secret keys are never printed")
    run.add_argument("--checkpoint-dir", type=_argtype(checkpoint_location), metavar="PATH|URI",
                     help="where Spark's checkpoints live: a local path, a shared mount, or a Hadoop URI "
                          "(hdfs://, s3a:// where the cluster has the Hadoop AWS jars) "
                          "(default: <data-dir>/checkpoints; required when --data-dir is a URI)")
    run.add_argument("--no-producer", action="store_true",
                     help="start with the producer simulation off (the dashboard can turn it on)")
    run.add_argument("--no-dashboard", action="store_true", help="run the pipeline only (headless)")
    run.add_argument("--host", default="127.0.0.1", help="dashboard bind address (default: %(default)s)")
    run.add_argument("--port", type=_port, default=8050, help="dashboard port (default: %(default)s)")
    run.add_argument("--allow-host", dest="allow_host", type=_host_name, action="append", default=[], metavar="NAME",
                     help="another host name or address the dashboard answers to, as the browser sends it in "
                          "the Host header (repeatable; 127.0.0.1, localhost and a specific --host address "
                          "are always allowed, on any port), e.g. --allow-host dash.internal")
    add_spark_arguments(run)
    run.add_argument("--refresh-ms", type=_positive_int, default=Settings.refresh_ms, metavar="MS",
                     help="how often the dashboard refreshes, in milliseconds (default: %(default)s)")
    run.add_argument("--log-every", type=_positive_int, default=Settings.log_every_batches, metavar="N",
                     help="log a status line every N gold micro-batches (default: %(default)s)")

    stream = parser.add_argument_group("streaming")
    stream.add_argument("--window", type=duration_argument, default=Settings.window, metavar="DURATION",
                        help=f"tumbling window length (default: '{duration_text(Settings.window)}')")
    stream.add_argument("--watermark", type=duration_argument, default=Settings.watermark, metavar="DURATION",
                        help="how late a trade may arrive and still count "
                             f"(default: '{duration_text(Settings.watermark)}')")
    stream.add_argument("--trigger", type=duration_argument, default=Settings.trigger,
                        metavar="DURATION",
                        help="micro-batch interval, e.g. '2 seconds' or '500 milliseconds' "
                             f"(default: '{duration_text(Settings.trigger)}')")
    stream.add_argument("--max-event-time-jump", type=duration_argument, default=Settings.max_event_time_jump,
                        metavar="DURATION",
                        help="quarantine a trade whose event time is more than this ahead of the latest event time "
                             "seen and of its Kafka timestamp, instead of letting it move the watermark "
                             "(default: '1 day')")
    stream.add_argument("--fail-on-data-loss", type=_true_or_false, default=True, metavar="true|false",
                        help="whether the pipeline stops when Kafka no longer holds offsets it expects (a broker "
                             "that lost its tail, retention, a recreated topic); with false it logs the loss and "
                             "reads on from what the broker holds (default: true, as Spark's failOnDataLoss)")
    stream.add_argument("--kafka-retry-timeout", type=duration_argument, default=Settings.kafka_retry_timeout,
                        metavar="DURATION",
                        help="how long the pipeline keeps trying to reach an unreachable Kafka, with no micro-batch "
                             "meanwhile, before the query fails and is restarted (--max-query-restarts) "
                             "(default: '2 minutes')")
    stream.add_argument("--available-now", action="store_true",
                        help="process everything already in Kafka, then exit 0 (catch-up / cron use)")
    stream.add_argument("--max-offsets-per-trigger", type=_positive_int, metavar="N",
                        help="read at most N Kafka records per micro-batch (backpressure)")
    stream.add_argument("--max-query-restarts", type=_count, default=Settings.max_query_restarts, metavar="N",
                        help="restart a failed query from its checkpoint up to N times in a row, waiting 1, 2, 4 "
                             "... s (at most a minute) between tries; after that the app exits with code 1 (5 "
                             "minutes without a failure start the count afresh) "
                             "(default: %(default)s; 0: exit at the first failure)")
    stream.add_argument("--replay-from", type=_argtype(parse_instant), metavar="ISO-8601",
                        help="reprocess from this Kafka time with fresh checkpoints (old ones kept aside)")

    sim = parser.add_argument_group("producer simulation")
    sim.add_argument("--rate", type=_rate, default=Simulation.rate, metavar="N",
                     help="trades per second (default: %(default)s)")
    sim.add_argument("--clock-speed", type=_rate, default=Simulation.clock_speed, metavar="X",
                     help="market seconds per real second (default: %(default)s)")
    sim.add_argument("--late-share", type=_share, default=Simulation.late_share, metavar="SHARE",
                     help="share of trades sent late (default: %(default)s)")
    sim.add_argument("--beyond-watermark-share", type=_share, default=Simulation.beyond_watermark_share,
                     metavar="SHARE",
                     help="of the late trades, the share later than the watermark (default: %(default)s)")
    sim.add_argument("--max-lateness", type=duration_argument, metavar="DURATION",
                     help="how late a late trade within the watermark is at most, in market time "
                          "(default: 90%% of the watermark)")
    sim.add_argument("--max-beyond", type=duration_argument, metavar="DURATION",
                     help="how far beyond the watermark a too-late trade is at most, in market time "
                          "(default: as long as the watermark)")
    sim.add_argument("--duplicate-share", type=_share, default=Simulation.duplicate_share, metavar="SHARE",
                     help="share of trades delivered twice (default: %(default)s)")
    sim.add_argument("--malformed-share", type=_share, default=Simulation.malformed_share, metavar="SHARE",
                     help="share of malformed messages (default: %(default)s)")
    return parser


def _env_args(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> list[str]:
    """TRADE_SUMMARY_<FLAG> variables turned into flags, placed before the real ones so flags win."""
    args: list[str] = []
    for action in parser._actions:  # argparse keeps no public list of its actions
        long_flags = [s for s in action.option_strings if s.startswith("--")]
        if not long_flags or action.dest == "help":
            continue
        flag = long_flags[0]
        name = ENV_PREFIX + flag[2:].upper().replace("-", "_")
        if name not in environ:
            continue
        value = environ[name]
        if action.nargs == 0:  # store_true
            if value.strip().lower() in ("1", "true", "yes", "on"):
                args.append(flag)
            elif value.strip().lower() not in ("0", "false", "no", "off", ""):
                raise UsageError(f"{name}={value!r}: expected 1/0, true/false, yes/no or on/off")
        else:
            args.append(f"{flag}={value}")
    return args


def _parse_args(parser: argparse.ArgumentParser, argv: Sequence[str],
                environ: Mapping[str, str]) -> argparse.Namespace:
    try:
        return parser.parse_args([*_env_args(parser, environ), *argv])
    except UsageError as exc:
        raise UsageError(str(exc)) from None


def _kafka_target(ns: argparse.Namespace, environ: Mapping[str, str]) -> dict:
    """The KafkaTarget fields from the Kafka flags, --kafka-config and TRADE_SUMMARY_KAFKA_*."""
    kafka_options: dict[str, str] = {}
    if ns.kafka_config is not None:
        try:
            kafka_options.update(parse_kafka_properties(ns.kafka_config.read_text()))
        except OSError as exc:
            raise UsageError(f"cannot read --kafka-config {ns.kafka_config}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(f"--kafka-config {ns.kafka_config}: {exc}") from None
    for name, value in environ.items():
        if name.startswith(KAFKA_ENV_PREFIX):
            kafka_options[name[len(KAFKA_ENV_PREFIX):].lower().replace("_", ".")] = value
    bootstrap = ns.bootstrap_servers or kafka_options.pop("bootstrap.servers", None)
    if bootstrap and ns.bootstrap_servers is None:
        bootstrap = _bootstrap(bootstrap)
    return dict(data_dir=ns.data_dir, broker_root=ns.broker_dir, bootstrap_servers=bootstrap,
                broker_port=ns.broker_port, topic=ns.topic, kafka_options=kafka_options)


def _spark(ns: argparse.Namespace) -> dict:
    """What add_spark_arguments read."""
    return dict(master=ns.master, driver_host=(ns.driver_host or "").strip() or None, spark_conf=tuple(ns.conf))


def _storage(ns: argparse.Namespace, environ: Mapping[str, str]) -> dict:
    """Where the tables and checkpoints live, and the storage options that reach them."""
    remote = is_remote(ns.data_dir)
    if remote and ns.checkpoint_dir is None:
        raise UsageError(f"--data-dir {ns.data_dir} is not a local path: give --checkpoint-dir too, a local path, a "
                         "shared mount or a Hadoop URI for Spark's checkpoints (they cannot live in the object "
                         "store through deltalake)")
    flags = dict(ns.storage_option)
    if flags and not remote:
        raise UsageError("--storage-option applies to a --data-dir URI such as s3://bucket/prefix; "
                         f"{ns.data_dir} is a local path")
    # Resolved here, once: the Spark tasks that write table files may run where this environment is not.
    options = options_for_tasks(flags, environ) if remote else {}
    return dict(storage_options=options, checkpoint_root=ns.checkpoint_dir)


def parse_settings(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Settings:
    """Flags and environment -> Settings. Raises UsageError with a readable message."""
    environ = {} if environ is None else environ
    ns = _parse_args(build_parser(), argv, environ)
    if ns.max_lateness is not None and not timedelta(0) < ns.max_lateness < ns.watermark:
        minutes = lambda d: f"{d.total_seconds() / 60:g} minutes"  # noqa: E731
        raise UsageError(f"--max-lateness {minutes(ns.max_lateness)} must be shorter than the watermark "
                         f"({minutes(ns.watermark)}); later trades are the beyond-watermark ones")
    return Settings(
        **_kafka_target(ns, environ),
        **_storage(ns, environ),
        **_spark(ns),
        producer_enabled=not ns.no_producer,
        dashboard_enabled=not ns.no_dashboard,
        host=ns.host,
        port=ns.port,
        allowed_hosts=tuple(ns.allow_host),
        window=ns.window,
        watermark=ns.watermark,
        max_event_time_jump=ns.max_event_time_jump,
        fail_on_data_loss=ns.fail_on_data_loss,
        kafka_retry_timeout=ns.kafka_retry_timeout,
        trigger=ns.trigger,
        available_now=ns.available_now,
        max_offsets_per_trigger=ns.max_offsets_per_trigger,
        replay_from=ns.replay_from,
        log_every_batches=ns.log_every,
        max_query_restarts=ns.max_query_restarts,
        refresh_ms=ns.refresh_ms,
        simulation=Simulation(
            rate=ns.rate,
            clock_speed=ns.clock_speed,
            late_share=ns.late_share,
            beyond_watermark_share=ns.beyond_watermark_share,
            max_lateness=ns.max_lateness,
            max_beyond=ns.max_beyond,
            duplicate_share=ns.duplicate_share,
            malformed_share=ns.malformed_share,
        ),
    )


def build_load_parser() -> argparse.ArgumentParser:
    parser = _command_parser(
        "python run.py load",
        "Load trade files from a landing zone into the trades topic, with Spark Structured\n"
        "Streaming as the Kafka producer: historical or externally captured trades join the\n"
        "live pipeline. Each file holds JSON trades, one per line (the topic's message format).\n"
        "Lines are read with the trade schema, kept if they match --where, keyed by --key and\n"
        "sent as JSON. A line that does not match the schema is sent as read, so the pipeline\n"
        "quarantines it with a reason. The checkpoint remembers the files sent: a restart\n"
        "sends no file twice, and files added later are picked up while it runs.\n\n"
        "Example: python run.py load --from samples/trading-day --where \"channel = 'mobile'\" --available-now",
        "Ctrl-C (SIGINT) or SIGTERM stops between micro-batches; a restart resumes from the checkpoint.",
    )

    load = parser.add_argument_group("what to load")
    load.add_argument("--from", dest="source_dir", type=Path, required=True, metavar="DIR",
                      help="landing directory of JSON-lines trade files (files are picked up in "
                           "modification-time order; write them elsewhere and move them in)")
    load.add_argument("--where", metavar="CONDITION",
                      help="Spark SQL condition on the trade fields, e.g. \"channel = 'mobile'\" or "
                           "\"symbol IN ('AAPL', 'MSFT') AND quantity >= 10\" (default: every trade)")
    load.add_argument("--key", dest="key_column", default="account_id", metavar="FIELD",
                      help="trade field used as the Kafka key (default: %(default)s, as the topic's format says)")
    load.add_argument("--data-dir", type=_argtype(data_location), default=Path("data"), metavar="PATH|URI",
                      help="the pipeline's data dir: a local one holds the loader's checkpoints and the embedded "
                           "broker's data; with a URI (s3://...) give --checkpoint (default: ./data)")
    load.add_argument("--checkpoint", type=_argtype(checkpoint_location), metavar="DIR",
                      help="checkpoint directory (default: one per landing directory and topic under "
                           "<data-dir>/loader-checkpoints/)")
    add_spark_arguments(load)

    stream = parser.add_argument_group("streaming")
    stream.add_argument("--max-files-per-trigger", type=_positive_int, default=LoadSettings.max_files_per_trigger,
                        metavar="N", help="at most N new files per micro-batch (default: %(default)s)")
    stream.add_argument("--clean-source", choices=CLEAN_SOURCE_MODES, default="off",
                        help="what to do with a file once it is sent: leave it, move it to --archive-dir, "
                             "or delete it (default: %(default)s)")
    stream.add_argument("--archive-dir", type=Path, metavar="DIR",
                        help="with --clean-source archive: where sent files go, under their full path "
                             "(default: <data-dir>/loader-archive)")
    stream.add_argument("--trigger", type=duration_argument, default=LoadSettings.trigger,
                        metavar="DURATION",
                        help=f"how often to look for new files (default: '{duration_text(LoadSettings.trigger)}')")
    stream.add_argument("--available-now", action="store_true",
                        help="load the files there now, then exit 0 (catch-up / cron use)")
    return parser


def parse_load_settings(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> LoadSettings:
    """`python run.py load` flags and environment -> LoadSettings. Raises UsageError."""
    environ = {} if environ is None else environ
    ns = _parse_args(build_load_parser(), argv, environ)
    if not ns.source_dir.is_dir():
        raise UsageError(f"--from {ns.source_dir}: no such directory")
    if is_remote(ns.data_dir) and ns.checkpoint is None:
        raise UsageError(f"--data-dir {ns.data_dir} is not a local path: give --checkpoint DIR for the loader's "
                         "checkpoint")
    if is_remote(ns.data_dir) and ns.clean_source == "archive" and ns.archive_dir is None:
        raise UsageError(f"--data-dir {ns.data_dir} is not a local path: with --clean-source archive give "
                         "--archive-dir DIR too")
    if ns.archive_dir is not None and ns.clean_source != "archive":
        raise UsageError("--archive-dir needs --clean-source archive")
    settings = LoadSettings(
        **_kafka_target(ns, environ),
        source_dir=ns.source_dir,
        where=(ns.where or "").strip() or None,
        key_column=ns.key_column,
        max_files_per_trigger=ns.max_files_per_trigger,
        clean_source=ns.clean_source,
        archive_dir=ns.archive_dir,
        checkpoint=ns.checkpoint,
        trigger=ns.trigger,
        available_now=ns.available_now,
        **_spark(ns),
    )
    if settings.clean_source == "archive" and settings.archive_location.resolve().is_relative_to(
            settings.source_dir.resolve()):
        raise UsageError(f"--archive-dir {settings.archive_location} is inside --from {settings.source_dir}: "
                         "archived files would be picked up again; choose a directory outside it")
    return settings
