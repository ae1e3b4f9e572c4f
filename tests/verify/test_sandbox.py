"""Sandbox workers: hard timeouts from threads and asyncio, no code execution, recovery."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import baseline, deadline

from studybench.verify import Verdict, Verifier
from studybench.verify.sandbox import SandboxPool, TimedOut

# a long EQ: parsing alone takes far longer than the tiny timeouts used below
SLOW_GOLD = [r"\frac{\rho_i T_i}{\rho_a T_a} = 1 + \frac{4 \gamma}{R_0 P_a} + \sqrt{\frac{2GM}{r}}\cos(\omega t) + \ln\frac{R_0}{a}"]
SLOW_PRED = [r"1 + \frac{4 \gamma}{R_0 P_a} + \sqrt{\frac{2GM}{r}}\cos(\omega t) + \ln\frac{R_0}{a} = \frac{\rho_i T_i}{\rho_a T_a} + 0"]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(workers=2) as p:
        p.warm()
        yield p


def _limit(pool: SandboxPool, timeout: float, hang: float = 30.0) -> float:
    """``timeout`` plus a margin scaled to a no-op call measured now, below half of a 30 s hang."""
    return deadline(timeout, baseline(lambda: pool.call("ping", (), 30.0)), hang=hang)


def test_pool_timeout_kills_worker(pool: SandboxPool) -> None:
    pid = pool.call("ping", (), 5.0)
    kills = pool.kills
    limit = _limit(pool, 0.5)
    t0 = time.perf_counter()
    with pytest.raises(TimedOut):
        pool.call("sleep", (30,), 0.5)
    assert time.perf_counter() - t0 < limit
    assert pool.kills == kills + 1
    # a fresh worker serves the next call (the timeout only guards against a hang: it covers the worker's start-up)
    assert isinstance(pool.call("ping", (), 120.0), int)
    assert pool.size <= 2
    assert pid > 0


def test_pool_timeout_from_thread(pool: SandboxPool) -> None:
    out: list[object] = []

    def run() -> None:
        try:
            pool.call("sleep", (30,), 0.3)
        except TimedOut:
            out.append("timeout")

    t = threading.Thread(target=run)
    limit = _limit(pool, 0.3)
    t0 = time.perf_counter()
    t.start()
    t.join(30)
    assert out == ["timeout"]
    assert time.perf_counter() - t0 < limit


def test_pool_timeout_from_asyncio_executor(pool: SandboxPool) -> None:
    async def main() -> str:
        loop = asyncio.get_running_loop()

        def job() -> str:
            try:
                pool.call("sleep", (30,), 0.3)
            except TimedOut:
                return "timeout"
            return "finished"

        return await loop.run_in_executor(None, job)

    limit = _limit(pool, 0.3)
    t0 = time.perf_counter()
    assert asyncio.run(main()) == "timeout"
    assert time.perf_counter() - t0 < limit


def test_unknown_task_is_refused(pool: SandboxPool) -> None:
    # the refusal, not its speed: the timeout only guards against a hang (it covers a worker's start-up, which
    # a loaded machine can stretch past 5 s after an earlier test killed one)
    with pytest.raises(RuntimeError, match="unknown task 'os.system'"):
        pool.call("os.system", ("true",), 120.0)


@pytest.fixture(scope="module")
def verifier() -> Iterator[Verifier]:
    with Verifier(workers=2, timeout=5.0) as v:
        v.warm()
        yield v


def test_verifier_timeout_verdict(verifier: Verifier) -> None:
    v = verifier.verify(SLOW_GOLD, SLOW_PRED, "EQ", "", timeout=0.002)
    assert v == Verdict(False, "incorrect: timed out", tuple(SLOW_PRED))
    # the replacement worker verifies normally afterwards (a timeout that covers its start-up on a loaded machine)
    ok = verifier.verify([r"\frac{1}{2}"], ["0.5"], "NV", "", timeout=120.0)
    assert ok.correct


def test_verifier_timeout_from_thread(verifier: Verifier) -> None:
    res: list[Verdict] = []
    t = threading.Thread(target=lambda: res.append(verifier.verify(SLOW_GOLD, SLOW_PRED + ["x"], "EQ", "", timeout=0.002)))
    t.start()
    t.join(10)
    assert res and res[0].reason == "incorrect: timed out"


def test_verifier_timeout_from_asyncio(verifier: Verifier) -> None:
    async def main() -> Verdict:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: verifier.verify(SLOW_GOLD, SLOW_PRED + ["y"], "EQ", "", timeout=0.002)
        )

    assert asyncio.run(main()).reason == "incorrect: timed out"


def test_power_tower_returns_quickly(verifier: Verifier) -> None:
    limit = _limit(verifier.pool, 1.0)
    t0 = time.perf_counter()
    v = verifier.verify([r"5^{5^{5^{5^{5}}}}"], ["3"], "EX", "", timeout=1.0)
    assert time.perf_counter() - t0 < limit
    assert not v.correct


def test_huge_exponents_do_not_hang(verifier: Verifier) -> None:
    limit = _limit(verifier.pool, 5.0 * 3, hang=120.0)  # three items, each at most its 5 s timeout
    t0 = time.perf_counter()
    res = verifier.verify_many(
        [
            ([r"9^{9^{9}}"], [r"9^{9^{9}} + 1"], "EX", ""),
            ([r"10^{10^{10}}"], ["1e400"], "NV", ""),
            (["x"], [r"x^{99999999999999999999}"], "EX", ""),
        ]
    )
    assert time.perf_counter() - t0 < limit
    assert all(isinstance(r, Verdict) for r in res)


CANARY_TEMPLATES = [
    "__import__('os').system('touch {p}')",
    "\\text{{__import__('os').system('touch {p}')}}",
    "exec(\"open('{p}','w').write('x')\")",
    "eval(\"__import__('os').system('touch {p}')\")",
    "lambda: __import__('os').system('touch {p}')",
]


@pytest.mark.parametrize("template", CANARY_TEMPLATES)
@pytest.mark.parametrize("atype", ["NV", "EX", "EQ", "IN", "QL"])
def test_canary_never_executes(verifier: Verifier, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str, atype: str) -> None:
    monkeypatch.chdir(tmp_path)  # a fresh directory: relative payload paths would land here too
    canary = tmp_path / "CANARY"
    payload = template.format(p=canary)
    verifier.verify([payload], ["x = 1"], atype, "")
    verifier.verify(["x = 1"], [payload], atype, "")
    verifier.verify([payload], [payload + " "], atype, "")
    assert not canary.exists() and list(tmp_path.iterdir()) == []


def test_close_is_idempotent() -> None:
    v = Verifier(workers=1)
    assert v.verify([r"x^2"], [r"x \cdot x"], "EX", "").correct
    v.close()
    v.close()
    # a closed verifier still answers (string rules) and never raises
    assert isinstance(v.verify(["a"], ["b"], "EX", ""), Verdict)


def test_timed_out_verdicts_are_not_memoised() -> None:
    with Verifier(workers=1, timeout=5.0) as v:
        v.warm()
        first = v.verify(["x^2-1"], ["(x-1)(x+1)"], "EX", timeout=0.001)
        assert first.reason.startswith("incorrect: timed out")
        again = v.verify(["x^2-1"], ["(x-1)(x+1)"], "EX")
        assert again.correct, again.reason
        # the same through verify_many, and a slow item times out again rather than hitting a memo
        assert v.verify(SLOW_GOLD, SLOW_PRED, "EQ", "", timeout=0.002).reason == "incorrect: timed out"
        assert v.verify_many([(SLOW_GOLD, SLOW_PRED, "EQ", "")])[0].correct


def test_worker_died_verdicts_are_not_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    from studybench.verify.sandbox import WorkerDied

    with Verifier(workers=1, timeout=5.0) as v:
        real_call = v.pool.call
        calls = {"n": 0}

        def dying_call(name: str, args: tuple[object, ...], timeout: float) -> object:
            calls["n"] += 1
            if calls["n"] == 1:
                raise WorkerDied("simulated")
            return real_call(name, args, timeout)

        monkeypatch.setattr(v.pool, "call", dying_call)
        assert v.verify(["x^2"], [r"x \cdot x"], "EX").reason.startswith("incorrect: worker died")
        assert v.verify(["x^2"], [r"x \cdot x"], "EX").correct


# ----------------------------------------------------------------------------- isolation and lifetime

TRAP = """import os
open(os.path.join({marks!r}, "imported-" + __name__ + "-" + str(os.getpid())), "w").close()
raise ImportError("booby trap")
"""


def test_workers_never_import_modules_from_the_working_directory_or_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``secrets.py`` in the working directory (stdlib shadow) and a ``gmpy2.py`` on ``$PYTHONPATH``
    (an optional import of mpmath) are never imported by a worker, which still verifies with the
    parent's own copy of studybench."""
    import studybench

    marks = tmp_path / "marks"
    cwd, hostile = tmp_path / "cwd", tmp_path / "pythonpath"
    for d in (marks, cwd, hostile):
        d.mkdir()
    for d, name in ((cwd, "secrets"), (cwd, "gmpy2"), (cwd, "mpmath"), (hostile, "gmpy2"), (hostile, "secrets")):
        (d / f"{name}.py").write_text(TRAP.format(marks=str(marks)))
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PYTHONPATH", str(hostile))
    with SandboxPool(workers=1) as p:
        p.warm()
        try:
            verdict = p.call("verdict", (["x^2"], [r"x \cdot x"], "EX", ""), 60.0)
        except Exception as e:  # a trap that was imported breaks the worker
            verdict = e
        assert sorted(m.name.split("-")[1] for m in marks.iterdir()) == []
        assert verdict.correct, verdict
        origin = p.call("origin", (), 60.0)
    assert origin["studybench"] == studybench.__file__
    assert str(cwd) not in origin["path"] and "" not in origin["path"] and str(hostile) not in origin["path"]


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's reaper may be slow to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


PARENT = """import sys, threading, time
from studybench.verify.sandbox import SandboxPool
pool = SandboxPool(workers=1)
pool.warm()
pid = pool.call("ping", (), 120)
threading.Thread(target=lambda: pool.call("sleep", (300,), 600), daemon=True).start()
time.sleep(1.0)  # the worker is now busy with the 300 s task
print(pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_busy_worker_dies_with_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    """The parent is killed while its worker runs a 300 s task: the worker is gone soon after (far
    before its task would end), instead of running on as an orphan."""
    import studybench

    env = {**os.environ, "PYTHONPATH": str(Path(studybench.__file__).parent.parent)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    worker = 0
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"parent failed to start a worker: {line!r}"
        worker = int(line)
        assert _alive(worker)
        parent.send_signal(sig)
        parent.wait(60)
        t0 = time.monotonic()
        while _alive(worker) and time.monotonic() - t0 < 30.0:  # generous; the task would run 300 s
            time.sleep(0.1)
        assert not _alive(worker), f"worker {worker} outlived its parent by 30 s"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if worker and _alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_a_worker_started_from_a_finished_thread_keeps_serving() -> None:
    """Workers die with the parent *process*, not with the thread that happened to start them (the
    kernel's parent-death signal follows the starting thread)."""
    with SandboxPool(workers=1) as p:
        pids: list[int] = []
        t = threading.Thread(target=lambda: pids.append(p.call("ping", (), 120.0)))
        t.start()
        t.join()
        assert pids, "the thread's call failed"
        time.sleep(0.5)  # a worker killed by the thread's exit would be dead by now
        assert _alive(pids[0])
        assert p.call("ping", (), 60.0) == pids[0]
