"""What the embedded broker is started with: its server.properties, its log4j2 settings and a new cluster id."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path


def new_cluster_id() -> str:
    """A random UUID in Kafka's form (URL-safe base64, no padding); never with a leading '-',
    which the format tool would take for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def offsets_topic_partitions(log_dirs: Path) -> int:
    """The partitions __consumer_offsets has, or is to have: as many as the data dir holds (a
    `__consumer_offsets-N` directory each; 50, Kafka's default, in a dir from before this
    setting, which keeps them), else 1. One app's few consumer groups need one partition, where
    50 preallocate 50 pairs of 10 MiB index files."""
    held = [path for path in log_dirs.glob("__consumer_offsets-*")
            if path.is_dir() and path.name.rsplit("-", 1)[1].isdigit()]  # not a '...-delete' one
    return len(held) or 1


def request_threads() -> int:
    """As many as the cores, up to Kafka's default of 8."""
    return max(1, min(8, len(os.sched_getaffinity(0))))


def server_properties(log_dirs: Path, port: int, controller_port: int, offsets_partitions: int = 1) -> str:
    """One node that is broker and controller, on 127.0.0.1 only."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(log_dirs),
        # One node: every internal topic has one replica.
        "offsets.topic.replication.factor": "1",
        # Read when the topic is created, and to place a group's offsets: it must match the topic.
        "offsets.topic.num.partitions": str(offsets_partitions),
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # The compaction of __consumer_offsets needs a few MiB, not the 128 MiB of heap it
        # takes by default.
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        # A short topic retention acts within a minute rather than five.
        "log.retention.check.interval.ms": "60000",
        # The lone controller appends a no-op record to its metadata log this often (500 ms by
        # default): a third of the idle broker's CPU (docs/idle.md).
        "metadata.max.idle.interval.ms": "5000",
        # Request handler threads: Kafka's 8 cost the idle broker a fifth of its CPU on a
        # 2-core machine; more than the cores add nothing under load (docs/idle.md).
        "num.io.threads": str(request_threads()),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def log4j2_properties(server_log: Path) -> str:
    """Warnings and errors, and each start of the server, to a file of at most 3 x 10 MB. Each
    line is flushed as written, so log4j's shutdown hook (which warns when the JVM stops) is off."""
    return f"""status = warn
shutdownHook = disable
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {server_log}
appender.file.filePattern = {server_log}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 10MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""
