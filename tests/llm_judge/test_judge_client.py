"""LLMJudge against the local stub judge: scripted verdicts, malformed replies, 429, slow replies, cache."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from studybench.llm_judge import (
    FINAL_VERDICTS,
    PLACEHOLDERS,
    LLMJudge,
    LLMJudgeInputs,
    LLMJudgeTask,
    LLMJudgeTemplate,
    LLMVerdictCache,
    MalformedReply,
    ParsedVerdict,
    strip_judge_reasoning,
)
from studybench.testing.stub_judge import answers_of, format_verdict, judge_reply_fn
from studybench.testing.stub_server import Reply, start_stub_server


def _inputs(student: str, gold: str = "42") -> LLMJudgeInputs:
    return LLMJudgeInputs("Find x.", "x = 42 by symmetry.", f"Answer type: NV (numerical value)\n{gold}", f"so x = {student}", student)


def _decide(x: dict[str, str]) -> bool:
    return answers_of(x["student_answers"]) == answers_of(x["reference_answers"])


def _judge(srv: Any, cache: LLMVerdictCache | None = None, **kw: Any) -> LLMJudge:
    kw.setdefault("backoff_initial", 0.01)
    kw.setdefault("backoff_max", 0.05)
    return LLMJudge("stub-judge", srv.base_url, cache=cache, **kw)


def _run(judge: LLMJudge, items: list[LLMJudgeInputs]) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return await asyncio.gather(*(judge.judge(x) for x in items))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_scripted_verdicts_and_request_shape() -> None:
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        judge = _judge(srv)
        good, bad = _run(judge, [_inputs("42"), _inputs("41")])
        assert (good.verdict, bad.verdict) == ("TRUE", "FALSE")
        assert good.justification == "Scripted verdict."
        assert srv.count == 2
        body = srv.requests[0]
        assert body["temperature"] == 0.0 and body["model"] == "stub-judge"
        assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
        assert "x = 42 by symmetry." in body["messages"][0]["content"]


def test_malformed_reply_is_retried_with_a_reminder_then_parsed() -> None:
    fn = judge_reply_fn(lambda x: "The student is right. TRUE", on_reminder=lambda x, n: True)
    with start_stub_server(fn, model="stub-judge") as srv:
        (v,) = _run(_judge(srv), [_inputs("42")])
        assert v.verdict == "TRUE" and v.requests == 2
        second = srv.requests[1]["messages"]
        assert [m["role"] for m in second] == ["user", "assistant", "user"]
        assert second[1]["content"] == "The student is right. TRUE"


@pytest.mark.parametrize("parse_retries", [0, 2, 4])
def test_still_malformed_becomes_unjudgeable_after_the_configured_retries(parse_retries: int) -> None:
    with start_stub_server(judge_reply_fn(lambda x: "TRUE (first TRUE anywhere must not count)"), model="stub-judge") as srv:
        (v,) = _run(_judge(srv, parse_retries=parse_retries), [_inputs("42")])
        assert v.verdict == "unjudgeable"
        assert not v.correct
        assert v.requests == parse_retries + 1 == srv.count
        assert "malformed" in (v.error or "")


def test_429_is_retried_and_counted() -> None:
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        srv.rate_limit(retry_after=0.01, times=2)
        (v,) = _run(_judge(srv), [_inputs("42")])
        assert v.verdict == "TRUE"
        assert v.requests == 3 == srv.count


def test_slow_reply_times_out_and_is_retried() -> None:
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        srv.slow(2.0, times=1)
        (v,) = _run(_judge(srv, request_timeout=0.3), [_inputs("41")])
        assert v.verdict == "FALSE" and v.requests == 2


def test_transport_failure_is_an_error_and_is_not_cached(tmp_path: Path) -> None:
    cache = LLMVerdictCache(tmp_path)
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        srv.fail(500, times=3)
        (v,) = _run(_judge(srv, cache=cache, max_retries=2), [_inputs("42")])
        assert v.verdict == "error" and v.verdict not in FINAL_VERDICTS
        assert "HTTP 500" in (v.error or "")
        cache2 = LLMVerdictCache(tmp_path)
        assert len(cache2) == 0
        (w,) = _run(_judge(srv, cache=cache2), [_inputs("42")])
        assert w.verdict == "TRUE" and not w.cached


def test_lone_surrogates_are_sent_cleaned() -> None:
    fn = judge_reply_fn(lambda x: "bad \ud800 reply", on_reminder=lambda x, n: True)
    with start_stub_server(fn, model="stub-judge") as srv:
        (v,) = _run(_judge(srv), [_inputs("4\ud8002")])
        assert v.verdict == "TRUE" and v.requests == 2


def test_refused_key_or_model_aborts(tmp_path: Path) -> None:
    from studybench.llm_judge import LLMJudgeConfigError

    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        srv.fail(401, times=5)
        with pytest.raises(LLMJudgeConfigError, match="HTTP 401"):
            _run(_judge(srv), [_inputs("42")])


def test_refused_inputs_are_unjudgeable_not_retried_forever(tmp_path: Path) -> None:
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        srv.fail(400, times=1)
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "unjudgeable" and "HTTP 400" in (v.error or "")
        assert len(LLMVerdictCache(tmp_path)) == 0  # not a verdict: never cached
        assert not (tmp_path / "verdicts.jsonl").exists() or not (tmp_path / "verdicts.jsonl").read_text()


def test_cache_second_judge_makes_zero_requests(tmp_path: Path) -> None:
    items = [_inputs(str(n)) for n in range(40, 45)]
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        first = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), items)
        assert srv.count == 5
        judge2 = _judge(srv, cache=LLMVerdictCache(tmp_path))
        second = _run(judge2, items)
        assert srv.count == 5  # zero new requests
        assert [v.verdict for v in first] == [v.verdict for v in second]
        assert all(v.cached and v.requests == 0 for v in second)
        assert judge2.stats.cache_hits == 5 and judge2.stats.requests == 0
        # another template or another judge model is another key
        tmpl = LLMJudgeTemplate("Grade.\n" + "\n".join("### " + p + "\n{" + p + "}" for p in PLACEHOLDERS))
        _run(_judge(srv, cache=LLMVerdictCache(tmp_path), template=tmpl), items[:1])
        assert srv.count == 6
        _run(LLMJudge("other-judge", srv.base_url, cache=LLMVerdictCache(tmp_path)), items[:1])
        assert srv.count == 7
        # read_cache=False asks again
        _run(_judge(srv, cache=LLMVerdictCache(tmp_path), read_cache=False), items[:1])
        assert srv.count == 8


def test_unjudgeable_is_never_cached_so_a_fixed_judge_is_asked(tmp_path: Path) -> None:
    with start_stub_server(judge_reply_fn(lambda x: "no format"), model="stub-judge") as srv:
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        n = srv.count
        assert v.verdict == "unjudgeable" and n == 3 and len(LLMVerdictCache(tmp_path)) == 0
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "unjudgeable" and not v.cached and srv.count == 2 * n  # asked again
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:  # the judge, fixed
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "TRUE" and not v.cached and srv.count == 1
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "TRUE" and v.cached and srv.count == 1


def test_unjudgeable_rows_of_older_versions_are_ignored_on_read(tmp_path: Path) -> None:
    import json

    from studybench.llm_judge import cache_key

    tmpl = LLMJudgeTemplate.builtin()
    inputs = _inputs("42")
    key = cache_key("stub-judge", tmpl.digest, inputs.digest)
    row = {"key": key, "judge_model": "stub-judge", "template_digest": tmpl.digest, "inputs_digest": inputs.digest,
           "verdict": "unjudgeable", "error": "malformed reply after 3 tries: no verdict section", "reply": "x"}
    (tmp_path / "verdicts.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert LLMVerdictCache(tmp_path).get(key) is None
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [inputs])
        assert v.verdict == "TRUE" and not v.cached and srv.count == 1


def test_read_cache_false_writes_through(tmp_path: Path) -> None:
    answer = {"v": True}
    with start_stub_server(judge_reply_fn(lambda x: answer["v"]), model="stub-judge") as srv:
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "TRUE"
        answer["v"] = False  # the judge changes its mind
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "TRUE" and v.cached  # read: the cached verdict
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path), read_cache=False), [_inputs("42")])
        assert v.verdict == "FALSE" and not v.cached
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "FALSE" and v.cached and srv.count == 2  # the fresh verdict replaced the old one


def test_reasoning_is_kept_out_of_verdict_and_reply(tmp_path: Path) -> None:
    reply = Reply("<think>Maybe TRUE.</think>\n" + format_verdict(False, "Wrong value."), reasoning="reasoning_content: TRUE TRUE")
    with start_stub_server(judge_reply_fn(lambda x: reply), model="stub-judge") as srv:
        (v,) = _run(_judge(srv, cache=LLMVerdictCache(tmp_path)), [_inputs("42")])
        assert v.verdict == "FALSE" and v.justification == "Wrong value."
        assert "<think>" not in v.reply and "Maybe" not in v.reply
        row = LLMVerdictCache(tmp_path).get(next(iter(LLMVerdictCache(tmp_path)._load())))
        assert "Maybe" not in str(row) and "reasoning_content" not in str(row)


def test_identical_concurrent_inputs_share_one_request() -> None:
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge", latency=0.05) as srv:
        judge = _judge(srv)
        out = _run(judge, [_inputs("42")] * 6)
        assert srv.count == 1
        assert all(v.verdict == "TRUE" for v in out)
        assert judge.stats.shared == 5


def test_concurrency_is_bounded() -> None:
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge", latency=0.05) as srv:
        _run(_judge(srv, concurrency=3), [_inputs(str(n)) for n in range(12)])
        assert srv.count == 12
        assert srv.max_concurrent <= 3


def test_api_key_comes_from_the_environment_and_is_not_described(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-judgesecret123456")
    with start_stub_server(judge_reply_fn(_decide), model="stub-judge") as srv:
        judge = _judge(srv, api_key_env="MY_JUDGE_KEY")
        _run(judge, [_inputs("42")])
        assert srv.headers[0].get("authorization") == "Bearer sk-judgesecret123456"
        assert "judgesecret" not in str(judge.describe())


def _same_unit(reply: str) -> ParsedVerdict:
    lines = strip_judge_reasoning(reply).splitlines()
    if not lines or lines[-1] not in ("SAME", "DIFFERENT"):
        raise MalformedReply("no SAME/DIFFERENT line")
    return ParsedVerdict(lines[-1] == "SAME", " ".join(lines[:-1]))


SAME_UNIT = LLMJudgeTask(
    name="same-unit",
    template="Do {a} and {b} measure the same quantity? Explain, then end with SAME or DIFFERENT.",
    placeholders=("a", "b"),
    parse=_same_unit,
    format_reminder="End your reply with one line: SAME or DIFFERENT.",
)


def test_another_task_gets_the_same_client_template_parser_reminder_and_cache(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        msgs = body["messages"]
        if len(msgs) == 1 and "N m" in msgs[0]["content"]:
            return "<think>SAME?</think>Both are energies"  # no final line: re-asked
        return "Torque and energy share a unit.\nSAME" if "N m" in msgs[0]["content"] else "No.\nDIFFERENT"

    with start_stub_server(reply, model="stub-judge") as srv:
        srv.rate_limit(retry_after=0.01, times=1)
        judge = _judge(srv, cache=LLMVerdictCache(tmp_path), task=SAME_UNIT)
        a, b = _run(judge, [{"a": "N m", "b": "J"}, {"a": "{b}", "b": "kg"}])
        assert (a.verdict, a.justification, b.verdict) == ("TRUE", "Torque and energy share a unit.", "FALSE")
        assert a.requests + b.requests == srv.count == 4  # one 429, one re-ask
        asked = [m["messages"] for m in srv.requests if len(m["messages"]) == 3]
        assert asked and asked[0][1]["content"] == "Both are energies" and asked[0][2]["content"] == SAME_UNIT.format_reminder
        prompts = {m["messages"][0]["content"] for m in srv.requests}
        assert "Do {b} and kg measure the same quantity? Explain, then end with SAME or DIFFERENT." in prompts
        assert judge.stats.malformed_replies == 1 and judge.describe()["template"] == "builtin"
        again = _run(_judge(srv, cache=LLMVerdictCache(tmp_path), task=SAME_UNIT), [{"a": "N m", "b": "J"}])
        assert again[0].cached and srv.count == 4
        with pytest.raises(ValueError, match="same-unit"):
            _run(_judge(srv, task=SAME_UNIT), [_inputs("42")])
        with pytest.raises(ValueError, match="answer-equivalence"):
            _run(_judge(srv), [{"a": "N m", "b": "J"}])
