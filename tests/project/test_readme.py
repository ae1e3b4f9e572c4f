"""The documented examples run and print what the docs show: "From Python" (docs/guides/evaluate.md),
the minimal test set (docs/guides/build-testset.md) and the stub rehearsal (docs/guides/rehearse.md).
They lived in the README until it became a short overview with links into docs/."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from _support import REPO

DOCS = REPO / "docs"
PAGES = {"From Python": "guides/evaluate.md", "Build your own test set": "guides/build-testset.md",
         "Rehearse a pipeline with the stub server": "guides/rehearse.md"}


def _section(title: str) -> str:
    """The section ``## title`` of the page that holds it, up to the next ``## `` heading."""
    text = (DOCS / PAGES[title]).read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 3)
    return text[start:] if end < 0 else text[start:end]


def test_from_python_example_prints_what_the_docs_say(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = _section("From Python")
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    shown = re.search(r"```\n(.*?)```", section[code.end():] if code else "", re.DOTALL)
    assert code and shown, "the section needs a python block followed by its output"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STUDYBENCH_DATA", str(data_dir))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(DOCS / PAGES["From Python"]), "exec"), {"__name__": "readme_example"})  # our own docs, not input
    assert out.getvalue() == shown.group(1)
    assert (tmp_path / "runs" / "python-demo" / "report.json").is_file()


def _json_block(section: str, n: int = 0) -> str:
    return re.findall(r"```json\n(.*?)```", section, re.DOTALL)[n]


def test_own_test_set_example_loads_and_the_reference_run_accepts_every_gold(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from studybench.cli import app

    path = tmp_path / "my_set.json"
    path.write_text(_json_block(_section("Build your own test set")), encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["data", "check", "--split", str(path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    ids = runner.invoke(app, ["data", "ids", "--split", str(path)], catch_exceptions=False)
    assert ids.exit_code == 0 and "Ex 4.1(b)" in ids.output
    res = runner.invoke(app, ["eval", "--split", str(path), "--model", "reference", "-k", "1", "--seeds", "1",
                              "--out", str(tmp_path / "run")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    assert rep["par_at_k"]["mean"] == rep["sub_at_k"]["mean"] == 100.0


def test_stub_rehearsal_example_scores_what_the_docs_say(tmp_path: Path) -> None:
    from studybench.evaluate import EvalSpec, run_eval
    from studybench.testing import Script, start_stub_server

    section = _section("Rehearse a pipeline with the stub server")
    data = tmp_path / "my_set.json"
    data.write_text(_json_block(_section("Build your own test set")), encoding="utf-8")
    script = Script.from_dict(json.loads(_json_block(section)))
    claim = re.search(r"Par@1 = ([\d.]+), Sub@1 = ([\d.]+), and the report\s+counts one truncated turn", section)
    assert claim, "the section states the scores it expects"
    with start_stub_server(script, model="stub") as srv:
        result = run_eval(EvalSpec(split=str(data), model="stub", base_url=srv.base_url, k=1, seeds=[0]), tmp_path / "run")
        assert srv.count == 3 + 2  # three turns, two of them asked again after the injected faults
    rep = result.report
    assert rep is not None
    shown = (f"{rep['par_at_k']['mean']:.2f}", f"{rep['sub_at_k']['mean']:.2f}")  # as the report prints them
    assert shown == (claim.group(1), claim.group(2))
    assert rep["truncation"]["overall"]["truncated"] == 1
    assert rep["turns"]["failed"] == 0
