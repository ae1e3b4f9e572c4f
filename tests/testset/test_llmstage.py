"""The LLM plumbing of the build stages (studybench.testset.llmstage) against the stub server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _support import REPO

from studybench.testing import Script, StubServer, start_stub_server
from studybench.testset.llmstage import (
    Asked,
    StageCache,
    StageLLM,
    StageMetaError,
    check_stage_meta,
    open_backend,
    read_rows,
    run_items,
)

pytestmark = pytest.mark.timeout(60)

SRC = str(REPO / "src")


def _llm(srv: StubServer, work: Path | None, **kw: Any) -> StageLLM:
    backend = open_backend("teacher", srv.base_url, max_retries=kw.pop("max_retries", 0), request_timeout=10)
    cache = StageCache.for_stage(work, "test") if work is not None else None
    return StageLLM(backend, cache, **kw)


def _ask(llm: StageLLM, text: str, **kw: Any) -> Asked:
    async def go() -> Asked:
        try:
            return await llm.ask([{"role": "user", "content": text}], **{"temperature": 0.0, "max_tokens": 64, **kw})
        finally:
            await llm.aclose()

    return asyncio.run(go())


def _json(text: str) -> Any:
    value = json.loads(text)  # JSONDecodeError is a ValueError
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def test_cache_hit_and_changed_input_asks_again(tmp_path: Path) -> None:
    with start_stub_server(Script(default='{"ok": 1}')) as srv:
        a = _ask(_llm(srv, tmp_path), "question A", validate=_json)
        b = _ask(_llm(srv, tmp_path), "question A", validate=_json)
        assert a.ok and b.ok and a.parsed == {"ok": 1}
        assert not a.from_cache and b.from_cache
        assert srv.count == 1
        c = _ask(_llm(srv, tmp_path), "question A, changed", validate=_json)
        assert not c.from_cache and srv.count == 2
        d = _ask(_llm(srv, tmp_path), "question A", validate=_json, temperature=0.5)  # other sampling: other key
        assert not d.from_cache and srv.count == 3


def test_request_sampling_reaches_the_server() -> None:
    with start_stub_server(Script(default="x")) as srv:
        _ask(_llm(srv, None), "q", temperature=0.2, max_tokens=123)
        body = srv.requests[0]
        assert body["temperature"] == 0.2 and body["max_tokens"] == 123 and body["model"] == "teacher"


def test_malformed_reply_is_reasked_with_a_correction(tmp_path: Path) -> None:
    with start_stub_server(Script(turns=["this is not json", '{"ok": 2}'])) as srv:
        llm = _llm(srv, tmp_path)
        asked = _ask(llm, "give json", validate=_json)
        assert asked.ok and asked.parsed == {"ok": 2} and asked.attempts == 2
        assert llm.usage["requests"] == 2 and llm.usage["reasked"] == 1 and llm.usage["failures"] == 0
        second = srv.requests[1]["messages"]
        assert second[1] == {"role": "assistant", "content": "this is not json"}
        assert "could not be used" in second[2]["content"]
        # resumed: both replies come from the cache, nothing is asked
        again = _llm(srv, tmp_path)
        assert _ask(again, "give json", validate=_json).parsed == {"ok": 2}
        assert srv.count == 2 and again.usage["cached"] == 2 and again.usage["requests"] == 0


def test_every_reply_malformed_fails_after_attempts() -> None:
    with start_stub_server(Script(default="never json")) as srv:
        llm = _llm(srv, None)
        asked = _ask(llm, "give json", validate=_json, attempts=3)
        assert not asked.ok and asked.parsed is None and asked.attempts == 3
        assert "malformed reply" in (asked.error or "") and srv.count == 3
        assert llm.usage["failures"] == 1


def test_truncated_reply_is_a_failed_attempt() -> None:
    cut = {"content": '{"ok": 3}', "finish_reason": "length"}
    with start_stub_server(Script(turns=[cut, '{"ok": 4}'])) as srv:
        asked = _ask(_llm(srv, None), "q", validate=_json)
        assert asked.ok and asked.parsed == {"ok": 4} and asked.attempts == 2
        assert "cut off" in srv.requests[1]["messages"][-1]["content"]
    with start_stub_server(Script(default=cut)) as srv:
        # even without a validator, and even though the cut text parses, a truncated reply is no answer
        asked = _ask(_llm(srv, None), "q", attempts=2)
        assert not asked.ok and asked.truncated and "token limit" in (asked.error or "")


def test_transport_failure_sets_error_and_is_not_cached(tmp_path: Path) -> None:
    with start_stub_server(Script(default='{"ok": 5}')) as srv:
        srv.fail(500, times=1)
        llm = _llm(srv, tmp_path)
        asked = _ask(llm, "q", validate=_json)
        assert not asked.ok and "HTTP 500" in (asked.error or "") and asked.attempts == 1
        assert llm.usage["failures"] == 1
        assert _ask(_llm(srv, tmp_path), "q", validate=_json).parsed == {"ok": 5}
        assert srv.count == 2


def test_usage_totals(tmp_path: Path) -> None:
    with start_stub_server(Script(default="0123456789" * 8)) as srv:
        llm = _llm(srv, None)

        async def go() -> None:
            await asyncio.gather(*(llm.ask([{"role": "user", "content": f"q{i}" * 40}], temperature=0, max_tokens=99)
                                   for i in range(5)))
            await llm.aclose()

        asyncio.run(go())
        prompt = sum(json.loads(json.dumps(r))["messages"][0]["content"].__len__() for r in srv.requests)
        assert llm.usage["requests"] == 5
        assert llm.usage["completion_tokens"] == 5 * 20  # the stub counts ceil(chars / 4)
        assert llm.usage["prompt_tokens"] >= prompt // 4 > 0


def test_torn_cache_line_is_skipped_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "s.jsonl"
    cache = StageCache(path)
    cache.put("k1", {"text": "a"})
    cache.close()
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"key": "k2", "text": "b"')  # a writer killed mid-line
    again = StageCache(path)
    assert "k1" in again and "k2" not in again
    again.put("k3", {"text": "c"})
    again.close()
    assert [r["key"] for r in read_rows(path)] == ["k1", "k3"]


def test_bounded_concurrency() -> None:
    with start_stub_server(Script(default="x"), latency=0.05) as srv:
        llm = _llm(srv, None, concurrency=3)

        async def go() -> None:
            await asyncio.gather(*(llm.ask([{"role": "user", "content": f"q{i}"}], temperature=0, max_tokens=8)
                                   for i in range(12)))
            await llm.aclose()

        asyncio.run(go())
        assert srv.count == 12 and 1 <= srv.max_concurrent <= 3


def test_run_items_skips_done_and_restarts(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    calls: list[int] = []

    async def work(i: int) -> dict[str, Any]:
        calls.append(i)
        return {"value": i * i}

    summary = asyncio.run(run_items(range(5), str, work, out, concurrency=2))
    assert summary == {"total": 5, "skipped": 0, "done": 5, "left": 0, "budget_stop": None}
    summary = asyncio.run(run_items(range(7), str, work, out, concurrency=2))
    assert summary == {"total": 7, "skipped": 5, "done": 2, "left": 0, "budget_stop": None} and sorted(calls) == [0, 1, 2, 3, 4, 5, 6]
    rows = {r["key"]: r["value"] for r in read_rows(out)}
    assert rows == {str(i): i * i for i in range(7)}
    asyncio.run(run_items(range(2), str, work, out, concurrency=2, restart=True))
    assert sorted(r["key"] for r in read_rows(out)) == ["0", "1"]


def test_run_items_propagates_errors_and_keeps_lines(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"

    async def work(i: int) -> dict[str, Any]:
        if i == 3:
            raise RuntimeError("boom")
        return {"value": i}

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(run_items(range(3, 4), str, work, out, concurrency=1))
    asyncio.run(run_items(range(3), str, work, out, concurrency=1))
    assert len(read_rows(out)) == 3


def test_stage_meta_refuses_changed_settings(tmp_path: Path) -> None:
    check_stage_meta(tmp_path, "decompose", {"teacher": "a", "input": "d1"})
    check_stage_meta(tmp_path, "decompose", {"teacher": "a", "input": "d1"})
    with pytest.raises(StageMetaError, match="changed: input.*--restart"):
        check_stage_meta(tmp_path, "decompose", {"teacher": "a", "input": "d2"})
    check_stage_meta(tmp_path, "decompose", {"teacher": "a", "input": "d2"}, restart=True)


def test_open_backend_needs_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="endpoint is required"):
        open_backend("teacher", None)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert open_backend("teacher", None).describe()["base_url"] == "http://127.0.0.1:9/v1"


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from studybench.testset.llmstage import StageCache, StageLLM, open_backend, run_items

    url, work = sys.argv[1], Path(sys.argv[2])

    async def main():
        llm = StageLLM(open_backend("teacher", url, max_retries=0), StageCache.for_stage(work, "t"), concurrency=2)

        async def one(i):
            asked = await llm.ask([{"role": "user", "content": f"item {i}"}], temperature=0, max_tokens=16)
            return {"text": asked.text, "ok": asked.ok}

        await run_items(range(20), str, one, work / "out.jsonl", concurrency=2)
        await llm.aclose()

    asyncio.run(main())
    """
)


def test_resume_after_sigkill_asks_nothing_twice(tmp_path: Path) -> None:
    """A client killed mid-run: the second run asks only what was neither written nor cached."""
    with start_stub_server(Script(default="reply"), latency=0.15) as srv:
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        child = subprocess.Popen([sys.executable, "-c", _CHILD, srv.base_url, str(tmp_path)], env=env)
        out = tmp_path / "out.jsonl"
        try:
            for _ in range(600):  # up to 60 s on a loaded machine
                if out.exists() and len(read_rows(out)) >= 4:
                    break
                if child.poll() is not None:
                    break
                time.sleep(0.1)
            assert child.poll() is None, "the child finished before it could be killed"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(30)
        done = {r["key"] for r in read_rows(out)}
        cached = len(StageCache.for_stage(tmp_path, "t"))
        assert 4 <= len(done) < 20 and cached >= len(done)
        asked_first = srv.count
        srv.reset_stats()

        async def again() -> dict[str, int]:
            llm = StageLLM(open_backend("teacher", srv.base_url, max_retries=0), StageCache.for_stage(tmp_path, "t"),
                           concurrency=2)

            async def one(i: int) -> dict[str, Any]:
                asked = await llm.ask([{"role": "user", "content": f"item {i}"}], temperature=0, max_tokens=16)
                return {"text": asked.text, "ok": asked.ok}

            summary = await run_items(range(20), str, one, out, concurrency=2)
            await llm.aclose()
            return {**summary, **llm.usage}

        summary = asyncio.run(again())
        asked_again = {r["messages"][0]["content"] for r in srv.requests}
        assert summary["skipped"] == len(done) and summary["done"] == 20 - len(done)
        assert not asked_again & {f"item {k}" for k in done}  # nothing finished is asked again
        assert srv.count == 20 - cached  # nothing cached is asked again either
        assert summary["cached"] == cached - len(done)
        assert asked_first >= cached
        assert sorted(int(r["key"]) for r in read_rows(out)) == list(range(20))
