"""What a Spark job over the lake starts from: the session, the run's settings, its lake and checkpoints."""

from __future__ import annotations

from pyspark.sql import SparkSession

from streaming.config import Settings
from streaming.lake.checkpoints import Checkpoints
from streaming.lake.store import Lake


class SparkJob:
    """The streaming pipeline, the reconciliation: each reads and writes one run's lake."""

    def __init__(self, spark: SparkSession, settings: Settings, lake: Lake | None = None):
        self.spark = spark
        self.settings = settings
        self.lake = lake or Lake(settings.data_dir, settings.storage_options)
        self.checkpoints = Checkpoints(settings.checkpoint_dir, spark)
