"""Checkpoints on a Hadoop URI (hdfs://, s3a://) are read and moved through the Spark session's
Hadoop file system; here through its file: scheme, the same code path as any other."""

import json
from datetime import datetime, timezone

from streaming.lake.checkpoints import REPLAY_FILE, Checkpoints, HadoopFiles, QueryCheckpoint


def test_a_checkpoint_read_through_hadoop_gives_what_spark_wrote(spark, tmp_path):
    files = HadoopFiles(spark)
    root = f"file://{tmp_path}/checkpoints/medallion"
    files.write_text(f"{root}/metadata", json.dumps({"id": "query-1"}) + "\n")
    files.write_text(f"{root}/offsets/0", 'v1\n{"batchWatermarkMs":0}\n{"trades":{"0":5,"1":7}}\n')
    files.write_text(f"{root}/commits/0", "v1\n{}\n")

    checkpoint = QueryCheckpoint(root, files)
    assert checkpoint.started and checkpoint.query_id == "query-1"
    assert checkpoint.offset_log(0).ends == {("trades", 0): 5, ("trades", 1): 7}
    assert checkpoint.offset_log(1) is None
    assert checkpoint.committed_offsets() == {("trades", 0): 5, ("trades", 1): 7}

    files.move(f"file://{tmp_path}/checkpoints", f"file://{tmp_path}/checkpoints.replaced/first")
    assert not files.exists(root)
    assert sorted(files.names(f"file://{tmp_path}/checkpoints.replaced/first/medallion")) == \
        ["commits", "metadata", "offsets"]


def test_a_replay_sets_hadoop_checkpoints_aside_and_notes_its_start(spark, tmp_path):
    checkpoints = Checkpoints(tmp_path / "checkpoints")
    checkpoints.files = HadoopFiles(spark)  # as for an hdfs:// or s3a:// root
    checkpoints.files.write_text(f"{checkpoints.location}/medallion/commits/0", "v1\n{}\n")

    moved = checkpoints.set_aside()
    assert moved and moved.startswith(checkpoints.set_aside_location)
    assert checkpoints.files.names(f"{moved}/medallion/commits") == ["0"]
    assert not checkpoints.files.exists(checkpoints.location)
    assert checkpoints.set_aside() is None  # nothing left to move

    since = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    checkpoints.remember_replay(since)
    assert json.loads((tmp_path / "checkpoints" / REPLAY_FILE).read_text()) == {"since": since.isoformat()}
