"""The app's lifecycle (streaming.run.app.App) run inside the test process, as `python run.py
--no-dashboard --available-now` would run it, on the session's broker and SparkSession."""

import signal

from streaming.lake.tables import QUARANTINE
from streaming.run.app import App
from streaming.run.cli import parse_settings
from tests.support.corpus import DAY, trade
from tests.support.harness import StreamTest
from tests.support.kafka import topic_settings


def test_the_app_catches_up_in_process_fills_gold_and_leaves_the_shared_spark_running(spark, broker, topic, writer,
                                                                                     tmp_path):
    settings = parse_settings(["--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
                               "--data-dir", str(tmp_path / "data"), "--no-dashboard", "--available-now",
                               "--broker-retention", "10m"])
    stream = StreamTest(spark, settings, writer)  # here only to send and to read the tables
    stream.add(trade("p1", "BUY", 2, 50.0, DAY + "09:01:00Z"), trade("p2", "SELL", 1, 30.0, DAY + "09:02:00Z"),
               trade("p3", "BUY", 4, 2.5, DAY + "09:16:00Z"), b"{not json")

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    shuffle_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    app = App(settings)  # no dashboard factory: --no-dashboard needs none
    try:
        app.start()  # installs its SIGINT/SIGTERM handlers (we are in the main thread)
        assert app.run_until_stopped() == 0
    finally:
        app.stop()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        spark.conf.set("spark.sql.shuffle.partitions", shuffle_partitions)  # the app's session settings

    assert app.spark.sparkContext.applicationId == spark.sparkContext.applicationId  # it reused ours
    assert not any(query.isActive for query in app.pipeline.queries)
    stream.check_gold({"09:00": (100.0, 30.0, 2), "09:15": (10.0, 0.0, 1)})
    stream.check_table(QUARANTINE, rows=1)
    assert spark.range(1).count() == 1  # App stops only a Spark it created
    assert topic_settings(broker.bootstrap_servers, topic)["retention.ms"] == "600000"  # --broker-retention
