"""Guidance Gap (paper Table 4, issue 12): solo / guided / gap per method, the headroom a method closes, and
the pairs that are refused. Runs are made with the stub server, which answers right for chosen parents
when the guidance text is (or is not) in the user message."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub, write_set
from typer.testing import CliRunner

from studybench.analysis.guidance_gap import GuidanceGapError, guidance_gap, render_guidance_gap
from studybench.cli import app
from studybench.evaluate import EvalSpec, run_eval
from studybench.store import RunStore
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server


def _parent(i: int) -> dict[str, Any]:
    return parent(f"P{i}", [sub("a", "\\boxed{2}", problem=f"First question of block {i}."),
                            sub("b", "\\boxed{3}", problem=f"Second question of block {i}.")], problem=f"Block {i}.")


SET = [_parent(i) for i in range(4)]  # 4 parents, 8 sub-problems
HINT = "HINT-TEXT"


def _set(tmp_path: Path, parents: list[dict[str, Any]] = SET, name: str = "set") -> Path:
    return write_set(tmp_path / f"{name}.json", parents)


def _guidance(tmp_path: Path) -> Path:
    g = tmp_path / "guidance.jsonl"
    g.write_text("".join(json.dumps({"source": "S", "year": "", "source_problem_id": f"P{i}", "problem_id": s,
                                     "guidance": f"{HINT} for P{i}{s}"}) + "\n" for i in range(4) for s in "ab"))
    return g


def _model(solo: dict[int, str], guided: dict[int, str]) -> Callable[[dict[str, Any]], Reply]:
    """Right on the sub-problems named per parent ("a", "b", "ab"): ``solo`` without guidance in the user
    message, ``guided`` with it."""

    def reply(body: dict[str, Any]) -> Reply:
        turn, text = conversation_turn(body)
        i = next(i for i in range(4) if f"block {i}." in text)
        right = (guided if HINT in text else solo).get(i, "")
        sub = "ab"[turn]
        if sub in right:
            return Reply("Final Answer: \\boxed{2}" if sub == "a" else "Final Answer: \\boxed{3}")
        return Reply("Final Answer: \\boxed{99}")

    return reply


def _run(tmp_path: Path, name: str, model: Callable[[dict[str, Any]], Reply], *, guidance: bool,
         data: Path | None = None, k: int = 2, seeds: tuple[int, ...] = (0, 1), system_prompt: Path | None = None,
         limit: int | None = None) -> Path:
    with start_stub_server(model, model="stub-model") as srv:
        run_eval(EvalSpec(split=str(data or _set(tmp_path)), model="stub-model", base_url=srv.base_url, k=k, seeds=list(seeds),
                          guidance=_guidance(tmp_path) if guidance else None, system_prompt=system_prompt, limit=limit), tmp_path / name)
    return tmp_path / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """base: solo solves P0 (whole), guided P0..P2 whole + P3/a.  method: solo P0 whole + P1/a, guided as base."""
    tmp = tmp_path_factory.mktemp("gg")
    base = _model({0: "ab"}, {0: "ab", 1: "ab", 2: "ab", 3: "a"})
    method = _model({0: "ab", 1: "a"}, {0: "ab", 1: "ab", 2: "ab", 3: "a"})
    return {
        "base-solo": _run(tmp, "base-solo", base, guidance=False),
        "base-guided": _run(tmp, "base-guided", base, guidance=True),
        "gepa-solo": _run(tmp, "gepa-solo", method, guidance=False),
        "gepa-guided": _run(tmp, "gepa-guided", method, guidance=True),
        "tmp": tmp,
    }


def _stat(x: float) -> dict[str, Any]:
    return {"mean": x, "std": 0.0, "per_seed": [x, x]}


def test_table_cells_are_hand_computed(runs: dict[str, Path]) -> None:
    rows = guidance_gap([(runs["base-solo"], runs["base-guided"]), (runs["gepa-solo"], runs["gepa-guided"])],
                        base=(runs["base-solo"], runs["base-guided"]))
    assert [r["method"] for r in rows] == ["base-solo", "gepa-solo"] and [r["base"] for r in rows] == [True, False]
    b, m = rows
    # base: Par solo 1/4, guided 3/4; Sub solo 2/8, guided 7/8
    assert (b["par_solo"], b["par_guided"], b["par_gap"]) == (_stat(25.0), _stat(75.0), _stat(50.0))
    assert (b["sub_solo"], b["sub_guided"], b["sub_gap"]) == (_stat(25.0), _stat(87.5), _stat(62.5))
    # method: Par solo 1/4 (P1 only half), Sub solo 3/8; guided as the base
    assert (m["par_solo"], m["par_guided"], m["par_gap"]) == (_stat(25.0), _stat(75.0), _stat(50.0))
    assert (m["sub_solo"], m["sub_guided"], m["sub_gap"]) == (_stat(37.5), _stat(87.5), _stat(50.0))
    # headroom: (37.5 - 25) / 62.5 = 20% of the sub-problem gap, (25 - 25) / 50 = 0% of the parent gap
    assert (m["headroom_closed_par"], m["headroom_closed_sub"]) == (0.0, 20.0)
    assert (b["headroom_closed_par"], b["headroom_closed_sub"]) == (0.0, 0.0)
    assert m["k"] == 2 and m["seeds"] == [0, 1] and m["scoring"] == "strict" and m["complete"]
    md = render_guidance_gap(rows)
    assert "| method | Par@2 solo | Par@2 guided | Par@2 gap | Sub@2 solo | Sub@2 guided | Sub@2 gap | headroom closed (Par) | headroom closed (Sub) |" in md
    assert "| gepa-solo | 25.00 ± 0.00 | 75.00 ± 0.00 | +50.00 ± 0.00 | 37.50 ± 0.00 | 87.50 ± 0.00 | +50.00 ± 0.00 | 0.0% | 20.0% |" in md
    assert "| base-solo (base) |" in md


def test_without_a_base_there_is_no_headroom_and_names_can_be_given(runs: dict[str, Path]) -> None:
    rows = guidance_gap([(runs["gepa-solo"], runs["gepa-guided"])], method_names=["GEPA"])
    assert rows[0]["method"] == "GEPA" and rows[0]["headroom_closed_par"] is None and not rows[0]["base"]
    assert "headroom" not in render_guidance_gap(rows).split("\n")[0]


def test_headroom_share_on_hand_numbers(runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's reading: base solo 20, guided 60 (gap 40); a method solo at 22.8 closes 7% of the gap."""
    import studybench.analysis.guidance_gap as gg

    per_run = {runs["base-solo"]: (20.0, 30.0), runs["base-guided"]: (60.0, 70.0),
               runs["gepa-solo"]: (22.8, 32.0), runs["gepa-guided"]: (61.0, 75.0)}
    real = gg.load_run_report

    def fake(run: Path, scoring: str | None = None, k: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        rep, health = real(run, scoring, k)
        assert rep is not None
        par, sub = per_run[Path(run)]
        rep["par_at_k"] = {"mean": par, "std": 0.0, "per_seed": [par - 1, par + 1]}
        rep["sub_at_k"] = {"mean": sub, "std": 0.0, "per_seed": [sub, sub]}
        return rep, health

    monkeypatch.setattr(gg, "load_run_report", fake)
    rows = guidance_gap([(runs["gepa-solo"], runs["gepa-guided"])], base=(runs["base-solo"], runs["base-guided"]),
                        method_names=["GEPA"], base_name="Qwen3")
    assert [r["method"] for r in rows] == ["Qwen3", "GEPA"]
    assert rows[1]["headroom_closed_par"] == pytest.approx(7.0)  # (22.8 - 20) / 40
    assert rows[1]["headroom_closed_sub"] == pytest.approx(5.0)  # (32 - 30) / 40
    assert rows[1]["par_gap"]["mean"] == pytest.approx(61.0 - 22.8) and rows[1]["par_gap"]["per_seed"] == pytest.approx([38.2, 38.2])
    # a base model that guidance does not help has no headroom to close
    per_run[runs["base-guided"]] = (20.0, 25.0)
    rows = guidance_gap([(runs["gepa-solo"], runs["gepa-guided"])], base=(runs["base-solo"], runs["base-guided"]))
    assert rows[1]["headroom_closed_par"] is None and rows[1]["headroom_closed_sub"] is None
    assert "n/a" in render_guidance_gap(rows)


def test_the_method_label_of_the_manifest_names_the_row(runs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    solo = tmp_path / "x-solo"
    shutil.copytree(runs["gepa-solo"], solo)
    man = json.loads((solo / "manifest.json").read_text())
    man["labels"] = {"method": "GEPA"}
    (solo / "manifest.json").write_text(json.dumps(man))
    assert getattr(RunStore(solo).read_manifest(), "labels", None) == {"method": "GEPA"}  # typed or kept as an extra
    assert guidance_gap([(solo, runs["gepa-guided"])])[0]["method"] == "GEPA"
    assert guidance_gap([(solo, runs["gepa-guided"])], method_names=["mine"])[0]["method"] == "mine"
    assert guidance_gap([(runs["gepa-solo"], runs["gepa-guided"])])[0]["method"] == "gepa-solo"  # no label: the directory


@pytest.mark.parametrize(
    "pair,message",
    [
        (("base-solo", "gepa-solo"), "guided run {gepa-solo} has no guidance artefact"),
        (("base-guided", "gepa-guided"), "solo run {base-guided} was made with guidance"),
    ],
)
def test_pairs_with_guidance_on_the_wrong_side_are_refused(runs: dict[str, Path], pair: tuple[str, str], message: str) -> None:
    with pytest.raises(GuidanceGapError) as exc:
        guidance_gap([(runs[pair[0]], runs[pair[1]])])
    assert str(exc.value).startswith(message.format(**{k: str(v) for k, v in runs.items()}))
    assert "\n" not in str(exc.value)


def test_runs_over_different_items_are_refused(runs: dict[str, Path]) -> None:
    tmp = runs["tmp"]
    model = _model({}, {})
    other_set = _run(tmp, "other-set", model, guidance=True, data=_set(tmp, [*SET[:3], _parent(3) | {"problem": "Changed."}], "changed"))
    other_k = _run(tmp, "other-k", model, guidance=True, k=1)
    other_seeds = _run(tmp, "other-seeds", model, guidance=True, seeds=(0,))
    solo = runs["base-solo"]
    cases = {other_set: "are over different items: test-set sha256", other_k: "are over different items: k=2 vs k=1",
             other_seeds: "are over different items: seeds [0, 1] vs [0]"}
    for guided, msg in cases.items():
        with pytest.raises(GuidanceGapError, match=re.escape(msg)):
            guidance_gap([(solo, guided)])
    # the same test set, other parents selected (--limit 3)
    fewer = _run(tmp, "fewer", model, guidance=True, limit=3)
    with pytest.raises(GuidanceGapError, match=re.escape("are over different items: parents differ (4 vs 3; first difference at 'S//P3')")):
        guidance_gap([(solo, fewer)])
    # at a common k the k=1 run is comparable
    assert guidance_gap([(solo, other_k)], k=1)[0]["k"] == 1
    # a method pair over other items than the base pair
    with pytest.raises(GuidanceGapError, match="seeds"):
        guidance_gap([(_run(tmp, "solo-one-seed", model, guidance=False, seeds=(0,)), other_seeds)],
                     base=(solo, runs["base-guided"]))


def test_a_pair_with_different_system_prompts_is_refused(runs: dict[str, Path]) -> None:
    tmp = runs["tmp"]
    sp = tmp / "prompt.txt"
    sp.write_text("You are GEPA's evolved prompt. Box the answer.")
    guided = _run(tmp, "gepa-prompt-guided", _model({}, {}), guidance=True, system_prompt=sp)
    with pytest.raises(GuidanceGapError, match="different system prompt artefacts"):
        guidance_gap([(runs["base-solo"], guided)])


def _invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_cli_formats(runs: dict[str, Path], tmp_path: Path) -> None:
    pair = ["--solo", runs["base-solo"], "--guided", runs["base-guided"], "--solo", runs["gepa-solo"], "--guided", runs["gepa-guided"],
            "--name", "Qwen3", "--name", "GEPA", "--base-solo", runs["base-solo"], "--base-guided", runs["base-guided"]]
    md = _invoke("guidance-gap", *pair)
    assert md.exit_code == 0, md.output
    assert "| GEPA | 25.00 ± 0.00 | 75.00 ± 0.00 | +50.00 ± 0.00 | 37.50 ± 0.00 | 87.50 ± 0.00 | +50.00 ± 0.00 | 0.0% | 20.0% |" in md.stdout
    assert "| Qwen3 (base) |" in md.stdout
    js = _invoke("guidance-gap", *pair, "--format", "json")
    assert [r["method"] for r in json.loads(js.stdout)] == ["Qwen3", "GEPA"]
    rows = list(csv.DictReader(io.StringIO(_invoke("guidance-gap", *pair, "--format", "csv").stdout)))
    assert rows[1]["method"] == "GEPA" and float(rows[1]["sub_gap_mean"]) == 50.0 and float(rows[1]["headroom_closed_sub"]) == 20.0
    tex = _invoke("guidance-gap", *pair, "--format", "latex").stdout
    assert tex.index("\\toprule") < tex.index("\\midrule") < tex.index("\\bottomrule")
    assert "GEPA & 25.00 $\\pm$ 0.00 & 75.00 $\\pm$ 0.00 & +50.00 $\\pm$ 0.00" in tex and "20.0\\% \\\\" in tex
    out = tmp_path / "t4.md"
    assert _invoke("guidance-gap", *pair, "--out", out).exit_code == 0 and out.read_text() == md.stdout


def test_cli_refusals_are_one_line_usage_errors(runs: dict[str, Path]) -> None:
    res = _invoke("guidance-gap", "--solo", runs["base-solo"], "--guided", runs["gepa-solo"])
    assert res.exit_code == 2 and "has no guidance artefact" in res.output
    res = _invoke("guidance-gap", "--solo", runs["base-solo"], "--guided", runs["base-guided"], "--solo", runs["gepa-solo"])
    assert res.exit_code == 2 and "give one --guided per --solo" in res.output
    res = _invoke("guidance-gap", "--solo", runs["base-solo"], "--guided", runs["base-guided"], "--format", "xlsx")
    assert res.exit_code == 2 and "--format must be one of md, csv, json, latex" in res.output
    res = _invoke("guidance-gap", "--solo", runs["tmp"] / "missing", "--guided", runs["base-guided"])
    assert res.exit_code == 2 and "missing" in res.output


def test_latex_escapes_method_names() -> None:
    row = {"method": "A&B_50%", "base": False, "complete": False, "k": 1, "headroom_closed_par": None, "headroom_closed_sub": None,
           **{f"{m}_{w}": {"mean": 1.0, "std": None, "per_seed": [1.0]} for m in ("par", "sub") for w in ("solo", "guided", "gap")}}
    tex = render_guidance_gap([row], "latex")
    assert "A\\&B\\_50\\% (incomplete) & 1.00! & 1.00! & +1.00!" in tex and "\\textbf{! (incomplete)" in tex
    with pytest.raises(ValueError, match="format must be one of"):
        render_guidance_gap([row], "xlsx")
