"""Tests for studybench.checks: suspicious-but-loadable records, on the real files and on synthetic ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import studybench.verify
from studybench import checks
from studybench.checks import (
    KINDS,
    Finding,
    check_dataset,
    count_by_kind,
    label_map,
    label_variants,
)
from studybench.datasets import Dataset, load_dataset
from studybench.records import normalise_label

_real_gold_parser = checks._gold_parser  # captured before the autouse fixture replaces it

TD_AMP = "Thermodynamics & Statistical Physics"
TD_AND = "Thermodynamics and Statistical Physics"


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def application(data_dir: Path) -> Dataset:
    return load_dataset(data_dir / "application.json")


@pytest.fixture(scope="module")
def transfer(data_dir: Path) -> Dataset:
    return load_dataset(data_dir / "transfer.json")


@pytest.fixture(scope="module")
def app_findings(application: Dataset) -> list[Finding]:
    return check_dataset(application, parse_golds=False)


@pytest.fixture(scope="module")
def transfer_findings(transfer: Dataset) -> list[Finding]:
    return check_dataset(transfer, parse_golds=False)


def _single(**kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "source": "Book",
        "source_kind": "textbook_problem",
        "domain": "Textbook Physics",
        "year": "",
        "source_problem_id": "P1",
        "title": "",
        "problem_type": "Mechanics",
        "problem": "A ball is dropped. Find the speed after 1 s.",
        "solution": "v = g t.",
        "answer": r"\boxed{9.8\,\mathrm{m/s}}",
        "answer_type": "NV",
        "type_sequence": "",
        "sub_problems": [],
    }
    rec.update(kw)
    return rec


def _sub(pid: str, **kw: Any) -> dict[str, Any]:
    sub: dict[str, Any] = {
        "problem_id": pid,
        "problem": f"Part {pid}: find x.",
        "solution": "x = 1.",
        "answer": r"\boxed{1}",
        "answer_type": "NV",
        "type_sequence": "",
    }
    sub.update(kw)
    return sub


def _multi(subs: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"source_problem_id": "M1", "problem": "A shared stem.", "solution": "",
                              "answer": "", "answer_type": "", "sub_problems": subs}
    fields.update(kw)
    return _single(**fields)


def _ds(tmp_path: Path, records: list[dict[str, Any]], name: str = "synthetic.json") -> Dataset:
    path = tmp_path / name
    with path.open("w", encoding="utf-8") as f:
        json.dump(records, f)
    return load_dataset(path)


def _kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]


def _of(findings: list[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


@pytest.fixture(autouse=True)
def _no_real_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep tests independent of the verifier under development (parse checks are tested with fakes)."""
    monkeypatch.setattr(checks, "_gold_parser", lambda: None)


# --------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    "label",
    [TD_AMP, TD_AND, "thermodynamics and statistical physics", " Thermodynamics  &  Statistical-Physics ",
     "THERMODYNAMICS & STATISTICAL PHYSICS."],
)
def test_normalise_label_folds_variants(label: str) -> None:
    assert normalise_label(label) == "thermodynamics and statistical physics"


def test_normalise_label_keeps_distinct_labels_apart() -> None:
    assert normalise_label("Mechanics") != normalise_label("Quantum Mechanics")
    assert normalise_label("") == ""
    assert normalise_label("Oscillations and Waves") == normalise_label("Oscillations & Waves")


def test_label_variants_on_transfer(transfer: Dataset) -> None:
    variants = label_variants(transfer)
    assert variants == {TD_AMP: [TD_AMP, TD_AND]}  # '&' is the more frequent spelling (8 vs 4)
    mapping = label_map(transfer)
    assert mapping[TD_AND] == TD_AMP and mapping[TD_AMP] == TD_AMP
    assert mapping["Mechanics"] == "Mechanics"


def test_label_variants_across_splits(application: Dataset, transfer: Dataset) -> None:
    assert label_variants(application) == {}
    both = label_variants([application, transfer])
    assert both[TD_AMP] == [TD_AMP, TD_AND]


def test_label_variant_findings_on_transfer(transfer_findings: list[Finding]) -> None:
    found = _of(transfer_findings, "label_variant")
    assert len(found) == 4
    for f in found:
        assert f.field == "problem_type" and f.sub_id == ""
        assert TD_AND in f.message and TD_AMP in f.message


def test_canonical_is_most_frequent(tmp_path: Path) -> None:
    recs = [
        _single(source_problem_id="1", problem_type="Optics & Waves"),
        _single(source_problem_id="2", problem_type="optics and waves"),
        _single(source_problem_id="3", problem_type="optics and waves"),
    ]
    ds = _ds(tmp_path, recs)
    assert label_variants(ds) == {"optics and waves": ["optics and waves", "Optics & Waves"]}
    found = _of(check_dataset(ds), "label_variant")
    assert [f.parent_uid for f in found] == ["Book//1"]


# --------------------------------------------------------------------------- real files


def test_real_application_findings(app_findings: list[Finding]) -> None:
    packed = _of(app_findings, "packed_box")
    p34 = [f for f in packed if f.parent_uid == "Georgi_Waves//P3.4"]
    assert {f.sub_id for f in p34} == {"(a)", "(b)", "(d)"}
    assert all(f.field.startswith("sub_problems[") and f.field.endswith("].answer") for f in p34)
    assert "4 slots" in p34[0].message

    # the OCR-garbled '5 10<ETX>4 00 $5 \times 10^{-4 ...}$' gold
    garbled = [f for f in app_findings if f.parent_uid == "Palen_SchaumAstronomy//5.27"]
    assert {"math_delimiter_in_box", "control_character"} <= set(_kinds(garbled))
    delim = _of(garbled, "math_delimiter_in_box")[0]
    assert delim.sub_id == "5.27" and delim.field == "answer" and "$" in delim.message
    assert "\\x03" in delim.message  # control characters are escaped in messages

    prose = {f.parent_uid for f in _of(app_findings, "prose_in_box")}
    assert "Purcell_EM//Ex3.56" in prose  # '\text{ (directed away from the positive disk)}'
    outside = {f.parent_uid for f in _of(app_findings, "text_outside_boxes")}
    assert "Georgi_Waves//P13.5" in outside
    assert not _of(app_findings, "label_variant")
    assert not _of(app_findings, "stem_equals_sub")


def test_real_transfer_findings(transfer_findings: list[Finding]) -> None:
    # the Python-list-looking gold "['\\boxed{0}', '\\boxed{...}']"
    py_list = [f for f in _of(transfer_findings, "text_outside_boxes") if f.parent_uid == "IOAA/2025/T06"]
    assert len(py_list) == 1 and py_list[0].sub_id == "T06(3a)" and "['" in py_list[0].message

    stems = _of(transfer_findings, "stem_equals_sub")
    assert len(stems) == 15 and all("only" in f.message for f in stems)
    assert len(_of(transfer_findings, "ignored_parent_gold")) == 15

    missing_kind = [f for f in _of(transfer_findings, "missing_field") if f.field == "source_kind"]
    assert len(missing_kind) == 25
    kp = [f for f in _of(transfer_findings, "missing_field") if f.field.endswith("knowledge_points")]
    assert [f.sub_id for f in kp] == ["T6(c)"]

    cc = _of(transfer_findings, "control_character")
    assert {f.field for f in cc} == {"sub_problems[4].solution", "sub_problems[1].solution"}
    assert any("\\frac" in f.message for f in cc)


def test_real_counts_are_stable(app_findings: list[Finding], transfer_findings: list[Finding]) -> None:
    a = count_by_kind(app_findings)
    t = count_by_kind(transfer_findings)
    assert set(a) | set(t) <= set(KINDS)
    assert a["packed_box"] == 3 and "packed_box" not in t
    assert t["label_variant"] == 4


def test_findings_serialise(app_findings: list[Finding]) -> None:
    d = app_findings[0].to_dict()
    assert set(d) == {"kind", "parent_uid", "sub_id", "field", "message"}
    json.dumps([f.to_dict() for f in app_findings])


def test_check_does_not_mutate(application: Dataset) -> None:
    before = [p.model_dump() for p in application.parents]
    check_dataset(application)
    assert [p.model_dump() for p in application.parents] == before


# --------------------------------------------------------------------------- synthetic: golds


def test_clean_record_has_no_findings(tmp_path: Path) -> None:
    ds = _ds(tmp_path, [_single(), _multi([_sub("(a)"), _sub("(b)", answer=r"\boxed{x = 2\,\text{m}}",
                                                                  answer_type="EQ")])])
    assert check_dataset(ds) == []


@pytest.mark.parametrize(
    ("answer", "delims"),
    [
        (r"\boxed{5 104 00 $5 \times 10^{-4 \prime \prime}$}", "$"),
        (r"\boxed{\(x = 2\)}", "\\("),
        (r"\boxed{\[ E = mc^2 \]}", "\\["),
    ],
)
def test_math_delimiters_in_box(tmp_path: Path, answer: str, delims: str) -> None:
    found = _of(check_dataset(_ds(tmp_path, [_single(answer=answer, answer_type="EX")])), "math_delimiter_in_box")
    assert len(found) == 1 and delims in found[0].message


@pytest.mark.parametrize(
    "answer",
    [
        r"\boxed{f(x) = \begin{cases} 1, & x > 0 \\[4pt] 0, & x \le 0 \end{cases}}",  # \\[4pt] is a line break
        r"\boxed{\$5}",  # an escaped dollar sign is not a delimiter
        r"$\boxed{5}$",  # delimiters around the box are fine
    ],
)
def test_not_math_delimiters(tmp_path: Path, answer: str) -> None:
    findings = check_dataset(_ds(tmp_path, [_single(answer=answer, answer_type="EX")]))
    assert not _of(findings, "math_delimiter_in_box")
    assert not _of(findings, "text_outside_boxes")


@pytest.mark.parametrize(
    "answer",
    [
        r"\boxed{E = \frac{\sigma}{2\epsilon_0} \text{ (directed away from the positive disk)}}",
        r"\boxed{\text{density of nucleus} \sim 10^{18}\,\mathrm{kg/m^3}}",
        r"\boxed{v = 3 \text{ the speed is measured in the lab frame}}",
        r"\boxed{v = 3 the speed is measured in the lab frame}",
    ],
)
def test_prose_in_box(tmp_path: Path, answer: str) -> None:
    found = _of(check_dataset(_ds(tmp_path, [_single(answer=answer, answer_type="EX")])), "prose_in_box")
    assert len(found) == 1 and found[0].field == "answer"


@pytest.mark.parametrize(
    ("answer", "answer_type"),
    [
        (r"\boxed{87 \text{ event / sec}}", "NV"),
        (r"\boxed{430 \text{ Myr}}", "NV"),
        (r"\boxed{a_{\text{max}} = g \tan\theta}", "EQ"),
        (r"\boxed{\text{The wheel comes to rest and all energy is dissipated.}}", "QL"),
        (r"\boxed{\text{TRUE}}", "TF"),
        (r"\boxed{\frac{\sin \theta}{\cos \theta}}", "EX"),
    ],
)
def test_not_prose(tmp_path: Path, answer: str, answer_type: str) -> None:
    ds = _ds(tmp_path, [_single(answer=answer, answer_type=answer_type)])
    assert not _of(check_dataset(ds), "prose_in_box")


def test_prose_check_uses_slot_type(tmp_path: Path) -> None:
    answer = r"\boxed{v = 2}, \boxed{\text{the ball stops at the top of the arc}}"
    ok = _ds(tmp_path, [_single(answer=answer, answer_type="TUP", type_sequence="NV,QL")], "ok.json")
    assert not _of(check_dataset(ok), "prose_in_box")
    bad = _ds(tmp_path, [_single(answer=answer, answer_type="TUP", type_sequence="NV,EX")], "bad.json")
    found = _of(check_dataset(bad), "prose_in_box")
    assert len(found) == 1 and "box 2/2" in found[0].message


def test_packed_box(tmp_path: Path) -> None:
    sub = _sub("(b)", answer=r"\boxed{\omega = 3,\ 3\sqrt{3},\ 6}", answer_type="TUP", type_sequence="EX,EX,EX")
    found = _of(check_dataset(_ds(tmp_path, [_multi([_sub("(a)"), sub])])), "packed_box")
    assert len(found) == 1
    f = found[0]
    assert (f.parent_uid, f.sub_id, f.field) == ("Book//M1", "(b)", "sub_problems[1].answer")
    assert "3\\sqrt{3}" in f.message and "3 slots" in f.message


def test_separate_boxes_are_not_packed(tmp_path: Path) -> None:
    ds = _ds(tmp_path, [_single(answer=r"\boxed{1}, \boxed{2}", answer_type="ALT", type_sequence="NV,NV")])
    assert check_dataset(ds) == []


@pytest.mark.parametrize(
    "answer",
    [
        r"\boxed{1} \text{ and } \boxed{2}",
        r"\boxed{1} \quad \text{and} \quad \boxed{2}",
        r"\boxed{1},\ \boxed{2}",
        r"\boxed{1} \\ \boxed{2}",
        r"\boxed{1}; \boxed{2}.",
        r"$\boxed{1}$ and $\boxed{2}$",
    ],
)
def test_separators_outside_boxes_are_fine(tmp_path: Path, answer: str) -> None:
    ds = _ds(tmp_path, [_single(answer=answer, answer_type="TUP", type_sequence="NV,NV")])
    assert not _of(check_dataset(ds), "text_outside_boxes")


@pytest.mark.parametrize(
    "answer",
    [
        "['\\\\boxed{0}', '\\\\boxed{-\\\\frac{1}{2}}']",
        r"\boxed{1} \text{ (inner cylinder rotating)}; \boxed{2}",
        r"The answers are \boxed{1} and \boxed{2}",
    ],
)
def test_text_outside_boxes(tmp_path: Path, answer: str) -> None:
    ds = _ds(tmp_path, [_single(answer=answer, answer_type="TUP", type_sequence="NV,EX")])
    found = _of(check_dataset(ds), "text_outside_boxes")
    assert len(found) == 1 and "\\boxed{…}" in found[0].message


def test_control_characters(tmp_path: Path) -> None:
    sub = _sub("(a)", solution="v = \x0crac{1}{2} \rho v^2 \times 3\twith a tab")
    ds = _ds(tmp_path, [_multi([sub, _sub("(b)", answer="\\boxed{5 10\x034}")])])
    found = _of(check_dataset(ds), "control_character")
    by_field = {f.field: f for f in found}
    assert set(by_field) == {"sub_problems[0].solution", "sub_problems[1].answer"}
    msg = by_field["sub_problems[0].solution"].message
    assert "\\frac" in msg and "\\rho" in msg and "\\times" in msg and "3 control characters" in msg
    assert "U+0003" in by_field["sub_problems[1].answer"].message


def test_tabs_and_crlf_are_not_control_findings(tmp_path: Path) -> None:
    ds = _ds(tmp_path, [_single(problem="Line one.\r\nLine two:\t 5 kg\t\t.")])
    assert not _of(check_dataset(ds), "control_character")


# --------------------------------------------------------------------------- synthetic: structure


def test_stem_equals_only_sub(tmp_path: Path) -> None:
    text = "A long problem statement that is both stem and sub-problem."
    rec = _multi([_sub("M1", problem=text)], problem=text)
    rec["answer"], rec["answer_type"] = r"\boxed{1}", "NV"
    found = check_dataset(_ds(tmp_path, [rec]))
    stem = _of(found, "stem_equals_sub")
    assert len(stem) == 1 and stem[0].field == "sub_problems[0].problem" and "only" in stem[0].message
    ign = _of(found, "ignored_parent_gold")
    assert len(ign) == 1 and ign[0].field == "answer" and "M1" in ign[0].message


def test_empty_stem_is_not_equal(tmp_path: Path) -> None:
    ds = _ds(tmp_path, [_multi([_sub("(a)")], problem="")])
    assert not _of(check_dataset(ds), "stem_equals_sub")


def test_missing_optional_fields(tmp_path: Path) -> None:
    rec = _single()
    del rec["source_kind"]
    rec["domain"] = ""
    rec["solution"] = ""
    found = _of(check_dataset(_ds(tmp_path, [rec])), "missing_field")
    assert {(f.field, "absent" in f.message) for f in found} == {
        ("source_kind", True), ("domain", False), ("solution", False),
    }


def test_missing_knowledge_points_only_when_most_have_them(tmp_path: Path) -> None:
    subs = [_sub("(a)", knowledge_points=["x"]), _sub("(b)", knowledge_points=["y"]), _sub("(c)")]
    found = _of(check_dataset(_ds(tmp_path, [_multi(subs)], "kp.json")), "missing_field")
    assert [f.field for f in found] == ["sub_problems[2].knowledge_points"]
    none = _ds(tmp_path, [_multi([_sub("(a)"), _sub("(b)")])], "nokp.json")
    assert not _of(check_dataset(none), "missing_field")


# --------------------------------------------------------------------------- gold parsing (verifier hook)


def test_gold_parse_check_with_fake_verifier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def fake(box: str, answer_type: Any) -> str | None:
        calls.append((box, str(answer_type)))
        return "cannot parse" if "??" in box else None

    monkeypatch.setattr(studybench.verify, "check_gold_parsable", fake, raising=False)
    monkeypatch.setattr(checks, "_gold_parser", _real_gold_parser)  # exercise the lazy import
    recs = [
        _single(source_problem_id="1", answer=r"\boxed{x = ??}", answer_type="EQ"),
        _single(source_problem_id="2", answer=r"\boxed{1}, \boxed{y = 2}", answer_type="TUP", type_sequence="NV,EQ"),
    ]
    ds = _ds(tmp_path, recs)
    found = _of(check_dataset(ds), "gold_unparsable")
    assert [(f.parent_uid, f.field) for f in found] == [("Book//1", "answer")]
    assert "cannot parse" in found[0].message and "(EQ)" in found[0].message
    assert calls == [("x = ??", "EQ"), ("1", "NV"), ("y = 2", "EQ")]
    calls.clear()
    assert not _of(check_dataset(ds, parse_golds=False), "gold_unparsable")
    assert calls == []


def test_gold_parse_timeout_is_retried_not_called_unparsable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def slow_once(box: str, answer_type: Any, timeout: float | None = None) -> str | None:
        calls.append(timeout)
        return "timed out" if timeout is None else None  # the long retry succeeds

    monkeypatch.setattr(checks, "_gold_parser", lambda: slow_once)
    findings = check_dataset(_ds(tmp_path, [_single()]))
    assert not _of(findings, "gold_unparsable") and not _of(findings, "gold_check_timed_out")
    assert calls == [None, checks.RETRY_TIMEOUT]

    def always_slow(box: str, answer_type: Any, timeout: float | None = None) -> str | None:
        return "timed out"

    monkeypatch.setattr(checks, "_gold_parser", lambda: always_slow)
    findings = check_dataset(_ds(tmp_path, [_single()], "slow.json"))
    assert not _of(findings, "gold_unparsable")
    found = _of(findings, "gold_check_timed_out")
    assert len(found) == 1 and "timed out" in found[0].message
    assert "gold_check_timed_out" in checks.KINDS


def test_gold_parse_check_skips_slots_typed_compound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def fake(box: str, answer_type: Any, timeout: float | None = None) -> str | None:
        seen.append(str(getattr(answer_type, "value", answer_type)))
        return "compound type: check each slot with its primitive type" if seen[-1] in ("TUP", "ALT") else None

    monkeypatch.setattr(checks, "_gold_parser", lambda: fake)
    rec = _single(answer=r"\boxed{a=b,\ c=d}, \boxed{1}", answer_type="TUP", type_sequence="TUP,NV")
    assert not _of(check_dataset(_ds(tmp_path, [rec])), "gold_unparsable")
    assert seen == ["NV"]


def test_gold_parse_check_survives_verifier_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(box: str, answer_type: Any) -> str | None:
        raise RecursionError("deep")

    monkeypatch.setattr(checks, "_gold_parser", lambda: boom)
    found = _of(check_dataset(_ds(tmp_path, [_single()])), "gold_unparsable")
    assert len(found) == 1 and "RecursionError" in found[0].message


def test_gold_parser_absent_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(studybench.verify, "check_gold_parsable", raising=False)
    assert _real_gold_parser() is None

