"""`python run.py load` as a user runs it: help, usage errors before Kafka is touched, the sample
day sent once, new files picked up, and a clean stop on SIGTERM."""

import shutil
import time

import pytest

from streaming.simulation.sample_day import DEFAULT_DIR as SAMPLE_DAY
from tests.support.kafka import count_since
from tests.support.landing import ITERATIONS, drop_file
from tests.support.process import RunPy


@pytest.fixture
def landing(tmp_path):
    path = tmp_path / "landing"
    path.mkdir()
    return path


def test_run_py_load_help_and_a_missing_directory():
    app = RunPy("load", "--help")
    assert app.wait(30) == 0
    assert all(flag in app.output for flag in ("--from DIR", "--where", "--key", "--clean-source", "--available-now"))
    app = RunPy("load", "--from", "/nonexistent/landing")
    assert app.wait(30) == 2
    assert "--from /nonexistent/landing: no such directory" in app.output and "Traceback" not in app.output


def test_run_py_load_with_a_bad_where_is_a_usage_error_before_kafka_is_touched(broker, topic, landing, tmp_path):
    app = RunPy("load", "--from", str(landing), "--where", "chanel = 'mobile'", "--available-now",
                "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, "--data-dir", str(tmp_path / "d"))
    assert app.wait(180) == 2, app.output
    assert "error: --where \"chanel = 'mobile'\"" in app.output
    assert "Did you mean" in app.output and "Traceback" not in app.output
    assert "Kafka ready" not in app.output


def test_run_py_load_sends_the_sample_day_then_picks_up_new_files_and_stops_on_sigterm(broker, topic, landing,
                                                                                      tmp_path):
    for sample in SAMPLE_DAY.iterdir():
        shutil.copy(sample, landing / sample.name)
    args = ("load", "--from", str(landing), "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic,
            "--data-dir", str(tmp_path / "data"))
    since_ms = int(time.time() * 1000)
    app = RunPy(*args, "--available-now")
    assert app.wait(300) == 0, app.output
    assert "done: 4 files, 364 lines read, 364 records sent" in app.output
    assert "2 lines did not match the trade schema" in app.output and "Traceback" not in app.output
    assert count_since(broker.bootstrap_servers, topic, since_ms) == 364

    watching = RunPy(*args, "--trigger", "1 second")  # restarts on the checkpoint, keeps watching
    try:
        watching.wait_for_line("watching", 180)
        drop_file(landing, "late-capture.jsonl", ITERATIONS[0][1])
        watching.wait_for_line("batch 1: 1 file, 4 lines read, 4 records sent", 120)
        code, took = watching.terminate()
        assert code == 0 and took < 30, watching.output
    finally:
        watching.kill()
    assert "Traceback" not in watching.output
    assert count_since(broker.bootstrap_servers, topic, since_ms) == 364 + 4  # the day was not sent again
