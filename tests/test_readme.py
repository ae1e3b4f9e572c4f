"""The README's "From Python" example runs and prints what the README shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 3)
    return text[start:end]


def test_from_python_example_prints_what_the_readme_says(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = _section("From Python")
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    shown = re.search(r"```\n(.*?)```", section[code.end():] if code else "", re.DOTALL)
    assert code and shown, "the section needs a python block followed by its output"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STUDYBENCH_DATA", str(data_dir))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(README), "exec"), {"__name__": "readme_example"})  # our own README, not input
    assert out.getvalue() == shown.group(1)
    assert (tmp_path / "runs" / "python-demo" / "report.json").is_file()
