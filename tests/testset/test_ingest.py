"""`corpus ingest-cnxml`: CNXML collections -> books layout (pandoc, MathML as TeX) and an exercise pool."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _support import require_data_file, require_extra
from typer.testing import CliRunner

require_extra("build", "pypandoc", module_level=True)

from studybench.cli import app  # noqa: E402
from studybench.datasets import Dataset, load_dataset  # noqa: E402
from studybench.testset.corpus import ingest as ingest_mod  # noqa: E402
from studybench.testset.corpus.answer_forms import classify_answer, split_labelled_parts, unicode_scripts  # noqa: E402
from studybench.testset.corpus.books import scan_books  # noqa: E402
from studybench.testset.corpus.ingest import IngestError, ingest_cnxml, parse_cnxml, read_collection  # noqa: E402
from studybench.verify import check_gold_parsable, verify_boxes  # noqa: E402

M = 'xmlns="http://cnx.rice.edu/cnxml" xmlns:m="http://www.w3.org/1998/Math/MathML"'
COLLECTION = """<col:collection xmlns="http://cnx.rice.edu/collxml" xmlns:md="http://cnx.rice.edu/mdml" xmlns:col="http://cnx.rice.edu/collxml">
<metadata><md:title>Tiny Physics Volume 1</md:title></metadata>
<col:content><col:module document="m0"/>
<col:subcollection><md:title>Mechanics</md:title><col:content>
<col:subcollection><md:title>Motion in a Line</md:title><col:content>
<col:module document="m1"/><col:module document="m2"/></col:content></col:subcollection>
</col:content></col:subcollection></col:content></col:collection>"""
INTRO = f"""<document {M} class="introduction"><title>Introduction</title><content>
<para id="p0">Motion is everywhere.</para></content></document>"""
SECTION = f"""<document {M}><title>Speed</title><content>
<para id="p1">The speed is <m:math><m:mrow><m:mi>v</m:mi><m:mo>=</m:mo><m:mfrac><m:mi>d</m:mi><m:mi>t</m:mi></m:mfrac></m:mrow></m:math>
and the area grows as <m:math><m:msup><m:mi>r</m:mi><m:mn>2</m:mn></m:msup></m:math>.</para>
<example id="ex1"><para id="e1"><title>A Runner</title>A runner covers 100 m in 10 s. What is her speed?</para>
<para id="e2"><title>Strategy</title>Divide distance by time.</para>
<para id="e3"><title>Solution</title>We find</para>
<equation id="q1"><m:math><m:mrow><m:mi>v</m:mi><m:mo>=</m:mo><m:mfrac><m:mrow><m:mn>100</m:mn><m:mtext>m</m:mtext></m:mrow><m:mrow><m:mn>10</m:mn><m:mtext>s</m:mtext></m:mrow></m:mfrac><m:mo>=</m:mo><m:mn>10</m:mn><m:mtext>m/s</m:mtext></m:mrow></m:math></equation>
<para id="e4"><title>Significance</title>That is fast.</para></example>
<section class="review-conceptual-questions"><title>Conceptual Questions</title>
<exercise id="x0"><problem><para>Why do things move?</para></problem></exercise></section>
<section class="review-problems"><title>Problems</title>
<exercise id="x1"><problem><para>A car drives 300 m in 20 s. Find its speed.</para></problem>
<solution><para><m:math><m:mrow><m:mn>15</m:mn><m:mtext>m/s</m:mtext></m:mrow></m:math></para></solution></exercise>
<exercise id="x2"><problem><para>A ball falls from height <m:math><m:mi>h</m:mi></m:math>. Find its speed at the ground.</para></problem></exercise>
<exercise id="x3"><problem><para>A cart moves. (a) How far does it go in 2 s at 3 m/s? (b) How long to go 12 m?</para></problem>
<solution><para>a. 6 m; b. 4 s</para></solution></exercise>
<exercise id="x4"><problem><para>Find the speed of a wave.</para></problem>
<solution><para>It depends on the medium or the tension.</para></solution></exercise>
<exercise id="x5"><problem><para>By what fraction does the length change? (a) In percent. (b) How many atoms in a cell? (c) The angle? (d) The resistance?</para></problem>
<solution><para>a. 4%; b. 10<sup>3</sup>; c. <m:math><m:mrow><m:mn>35.7</m:mn><m:mtext>°</m:mtext></m:mrow></m:math>; d. 6.75 kΩ</para></solution></exercise>
</section></content></document>"""

# verdicts, not speed: a gold that needs its symbolic check must not time out on a loaded machine (5 s did)
VERDICT_TIMEOUT = 60.0


def write_collection(root: Path, section: str = SECTION) -> Path:
    (root / "collections").mkdir(parents=True)
    (root / "collections" / "tiny-1.collection.xml").write_text(COLLECTION, encoding="utf-8")
    for mid, text in (("m0", INTRO), ("m1", INTRO), ("m2", section)):
        (root / "modules" / mid).mkdir(parents=True)
        (root / "modules" / mid / "index.cnxml").write_text(text, encoding="utf-8")
    return root


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
def test_synthetic_collection_to_books_and_pool(tmp_path: Path) -> None:
    src = write_collection(tmp_path / "src")
    books = tmp_path / "books"
    rep = ingest_cnxml(src, books)
    tree = scan_books(books)
    assert list(tree) == ["OpenStax_TinyPhysics1"]
    names = [c.name for c in tree["OpenStax_TinyPhysics1"]]
    assert names == ["ch01-motion-in-a-line", "ch01-motion-in-a-line-answers"]
    assert tree["OpenStax_TinyPhysics1"][1].answer_folder
    text = (books / "OpenStax_TinyPhysics1" / "ch01-motion-in-a-line" / "clean.md").read_text(encoding="utf-8")
    assert "\\frac{d}{t}" in text and "r^{2}" in text  # MathML fraction and superscript as TeX
    assert "<m:" not in text and "<math" not in text
    assert "Example 1.1" in text and "A Runner" in text
    assert "15" not in text.split("Problems", 1)[1].split("Find its speed")[1][:40]  # answers are not in the chapter
    answers = (books / "OpenStax_TinyPhysics1" / "ch01-motion-in-a-line-answers" / "clean.md").read_text(encoding="utf-8")
    assert "15" in answers and "m/s" in answers
    ds = load_dataset(books / "pool.json")
    by_id = {p.source_problem_id: p for p in ds.parents}
    assert set(by_id) == {"E1.1", "1.2", "1.4", "1.6"}  # x0 conceptual, x2 no answer, x4 words: skipped
    # percent, Unicode superscript, degree and Ohm golds as the verifier reads them
    assert [s.answer for s in by_id["1.6"].sub_problems] == [
        "\\boxed{4\\,\\%}", "\\boxed{10^{3}}", "\\boxed{35.7^{\\circ}}", "\\boxed{6.75\\,\\text{k}\\Omega}"]
    assert_golds_self_verify(ds)
    ex = by_id["E1.1"]
    assert ex.answer_type == "NV" and ex.answer.replace(" ", "") == "\\boxed{10\\text{m/s}}"
    assert ex.source_kind == "textbook_example" and "runner" in ex.problem
    assert by_id["1.2"].answer_type == "NV" and "15" in by_id["1.2"].answer
    multi = by_id["1.4"]
    assert [s.problem_id for s in multi.sub_problems] == ["1.4(a)", "1.4(b)"]
    assert "6" in multi.sub_problems[0].answer and "4" in multi.sub_problems[1].answer
    assert rep.kept == {"example": 1, "problem": 3}
    assert rep.skipped["conceptual question: qualitative (not in the pool)"] == 1
    assert rep.skipped["problem: no answer in the book"] == 1
    assert rep.skipped["problem: answer gives alternatives or a list"] == 1
    # resumable: a second run converts nothing and writes the same pool
    pool = (books / "pool.json").read_bytes()
    rep2 = ingest_cnxml(src, books)
    assert (rep2.converted, rep2.reused) == (0, 1)
    assert (books / "pool.json").read_bytes() == pool
    # a changed module is converted again
    (src / "modules" / "m2" / "index.cnxml").write_text(SECTION.replace("300 m", "600 m"), encoding="utf-8")
    assert ingest_cnxml(src, books).converted == 1
    assert "600 m" in load_dataset(books / "pool.json").by_key()[("OpenStax_TinyPhysics1", "", "1.2")].problem


def assert_golds_self_verify(ds: Dataset) -> None:
    """Every gold box of a pool is readable by the verifier and accepted against itself."""
    bad = []
    for parent in ds.parents:
        for sub in parent.sub_problems:
            for box in sub.boxes:
                why = check_gold_parsable(box, sub.answer_type, timeout=VERDICT_TIMEOUT)
                v = verify_boxes([box], [box], sub.answer_type, timeout=VERDICT_TIMEOUT)
                if why is not None or not v.correct:
                    bad.append((sub.problem_id, box, why, v.reason))
    assert not bad, bad[:10]


def test_unreadable_gold_is_refused_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gold the verifier cannot read never reaches the pool, whatever the answer reader let through."""
    real = ingest_mod.classify_answer

    def leaky(text: str, **kw: bool) -> tuple[str, str] | str:
        return ("NV", "4\\,\\text{%}") if "15" in text else real(text, **kw)  # the answer of 1.2

    monkeypatch.setattr(ingest_mod, "classify_answer", leaky)
    rep = ingest_cnxml(write_collection(tmp_path / "src"), tmp_path / "books")
    ids = {p.source_problem_id for p in load_dataset(tmp_path / "books" / "pool.json").parents}
    assert "1.2" not in ids and "1.4" in ids
    assert rep.skipped["problem: answer the verifier cannot read"] == 1
    assert rep.kept["problem"] == 2


def test_cli_prints_counts(tmp_path: Path) -> None:
    src = write_collection(tmp_path / "src")
    res = CliRunner().invoke(app, ["corpus", "ingest-cnxml", str(src), "--books", str(tmp_path / "b"),
                                   "--pool", str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert "OpenStax_TinyPhysics1: 1 chapter," in res.output and "4 records" in res.output
    assert (tmp_path / "p.json").is_file()


def test_malformed_module_names_the_file(tmp_path: Path) -> None:
    src = write_collection(tmp_path / "src", SECTION.replace("</example>", ""))
    with pytest.raises(IngestError, match=r"m2[/\\]index\.cnxml: malformed XML"):
        ingest_cnxml(src, tmp_path / "books")
    res = CliRunner().invoke(app, ["corpus", "ingest-cnxml", str(src), "--books", str(tmp_path / "b")])
    assert res.exit_code == 1 and "malformed XML" in res.output


@pytest.mark.parametrize("payload", [
    '<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><d>&b;</d>',
    '<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><d>&x;</d>',
    '<d>&undefined;</d>',
])
def test_entities_never_expand(tmp_path: Path, payload: str) -> None:
    p = tmp_path / "x.cnxml"
    p.write_text(payload, encoding="utf-8")
    with pytest.raises(IngestError, match="x.cnxml") as e:
        parse_cnxml(p)
    assert "aaaaaaaaaa" not in str(e.value) and "root:" not in str(e.value)


def test_collection_without_title_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "c.collection.xml"
    p.write_text('<collection xmlns="http://cnx.rice.edu/collxml"><content/></collection>', encoding="utf-8")
    with pytest.raises(IngestError, match="no <md:title>"):
        read_collection(p)


@pytest.mark.parametrize(("text", "want"), [
    ("4%", ("NV", "4\\,\\%")),
    ("$4\\,\\text{%}$", ("NV", "4 \\%")),
    ("$5.00\\text{\\%}$", ("NV", "5.00\\%")),
    ("$144.1\\text{°}$", ("NV", "144.1^{\\circ}")),
    ("$92 \\text{°}\\text{C}$", ("NV", "92 ^{\\circ}\\text{C}")),
    ("22.0 °C", ("NV", "22.0\\,^{\\circ}\\text{C}")),
    ("$4.8 \\text{Ω}$", ("NV", "4.8 \\Omega")),
    ("$6.750 \\text{k} \\text{Ω}$", ("NV", "6.750 \\text{k}\\Omega")),  # kilo-ohm, not k times ohm
    ("$1.36 \\times 10^{28}\\text{N-m}$", ("NV", "1.36 \\times 10^{28}\\text{N}\\cdot \\text{m}")),
    ("0.800*c*", ("NV", "0.800\\,c")),
    ("10³", ("NV", "10^{3}")),
    ("7.557 cm²", ("NV", "7.557\\,\\text{cm}^{2}")),
    ("1×10⁴ lbm", ("NV", "1\\times 10^{4}\\,\\text{lbm}")),
    ("10⁻⁻¹⁷ s", ("NV", "10^{-17}\\,\\text{s}")),
    ("$- \\mspace{1mu}\\frac{dr}{r}$", ("EX", "- \\frac{dr}{r}")),
    ("5.4 cm from the axis", None),
    ("$48.3 (\\text{N/m}^{2}) \\cdot \\text{s}$", None),
    ("$\\frac{P}{4\\pi r^{2}} \\propto \\frac{1}{r^{2}}$", None),
    ("35° west", None),
    ("10²⁶ floating-point operations per human lifetime", None),
    ("957 ks", ("NV", "957\\,\\text{ks}")),
    ("$${E = 480.1\\ \\text{MeV}}$$", ("NV", "480.1 \\text{MeV}")),  # the brace opened before "=" is dropped
    ("$v = 3.0\\,\\text{m/s}$", ("NV", "3.0 \\text{m/s}")),
    ("$4.79 \\times 10^{2}$ Mg", ("NV", "4.79 \\times 10^{2}\\,\\text{Mg}")),
    ("$v = \\sqrt{2gh}$", ("EX", "\\sqrt{2gh}")),
    ("$2mg$", None),  # bare letters in math are variables, not milligrams
    ("19.3 Pg or 1.93 Eg", None),
    ("about 5 m", None),
    ("Yes, both terms have dimension L", None),
])
def test_classify_answer(text: str, want: tuple[str, str] | None) -> None:
    got = classify_answer(text)
    assert got == want if want else isinstance(got, str)


def test_accepted_answer_forms_are_verifier_golds() -> None:
    """Every form classify_answer accepts above is read by the verifier and accepted against itself."""
    forms = ["4%", "$4\\,\\text{%}$", "$144.1\\text{°}$", "22.0 °C", "$6.750 \\text{k} \\text{Ω}$", "0.800*c*", "10³",
             "7.557 cm²", "62.4 lbm/ft³", "$1.36 \\times 10^{28}\\text{N-m}$", "$- \\mspace{1mu}\\frac{dr}{r}$"]
    for text in forms:
        got = classify_answer(text)
        assert isinstance(got, tuple), (text, got)
        assert check_gold_parsable(got[1], got[0], timeout=VERDICT_TIMEOUT) is None, (text, got)
        assert verify_boxes([got[1]], [got[1]], got[0], timeout=VERDICT_TIMEOUT).correct, (text, got)
    kohm = classify_answer("$6.750 \\text{k} \\text{Ω}$")
    assert isinstance(kohm, tuple) and verify_boxes([kohm[1]], ["6750\\,\\Omega"], "NV", timeout=VERDICT_TIMEOUT).correct


def test_unicode_scripts() -> None:
    assert unicode_scripts("10⁻¹⁷ m² v₀") == "10^{-17} m^{2} v_{0}"
    assert unicode_scripts("LT⁻⁻²") == "LT^{-2}"


def test_split_parts_refuses_repeated_labels() -> None:
    assert [k for k, _ in split_labelled_parts("a\\. 6 m; b. 4 s")[1]] == ["a", "b"]
    assert split_labelled_parts("If up: (a) 1 J; (b) 2 J; if down: (a) 3 J; (b) 4 J")[1] == []


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
def test_real_openstax_slice(tmp_path: Path) -> None:
    data = Path(os.environ.get("STUDYBENCH_DATA", "/work/shared/data/studybench")).parent / "openstax-university-physics"
    col = data / "collections" / "university-physics-volume-1.collection.xml"
    require_data_file(col, "OpenStax University Physics CNXML")
    vol = read_collection(col)
    assert vol.source == "OpenStax_UniversityPhysics1" and vol.chapters[0].title == "Units and Measurement"
    assert len(vol.chapters) == 17
    src = tmp_path / "src"  # a slice: chapter 1 only, modules linked, not copied
    (src / "collections").mkdir(parents=True)
    text = col.read_text(encoding="utf-8")
    head = text[:text.index("<col:subcollection>", text.index("Units and Measurement") + 200)]
    (src / "collections" / col.name).write_text(head + "</col:content></col:subcollection></col:content></col:collection>",
                                                encoding="utf-8")
    (src / "modules").symlink_to(data / "modules")
    rep = ingest_cnxml(src, tmp_path / "books")
    assert rep.volumes["OpenStax_UniversityPhysics1"]["chapters"] == 1
    md = (tmp_path / "books" / "OpenStax_UniversityPhysics1" / "ch01-units-and-measurement" / "clean.md").read_text(encoding="utf-8")
    assert "10^{" in md and "\\times" in md and "<m:" not in md
    ds = load_dataset(tmp_path / "books" / "pool.json")
    assert len(ds) >= 10
    assert_golds_self_verify(ds)
    by_id = ds.by_key()
    assert by_id[("OpenStax_UniversityPhysics1", "", "1.69")].answer == "\\boxed{4\\,\\%}"  # printed "4%"
    assert by_id[("OpenStax_UniversityPhysics1", "", "1.77")].answer == "\\boxed{7.557\\,\\text{cm}^{2}}"  # "cm²"
    assert json.loads((tmp_path / "books" / "_reports" / "ingest-cnxml.json").read_text())["records"] == len(ds)
