"""``--version``, and ``--help`` pages and tables that read well in an 80-column terminal."""

from __future__ import annotations

import io
import json
import re

import pytest
import typer
from _support import FIXTURES
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from studybench import __version__
from studybench.analysis.consistency import render_consistency_markdown
from studybench.cli import app
from studybench.cli.show import TerminalMarkdown

FIXTURE = FIXTURES / "run_v010"


def _invoke(*args: str, columns: int = 80) -> object:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns), "TERMINAL_WIDTH": None}, catch_exceptions=False)


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and group of the CLI, found by walking it (so a new command is checked too)."""
    root = typer.main.get_command(app)
    out: list[tuple[str, ...]] = [()]

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            if not sub.hidden:
                out.append((*path, name))
                walk(sub, (*path, name))

    walk(root, ())
    return out


COMMANDS = _command_paths()


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"eval", "report", "judge", "consistency", "verify", "verify-file", "data check", "corpus audit",
            "audit contamination"} <= names


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_option(flag: str) -> None:
    res = _invoke(flag)
    assert res.exit_code == 0  # type: ignore[attr-defined]
    assert res.output.strip() == __version__  # type: ignore[attr-defined]


def test_short_help_option() -> None:
    res = _invoke("report", "-h")
    assert res.exit_code == 0 and "Usage:" in res.output and "RUN_DIR" in res.output  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "studybench")
def test_help_at_80_columns(path: tuple[str, ...]) -> None:
    res = _invoke(*path, "--help")
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    text: str = res.output  # type: ignore[attr-defined]
    too_long = [ln for ln in text.splitlines() if cell_len(ln) > 80]
    assert not too_long, too_long
    assert not re.search(r"<(bool|int|float|str|path|text)>", text, re.IGNORECASE), text
    usage = next(ln for ln in text.splitlines() if "Usage:" in ln)
    assert "{" not in usage and "}" not in usage, usage
    # docstrings are re-flowed: outside the panels, a short line ends a paragraph (a line break
    # kept from the source, "... LLM judge and the\nreport scores ...", would leave one in mid-paragraph)
    lines = text.splitlines()
    for i, ln in enumerate(lines[:-1]):
        if ln.strip() and not ln.lstrip().startswith(("│", "╭", "╰", "Usage:")) and len(ln.strip()) < 50:
            assert not lines[i + 1].strip() or lines[i + 1].lstrip()[:1] in "│╭╰", (ln, lines[i + 1])


def _help_column(text: str, flag: str, words: str) -> int:
    """Width of the help column in the row of ``flag``, measured where its help text ``words`` starts."""
    for ln in text.splitlines():
        if flag in ln and words in ln:
            return 80 - 2 - ln.index(words)
    raise AssertionError(f"{flag} / {words!r} not on one line:\n{text}")


@pytest.mark.parametrize(("command", "flag", "words"), [
    ("eval", "--out", "Run directory"),
    ("eval", "--max-retries", "Retries per turn"),
    ("eval", "--judge-request-timeout", "Seconds per judge"),
    ("judge", "--refresh", "Judge again"),
    ("audit contamination", "--containment-threshold", "Stage 1b"),
])
def test_option_help_gets_a_wide_column(command: str, flag: str, words: str) -> None:
    text = _invoke(*command.split(), "--help").output  # type: ignore[attr-defined]
    assert _help_column(text, flag, words) >= 38


def test_metavars_read_as_words() -> None:
    text = _invoke("eval", "--help", columns=120).output  # type: ignore[attr-defined]
    for shown in ("-k, --k N", "--request-timeout SECONDS", "--judge-cache DIR", "--judge-model MODEL",
                  "--thinking / --no-thinking", "--judge-prompt NAME|FILE"):
        assert shown in text, shown
    row = next(ln for ln in text.splitlines() if "--only-verify" in ln)
    assert row.split("--only-verify")[1].lstrip().startswith("Verify existing turns")  # a flag has no metavar
    assert "Usage:" in (usage := _invoke("verify", "--help").output) and "[OPTIONS] GOLD RESPONSE" in usage  # type: ignore[attr-defined]


def test_commands_list_reflows_docstrings() -> None:
    text = _invoke("--help").output  # type: ignore[attr-defined]
    row = next(ln for ln in text.splitlines() if "precision and" in ln)
    assert "recall" in row, text  # not "...precision and" / "recall w.r.t. ..." as in the docstring


def test_wide_help_is_not_stretched_over_a_wide_terminal() -> None:
    text = _invoke("eval", "--help", columns=200).output  # type: ignore[attr-defined]
    assert max(cell_len(ln) for ln in text.splitlines()) <= 100
    row = next(ln for ln in text.splitlines() if "--judge-request-timeout" in ln)
    assert "Seconds per judge HTTP request. [default: 300.0]" in row


def test_help_survives_a_very_narrow_terminal() -> None:
    text = _invoke("judge", "--help", columns=50).output  # type: ignore[attr-defined]
    assert "--judge-rule-accepts" in text and "--activate / --no-activate" in text
    assert max(cell_len(ln) for ln in text.splitlines()) <= 50


# --------------------------------------------------------------------------- tables


def _consistency(models: dict[str, str]) -> dict[str, object]:
    rep = json.loads((FIXTURE / "consistency.json").read_text())
    for jid, model in models.items():
        rep["judges"][jid]["model"] = model
    return rep


def _render(markdown: str, width: int = 80) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(TerminalMarkdown(markdown))
    return buf.getvalue()


def test_consistency_tables_name_judge_models_and_cut_nothing_at_80_columns() -> None:
    rep = _consistency({"2c5e80ee84a715c8": "Qwen/Qwen3-32B", "e10251786cd46994": "gpt-oss-120b"})
    md = render_consistency_markdown(rep)
    assert "| Qwen/Qwen3-32B | gpt-oss-120b |" in md  # the pairs table names models, not 16-hex ids
    out = _render(md)
    assert "…" not in out, out
    assert max(cell_len(ln) for ln in out.splitlines()) <= 80
    for word in ("unjudgeable", "precision", "agreement", "Qwen/Qwen3-32B", "gpt-oss-120b"):
        assert re.search(rf"(^|\s){re.escape(word)}(\s|$)", out, re.MULTILINE), word


def test_a_judge_model_too_long_for_its_column_is_folded_not_cut() -> None:
    long = "org/" + "a-very-long-judge-model-name-" * 3 + "Instruct-2507"
    out = _render(render_consistency_markdown(_consistency({"2c5e80ee84a715c8": long, "e10251786cd46994": "short"})))
    assert "…" not in out, out
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["A", "B"]) + 2  # header, rule
    pieces = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        pieces.append(ln.split()[0])  # column A comes first; its folded pieces hold no blank
    assert "".join(pieces) == long, out


def test_judges_sharing_a_model_are_told_apart() -> None:
    md = render_consistency_markdown(_consistency({"2c5e80ee84a715c8": "m", "e10251786cd46994": "m"}))
    assert "| m (2c5e80ee84a715c8) | m (e10251786cd46994) |" in md


def test_one_option_name_per_setting_across_commands() -> None:
    """The same setting has the same flag everywhere (the embedding model was --embed-model on one stage)."""
    root = typer.main.get_command(app)
    names: dict[str, set[str]] = {}

    def walk(cmd: object) -> None:
        for p in getattr(cmd, "params", []):
            if p.param_type_name == "option" and "embed" in (p.name or "") and "model" in (p.name or ""):
                names.setdefault("embedding model", set()).add(p.opts[0])
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(root)
    assert names == {"embedding model": {"--embedding-model"}}
    res = _invoke("build", "retrieve", "--help", columns=250)
    assert "--embedding-model" in res.output and "--embed-model" in res.output  # the old name stays an alias
