"""Shared pytest fixtures.

``data_dir``: the read-only directory holding the real StudyBench test sets (``application.json``,
``transfer.json``). Taken from ``$STUDYBENCH_DATA`` (the directory itself or one holding a
``studybench/`` folder), else ``<repo>/../shared/data/studybench``. Tests that use it are skipped
when the files are absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _real_data_dir() -> Path | None:
    candidates: list[Path] = []
    env = os.environ.get("STUDYBENCH_DATA")
    if env:
        candidates += [Path(env), Path(env) / "studybench"]
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data" / "studybench")
    for d in candidates:
        if (d / "application.json").is_file() and (d / "transfer.json").is_file():
            return d
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Directory with the real ``application.json`` and ``transfer.json`` (read-only; never write)."""
    d = _real_data_dir()
    if d is None:
        pytest.skip("real StudyBench data not found (set STUDYBENCH_DATA)")
    return d
