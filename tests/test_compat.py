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

from studybench.analysis.consistency import build_consistency
from studybench.report import build_report, write_report
from studybench.store import RunStore, rule_verdict_status

FIXTURE = Path(__file__).parent / "fixtures" / "run_v010"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(FIXTURE / "run", dst)
    return dst


def _json(obj: object) -> object:
    return json.loads(json.dumps(obj))


def _as_old(rep: dict) -> dict:
    """The report without what later versions added (``complete``, ``not_generated``)."""
    return {k: v for k, v in rep.items() if k not in ("complete", "not_generated")}


def test_old_manifest_loads_typed(run: Path) -> None:
    man = RunStore(run).read_manifest()
    assert (man.k, man.seeds, man.split.name) == (3, [0, 1], "set")
    assert man.active_judge is not None and man.active_judge["model"] == "stub-judge"
    assert [len(p.subs) for p in man.parents] == [3, 1, 1, 3]
    assert man.backend["model"] == "stub-model"


@pytest.mark.parametrize("scoring,expected", [(None, "run/report.json"), ("strict", "report_strict.json")])
def test_old_run_reports_the_same_numbers(run: Path, scoring: str | None, expected: str) -> None:
    old = json.loads((FIXTURE / expected).read_text())
    new = _json(build_report(run, scoring))
    assert _as_old(new) == old
    # stale verdicts make it incomplete until `eval --only-verify` verifies those turns again
    assert new["complete"] is False and new["not_generated"] == 0
    # the fixture is not trivial: it exercises stale verdicts, failures and the LLM judge
    assert new["turns"]["missing_judgements"] == 18 and new["turns"]["expected"] == 48


def test_old_run_consistency_is_the_same(run: Path) -> None:
    old = json.loads((FIXTURE / "consistency.json").read_text())
    assert _json(build_consistency(run)) == old
    assert len(old["judges"]) == 2 and old["pairs"]


def test_old_report_markdown_is_the_same(run: Path) -> None:
    before = (run / "report.md").read_text()
    write_report(run)
    after = (run / "report.md").read_text().splitlines(keepends=True)
    added = [i for i, line in enumerate(after) if line.startswith("**Incomplete run:")]
    assert len(added) == 1  # the one line later versions add: 18 turns have no current verdict
    assert "18 have no verdict" in after[added[0]]
    assert "".join(after[: added[0]] + after[added[0] + 2:]) == before


def test_stale_rows_of_the_old_run_do_not_count(run: Path) -> None:
    store = RunStore(run)
    gens, rules = store.latest_generations(), store.latest_rule_verdicts()
    stale = [k for k in gens if rules.get(k) is not None and rule_verdict_status(gens[k], rules[k]).verdict is None]
    assert len(stale) == 18  # regenerated turns whose old verdicts no longer count
    assert {k.parent for k in stale} == {"Book A//1.1"}
