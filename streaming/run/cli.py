"""argv + environment -> frozen settings: `parse_settings` (python run.py) and `parse_load_settings` (run.py load).

The only readers of flags and TRADE_SUMMARY_* variables; the parsers are in arguments.py, the
overlay in environment.py, the settings in config.py.
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta
from pathlib import Path
from typing import Mapping, Sequence

from streaming.config import CLOSE_IDLE_AFTER, LoadSettings, Settings, Simulation, UsageError, parse_kafka_properties
from streaming.lake.locations import is_remote, options_for_tasks
from streaming.run.argument_types import bootstrap_servers
from streaming.run.arguments import build_load_parser, build_parser
from streaming.run.environment import KAFKA_ENV_PREFIX, env_args, kafka_settings
from streaming.run.users import ADD_USERS, UsersFileError, is_loopback, open_address_refusal, read_token, read_users

# The namespace fields that hold a local path (or a URI, left as it is).
PATH_FLAGS = ("data_dir", "broker_dir", "checkpoint_dir", "kafka_config", "source_dir", "archive_dir", "checkpoint",
              "auth_file", "metrics_token_file")
SESSION_KEY_VARIABLE = "TRADE_SUMMARY_SESSION_KEY"  # signs session cookies; else a key file per data dir


def absolute(location: Path | str | None, cwd: Path) -> Path | str | None:
    """A local path made absolute against the working directory the command was started in (and
    `~` expanded); a URI or None as it is. Resolved here, once: the broker's JVM and Spark run with
    other working directories, where a relative path points elsewhere."""
    if not isinstance(location, Path):
        return location
    return Path(os.path.normpath(cwd / location.expanduser()))


def _absolute_paths(ns: argparse.Namespace, cwd: Path, *names: str) -> None:
    for name in names:
        setattr(ns, name, absolute(getattr(ns, name), cwd))


def _parse_args(parser: argparse.ArgumentParser, argv: Sequence[str], environ: Mapping[str, str],
                cwd: Path | None) -> argparse.Namespace:
    """The flags over the environment, with every local path in them absolute (`absolute`)."""
    try:
        ns = parser.parse_args([*env_args(parser, environ), *argv])
    except UsageError as exc:
        raise UsageError(str(exc)) from None
    cwd = Path.cwd() if cwd is None else cwd
    _absolute_paths(ns, cwd, *(name for name in PATH_FLAGS if hasattr(ns, name)))
    if ns.broker_dir is None and is_remote(ns.data_dir):
        ns.broker_dir = cwd / "data" / "broker"  # the embedded broker's data is local, whatever the lake
    return ns


def _kafka_target(ns: argparse.Namespace, environ: Mapping[str, str], parser: argparse.ArgumentParser) -> dict:
    """The KafkaTarget fields from the Kafka flags, --kafka-config and TRADE_SUMMARY_KAFKA_*."""
    kafka_options: dict[str, str] = {}
    if ns.kafka_config is not None:
        try:
            kafka_options.update(parse_kafka_properties(ns.kafka_config.read_text()))
        except OSError as exc:
            raise UsageError(f"cannot read --kafka-config {ns.kafka_config}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(f"--kafka-config {ns.kafka_config}: {exc}") from None
    kafka_options.update(kafka_settings(environ, parser))
    bootstrap = ns.bootstrap_servers or kafka_options.pop("bootstrap.servers", None)
    if bootstrap and ns.bootstrap_servers is None:
        try:
            bootstrap = bootstrap_servers(bootstrap)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"bootstrap.servers (from --kafka-config or {KAFKA_ENV_PREFIX}BOOTSTRAP_SERVERS): "
                             f"{exc}") from None
    return dict(data_dir=ns.data_dir, broker_root=ns.broker_dir, bootstrap_servers=bootstrap,
                broker_port=ns.broker_port, topic=ns.topic, broker_retention=ns.broker_retention,
                kafka_options=kafka_options)


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


def _access(ns: argparse.Namespace, environ: Mapping[str, str]) -> dict:
    """Who may do what, checked before anything starts: a users file with users, a usable token,
    and no address beyond this machine without logins (unless --insecure-no-login)."""
    if ns.auth_file is not None and ns.insecure_no_login:
        raise UsageError("--auth-file turns logins on and --insecure-no-login says there are none: give one")
    try:
        if ns.auth_file is not None and not read_users(ns.auth_file):
            raise UsersFileError(f"{ns.auth_file} holds no users: add one with `{ADD_USERS}`")
        if ns.metrics_token_file is not None:
            read_token(ns.metrics_token_file)  # read again when the server starts: never kept in the settings
    except UsersFileError as exc:
        raise UsageError(str(exc)) from None
    serves = not ns.available_now  # --available-now serves nothing: no port, nothing to guard
    if serves and ns.auth_file is None and not ns.insecure_no_login and not is_loopback(ns.host):
        raise UsageError(open_address_refusal(ns.host))
    return dict(auth_file=ns.auth_file, metrics_token_file=ns.metrics_token_file,
                insecure_no_login=ns.insecure_no_login, session_key=environ.get(SESSION_KEY_VARIABLE) or None)


def _close_idle_after(given: timedelta | str | None, embedded_broker: bool) -> timedelta | None:
    """--close-idle-after: as given ('off': never), else the default with the embedded broker and
    never with another Kafka (its quiet may be a feed's stall, not the market's close)."""
    if given == "off":
        return None
    if isinstance(given, timedelta):
        return given
    return CLOSE_IDLE_AFTER if embedded_broker else None


def parse_settings(argv: Sequence[str], environ: Mapping[str, str] | None = None,
                   cwd: Path | None = None) -> Settings:
    """Flags and environment -> Settings, every local path absolute against `cwd` (default: the
    working directory now). Raises UsageError with a readable message."""
    environ = {} if environ is None else environ
    parser = build_parser()
    ns = _parse_args(parser, argv, environ, cwd)
    if ns.max_lateness is not None and not timedelta(0) < ns.max_lateness < ns.watermark:
        minutes = lambda d: f"{d.total_seconds() / 60:g} minutes"  # noqa: E731
        raise UsageError(f"--max-lateness {minutes(ns.max_lateness)} must be shorter than the watermark "
                         f"({minutes(ns.watermark)}); later trades are the beyond-watermark ones")
    kafka = _kafka_target(ns, environ, parser)
    return Settings(
        **kafka,
        **_storage(ns, environ),
        **_spark(ns),
        **_access(ns, environ),
        producer_enabled=not ns.no_producer,
        dashboard_enabled=not ns.no_dashboard,
        host=ns.host,
        port=ns.port,
        allowed_hosts=tuple(ns.allow_host),
        window=ns.window,
        watermark=ns.watermark,
        close_idle_after=_close_idle_after(ns.close_idle_after, embedded_broker=kafka["bootstrap_servers"] is None),
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
        max_pages=ns.max_pages,
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


def parse_load_settings(argv: Sequence[str], environ: Mapping[str, str] | None = None,
                        cwd: Path | None = None) -> LoadSettings:
    """`python run.py load` flags and environment -> LoadSettings, every local path absolute
    against `cwd` (default: the working directory now). Raises UsageError."""
    environ = {} if environ is None else environ
    parser = build_load_parser()
    ns = _parse_args(parser, argv, environ, cwd)
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
        **_kafka_target(ns, environ, parser),
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
