"""Two-stage verdicts end to end: `eval --judge-model`, `judge RUN_DIR`, `report --scoring`, `consistency`.

A stub model and a stub judge (both local OpenAI-compatible servers on 127.0.0.1) replace real
endpoints. The stub judge is an oracle over the answers the stub model gives, with scripted
disagreements, malformed replies and faults where a test needs them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.analysis.consistency import cohens_kappa
from studybench.cli import app
from studybench.store import RunStore
from studybench.testing.stub_judge import answers_of, judge_reply_fn
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

SET = """[
 {"source": "S", "year": "", "source_problem_id": "P1", "problem_type": "Mechanics", "problem": "A block slides.",
  "answer": "", "answer_type": "", "type_sequence": "",
  "sub_problems": [
   {"problem_id": "a", "problem": "Q-NV: the speed in m/s?", "solution": "v = 1.", "answer": "\\\\boxed{1}", "answer_type": "NV", "type_sequence": ""},
   {"problem_id": "b", "problem": "Q-EX: the distance?", "solution": "d = 2x.", "answer": "\\\\boxed{2x}", "answer_type": "EX", "type_sequence": ""}]},
 {"source": "S", "year": "", "source_problem_id": "P2", "problem_type": "Thermo", "problem": "Q-QL: what happens to the entropy?",
  "solution": "It increases.", "answer": "\\\\boxed{\\\\text{it increases}}", "answer_type": "QL", "type_sequence": "", "sub_problems": []},
 {"source": "S", "year": "", "source_problem_id": "P3", "problem_type": "Thermo", "problem": "Q-TF: is heat a state function?",
  "solution": "No.", "answer": "\\\\boxed{False}", "answer_type": "TF", "type_sequence": ""}
]"""

K = 4


def _odd(body: dict[str, Any]) -> bool:
    return int(hashlib.sha256(str(body.get("seed")).encode()).hexdigest(), 16) % 2 == 1


def model_reply(body: dict[str, Any]) -> Reply:
    """NV: right or 7 by seed; EX: 2x; QL: a paraphrase the rules reject; TF: False."""
    _, last = conversation_turn(body)
    if "Q-NV" in last:
        ans = "7" if _odd(body) else "1"
    elif "Q-EX" in last:
        ans = "2x"
    elif "Q-QL" in last:
        ans = "\\text{the entropy goes up}"
    else:
        ans = "False"
    return Reply(f"Working.\nFinal Answer: \\boxed{{{ans}}}")


def oracle(x: dict[str, str]) -> bool | str:
    student = answers_of(x["student_answers"])
    if student == ["\\text{the entropy goes up}"]:
        return True
    return student == answers_of(x["reference_answers"])


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    f = tmp_path / "set.json"
    f.write_text(SET, encoding="utf-8")
    with start_stub_server(model_reply, model="stub-model") as model_srv:
        yield {"tmp": tmp_path, "set": f, "model": model_srv}


def cli(*args: str) -> Any:
    res = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return res


def _eval(e: dict[str, Any], out: Path, *extra: str) -> Any:
    return cli("eval", "--split", e["set"], "--model", "stub-model", "--base-url", e["model"].base_url, "-k", K,
               "--seeds", 1, "--out", out, "--verify-workers", 1, *extra)


def _judge(run: Path, url: str, *extra: str) -> Any:
    return cli("judge", run, "--judge-model", "stub-judge", "--judge-base-url", url, "--judge-max-retries", 0, *extra)


def _report(run: Path) -> dict[str, Any]:
    return json.loads((run / "report.json").read_text())


def _n_rejections(run: Path) -> int:
    rows = RunStore(run).latest_rule_verdicts().values()
    return sum(1 for r in rows if not r.correct)


def test_eval_with_judge_scores_rule_or_llm(env: dict[str, Any]) -> None:
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        run = env["tmp"] / "run"
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url)
        assert res.exit_code == 0, res.output
        man = json.loads((run / "manifest.json").read_text())
        assert man["verifier"]["mode"] == "rule+llm"
        assert man["verifier"]["judge"]["model"] == "stub-judge"
        rep = _report(run)
        assert rep["scoring_used"] == "liberal"
        lj = rep["llm_judge"]
        rejections = _n_rejections(run)
        assert lj["rule_rejections"] == rejections
        # the QL paraphrase (K attempts) is rescued by the judge; wrong NV answers stay wrong
        assert lj["verdicts"]["TRUE"] == K
        assert lj["verdicts"]["FALSE"] == rejections - K
        strict, liberal = rep["scoring"]["strict"], rep["scoring"]["liberal"]
        assert liberal["per_sub_problem"]["correct"] == strict["per_sub_problem"]["correct"] + K
        assert rep["sub_at_k"] == liberal["sub_at_k"]
        assert rep["breakdowns"]["answer_type"]["QL"]["sub_at_k"]["mean"] == 100.0
        # identical rejected answers across attempts share requests: one per distinct input
        assert jsrv.count == 2  # the QL paraphrase and the wrong NV value
        strict_rep = cli("report", run, "--scoring", "strict")
        assert strict_rep.exit_code == 0
        assert _report(run)["breakdowns"]["answer_type"]["QL"]["sub_at_k"]["mean"] == 0.0


def test_rule_mode_never_calls_the_judge(env: dict[str, Any]) -> None:
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        run = env["tmp"] / "run"
        res = _eval(env, run, "--verifier-mode", "rule", "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url)
        assert res.exit_code == 0, res.output
        assert jsrv.count == 0
        rep = _report(run)
        assert rep["verifier"]["mode"] == "rule" and "llm_judge" not in rep
        assert not (run / "llm_judgements.jsonl").exists()


def test_judge_existing_run_then_cache_makes_zero_requests(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    assert _report(run)["verifier"]["mode"] == "rule"
    twin = env["tmp"] / "twin"
    shutil.copytree(run, twin)
    gens_before = (run / "generations.jsonl").read_bytes()
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        res = _judge(run, jsrv.base_url)
        assert res.exit_code == 0, res.output
        first = jsrv.count
        assert first == 2
        assert (run / "generations.jsonl").read_bytes() == gens_before  # nothing regenerated
        # the same run again: verdicts are in the run already
        assert _judge(run, jsrv.base_url).exit_code == 0
        assert jsrv.count == first
        # another run with the same pairs: served from the cache, zero requests
        res = _judge(twin, jsrv.base_url)
        assert res.exit_code == 0
        assert jsrv.count == first
        assert "0 requests" in " ".join(res.output.split())
    a, b = _report(run), _report(twin)
    for key in ("par_at_k", "sub_at_k", "scoring", "breakdowns"):
        assert a[key] == b[key]
    assert a["llm_judge"]["verdicts"] == b["llm_judge"]["verdicts"]
    rows = [json.loads(x) for x in (twin / "llm_judgements.jsonl").read_text().splitlines()]
    assert rows and all(r["cached"] or r["shared"] for r in rows)


def test_two_invocations_end_like_one(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    once = env["tmp"] / "once"
    shutil.copytree(run, once)
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        jsrv.fail(500, times=1)  # the first judge request fails for good (no retries)
        res = _judge(run, jsrv.base_url, "--judge-concurrency", 1)
        assert res.exit_code == 1
        assert "run the same command again" in " ".join(res.output.split())
        mid = _report(run)
        assert mid["llm_judge"]["verdicts"]["error"] >= 1
        assert _judge(run, jsrv.base_url).exit_code == 0
        monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(env["tmp"] / "cache-once"))
        assert _judge(once, jsrv.base_url).exit_code == 0
    a, b = _report(run), _report(once)
    for key in ("par_at_k", "sub_at_k", "scoring", "breakdowns", "llm_judge", "unsolved_sub_problems"):
        assert a[key] == b[key], key
    assert cli("consistency", run).exit_code == 0
    assert cli("consistency", once).exit_code == 0
    ca = json.loads((run / "consistency.json").read_text())
    cb = json.loads((once / "consistency.json").read_text())
    assert ca["judges"] == cb["judges"]


def test_stale_verdict_never_attaches_to_a_new_completion(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        assert _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url).exit_code == 0
        before = _report(run)
        store = RunStore(run)
        # replace the QL answer of attempt 0 by another paraphrase (as a regenerated turn would)
        key = next(k for k in store.latest_generations() if k.parent.endswith("P2") and k.attempt == 0)
        row = dict(store.latest_generations()[key])
        row["completion"] = "Working.\nFinal Answer: \\boxed{\\text{entropy rises}}"
        store.generation_log.append(row)
        store.close()
        assert cli("report", run).exit_code == 1  # the regenerated turn has no verdict yet: incomplete
        mid = _report(run)
        # the old TRUE was for the old completion: the turn has no current rule verdict now
        assert mid["turns"]["missing_judgements"] == 1
        assert mid["llm_judge"]["verdicts"]["TRUE"] == before["llm_judge"]["verdicts"]["TRUE"] - 1
        res = _judge(run, jsrv.base_url)
        assert res.exit_code == 0, res.output
        after = _report(run)
        assert after["turns"]["missing_judgements"] == 0
        # the oracle does not know "entropy rises": FALSE, judged on the new completion
        assert after["llm_judge"]["verdicts"]["FALSE"] == before["llm_judge"]["verdicts"]["FALSE"] + 1


def test_template_missing_placeholder_is_refused(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    bad = env["tmp"] / "bad.txt"
    bad.write_text("Grade {problem} {reference_solution} {reference_answers} {student_solution}", encoding="utf-8")
    res = _judge(run, "http://127.0.0.1:9/v1", "--judge-prompt", bad)
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "{student_answers}" in text and "bad.txt" in text
    res = cli("judge", run, "--judge-model", "m")
    assert res.exit_code == 2 and "--judge-base-url" in res.output


def test_unusable_cache_dir_and_refused_key_are_clean_errors(env: dict[str, Any], tmp_path: Path) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = _judge(run, "http://127.0.0.1:9/v1", "--judge-cache", blocker / "sub")
    assert res.exit_code == 2 and "verdict cache" in res.output
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        jsrv.fail(401, times=100)
        res = _judge(run, jsrv.base_url)
        assert res.exit_code == 2
        assert "HTTP 401" in " ".join(res.output.split())
    man = json.loads((run / "manifest.json").read_text())
    assert man["verifier"]["mode"] == "rule"  # not switched to a judge that refused us
    res = _judge(run, "ftp://[::1")
    assert res.exit_code == 2 and "not a valid" in " ".join(res.output.split())


def test_user_template_is_used_and_keys_the_cache(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    tmpl = env["tmp"] / "mine.txt"
    tmpl.write_text("MY RUBRIC\n### Problem\n{problem}\n\n### Reference solution\n{reference_solution}\n\n"
                    "### Reference final answer(s)\n{reference_answers}\n\n### Student's full solution\n{student_solution}\n\n"
                    "### Student's extracted final answer(s)\n{student_answers}\n\nReply with exactly these two sections.",
                    encoding="utf-8")
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        assert _judge(run, jsrv.base_url).exit_code == 0
        n = jsrv.count
        assert _judge(run, jsrv.base_url, "--judge-prompt", tmpl).exit_code == 0
        assert jsrv.count == 2 * n  # new template digest: new judge id, new cache keys
        assert jsrv.requests[-1]["messages"][0]["content"].startswith("MY RUBRIC")
    man = json.loads((run / "manifest.json").read_text())
    assert man["verifier"]["judge"]["template"] == str(tmpl.resolve())


def _audit_oracle(x: dict[str, str]) -> bool | str:
    # disagrees with the rule verifier on the EX answer: says FALSE where the rules accept
    if answers_of(x["student_answers"]) == ["2x"]:
        return False
    return oracle(x)


def test_consistency_starred_cell_then_audit(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    with start_stub_server(judge_reply_fn(_audit_oracle), model="stub-judge") as jsrv:
        assert _judge(run, jsrv.base_url).exit_code == 0
        assert cli("consistency", run).exit_code == 0
        c = json.loads((run / "consistency.json").read_text())
        (j,) = c["judges"].values()
        o = j["overall"]
        accepts = sum(1 for r in RunStore(run).latest_rule_verdicts().values() if r.correct)
        assert o["rule_accept"]["assumed_TRUE"] == accepts and o["audited_accepts"] == 0
        assert o["precision"] == 1.0
        assert o["recall"] == pytest.approx(accepts / (accepts + K))
        assert "\\*" in (run / "consistency.md").read_text()
        res = _judge(run, jsrv.base_url, "--judge-rule-accepts")
        assert res.exit_code == 0
        assert cli("consistency", run).exit_code == 0
        c = json.loads((run / "consistency.json").read_text())
        o = next(iter(c["judges"].values()))["overall"]
        assert o["audited_accepts"] == accepts and o["rule_accept"]["assumed_TRUE"] == 0
        assert o["rule_accept"]["FALSE"] == K  # the K EX accepts the judge refuses
        assert o["precision"] == pytest.approx((accepts - K) / accepts)
        ex = next(iter(c["judges"].values()))["by_answer_type"]["EX"]
        assert ex["precision"] == 0.0
    # scores are unchanged by auditing: a rule accept stays an accept
    assert _report(run)["breakdowns"]["answer_type"]["EX"]["sub_at_k"]["mean"] == 100.0


def test_kappa_between_two_judge_configurations(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0

    def contrarian(x: dict[str, str]) -> bool | str:
        # agrees on the wrong NV value, disagrees on the QL paraphrase, and says FALSE to 2x
        if answers_of(x["student_answers"]) in (["\\text{the entropy goes up}"], ["2x"]):
            return False
        return oracle(x)

    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as j1, start_stub_server(
        judge_reply_fn(contrarian), model="judge-two"
    ) as j2:
        assert _judge(run, j1.base_url, "--judge-rule-accepts").exit_code == 0
        res = cli("judge", run, "--judge-model", "judge-two", "--judge-base-url", j2.base_url, "--judge-rule-accepts",
                  "--no-activate")
        assert res.exit_code == 0, res.output
    man = json.loads((run / "manifest.json").read_text())
    assert man["verifier"]["judge"]["model"] == "stub-judge"  # --no-activate kept the leaderboard judge
    assert cli("consistency", run).exit_code == 0
    c = json.loads((run / "consistency.json").read_text())
    assert len(c["judges"]) == 2
    (pair,) = c["pairs"]
    rows = RunStore(run).latest_llm_verdicts()
    by = {jid: {k: r.verdict == "TRUE" for (k, j), r in rows.items() if j == jid} for jid in (pair["a"], pair["b"])}
    keys = sorted(by[pair["a"]])
    expected = cohens_kappa([by[pair["a"]][k] for k in keys], [by[pair["b"]][k] for k in keys])
    assert pair["turns"] == len(keys) == 4 * K  # 4 sub-problems x K attempts, all audited by both
    assert pair["kappa"] == pytest.approx(expected, abs=1e-6)
    assert pair["a_TRUE_b_FALSE"] + pair["a_FALSE_b_TRUE"] == 2 * K  # QL and EX attempts
    assert "Cohen's kappa" in (run / "consistency.md").read_text()


def test_unjudgeable_counts_as_incorrect_with_judgeable_denominators(env: dict[str, Any]) -> None:
    def sloppy(x: dict[str, str]) -> bool | str:
        if answers_of(x["student_answers"]) == ["\\text{the entropy goes up}"]:
            return "It is the same concept, so TRUE."  # never the format
        return oracle(x)

    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(sloppy), model="stub-judge") as jsrv:
        res = _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url, "--judge-parse-retries", 1)
        assert res.exit_code == 0, res.output
        assert jsrv.count == 1 + 2  # wrong NV once; the QL paraphrase asked twice
    rep = _report(run)
    lj = rep["llm_judge"]
    assert lj["verdicts"]["unjudgeable"] == K and lj["verdicts"]["TRUE"] == 0
    assert lj["unjudgeable_rate"] == pytest.approx(K / lj["rule_rejections"])
    lib = rep["scoring"]["liberal"]["per_sub_problem"]
    assert lib["attempts"] == 4 * K and lib["judgeable_attempts"] == 4 * K - K
    assert lib["correct"] == rep["scoring"]["strict"]["per_sub_problem"]["correct"]
    assert lib["judgeable_accuracy"] > lib["accuracy"]
    assert "unjudgeable" in (run / "report.md").read_text()


def test_judge_reuses_the_runs_judge_when_no_model_is_given(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    with start_stub_server(judge_reply_fn(oracle), model="stub-judge") as jsrv:
        assert _eval(env, run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url).exit_code == 0
        n = jsrv.count
        res = cli("judge", run, "--refresh", "--no-judge-cache")
        assert res.exit_code == 0, res.output
        assert jsrv.count == 2 * n


def test_judge_refuses_a_changed_test_set(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    env["set"].write_text(SET.replace("A block slides.", "A block slides fast."), encoding="utf-8")
    res = _judge(run, "http://127.0.0.1:9/v1")
    assert res.exit_code == 2
    assert "content differs" in " ".join(res.output.split())


def test_consistency_on_a_rule_only_run_says_what_to_do(env: dict[str, Any]) -> None:
    run = env["tmp"] / "run"
    assert _eval(env, run).exit_code == 0
    res = cli("consistency", run)
    assert res.exit_code == 1
    assert "studybench judge" in res.output


def _oracle_for(wrong: Callable[[str], bool]) -> Callable[[dict[str, str]], bool | str]:
    def decide(x: dict[str, str]) -> bool | str:
        return not wrong(x["student_answers"])

    return decide


def test_reference_run_with_injected_wrong_answers(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Transfer Set replayed by the reference backend, every third turn made wrong."""
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "ref"
    res = cli("eval", "--split", data_dir / "transfer.json", "--model", "reference", "-k", 2, "--seeds", 1,
              "--limit", 6, "--out", run, "--verify-workers", 1)
    assert res.exit_code == 0, res.output
    store = RunStore(run)
    injected = 0
    for i, (_key, g) in enumerate(sorted(store.latest_generations().items())):
        if i % 3 == 0:
            wrong = (g.completion or "").rsplit("Final Answer:", 1)[0] + "Final Answer: \\boxed{INJECTED_WRONG}"
            store.append(g.model_copy(update={"completion": wrong}))
            injected += 1
    store.close()
    with start_stub_server(judge_reply_fn(_oracle_for(lambda s: "INJECTED_WRONG" in s)), model="stub-judge") as jsrv:
        res = _judge(run, jsrv.base_url, "--judge-rule-accepts")
        assert res.exit_code == 0, res.output
    assert cli("consistency", run).exit_code == 0
    c = json.loads((run / "consistency.json").read_text())
    o = next(iter(c["judges"].values()))["overall"]
    assert o["rule_rejects"] == injected and o["rule_reject"]["FALSE"] == injected
    assert o["rule_accept"]["TRUE"] == o["turns"] - injected
    assert o["precision"] == 1.0 and o["recall"] == 1.0 and o["kappa_rule_llm"] == pytest.approx(1.0)
