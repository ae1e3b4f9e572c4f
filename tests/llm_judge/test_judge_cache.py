"""The verdict cache against a misconfigured judge: unjudgeable verdicts are never cached, the
unjudgeable alarm (exit 1), ``judge --refresh`` writes through, ``studybench cache show|clear``.

A stub model and stub judges (local OpenAI-compatible servers on 127.0.0.1) replace real endpoints;
the cache is ``$STUDYBENCH_JUDGE_CACHE`` under ``tmp_path``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_judge_run import SET, K, model_reply, oracle
from typer.testing import CliRunner

from studybench.cli import app
from studybench.llm_judge import (
    ANSWER_EQUIVALENCE_TASK,
    UNJUDGEABLE_ALARM_MIN,
    LLMVerdict,
    LLMVerdictCache,
    UnjudgeableTally,
    cache_key,
    cache_summary,
    clear_cache,
)
from studybench.testing.stub_judge import judge_reply_fn
from studybench.testing.stub_server import Reply, start_stub_server

WRONG_FORMAT = "The student's answer matches the reference, so the verdict is TRUE."


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    cache = tmp_path / "cache"
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(cache))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    f = tmp_path / "set.json"
    f.write_text(SET, encoding="utf-8")
    with start_stub_server(model_reply, model="stub-model") as model_srv:
        yield {"tmp": tmp_path, "set": f, "model": model_srv, "cache": cache}


def cli(*args: Any, input: str | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def _eval(e: dict[str, Any], out: Path, *extra: Any) -> Any:
    return cli("eval", "--split", e["set"], "--model", "stub-model", "--base-url", e["model"].base_url, "-k", K,
               "--seeds", 1, "--out", out, "--verify-workers", 1, *extra)


def _judge(run: Path, url: str, *extra: Any) -> Any:
    return cli("judge", run, "--judge-model", "stub-judge", "--judge-base-url", url, "--judge-max-retries", 0, *extra)


def _entries(cache: Path) -> int:
    return len(LLMVerdictCache(cache)) if (cache / "verdicts.jsonl").exists() else 0


def _rule_only_run(e: dict[str, Any], name: str = "run") -> Path:
    run = e["tmp"] / name
    res = _eval(e, run)
    assert res.exit_code == 0, res.output
    return run


def _text(res: Any) -> str:
    return " ".join(res.output.split())


def test_wrong_format_judge_warns_exits_1_and_leaves_the_cache_empty(env: dict[str, Any]) -> None:
    run = _rule_only_run(env)
    twin = env["tmp"] / "twin"
    shutil.copytree(run, twin)
    with start_stub_server(judge_reply_fn(lambda x: WRONG_FORMAT), model="stub-judge") as bad:
        res = _judge(run, bad.base_url)
        assert bad.count > 0
    assert res.exit_code == 1, res.output
    out = _text(res)
    assert "warning:" in out and "are unjudgeable" in out and "stub-judge" in out
    for cause in ("reasoning parser", "chat template", "--judge-max-tokens"):
        assert cause in out, cause
    assert "Sample reply: " + repr(WRONG_FORMAT) in out
    assert f"studybench judge {run} --refresh" in out
    assert _entries(env["cache"]) == 0  # nothing of that batch entered the cache
    unjudgeable = json.loads((run / "report.json").read_text())["llm_judge"]["verdicts"]["unjudgeable"]
    assert unjudgeable >= UNJUDGEABLE_ALARM_MIN
    # what the judge said is kept with each unjudgeable verdict, to see what went wrong
    rows = [json.loads(x) for x in (run / "llm_judgements.jsonl").read_text().split("\n") if x.strip()]
    assert rows and all(r["reply"] == WRONG_FORMAT for r in rows if r["verdict"] == "unjudgeable")
    # the judge, fixed: the same pairs are asked, not served from the cache
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as good:
        res = _judge(twin, good.base_url)
        assert res.exit_code == 0, res.output
        assert good.count == 2  # the QL paraphrase and the wrong NV value
        res = _judge(run, good.base_url, "--refresh")  # the run judged by the bad judge, judged again
        assert res.exit_code == 0, res.output
        assert good.count == 4  # --refresh asks afresh
    rep = json.loads((run / "report.json").read_text())["llm_judge"]["verdicts"]
    assert rep["unjudgeable"] == 0 and rep["TRUE"] == K
    assert "warning:" not in _text(res)


def test_eval_with_a_wrong_format_judge_exits_1(env: dict[str, Any]) -> None:
    with start_stub_server(judge_reply_fn(lambda x: WRONG_FORMAT), model="stub-judge") as bad:
        res = _eval(env, env["tmp"] / "run", "--judge-model", "stub-judge", "--judge-base-url", bad.base_url)
    assert res.exit_code == 1, res.output
    assert "are unjudgeable" in _text(res) and "reasoning parser" in _text(res)
    assert _entries(env["cache"]) == 0


def test_truncated_replies_are_named_as_the_cause(env: dict[str, Any]) -> None:
    run = _rule_only_run(env)
    cut = Reply("## Justification\nThe student's answer", finish_reason="length")
    with start_stub_server(judge_reply_fn(lambda x: cut), model="stub-judge") as bad:
        res = _judge(run, bad.base_url, "--judge-max-tokens", 8)
    assert res.exit_code == 1, res.output
    out = _text(res)
    assert "stopped at the token budget (finish_reason=length)" in out and "--judge-max-tokens, now 8" in out


def test_a_few_unjudgeable_verdicts_do_not_raise_the_alarm(env: dict[str, Any]) -> None:
    run = _rule_only_run(env)

    def sloppy(x: dict[str, str]) -> bool | str:  # only the QL paraphrase (K turns) gets a malformed reply
        return WRONG_FORMAT if "entropy" in x["student_answers"] else oracle(x)

    with start_stub_server(judge_reply_fn(sloppy), model="stub-judge") as jsrv:
        res = _judge(run, jsrv.base_url)
    verdicts = json.loads((run / "report.json").read_text())["llm_judge"]["verdicts"]
    share = verdicts["unjudgeable"] / (verdicts["unjudgeable"] + verdicts["TRUE"] + verdicts["FALSE"])
    assert verdicts["unjudgeable"] == K < UNJUDGEABLE_ALARM_MIN and share > 0.2  # a high share, but few
    assert res.exit_code == 0, res.output
    assert "warning:" not in _text(res)


def test_refresh_writes_through_to_the_cache(env: dict[str, Any]) -> None:
    run = _rule_only_run(env)
    twin = env["tmp"] / "twin"
    shutil.copytree(run, twin)
    mind = {"ql": True}

    def decide(x: dict[str, str]) -> bool | str:
        return mind["ql"] if "entropy" in x["student_answers"] else oracle(x)

    with start_stub_server(judge_reply_fn(decide), model="stub-judge") as jsrv:
        assert _judge(run, jsrv.base_url).exit_code == 0
        assert json.loads((run / "report.json").read_text())["llm_judge"]["verdicts"]["TRUE"] == K
        n = jsrv.count
        mind["ql"] = False  # the judge changes its mind about the QL paraphrase
        res = _judge(run, jsrv.base_url, "--refresh")
        assert res.exit_code == 0, res.output
        assert jsrv.count == n + 2  # asked afresh, not served from the cache
        assert json.loads((run / "report.json").read_text())["llm_judge"]["verdicts"]["TRUE"] == 0
        # a plain run over the same pairs now reads the new verdicts from the cache
        res = _judge(twin, jsrv.base_url)
        assert res.exit_code == 0, res.output
        assert jsrv.count == n + 2
    assert json.loads((twin / "report.json").read_text())["llm_judge"]["verdicts"]["TRUE"] == 0
    assert _entries(env["cache"]) == 2


def test_refresh_with_no_judge_cache_neither_reads_nor_writes(env: dict[str, Any]) -> None:
    run = _rule_only_run(env)
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        assert _judge(run, jsrv.base_url, "--no-judge-cache").exit_code == 0
        assert jsrv.count == 2 and not (env["cache"] / "verdicts.jsonl").exists()
        assert _judge(run, jsrv.base_url, "--refresh", "--no-judge-cache").exit_code == 0
        assert jsrv.count == 4 and not (env["cache"] / "verdicts.jsonl").exists()


# ---------------------------------------------------------------- studybench cache show|clear


def _put(cache: LLMVerdictCache, model: str, task: str, n: int, verdict: str = "TRUE", template: str = "t") -> None:
    for i in range(n):
        digest = f"{model}-{task}-{verdict}-{i}"
        cache.put(cache_key(model, template, digest), {"judge_model": model, "template_digest": template,
                                                       "inputs_digest": digest, "verdict": verdict, "task": task})


def _fill(root: Path) -> None:
    c = LLMVerdictCache(root)
    _put(c, "judge-a", "answer-equivalence", 3)
    _put(c, "judge-a", "answer-equivalence", 2, "FALSE")
    _put(c, "judge-a", "duplicate", 1, "FALSE")
    _put(c, "judge-b", "answer-equivalence", 4)
    c.close()
    builtin = ANSWER_EQUIVALENCE_TASK.builtin_template().digest
    legacy = [  # rows of an older version: no task; one unjudgeable (never served)
        {"judge_model": "judge-b", "template_digest": builtin, "inputs_digest": "old-1", "verdict": "FALSE"},
        {"judge_model": "judge-b", "template_digest": builtin, "inputs_digest": "old-2", "verdict": "unjudgeable",
         "error": "malformed reply after 3 tries: no verdict section"},
    ]
    with open(root / "verdicts.jsonl", "a", encoding="utf-8") as f:
        for r in legacy:
            f.write(json.dumps({"key": cache_key(r["judge_model"], r["template_digest"], r["inputs_digest"]), **r}) + "\n")
        f.write('{"key": "forged", "verdict": "TRUE"}\n')


def test_cache_show_counts_per_judge_model_task_and_verdict(env: dict[str, Any]) -> None:
    _fill(env["cache"])
    res = cli("cache", "show", "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["file"] == str(env["cache"] / "verdicts.jsonl") and rep["source"] == "$STUDYBENCH_JUDGE_CACHE"
    assert rep["entries"] == 11 and rep["ignored_unjudgeable"] == 1 and rep["invalid_rows"] == 1 and rep["rows"] == 13
    assert rep["by_model"] == {
        "judge-a": {"answer-equivalence": {"TRUE": 3, "FALSE": 2}, "duplicate": {"TRUE": 0, "FALSE": 1}},
        "judge-b": {"answer-equivalence": {"TRUE": 4, "FALSE": 1}},
    }
    table = cli("cache", "show")
    assert table.exit_code == 0
    text = _text(table)
    assert str(env["cache"] / "verdicts.jsonl") in text and "11 entries" in text and "1 unjudgeable" in text
    other = env["tmp"] / "other"
    res = cli("cache", "show", "--judge-cache", other, "--json")
    assert json.loads(res.stdout)["entries"] == 0 and json.loads(res.stdout)["source"] == "--judge-cache"


def test_cache_clear_one_judge_model_keeps_the_others(env: dict[str, Any]) -> None:
    _fill(env["cache"])
    res = cli("cache", "clear", "--judge-model", "judge-a", input="n\n")
    assert res.exit_code == 1 and "nothing removed" in res.output
    assert cache_summary(env["cache"])["entries"] == 11
    res = cli("cache", "clear", "--judge-model", "judge-a", "--yes")
    assert res.exit_code == 0, res.output
    assert "removed 6 cached judgements" in _text(res)
    rep = json.loads(cli("cache", "show", "--json").stdout)
    assert list(rep["by_model"]) == ["judge-b"] and rep["entries"] == 5
    assert LLMVerdictCache(env["cache"]).get(cache_key("judge-b", "t", "judge-b-answer-equivalence-TRUE-0")) is not None
    res = cli("cache", "clear", "--judge-model", "judge-a", "--yes")
    assert res.exit_code == 0 and "nothing removed" in res.output
    res = cli("cache", "clear", input="y\n")
    assert res.exit_code == 0, res.output
    assert not (env["cache"] / "verdicts.jsonl").exists()


def test_cache_clear_one_kind(env: dict[str, Any]) -> None:
    _fill(env["cache"])
    res = cli("cache", "clear", "--kind", "duplicate", "--yes")
    assert res.exit_code == 0, res.output
    rep = json.loads(cli("cache", "show", "--json").stdout)
    assert rep["by_model"]["judge-a"] == {"answer-equivalence": {"TRUE": 3, "FALSE": 2}}
    # a legacy row without a task is recognised by the builtin template's digest
    known = {ANSWER_EQUIVALENCE_TASK.builtin_template().digest: "answer-equivalence"}
    assert clear_cache(env["cache"], judge_model="judge-b", task="answer-equivalence", known_templates=known) == 6
    assert cache_summary(env["cache"])["by_model"] == {"judge-a": {"answer-equivalence": {"TRUE": 3, "FALSE": 2}}}


def test_cache_never_stores_unjudgeable() -> None:
    with pytest.raises(ValueError, match="TRUE / FALSE"):
        LLMVerdictCache(Path("/nonexistent")).put("k", {"verdict": "unjudgeable"})


# ---------------------------------------------------------------- the alarm


def test_tally_thresholds_and_causes() -> None:
    t = UnjudgeableTally()
    for _ in range(20):
        t.add(LLMVerdict("TRUE"))
    for _ in range(4):
        t.add(LLMVerdict("unjudgeable", reply="x" * 500, error="malformed reply after 3 tries: no verdict section",
                         finish_reason="length"))
    t.add(LLMVerdict("error", error="HTTP 500"))  # transport errors are not counted
    assert (t.verdicts, t.unjudgeable, t.alarming) == (24, 4, False)
    for _ in range(4):
        t.add(LLMVerdict("unjudgeable", error="the endpoint refused the request: HTTP 400 too long"))
    assert t.share == pytest.approx(8 / 28) and t.alarming
    msg = t.alarm("m", max_tokens=64) or ""
    assert "8 of 28 judge verdicts (29%)" in msg and "--judge-max-tokens, now 64" in msg
    assert "4 requests were refused by the endpoint" in msg and "finish_reason=length" in msg
    assert "Sample reply: '" + "x" * 200 + "...'" in msg
    only_refused = UnjudgeableTally()
    for _ in range(5):
        only_refused.add(LLMVerdict("unjudgeable", error="the endpoint refused the request: HTTP 413"))
    msg = only_refused.alarm("m") or ""
    assert "refused" in msg and "Likely causes" not in msg and "HTTP 413" in msg


def test_a_small_batch_judged_entirely_unjudgeable_raises_the_alarm() -> None:
    """Three rule rejections, three unjudgeable verdicts: below the count for a partial share, but a judge
    that never once answered in its format is broken (a new user's 100% went unremarked)."""
    for n, expected in ((1, False), (2, True), (3, True)):
        t = UnjudgeableTally()
        for _ in range(n):
            t.add(LLMVerdict("unjudgeable", error="malformed reply after 3 tries: text before the first section"))
        assert t.alarming is expected, n
    t.add(LLMVerdict("FALSE"))  # one real verdict: 3 of 4 is a share, and 3 is below the count for shares
    assert not t.alarming and t.unjudgeable < UNJUDGEABLE_ALARM_MIN


def test_cache_clear_refuses_an_unknown_kind(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from studybench.cli import app

    res = CliRunner().invoke(app, ["cache", "clear", "--kind", "bogus", "--yes", "--judge-cache", str(tmp_path)])
    assert res.exit_code == 2 and "unknown task 'bogus'" in res.output and "answer-equivalence" in res.output
