"""After a restart, the health snapshot takes a query where its checkpoint resumes: its lag counts
from the committed offsets and its watermark is the one it had, never "0 of everything" and "no
trades yet" (issue 35); on a real broker, Spark checkpoint and Delta tables."""

from streaming.jobs.pipeline import MEDALLION_QUERY
from streaming.kafka.clients import EndOffsets
from streaming.lake.checkpoints import Checkpoints
from streaming.lake.store import Lake
from streaming.run.health import HealthMonitor, Resume, resume_point, status_time
from tests.support.corpus import DAY, trade


def test_a_restarted_query_resumes_at_its_committed_offsets_with_the_watermark_it_had(stream, settings):
    stream.add(trade("r1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("r2", "SELL", 1, 30.0, DAY + "09:40:00Z"),
               b"{not json")
    stream.process()
    watermark = stream.pipeline.sinks[MEDALLION_QUERY].watermark
    assert watermark is not None  # 09:40 less the 30 minutes
    ends = EndOffsets(settings.kafka_client_config(), settings.topic)
    try:
        done = ends.read()
        stream.stop()
        stream.add(trade("r3", "BUY", 1, 10.0, DAY + "09:41:00Z"))  # produced while it was down

        lake = Lake(settings.data_dir)
        checkpoint = Checkpoints(settings.checkpoint_dir).query(MEDALLION_QUERY)
        assert resume_point(lake, checkpoint, settings.watermark) == Resume(done, status_time(watermark))

        stream.start()  # the query may or may not have reported its first batch when sampled
        monitor = HealthMonitor(stream.pipeline.status, lambda: None, ends,
                                resume=lambda name: resume_point(lake, stream.pipeline.checkpoints.query(name),
                                                                 settings.watermark))
        snapshot = monitor.sample()
        [query] = snapshot["queries"]
        assert query["watermark"] is not None and query["watermark"] >= status_time(watermark)
        assert snapshot["kafka"]["total_lag"][MEDALLION_QUERY] <= 1  # r3 at most, not all four records
        assert snapshot["catch_up"] == {}
    finally:
        ends.close()
