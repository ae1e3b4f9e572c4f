"""Construction and corpus commands show progress on every step that walks the corpus or asks a model.

Run with ``STUDYBENCH_PROGRESS=lines`` (what a log or a pipe gets), each command prints the line of its phase
when it starts and ends (:class:`studybench.cli.progress.LineProgress`), so the count it ends on is checked;
no timing. Before, ``build fragments``, ``corpus clean|redact|audit``, ``build guide`` and the filter runs of
``build retry|capability`` printed nothing until they finished.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.testing.stub_script import message_text
from studybench.testing.stub_server import start_stub_server

PARENTS = [{"source": "Book", "year": "2020", "source_problem_id": f"P{i}", "problem_type": "Mechanics",
            "source_kind": "textbook_problem", "problem": f"A block of mass {i + 2} kg slides down a ramp number {i}.",
            "sub_problems": [{"problem_id": "a", "problem": "Find its acceleration.", "answer": f"\\boxed{{{i + 1}}}",
                              "answer_type": "NV",
                              "knowledge_points": [{"type": "law_or_equation", "name": f"Newton law {i}",
                                                    "description": "F = ma", "keywords": ["force"]}]}]}
           for i in range(3)]
CHAPTERS = 4


def _books(root: Path) -> Path:
    books = root / "books"
    for n in range(CHAPTERS):
        d = books / "Book" / f"ch{n:02d}"
        d.mkdir(parents=True)
        body = f"# Chapter {n}\n\n" + f"Newton's second law says force equals mass times acceleration {n}. " * 20 + "\n"
        for name in ("full.md", "clean.md", "clean.redacted.md"):
            (d / name).write_text(body, encoding="utf-8")
    return books


def _lines(output: str, phase: str) -> list[str]:
    return [x for x in output.splitlines() if x.startswith(f"{phase}: ")]


def _invoke(args: list[str]) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], env={"STUDYBENCH_PROGRESS": "lines", "COLUMNS": "200"},
                              catch_exceptions=False)


@pytest.mark.parametrize(("command", "phase", "last"), [
    (["build", "fragments", "--books", "{books}", "--work", "{tmp}/w"], "fragments", f"{CHAPTERS}/{CHAPTERS} chapters"),
    (["corpus", "clean", "--books", "{books}"], "clean", f"{CHAPTERS} chapters"),
    (["corpus", "redact", "--books", "{books}", "--split", "{split}"], "redact", f"{CHAPTERS} chapters"),
    (["corpus", "audit", "--books", "{books}", "--split", "{split}"], "audit", f"{CHAPTERS} files"),
], ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else None)
def test_corpus_steps_report_progress(command: list[str], phase: str, last: str, tmp_path: Path) -> None:
    pytest.importorskip("pypandoc") if command[:2] == ["build", "fragments"] else None
    books = _books(tmp_path)
    split = tmp_path / "set.json"
    split.write_text(json.dumps(PARENTS), encoding="utf-8")
    res = _invoke([a.format(books=books, tmp=tmp_path, split=split) for a in command])
    assert res.exit_code in (0, 1), res.output  # corpus audit: 1 when a parent has no marker
    lines = _lines(res.output, phase)
    assert lines, res.output
    assert lines[-1].startswith(f"{phase}: {last}"), lines


def test_retrieve_reports_each_step(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    books = _books(tmp_path)
    work = tmp_path / "w"
    assert _invoke(["build", "fragments", "--books", books, "--work", work]).exit_code == 0
    split = tmp_path / "set.json"
    split.write_text(json.dumps(PARENTS), encoding="utf-8")
    res = _invoke(["build", "retrieve", "--work", work, "--from-split", split, "--mode", "bm25"])
    assert res.exit_code == 0, res.output
    assert _lines(res.output, "indexing fragments")[-1].startswith(f"indexing fragments: {CHAPTERS}/{CHAPTERS}")
    assert _lines(res.output, "retrieving KPs")[-1].startswith("retrieving KPs: 3/3")


def test_guide_reports_sub_problems(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    split = tmp_path / "set.json"
    split.write_text(json.dumps(PARENTS), encoding="utf-8")
    (work / "fragments.jsonl").write_text(json.dumps({"fragment_id": "f1", "text": "F = ma.", "book": "OS"}) + "\n")
    (work / "coverage.jsonl").write_text("".join(json.dumps({
        "key": {"source": "Book", "year": "2020", "source_problem_id": p["source_problem_id"], "problem_id": "a"},
        "status": "covered", "kps": [{"kp_id": "k1", "name": "Newton's second law", "type": "law", "covered": True,
                                      "matches": [{"fragment_id": "f1", "score": 3, "kind": "exposition"}]}]}) + "\n"
        for p in PARENTS))

    def reply(body: dict) -> str:
        if message_text(body["messages"][0]["content"]).startswith("You review"):
            return "{}"  # unreadable reviews: the rows still end (sanitised fallbacks)
        return "Apply Newton's second law along the ramp and resolve the weight into components."

    with start_stub_server(reply) as srv:
        res = _invoke(["build", "guide", "--work", work, "--teacher", "m", "--split", split, "--base-url", srv.base_url])
    assert res.exit_code == 0, res.output
    assert any(x.startswith("guide: 3/3 sub-problems") for x in _lines(res.output, "guide")), res.output


def test_filter_runs_report_turns(tmp_path: Path) -> None:
    split = tmp_path / "set.json"
    split.write_text(json.dumps(PARENTS), encoding="utf-8")
    with start_stub_server(lambda body: "Final Answer: \\boxed{1}") as srv:
        res = _invoke(["build", "capability", "--split", split, "--model", "stub", "--out", tmp_path / "cap", "-k", "2",
                       "--base-url", srv.base_url])
    assert res.exit_code == 0, res.output
    assert any(re.match(r"\w+: 6/6 turns", x) for x in res.output.splitlines()), res.output  # 3 parents x k=2


def test_audit_stages_report_progress_in_a_log(tmp_path: Path) -> None:
    """The contamination audit drew Rich bars only: in a log or a pipe its stages now print lines too."""
    pytest.importorskip("datasketch")
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"id": f"t{i}", "problem": f"A block of mass {i} kg slides down a ramp."}) + "\n"
                             for i in range(5)), encoding="utf-8")
    ev = tmp_path / "eval.json"
    ev.write_text(json.dumps(PARENTS), encoding="utf-8")
    res = _invoke(["audit", "contamination", "--train", train, "--eval", ev, "--out", tmp_path / "out", "--no-embeddings"])
    assert res.exit_code == 0, res.output
    lines = _lines(res.output, "stage 1: MinHash")
    assert lines and "done" in lines[-1], res.output
