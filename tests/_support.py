"""Helpers shared by the tests: optional extras that must not skip in CI, and time bounds that hold on a
loaded machine.

**Extras.** :func:`require_extra` skips a test whose optional extra is not installed, unless
``$STUDYBENCH_REQUIRE_EXTRAS`` names that extra (a comma list, or ``all``): then the missing module is an
error. CI installs ``.[dev,audit]`` and sets ``STUDYBENCH_REQUIRE_EXTRAS=audit``, so the audit tests can
never skip there silently. Likewise :func:`require_data_file` fails instead of skipping under
``STUDYBENCH_REQUIRE_DATA=1``.

**Mini test sets.** :func:`sub` and :func:`parent` build test-set records with every field a loader
needs (override any of them); :func:`numbered_set` is the usual synthetic set (``n`` parents with 1-3
numeric sub-problems each); :func:`write_set` writes one as JSON. The ``make_set`` fixture
(``tests/conftest.py``) writes one into the test's ``tmp_path``.

**Time.** Properties, not stopwatches. :func:`deadline` bounds a call that must stop at its timeout by
that timeout plus a generous margin (at least 5 s, more when a no-op baseline measured in the same test is
slow: a loaded machine widens it), and never by more than half of what a hang would take: the bound tells
"stopped at its timeout" from "ran on", not fast from slow. :func:`assert_linear` compares the CPU time of
an input against one ``factor`` times larger in the same test: linear work grows about ``factor``-fold,
quadratic work ``factor**2``-fold. It counts the calling thread's CPU time (:func:`time.thread_time`), which
other processes on a loaded machine do not inflate, where wall-clock samples of a few milliseconds did.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REQUIRE_EXTRAS_ENV = "STUDYBENCH_REQUIRE_EXTRAS"

TESTS = Path(__file__).resolve().parent
"""The ``tests/`` directory (test files sit one level below it, in directories that mirror the package)."""
REPO = TESTS.parent
"""The repository root (``src/``, ``README.md``, ``pyproject.toml``)."""
FIXTURES = TESTS / "fixtures"
"""Checked-in fixtures (``run_v010``: a run directory written by studybench 0.1.0)."""
SHARED_DATA = REPO.parent / "shared" / "data"
"""The shared real data beside the checkout (``../shared/data``)."""


def required_extras() -> set[str]:
    """The extras ``$STUDYBENCH_REQUIRE_EXTRAS`` declares installed."""
    return {x.strip() for x in os.environ.get(REQUIRE_EXTRAS_ENV, "").split(",") if x.strip()}


def require_extra(extra: str, *modules: str, module_level: bool = False) -> None:
    """Skip when an extra's modules are missing; fail when the environment says the extra is installed.

    Args:
        extra: the extra's name in pyproject.toml (``audit``, ``bench``, ...).
        modules: the importable modules the test needs.
        module_level: called at a test module's top level.
    """
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    msg = f"the '{extra}' extra is not installed (missing {', '.join(missing)}; pip install 'studybench[{extra}]')"
    need = required_extras()
    if extra in need or "all" in need:
        pytest.fail(f"{msg}, but ${REQUIRE_EXTRAS_ENV} says it is", pytrace=False)
    pytest.skip(msg, allow_module_level=module_level)


def require_data_file(path: Path, what: str) -> None:
    """Skip when a real-data file is absent; fail under ``STUDYBENCH_REQUIRE_DATA=1``."""
    if path.is_file():
        return
    if os.environ.get("STUDYBENCH_REQUIRE_DATA") == "1":
        pytest.fail(f"{what} not found at {path} (STUDYBENCH_REQUIRE_DATA=1)", pytrace=False)
    pytest.skip(f"{what} not found at {path}")


def timed(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def baseline(fn: Callable[[], object], repeats: int = 3) -> float:
    """Median wall-clock seconds of a no-op of the same kind (the machine's current speed)."""
    return statistics.median(timed(fn) for _ in range(repeats))


def deadline(timeout: float, base: float, *, hang: float) -> float:
    """The most a call with ``timeout`` may take on this machine now.

    Args:
        timeout: the call's own timeout, seconds.
        base: a no-op baseline measured in the same test (:func:`baseline`).
        hang: what the call would take if its timeout did not work; the bound stays below half of it.

    Returns:
        ``timeout + max(5.0, 50 * base)``, capped at ``hang / 2``.
    """
    return min(timeout + max(5.0, 50.0 * base), hang / 2)


def cpu_timed(fn: Callable[[], object]) -> float:
    """CPU seconds the calling thread spent in one call (not inflated by other processes' load)."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def assert_linear(run: Callable[[int], object], n: int, factor: int = 8, slack: float = 3.0) -> None:
    """Assert that ``run(n * factor)`` takes at most ``slack * factor`` times ``run(n)`` (plus 50 ms), in CPU time.

    Linear work passes with room to spare; work quadratic in ``n`` takes about ``factor**2`` times as
    long and fails (with ``factor=8`` and ``slack=3``: 24x allowed, 64x for quadratic). Each size is
    run three times and the cheapest run counts, so one cache miss or collection does not decide. The
    calling thread's CPU time is counted, not the wall clock: waiting for a core on a loaded machine
    does not count, the work does.
    """
    small = min(cpu_timed(lambda: run(n)) for _ in range(3))
    large = min(cpu_timed(lambda: run(n * factor)) for _ in range(3))
    assert large <= slack * factor * small + 0.05, (
        f"n={n}: {small:.4f}s, n={n * factor}: {large:.4f}s CPU (ratio {large / max(small, 1e-9):.1f}, "
        f"linear would be ~{factor})"
    )


# ----------------------------------------------------------------------------- mini test sets


def sub(pid: str, answer: str = "\\boxed{1}", answer_type: str = "NV", *, problem: str = "q",
        type_sequence: str = "", **extra: Any) -> dict[str, Any]:
    """One sub-problem record (the fields in the order the real files have them)."""
    return {"problem_id": pid, "problem": problem, "answer": answer, "answer_type": answer_type,
            "type_sequence": type_sequence, **extra}


def parent(spid: str, subs: list[dict[str, Any]] | None = None, *, source: str = "S", year: str = "",
           problem_type: str = "Mechanics", problem: str = "q", answer: str = "", answer_type: str = "",
           type_sequence: str = "", **extra: Any) -> dict[str, Any]:
    """One parent record: a multi-part parent with ``subs``, or a single question (give ``answer``)."""
    return {"source": source, "year": year, "source_problem_id": spid, "problem_type": problem_type,
            "problem": problem, "answer": answer, "answer_type": answer_type, "type_sequence": type_sequence,
            "sub_problems": list(subs or []), **extra}


def numbered_set(n: int = 6) -> list[dict[str, Any]]:
    """``n`` synthetic parents ``P0..P{n-1}``: parent ``i`` has ``1 + i % 3`` numeric sub-problems, gold ``i + j``."""
    return [parent(f"P{i}", [sub(f"P{i}({chr(97 + j)})", f"\\boxed{{{i + j}}}", problem=f"item-{i}-{j}: compute.")
                             for j in range(1 + i % 3)],
                   source="Synthetic", year="2024", problem=f"Stem {i}.")
            for i in range(n)]


def write_set(path: Path, n: int | list[dict[str, Any]] = 6) -> Path:
    """Write a test set (``numbered_set(n)``, or the given parent records) as JSON to ``path``; return ``path``."""
    path.write_text(json.dumps(numbered_set(n) if isinstance(n, int) else n))
    return path


# ----------------------------------------------------------------------------- processes


def count_lines(p: Path) -> int:
    """Complete lines in ``p`` so far (0 while it does not exist)."""
    try:
        return p.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for(cond: Callable[[], object], proc: subprocess.Popen[Any], timeout: float = 60) -> None:
    """Poll ``cond`` until true; fail when ``proc`` ends first or after ``timeout`` seconds (a hang, not a bound)."""
    t0 = time.monotonic()
    while not cond():
        assert proc.poll() is None, f"the run ended first: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() - t0 < timeout, "timed out waiting for the run"
        time.sleep(0.01)


# ----------------------------------------------------------------------------- corpus fragments

FRAGMENT_TEXTS = {
    "A/ch1/0000": ("A", "Newton's second law: the net force equals mass times acceleration, F = ma."),
    "A/ch1/0001": ("A", "Kinetic energy is one half of mass times speed squared; the work-energy theorem."),
    "B/ch1/0000": ("B", "Gauss's law relates the electric flux through a closed surface to the enclosed charge."),
    "B/ch1/0001": ("B", "Forces on a charge in a magnetic field: the Lorentz force, F = qv x B; Newton's law again."),
    "B/ch2/0000": ("B", "Entropy and the second law of thermodynamics: heat flows from hot to cold."),
}
"""Five short fragments from two books (``id -> (book, text)``): the retrieval tests' corpus."""


def write_fragments(work: Path, texts: dict[str, tuple[str, str]] = FRAGMENT_TEXTS) -> list[dict]:
    """Write ``fragments.jsonl`` (one exposition fragment per text) into ``work``; return the rows."""
    work.mkdir(parents=True, exist_ok=True)
    rows = [{"id": k, "book": b, "chapter": k.split("/")[1], "kind": "exposition", "section": [], "text": t}
            for k, (b, t) in texts.items()]
    (work / "fragments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows
