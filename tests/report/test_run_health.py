"""Incomplete and unreadable runs are never ranked as if complete (issue 24 item 2).

Real runs on the real Transfer Set (the offline reference backend replaying the reference solutions,
an LLM judge on a loopback stub server) are damaged in each way a run directory can be short of
inputs: half its turns gone, ``generations.jsonl`` missing or empty, a failed turn, the rule
verdicts missing, one LLM verdict missing, the manifest missing. Every comparison surface, in every
format, is run against every damage:

- without ``--allow-incomplete``: refused, exit 2, one ``error:`` line naming the run and why, nothing
  on stdout and no file written;
- with it: the run is shown marked in that format (a visible mark and a footnote in Markdown, LaTeX
  and HTML; a field in JSON, CSV, JSON Lines and Parquet), exit 1. An unreadable run (no manifest)
  has no numbers: only the leaderboard lists it (as UNREADABLE); every other surface still refuses it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import require_extra
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import load_dataset, resolve_split
from studybench.evaluate import EvalSpec, run_eval
from studybench.llm_judge import LLMJudgeSpec
from studybench.report import (
    IncompleteRunError,
    build_report,
    load_run_report,
    require_complete,
    run_health,
)
from studybench.testing.stub_judge import judge_reply_fn
from studybench.testing.stub_server import start_stub_server

LIMIT = 6
SEEDS = [0, 1]

DAMAGES: dict[str, str] = {  # damage -> what the one-line refusal must say
    "half_turns": r"\d+ of \d+ turns not generated",
    "no_generations": r"generations\.jsonl is missing",
    "empty_generations": r"generations\.jsonl is empty",
    "failed_turn": r"1 of \d+ turns failed",
    "no_rule_verdicts": r"judgements\.jsonl is missing",
    "llm_verdict_missing": r"1 of \d+ LLM verdicts missing",
    "no_manifest": r"no manifest\.json",
}
UNREADABLE = {"no_manifest"}


def damage(src: Path, dst: Path, kind: str) -> Path:
    """A copy of run ``src`` at ``dst``, short of its inputs in one way (:data:`DAMAGES`)."""
    shutil.copytree(src, dst)
    gen, rule, llm = dst / "generations.jsonl", dst / "judgements.jsonl", dst / "llm_judgements.jsonl"
    if kind == "half_turns":  # a run stopped half-way: the second half of its turns never generated
        lines = gen.read_text().splitlines(keepends=True)
        gen.write_text("".join(lines[: len(lines) // 2]))
    elif kind == "no_generations":
        gen.unlink()
    elif kind == "empty_generations":
        gen.write_text("")
    elif kind == "failed_turn":  # the last request of one turn failed (HTTP 500), and was recorded and verified so
        row = json.loads(gen.read_text().splitlines()[0])
        row.update(error="HTTP 500: server error", completion="", finish_reason=None)
        verdict = json.loads(rule.read_text().splitlines()[0])
        assert [verdict[k] for k in ("parent", "sub_id", "seed", "attempt")] == [row[k] for k in ("parent", "sub_id", "seed", "attempt")]
        verdict.update(completion_digest=hashlib.sha256(b"").hexdigest(), generation_error=row["error"], correct=False,
                       extracted=[], reason="incorrect: generation failed (HTTP 500: server error)")
        with gen.open("a") as f:
            f.write(json.dumps(row) + "\n")
        with rule.open("a") as f:
            f.write(json.dumps(verdict) + "\n")
    elif kind == "no_rule_verdicts":
        rule.unlink()
    elif kind == "llm_verdict_missing":
        lines = llm.read_text().splitlines(keepends=True)
        assert lines, "the run has LLM verdicts"
        llm.write_text("".join(lines[1:]))
    elif kind == "no_manifest":
        (dst / "manifest.json").unlink()
    else:
        raise ValueError(kind)
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Any]:
    """``sol`` (reference solutions: some rule rejections, judged FALSE), ``gold`` (reference golds), ``guided``
    (``sol`` with guidance), all rule+llm on the first parents of the Transfer Set; and each damaged copy."""
    root = tmp_path_factory.mktemp("health")
    ds = load_dataset(resolve_split("transfer", data_dir))
    guidance = root / "guidance.jsonl"
    guidance.write_text("".join(json.dumps({"source": p.source, "year": p.year, "source_problem_id": p.source_problem_id,
                                            "problem_id": s.problem_id, "guidance": "Start from the conservation laws."}) + "\n"
                                for p in ds.parents[:LIMIT] for s in p.subs()))
    out: dict[str, Any] = {"root": root}
    with start_stub_server(judge_reply_fn(lambda x: False), model="stub-judge") as js:
        judge = LLMJudgeSpec(model="stub-judge", base_url=js.base_url, cache_dir=root / "cache")
        for name, mode, extra in (("sol", "solution", {"labels": {"method": "Base", "base": "Base"}}),
                                  ("gold", "gold", {"labels": {"method": "Gold", "base": "Base"}}),
                                  ("guided", "solution", {"guidance": guidance})):
            run_eval(EvalSpec(split="transfer", data_dir=data_dir, reference_mode=mode, k=1, seeds=SEEDS, limit=LIMIT,
                              verify_workers=1, judge=judge, **extra), root / name)
            out[name] = root / name
    for name in ("sol", "gold", "guided"):
        assert build_report(out[name])["complete"], name
    assert json.loads((out["sol"] / "report.json").read_text())["llm_judge"]["verdicts"]["FALSE"] > 0
    for kind in DAMAGES:
        for role in ("sol", "guided"):
            out[(kind, role)] = damage(out[role], root / "damaged" / f"{role}-{kind}", kind)
    return out


# ----------------------------------------------------------------------------- the library


def test_run_health_of_a_complete_run_is_in_report_json(runs: dict[str, Any]) -> None:
    rep = json.loads((runs["sol"] / "report.json").read_text())
    h = rep["health"]
    assert h == run_health(rep) and h["readable"] and h["complete"] and h["reasons"] == []
    assert h["turns_missing"] == 0 and h["turns_expected"] == rep["turns"]["expected"] > 0
    assert h["truncation_rate"] == 0.0 and h["unjudgeable_rate"] == 0.0 and h["llm_verdicts_missing"] == 0
    assert (h["rule_timeouts"], h["rule_internal_errors"]) == (0, 0)
    require_complete(runs["sol"], h)  # no error


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_load_run_report_says_why_a_damaged_run_is_incomplete(runs: dict[str, Any], kind: str) -> None:
    run = runs[(kind, "sol")]
    rep, h = load_run_report(run)
    assert not h["complete"] and re.search(DAMAGES[kind], "; ".join(h["reasons"])), h
    assert h["readable"] == (kind not in UNREADABLE) and (rep is None) == (kind in UNREADABLE)
    with pytest.raises(IncompleteRunError, match=re.escape(str(run)) + ": (incomplete|unreadable) run .*" + DAMAGES[kind]):
        require_complete(run, h)
    if kind in UNREADABLE:
        with pytest.raises(IncompleteRunError, match="even with --allow-incomplete"):
            require_complete(run, h, allow_incomplete=True)
    else:
        assert rep is not None and rep["health"] == h
        require_complete(run, h, allow_incomplete=True)  # allowed: no error


def test_reasons_come_from_the_report_when_it_lists_them_and_internal_errors_always_count() -> None:
    base = {"turns": {"expected": 10, "failed": 0, "missing_judgements": 0}, "not_generated": 0,
            "truncation": {"overall": {"truncated_share": 0.25}}}
    assert run_health(base)["complete"] and run_health(base)["truncation_rate"] == 0.25
    judged = {**base, "incomplete_reasons": ["the LLM judge pass did not finish: 3 verdicts missing"]}
    assert run_health(judged)["reasons"] == judged["incomplete_reasons"] and not run_health(judged)["complete"]
    assert run_health({**base, "incomplete_reasons": []})["complete"]
    internal = {**base, "turns": {**base["turns"], "rule_internal_errors": 2, "rule_timeouts": 1}}
    h = run_health(internal)
    assert not h["complete"] and h["reasons"] == ["2 rule verdicts are internal errors of the rule verifier"]
    assert (h["rule_timeouts"], h["rule_internal_errors"]) == (1, 2)
    llm = {**base, "llm_judge": {"rule_rejections": 4, "unjudgeable_rate": 0.5,
                                 "verdicts": {"TRUE": 1, "FALSE": 0, "unjudgeable": 1, "error": 1, "not judged": 1}}}
    h = run_health(llm)
    assert h["reasons"] == ["2 of 4 rule rejections have no LLM verdict (1 error, 1 not judged)"]
    assert (h["llm_verdicts_missing"], h["unjudgeable_rate"]) == (2, 0.5)


# ----------------------------------------------------------------------------- every surface, every format


def _files(tmp: Path) -> list[Path]:
    return sorted(p for p in tmp.rglob("*") if p.is_file())


def _leaderboard(runs: dict[str, Any], bad: Path, fmt: str, tmp: Path) -> list[str]:
    return ["leaderboard", str(runs["gold"]), str(bad), "--no-significance", "--format", fmt]


def _compare(runs: dict[str, Any], bad: Path, fmt: str, tmp: Path) -> list[str]:
    return ["compare", str(runs["gold"]), str(bad), "--resamples", "100", *(["--json"] if fmt == "json" else [])]


def _report_html(runs: dict[str, Any], bad: Path, fmt: str, tmp: Path) -> list[str]:
    return ["report", str(bad), "--html-out", str(tmp / "page.html")]


def _attempts(runs: dict[str, Any], bad: Path, fmt: str, tmp: Path) -> list[str]:
    return ["export", "attempts", str(bad), "--out", str(tmp / f"attempts.{fmt}")]


def _guidance_gap(runs: dict[str, Any], bad: Path, fmt: str, tmp: Path) -> list[str]:
    return ["guidance-gap", "--solo", str(runs["sol"]), "--guided", str(bad), "--format", fmt]


def _plateau(runs: dict[str, Any], bad: Path, fmt: str, tmp: Path) -> list[str]:
    snaps = tmp / "snapshots.csv"
    snaps.write_text(f"method,seed,gpu_hours,run_dir\nbase,0,,{runs['gold']}\nM,0,1,{bad}\nM,0,2,{runs['gold']}\n")
    return ["plateau", str(snaps), "--resamples", "100", "--out", str(tmp / "fig"), *(["--json"] if fmt == "json" else [])]


SURFACES: dict[str, tuple[Callable[..., list[str]], str, tuple[str, ...]]] = {  # name -> (args, damaged role, formats)
    "leaderboard": (_leaderboard, "sol", ("markdown", "latex", "csv", "json", "html")),
    "compare": (_compare, "sol", ("table", "json")),
    "report-html": (_report_html, "sol", ("html",)),
    "export-attempts": (_attempts, "sol", ("csv", "jsonl", "parquet")),
    "guidance-gap": (_guidance_gap, "guided", ("md", "latex", "csv", "json")),
    "plateau": (_plateau, "sol", ("table", "json")),
}
MATRIX = [(s, f, d) for s, (_, _, fmts) in SURFACES.items() for f in fmts for d in DAMAGES]


def _tex(text: str) -> str:
    return text.replace("_", "\\_")


def _assert_marked(surface: str, fmt: str, kind: str, bad: Path, res: Any, tmp: Path) -> None:
    """The damaged run is shown, marked in this format: a visible mark and why, or a field."""
    out, why, name = res.stdout, DAMAGES[kind], str(bad)
    if surface == "leaderboard":
        if kind in UNREADABLE:  # listed, without numbers
            if fmt == "json":
                entry = next(r for r in json.loads(out)["runs"] if r["run_dir"] == name)
                assert entry["readable"] is False and entry["complete"] is False and re.search(why, entry["reasons"][0])
            elif fmt == "csv":
                row = next(r for r in csv.DictReader(io.StringIO(out)) if r["method"] == name)
                assert row["health"].startswith(f"{name}: UNREADABLE") and re.search(why, row["health"])
            else:
                shown = _tex(name) if fmt == "latex" else name
                assert re.search(f"UNREADABLE {re.escape(shown)}: .*{why}", out), out
            return
        if fmt == "json":
            board = json.loads(out)
            cell = next(r for r in board["rows"] if r["method"] == "Base")["cells"]["transfer"]
            assert cell["complete"] is False and re.search(why, "; ".join(cell["health"]["reasons"]))
            gold = next(r for r in board["rows"] if r["method"] == "Gold")["cells"]["transfer"]
            assert gold["complete"] is True and gold["delta_against_complete_run"] is False  # its Δ is against the damaged base
            assert next(r for r in board["runs"] if r["run_dir"] == name)["complete"] is False
        elif fmt == "csv":
            rows = {r["method"]: r for r in csv.DictReader(io.StringIO(out))}
            assert rows["Base"]["transfer_complete"] == "False" and re.search(why, rows["Base"]["health"])
            assert rows["Gold"]["transfer_complete"] == "True" and rows["Gold"]["transfer_delta_against_complete_run"] == "False"
        else:
            shown = _tex(name) if fmt == "latex" else name
            assert "Base (incomplete)" in out and re.search(r"\d\.\d\d!", out), out  # every number of the run marked
            assert re.search(f"! INCOMPLETE {re.escape(shown)}: .*{why}", out), out  # the footnote says why
            row = out.split("Base (incomplete)")[1].split("\n")[0]
            assert "**" not in row and "textbf" not in row and 'class="best"' not in row  # never bold as a column's best
    elif surface == "compare":
        if fmt == "json":
            h = json.loads(out)["health"]
            assert h["a"]["complete"] is True and h["b"]["complete"] is False and re.search(why, "; ".join(h["b"]["reasons"]))
        else:
            assert "INCOMPLETE" in out and re.search(f"B \\({re.escape(name)}\\) is INCOMPLETE: .*{why}", out), out
    elif surface == "report-html":
        page = (tmp / "page.html").read_text()
        assert re.search(f'<p class="incomplete" id="incomplete">INCOMPLETE: [^<]*{why}', page)
    elif surface == "export-attempts":
        path = tmp / f"attempts.{fmt}"
        if fmt == "csv":
            rows: list[dict[str, Any]] = list(csv.DictReader(path.open(newline="")))
            assert rows and all(r["run_complete"] == "False" for r in rows)
        elif fmt == "jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            assert rows and all(r["run_complete"] is False for r in rows)
        else:
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
            assert rows and all(r["run_complete"] is False for r in rows)
        assert all(re.search(why, r["run_health"]) for r in rows)
    elif surface == "guidance-gap":
        if fmt == "json":
            row = json.loads(out)[0]
            assert row["complete"] is False and row["guided_health"]["complete"] is False and row["solo_health"]["complete"] is True
            assert re.search(why, "; ".join(row["guided_health"]["reasons"]))
        elif fmt == "csv":
            row = next(csv.DictReader(io.StringIO(out)))
            assert row["complete"] == "False" and re.search(why, row["health"])
        else:
            shown = _tex(name) if fmt == "latex" else name
            assert "(incomplete)" in out and re.search(r"\d\.\d\d!", out), out
            assert re.search(f"! INCOMPLETE {re.escape(shown)}: .*{why}", out), out
    elif surface == "plateau":
        if fmt == "json":
            doc = json.loads(out)
            assert doc["health"][name]["complete"] is False and re.search(why, "; ".join(doc["health"][name]["reasons"]))
            assert [s["complete"] for s in doc["methods"]["M"]["snapshots"]] == [False, True] and doc["incomplete"] == [name]
        else:
            assert "M (incomplete)" in out and "! (incomplete)" in out and "INCOMPLETE" in out
            assert re.search(f"! INCOMPLETE {re.escape(name)}: .*{why}", " ".join(out.split())), out


@pytest.mark.parametrize(("surface", "fmt", "kind"), MATRIX, ids=[f"{s}-{f}-{d}" for s, f, d in MATRIX])
def test_every_surface_refuses_a_damaged_run_and_marks_it_when_allowed(
        runs: dict[str, Any], tmp_path: Path, surface: str, fmt: str, kind: str) -> None:
    if surface == "export-attempts" and fmt == "parquet" or surface in ("report-html", "leaderboard") and fmt == "html":
        require_extra("analysis", "pyarrow", "jinja2", "matplotlib")
    if surface == "plateau":
        require_extra("analysis", "numpy", "matplotlib")
    if surface == "compare":
        require_extra("analysis", "numpy", "scipy", "statsmodels")
    args, role, _ = SURFACES[surface]
    bad = runs[(kind, role)]
    cli = CliRunner(env={"COLUMNS": "250"})  # Rich tables unwrapped
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    res = cli.invoke(app, args(runs, bad, fmt, out_dir), catch_exceptions=False)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert res.exit_code == 2, res.output
    assert len(errors) == 1 and str(bad) in errors[0] and re.search(DAMAGES[kind], errors[0]), res.stderr
    assert res.stdout == "" and _files(out_dir) == [p for p in _files(out_dir) if p.name == "snapshots.csv"]

    res = cli.invoke(app, [*args(runs, bad, fmt, out_dir), "--allow-incomplete"], catch_exceptions=False)
    if kind in UNREADABLE and surface != "leaderboard":  # no numbers to show: refused even when allowed
        assert res.exit_code == 2 and str(bad) in res.stderr and "no manifest.json" in res.stderr, res.output
        return
    assert res.exit_code == 1, res.output  # shown, marked, and still not a success
    assert f"warning: {bad}: " in res.stderr and ("INCOMPLETE" in res.stderr or "UNREADABLE" in res.stderr)
    _assert_marked(surface, fmt, kind, bad, res, out_dir)


# ----------------------------------------------------------------------------- more of the same rule


def test_a_complete_set_exits_0_and_still_shows_each_runs_health(runs: dict[str, Any], tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["leaderboard", str(runs["sol"]), str(runs["gold"]), "--resamples", "200"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "Run health:" in res.stdout and f"| {runs['sol']} | complete | 0 of " in res.stdout and "!" not in res.stdout
    board = json.loads(CliRunner().invoke(app, ["leaderboard", str(runs["sol"]), str(runs["gold"]), "--no-significance",
                                                "--format", "json"]).stdout)
    assert [r["complete"] for r in board["runs"]] == [True, True]


def test_incomplete_runs_are_marked_with_significance_tests_too(runs: dict[str, Any]) -> None:
    require_extra("analysis", "numpy", "scipy", "statsmodels")
    bad = runs[("half_turns", "sol")]
    res = CliRunner().invoke(app, ["leaderboard", str(runs["gold"]), str(bad), "--resamples", "200", "--allow-incomplete"],
                             catch_exceptions=False)
    assert res.exit_code == 1 and "Base (incomplete)" in res.stdout
    gold = next(line for line in res.stdout.splitlines() if line.startswith("| Gold"))
    delta = gold.rstrip(" |").split("|")[-1].strip()
    assert delta.endswith("!") and "**" not in delta  # Δ against an incomplete base: marked, never bold
    assert "**100.00 ± 0.00**" in gold  # the complete run's own numbers stay as they are


def test_a_glob_keeps_a_damaged_run_directory_and_skips_other_folders(runs: dict[str, Any], tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(runs["gold"], root / "gold")
    shutil.copytree(runs[("no_manifest", "sol")], root / "broken")
    (root / "plots").mkdir()  # not a run: skipped as before
    res = CliRunner().invoke(app, ["leaderboard", str(root / "*"), "--no-significance"], catch_exceptions=False)
    assert res.exit_code == 2 and f"{root / 'broken'}: unreadable run" in res.stderr
    res = CliRunner().invoke(app, ["leaderboard", str(root / "*"), "--no-significance", "--allow-incomplete"],
                             catch_exceptions=False)
    assert res.exit_code == 1 and f"UNREADABLE {root / 'broken'}" in res.stdout and "plots" not in res.stdout


def test_an_unreadable_run_alone_is_no_leaderboard(runs: dict[str, Any]) -> None:
    bad = runs[("no_manifest", "sol")]
    res = CliRunner().invoke(app, ["leaderboard", str(bad), "--allow-incomplete", "--no-significance"], catch_exceptions=False)
    assert res.exit_code == 2 and "no readable run directories" in res.stderr
