"""The errata line of a run on a test set that is not official says what is true there, in every output.

The errata correct golds of the official test sets (``datasets.OFFICIAL_SPLITS``). A run on a test set
of one's own (``eval --split my_set.json``) still records the errata setting; its report (JSON,
Markdown, HTML, the console of ``eval`` and ``report``) must not call its golds "official" or "the
paper's": it says no erratum applies, or, for a set holding official parents unchanged, which of its
golds the errata list as wrong. Generated over every errata setting and both kinds of custom set.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from _support import parent, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.report.errata import errata_line

MODES = ("official", "apply", "exclude")
KINDS = ("own", "official-parents")


def _custom_set(kind: str, tmp_path: Path, data_dir: Path | None) -> Path:
    if kind == "own":
        return write_set(tmp_path / "my_set.json", [parent("Ex 1", source="MyBook", year="2026", answer="\\boxed{2}",
                                                           answer_type="NV", problem="One plus one?")])
    assert data_dir is not None
    records = json.loads((data_dir / "transfer.json").read_text())
    records = records.get("data", records) if isinstance(records, dict) else records
    keep = [r for r in records if (r.get("source"), str(r.get("year"))) == ("IPhO", "1972")
            and r.get("source_problem_id") in ("Q2", "Q3")]  # Q3 holds an erratum, Q2 none
    assert len(keep) == 2
    return write_set(tmp_path / "my_subset.json", keep)


def _outputs(run: Path, console: str, data_dir: Path | None) -> dict[str, str]:
    out = {"json": json.dumps(json.loads((run / "report.json").read_text())["errata"]),
           "markdown": (run / "report.md").read_text(), "console": " ".join(console.split())}
    res = CliRunner().invoke(app, ["report", str(run)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out["report command"] = " ".join(res.output.split())
    try:
        from studybench.analysis.html import html_report

        out["html"] = html.unescape(html_report(run, data_dir=data_dir))
    except ImportError:  # the analysis extra is not installed: the other outputs still count
        pass
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_no_output_of_a_custom_set_run_calls_its_golds_official(kind: str, mode: str, tmp_path: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    data_dir = request.getfixturevalue("data_dir") if kind == "official-parents" else None
    path = _custom_set(kind, tmp_path, data_dir)
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["eval", "--split", str(path), "--model", "reference", "-k", "1", "--seeds", "1",
                                   "--errata", mode, "--out", str(run)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    block = json.loads((run / "report.json").read_text())["errata"]
    assert block["mode"] == mode and block["official_test_set"] is False and block["split"] == path.stem
    line = errata_line(block)
    assert line is not None
    for name, text in _outputs(run, res.output, data_dir).items():
        if name != "json":
            assert line in text, (name, line)
        assert "official golds" not in text and "the paper's" not in text, (name, text[:2000])
    if kind == "own":
        assert line.startswith(f"Errata: none apply: {path.stem} is not an official test set")
        assert ("changed nothing" in line) == (mode != "official")
    elif mode == "exclude":
        assert line == "Errata: parents holding an erratum left out (--errata exclude); left out: 1 parent (IPhO/1972/Q3)."
    else:
        assert "1 sub-problem of this selection (1 parent) has an erratum of the official test sets: " \
               "1 of 2 attempts touches it" in line
        assert line.startswith("Errata: the test set's golds as given;" if mode == "official"
                               else "Errata: scored with the corrected golds (--errata apply);")


def _block(mode: str, official: bool | None, n: int = 0, dropped: int = 0) -> dict[str, object]:
    b: dict[str, object] = {"mode": mode, "sub_problems": n, "parents": n, "attempts": n, "of_attempts": 4,
                            "dropped": {f"P{i}": "why" for i in range(dropped)}, "split": "application" if official else "my_set"}
    if official is not None:
        b["official_test_set"] = official
    return b


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [0, 1, 2])
def test_the_errata_line_of_an_official_set_keeps_its_wording(mode: str, n: int) -> None:
    dropped = n if mode == "exclude" else 0
    line = errata_line(_block(mode, True, n, dropped))
    assert line == errata_line(_block(mode, None, n, dropped))  # a report written before the key reads as official
    assert line is not None and "none apply" not in line and "as given" not in line
    if mode != "exclude":
        assert ("official golds (the paper's)" in line) == (mode == "official")
        assert ("not the paper's golds" in line) == (mode == "apply")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [0, 1, 2])
def test_the_errata_line_of_a_custom_set_never_says_official_golds(mode: str, n: int) -> None:
    dropped = n if mode == "exclude" else 0
    line = errata_line(_block(mode, False, n if mode != "exclude" else 0, dropped))
    assert line is not None and "official golds" not in line and "the paper's" not in line
    assert ("none apply" in line) == (n == 0)


@pytest.mark.parametrize("a,of,n", [(1, 1, 1), (1, 4, 1), (2, 4, 2), (0, 1, 0)])
def test_the_errata_counts_agree_in_number(a: int, of: int, n: int) -> None:
    line = errata_line({"mode": "official", "sub_problems": n, "parents": n, "attempts": a, "of_attempts": of,
                        "dropped": {}, "official_test_set": True}) or ""
    if n:
        assert f"{a} of {of} attempt{'s' if of != 1 else ''} {'touches' if a == 1 else 'touch'} " in line
    assert "1 attempts" not in line and "1 sub-problems" not in line and "1 parents" not in line

