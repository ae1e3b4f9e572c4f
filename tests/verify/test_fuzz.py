"""Fuzzing the verifier with hypothesis (issue 3, safety and speed).

Random and adversarial LaTeX (:mod:`studybench.testing.fuzz`) in every field: no exception escapes,
no call outlives its timeout by more than a margin scaled to a no-op verification measured in the same
test (``_support.deadline``; also from many threads sharing two workers, and from asyncio executors),
the canary payloads never execute (each test has its own fresh canary directory, checked empty
afterwards), and memory stays bounded. ``bench/verify_fuzz.py`` runs the same strategies at a larger
size and reports the times themselves.
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
from _support import baseline, deadline, timed
from hypothesis import HealthCheck, given, settings

from studybench.testing.fuzz import CANARY_NAME, canary_payloads, fuzz_item
from studybench.verify import Verdict, Verifier, verify_response
from studybench.verify.sandbox import SandboxPool, TimedOut

TIMEOUT = 1.0
HANG = 60.0  # what a verification without a working timeout takes at least on the slow inputs here


def _fresh_canary() -> Path:
    """A canary path in a new empty directory (one per test: results do not depend on test order)."""
    return Path(tempfile.mkdtemp(prefix="studybench-fuzz-")) / CANARY_NAME


def _untouched(canary: Path) -> None:
    assert not canary.exists() and os.listdir(canary.parent) == [], f"a payload ran: {os.listdir(canary.parent)}"


_NOOP = iter(range(10**9))


def _limit(verifier: Verifier, hang: float = HANG) -> float:
    """The most a call with TIMEOUT may take now: TIMEOUT plus a margin scaled to a no-op verification
    that reaches a worker (a fresh key each time, so no memo answers it), below ``hang / 2``."""
    base = baseline(lambda: verifier.verify([f"x + {next(_NOOP)}"], [f"{next(_NOOP)} + x"], "EX", ""))
    return deadline(TIMEOUT, base, hang=hang)


CANARY_VERIFY = _fresh_canary()
CANARY_RESPONSE = _fresh_canary()
CANARY_MB = _fresh_canary()


@pytest.fixture(scope="module")
def verifier() -> Iterator[Verifier]:
    from studybench.verify.verifier import default_verifier

    default_verifier().warm()  # verify_response uses the shared default verifier: boot it first
    with Verifier(workers=2, timeout=TIMEOUT) as v:
        v.warm()
        yield v


@pytest.fixture
def limit(verifier: Verifier) -> float:
    return _limit(verifier)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(fuzz_item(str(CANARY_VERIFY)))
def test_fuzz_verify(verifier: Verifier, limit: float, item: tuple) -> None:
    gold, pred, at, ts, unit = item
    out: list[Verdict] = []
    elapsed = timed(lambda: out.append(verifier.verify(gold, pred, at, ts, gold_unit=unit)))
    v = out[0]
    assert isinstance(v, Verdict) and v.reason.split(":")[0] in ("correct", "incorrect")
    assert elapsed <= limit, (elapsed, limit, item)
    _untouched(CANARY_VERIFY)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(fuzz_item(str(CANARY_RESPONSE), max_depth=4))
def test_fuzz_verify_response(verifier: Verifier, limit: float, item: tuple) -> None:
    gold, pred, at, ts, unit = item
    response = "<think>" + " ".join(pred) + "</think> Final Answer: " + ", ".join(f"\\boxed{{{p}}}" for p in pred)
    out: list[Verdict] = []
    elapsed = timed(lambda: out.append(verify_response("".join(f"\\boxed{{{g}}}" for g in gold), response, at, ts,
                                                       gold_unit=unit, timeout=TIMEOUT)))
    assert elapsed <= limit, (elapsed, limit)
    assert isinstance(out[0], Verdict)
    _untouched(CANARY_RESPONSE)


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
        canary_payloads(str(CANARY_MB))[0] * 20_000,
    ],
    ids=["letters", "braces", "fracs", "tower", "digits", "factorials", "roots", "ors", "canaries"],
)
def test_megabyte_strings_in_every_field(verifier: Verifier, limit: float, text: str) -> None:
    for gold, pred, at, ts, unit in [
        ([text], ["1"], "NV", "", None),
        (["1"], [text], "EX", "", None),
        (["x = 1"], [text, text], "EQ", "", text),
        (["1", "x"], [text], "TUP", text, None),
        (["1"], ["1"], text, "", None),
    ]:
        out: list[Verdict] = []
        elapsed = timed(lambda: out.append(verifier.verify(gold, pred, at, ts, gold_unit=unit)))  # noqa: B023
        assert isinstance(out[0], Verdict)
        assert elapsed <= limit, (elapsed, limit)
    _untouched(CANARY_MB)


def test_pool_deadline_includes_waiting_for_a_worker() -> None:
    """Sixteen threads, two workers, tasks longer than the timeout: every call returns by its
    deadline whether it ran or waited in the queue."""
    with SandboxPool(2) as pool:
        pool.warm()
        # without the deadline covering the queue, the last of 16 calls on 2 workers waits ~8 timeouts
        limit = deadline(TIMEOUT, baseline(lambda: pool.call("ping", (), 30.0)), hang=8 * TIMEOUT)
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
        assert max(worst) <= limit, (worst, limit)


_SLOW = [
    ([r"\frac{(a+b)^{40}}{(a-b)^{39}}"], [r"(a+b)\left(\frac{a+b}{a-b}\right)^{39}"], "EX", ""),
    ([r"\sin^{2}x + \cos^{2}x"], [r"1"], "EX", ""),
    ([r"9^{9^{9}}"], [r"9^{9^{9}} + 1"], "EX", ""),
    ([r"x = 1, y = 2, z = 3, u = 4, w = 5, q = 6"], [r"q = 6, w = 5, u = 4, z = 3, y = 2, x = 1"], "EQ", ""),
]


def test_many_threads_share_two_workers(verifier: Verifier) -> None:
    limit = _limit(verifier, hang=12 * TIMEOUT)  # 24 calls queued on 2 workers: up to 12 timeouts without the deadline
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
    assert max(worst) <= limit, (worst, limit)


def test_asyncio_executor_calls_respect_the_timeout(verifier: Verifier) -> None:
    # 12 calls queue on 2 workers: without a per-call deadline the last would wait for 6 timeouts (6 s);
    # with it each takes about TIMEOUT. Half the no-deadline time is the widest bound that still tells
    # them apart (a loaded CI machine took 2.15 s under the tighter baseline bound).
    limit = 6 * TIMEOUT / 2
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
    assert max(times) <= limit, (times, limit)


def test_memory_stays_bounded(verifier: Verifier) -> None:
    """The parent's peak memory does not grow with hostile input (the workers carry an address
    space limit and are killed on overrun)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for k in range(30):
        verifier.verify([r"\frac{(x+1)^{" + str(400 + k) + "}}{x}"], [r"(x+1)^{" + str(500 + k) + "}"], "EX", "")
        verifier.verify(["1"], ["{" * 500_000 + str(k)], "NV", "")
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 300_000, grown_kb  # ru_maxrss is in KiB on Linux


def test_canary_directories_untouched() -> None:
    for canary in (CANARY_VERIFY, CANARY_RESPONSE, CANARY_MB):
        _untouched(canary)
