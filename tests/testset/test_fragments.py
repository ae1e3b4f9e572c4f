"""`studybench build fragments`: heading split, kind detection, the merge and split rules at their edges,
offsets, the solution-manual flag and the redaction rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.testset.corpus.books import CorpusError
from studybench.testset.corpus.fragments import (
    FragmentSettings,
    build_fragments,
    fragment_text,
    heading_kind,
    split_long,
)


def para(n: int, word: str = "force") -> str:
    """A paragraph of exactly ``n`` characters."""
    s = (word + " ") * (n // (len(word) + 1) + 1)
    return s[:n]


def test_heading_kinds():
    assert heading_kind("Example 5.3: A block on a ramp") == "example"
    assert heading_kind("Worked example") == "example"
    assert heading_kind("**Solution**") == "example"
    assert heading_kind("5.2 Examples of forces") == "example"
    assert heading_kind("Newton's second law") == "exposition"
    assert heading_kind("Counterexamples to intuition") == "exposition"
    assert heading_kind("Solutions of the wave equation, general") == "example"  # by the heading alone


def test_split_at_top_level_and_examples():
    text = (f"# Forces\n\n{para(300)}\n\n## Contact forces\n\n{para(300)}\n\n"
            f"## Example 5.1: Tension\n\n{para(300)}\n\n### Solution\n\n{para(300)}\n\n"
            f"## Friction\n\n{para(300)}\n\n# Energy\n\n{para(300)}\n")
    frags = fragment_text(text)
    kinds = [(f.kind, f.section) for f in frags]
    assert kinds == [
        ("exposition", ["Forces"]),                              # the subsection stays in it
        ("example", ["Forces", "Example 5.1: Tension"]),         # the Solution stays in the example
        ("exposition", ["Forces", "Friction"]),                  # back to exposition after the example
        ("exposition", ["Energy"]),
    ]
    assert "## Contact forces" in text[frags[0].start:frags[0].end]
    assert "### Solution" in text[frags[1].start:frags[1].end]
    # offsets cover the text without gaps
    assert frags[0].start == 0 and frags[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(frags, frags[1:], strict=False))


def test_lone_chapter_title_is_not_the_top_level():
    """`corpus ingest-cnxml` writes one `# Chapter N Title` and the sections at `##`: they are the cut points."""
    text = (f"# Chapter 11 Angular Momentum\n\n{para(300)}\n\n## 11.1 Rolling Motion\n\n{para(300)}\n\n"
            f"### Rolling without slipping\n\n{para(300)}\n\n## 11.2 Newton\\'s laws\n\n{para(300)}\n")
    assert [f.section for f in fragment_text(text)] == [
        ["Chapter 11 Angular Momentum"],
        ["Chapter 11 Angular Momentum", "11.1 Rolling Motion"],
        ["Chapter 11 Angular Momentum", "11.2 Newton's laws"],  # pandoc's escape dropped from the title
    ]
    one = f"# Only title\n\n{para(300)}\n\n## Lone section\n\n{para(300)}\n"  # no level repeats: the smallest
    assert len(fragment_text(one)) == 1


def test_heading_in_code_fence_is_not_a_heading():
    text = f"# A\n\n{para(300)}\n\n```\n# not a heading\n```\n\n{para(300)}\n"
    assert len(fragment_text(text)) == 1


def test_merge_edge_199_vs_200():
    head = "# B\n\n"
    for body, merged in ((199 - len(head), True), (200 - len(head), False)):
        text = f"# A\n\n{para(400)}\n\n" + head + para(body)
        frags = fragment_text(text)
        assert len(text[frags[-1].start:frags[-1].end].strip()) >= 199
        assert (len(frags) == 1) is merged, body


def test_short_first_fragment_merges_forward():
    text = f"# Intro\n\nshort\n\n# Next\n\n{para(500)}\n"
    frags = fragment_text(text)
    assert len(frags) == 1 and frags[0].section == ["Intro"] and frags[0].end == len(text)


def test_split_edge_6000_vs_6001():
    for n, pieces in ((6000, 1), (6001, 4)):
        text = para(n)
        frags = fragment_text(text)
        assert len(frags) == pieces, n
        assert sum(f.parts > 1 for f in frags) == (pieces if pieces > 1 else 0)


def test_split_pieces_overlap_and_prefer_paragraphs():
    paras = [para(450, w) for w in ("alpha", "beta", "gamma", "delta") * 5]
    text = "\n\n".join(paras)
    spans = split_long(text, 0, len(text), 2000, 400)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (a0, a1), (b0, _b1) in zip(spans, spans[1:], strict=False):
        assert 1000 <= a1 - a0 <= 2500
        assert text[a1 - 2:a1] == "\n\n"                 # ended at a paragraph boundary
        assert 300 <= a1 - b0 <= 420                     # about 400 characters repeated
        assert b0 == 0 or text[b0 - 1].isspace()          # a piece starts at a word
    # no paragraph breaks: cut at a space near the target
    flat = para(7000, "x1")
    spans = split_long(flat, 0, len(flat), 2000, 400)
    assert all(flat[b - 1] == " " for _, b in spans[:-1])


def test_settings_checked():
    with pytest.raises(ValueError, match="--overlap"):
        fragment_text("x", FragmentSettings(overlap=1000))


def _book(root: Path, source: str, chapter: str, name: str, text: str) -> Path:
    d = root / source / chapter
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text, encoding="utf-8")
    return d / name


def test_build_refuses_unredacted_and_records_offsets(tmp_path: Path):
    books, work = tmp_path / "books", tmp_path / "work"
    _book(books, "Book", "ch01", "clean.redacted.md", f"# A\n\n{para(300)}\n\n# Example 1\n\n{para(300)}\n")
    _book(books, "Book", "ch02", "clean.md", f"# C\n\n{para(300)}\n")
    with pytest.raises(CorpusError, match=r"not redacted: Book/ch02"):
        build_fragments(books, work)
    m = build_fragments(books, work, allow_unredacted=True)
    assert m["unredacted_chapters"] == ["Book/ch02"] and m["by_kind"] == {"exposition": 2, "example": 1}
    rows = [json.loads(x) for x in (work / "fragments.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["Book/ch01/0000", "Book/ch01/0001", "Book/ch02/0000"]
    assert [r["redacted"] for r in rows] == [True, True, False]
    for r in rows:
        src = (books / r["file"]).read_text(encoding="utf-8")
        assert src[r["start"]:r["end"]] == r["text"]
    # the same input gives the same file (stable ids)
    before = (work / "fragments.jsonl").read_bytes()
    build_fragments(books, work, allow_unredacted=True)
    assert (work / "fragments.jsonl").read_bytes() == before


def test_solution_manual_flag(tmp_path: Path):
    books = tmp_path / "books"
    _book(books, "Book", "ch01", "clean.redacted.md", f"# A\n\n{para(300)}\n")
    _book(books, "Book", "solutions-ch01", "clean.redacted.md", f"# A\n\n{para(300)}\n")
    _book(books, "Book_Solution_Manual", "ch01", "clean.redacted.md", f"# A\n\n{para(300)}\n")
    build_fragments(books, tmp_path / "w")
    rows = {r["id"]: r["solution_manual"] for r in map(json.loads, (tmp_path / "w" / "fragments.jsonl").read_text().splitlines())}
    assert rows == {"Book/ch01/0000": False, "Book/solutions-ch01/0000": True, "Book_Solution_Manual/ch01/0000": True}


def test_cli_fragments(tmp_path: Path):
    books = tmp_path / "books"
    _book(books, "Book", "ch01", "clean.md", f"# A\n\n{para(300)}\n")
    r = CliRunner().invoke(app, ["build", "fragments", "--books", str(books), "--work", str(tmp_path / "w")])
    assert r.exit_code == 2 and "not redacted" in r.output and "--allow-unredacted" in r.output
    r = CliRunner().invoke(app, ["build", "fragments", "--books", str(books), "--work", str(tmp_path / "w"),
                                 "--allow-unredacted"])
    assert r.exit_code == 0, r.output
    assert "1 fragment" in r.output and "not redacted" in r.output
