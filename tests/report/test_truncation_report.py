"""Truncated and empty completions are visible in every report (issue 11 item 9).

A run in which every completion stopped at the token limit used to report Par = Sub = 0 with the
reason "no final answer found" and no warning.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from _support import parent, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.evaluate import EvalSpec, run_eval
from studybench.report import TRUNCATION_WARN_SHARE, build_report
from studybench.testing import Fault
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

SET = [parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{3}", problem="Q2: again?")], problem="A block.")]
CUT = Reply("<think>Let me think about the block. First the forces", finish_reason="length")
"""A thinking model cut by the token limit inside its reasoning: no visible text at all."""


def _run(tmp_path: Path, model: Any, k: int = 2, seeds: tuple[int, ...] = (0, 1)) -> Path:
    f = write_set(tmp_path / "set.json", SET)
    with start_stub_server(model, model="stub-model") as srv:
        run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=k, seeds=list(seeds)), tmp_path / "run")
    return tmp_path / "run"


def test_every_completion_truncated_says_the_run_measured_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, lambda body: CUT)
    rep = build_report(run)
    assert rep["par_at_k"]["mean"] == rep["sub_at_k"]["mean"] == 0.0
    tr = rep["truncation"]
    assert tr["measured_nothing"] is True
    assert tr["overall"] == {"turns": 8, "truncated": 8, "truncated_share": 1.0, "empty": 8, "empty_share": 1.0,
                             "incorrect": 8, "incorrect_truncated": 8, "incorrect_empty": 8}
    assert tr["per_seed"]["0"]["truncated"] == tr["per_seed"]["1"]["truncated"] == 4
    assert tr["warning"].startswith("this run measured nothing") and "--max-tokens" in tr["warning"]
    md = (run / "report.md").read_text()
    assert "> **WARNING: this run measured nothing" in md.split("## ", 1)[0]  # under the title, before any section
    assert "| overall | 8 | 8 (100.00%) | 8 (100.00%) | 8 | 8 | 8 |" in md
    assert json.loads((run / "report.json").read_text())["truncation"] == tr
    res = CliRunner().invoke(app, ["report", str(run)], catch_exceptions=False)
    assert res.exit_code == 0
    assert "WARNING: this run measured nothing" in res.output
    assert "8 (100.0%) of 8 answered turns hit the token limit" in res.output


def test_some_truncation_is_counted_per_seed_and_warned_about(tmp_path: Path) -> None:
    def model(body: dict[str, Any]) -> Reply:
        turn, _ = conversation_turn(body)
        return Reply("Final Answer: \\boxed{2}") if turn == 0 else CUT

    tr = build_report(_run(tmp_path, model))["truncation"]
    assert tr["measured_nothing"] is False
    assert tr["overall"] == {"turns": 8, "truncated": 4, "truncated_share": 0.5, "empty": 4, "empty_share": 0.5,
                             "incorrect": 4, "incorrect_truncated": 4, "incorrect_empty": 4}
    assert tr["per_seed"]["1"] == {**tr["overall"], "turns": 4, "truncated": 2, "empty": 2, "incorrect": 2,
                                   "incorrect_truncated": 2, "incorrect_empty": 2}
    assert tr["warning"].startswith("50.0% of the answered turns (4 of 8, overall) hit the token limit")
    assert "4 of 4 incorrect attempts were truncated" in tr["warning"]


def test_a_visible_answer_cut_by_the_limit_is_truncated_not_empty(tmp_path: Path) -> None:
    reply = Reply("<think>done</think>The speed is 2 m/s, so Final Answer: \\boxed{2", finish_reason="length")
    tr = build_report(_run(tmp_path, lambda body: reply, k=1, seeds=(0,)))["truncation"]
    assert (tr["overall"]["truncated"], tr["overall"]["empty"], tr["overall"]["incorrect_truncated"]) == (2, 0, 2)
    assert tr["measured_nothing"] is True  # truncated everywhere: nothing complete was measured


def test_below_the_threshold_the_counts_show_without_a_warning(tmp_path: Path) -> None:
    counter = itertools.count()

    def model(body: dict[str, Any]) -> Reply:
        return CUT if next(counter) == 0 else Reply("Final Answer: \\boxed{2}")

    rep = build_report(_run(tmp_path, model, k=6, seeds=(0,)))
    tr = rep["truncation"]
    assert tr["overall"]["turns"] == 12 and tr["overall"]["truncated"] == 1 < TRUNCATION_WARN_SHARE * 12
    assert tr["warning"] is None and tr["measured_nothing"] is False
    assert "WARNING" not in (tmp_path / "run" / "report.md").read_text()


def test_failed_turns_alone_are_not_blamed_on_the_token_limit(tmp_path: Path) -> None:
    f = write_set(tmp_path / "set.json", SET)
    with start_stub_server(lambda body: Reply("unused"), model="stub-model") as srv:
        srv.fault_when(r"Q1", Fault(kind="status", status=400))  # not retried: every first turn fails
        run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=1, seeds=[0], max_retries=0),
                 tmp_path / "run")
    tr = build_report(tmp_path / "run")["truncation"]
    assert tr["overall"]["turns"] == 1 and tr["overall"]["truncated"] == tr["overall"]["empty"] == 0
    assert tr["measured_nothing"] is False and tr["warning"] is None  # the second turn has a complete reply


def test_eval_that_measured_nothing_exits_1_with_the_warning(tmp_path: Path) -> None:
    f = write_set(tmp_path / "set.json", SET)
    with start_stub_server(lambda body: CUT, model="stub-model") as srv:
        res = CliRunner().invoke(app, ["eval", "--split", str(f), "--model", "stub-model", "--base-url", srv.base_url,
                                       "-k", "1", "--seeds", "1", "--out", str(tmp_path / "run")], catch_exceptions=False)
    out = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert "WARNING: this run measured nothing" in out and "Raise --max-tokens" in out
    assert json.loads((tmp_path / "run" / "report.json").read_text())["truncation"]["measured_nothing"] is True


def test_measured_nothing_tells_failed_turns_from_turns_not_generated_yet(tmp_path: Path) -> None:
    # A run stopped before it generated anything (a router whose replicas are all gone, a spent budget)
    # has no failed turns to "see above": the advice is to run the command again.
    (tmp_path / "a").mkdir()
    run = _run(tmp_path / "a", lambda body: Reply("Final Answer: \\boxed{2}"), k=1, seeds=(0,))
    for name in ("generations.jsonl", "judgements.jsonl"):
        (run / name).write_text("")
    warning = build_report(run)["truncation"]["warning"]
    assert "(0 hit the token limit, 0 have no visible text, 0 failed, 2 not generated)" in warning
    assert warning.endswith("Run the same command again to generate them.") and "failed turns above" not in warning
    # Every turn failed (HTTP 400, not retried): those are listed, so the advice points at them.
    f = write_set(tmp_path / "set.json", SET)
    with start_stub_server(lambda body: Reply("unused"), model="stub-model") as srv:
        srv.fault_when(r"Q", Fault(kind="status", status=400))
        run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=1, seeds=[0], max_retries=0),
                 tmp_path / "b")
    warning = build_report(tmp_path / "b")["truncation"]["warning"]
    assert "(0 hit the token limit, 0 have no visible text, 2 failed, 0 not generated)" in warning
    assert warning.endswith("See the failed turns above.")
