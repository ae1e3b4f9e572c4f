"""A custom split prints under its own name and counts agree in number, in every leaderboard format.

A run on ``my_set.json`` is on the split ``my_set``: the leaderboard (library and command; Markdown,
LaTeX, CSV, JSON and HTML) heads its columns ``my_set``, never ``My_set`` (only the official splits
keep the paper's headings ``Application`` / ``Transfer``), and says "over 1 seed" / "over 3 seeds".
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from _support import write_set
from typer.testing import CliRunner

from studybench.analysis.leaderboard import FORMATS, build_leaderboard, render_leaderboard
from studybench.cli import app
from studybench.datasets import OFFICIAL_SPLITS, split_title
from studybench.evaluate import EvalSpec, run_eval

SEEDS = {1: [0], 3: [0, 1, 2]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    root = tmp_path_factory.mktemp("names")
    out = {}
    for name in ("my_set", "application"):  # a custom name, and a file named like an official split
        data = write_set(root / f"{name}.json", 3)
        for n, seeds in SEEDS.items():
            run = root / f"{name}-{n}"
            run_eval(EvalSpec(split=str(data), model="reference", k=1, seeds=seeds, verify_workers=1), run)
            out[(name, n)] = run
    return out


def _render(board: dict, fmt: str) -> str:
    if fmt == "html":
        pytest.importorskip("jinja2")
        pytest.importorskip("matplotlib")
    text = render_leaderboard(board, fmt)
    return html.unescape(text) if fmt == "html" else text.replace(r"\_", "_") if fmt == "latex" else text


@pytest.mark.parametrize("n", sorted(SEEDS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_custom_split_prints_as_it_is_named(runs: dict[tuple[str, int], Path], fmt: str, n: int) -> None:
    board = build_leaderboard([runs[("my_set", n)]], significance=False)
    text = _render(board, fmt)
    assert "my_set" in text and "My_set" not in text and "MY_SET" not in text
    if fmt in ("markdown", "latex"):
        assert "my_set Par@1" in text
    if fmt in ("markdown", "html"):
        seeds = ", ".join(map(str, SEEDS[n]))
        assert f"over {n} seed{'s' if n != 1 else ''} ({seeds})" in text
        assert "over 1 seeds" not in text
    if fmt == "json":
        assert json.loads(text)["splits"] == ["my_set"]


@pytest.mark.parametrize("fmt", ("markdown", "latex", "html"))
def test_an_official_split_keeps_the_papers_heading(runs: dict[tuple[str, int], Path], fmt: str) -> None:
    text = _render(build_leaderboard([runs[("application", 3)]], significance=False), fmt)
    assert "Application" in text


def test_the_command_prints_the_split_and_the_seeds_as_they_are(runs: dict[tuple[str, int], Path], tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["leaderboard", str(runs[("my_set", 1)]), "--format", "markdown", "--no-significance"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "| my_set Par@1 |" in res.output and "over 1 seed (0)" in res.output
    assert "My_set" not in res.output and "1 seeds" not in res.output


@pytest.mark.parametrize("name", [*OFFICIAL_SPLITS, "my_set", "My Set", "application_v2", "transfer-2026", "ÉTÉ", ""])
def test_split_title_keeps_every_name_but_the_official_ones(name: str) -> None:
    assert split_title(name) == (name.capitalize() if name in OFFICIAL_SPLITS else name)
