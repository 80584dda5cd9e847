"""Which of Spark's zips on a Python worker's path the daemon drops (run/python_daemon.py)."""

from __future__ import annotations

from pathlib import Path

from streaming.run.python_daemon import installed_copies


def package(root: Path, name: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    return root / name


def test_the_zips_inside_the_installed_pyspark_are_dropped_and_others_kept(tmp_path):
    site = tmp_path / "site-packages"
    lib = package(site, "pyspark") / "python" / "lib"
    package(site, "py4j")
    lib.mkdir(parents=True)
    ours, py4j, elsewhere = lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip", tmp_path / "deps.zip"
    path = [str(ours), str(py4j), str(elsewhere), str(site)]

    assert installed_copies(path) == [str(ours), str(py4j)]


def test_nothing_is_dropped_when_pyspark_is_only_in_the_zip(tmp_path):
    site = tmp_path / "site-packages"
    package(site, "py4j")
    path = [str(tmp_path / "spark" / "python" / "lib" / "pyspark.zip"), str(site)]

    assert installed_copies(path) == []
