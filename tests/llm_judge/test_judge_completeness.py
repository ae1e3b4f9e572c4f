"""A judge that fails never looks like a judge that agreed (issue 24, items 1 and 8).

- a judge endpoint that drops every connection, drops some, or is killed mid-pass (a real process):
  the run is incomplete (``complete: false``, ``incomplete_reasons``, the missing verdicts listed in
  report.json and report.md), the command exits 1 with one ``error:`` line, and running the same
  command again asks only the missing verdicts (counted at the stub server);
- a judge whose connections drop while it is retried is given up within its grace period (the pass
  stops asking), as a dead model endpoint is;
- a judge that answers mostly unjudgeable is stopped early (after :data:`UNJUDGEABLE_STOP_MIN`
  verdicts), keeps what it judged and resumes;
- the unjudgeable alarm and the no-final-answer warning reach report.json, report.md and the HTML.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_judge_run import SET, K, _eval, _judge, _report, cli, model_reply, oracle

from studybench.datasets import load_dataset
from studybench.evaluate import RunScope, add_llm_verdicts_to_scope
from studybench.llm_judge import UNJUDGEABLE_STOP_MIN, LLMJudge
from studybench.store import RunStore
from studybench.testing.stub_judge import format_verdict, judge_reply_fn
from studybench.testing.stub_server import Fault, Reply, Script, conversation_turn, start_stub_server

QL = "entropy goes up"  # the QL paraphrase the rules reject and the oracle accepts


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A stub model answering the SET of test_judge_run (a judge cache of the test's own)."""
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    f = tmp_path / "set.json"
    f.write_text(SET, encoding="utf-8")
    with start_stub_server(model_reply, model="stub-model") as model_srv:
        yield {"tmp": tmp_path, "set": f, "model": model_srv}


def _lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.strip()]


def _one_error_line(res: Any) -> str:
    """The command's output ends with exactly one ``error:`` line and holds no traceback."""
    assert "Traceback" not in res.output
    errors = [ln for ln in _lines(res.output) if ln.startswith("error:")]
    assert len(errors) == 1, res.output
    tail = res.output[res.output.index("error:"):]
    return " ".join(tail.split())


def _assert_incomplete_for_judge(run: Path, missing: int) -> dict[str, Any]:
    rep = _report(run)
    lj = rep["llm_judge"]
    assert rep["complete"] is False and rep["scoring_used"] == "liberal"
    assert lj["finished"] is False and lj["missing"] == missing == len(lj["missing_turns"])
    assert lj["verdicts"]["error"] + lj["verdicts"]["not judged"] == missing
    assert any(f"{missing} of {lj['rule_rejections']} LLM verdicts missing" in r for r in rep["incomplete_reasons"])
    md = (run / "report.md").read_text()
    assert "NOT FINAL" in md and f"## Missing LLM verdicts ({missing})" in md and "Incomplete run" in md
    return rep


def _assert_finished(run: Path) -> dict[str, Any]:
    rep = _report(run)
    assert rep["complete"] is True and rep["incomplete_reasons"] == []
    assert rep["llm_judge"]["finished"] is True and rep["llm_judge"]["missing_turns"] == []
    assert "NOT FINAL" not in (run / "report.md").read_text()
    return rep


@pytest.mark.parametrize("command", ["eval", "judge"])
def test_a_judge_that_drops_every_connection_leaves_the_run_incomplete(env: dict[str, Any], command: str) -> None:
    run = env["tmp"] / "run"
    if command == "judge":
        assert _eval(env, run).exit_code == 0
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        jsrv.fault_when(".", Fault("drop"))
        if command == "eval":
            res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url, "--judge-max-retries", 0)
        else:
            res = _judge(run, jsrv.base_url)
        assert res.exit_code == 1, res.output
        line = _one_error_line(res)
        assert "LLM verdicts asked for are missing" in line and "run the same command again" in line
        rep = _assert_incomplete_for_judge(run, missing=_report(run)["llm_judge"]["rule_rejections"])
        # what the judge would have rescued (the QL paraphrase) is not counted: liberal equals strict, and says so
        assert rep["scoring"]["liberal"]["per_sub_problem"]["correct"] == rep["scoring"]["strict"]["per_sub_problem"]["correct"]
        jsrv.clear_faults()
        jsrv.reset_stats()
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url) if command == "eval" \
            else _judge(run, jsrv.base_url)
        assert res.exit_code == 0, res.output
        assert jsrv.count == 2  # the two distinct rejected answers: nothing judged twice, nothing regenerated
    rep = _assert_finished(run)
    lib, strict = rep["scoring"]["liberal"]["per_sub_problem"], rep["scoring"]["strict"]["per_sub_problem"]
    assert lib["correct"] == strict["correct"] + K


def test_rerun_asks_only_the_missing_verdicts(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        jsrv.fault_when(QL, Fault("drop"))  # only the QL paraphrase's requests are dropped
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url, "--judge-max-retries", 0)
        assert res.exit_code == 1
        _one_error_line(res)
        rep = _assert_incomplete_for_judge(run, missing=K)
        assert {m["verdict"] for m in rep["llm_judge"]["missing_turns"]} == {"error"}
        assert all(m["parent"].endswith("P2") for m in rep["llm_judge"]["missing_turns"])
        jsrv.clear_faults()
        jsrv.reset_stats()
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url)
        assert res.exit_code == 0, res.output
        assert jsrv.count == 1  # only the missing (K identical) verdicts; the judged ones are kept
        assert all(QL in r["messages"][0]["content"] for r in jsrv.requests)
    _assert_finished(run)


def _distinct_wrong(body: dict[str, Any]) -> Reply:
    """Every turn a different wrong answer: every rule rejection is a distinct judge input."""
    _, _last = conversation_turn(body)
    return Reply(f"Working.\nFinal Answer: \\boxed{{{abs(int(body.get('seed') or 0)) % 10**9 + 1000}}}")


@pytest.fixture
def distinct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, Any]) -> Any:
    """A rule-only run of 4 sub-problems x 8 attempts, every answer wrong and different: 32 distinct rejections."""
    with start_stub_server(_distinct_wrong, model="stub-model") as srv:
        run = tmp_path / "distinct"
        res = cli("eval", "--split", env["set"], "--model", "stub-model", "--base-url", srv.base_url, "-k", 8,
                  "--seeds", 1, "--out", run, "--verify-workers", 1)
        assert res.exit_code == 0, res.output
    rejections = sum(1 for r in RunStore(run).latest_rule_verdicts().values() if not r.correct)
    assert rejections == 32
    return run


def test_a_judge_killed_mid_pass(distinct: Path) -> None:
    """A real judge process SIGKILLed while the pass runs: what it judged is kept, the rest is missing."""
    run = distinct
    script = Script(default=format_verdict(False, "Scripted."))
    with start_stub_server(script, subprocess=True, latency=0.2, record=False) as jsrv:
        killed = threading.Event()

        def killer() -> None:
            while jsrv.count < 4:
                time.sleep(0.02)
            jsrv.kill()
            killed.set()

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        res = _judge(run, jsrv.base_url, "--judge-concurrency", 2)
        t.join(30)
        assert killed.is_set()
    assert res.exit_code == 1, res.output
    _one_error_line(res)
    rep = _report(run)
    missing = rep["llm_judge"]["missing"]
    assert 0 < missing < 32 and rep["llm_judge"]["verdicts"]["FALSE"] == 32 - missing
    _assert_incomplete_for_judge(run, missing)
    with start_stub_server(judge_reply_fn(lambda x: False), model="stub-judge") as again:
        res = _judge(run, again.base_url)
        assert res.exit_code == 0, res.output
        assert again.count == missing  # exactly the verdicts the killed judge did not give
    _assert_finished(run)


def test_a_dead_judge_is_given_up_within_its_grace_period(distinct: Path, env: dict[str, Any]) -> None:
    """Dropped connections retried (here up to 1000 times each): the pass stops once the judge is clearly gone."""
    ds = load_dataset(env["set"])
    scope = RunScope(ds.name, ds.parents, 8, [0])
    store = RunStore(distinct)
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        jsrv.fault_when(".", Fault("drop"))
        judge = LLMJudge("stub-judge", jsrv.base_url, max_retries=1000, backoff_initial=0.005, backoff_max=0.01, concurrency=4)

        async def go() -> Any:
            try:
                return await add_llm_verdicts_to_scope(scope, store, judge, max_consecutive_failures=4, dead_after_s=0.3)
            finally:
                await judge.aclose()

        st = asyncio.run(go())
        sent = jsrv.count
    store.close()
    assert st.stopped is not None and "stopped answering" in st.stopped
    assert st.candidates == 32 and st.judged == 0 and st.not_asked == 32 and st.missing == 32
    assert sent < 1001  # not one judgement's worth of retries, let alone 32 of them
    assert not (distinct / "llm_judgements.jsonl").exists() or not RunStore(distinct).latest_llm_verdicts()


def test_a_mostly_unjudgeable_judge_is_stopped_early_and_resumes(distinct: Path) -> None:
    run = distinct
    with start_stub_server(judge_reply_fn(lambda x: "It is the same, so TRUE."), model="stub-judge") as bad:
        res = _judge(run, bad.base_url, "--judge-concurrency", 1, "--judge-parse-retries", 0)
        assert res.exit_code == 1, res.output
        sent = bad.count
    line = _one_error_line(res)
    assert "mostly unjudgeable" in line and "--refresh" in line
    assert UNJUDGEABLE_STOP_MIN <= sent <= UNJUDGEABLE_STOP_MIN + 1 < 32  # not all 32 requests
    rep = _report(run)
    assert rep["llm_judge"]["verdicts"]["unjudgeable"] == sent and rep["llm_judge"]["missing"] == 32 - sent
    assert rep["llm_judge"]["alarm"] and rep["complete"] is False
    # the judge fixed: the same command asks only the verdicts not asked; --refresh asks the unjudgeable ones again
    with start_stub_server(judge_reply_fn(lambda x: False), model="stub-judge") as good:
        res = _judge(run, good.base_url)
        assert good.count == 32 - sent
        assert res.exit_code == 1  # still alarmed: the unjudgeable verdicts are final until --refresh
        assert _report(run)["complete"] is True and _report(run)["llm_judge"]["alarm"]
        res = _judge(run, good.base_url, "--refresh")
        assert res.exit_code == 0, res.output
    rep = _assert_finished(run)
    assert rep["llm_judge"]["alarm"] is None and rep["llm_judge"]["verdicts"]["FALSE"] == 32


def test_the_unjudgeable_alarm_reaches_report_md_and_html(env: dict[str, Any]) -> None:
    pytest.importorskip("jinja2")
    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(lambda x: "TRUE, I think."), model="stub-judge") as jsrv:
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url, "--judge-parse-retries", 0)
        assert res.exit_code == 1
    rep = _report(run)
    alarm = rep["llm_judge"]["alarm"]
    assert alarm and "unjudgeable" in alarm and rep["llm_judge"]["unjudgeable_rate"] == 1.0
    md = (run / "report.md").read_text()
    assert "WARNING (LLM judge)" in md and "UNRELIABLE" in md
    assert "scoring = liberal (rule OR LLM judge)\n" not in md
    res = cli("report", run, "--html")
    assert res.exit_code == 0, res.output
    assert "unjudgeable" in " ".join(res.output.split())  # the terminal too
    page = (run / "report.html").read_text()
    assert 'id="judge-alarm"' in page and "UNRELIABLE" in page
    assert "<td>liberal</td>" not in page


def test_attempts_without_a_final_answer_are_warned_about(env: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    with start_stub_server(Script(default="I think the answer is about seven."), model="stub-model") as srv:
        run = tmp_path / "noanswer"
        res = cli("eval", "--split", env["set"], "--model", "stub-model", "--base-url", srv.base_url, "-k", K,
                  "--seeds", 1, "--out", run, "--verify-workers", 1)
        assert res.exit_code == 0, res.output
    assert "no final answer" in " ".join(res.output.split())
    fa = _report(run)["final_answers"]
    assert fa["answered"] == fa["no_final_answer"] == 4 * K and fa["share"] == 1.0 and fa["warning"]
    assert "have no final answer" in (run / "report.md").read_text()
    assert cli("report", run, "--html").exit_code == 0
    assert 'id="final-answer-warning"' in (run / "report.html").read_text()
    # a run that answers in the format is not warned about
    good = env["tmp"] / "good"
    assert _eval(env, good).exit_code == 0
    fa = _report(good)["final_answers"]
    assert fa["no_final_answer"] == 0 and fa["warning"] is None
    assert "WARNING" not in (good / "report.md").read_text()


def test_report_json_keeps_complete_equal_to_no_reasons(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    rep = _report(run)
    assert rep["complete"] is True and rep["incomplete_reasons"] == []
    json.dumps(rep)


def test_resuming_without_the_judge_leaves_new_rejections_unjudged_and_says_so(env: dict[str, Any]) -> None:
    """A rule+llm run resumed without --judge-model keeps its judge; the new turns' rejections have no verdict yet."""
    run = env["tmp"] / "run"
    args = ("--split", env["set"], "--model", "stub-model", "--base-url", env["model"].base_url, "--seeds", 1, "--out", run,
            "--verify-workers", 1)
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        res = cli("eval", *args, "-k", 2, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url)
        assert res.exit_code == 0, res.output
        res = cli("eval", *args, "-k", K)  # two more attempts each, judged by nobody
        assert res.exit_code == 1, res.output
        line = _one_error_line(res)
        assert "no verdict of the run's LLM judge" in line and "studybench judge" in line
        rep = _report(run)
        assert rep["complete"] is False and rep["llm_judge"]["missing"] > 0
        assert {m["attempt"] for m in rep["llm_judge"]["missing_turns"]} == {2, 3}
        jsrv.reset_stats()
        res = cli("judge", run)
        assert res.exit_code == 0, res.output
        assert jsrv.count == 0  # the new rejections repeat answers already judged: all from the cache
    _assert_finished(run)
