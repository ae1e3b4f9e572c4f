"""Rule verdicts that timed out: final for the verifier settings that made them (not verified again by
every run), verified again when the settings change or when asked, and counted in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import load_dataset
from studybench.evaluate import EvalSpec, run_eval
from studybench.models import ChatResult

# an EQ whose symbolic check takes far longer than 2 ms (see tests/verify/test_sandbox.py)
SLOW_GOLD = r"\frac{\rho_i T_i}{\rho_a T_a} = 1 + \frac{4 \gamma}{R_0 P_a} + \sqrt{\frac{2GM}{r}}\cos(\omega t) + \ln\frac{R_0}{a}"
SLOW_PRED = r"1 + \frac{4 \gamma}{R_0 P_a} + \sqrt{\frac{2GM}{r}}\cos(\omega t) + \ln\frac{R_0}{a} = \frac{\rho_i T_i}{\rho_a T_a} + 0"
SET = [{"source": "S", "year": "", "source_problem_id": "P1", "problem": "q", "answer": f"\\boxed{{{SLOW_GOLD}}}",
        "answer_type": "EQ", "type_sequence": "", "sub_problems": []}]


class SlowAnswerBackend:
    """Answers the EQ with an equivalent rearrangement (right, but slow to verify)."""

    name = "slow"

    async def complete(self, request: Any) -> ChatResult:
        return ChatResult(f"Final Answer: \\boxed{{{SLOW_PRED}}}")

    async def aclose(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"backend": "slow", "model": "slow-model"}


def _rows(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "judgements.jsonl").read_text().splitlines()]


def test_a_timed_out_verdict_is_final_until_the_timeout_changes_or_a_retry_is_asked(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    ds = load_dataset(f)
    run = tmp_path / "run"

    def spec(timeout: float, retry: bool = False) -> EvalSpec:
        return EvalSpec(dataset=ds, k=1, seeds=[0], verify_timeout=timeout, verify_workers=1,
                        **({"retry_timeouts": True} if retry else {}))

    first = run_eval(spec(0.002), run, backend=SlowAnswerBackend())
    assert first.rule is not None and first.rule.verified == 1
    assert [r["reason"] for r in _rows(run)] == ["incorrect: timed out"]

    # the same settings again: the timeout is reused, not verified again (no new row)
    again = run_eval(spec(0.002), run, backend=SlowAnswerBackend())
    assert again.rule is not None and (again.rule.verified, again.rule.reused) == (0, 1)
    assert len(_rows(run)) == 1
    assert (first.rule.timed_out, again.rule.timed_out) == (1, 1)
    assert again.report is not None and again.report["turns"]["rule_timeouts"] == 1
    assert "Rule verifier timeouts: 1" in (run / "report.md").read_text()

    # the CLI: no new row either, exit 0 with a loud warning naming the count and the fix
    res = CliRunner().invoke(app, ["eval", "--split", str(f), "-k", "1", "--seeds", "1", "--out", str(run), "--only-verify",
                                   "--verify-timeout", "0.002", "--verify-workers", "1"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "verified 0 turns (1 reused, 1 timed out)" in out
    assert "the rule verifier timed out on 1 attempt (timeout 0.002 s)" in out and "larger --verify-timeout" in out
    assert len(_rows(run)) == 1

    # asked to retry: verified again with the same settings (and times out again)
    retried = run_eval(spec(0.002, retry=True), run, backend=SlowAnswerBackend())
    assert retried.rule is not None and (retried.rule.verified, retried.rule.timed_out) == (1, 1)
    assert len(_rows(run)) == 2

    # a larger timeout is another verifier configuration: verified again, now correct
    slower = run_eval(spec(120.0), run, backend=SlowAnswerBackend())
    assert slower.rule is not None and (slower.rule.verified, slower.rule.timed_out) == (1, 0)
    assert _rows(run)[-1]["correct"] is True, _rows(run)[-1]
    assert slower.report is not None and "rule_timeouts" not in slower.report["turns"] and slower.sub_at_k == 100.0
    assert "Rule verifier timeouts" not in (run / "report.md").read_text()
