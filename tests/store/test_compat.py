"""Run directories written by older studybench versions load and report the same numbers.

``tests/fixtures/run_v010`` was written by studybench 0.1.0 (commit 5b18531), before the typed
store and the evaluation API existed (how: its README). Its logs hold failed turns, a retried
failure that regenerated later turns (stale rule and LLM verdicts), two judges and an unjudgeable
verdict; its report files are the old code's output.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _support import FIXTURES

from studybench.analysis.consistency import build_consistency
from studybench.report import build_report, write_report
from studybench.store import RunStore, rule_verdict_status

FIXTURE = FIXTURES / "run_v010"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", dst)
    return dst


def _json(obj: object) -> object:
    return json.loads(json.dumps(obj))


def test_old_manifest_loads_typed(run: Path) -> None:
    man = RunStore(run).read_manifest()
    assert (man.k, man.seeds, man.split.name) == (3, [0, 1], "set")
    assert man.active_judge is not None and man.active_judge["model"] == "stub-judge"
    assert [len(p.subs) for p in man.parents] == [3, 1, 1, 3]
    assert man.backend["model"] == "stub-model"


NEW_FIELDS = ("truncation", "complete", "not_generated", "pass_at_k", "tokens", "incomplete_reasons", "final_answers", "health")
"""Report fields added since 0.1.0; every other field must be identical to the old code's output."""

TRUNCATION_SECTION = "## Truncated and empty completions\n"
PASS_AT_K_SECTION = "## pass@k\n"
TOKENS_SECTION = "## Tokens and cost\n"


def _truncation(turns: int, incorrect: list[int]) -> dict[str, object]:
    def group(n: int, bad: int) -> dict[str, object]:
        return {"turns": n, "truncated": 0, "truncated_share": 0.0, "empty": 0, "empty_share": 0.0,
                "incorrect": bad, "incorrect_truncated": 0, "incorrect_empty": 0}

    per_seed = {str(s): group(turns // 2, bad) for s, bad in enumerate(incorrect)}
    return {"warn_share": 0.1, "warning": None, "measured_nothing": False,
            "overall": group(turns, sum(incorrect)), "per_seed": per_seed}


@pytest.mark.parametrize(
    "scoring,expected,incorrect",
    [(None, "run/report.json", [16, 18]), ("strict", "report_strict.json", [17, 18])],
)
def test_old_run_reports_the_same_numbers(run: Path, scoring: str | None, expected: str, incorrect: list[int]) -> None:
    old = json.loads((FIXTURE / expected).read_text())
    new = _json(build_report(run, scoring))
    assert isinstance(new, dict) and not set(NEW_FIELDS) & set(old)
    # the new fields, exactly: every turn answered in full (the fixture's stub never hit a token limit);
    # stale verdicts make it incomplete until `eval --only-verify` verifies those turns again
    assert new.pop("truncation") == _truncation(48, incorrect)
    assert (new.pop("complete"), new.pop("not_generated")) == (False, 0)
    health = new.pop("health")  # the same run, summarised for comparisons: incomplete, 18 of 48 turns missing
    assert (health["readable"], health["complete"], health["turns_missing"], health["turns_expected"]) == (True, False, 18, 48)
    assert health["reasons"] and health["unjudgeable_rate"] == round(1 / 17, 6) and health["rule_timeouts"] == 0
    reasons = new.pop("incomplete_reasons")
    assert len(reasons) == 1 and reasons[0].startswith("18 of 48 generated turns have no current rule verdict")
    fa = new.pop("final_answers")
    assert (fa["answered"], fa["no_final_answer"], fa["warning"]) == (30, 2, None)  # two unboxed replies: no warning
    lj = new["llm_judge"]  # the judge block's new fields: which verdicts are missing, whether the pass finished, the alarm
    missing = [lj.pop(f) for f in ("missing", "finished", "missing_turns", "alarm")]
    assert missing == [lj["verdicts"]["not judged"], not lj["verdicts"]["not judged"], missing[2], None]
    assert len(missing[2]) == missing[0]
    pk = new.pop("pass_at_k")  # k = 1..3; at k = 3 exactly the old Par@3 / Sub@3
    assert pk["k"] == [1, 2, 3]
    for name in ("sub", "par"):
        old_k = old[f"{name}_at_k"]
        assert pk[name]["mean"][-1] == old_k["mean"] and pk[name]["std"][-1] == old_k["std"]
        assert [v[-1] for v in pk[name]["per_seed"].values()] == old_k["per_seed"]
        assert pk[name]["mean"] == sorted(pk[name]["mean"])
    # the token counts the old generation rows stored: the old `usage` sums the current rows only, `tokens`
    # also the requests of turns generated again (the fixture has failed turns, retried)
    tokens = new.pop("tokens")
    assert tokens["superseded"] > 0 and tokens["total"]["requests"] == 48 + tokens["superseded"]
    assert 0 < tokens["total"]["unreported"] < tokens["superseded"]  # the failed requests got no usage
    assert tokens["total"]["prompt_tokens"] > old["usage"]["prompt_tokens"]
    assert "judge_tokens" not in new  # the old judge rows recorded no usage: no judge section at all
    # the turns retried after transient failures (later versions count them): the superseded requests again
    retried = {f: new["turns"].pop(f) for f in ("retried", "extra_requests", "failed_after_retries")}
    assert retried["retried"] > 0 and retried["extra_requests"] >= retried["retried"] and retried["failed_after_retries"] >= 0
    assert new == old
    # the fixture is not trivial: it exercises stale verdicts, failures and the LLM judge
    assert new["turns"]["missing_judgements"] == 18 and new["turns"]["expected"] == 48


def test_old_run_consistency_is_the_same(run: Path) -> None:
    old = json.loads((FIXTURE / "consistency.json").read_text())
    assert _json(build_consistency(run)) == old
    assert len(old["judges"]) == 2 and old["pairs"]


def test_old_report_markdown_is_the_same(run: Path) -> None:
    """The old report.md, plus the truncation, pass@k and tokens sections (before ``## LLM judge``), the
    incomplete-run line, and nothing else."""
    before = (run / "report.md").read_text()
    write_report(run)
    after = (run / "report.md").read_text()
    start = after.index(PASS_AT_K_SECTION)
    end = after.index("\n## ", start + 1) + 1
    assert "| 3 | " in after[start:end] and "| 4 | " not in after[start:end]
    after = after[:start] + after[end:]
    start = after.index(TOKENS_SECTION)  # the old generation rows' token counts (no prices: no cost column)
    end = after.index("\n## ", start + 1) + 1
    assert "| run | " in after[start:end] and "LLM judge" not in after[start:end]
    after = after[:start] + after[end:]
    start = after.index(TRUNCATION_SECTION)
    end = after.index("\n## ", start + 1) + 1
    section = after[start:end]
    assert "| overall | 48 | 0 (0.00%) | 0 (0.00%) | 34 | 0 | 0 |" in section and "WARNING" not in after
    lines = (after[:start] + after[end:]).splitlines(keepends=True)
    fa = [i for i, line in enumerate(lines) if line.startswith("Answered attempts without a final answer: 2 of 30 ")]
    assert len(fa) == 1  # a line later versions add, with its blank line
    lines = lines[: fa[0]] + lines[fa[0] + 2:]
    retries = [i for i, line in enumerate(lines) if line.startswith("Retries: ")]
    assert len(retries) == 1  # a line later versions add, with its blank line: the fixture's turns retried
    lines = lines[: retries[0]] + lines[retries[0] + 2:]
    added = [i for i, line in enumerate(lines) if line.startswith("**Incomplete run:")]
    assert len(added) == 1  # the one line later versions add: 18 turns have no current verdict
    assert "18 of 48 generated turns have no current rule verdict" in lines[added[0]]
    assert "".join(lines[: added[0]] + lines[added[0] + 2:]) == before


def test_stale_rows_of_the_old_run_do_not_count(run: Path) -> None:
    store = RunStore(run)
    gens, rules = store.latest_generations(), store.latest_rule_verdicts()
    stale = [k for k in gens if rules.get(k) is not None and rule_verdict_status(gens[k], rules[k]).verdict is None]
    assert len(stale) == 18  # regenerated turns whose old verdicts no longer count
    assert {k.parent for k in stale} == {"Book A//1.1"}
