"""Every setting of a run, as frozen values, and the parsers of the values themselves
(durations, instants, client.properties). No argparse here: cli.py builds these from the
command line and the environment; everything else receives them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Mapping

from streaming.lake.locations import is_remote, local_path, redact_storage_options

LOCK_FILE = ".trade-summary.lock"  # instance.py: one app per data dir
SECRET_KEY_PATTERN = re.compile(r"password|secret|jaas|token|key\.pem|private", re.IGNORECASE)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(millisecond|second|minute|hour|day|ms|s|m|h|d)s?\s*$", re.IGNORECASE)
_UNIT_MILLISECONDS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000,
                      "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration(text: str) -> timedelta:
    """'15 minutes' -> timedelta(minutes=15); '0.25 seconds' or '250 milliseconds' for a short
    trigger. Spark's interval words, singular or plural, or their short forms ('90s', '5m', '2h',
    '7d', '250ms'); at least a millisecond, in whole ones."""
    match = _DURATION.match(str(text))
    milliseconds = float(match.group(1)) * _UNIT_MILLISECONDS[match.group(2).lower()] if match else 0
    if milliseconds < 1 or milliseconds != int(milliseconds):
        raise ValueError(
            f"invalid duration {text!r}: expected a positive number and a unit, "
            "e.g. '15 minutes', '30 seconds', '1 hour', '250 milliseconds' or '90s', '5m', '2h', '7d' "
            "(whole milliseconds)"
        )
    return timedelta(milliseconds=int(milliseconds))


BACK_TO_BACK = re.compile(r"^\s*0+(?:\.0+)?\s*(?:(?:millisecond|second|minute|hour|day|ms|s|m|h|d)s?)?\s*$",
                          re.IGNORECASE)


def parse_trigger(text: str) -> timedelta:
    """A micro-batch interval (parse_duration), or 0 ('0', '0 seconds'): batches back to back."""
    return timedelta(0) if BACK_TO_BACK.match(str(text)) else parse_duration(text)


def format_duration(delta: timedelta) -> str:
    """timedelta -> the interval string Spark expects ('900 seconds', '250 milliseconds')."""
    milliseconds = round(delta.total_seconds() * 1000)
    return f"{milliseconds // 1000} seconds" if milliseconds % 1000 == 0 else f"{milliseconds} milliseconds"


def trigger_text(delta: timedelta) -> str:
    """A trigger as a person reads it: 'back to back' for 0, else 'every 500 milliseconds' (duration_text)."""
    return "back to back" if delta <= timedelta(0) else f"every {duration_text(delta)}"


def duration_text(delta: timedelta) -> str:
    """timedelta -> how a person writes it, in the largest whole unit ('15 minutes', '1 second',
    '500 milliseconds'); parse_duration reads it back."""
    milliseconds = round(delta.total_seconds() * 1000)
    for unit in ("day", "hour", "minute", "second"):
        size = _UNIT_MILLISECONDS[unit]
        if milliseconds >= size and milliseconds % size == 0:
            count = milliseconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{milliseconds} millisecond{'' if milliseconds == 1 else 's'}"


def status_time(instant: datetime | None) -> str | None:
    """A time as the health snapshot writes it (QueryStatus): '2026-03-02T09:02:00.000Z'."""
    return None if instant is None else instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_instant(text: str) -> datetime:
    """An ISO-8601 time with a zone ('2026-03-02T09:00:00Z') -> aware UTC datetime."""
    try:
        value = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"invalid time {text!r}: expected ISO-8601, e.g. 2026-03-02T09:00:00Z") from None
    if value.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone: add 'Z' or an offset such as +01:00")
    return value.astimezone(timezone.utc)


def parse_kafka_properties(text: str) -> dict[str, str]:
    """A client.properties file (key=value lines, # comments), as Confluent Cloud hands out."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"cannot read line {line!r}: expected key=value")
        props[key.strip()] = value.strip()
    return props


def redact(options: Mapping[str, str]) -> dict[str, str]:
    """Client settings safe to print: secrets replaced by '***'."""
    return {k: ("***" if SECRET_KEY_PATTERN.search(k) else v) for k, v in options.items()}


@dataclass(frozen=True)
class Simulation:
    """Knobs of the producer simulation (all changeable at runtime from the dashboard)."""

    rate: float = 20.0  # trades per wall-clock second
    clock_speed: float = 60.0  # market seconds per wall-clock second
    late_share: float = 0.05  # share of trades sent late
    beyond_watermark_share: float = 0.2  # of the late ones, the share later than the watermark
    max_lateness: timedelta | None = None  # how late the others are at most (None: 90% of the watermark)
    # how far beyond the watermark the too-late ones are at most (None: the watermark)
    max_beyond: timedelta | None = None
    duplicate_share: float = 0.01
    malformed_share: float = 0.0
    seed: int | None = None


# The knobs' limits, for the command line and the page alike.
MIN_RATE = 0.1  # trades per second
MAX_RATE = 100_000.0
MAX_BEYOND_MINUTES = 24 * 60  # how far beyond the watermark a too-late trade can be sent

# How long the topic keeps records. Bronze is the long-term copy (a --replay-from reads it for
# what the broker no longer holds), so the embedded broker holds minutes; a topic created on
# another Kafka gets a week, and an existing one keeps its own.
EMBEDDED_RETENTION = timedelta(minutes=5)
NEW_TOPIC_RETENTION = timedelta(days=7)


@dataclass(frozen=True)
class KafkaTarget:
    """Where a command talks to Kafka: the fields and helpers every command shares."""

    data_dir: Path | str = Path("data")  # a local Path, or an object-store URI (lake/locations.py)
    broker_root: Path | None = None  # --broker-dir
    bootstrap_servers: str | None = None  # None: start the embedded broker
    broker_port: int = 9092
    topic: str = "trades"
    topic_partitions: int = 3
    broker_retention: timedelta | None = None  # --broker-retention; None: see topic_retention
    kafka_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def embedded_broker(self) -> bool:
        return self.bootstrap_servers is None

    @property
    def topic_retention(self) -> timedelta | None:
        """The retention the topic is given at start (created or not); None leaves an existing
        topic as it is (another Kafka's topic, unless --broker-retention says otherwise)."""
        if self.broker_retention is not None:
            return self.broker_retention
        return EMBEDDED_RETENTION if self.embedded_broker else None

    def retention_at_start(self, reused_broker: bool) -> timedelta | None:
        """What an existing topic is given at start: --broker-retention, else the embedded default
        when this command started the broker. A running app's broker, reused by `run.py load`,
        keeps the retention that app gave it."""
        if self.broker_retention is not None:
            return self.broker_retention
        return None if reused_broker else self.topic_retention

    @property
    def topic_retention_ms(self) -> int:
        """The retention of a topic created here."""
        return int((self.topic_retention or NEW_TOPIC_RETENTION).total_seconds() * 1000)

    @property
    def kafka_bootstrap(self) -> str:
        return self.bootstrap_servers or f"127.0.0.1:{self.broker_port}"

    @property
    def data_is_local(self) -> bool:
        return not is_remote(self.data_dir)

    @property
    def broker_dir(self) -> Path:
        """The embedded broker's data: always local (--broker-dir, else under a local data dir,
        else ./data/broker)."""
        if self.broker_root is not None:
            return self.broker_root
        return (Path(self.data_dir) if self.data_is_local else Path("data")) / "broker"

    def kafka_client_config(self) -> dict[str, str]:
        """librdkafka settings for every client of this run (producer, admin, source, sink)."""
        return {**self.kafka_options, "bootstrap.servers": self.kafka_bootstrap}

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def describe_kafka(self) -> str:
        broker = f"embedded on 127.0.0.1:{self.broker_port}" if self.embedded_broker else self.bootstrap_servers
        extra = f", client settings {redact(self.kafka_options)}" if self.kafka_options else ""
        return f"Kafka {broker}, topic '{self.topic}'{extra}"


CLOSE_IDLE_AFTER = timedelta(minutes=15)  # --close-idle-after's default with the embedded broker


@dataclass(frozen=True)
class Settings(KafkaTarget):
    producer_enabled: bool = True
    dashboard_enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8050
    # --allow-host NAME (repeatable): more names the dashboard answers to, besides 127.0.0.1,
    # localhost and a specific --host address
    allowed_hosts: tuple[str, ...] = ()
    window: timedelta = timedelta(minutes=15)
    watermark: timedelta = timedelta(minutes=30)
    # After this much wall-clock quiet (no new trade) the watermark moves up to the latest event
    # time seen (None: never); cli.py turns it off for --bootstrap-servers unless given.
    close_idle_after: timedelta | None = CLOSE_IDLE_AFTER
    # A batch at most every 150 ms, back to back once a batch takes longer: the tick bounds how
    # often a batch's fixed cost is paid, and how long a trade waits (docs/live-batch.md#the-trigger).
    trigger: timedelta = timedelta(milliseconds=150)
    available_now: bool = False
    max_offsets_per_trigger: int | None = None
    replay_from: datetime | None = None
    master: str = "local[*]"
    spark_conf: tuple[tuple[str, str], ...] = ()  # --conf KEY=VALUE, applied over our defaults
    simulation: Simulation = Simulation()
    refresh_ms: int = 2000
    # Pages live at once on the page's connection (/api/events); the web server's threads are sized
    # for them (streaming/run/web.py), and a page beyond them refreshes every refresh_ms instead.
    max_pages: int = 40
    log_every_batches: int = 20  # a status line in the terminal every N micro-batches
    max_query_restarts: int = 5  # a failed query is restarted from its checkpoint this many times, with backoff
    # A trade more than this ahead of the latest event time seen (and of its Kafka timestamp) is quarantined.
    max_event_time_jump: timedelta = timedelta(days=1)
    # Spark's failOnDataLoss: fail when Kafka no longer holds offsets the checkpoint expects.
    fail_on_data_loss: bool = True
    # How long the pipeline keeps trying to reach an unreachable Kafka before a query fails.
    kafka_retry_timeout: timedelta = timedelta(minutes=2)
    # deltalake storage options: the standard environment variables, then --storage-option
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    checkpoint_root: Path | str | None = None  # --checkpoint-dir: a local path or a Hadoop URI
    driver_host: str | None = None  # --driver-host: the address executors reach the driver at
    # Who may do what (streaming/run/users.py, dashboard/access.py): None is no logins (127.0.0.1 only,
    # unless insecure_no_login); the session key from TRADE_SUMMARY_SESSION_KEY (else a file per data dir).
    auth_file: Path | None = None
    metrics_token_file: Path | None = None
    insecure_no_login: bool = False
    session_key: str | None = field(default=None, repr=False)

    @property
    def checkpoint_dir(self) -> Path | str:
        """Spark's checkpoints: --checkpoint-dir, else <data-dir>/checkpoints (cli.py requires
        the flag when the data dir is remote)."""
        if self.checkpoint_root is not None:
            return self.checkpoint_root
        return Path(self.data_dir) / "checkpoints"

    @property
    def lock_file(self) -> Path:
        """The file that makes a run the only one on its data: in a local data dir; else beside
        local checkpoints (not inside: --replay-from moves them aside); else in the broker's dir."""
        if self.data_is_local:
            return Path(self.data_dir) / LOCK_FILE
        if not is_remote(self.checkpoint_dir):
            checkpoints = Path(self.checkpoint_dir)
            return checkpoints.with_name(f".{checkpoints.name}{LOCK_FILE}")
        return self.broker_dir / LOCK_FILE

    def describe(self) -> str:
        storage = (f" (storage options {redact_storage_options(self.storage_options)})"
                   if self.storage_options and not self.data_is_local else "")
        checkpoints = f"; checkpoints in {self.checkpoint_root}" if self.checkpoint_root is not None else ""
        logins = f"; logins from {self.auth_file}" if self.auth_file is not None else ""
        token = "; /metrics takes a bearer token" if self.metrics_token_file is not None else ""
        return (
            f"{self.describe_kafka()}; data in {self.data_dir}{storage}{checkpoints}; "
            f"window {format_duration(self.window)}, watermark {format_duration(self.watermark)}, "
            f"batches {trigger_text(self.trigger)}{logins}{token}"
        )


CLEAN_SOURCE_MODES = ("off", "archive", "delete")


@dataclass(frozen=True)
class LoadSettings(KafkaTarget):
    """`python run.py load`: trade files from a landing zone -> the trades topic."""

    source_dir: Path = Path("landing")
    where: str | None = None
    key_column: str = "account_id"
    max_files_per_trigger: int = 10
    clean_source: str = "off"
    archive_dir: Path | None = None
    checkpoint: Path | str | None = None
    trigger: timedelta = timedelta(seconds=5)
    available_now: bool = False
    master: str = "local[*]"
    driver_host: str | None = None
    spark_conf: tuple[tuple[str, str], ...] = ()

    @property
    def checkpoint_location(self) -> Path | str:
        """--checkpoint (a local path or a Hadoop URI), else one per landing directory and topic,
        so each keeps its own list of files sent. Not under <data-dir>/checkpoints: --replay-from
        moves that aside, and the files would then be sent again."""
        if self.checkpoint is not None:
            return self.checkpoint
        source = self.source_dir.resolve()
        digest = hashlib.sha1(f"{source}\n{self.topic}".encode()).hexdigest()[:8]
        return self._local_data_dir / "loader-checkpoints" / f"{source.name or 'root'}-{self.topic}-{digest}"

    @property
    def archive_location(self) -> Path:
        return self.archive_dir or self._local_data_dir / "loader-archive"

    @property
    def _local_data_dir(self) -> Path:
        """The data dir, for what the loader keeps under it; cli.py asks for --checkpoint (and
        --archive-dir) when it is a URI."""
        if is_remote(self.data_dir):
            raise UsageError(f"--data-dir {self.data_dir} is not a local path: give --checkpoint and --archive-dir")
        return local_path(self.data_dir)

    def describe(self) -> str:
        clean = {"off": "files left in place", "delete": "files deleted once sent",
                 "archive": f"files moved to {self.archive_location} once sent"}[self.clean_source]
        return (
            f"loading {self.source_dir} into {self.describe_kafka()}; "
            f"filter: {self.where or 'none'}; key: {self.key_column}; "
            f"up to {self.max_files_per_trigger} files per batch; {clean}; checkpoint in {self.checkpoint_location}"
        )


class UsageError(Exception):
    """A bad flag, environment value or setting; the command prints it without a traceback."""
