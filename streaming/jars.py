"""The Java parts from Maven: delta-spark and Spark's Kafka connector for Spark (spark.jars), and
Apache Kafka for the embedded broker. Each set is named by a checked-in pom.xml under jars/ and
fetched with its dependencies into that folder's lib/ by `mvn`, once: again only when the pom
changes. `python -m streaming.jars` fetches both; `python run.py` fetches what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

JARS_ROOT = Path(__file__).resolve().parent.parent / "jars"
FETCH_COMMAND = "python -m streaming.jars"
STAMP = ".pom-sha256"  # in lib/: the pom the jars there were fetched for


class JarsMissing(RuntimeError):
    """A set of jars is not there and could not be fetched; the message says what to do."""


@dataclass(frozen=True)
class JarSet:
    name: str  # the folder under jars/
    purpose: str

    @property
    def pom(self) -> Path:
        return JARS_ROOT / self.name / "pom.xml"

    @property
    def lib(self) -> Path:
        return JARS_ROOT / self.name / "lib"

    def pom_digest(self) -> str:
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    def is_fetched(self) -> bool:
        stamp = self.lib / STAMP
        return stamp.exists() and stamp.read_text().strip() == self.pom_digest()

    def jars(self) -> list[Path]:
        return sorted(self.lib.glob("*.jar"))


SPARK = JarSet("spark", "delta-spark and Spark's Kafka connector")
KAFKA = JarSet("kafka", "Apache Kafka, the embedded broker")
ALL = (SPARK, KAFKA)


def maven_command() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsMissing("Maven (`mvn`) is needed once, to fetch the Java parts (Delta, Spark's Kafka connector, "
                          "the Kafka broker), and was not found on PATH. Install it (Debian: apt-get install -y "
                          f"maven) and run `{FETCH_COMMAND}`.")
    return mvn


COPIED = re.compile(r"Copying (\S+\.jar) to ")


def fetch(jar_set: JarSet, echo=print) -> None:
    """Resolve the pom's dependencies and copy them into lib/, saying each jar as it comes."""
    staging = jar_set.lib.with_name("lib.partial")
    shutil.rmtree(staging, ignore_errors=True)
    command = [maven_command(), "-B", "-ntp", "-f", str(jar_set.pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    echo(f"fetching {jar_set.purpose} with Maven into {jar_set.lib} (once) ...")
    output, count = [], 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as maven:
        for line in maven.stdout or ():
            output.append(line.rstrip())
            copied = COPIED.search(line)
            if copied:
                count += 1
                echo(f"  {count:3d}  {Path(copied.group(1)).name}")
    if maven.returncode != 0:
        errors = [line for line in output if "[ERROR]" in line][:5] or output[-5:]
        raise JarsMissing(f"Maven could not fetch {jar_set.purpose} ({jar_set.pom}):\n" + "\n".join(errors))
    (staging / STAMP).write_text(jar_set.pom_digest() + "\n")
    shutil.rmtree(jar_set.lib, ignore_errors=True)
    staging.rename(jar_set.lib)
    echo(f"{count} jars in {jar_set.lib}")


def ensure(jar_set: JarSet, echo=print) -> list[Path]:
    """The set's jars, fetched first if they are missing or were fetched for another pom."""
    if not jar_set.is_fetched():
        fetch(jar_set, echo)
    return jar_set.jars()


def artifact_id(jar: str) -> str:
    """'delta-spark_4.2_2.13-4.4.0.jar' -> 'delta-spark_4.2_2.13'; 'zstd-jni-1.5.7-3.jar' -> 'zstd-jni'."""
    return re.sub(r"-\d[^-]*(-\d+)?\.jar$", "", Path(jar).name)


def spark_classpath(echo=print) -> list[str]:
    """The jars Spark starts with: the Spark set, but for artifacts pyspark already ships (its
    own versions of Hadoop, Parquet, Jackson ... stay the ones Spark was built with)."""
    import pyspark

    shipped = {artifact_id(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [str(jar) for jar in ensure(SPARK, echo) if artifact_id(jar.name) not in shipped]


def kafka_classpath(echo=print) -> str:
    """The embedded broker's class path (its jars only: Kafka's clients differ from Spark's)."""
    ensure(KAFKA, echo)
    return str(KAFKA.lib / "*")


def main() -> int:
    try:
        for jar_set in ALL:
            if jar_set.is_fetched():
                print(f"{jar_set.purpose}: {len(jar_set.jars())} jars already in {jar_set.lib}")
            else:
                fetch(jar_set)
    except JarsMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


class JavaMissing(RuntimeError):
    pass


def check_java() -> str:
    """Return `java -version`'s first line, or raise JavaMissing with how to fix it."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JavaMissing(
            "Java is required by Spark but `java` was not found"
            + (f" under JAVA_HOME={java_home}" if java_home else " on PATH")
            + ". Install a JDK 17 (Debian: apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise JavaMissing(f"`{java} -version` failed: {out.stderr.strip()}")
    return (out.stderr or out.stdout).splitlines()[0]


if __name__ == "__main__":
    sys.exit(main())
