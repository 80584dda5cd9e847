"""Landing zone -> Kafka: Spark Structured Streaming as the producer of historical or externally
captured trades (`python run.py load`).

JSON files (one trade per line) are read with the trade schema, filtered with a condition
given at run time, turned into key + value (`to_json(struct(*))`) and written to the trades
topic by Spark's Kafka sink (format("kafka")), with a checkpoint that remembers every file sent.

A line that does not match the schema (invalid JSON, a mistyped field) is not judged here:
it skips the filter and is sent byte for byte as read, so the pipeline's silver layer
quarantines it with a reason, like any bad record on the topic. Nothing vanishes in between.
"""

from __future__ import annotations

import logging

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StreamingQuery

from streaming.config import LoadSettings, UsageError
from streaming.jobs.pipeline import with_trigger
from streaming.kafka.options import sink_options
from streaming.medallion.silver.dataframe import TRADE_SCHEMA
from streaming.medallion.silver.rules import TRADE_FIELDS

LOADER_QUERY = "loader"
CORRUPT_COLUMN = "_corrupt_record"
# The trade fields as silver parses them (event_time stays text, so its zone survives the
# round trip), plus the raw line of any line that does not fit them.
TRADE_FILE_SCHEMA = T.StructType([*TRADE_SCHEMA.fields, T.StructField(CORRUPT_COLUMN, T.StringType())])
# Spark skips files older than maxFileAge, measured from the newest file it has seen, not from
# now: historical files copied in with their old modification times would be skipped silently.
KEEP_EVERY_FILE = "36500d"
READ_METRICS, SENT_METRICS = "loader_read", "loader_sent"


def to_kafka_records(lines: DataFrame, where: str | None, key_column: str) -> DataFrame:
    """Trade file lines (TRADE_FILE_SCHEMA) -> the Kafka sink's `key` and `value` columns.

    Kept: the lines matching `where` (SQL: a NULL result does not match), and every line that
    did not parse, since the filter cannot judge it and dropping it here would lose it silently.
    Value: the trade as JSON, or the unparsed line's original bytes.
    Key: the key field as text (for an unparsed line, the field if the line has it and is UTF-8).
    """
    raw = F.col(CORRUPT_COLUMN)
    kept = lines if where is None else lines.where(F.expr(where) | raw.isNotNull())
    # Not from a line that is not UTF-8: its bytes would come out altered (U+FFFD).
    key_in_raw = F.when(F.is_valid_utf8(raw), F.get_json_object(raw, f"$.{key_column}"))
    return kept.select(
        F.coalesce(F.col(key_column).cast("string"), key_in_raw).alias("key"),
        F.when(raw.isNotNull(), raw.cast("binary"))  # bytes as read, even when not valid UTF-8
        .otherwise(F.to_json(F.struct(*TRADE_FIELDS)).cast("binary")).alias("value"),
    )


def check_key(key_column: str) -> None:
    if key_column not in TRADE_FIELDS:
        raise UsageError(f"--key {key_column!r} is not a trade field; choose one of {', '.join(TRADE_FIELDS)}")


def check_filter(spark: SparkSession, where: str | None, key_column: str) -> None:
    """Raise UsageError for a --where that Spark cannot parse or resolve, before any stream starts."""
    check_key(key_column)
    if where is None:
        return
    # PySpark logs every analysis error with its JVM stack as JSON; this one we explain ourselves.
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        spark.createDataFrame([], TRADE_SCHEMA).where(where)  # analysed now, against the trade fields only
    except (ParseException, AnalysisException) as exc:
        fields = ", ".join(f"{f.name} ({f.dataType.simpleString()})" for f in TRADE_SCHEMA.fields)
        raise UsageError(f"--where {where!r}: {exc.getMessage()}. The trade fields are: {fields}") from None


def read_landing_zone(spark: SparkSession, settings: LoadSettings) -> DataFrame:
    reader = (
        spark.readStream.schema(TRADE_FILE_SCHEMA)
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .option("maxFilesPerTrigger", settings.max_files_per_trigger)
        .option("maxFileAge", KEEP_EVERY_FILE)
        .option("cleanSource", settings.clean_source)
    )
    if settings.clean_source == "archive":
        reader = reader.option("sourceArchiveDir", str(settings.archive_location.resolve()))
    return reader.json(str(settings.source_dir.resolve()))


def start_load_query(spark: SparkSession, settings: LoadSettings) -> StreamingQuery:
    # Counted for the progress log; every unparsed line read is also sent (it skips the filter).
    lines = read_landing_zone(spark, settings).observe(
        READ_METRICS, F.count(F.lit(1)).alias("lines"), F.count(CORRUPT_COLUMN).alias("unparsed"),
        F.size(F.collect_set("_metadata.file_path")).alias("files"))
    records = to_kafka_records(lines, settings.where, settings.key_column).observe(
        SENT_METRICS, F.count(F.lit(1)).alias("records"))
    writer = (
        records.writeStream.format("kafka").queryName(LOADER_QUERY)
        .options(**sink_options(settings.kafka_client_config(), settings.topic))
        .option("checkpointLocation", str(settings.checkpoint_location))
    )
    return with_trigger(writer, settings).start()


def batch_counts(progress) -> dict[str, int] | None:
    """A micro-batch's progress -> {files, lines, records, unparsed}; None for a batch that read nothing."""
    metrics = progress.get("observedMetrics") or {}
    if READ_METRICS not in metrics or not progress.get("numInputRows"):
        return None
    read, sent = metrics[READ_METRICS], metrics.get(SENT_METRICS)
    return {"files": int(read["files"]), "lines": int(read["lines"]), "unparsed": int(read["unparsed"]),
            "records": int(sent["records"]) if sent else 0}


def new_batch_counts(reports, last_logged: int) -> list[tuple[int, dict[str, int]]]:
    """Progress reports -> (batch id, counts) of each batch after `last_logged` that read something.

    An idle trigger reports the id of the batch still to come, with no input: it must not mark
    that id as logged, or the batch itself would go unsaid when it runs.
    """
    batches = []
    for report in reports:
        counts = batch_counts(report)
        if counts is not None and report["batchId"] > last_logged:
            batches.append((report["batchId"], counts))
            last_logged = report["batchId"]
    return batches


def describe_counts(counts: dict[str, int], topic: str) -> str:
    files = f"{counts['files']} file{'s' if counts['files'] != 1 else ''}"
    text = f"{files}, {counts['lines']} lines read, {counts['records']} records sent to '{topic}'"
    if counts["unparsed"]:
        text += f" ({counts['unparsed']} lines did not match the trade schema: sent as read, for quarantine)"
    return text
