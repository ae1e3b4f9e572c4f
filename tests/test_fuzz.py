"""Fuzzing the verifier with hypothesis (issue 3, safety and speed).

Random and adversarial LaTeX (:mod:`studybench.testing.fuzz`) in every field: no exception escapes,
no call exceeds its timeout + 0.5 s (also from many threads sharing two workers, and from asyncio
executors), the canary payloads never execute, and memory stays bounded. ``bench/verify_fuzz.py``
runs the same strategies at a larger size.
"""

from __future__ import annotations

import asyncio
import os
import resource
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from studybench.testing.fuzz import CANARY_NAME, canary_payloads, fuzz_item
from studybench.verify import Verdict, Verifier, verify_response
from studybench.verify.sandbox import SandboxPool, TimedOut

TIMEOUT = 1.0
SLACK = 0.5
CANARY_DIR = Path(tempfile.mkdtemp(prefix="studybench-fuzz-"))
CANARY = CANARY_DIR / CANARY_NAME


@pytest.fixture(scope="module")
def verifier() -> Iterator[Verifier]:
    from studybench.verify.verifier import default_verifier

    default_verifier().warm()  # verify_response uses the shared default verifier: boot it first
    with Verifier(workers=2, timeout=TIMEOUT) as v:
        v.warm()
        yield v


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(fuzz_item(str(CANARY)))
def test_fuzz_verify(verifier: Verifier, item: tuple) -> None:
    gold, pred, at, ts, unit = item
    t0 = time.perf_counter()
    v = verifier.verify(gold, pred, at, ts, gold_unit=unit)
    elapsed = time.perf_counter() - t0
    assert isinstance(v, Verdict) and v.reason.split(":")[0] in ("correct", "incorrect")
    assert elapsed <= TIMEOUT + SLACK, (elapsed, item)
    assert not CANARY.exists()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(fuzz_item(str(CANARY), max_depth=4))
def test_fuzz_verify_response(verifier: Verifier, item: tuple) -> None:
    gold, pred, at, ts, unit = item
    response = "<think>" + " ".join(pred) + "</think> Final Answer: " + ", ".join(f"\\boxed{{{p}}}" for p in pred)
    t0 = time.perf_counter()
    v = verify_response("".join(f"\\boxed{{{g}}}" for g in gold), response, at, ts, gold_unit=unit, timeout=TIMEOUT)
    assert time.perf_counter() - t0 <= TIMEOUT + SLACK
    assert isinstance(v, Verdict)
    assert not CANARY.exists()


_MB = 1_000_000


@pytest.mark.parametrize(
    "text",
    [
        "x" * _MB,
        "{" * _MB,
        "\\frac{1}{" * 50_000,
        "9^{" * 100_000 + "9" + "}" * 100_000,
        "1" * _MB,
        "!" * _MB,
        "\\sqrt{" * 80_000 + "2" + "}" * 80_000,
        " or ".join(["x"] * 200_000),
        canary_payloads(str(CANARY))[0] * 20_000,
    ],
    ids=["letters", "braces", "fracs", "tower", "digits", "factorials", "roots", "ors", "canaries"],
)
def test_megabyte_strings_in_every_field(verifier: Verifier, text: str) -> None:
    for gold, pred, at, ts, unit in [
        ([text], ["1"], "NV", "", None),
        (["1"], [text], "EX", "", None),
        (["x = 1"], [text, text], "EQ", "", text),
        (["1", "x"], [text], "TUP", text, None),
        (["1"], ["1"], text, "", None),
    ]:
        t0 = time.perf_counter()
        v = verifier.verify(gold, pred, at, ts, gold_unit=unit)
        assert isinstance(v, Verdict)
        assert time.perf_counter() - t0 <= TIMEOUT + SLACK
    assert not CANARY.exists()


def test_pool_deadline_includes_waiting_for_a_worker() -> None:
    """Sixteen threads, two workers, tasks longer than the timeout: every call returns by its
    deadline whether it ran or waited in the queue."""
    with SandboxPool(2) as pool:
        pool.warm()
        worst: list[float] = []
        lock = threading.Lock()

        def one() -> None:
            t0 = time.perf_counter()
            with pytest.raises(TimedOut):
                pool.call("sleep", (5.0,), TIMEOUT)
            with lock:
                worst.append(time.perf_counter() - t0)

        threads = [threading.Thread(target=one) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(worst) == 16
        assert max(worst) <= TIMEOUT + SLACK, worst


_SLOW = [
    ([r"\frac{(a+b)^{40}}{(a-b)^{39}}"], [r"(a+b)\left(\frac{a+b}{a-b}\right)^{39}"], "EX", ""),
    ([r"\sin^{2}x + \cos^{2}x"], [r"1"], "EX", ""),
    ([r"9^{9^{9}}"], [r"9^{9^{9}} + 1"], "EX", ""),
    ([r"x = 1, y = 2, z = 3, u = 4, w = 5, q = 6"], [r"q = 6, w = 5, u = 4, z = 3, y = 2, x = 1"], "EQ", ""),
]


def test_many_threads_share_two_workers(verifier: Verifier) -> None:
    worst: list[float] = []
    lock = threading.Lock()

    def one(k: int) -> None:
        gold, pred, at, ts = _SLOW[k % len(_SLOW)]
        t0 = time.perf_counter()
        v = verifier.verify(gold, pred + [" " * k], at, ts)  # distinct keys: no memo hits
        assert isinstance(v, Verdict)
        with lock:
            worst.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(worst) == 24
    assert max(worst) <= TIMEOUT + SLACK, worst


def test_asyncio_executor_calls_respect_the_timeout(verifier: Verifier) -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()

        async def one(k: int) -> float:
            gold, pred, at, ts = _SLOW[k % len(_SLOW)]
            t0 = time.perf_counter()
            v = await loop.run_in_executor(None, lambda: verifier.verify(gold, pred + ["\\," * (k + 1)], at, ts))
            assert isinstance(v, Verdict)
            return time.perf_counter() - t0

        return list(await asyncio.gather(*(one(k) for k in range(12))))

    times = asyncio.run(main())
    assert max(times) <= TIMEOUT + SLACK, times


def test_memory_stays_bounded(verifier: Verifier) -> None:
    """The parent's peak memory does not grow with hostile input (the workers carry an address
    space limit and are killed on overrun)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for k in range(30):
        verifier.verify([r"\frac{(x+1)^{" + str(400 + k) + "}}{x}"], [r"(x+1)^{" + str(500 + k) + "}"], "EX", "")
        verifier.verify(["1"], ["{" * 500_000 + str(k)], "NV", "")
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 300_000, grown_kb  # ru_maxrss is in KiB on Linux


def test_canary_directory_untouched() -> None:
    assert not CANARY.exists()
    assert os.listdir(CANARY_DIR) == []
