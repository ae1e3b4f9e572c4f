"""Shared pytest fixtures.

``data_dir``: the read-only directory holding the real StudyBench test sets (``application.json``,
``transfer.json``). Taken from ``$STUDYBENCH_DATA`` (the directory itself or one holding a
``studybench/`` folder), else ``<repo>/../shared/data/studybench``. Tests that use it are skipped
when the files are absent.

``verifier``: one rule verifier for the session (per pytest-xdist worker), for tests of verdicts; a test
about timeouts or worker faults makes its own (a module-level ``verifier`` fixture overrides this one).

``make_set``: a factory that writes a mini test set into the test's ``tmp_path`` (``_support.write_set``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import write_set

# verifier workers skip the ANTLR warm-up (about a second per worker start; tests start and kill many workers)
os.environ.setdefault("STUDYBENCH_VERIFY_WARM", "0")
# one LLM-verdict cache per test session (per pytest-xdist worker too), never the user's: a verdict cached by
# one test must not answer another test's judge requests (their request counts are asserted)
if "STUDYBENCH_JUDGE_CACHE" not in os.environ:
    _judge_cache = tempfile.mkdtemp(prefix="studybench-test-judge-cache-")
    os.environ["STUDYBENCH_JUDGE_CACHE"] = _judge_cache
    atexit.register(shutil.rmtree, _judge_cache, ignore_errors=True)
# one ONNX export cache per test session (per worker): `--embedding-backend onnx` exports the real MiniLM once
# there (seconds), never into the user's cache; a test that counts exports passes its own folder
if "STUDYBENCH_ONNX_CACHE" not in os.environ:
    _onnx_cache = tempfile.mkdtemp(prefix="studybench-test-onnx-cache-")
    os.environ["STUDYBENCH_ONNX_CACHE"] = _onnx_cache
    atexit.register(shutil.rmtree, _onnx_cache, ignore_errors=True)


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


@pytest.fixture(scope="session")
def verifier() -> Iterator[Any]:
    """A shared :class:`studybench.verify.Verifier` (2 workers, 60 s timeout: verdicts, not speed, are tested).

    The timeout is generous so that a loaded machine never turns a slow right answer into a timed-out
    wrong one; tests of the timeout itself use their own verifier.
    """
    from studybench.verify import Verifier

    with Verifier(workers=2, timeout=60.0) as v:
        yield v


@pytest.fixture
def make_set(tmp_path: Path) -> Callable[..., Path]:
    """``make_set(parents=6, name="set.json") -> Path``: a test set in ``tmp_path``.

    ``parents`` is a count (``_support.numbered_set``) or a list of parent records (``_support.parent``).
    """

    def make(parents: int | list[dict[str, Any]] = 6, name: str = "set.json") -> Path:
        return write_set(tmp_path / name, parents)

    return make


def pytest_report_header(config: pytest.Config) -> str:
    d = _real_data_dir()
    if d is None:
        return "studybench real data: NOT FOUND (set STUDYBENCH_DATA); tests on the real test sets will be skipped"
    return f"studybench real data: {d}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With STUDYBENCH_REQUIRE_DATA=1 (CI), missing real data is an error, not a skip."""
    if os.environ.get("STUDYBENCH_REQUIRE_DATA") == "1" and _real_data_dir() is None:
        raise pytest.UsageError("STUDYBENCH_REQUIRE_DATA=1 but the real StudyBench data was not found")
