"""``studybench export attempts``: a run as one tidy table (issue 12).

The rows must say what the report scores: regrouping ``final_correct`` by seed gives the report's
Par@k and Sub@k, and a verdict made on an older completion is exported as stale, not as the turn's.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import parent, require_extra, sub
from typer.testing import CliRunner

from studybench.analysis.attempts import ATTEMPT_COLUMNS, attempt_rows, write_attempts
from studybench.cli import app
from studybench.evaluate import EvalSpec, run_eval
from studybench.evaluate.scope import request_seed
from studybench.llm_judge import LLMJudgeSpec
from studybench.report import IncompleteRunError, build_report
from studybench.store import RunStore, TurnKey, set_labels
from studybench.testing.stub_judge import answers_of, judge_reply_fn
from studybench.testing.stub_server import Reply, start_stub_server

SET = [
    parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{\\text{it stops}}", "QL", problem="Q2: what happens?")],
           year="2020", problem="A block."),
    parent("P2", [sub("c", "\\boxed{5}", problem="Q3: focal length?")], source="T", problem_type="Optics", problem="A lens."),
]
P1, P2 = "S/2020/P1", "T//P2"
SUBS = [(P1, "a", 0), (P1, "b", 1), (P2, "c", 0)]

REPLIES = {
    "right_a": Reply("Final Answer: \\boxed{2}"),
    "wrong_a": Reply("Final Answer: \\boxed{7}"),
    "cut": Reply("<think>Let me think about the block. First the forces", finish_reason="length"),
    "right_b": Reply("Final Answer: \\boxed{\\text{it stops}}"),
    "para_b": Reply("Final Answer: \\boxed{\\text{it comes to rest}}"),
    "odd_b": Reply("Final Answer: \\boxed{\\text{it flies}}"),
    "right_c": Reply("Final Answer: \\boxed{5}"),
    "wrong_c": Reply("Final Answer: \\boxed{9}"),
}
# (parent, sub, seed, attempt) -> reply; k = 2, seeds 0 and 1
PLAN = {
    (P1, "a", 0, 0): "right_a", (P1, "a", 0, 1): "wrong_a", (P1, "a", 1, 0): "cut", (P1, "a", 1, 1): "right_a",
    (P1, "b", 0, 0): "right_b", (P1, "b", 0, 1): "para_b", (P1, "b", 1, 0): "odd_b", (P1, "b", 1, 1): "para_b",
    (P2, "c", 0, 0): "right_c", (P2, "c", 0, 1): "right_c", (P2, "c", 1, 0): "wrong_c", (P2, "c", 1, 1): "right_c",
}
# what each reply scores: (rule_correct, llm verdict or None when the judge is not asked, finish_reason)
OUTCOME = {
    "right_a": (True, None, "stop"), "wrong_a": (False, "FALSE", "stop"), "cut": (False, "FALSE", "length"),
    "right_b": (True, None, "stop"), "para_b": (False, "TRUE", "stop"), "odd_b": (False, "unjudgeable", "stop"),
    "right_c": (True, None, "stop"), "wrong_c": (False, "FALSE", "stop"),
}


def _model() -> Any:
    by_seed = {request_seed(seed, a, uid, idx): PLAN[(uid, sub, seed, a)]
               for uid, sub, idx in SUBS for seed in (0, 1) for a in (0, 1)}
    return lambda body: REPLIES[by_seed[body["seed"]]]


def _judge(x: dict[str, str]) -> bool | str:
    answers = answers_of(x["student_answers"])
    if answers == ["\\text{it flies}"]:
        return "I cannot decide."  # malformed every time: unjudgeable
    return answers == ["\\text{it comes to rest}"]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_set: Callable[..., Path]) -> Path:
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("STUDYBENCH_JUDGE_BASE_URL", raising=False)
    f = make_set(SET)
    with start_stub_server(_model(), model="stub-model") as srv, \
            start_stub_server(judge_reply_fn(_judge), model="stub-judge") as jsrv:
        spec = EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=2, seeds=[0, 1],
                        judge=LLMJudgeSpec(model="stub-judge", base_url=jsrv.base_url), labels={"method": "GEPA", "base": "Qwen3-8B"})
        run_eval(spec, tmp_path / "run")
    return tmp_path / "run"


def _regrouped(rows: list[dict[str, Any]], seeds: list[int]) -> tuple[list[float], list[float]]:
    """Par@k and Sub@k per seed from the exported rows alone (paper 2.2: a sub-problem is solved when
    one of its attempts is; a parent when, in one attempt, all its sub-problems are)."""
    par, sub = [], []
    for seed in seeds:
        mine = [r for r in rows if r["seed"] == seed]
        subs = {(r["parent"], r["sub_id"]) for r in mine}
        solved_subs = {(r["parent"], r["sub_id"]) for r in mine if r["final_correct"]}
        parents = {r["parent"] for r in mine}
        failed_attempts = {(r["parent"], r["attempt"]) for r in mine if not r["final_correct"]}
        solved_parents = {r["parent"] for r in mine if (r["parent"], r["attempt"]) not in failed_attempts}
        sub.append(100.0 * len(solved_subs) / len(subs))
        par.append(100.0 * len(solved_parents) / len(parents))
    return par, sub


def test_every_cell_of_a_run_with_known_outcomes(run: Path) -> None:
    rows = attempt_rows(run)
    assert len(rows) == 12
    assert list(rows[0]) == [*ATTEMPT_COLUMNS, "label_method", "label_base"]
    keys = [(r["parent"], r["sub_id"], r["seed"], r["attempt"]) for r in rows]
    assert keys == [(u, s, seed, a) for seed in (0, 1) for u, s, _ in SUBS for a in (0, 1)]  # the report's order
    for r in rows:
        key = (r["parent"], r["sub_id"], r["seed"], r["attempt"])
        reply = PLAN[key]
        rule_ok, llm, finish = OUTCOME[reply]
        where = f"{key} {reply}"
        assert (r["split"], r["answer_type"]) == ("set", "QL" if r["sub_id"] == "b" else "NV"), where
        assert (r["source"], r["year"], r["source_problem_id"], r["problem_type"]) == (
            ("S", "2020", "P1", "Mechanics") if r["parent"] == P1 else ("T", "", "P2", "Optics")), where
        assert r["turn"] == (1 if r["sub_id"] == "b" else 0), where
        assert (r["generated"], r["error"], r["finish_reason"]) == (True, None, finish), where
        assert isinstance(r["prompt_tokens"], int) and r["prompt_tokens"] > 0, where
        assert r["completion_tokens"] == -(-len(REPLIES[reply].content) // 4), where  # the stub's count
        assert (r["rule_status"], r["rule_correct"]) == ("current", rule_ok), where
        assert r["rule_reason"].startswith("correct" if rule_ok else "incorrect"), where
        assert r["llm_verdict"] == llm, where
        assert r["llm_judge_model"] == (None if llm is None else "stub-judge"), where
        assert bool(r["llm_justification"]) == (llm in ("TRUE", "FALSE")), where  # the stub judge's reason
        assert r["final_correct"] == (rule_ok or llm == "TRUE"), where
        assert (r["label_method"], r["label_base"]) == ("GEPA", "Qwen3-8B")
        extracted = json.loads(r["extracted"])
        assert extracted == ([] if reply == "cut" else [REPLIES[reply].content.removeprefix("Final Answer: \\boxed{")[:-1]]), where
    strict = attempt_rows(run, "strict")
    assert [r["final_correct"] for r in strict] == [r["rule_correct"] for r in rows]
    with pytest.raises(ValueError, match="scoring must be one of"):
        attempt_rows(run, "lenient")


def test_regrouped_rows_reproduce_the_report(run: Path) -> None:
    for scoring in (None, "strict", "liberal"):
        rep = build_report(run, scoring)
        rows = attempt_rows(run, scoring)
        par, sub = _regrouped(rows, [0, 1])
        assert par == pytest.approx(rep["par_at_k"]["per_seed"], abs=1e-4), scoring
        assert sub == pytest.approx(rep["sub_at_k"]["per_seed"], abs=1e-4), scoring
    rep = build_report(run)
    assert rep["scoring_used"] == "liberal" and rep["par_at_k"]["per_seed"] != rep["scoring"]["strict"]["par_at_k"]["per_seed"]
    counts: dict[str, int] = {}
    for r in attempt_rows(run):
        if r["llm_verdict"] is not None:
            counts[r["llm_verdict"]] = counts.get(r["llm_verdict"], 0) + 1
    assert {v: n for v, n in rep["llm_judge"]["verdicts"].items() if n} == counts


def test_a_regenerated_turn_is_exported_stale(run: Path, tmp_path: Path) -> None:
    import shutil

    run = Path(shutil.copytree(run, tmp_path / "copy"))  # damaged below: the module's run stays complete
    store = RunStore(run)
    key = TurnKey("set", P2, "c", 0, 0)
    old = store.latest_generations()[key]
    store.append(old.model_copy(update={"completion": "Final Answer: \\boxed{6}", "finish_reason": "stop"}))
    gone = TurnKey("set", P1, "b", 1, 1)  # a turn whose rule verdict is lost: missing
    log = run / RunStore.RULE_VERDICTS
    lines = [ln for ln in log.read_text().splitlines() if TurnKey.from_row(json.loads(ln)) != gone]
    log.write_text("\n".join(lines) + "\n")
    store.close()
    with pytest.raises(IncompleteRunError, match="copy: incomplete run"):
        attempt_rows(run)  # missing verdicts: refused unless allowed
    rows = {(r["parent"], r["sub_id"], r["seed"], r["attempt"]): r for r in attempt_rows(run, allow_incomplete=True)}
    assert all(r["run_complete"] is False and re.search(r"2 of 12 (generated )?turns have no (current )?rule verdict", r["run_health"]) for r in rows.values())
    stale = rows[(P2, "c", 0, 0)]
    assert (stale["rule_status"], stale["rule_correct"], stale["rule_reason"], stale["extracted"]) == ("stale", None, None, None)
    assert (stale["generated"], stale["final_correct"], stale["llm_verdict"]) == (True, False, None)
    missing = rows[(P1, "b", 1, 1)]  # was para_b, TRUE by the judge
    assert (missing["rule_status"], missing["rule_correct"], missing["llm_verdict"], missing["final_correct"]) == (
        "missing", None, None, False)
    assert sum(r["rule_status"] == "current" for r in rows.values()) == 10
    rep = build_report(run)
    par, sub = _regrouped(list(rows.values()), [0, 1])
    assert par == pytest.approx(rep["par_at_k"]["per_seed"], abs=1e-4)
    assert sub == pytest.approx(rep["sub_at_k"]["per_seed"], abs=1e-4)
    assert rep["turns"]["missing_judgements"] == 2


def test_csv_jsonl_and_parquet_read_back(run: Path, tmp_path: Path) -> None:
    set_labels(run, {"layer": "Instructions, with \"Answer\""})  # a comma and quotes: CSV must quote them
    rows = attempt_rows(run)
    rows[0]["llm_justification"] = "line one\nline two, \"quoted\""
    write_attempts(rows, tmp_path / "a.csv", "csv")
    with (tmp_path / "a.csv").open(newline="", encoding="utf-8") as f:
        back = list(csv.DictReader(f))
    assert len(back) == len(rows) and list(back[0]) == list(rows[0])
    for r, b in zip(rows, back, strict=True):
        assert b == {c: "" if v is None else str(v) for c, v in r.items()}
    assert back[0]["label_layer"] == "Instructions, with \"Answer\""
    write_attempts(rows, tmp_path / "a.jsonl", "jsonl")
    assert [json.loads(ln) for ln in (tmp_path / "a.jsonl").read_text().splitlines()] == rows
    require_extra("analysis", "pyarrow")
    import pyarrow.parquet as pq

    write_attempts(rows, tmp_path / "sub" / "a.parquet", "parquet")
    table = pq.read_table(tmp_path / "sub" / "a.parquet")
    assert table.to_pylist() == rows
    assert str(table.schema.field("seed").type) == "int64" and str(table.schema.field("final_correct").type) == "bool"
    assert str(table.schema.field("rule_correct").type) == "bool" and str(table.schema.field("label_layer").type) == "string"
    assert not [p.name for p in (tmp_path / "sub").iterdir() if p.name != "a.parquet"]  # no temporary file left
    with pytest.raises(ValueError, match="format must be one of"):
        write_attempts(rows, tmp_path / "a.xlsx", "xlsx")


def test_cli_export_attempts(run: Path, tmp_path: Path) -> None:
    cli = CliRunner()
    res = cli.invoke(app, ["export", "attempts", str(run)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "wrote 12 rows (28 columns)" in res.output
    with (run / "attempts.csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == 12
    res = cli.invoke(app, ["export", "attempts", str(run), "--out", str(tmp_path / "x.jsonl"), "--scoring", "strict"],
                     catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines = [json.loads(ln) for ln in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert [r["final_correct"] for r in lines] == [r["rule_correct"] for r in lines]
    res = cli.invoke(app, ["export", "attempts", str(run), "--format", "xlsx"])
    assert res.exit_code == 2 and "--format must be one of csv, parquet, jsonl" in res.output
    res = cli.invoke(app, ["export", "attempts", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "unreadable run (not a run directory" in res.output
    res = cli.invoke(app, ["export", "attempts", str(run), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "is a directory" in res.output


def test_parquet_without_pyarrow_says_what_to_install(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    res = CliRunner().invoke(app, ["export", "attempts", str(run), "--format", "parquet", "--out", str(tmp_path / "a.parquet")])
    assert res.exit_code == 1 and "pip install 'studybench[analysis]'" in res.output
    assert not (tmp_path / "a.parquet").exists()

