"""Helpers shared by the tests: optional extras that must not skip in CI, and time bounds that hold on a
loaded machine.

**Extras.** :func:`require_extra` skips a test whose optional extra is not installed, unless
``$STUDYBENCH_REQUIRE_EXTRAS`` names that extra (a comma list, or ``all``): then the missing module is an
error. CI installs ``.[dev,audit]`` and sets ``STUDYBENCH_REQUIRE_EXTRAS=audit``, so the audit tests can
never skip there silently. Likewise :func:`require_data_file` fails instead of skipping under
``STUDYBENCH_REQUIRE_DATA=1``.

**Time.** Properties, not stopwatches. :func:`deadline` bounds a call that must stop at its timeout by
that timeout plus a margin scaled to a no-op baseline measured in the same test (so a loaded machine,
which slows the baseline too, widens the margin), and never by more than half of what a hang would
take. :func:`assert_linear` compares the time of an input against one ``factor`` times larger in the
same test: linear work grows about ``factor``-fold, quadratic work ``factor**2``-fold.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REQUIRE_EXTRAS_ENV = "STUDYBENCH_REQUIRE_EXTRAS"


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
        ``timeout + max(1.0, 20 * base)``, capped at ``hang / 2``.
    """
    return min(timeout + max(1.0, 20.0 * base), hang / 2)


def assert_linear(run: Callable[[int], object], n: int, factor: int = 8, slack: float = 3.0) -> None:
    """Assert that ``run(n * factor)`` takes at most ``slack * factor`` times ``run(n)`` (plus 50 ms).

    Linear work passes with room to spare; work quadratic in ``n`` takes about ``factor**2`` times as
    long and fails (with ``factor=8`` and ``slack=3``: 24x allowed, 64x for quadratic). Each size is
    timed three times and the fastest run counts, so one pause of the machine does not decide.
    """
    small = min(timed(lambda: run(n)) for _ in range(3))
    large = min(timed(lambda: run(n * factor)) for _ in range(3))
    assert large <= slack * factor * small + 0.05, (
        f"n={n}: {small:.4f}s, n={n * factor}: {large:.4f}s (ratio {large / max(small, 1e-9):.1f}, "
        f"linear would be ~{factor})"
    )
