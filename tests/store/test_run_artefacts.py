"""Method artefacts are stored with the run, so reports show exactly what the model saw (issue 24 item 8).

A run made with ``--system-prompt`` (GEPA; an EvoSkill skills folder inlined), ``--playbook`` (ACE) or
``--guidance`` keeps the exact text used in ``RUN/artefacts/``, referenced from the manifest with
digests; report.md and the HTML report show them, and resuming still works.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from _support import parent, require_extra, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.protocol import DEFAULT_SYSTEM_PROMPT, load_artefacts
from studybench.store import read_stored_artefacts

ACE = "## STRATEGIES\n[str-00001] helpful=3 harmful=0 :: Draw a free-body diagram.\n"
SET = [parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?")], year="2020", problem="A block.")]
GUIDANCE = [{"source": "S", "year": "2020", "source_problem_id": "P1", "problem_id": "a", "guidance": "Use energy."}]

KINDS = {
    "system prompt": {"--system-prompt": ("prompt.md", "\n  You are a careful physicist (GEPA-evolved).  \n\n")},
    "playbook": {"--playbook": ("playbook.md", ACE)},
    "guidance": {"--guidance": ("hints.json", json.dumps(GUIDANCE))},
    "system prompt and guidance": {"--system-prompt": ("prompt.md", "Evolved skills:\n- be careful\n"),
                                   "--guidance": ("hints.jsonl", json.dumps(GUIDANCE[0]) + "\n")},
}


def _eval(tmp_path: Path, flags: dict[str, tuple[str, str]], out: Path) -> tuple[Any, list[str]]:
    split = write_set(tmp_path / "set.json", SET)
    args = ["eval", "--split", str(split), "-k", "1", "--seeds", "1", "--out", str(out), "--verify-workers", "1"]
    for flag, (name, text) in flags.items():
        (tmp_path / name).write_text(text)
        args += [flag, str(tmp_path / name)]
    return CliRunner().invoke(app, args), args


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_run_keeps_the_exact_artefacts_the_model_saw_and_resumes(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "run"
    res, args = _eval(tmp_path, KINDS[kind], out)
    assert res.exit_code == 0, res.output
    flags = KINDS[kind]
    art = load_artefacts(*(tmp_path / flags[f][0] if f in flags else None for f in ("--system-prompt", "--playbook", "--guidance")))
    man = json.loads((out / "manifest.json").read_text())
    stored = man["artefacts"]["stored"]
    expected = {"--system-prompt": ["system_prompt", "system_message"], "--playbook": ["playbook", "system_message"],
                "--guidance": ["guidance"]}
    assert sorted(stored) == sorted({n for f in flags for n in expected[f]})
    for ref in stored.values():
        path = out / ref["path"]
        assert path.parent == out / "artefacts" and path.is_file()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == ref["sha256"]
        assert not list(path.parent.glob(".*tmp*"))  # written then renamed
    if "system_message" in stored:  # exactly the system message of every turn
        assert (out / "artefacts" / "system_message.txt").read_text() == art.system_message() != DEFAULT_SYSTEM_PROMPT
    if "playbook" in stored:
        assert "[str-00001]" not in (out / "artefacts" / "playbook.txt").read_text()  # the cleaned text the model saw
    kept, why = read_stored_artefacts(out, man["artefacts"])
    assert why is None and kept is not None
    assert (kept.system_message(), kept.guidance) == (art.system_message(), art.guidance)
    # the reports show them
    rep = json.loads((out / "report.json").read_text())
    assert rep["artefacts"] == {n: {"path": r["path"], "sha256": r["sha256"]} for n, r in stored.items()}
    md = (out / "report.md").read_text()
    assert "## Method artefacts" in md and all(f"[{r['path']}]({r['path']})" in md for r in stored.values())
    # the same command resumes (the digests of the files given decide, as before)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "resuming" in again.output, again.output
    assert json.loads((out / "manifest.json").read_text())["artefacts"]["stored"] == stored


def test_a_run_without_artefacts_keeps_none_and_its_report_is_unchanged(tmp_path: Path) -> None:
    res, _ = _eval(tmp_path, {}, tmp_path / "run")
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "run" / "artefacts").exists()
    assert "stored" not in json.loads((tmp_path / "run" / "manifest.json").read_text())["artefacts"]
    assert "artefacts" not in json.loads((tmp_path / "run" / "report.json").read_text())
    assert "Method artefacts" not in (tmp_path / "run" / "report.md").read_text()


def test_the_html_report_shows_the_kept_artefacts_and_notices_a_changed_one(tmp_path: Path) -> None:
    require_extra("analysis", "jinja2", "matplotlib")
    from studybench.analysis.html import html_report

    out = tmp_path / "run"
    res, _ = _eval(tmp_path, KINDS["system prompt and guidance"], out)
    assert res.exit_code == 0, res.output
    page = html_report(out)
    assert "does not keep" not in page and 'href="artefacts/system_prompt.txt"' in page
    assert "Evolved skills:" in page and "Use energy." in page  # the system message and the hint the model saw
    (out / "artefacts" / "system_prompt.txt").write_text("something else")
    page = html_report(out)
    assert "cannot be used" in page and "sha256 differs" in page
