"""A hung endpoint is told from a slow one by a liveness probe (issue 24 item 6).

A server that accepts connections and never answers used to keep ``eval`` waiting for the request
timeout (600 s by default, retried). While requests are in flight, the server's model list is now
probed; when the probes too get no answer for ``--liveness-timeout`` seconds the run stops as for a
dead endpoint. A slow server that answers its model list is never cut. The timeouts of these tests
are configured far above what they allow the run (``request_timeout`` 600 s, guards of 120-300 s):
a run that waited for its requests' timeout fails them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _support import count_lines, wait_for, write_set

from studybench.models import ChatRequest, EndpointHealth, LivenessCheck
from studybench.models.openai_backend import OpenAIBackend
from studybench.testing import start_stub_server

REQUEST_TIMEOUT = 600.0  # far above every guard below
GUARD_S = 120.0


def _request(i: int) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": f"question {i}"}], i, None, 0)


async def _complete_all(backend: OpenAIBackend, n: int) -> list:
    try:
        return await asyncio.wait_for(asyncio.gather(*(backend.complete(_request(i)) for i in range(n))), GUARD_S)
    finally:
        await backend.aclose()


# ----------------------------------------------------------------------------- the rule, by the clock


def test_the_liveness_rule_counts_probe_silence_not_request_time() -> None:
    h = EndpointHealth()
    check = LivenessCheck(timeout=20.0)
    assert check.interval == 5.0
    t0 = h.last_answer
    assert not check.due(h, t0 + 100)  # nothing in flight: never probe
    h._pending[1] = t0  # one request sent at t0, unanswered
    assert not check.due(h, t0 + 4) and check.due(h, t0 + 6)
    # a probe answered at any time keeps the server alive, however long the request takes
    check.answered()
    assert check.failing_since is None
    # probes sent at t0+6 and t0+11 get no answer: hung only once 20 s have passed since the first
    assert not check.unanswered(t0 + 6, h, now=t0 + 11)
    assert not check.unanswered(t0 + 11, h, now=t0 + 25.9)
    assert check.unanswered(t0 + 26, h, now=t0 + 26.1)
    # one probe unanswered for the whole timeout is enough
    assert LivenessCheck(timeout=20.0).unanswered(t0 + 6, h, now=t0 + 26)
    # an answer to a request after the probe was sent: alive, and the count starts again
    check2 = LivenessCheck(timeout=20.0)
    assert not check2.unanswered(t0 + 6, h, now=t0 + 7)
    h.answered()
    assert not check2.unanswered(h.last_answer - 1, h, now=h.last_answer + 100)
    assert check2.failing_since is None


# ----------------------------------------------------------------------------- the backend


def test_a_hung_server_ends_every_request_in_flight_long_before_their_timeout() -> None:
    with start_stub_server() as srv:
        srv.hang_all()  # accepts connections; answers neither completions nor its model list
        backend = OpenAIBackend("stub", srv.base_url, request_timeout=REQUEST_TIMEOUT, max_retries=6, liveness_timeout=1.0)
        results = asyncio.run(_complete_all(backend, 4))
        assert srv.count == 4  # each request sent once: a hung server is not retried
    for r in results:
        assert r.attempts == 1 and r.completion == ""
        assert r.error.startswith("timeout after 1 attempt (the endpoint is hung: "), r.error
        assert "liveness probe (GET /models: ReadTimeout)" in r.error
    assert backend.health.hung is not None


def test_a_slow_server_that_answers_its_model_list_is_never_cut() -> None:
    with start_stub_server(latency=3.0) as srv:  # completions take 12x the liveness timeout
        backend = OpenAIBackend("stub", srv.base_url, request_timeout=REQUEST_TIMEOUT, liveness_timeout=0.25)
        results = asyncio.run(_complete_all(backend, 3))
        probes = srv.stats()["model_lists"]
    assert [r.error for r in results] == [None] * 3
    assert all(r.completion and r.attempts == 1 for r in results)
    assert probes >= 3  # the server was probed while it worked, and answered
    assert backend.health.hung is None


def test_probing_can_be_turned_off() -> None:
    with start_stub_server(latency=1.0) as srv:
        backend = OpenAIBackend("stub", srv.base_url, liveness_timeout=0)
        results = asyncio.run(_complete_all(backend, 2))
        assert srv.stats()["model_lists"] == 0
    assert [r.error for r in results] == [None, None]
    with pytest.raises(ValueError, match="liveness_timeout"):
        OpenAIBackend("stub", "http://127.0.0.1:9/v1", liveness_timeout=-1)


def test_the_llm_judge_shares_the_probe() -> None:
    from studybench.llm_judge import LLMJudge, LLMJudgeInputs

    with start_stub_server(model="stub-judge") as srv:
        srv.hang_all()
        judge = LLMJudge("stub-judge", srv.base_url, request_timeout=REQUEST_TIMEOUT, max_retries=6)
        judge.backend.liveness_timeout = 1.0
        inputs = LLMJudgeInputs("p", "s", "NV\n1", "x", "1")

        async def one():
            try:
                return await asyncio.wait_for(judge.judge(inputs), GUARD_S)
            finally:
                await judge.aclose()

        verdict = asyncio.run(one())
    assert verdict.verdict == "error" and "the endpoint is hung" in (verdict.error or "")


# ----------------------------------------------------------------------------- eval, real processes


def _cmd(data: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "stub-model", "--base-url",
            base_url, "-k", "2", "--seeds", "1", "--out", str(out), "--concurrency", "2", "--verify-workers", "1",
            "--request-timeout", str(REQUEST_TIMEOUT), "--max-retries", "6", *extra]


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_eval_stops_on_a_hung_endpoint_keeps_what_is_done_and_resumes(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 8)
    out = tmp_path / "run"
    turns = sum(1 + i % 3 for i in range(8)) * 2
    with start_stub_server("Work.\nFinal Answer: \\boxed{1}", subprocess=True, latency=0.2) as server:
        proc = subprocess.Popen(_cmd(data, out, server.base_url, "--liveness-timeout", "2"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: count_lines(out / "generations.jsonl") >= 3, proc)
            server.hang_all()  # the server is stuck: connections accepted, nothing answered
            # far below the 600 s request timeout (and its 6 retries): the run stopped by the probe
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 1, stderr
        flat = " ".join(stderr.split())
        assert "Traceback" not in stderr
        assert "the endpoint stopped answering" in flat and "accepts connections but answers nothing" in flat, flat
        assert "liveness probe (GET /models: ReadTimeout)" in flat
        assert "re-run the same command to resume" in flat
        rows = _rows(out)
        assert rows and not [r for r in rows if r["error"]]  # the hung turns were not recorded as failed
        rep = json.loads((out / "report.json").read_text())
        assert rep["complete"] is False and rep["not_generated"] == turns - len(rows)
        server.hang_all(False)
        again = subprocess.run(_cmd(data, out, server.base_url), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["complete"] is True and rep["not_generated"] == 0
    assert len({(r["parent"], r["sub_id"], r["attempt"]) for r in _rows(out)}) == turns
