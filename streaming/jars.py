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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

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


COPIED = re.compile(r"Copying \S+\.jar to (\S+\.jar)")
DOWNLOADED = re.compile(r"Downloaded from [^:]+: \S+ \((\d+(?:\.\d+)?) (B|kB|KB|MB|GB)")
_UNIT_BYTES = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
LINE_EVERY_S = 10.0  # not on a terminal: a progress line this often


def mib(size: float) -> str:
    return f"{size / 2 ** 20:.1f} MiB"


class FetchProgress:
    """One part's fetch as one line: live on a terminal (redrawn in place), else a line every
    LINE_EVERY_S; then the part's total. Maven's own log is kept for an error."""

    def __init__(self, jar_set: JarSet, echo=print, stream: TextIO | None = None,
                 clock=time.monotonic, every_s: float = LINE_EVERY_S):
        self.jar_set, self.echo, self.clock, self.every_s = jar_set, echo, clock, every_s
        self.stream = sys.stderr if stream is None else stream
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = self.shown = clock()
        self.downloaded = 0.0  # bytes Maven fetched from the registry (nothing once cached)
        self.copied: list[Path] = []  # the jars Maven has said it copies into lib/
        self.total: int | None = None  # bytes of all of them, once Maven is done

    @property
    def jars(self) -> int:
        return len(self.copied)

    @property
    def size(self) -> int:
        """Bytes of the jars copied so far (Maven names each before it copies it)."""
        return self.total if self.total is not None else sum(_size(jar) for jar in self.copied)

    def line(self) -> str:
        fetched = f", {mib(self.downloaded)} downloaded" if self.downloaded else ""
        return (f"fetching {self.jar_set.purpose} with Maven (once): {self.jars} jars, {mib(self.size)}{fetched}, "
                f"{self.clock() - self.started:.0f} s")

    def read(self, maven_line: str) -> None:
        downloaded = DOWNLOADED.search(maven_line)
        if downloaded:
            self.downloaded += float(downloaded.group(1)) * _UNIT_BYTES[downloaded.group(2)]
        copied = COPIED.search(maven_line)
        if copied:
            self.copied.append(Path(copied.group(1)))
        if self.live:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
        elif self.clock() - self.shown >= self.every_s:
            self.shown = self.clock()
            self.echo(self.line())

    def done(self) -> str:
        self.total = self.size
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        return (f"{self.jar_set.purpose}: {self.jars} jars, {mib(self.size)}, fetched in "
                f"{self.clock() - self.started:.1f} s")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def fetch(jar_set: JarSet, echo=print, stream: TextIO | None = None) -> FetchProgress:
    """Resolve the pom's dependencies and copy them into lib/, with one progress line."""
    staging = jar_set.lib.with_name("lib.partial")
    shutil.rmtree(staging, ignore_errors=True)
    # Batch mode, transfers logged as whole lines (no -ntp): the progress counts what was downloaded.
    command = [maven_command(), "-B", "-f", str(jar_set.pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    progress = FetchProgress(jar_set, echo, stream)
    output = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as maven:
        for line in maven.stdout or ():
            output.append(line.rstrip())
            progress.read(line)
    summary = progress.done()
    if maven.returncode != 0:
        errors = [line for line in output if "[ERROR]" in line][:5] or output[-5:]
        raise JarsMissing(f"Maven could not fetch {jar_set.purpose} ({jar_set.pom}):\n" + "\n".join(errors))
    (staging / STAMP).write_text(jar_set.pom_digest() + "\n")
    shutil.rmtree(jar_set.lib, ignore_errors=True)
    staging.rename(jar_set.lib)
    echo(f"{summary} into {jar_set.lib}")
    return progress


def ensure(jar_set: JarSet, echo=print) -> list[Path]:
    """The set's jars, fetched first if they are missing or were fetched for another pom."""
    if not jar_set.is_fetched():
        fetch(jar_set, echo)
    return jar_set.jars()


def ensure_all(jar_sets: Sequence[JarSet], echo=print) -> None:
    """Fetch the missing sets, a progress line each, then the total when more than one was fetched."""
    started = time.monotonic()
    fetched = [fetch(jar_set, echo) for jar_set in jar_sets if not jar_set.is_fetched()]
    if len(fetched) > 1:
        echo(f"the Java parts: {sum(p.jars for p in fetched)} jars, {mib(sum(p.size for p in fetched))}, "
             f"fetched in {time.monotonic() - started:.1f} s (once: later starts use them as they are)")


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
        ensure_all(ALL)
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
