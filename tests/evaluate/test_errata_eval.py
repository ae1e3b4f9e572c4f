"""``eval --errata``: official golds by default (reports count the attempts on errata items), corrected
golds with ``apply``, errata parents left out with ``exclude``; recorded in the manifest, shown in every
report, and switched on a resumed run by verifying exactly the errata items again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import load_dataset
from studybench.errata import load_errata
from studybench.evaluate import (
    EvalError,
    EvalSpec,
    LLMStats,
    add_llm_verdicts,
    errata_parents,
    prepare_eval,
    run_eval,
    run_plan,
)
from studybench.llm_judge import LLMJudgeSpec
from studybench.models.base import ChatRequest, ChatResult
from studybench.report import build_report
from studybench.store import RunStore

TRANSFER_ITEMS = {e.id for e in load_errata() if e.split == "transfer"}


class OfficialReplay:
    """Answers every sub-problem with its *official* gold, whatever golds the run scores."""

    name = "official-replay"

    def __init__(self, data_dir: Path, split: str) -> None:
        ds = load_dataset(data_dir / f"{split}.json", name=split)
        self.gold = {(p.uid, s.problem_id): s.boxes for p in ds.parents for s in p.subs()}

    async def complete(self, request: ChatRequest) -> ChatResult:
        boxes = self.gold[(request.ref.parent.uid, request.ref.sub_id)]
        return ChatResult("Final Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in boxes), finish_reason="stop")

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"backend": "official-replay", "model": "replay"}


def _spec(data_dir: Path, errata: str, **kw: Any) -> EvalSpec:
    return EvalSpec(split="transfer", data_dir=data_dir, k=1, seeds=[0], errata=errata, verify_workers=1, **kw)


@pytest.mark.parametrize("mode", ["official", "apply", "exclude"])
def test_the_reference_replay_scores_100_and_the_report_says_which_golds(mode: str, data_dir: Path, tmp_path: Path) -> None:
    res = run_eval(_spec(data_dir, mode), tmp_path / "run")
    rep = res.report
    assert rep is not None and (res.par_at_k, res.sub_at_k) == (100.0, 100.0)
    block = rep["errata"]
    man = RunStore(tmp_path / "run").read_manifest()
    assert man.errata is not None and man.errata["mode"] == block["mode"] == mode and block["recorded"]
    md = (tmp_path / "run" / "report.md").read_text()
    if mode == "official":
        assert {x["id"] for x in block["items"]} == TRANSFER_ITEMS and block["parents"] == 4
        assert block["attempts"] == 4 and block["of_attempts"] == 90 and block["turns"] == len(TRANSFER_ITEMS)
        assert "Errata: official golds (the paper's); 7 sub-problems of this selection (4 parents) have an erratum: " \
               "4 of 90 attempts touch them" in md
    elif mode == "apply":
        assert block["dropped"] == {"IOAA/2024/T5": man.errata["dropped"]["IOAA/2024/T5"]} and rep["parents"] == 89
        assert {x["id"] for x in block["items"]} == TRANSFER_ITEMS - {"ioaa-2024-t5a", "ioaa-2024-t5b"}
        assert "Errata: scored with the corrected golds (--errata apply; not the paper's golds)" in md
        assert man.backend["errata"] == "apply"  # the reference replayed the corrected golds
    else:
        assert rep["parents"] == 86 and not block["items"] and len(block["dropped"]) == 4
        assert "Errata: parents holding an erratum left out (--errata exclude); left out: 4 parents" in md


def test_switching_the_setting_on_a_resumed_run_verifies_exactly_the_errata_items(data_dir: Path, tmp_path: Path) -> None:
    backend, out = OfficialReplay(data_dir, "transfer"), tmp_path / "run"
    first = run_plan(prepare_eval(_spec(data_dir, "official"), out, backend=backend))
    assert first.sub_at_k == 100.0 and first.rule is not None and first.rule.verified == 280
    applied = run_plan(prepare_eval(_spec(data_dir, "apply"), out, backend=backend))
    corrected = len(TRANSFER_ITEMS) - 2  # T5(a) and T5(b) are unanswerable: their parent is left out
    assert applied.rule is not None and applied.rule.verified == corrected and applied.generation is not None
    assert applied.generation.generated == 0  # nothing asked again: only scoring changed
    assert applied.report is not None and applied.report["turns"]["expected"] == 280 - 2
    assert applied.sub_at_k is not None and applied.sub_at_k < 100.0  # the official answers fail the corrected golds
    unsolved = {(u["parent"], u["sub_id"]) for u in applied.report["unsolved_sub_problems"]}
    assert unsolved == {(e.parent_uid, e.problem_id) for e in load_errata() if e.split == "transfer" and e.corrected}
    back = run_plan(prepare_eval(_spec(data_dir, "official", only_verify=True), out))  # rescoring needs no model
    assert back.rule is not None and back.rule.verified == corrected and back.sub_at_k == 100.0
    assert build_report(out)["errata"]["mode"] == "official"


def test_the_reference_replay_refuses_to_resume_with_other_golds(data_dir: Path, tmp_path: Path) -> None:
    run_eval(_spec(data_dir, "official", limit=2), tmp_path / "run")
    with pytest.raises(EvalError, match=r"published golds and you asked for --errata apply.*leave out --errata apply"):
        prepare_eval(_spec(data_dir, "apply", limit=2), tmp_path / "run")
    prepare_eval(_spec(data_dir, "exclude", limit=2), tmp_path / "run")  # the same replayed golds: fine


def test_judging_a_run_uses_the_golds_it_was_scored_with(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend, out = OfficialReplay(data_dir, "transfer"), tmp_path / "run"
    run_plan(prepare_eval(_spec(data_dir, "apply"), out, backend=backend))
    seen: dict[str, Any] = {}

    async def fake_llm_pass(scope: Any, store: Any, judge: Any, **kw: Any) -> LLMStats:
        seen["golds"] = {(r.parent.uid, r.sub_id): r.sub.answer for _, r in scope.turns()}
        await judge.aclose()
        return LLMStats()

    monkeypatch.setattr("studybench.evaluate.judge_after.add_llm_verdicts_to_scope", fake_llm_pass)
    res = add_llm_verdicts(out, LLMJudgeSpec(model="j", base_url="http://127.0.0.1:9/v1"), preflight=False, data_dir=data_dir)
    assert res.rule.verified == 0  # the corrected verdicts stand: nothing verified against the official golds
    for e in load_errata():
        if e.split == "transfer" and e.corrected is not None:
            assert seen["golds"][(e.parent_uid, e.problem_id)] == e.corrected
    man = RunStore(out).read_manifest()
    ds = load_dataset(data_dir / "transfer.json", name="transfer")
    fixed = {p.uid: p for p in errata_parents(man, ds.parents)}
    assert fixed["IPhO/1972/Q3"].subs()[0].answer == next(e.corrected for e in load_errata() if e.id == "ipho-1972-q3")


def test_an_older_run_without_an_errata_record_reports_its_items_by_key(data_dir: Path, tmp_path: Path) -> None:
    run_eval(_spec(data_dir, "official", parent_ids=["IPhO/1972/Q3", "IPhO/1972/Q2"]), tmp_path / "run")
    path = tmp_path / "run" / "manifest.json"
    obj = json.loads(path.read_text())
    del obj["errata"]
    path.write_text(json.dumps(obj))
    block = build_report(tmp_path / "run")["errata"]
    assert (block["recorded"], block["mode"], block["sub_problems"], block["attempts"], block["of_attempts"]) == (False, "official", 1, 1, 2)
    run_eval(_spec(data_dir, "official", parent_ids=["IPhO/1972/Q2"]), tmp_path / "clean")
    obj = json.loads((tmp_path / "clean" / "manifest.json").read_text())
    del obj["errata"]
    (tmp_path / "clean" / "manifest.json").write_text(json.dumps(obj))
    assert "errata" not in build_report(tmp_path / "clean")  # an older run without errata items reads as before


def test_cli_prints_the_errata_line_and_lists_the_errata(data_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["eval", "--split", "transfer", "--data-dir", str(data_dir), "-k", "1", "--seeds", "1",
                              "--parent", "IPhO/1972/Q3", "--errata", "apply", "--out", str(tmp_path / "run")],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Errata: scored with the corrected golds (--errata apply; not the paper's golds); 1 sub-problem of this " \
           "selection (1 parent) has an erratum: 1 of 1 attempt touches it." in text
    res = runner.invoke(app, ["data", "errata", "--data-dir", str(data_dir), "--json"], catch_exceptions=False)
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert {r["id"] for r in rows} == {e.id for e in load_errata()} and {r["status"] for r in rows} == {"applies"}


def test_reproduce_repeats_the_selection_and_the_errata_setting(data_dir: Path, tmp_path: Path) -> None:
    from studybench.evaluate import reproduction_spec

    run_eval(_spec(data_dir, "apply", sample=6, sample_seed=5, stratify="source", exclude_ids=["IPhO/1972/Q2"]),
             tmp_path / "run")
    rep = reproduction_spec(tmp_path / "run")
    s = rep.spec
    assert (s.errata, s.sample, s.sample_seed, s.stratify, s.exclude_ids) == ("apply", 6, 5, "source", ["IPhO/1972/Q2"])
    plan = prepare_eval(s, tmp_path / "again")
    assert [p.uid for p in plan.scope.parents] == [p.uid for p in RunStore(tmp_path / "run").read_manifest().parents]


def test_the_html_report_says_which_golds_and_shows_the_corrected_ones(data_dir: Path, tmp_path: Path) -> None:
    from _support import require_extra

    require_extra("analysis", "jinja2", "matplotlib")
    from studybench.analysis.html import html_report

    run_eval(_spec(data_dir, "apply", parent_ids=["IPhO/1972/Q3"]), tmp_path / "run")
    page = html_report(tmp_path / "run", data_dir=data_dir)
    assert "Errata: scored with the corrected golds" in page
    assert "{2\\\\rho g} E_0^2" in page  # the gold shown beside the replies is the corrected one (JSON-escaped)
