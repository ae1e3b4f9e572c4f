"""Reports for any k <= K from one run, without rewriting the run's own report (issue 11 item 18)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _support import FIXTURES, parent, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.evaluate import EvalSpec, run_eval
from studybench.report import build_report, render_markdown
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

FIXTURE = FIXTURES / "run_v010" / "run"
SET = [parent(f"P{i}", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{3}", problem="Q2: again?")], problem="A block.") for i in range(4)]


def model(body: dict[str, Any]) -> Reply:
    """Right or wrong by the request seed (derived from run seed, attempt and parent): attempts differ."""
    turn, _ = conversation_turn(body)
    right = ("2", "3")[turn]
    return Reply(f"Final Answer: \\boxed{{{right if body['seed'] % 3 == 0 else 7}}}")


def _invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(FIXTURE, dst)
    return dst


def test_a_smaller_k_is_what_a_run_with_that_k_reports(tmp_path: Path) -> None:
    f = write_set(tmp_path / "set.json", SET)
    with start_stub_server(model, model="stub-model") as srv:
        for k in (4, 1, 2):
            run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=k, seeds=[0, 1]), tmp_path / f"k{k}")
    big = tmp_path / "k4"
    files = {p.name: p.read_bytes() for p in big.iterdir()}
    par = []
    for k in (1, 2):
        small = json.loads((tmp_path / f"k{k}" / "report.json").read_text())
        rep = json.loads(json.dumps(build_report(big, k=k)))
        assert rep["run_k"] == 4 and rep["k"] == k
        for key in ("par_at_k", "sub_at_k", "breakdowns", "turns", "incorrect_reasons", "unsolved_sub_problems", "truncation",
                    "usage"):
            assert rep[key] == small[key], key
        par.append(rep["par_at_k"]["mean"])
        assert f"k = {k} (first {k} of the run's 4 attempts)" in render_markdown(rep)
    full = build_report(big)
    assert "run_k" not in full and full == build_report(big, k=4)
    assert par[0] <= par[1] <= full["par_at_k"]["mean"] and par[0] < full["par_at_k"]["mean"]  # attempts differ: k matters
    assert {p.name: p.read_bytes() for p in big.iterdir()} == files  # build_report writes nothing


def test_report_cli_prints_smaller_k_and_leaves_the_report_files(run: Path) -> None:
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    res = _invoke("report", run, "-k", 1, "-k", 2)
    # the 0.1.0 fixture run holds stale rule verdicts: it is incomplete, so report exits 1 and says why (last line)
    assert res.exit_code == 1 and "incomplete run" in res.output.strip().splitlines()[-1], res.output
    assert "Par@1" in res.output and "Par@2" in res.output and "Par@3" not in res.output
    assert "not rewritten" in res.output
    res = _invoke("report", run, "-k", "1,2", "--json")
    assert res.exit_code == 1, res.output
    reps = json.loads(res.stdout)
    assert [(r["k"], r["run_k"]) for r in reps] == [(1, 3), (2, 3)]
    one = json.loads(_invoke("report", run, "-k", 1, "--json", "--scoring", "strict").stdout)
    assert one["k"] == 1 and one["scoring_used"] == "strict"
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    # without -k the run's own report is rewritten, as before (exit 1: the fixture run is incomplete)
    assert _invoke("report", run).exit_code == 1
    assert json.loads((run / "report.json").read_text())["k"] == 3


@pytest.mark.parametrize("k,words", [("4", "k must be between 1 and the run's k=3 (in "), ("0", "got 0"),
                                      ("one", "-k takes integers")])
def test_report_refuses_a_k_the_run_cannot_give(run: Path, k: str, words: str) -> None:
    res = _invoke("report", run, "-k", k)
    assert res.exit_code == 2 and words in res.output
    with pytest.raises(ValueError, match="k must be between"):
        build_report(run, k=4)
