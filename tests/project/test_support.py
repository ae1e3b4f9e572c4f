"""The test helpers can fail: the linear-time check refuses quadratic work, deadlines scale with the
machine and stay below a hang, a required extra that is missing is an error."""

from __future__ import annotations

import pytest
from _support import assert_linear, deadline, require_extra


def _linear(n: int) -> int:
    return sum(range(n * 200))


def _quadratic(n: int) -> int:
    return sum(i ^ j for i in range(n) for j in range(n))


def test_linear_work_passes_and_quadratic_work_fails() -> None:
    assert_linear(_linear, 2_000)
    with pytest.raises(AssertionError, match="ratio"):
        assert_linear(_quadratic, 250)  # ~60k steps against ~4M: far past the 24x allowed


def test_linear_counts_cpu_time_not_waiting() -> None:
    # a call that only waits (sleeps) uses no CPU: a wall-clock check would see 8x the wait, this one nothing
    import time

    assert_linear(lambda n: time.sleep(0.002 * n * n), 1)  # quadratic waiting, no work: passes


def test_deadline_scales_with_the_baseline_and_stays_below_a_hang() -> None:
    assert deadline(1.0, 0.001, hang=60.0) == 6.0  # an idle machine: timeout + 5 s
    assert deadline(1.0, 0.2, hang=60.0) == 11.0  # a loaded one: 50 x its no-op time
    assert deadline(1.0, 5.0, hang=8.0) == 4.0  # never half a hang or more


def test_a_missing_extra_skips_unless_it_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STUDYBENCH_REQUIRE_EXTRAS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        require_extra("audit", "no_such_module_studybench")
    monkeypatch.setenv("STUDYBENCH_REQUIRE_EXTRAS", "dev,audit")
    with pytest.raises(pytest.fail.Exception, match="says it is"):
        require_extra("audit", "no_such_module_studybench")
    require_extra("audit", "json")  # present: nothing happens
