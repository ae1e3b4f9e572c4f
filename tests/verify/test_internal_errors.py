"""A rule verifier that fails never looks like one that decided (issue 24 item 4).

A worker whose SymPy import breaks (a ``sympy.py`` shadowing the real one, a broken install) used to
give ``incorrect: internal error (ImportError)`` verdicts that counted as plain wrong answers: recall
on the dev pairs fell from 1.0 to 0.5 and every command exited 0. Now every command that verifies or
reports counts them, says so loudly and exits non-zero, a report holding one is not complete, and such
verdicts are never final (a later pass verifies them again).

The broken workers here are real: worker interpreters started with a directory holding a ``sympy.py``
that raises ``ImportError`` in front of their import path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.store import RunStore, rule_internal_error
from studybench.testing.stub_judge import judge_reply_fn
from studybench.testing.stub_server import Reply, start_stub_server
from studybench.verify import Verifier, is_internal_error, sandbox

SET = [
    {"source": "S", "year": "", "source_problem_id": "P1", "problem_type": "Mechanics", "problem": "A block.",
     "answer": "", "answer_type": "", "type_sequence": "",
     "sub_problems": [
         {"problem_id": "a", "problem": "Q1: the area?", "answer": "\\boxed{x^2}", "answer_type": "EX", "type_sequence": ""},
         {"problem_id": "b", "problem": "Q2: the mass?", "answer": "\\boxed{m}", "answer_type": "EX", "type_sequence": ""}]},
]


def model_reply(body: dict[str, Any]) -> Reply:
    """Right answers that need a worker (not string-equal to the gold) for Q1; the string-equal gold for Q2."""
    last = body["messages"][-1]["content"]
    return Reply("Final Answer: \\boxed{x \\cdot x}" if "Q1" in last else "Final Answer: \\boxed{m}")


@pytest.fixture
def broken_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every verifier worker started now imports a ``sympy.py`` that raises ``ImportError``."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sympy.py").write_text("raise ImportError('a broken SymPy install')\n")
    monkeypatch.setattr(sandbox, "_BOOT", f"import sys; sys.path.insert(0, {str(shadow)!r}); " + sandbox._BOOT)
    yield shadow


def cli(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def flat(text: str) -> str:
    return " ".join(text.split())


REASONS = [
    "incorrect: internal error (ImportError)",
    "incorrect: internal error (RuntimeError: ImportError)",
    "incorrect: internal error",
    "incorrect: internal error (bad worker reply)",
    "incorrect: slot 2 (NV): internal error (TypeError)",
    "incorrect: worker died (worker failed to start)",
    "incorrect: timed out",
    "incorrect: worker died (EOFError)",
    "incorrect: no final answer found",
    "incorrect: numeric mismatch (0.5 vs 2)",
    "correct: symbolic match: identical",
    "incorrect: generation failed (internal error)",
    "",
]


@pytest.mark.parametrize("reason", REASONS)
def test_the_store_and_the_verifier_agree_on_what_an_internal_error_is(reason: str) -> None:
    assert is_internal_error(reason) == rule_internal_error(reason)
    assert is_internal_error(reason) == (reason in REASONS[:6])


def test_the_verifier_counts_internal_errors_and_never_memoises_them(broken_workers: Path) -> None:
    with Verifier(workers=1, timeout=60.0) as v:
        first = v.verify(["x^2"], ["x \\cdot x"], "EX")
        again = v.verify_many([(["x^2"], ["x \\cdot x"], "EX", ""), (["2"], ["2"], "NV", "")])
    assert first.internal_error and is_internal_error(first.reason), first
    assert again[0].internal_error and again[1].correct  # the string-equal pair needs no worker
    assert v.stats["internal_errors"] == 2 and v.stats["memo"] == 0  # asked twice: verified twice


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_verify_says_the_verifier_failed_and_exits_1(broken_workers: Path, as_json: bool) -> None:
    res = cli("verify", "\\boxed{x^2}", "\\boxed{x \\cdot x}", "--type", "EX", "--timeout", 60, *(["--json"] if as_json else []))
    assert res.exit_code == 1, res.output
    assert "error: the rule verifier failed instead of deciding (internal error" in flat(res.output)
    if as_json:
        assert json.loads(res.stdout)["internal_error"] is True


def test_verify_file_counts_internal_errors_and_exits_1(broken_workers: Path, tmp_path: Path) -> None:
    rows = [{"gold": "\\boxed{x^2}", "response": "\\boxed{x \\cdot x}", "answer_type": "EX", "label": True},
            {"gold": "\\boxed{2}", "response": "\\boxed{2}", "answer_type": "NV", "label": True}]
    src = tmp_path / "pairs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cli("verify-file", src, "-o", tmp_path / "out.jsonl", "--workers", 1, "--timeout", 60)
    out = flat(res.output)
    assert res.exit_code == 1, res.output
    assert "2 rows verified, 1 correct, 1 internal errors" in out
    assert "ERROR: 1 of 2 verdicts is an internal error" in out
    reasons = [json.loads(x)["reason"] for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert is_internal_error(reasons[0]) and reasons[1].startswith("correct")


def test_every_command_over_a_run_with_internal_errors_exits_1_and_a_fixed_install_verifies_them_again(
    broken_workers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    split = tmp_path / "set.json"
    split.write_text(json.dumps(SET))
    run = tmp_path / "run"
    with start_stub_server(model_reply, model="stub-model") as srv:
        res = cli("eval", "--split", split, "--model", "stub-model", "--base-url", srv.base_url, "-k", 1, "--seeds", 1,
                  "--out", run, "--verify-workers", 1, "--verify-timeout", 60)
    assert res.exit_code == 1, res.output
    assert "1 internal errors" in res.output and "ERROR: 1 rule verdict of 2 turns is an internal error" in flat(res.output)
    rep = json.loads((run / "report.json").read_text())
    assert rep["turns"]["rule_internal_errors"] == 1 and rep["complete"] is False
    md = (run / "report.md").read_text()
    assert "**WARNING: 1 rule verdict is an internal error" in md.split("## ", 1)[0]  # under the title
    assert "Incomplete run: 1 rule verdict is an internal error" in md  # the only reason: the verifier failed

    for args in (["report", run], ["report", run, "--json"], ["report", run, "-k", 1]):
        res = cli(*args)
        assert res.exit_code == 1, (args, res.output)
        assert "1 rule verdict is an internal error of the rule verifier" in flat(res.stderr), args

    # judge: the internal error is verified again first (still broken), judged, and the command still exits 1
    with start_stub_server(judge_reply_fn(lambda x: True), model="stub-judge") as jsrv:
        res = cli("judge", run, "--judge-model", "stub-judge", "--judge-base-url", jsrv.base_url, "--judge-max-retries", 0,
                  "--verify-workers", 1, "--verify-timeout", 60)
    assert res.exit_code == 1, res.output
    assert "(1 internal errors)" in flat(res.output)

    # a fixed installation: the same verdict is verified again (never final), and everything exits 0
    monkeypatch.undo()
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    res = cli("eval", "--split", split, "--model", "stub-model", "-k", 1, "--seeds", 1, "--out", run, "--only-verify",
              "--verify-workers", 1, "--verify-timeout", 60)
    assert res.exit_code == 0, res.output
    rep = json.loads((run / "report.json").read_text())
    assert "rule_internal_errors" not in rep["turns"] and rep["complete"] is True
    assert not any(is_internal_error(r.reason) for r in RunStore(run).latest_rule_verdicts().values())
    assert cli("report", run).exit_code == 0
