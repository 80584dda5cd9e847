"""One app per data dir: the lock, and what a second app is told."""

import os

import pytest

from streaming.config import LOCK_FILE
from streaming.run.instance import AlreadyRunning, InstanceLock


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_ports(tmp_path):
    first = InstanceLock(tmp_path / LOCK_FILE)
    first.acquire({"dashboard": "http://127.0.0.1:8050", "broker": "127.0.0.1:9092"})
    try:
        with pytest.raises(AlreadyRunning) as refused:
            InstanceLock(tmp_path / LOCK_FILE).acquire({"dashboard": "http://127.0.0.1:8051", "broker": None})
        message = str(refused.value)
        assert f"PID {os.getpid()}" in message and "http://127.0.0.1:8050" in message and "127.0.0.1:9092" in message
        assert "--data-dir" in message
    finally:
        first.release()


def test_the_data_dir_is_free_again_once_released(tmp_path):
    first = InstanceLock(tmp_path / LOCK_FILE)
    first.acquire({})
    first.release()
    second = InstanceLock(tmp_path / LOCK_FILE)
    second.acquire({"dashboard": None})
    second.release()


def test_another_data_dir_is_another_lock(tmp_path):
    one, other = InstanceLock(tmp_path / "a" / LOCK_FILE), InstanceLock(tmp_path / "b" / LOCK_FILE)
    one.acquire({})
    other.acquire({})
    one.release()
    other.release()
