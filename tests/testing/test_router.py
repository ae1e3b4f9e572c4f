"""Many replicas behind the vLLM project's router (``vllm-router``, the ``router`` extra).

Three stub servers (each its own process, replying with 0, 0.05 and 0.2 s of latency, every reply
correct) stand behind a real ``vllm-router`` on loopback; an eval runs through the router's one
base URL, and the slowest replica is SIGKILLed once a third of the turns are done (from the run's
own progress callback, so the kill always falls mid-run, whatever the machine's speed). The run must
still finish with every answer right (Par@k = 100, no failed turn) and every replica must have
answered some of it, under round robin and under the least-loaded policy (``power_of_two``: of two
workers drawn at random, the one with fewer requests in flight). A third run turns the router's own
retries off (``--disable-retries``), so the dead replica's failures reach the harness as HTTP 5xx
and the harness's retries (not the router's) must save those turns.

Router flags that matter here (and for a real deployment of short-lived replicas): the workers must
answer ``GET /health`` (vLLM does; the stub does too) before the router takes traffic
(``--worker-startup-check-interval`` seconds between checks, 30 by default); a dead replica is
dropped after ``--health-failure-threshold`` failed checks ``--health-check-interval-secs`` apart
(60 s by default), and until then the router's own retries (``--retry-max-retries``) and circuit
breaker (``--cb-failure-threshold``) send its requests elsewhere; the harness's retries cover what
still comes back as HTTP 5xx. ``--prometheus-port`` is given a free port because the router always
binds one (29000 by default), which two routers on one machine would fight over.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support import parent, require_extra, required_extras, sub, write_set

require_extra("router", "vllm_router", module_level=True)

from studybench.evaluate import EndpointStoppedError, EvalSpec, run_eval  # noqa: E402
from studybench.testing import Script, StubServer, start_stub_server  # noqa: E402
from studybench.testing.router import RouterStartError, start_vllm_router  # noqa: E402

N_PARENTS = 12
K = 3
LATENCIES = (0.0, 0.05, 0.2)
CONCURRENCY = 6
VICTIM = 2  # the slowest replica: it nearly always has requests in flight when it dies


def _router_runs() -> str | None:
    """Why the router's compiled part cannot run here, or ``None``."""
    try:
        importlib.import_module("vllm_router.router")  # loads the Rust extension vllm_router_rs
    except Exception as exc:  # ImportError, or an OSError from the shared library
        return f"the vllm-router binary cannot run here ({type(exc).__name__}: {exc})"
    return None


_WHY = _router_runs()
if _WHY is not None:
    if "router" in required_extras() or "all" in required_extras():
        pytest.fail(f"{_WHY}, but $STUDYBENCH_REQUIRE_EXTRAS says the router extra is installed", pytrace=False)
    pytest.skip(_WHY, allow_module_level=True)


def _dataset(path: Path) -> int:
    """A synthetic test set (1-3 sub-problems per parent); returns its number of sub-problems."""
    parents = [parent(f"P{i}", [sub(f"P{i}({chr(97 + j)})", f"\\boxed{{{i + j}}}", problem=f"item-{i}-{j}: compute the quantity.")
                                for j in range(1 + i % 3)],
                      source="Synthetic", year="2024", problem=f"Stem of problem {i}.")
               for i in range(N_PARENTS)]
    write_set(path, parents)
    return sum(len(p["sub_problems"]) for p in parents)


def _script() -> Script:
    """Every sub-problem answered with its gold."""
    rules = [{"match": rf"item-{i}-{j}:", "reply": f"<think>t</think>Work.\nFinal Answer: \\boxed{{{i + j}}}"}
             for i in range(N_PARENTS) for j in range(1 + i % 3)]
    return Script(rules=rules, default="no answer")


@contextlib.contextmanager
def _router(workers: list[StubServer], policy: str, log: Path, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """A ``vllm-router`` process in front of ``workers``; yields its base URL (``.../v1``)."""
    flags = ("--health-check-interval-secs", "1", "--health-failure-threshold", "2", "--retry-max-retries", "5",
             "--retry-initial-backoff-ms", "20", "--retry-max-backoff-ms", "500", *extra)
    try:
        with start_vllm_router([w.port for w in workers], policy, log, flags) as url:
            yield url
    except RouterStartError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.mark.parametrize(
    ("policy", "extra"),
    [("round_robin", ()), ("power_of_two", ()), ("round_robin", ("--disable-retries",))],
    ids=["round_robin", "power_of_two", "round_robin-no_router_retries"],
)
def test_eval_through_vllm_router_survives_a_dead_replica(tmp_path: Path, policy: str, extra: tuple[str, ...]) -> None:
    data = tmp_path / "synthetic.json"
    total = _dataset(data) * K
    with contextlib.ExitStack() as stack:
        stubs = [stack.enter_context(start_stub_server(_script(), subprocess=True, latency=lat)) for lat in LATENCIES]
        base_url = stack.enter_context(_router(stubs, policy, tmp_path / "router.log", extra))
        done = 0
        before_kill: list[int] = []

        def progress(phase: str, advance: int, _total: int | None) -> None:
            nonlocal done
            if phase != "generate" or before_kill:
                return
            done += advance
            if done >= total // 3 and stubs[VICTIM].count > 0:
                before_kill.extend(s.count for s in stubs)  # the victim's count, while it can still say
                stubs[VICTIM].kill()

        spec = EvalSpec(split=str(data), model="stub-model", base_url=base_url, k=K, seeds=[0], concurrency=CONCURRENCY,
                        max_retries=6, request_timeout=30, verify_workers=1)
        result = run_eval(spec, tmp_path / "run", progress=progress)
        survivors = [s.count for i, s in enumerate(stubs) if i != VICTIM]

    assert before_kill, "the victim replica was never killed (it saw no request before the run ended)"
    assert done < total, "the replica was killed after the last turn"
    assert result.failed_turns == 0
    assert result.report is not None and result.report["turns"]["failed"] == 0
    assert result.par_at_k == 100.0 and result.sub_at_k == 100.0
    # every replica answered part of the run; the survivors carried on after the kill
    assert before_kill[VICTIM] > 0
    assert all(n > 0 for n in survivors)
    after_kill = sum(survivors) - sum(n for i, n in enumerate(before_kill) if i != VICTIM)
    assert after_kill >= total - done - CONCURRENCY  # the turns still to do (less those in flight) went to them
    rows = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    if "--disable-retries" in extra:  # the router passes the dead replica's failures on: the harness retried them
        assert any(r.get("attempts", 1) > 1 for r in rows)


def test_a_run_stops_cleanly_when_every_replica_behind_the_router_dies(tmp_path: Path) -> None:
    """The router answers HTTP 500 for a replica it cannot reach, then 503 ("no available workers") once
    its circuits open: the harness counts the 503s as an unreachable endpoint and stops the run (what
    was done is saved, and running again resumes) instead of failing every remaining turn."""
    data = tmp_path / "synthetic.json"
    total = _dataset(data) * K
    with contextlib.ExitStack() as stack:
        stubs = [stack.enter_context(start_stub_server(_script(), subprocess=True, latency=lat)) for lat in LATENCIES[:2]]
        base_url = stack.enter_context(_router(stubs, "round_robin", tmp_path / "router.log"))
        done = 0

        def progress(phase: str, advance: int, _total: int | None) -> None:
            nonlocal done
            done += advance if phase == "generate" else 0
            if done >= total // 3:
                for s in stubs:
                    s.kill()

        spec = EvalSpec(split=str(data), model="stub-model", base_url=base_url, k=K, seeds=[0], concurrency=CONCURRENCY,
                        max_retries=6, request_timeout=30, verify_workers=1)
        with pytest.raises(EndpointStoppedError) as info:
            run_eval(spec, tmp_path / "run", progress=progress)
    report = info.value.result.report
    assert report is not None and report["complete"] is False
    rows = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    answered = {(r["parent"], r["sub_id"], r["attempt"]) for r in rows if not r.get("error")}
    assert total // 3 <= len(answered) < total  # the turns done before the replicas died are kept
