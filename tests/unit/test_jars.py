"""The Java parts' bookkeeping: which jars a pom's fetch left, when they must be fetched again,
which reach Spark's class path, and what a machine without Maven is told (no Maven run here)."""

import io
from pathlib import Path

import pytest

from streaming import jars
from streaming.jars import JarSet, JarsMissing, artifact_id


def test_artifact_ids_drop_the_version_and_keep_the_scala_and_spark_suffixes():
    assert artifact_id("delta-spark_4.2_2.13-4.4.0.jar") == "delta-spark_4.2_2.13"
    assert artifact_id("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert artifact_id("zstd-jni-1.5.7-3.jar") == "zstd-jni"
    assert artifact_id("/x/lib/jackson-datatype-jdk8-2.21.2.jar") == "jackson-datatype-jdk8"


def test_jars_count_as_fetched_only_for_the_pom_they_were_fetched_for(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "JARS_ROOT", tmp_path)
    jar_set = JarSet("spark", "test jars")
    (tmp_path / "spark").mkdir()
    jar_set.pom.write_text("<project>one</project>")
    assert not jar_set.is_fetched()
    jar_set.lib.mkdir()
    (jar_set.lib / jars.STAMP).write_text(jar_set.pom_digest())
    assert jar_set.is_fetched()
    jar_set.pom.write_text("<project>two</project>")  # a version changed: fetch again
    assert not jar_set.is_fetched()


def test_spark_gets_only_the_jars_pyspark_does_not_ship(tmp_path, monkeypatch):
    import pyspark

    monkeypatch.setattr(jars, "JARS_ROOT", tmp_path)
    (tmp_path / "spark" / "lib").mkdir(parents=True)
    (tmp_path / "spark" / "pom.xml").write_text("<project/>")
    (tmp_path / "spark" / "lib" / jars.STAMP).write_text(jars.SPARK.pom_digest())
    pyspark_jar = next((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar")).name
    for name in ("delta-spark_4.2_2.13-4.4.0.jar", pyspark_jar.replace(".jar", "-1.jar")):
        (tmp_path / "spark" / "lib" / name).write_bytes(b"")
    assert [Path(p).name for p in jars.spark_classpath(echo=lambda _: None)] == ["delta-spark_4.2_2.13-4.4.0.jar"]


def test_without_maven_the_error_says_how_to_get_the_jars(monkeypatch):
    monkeypatch.setattr(jars.shutil, "which", lambda _: None)
    with pytest.raises(JarsMissing, match="apt-get install -y maven.*python -m streaming.jars"):
        jars.maven_command()


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_fetch_off_a_terminal_says_one_line_every_ten_seconds_then_the_parts_total(tmp_path):
    lines, clock = [], Clock()
    progress = jars.FetchProgress(jars.KAFKA, lines.append, stream=_NotATerminal(), clock=clock)
    progress.read("Downloaded from central: https://repo/x/kafka_2.13-4.4.0.jar (2.5 MB at 10 MB/s)")
    jar = tmp_path / "kafka_2.13-4.4.0.jar"
    jar.write_bytes(b"x" * 2 ** 20)
    for second in range(25):
        clock.now = second
        progress.read(f"[INFO] Copying {jar.name} to {jar}")
    assert lines == [
        "fetching Apache Kafka, the embedded broker with Maven (once): 11 jars, 11.0 MiB, 2.4 MiB downloaded, 10 s",
        "fetching Apache Kafka, the embedded broker with Maven (once): 21 jars, 21.0 MiB, 2.4 MiB downloaded, 20 s",
    ]
    assert progress.done() == "Apache Kafka, the embedded broker: 25 jars, 25.0 MiB, fetched in 24.0 s"


def test_a_fetch_on_a_terminal_redraws_one_line_in_place_and_clears_it():
    stream, clock = _Terminal(), Clock()
    progress = jars.FetchProgress(jars.SPARK, lambda line: None, stream=stream, clock=clock)
    progress.read("[INFO] Copying /nowhere/a-1.0.jar to /x/a-1.0.jar")
    progress.read("[INFO] Copying /nowhere/b-1.0.jar to /x/b-1.0.jar")
    progress.done()
    assert stream.getvalue().count("\r\x1b[K") == 3 and "2 jars" in stream.getvalue()
    assert "\n" not in stream.getvalue()  # no line per jar


class _NotATerminal(io.StringIO):
    def isatty(self):
        return False


class _Terminal(io.StringIO):
    def isatty(self):
        return True
