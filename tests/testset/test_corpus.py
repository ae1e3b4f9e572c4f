"""Corpus processing: layout, clean-up rules, redaction on synthetic books with real test items, audit.

The synthetic chapters are our own prose; real Application problems and solutions from the shared
data are embedded with OCR-like noise (broken super/subscripts, digits split by spaces, line breaks,
doubled spaces, hyphenation), a solution in a separate manual folder, answers in an answers section
and a second copy in a worked example.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import load_dataset
from studybench.testset.corpus.books import (
    CLEAN,
    FULL,
    REDACTED,
    clean_text,
    drop_prompt_leaks,
    layout_problems,
    rejoin_split_numbers,
    scan_books,
    strip_page_numbers,
    tighten_brace_spacing,
    tighten_sub_sup,
)
from studybench.testset.corpus.redact import audit_books, marker, redact_text
from studybench.testset.corpus.textmatch import NormText, find_copies, normalise

FILLER = [
    "Before we tackle the exercises, recall that a conserved quantity is one whose total value does not "
    "change while the system evolves. Energy, momentum and angular momentum are the familiar examples, and "
    "each of them is tied to a symmetry of the laws that govern the motion.",
    "A useful habit is to estimate the answer before computing it. If the estimate and the careful result "
    "disagree by orders of magnitude, one of them hides a mistake, and it is usually the careful one.",
    "Dimensional analysis gives a second check. Every term in an equation must carry the same units, and a "
    "square root or logarithm can only act on a pure number.",
    "The figures in this chapter are drawn to scale only where the caption says so; otherwise they show the "
    "geometry and the labels we use in the text.",
    "Exercise 9.9 (not part of any test set): a pendulum clock runs slow on a mountain. Explain why, and "
    "say whether lengthening or shortening the rod corrects it.",
    "We close the chapter with a summary table of the results derived so far, which later chapters quote "
    "without proof.",
]


def noisy(text: str, seed: int) -> str:
    """OCR-like damage that keeps the content: spaced digits and scripts, line breaks, doubled
    spaces, hyphenated words."""
    rng = random.Random(seed)
    t = re.sub(r"\^\{(\w+)\}", lambda m: "^ {" + " ".join(m.group(1)) + "}", text)
    t = re.sub(r"_\{(\w+)\}", lambda m: "_ {" + m.group(1) + "}", t)
    t = re.sub(r"(?<=\d)(?=\d)", lambda m: " " if rng.random() < 0.5 else "", t)
    words = t.split(" ")
    out = []
    for w in words:
        r = rng.random()
        if r < 0.06 and len(w) > 7 and w.isalpha():
            out.append(w[:4] + "-\n" + w[4:])
        elif r < 0.12:
            out.append(w + "\n")
        elif r < 0.18:
            out.append(w + " ")
        else:
            out.append(w)
    return " ".join(out)


def _pick(parents: list[Any]) -> list[Any]:
    """Up to 3 parents of each of two sources, with problem and solution text."""
    by_src: dict[str, list[Any]] = {}
    for p in parents:
        texts = [p.problem, p.solution] + [s.problem for s in p.sub_problems] + [s.solution for s in p.sub_problems]
        if sum(len(t) for t in texts if t) < 200:
            continue
        by_src.setdefault(p.source, []).append(p)
    multi = [p for p in parents if p.sub_problems]
    chosen: list[Any] = []
    for src in sorted(by_src, key=lambda s: -len(by_src[s]))[:2]:
        chosen += by_src[src][:3]
    if multi and multi[0] not in chosen:
        chosen.append(multi[0])
    return chosen


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def build_books(root: Path, parents: list[Any]) -> None:
    """One chapter with statements (and a worked-example copy of the first), a solution manual
    folder, and an answers section; plus a chapter with no test content."""
    by_src: dict[str, list[Any]] = {}
    for p in parents:
        by_src.setdefault(p.source, []).append(p)
    for src, ps in by_src.items():
        ch: list[str] = ["# Chapter 1 Conservation laws", "", FILLER[0], "", "## Exercises 112", "", "37", ""]
        sol: list[str] = ["# Solutions manual", ""]
        ans: list[str] = ["## Answers to selected problems", ""]
        for i, p in enumerate(ps):
            ch += [f"**{p.source_problem_id}**", ""]
            ch += [noisy(p.problem, i), ""]
            for s in p.sub_problems:
                ch += [f"({s.problem_id}) " + noisy(s.problem, i + 10), ""]
            ch += [FILLER[(i + 1) % len(FILLER)], ""]
            sol += [f"### Problem {p.source_problem_id}", "", noisy(p.solution, i + 20), ""]
            for s in p.sub_problems:
                if s.solution:
                    sol += [f"({s.problem_id}) " + noisy(s.solution, i + 30), ""]
            golds = [b for s in p.subs() for b in s.boxes]
            ans += [f"{p.source_problem_id} " + "; ".join(f"${g}$" for g in golds), ""]
        first = ps[0]
        ch += ["## Worked example", "", "As a worked example we repeat an exercise from the list:", "",
               noisy(first.problem, 99), "", noisy(first.solution or first.sub_problems[0].solution, 98), "", FILLER[4], ""]
        ch += ans + ["9.9 The rod must be shortened.", "", FILLER[5], ""]
        _write(root / src / "ch01" / FULL, "\n".join(ch))
        _write(root / src / "solutions" / FULL, "\n".join(sol))
        _write(root / src / "ch02" / FULL, "\n\n".join(FILLER[1:4]) + "\n")


def cli(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def books(tmp_path: Path, data_dir: Path) -> tuple[Path, list[Any], Path]:
    ds = load_dataset(data_dir / "application.json", name="application")
    chosen = _pick(list(ds.parents))
    root = tmp_path / "books"
    build_books(root, chosen)
    # the chosen parents only, as a test-set file of their own (the real file is never written)
    raw = json.loads((data_dir / "application.json").read_text(encoding="utf-8"))
    records = raw["data"] if isinstance(raw, dict) else raw
    keep = {(p.source, p.source_problem_id) for p in chosen}
    sub = tmp_path / "subset.json"
    sub.write_text(json.dumps([r for r in records if (r["source"], r["source_problem_id"]) in keep]), encoding="utf-8")
    return root, chosen, sub


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_clean_redact_audit_leaves_no_residue(books: tuple[Path, list[Any], Path], data_dir: Path) -> None:
    root, chosen, split = books
    before = _sha(data_dir / "application.json"), _sha(split)
    res = cli("corpus", "check", "--books", root, "--stage", "clean", "--split", split)
    assert res.exit_code == 0, res.output
    res = cli("corpus", "check", "--books", root, "--stage", "redact", "--split", split)
    assert res.exit_code == 1 and "no clean.md" in res.output
    assert cli("corpus", "clean", "--books", root).exit_code == 0
    rep = json.loads((root / "_reports" / "clean.json").read_text())
    assert rep["totals"]["strip_page_numbers"] >= 1 and rep["totals"]["tighten_sub_sup"] >= 1
    res = cli("corpus", "redact", "--books", root, "--split", split)
    assert res.exit_code == 0, res.output
    red = json.loads((root / "_reports" / "redact.json").read_text())
    assert red["not_found"] == []
    res = cli("corpus", "audit", "--books", root, "--split", split)
    assert res.exit_code == 0, res.output
    audit = json.loads((root / "_reports" / "audit.json").read_text())
    assert audit["ok"] and audit["residue"] == [] and audit["missing_markers"] == []
    assert (_sha(data_dir / "application.json"), _sha(split)) == before  # eval files never modified
    for p in chosen:
        kinds = {b["kind"] for b in red["parents"][p.uid]["blocks"]}
        assert "problem" in kinds or any(k.endswith("problem") for k in kinds), p.uid
        assert "answer key" in kinds, p.uid
        files = {b["file"] for b in red["parents"][p.uid]["blocks"]}
        assert f"{p.source}/solutions" in files, p.uid  # the separate manual
        text = (root / p.source / "ch01" / REDACTED).read_text()
        assert marker(p) in text
    # the worked-example copy went too: the first parent of each source has >= 2 problem blocks in ch01
    first = chosen[0]
    ch01 = [b for b in red["parents"][first.uid]["blocks"] if b["file"] == f"{first.source}/ch01" and b["kind"] == "problem"]
    assert len(ch01) >= 2
    # our own text stays
    for src in {p.source for p in chosen}:
        text = (root / src / "ch01" / REDACTED).read_text()
        assert "pendulum clock runs slow" in text and "9.9 The rod must be shortened." in text
        assert normalise(FILLER[0]) in normalise(text)
        assert (root / src / "ch02" / REDACTED).read_text() == (root / src / "ch02" / CLEAN).read_text()


def test_planted_leak_is_caught(books: tuple[Path, list[Any], Path]) -> None:
    root, chosen, split = books
    assert cli("corpus", "clean", "--books", root).exit_code == 0
    assert cli("corpus", "redact", "--books", root, "--split", split).exit_code == 0
    victim = chosen[-1]
    leak_text = victim.solution or victim.sub_problems[0].solution
    f = root / victim.source / "ch02" / REDACTED
    f.write_text(f.read_text() + "\n\n" + noisy(leak_text, 7) + "\n", encoding="utf-8")
    res = cli("corpus", "audit", "--books", root, "--split", split)
    assert res.exit_code == 1
    audit = json.loads((root / "_reports" / "audit.json").read_text())
    assert not audit["ok"]
    hits = [r for r in audit["residue"] if r["parent"] == victim.uid]
    assert hits and hits[0]["file"] == f"{victim.source}/ch02"
    assert victim.source_problem_id in res.output


def test_missing_marker_and_unredacted_chapter_fail_the_audit(books: tuple[Path, list[Any], Path]) -> None:
    root, chosen, split = books
    assert cli("corpus", "clean", "--books", root).exit_code == 0
    assert cli("corpus", "redact", "--books", root, "--split", split).exit_code == 0
    victim = chosen[0]
    for ch in (root / victim.source).iterdir():
        f = ch / REDACTED
        f.write_text(f.read_text().replace(marker(victim), ""), encoding="utf-8")
    (root / chosen[-1].source / "ch02" / REDACTED).unlink()
    audit = audit_books(root, load_dataset(split).parents)
    assert not audit["ok"]
    assert [m["source_problem_id"] for m in audit["missing_markers"]] == [victim.source_problem_id]
    assert audit["not_redacted"] == [f"{chosen[-1].source}/ch02"]


# ---------------------------------------------------------------- rules


def test_drop_prompt_leaks() -> None:
    text = "Intro.\n\nPlease output the text content of the image in Markdown.\n\nBody.\n\n<|im_start|>assistant\n\nEnd."
    out, n = drop_prompt_leaks(text)
    assert n == 2 and "Please output" not in out and "im_start" not in out
    assert out.startswith("Intro.") and "Body." in out and out.endswith("End.")
    kept, n = drop_prompt_leaks("The image formed by the lens is real.\n\nAs a check, we convert units.")
    assert n == 0 and "image formed" in kept


def test_rejoin_split_numbers_only_in_math() -> None:
    out, n = rejoin_split_numbers("Page 1 2 of text: $\\ln 1 0 ^ {2 3} = 5. 2 \\times 1 0 ^ {2 4}$ and $$x = 3 .5$$")
    assert out == "Page 1 2 of text: $\\ln 10 ^ {23} = 5.2 \\times 10 ^ {24}$ and $$x = 3.5$$"
    assert n == 6


def test_tighten_brace_spacing_and_sub_sup() -> None:
    out, n = tighten_brace_spacing("$10^{ - 8 }$ and $x_{ i }$, text { kept }")
    assert out == "$10^{-8}$ and $x_{i}$, text { kept }" and n == 5
    out, n = tighten_sub_sup("$E _ {T} \\alpha_ {f} x ^ 2$ and snake _ case")
    assert out == "$E_{T} \\alpha_{f} x^2$ and snake _ case" and n == 3


def test_strip_page_numbers() -> None:
    text = "## Exercises 245\n\n37\n\n**Problem 3.4** A block.\n\n112\n\nThe answer is\n\n12\n\nkept."
    out, n = strip_page_numbers(text)
    assert out == "## Exercises\n\n\n**Problem 3.4** A block.\n\n\nThe answer is\n\n12\n\nkept."
    assert n == 3


def test_clean_text_reports_every_rule() -> None:
    _, edits = clean_text("plain")
    assert set(edits) == {"drop_prompt_leaks", "strip_page_numbers", "rejoin_split_numbers", "tighten_brace_spacing", "tighten_sub_sup"}
    assert all(v == 0 for v in edits.values())


# ---------------------------------------------------------------- matching


def test_normalisation_survives_ocr_noise_and_maps_back() -> None:
    a = r"The energy $E = 10^{23}\,\mathrm{J}$ is conserved."
    b = "The en-\nergy  $E=1 0 ^ {2 3} \\, J$ is\nconserved."
    assert normalise(a) == normalise(b)
    nt = NormText.of(b)
    s, e = nt.span(0, 3)
    assert b[s:e] == "The"


def test_find_copies_finds_every_copy_and_ignores_fragments() -> None:
    q = normalise("A uniform rod of length L and mass M pivots about one end; find the period of small oscillations about the pivot.")
    filler = normalise(" ".join(FILLER))
    book = filler + q + filler + q[:30] + filler + q
    copies = find_copies(book, [q])
    assert len(copies) == 2  # the two full copies, not the 30-character fragment
    assert all(c.coverage > 0.9 for c in copies)


def test_answer_key_needs_label_and_answer(tmp_path: Path, data_dir: Path) -> None:
    ds = load_dataset(data_dir / "application.json", name="application")
    p = next(x for x in ds.parents if not x.sub_problems and x.subs()[0].boxes)
    gold = p.subs()[0].boxes[0]
    text = (
        "Text before.\n\n## Answers\n\n"
        f"{p.source_problem_id} ${gold}$\n\n"
        f"{p.source_problem_id}0 ${gold}$\n\n"
        "9.9 something else\n\n# Chapter 2\n\n"
        f"{p.source_problem_id} ${gold}$ outside the answers section\n"
    )
    out, found = redact_text(text, [p])
    assert [f["kind"] for f in found] == ["answer key"]
    assert marker(p) in out
    assert f"{p.source_problem_id}0 ${gold}$" in out and "outside the answers section" in out
    assert out.count(marker(p)) == 1


# ---------------------------------------------------------------- layout and parse


def test_layout_problems_say_what_is_missing(tmp_path: Path) -> None:
    _write(tmp_path / "B" / "ch1" / FULL, "x")
    (tmp_path / "B" / "ch2").mkdir()
    (tmp_path / "_reports").mkdir()
    tree = scan_books(tmp_path)
    assert list(tree) == ["B"]
    probs = layout_problems(tree, "redact", ["B", "Missing_Book"])
    assert "Missing_Book: no folder DIR/Missing_Book/ (a source of the test set)" in probs
    assert any(p.startswith("B/ch1: no clean.md") for p in probs)
    assert layout_problems(tree, "clean") == ["B/ch2: no full.md (run `studybench corpus parse`, or put MinerU output there)"]


def test_parse_without_mineru_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "B" / "ch1" / "ch1.pdf", "%PDF-1.4 fake")
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))
    res = cli("corpus", "parse", "--books", tmp_path)
    assert res.exit_code == 2 and "studybench[mineru]" in " ".join(res.output.split())


def test_parse_runs_mineru_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    fake = bin_dir / "mineru"
    fake.write_text(
        "#!/bin/sh\n"
        f"echo \"$@\" >> {log}\n"
        'while [ $# -gt 0 ]; do case "$1" in -p) pdf="$2"; shift 2;; -o) out="$2"; shift 2;; *) shift;; esac; done\n'
        'stem=$(basename "$pdf" .pdf); mkdir -p "$out/$stem/auto"; echo "# parsed $stem" > "$out/$stem/auto/$stem.md"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    books = tmp_path / "books"
    _write(books / "B" / "ch1" / "a.pdf", "%PDF fake")
    _write(books / "B" / "ch2" / "b.pdf", "%PDF fake")
    _write(books / "B" / "ch2" / FULL, "done before")
    res = cli("corpus", "parse", "--books", books)
    assert res.exit_code == 0, res.output
    assert (books / "B" / "ch1" / FULL).read_text() == "# parsed a\n"
    assert (books / "B" / "ch2" / FULL).read_text() == "done before"  # skipped: resumable
    assert len(log.read_text().splitlines()) == 1
    res = cli("corpus", "parse", "--books", books, "--force")
    assert res.exit_code == 0 and (books / "B" / "ch2" / FULL).read_text() == "# parsed b\n"


# ---------------------------------------------------------------- hostile layouts and OCR (adversarial round)

MINI = [
    {"source": "Book_A", "year": "", "source_problem_id": "4.6", "problem_type": "Mechanics",
     "problem": "A light aircraft weighing 2500 lb makes an emergency landing on a short runway. With its engine off, "
                "it lands at 120 ft/s. A hook on the plane snags a cable attached to a 250 lb sandbag. How far does "
                "the plane travel before it stops if the coefficient of friction is 0.4?",
     "solution": "Momentum is conserved while the hook catches the bag, then friction on the bag does the work: the "
                 "distance follows from the energy balance between the kinetic energy and the friction work.",
     "answer": "\\boxed{L \\approx 1300\\,\\mathrm{ft}}", "answer_type": "NV", "type_sequence": "", "sub_problems": []},
    {"source": "Book_A", "year": "", "source_problem_id": "3.8", "problem_type": "Mechanics",
     "problem": "A block rests on an inclined plane whose angle is slowly increased from zero until the block "
                "just starts to slide; relate that angle to the static coefficient of friction of the surfaces.",
     "solution": "At the threshold the component of gravity along the plane equals the largest static friction "
                 "force, so the tangent of the critical angle equals the coefficient.",
     "answer": "\\boxed{\\tan \\theta = \\mu}", "answer_type": "EQ", "type_sequence": "", "sub_problems": []},
    {"source": "Olympiad X", "year": "1982", "source_problem_id": "Q1 -->", "problem_type": "Mechanics",
     "problem": "A thin hoop rolls without slipping inside a fixed cylinder of larger radius; find the period of "
                "small oscillations about the lowest point for a hoop released from rest nearby.",
     "solution": "Rolling constraint plus energy conservation give an effective pendulum of reduced length.",
     "answer": "\\boxed{2\\pi\\sqrt{2(R-r)/g}}", "answer_type": "EX", "type_sequence": "", "sub_problems": []},
    {"source": "Olympiad X", "year": "1983", "source_problem_id": "Q1 -->", "problem_type": "Optics",
     "problem": "A glass sphere of refractive index n is silvered on its back half; find where a distant object "
                "is imaged by rays entering near the axis through the front surface.",
     "solution": "Refraction at the front, reflection at the silvered back and refraction again locate the image.",
     "answer": "\\boxed{x = R/(2n-2)}", "answer_type": "EX", "type_sequence": "", "sub_problems": []},
]


@pytest.fixture
def mini(tmp_path: Path) -> tuple[Path, Path, list[Any]]:
    split = tmp_path / "mini.json"
    split.write_text(json.dumps(MINI), encoding="utf-8")
    return tmp_path / "books", split, list(load_dataset(split).parents)


def _pipeline(root: Path, split: Path) -> dict[str, Any]:
    assert cli("corpus", "clean", "--books", root).exit_code == 0
    res = cli("corpus", "redact", "--books", root, "--split", split)
    assert res.exit_code == 0, res.output
    cli("corpus", "audit", "--books", root, "--split", split)
    return json.loads((root / "_reports" / "audit.json").read_text())


def test_answer_keys_in_tables_and_latex_only_answers(mini: tuple[Path, Path, list[Any]]) -> None:
    root, split, _ = mini
    _write(root / "Book_A" / "ch04" / FULL, f"{MINI[0]['problem']}\n\n{MINI[0]['solution']}\n\n{MINI[1]['problem']}\n\n{MINI[1]['solution']}\n")
    _write(root / "Book_A" / "answers" / FULL, "# Answers\n\n| 4.6 | $L \\approx 1300\\,\\mathrm{ft}$ |\n| 9.1 | 7 m |\n\n"
           "<table><tr><td>4.6</td><td>L ≈ 1300 ft</td></tr><tr><td>9.2</td><td>3 s</td></tr></table>\n\n"
           "3.8 (a) $\\tan \\theta = \\mu$\n\n9.9 the rod is shortened\n")
    audit = _pipeline(root, split)
    text = (root / "Book_A" / "answers" / REDACTED).read_text()
    assert "1300" not in text and "tan" not in text
    assert "| 9.1 | 7 m |" in text and "<td>9.2</td><td>3 s</td>" in text and "9.9 the rod is shortened" in text
    assert "<table><tr><td><!-- [TEST-SET REDACTION]" in text  # the HTML table stays a table
    assert not [r for r in audit["residue"] if r["source"] == "Book_A"]


def test_audit_reports_an_answer_key_left_behind(mini: tuple[Path, Path, list[Any]]) -> None:
    root, split, parents = mini
    _write(root / "Book_A" / "ch04" / FULL, f"{MINI[0]['problem']}\n\n{MINI[1]['problem']}\n")
    _pipeline(root, split)
    f = root / "Book_A" / "ch04" / REDACTED
    f.write_text(f.read_text() + "\n## Answers\n\n3.8 $\\tan\\theta=\\mu$\n", encoding="utf-8")
    audit = audit_books(root, [p for p in parents if p.source == "Book_A"])
    kinds = [(r["source_problem_id"], r["kind"]) for r in audit["residue"]]
    assert ("3.8", "answer key") in kinds and not audit["ok"]


def test_ocr_letter_confusions_do_not_hide_a_copy(mini: tuple[Path, Path, list[Any]]) -> None:
    root, split, _ = mini
    damaged = (MINI[0]["problem"].replace("the ", "tbe ").replace("m", "rn").replace("l", "1"))
    _write(root / "Book_A" / "ch04" / FULL, FILLER[0] + "\n\n" + damaged + "\n\n" + FILLER[1] + "\n\n## Problems\n\n4.6 " + MINI[0]["problem"] + "\n")
    _pipeline(root, split)
    text = (root / "Book_A" / "ch04" / REDACTED).read_text()
    assert "rnakes" not in text and "emergency" not in text
    assert text.count("source_problem_id=4.6 ") == 2
    assert FILLER[0] in text and FILLER[1] in text


def test_a_copy_inside_a_long_paragraph_keeps_the_paragraph(mini: tuple[Path, Path, list[Any]]) -> None:
    root, split, _ = mini
    para = FILLER[0] + " " + FILLER[1] + " Consider this: " + MINI[1]["problem"] + " " + FILLER[2] + " " + FILLER[5]
    _write(root / "Book_A" / "ch04" / FULL, para + "\n")
    _pipeline(root, split)
    text = (root / "Book_A" / "ch04" / REDACTED).read_text()
    assert "slowly increased" not in text
    assert FILLER[0] in text and FILLER[5] in text
    assert "\n<!-- [TEST-SET REDACTION] source_problem_id=3.8 source=Book_A -->\n" in text


def test_markers_carry_year_and_encode_unsafe_ids(mini: tuple[Path, Path, list[Any]]) -> None:
    root, split, parents = mini
    _write(root / "Olympiad X" / "1982" / FULL, MINI[2]["problem"] + "\n\n" + FILLER[3] + "\n")
    _write(root / "Olympiad X" / "1983" / FULL, FILLER[4] + "\n")
    audit = _pipeline(root, split)
    text = (root / "Olympiad X" / "1982" / REDACTED).read_text()
    mk = marker(parents[2])
    assert mk == "<!-- [TEST-SET REDACTION] source_problem_id=Q1%20--%3E source=Olympiad%20X year=1982 -->"
    assert mk in text and text.count("-->") == 1 + FILLER[3].count("-->")
    missing = {(m["source_problem_id"], m["year"]) for m in audit["missing_markers"] if m["source"] == "Olympiad X"}
    assert missing == {("Q1 -->", "1983")}  # the 1982 marker does not stand in for 1983


def test_a_generic_phrase_is_not_residue_but_a_leak_is(mini: tuple[Path, Path, list[Any]]) -> None:
    root, split, parents = mini
    _write(root / "Book_A" / "ch04" / FULL, MINI[1]["problem"] + "\n")
    _write(root / "Book_A" / "ch05" / FULL, "In our own words: a block rests on an inclined plane whose angle is slowly varied by hand.\n")
    _pipeline(root, split)
    book_a = [p for p in parents if p.source == "Book_A"]
    assert audit_books(root, book_a)["residue"] == []
    assert [r["file"] for r in audit_books(root, book_a, min_anchors=1)["residue"]] == ["Book_A/ch05"]
    f = root / "Book_A" / "ch05" / REDACTED
    f.write_text(f.read_text() + "\n" + MINI[1]["solution"] + "\n", encoding="utf-8")
    assert [r["source_problem_id"] for r in audit_books(root, book_a)["residue"]] == ["3.8"]


def test_unwritable_targets_are_clean_errors(mini: tuple[Path, Path, list[Any]], tmp_path: Path) -> None:
    root, split, _ = mini
    _write(root / "Book_A" / "ch04" / FULL, MINI[0]["problem"] + "\n")
    (root / "Book_A" / "ch04" / CLEAN).mkdir()
    res = cli("corpus", "clean", "--books", root)
    assert res.exit_code == 2 and "cannot write" in res.output
    assert not list((root / "Book_A" / "ch04").glob(".*tmp*"))
    (root / "Book_A" / "ch04" / CLEAN).rmdir()
    (root / "_reports").write_text("not a dir")
    res = cli("corpus", "clean", "--books", root)
    assert res.exit_code == 1 and "cannot write" in res.output and "_reports" in " ".join(res.output.split())  # docs/exit-statuses.md
    (root / "_reports").unlink()
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = cli("corpus", "audit", "--books", root, "--split", split, "--out", afile)
    assert res.exit_code == 2 and "not a directory" in res.output


def test_answer_folder_names_are_whole_words(tmp_path: Path) -> None:
    for name, expected in (("solutions-ch05", True), ("answers", True), ("ch09-resolution", False), ("manual", True), ("chints", False)):
        _write(tmp_path / "B" / name / FULL, "x")
        ch = next(c for c in scan_books(tmp_path)["B"] if c.name == name)
        assert ch.answer_folder is expected, name
