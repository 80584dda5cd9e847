"""A small filesystem that fills up: a tmpfs mounted for one test (root only; skipped where
mounting is not allowed)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def small_filesystem(mount: Path, size: str) -> Iterator[Path]:
    mount.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path) -> Path:
    """Fill the filesystem with one file; delete it to give the space back."""
    filler = disk / "filler"
    try:
        with open(filler, "wb", buffering=0) as file:
            while True:
                file.write(b"\0" * 65536)
    except OSError:
        pass  # full
    return filler
