r"""General answer forms (issue 25, item 5) and truth values / choices written as sentences (item 3).

For users who train on math and physics together: sets (of tuples) in any order, solution lists, tuples
in order, ``\pm`` written out, matrices in any environment with entries in any equivalent form, unions
of intervals, set-builder notation; TF sentences with negations read right (``not true`` is false, ``it
is not false`` is no answer) and MC answers in sentences (two options named are wrong). Every accepted
form comes with wrong twins (a swapped tuple entry, an extra or dropped element, a wrong matrix entry,
the transpose, a flipped bracket, a double negation, a second option) that must stay rejected.

Two kinds of test: tables of hand-picked cases per form kind (in the verifier and in whole responses),
and the generated pairs of :mod:`studybench.testing.pairgen.forms` (seeded golds of every form, every
transformation class, floors per class, no near miss accepted).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from studybench.testing.pairgen import (
    GENERAL_KINDS,
    Gold,
    general_golds,
    generate_pairs,
    judge_pairs,
    load_golds,
    score,
)
from studybench.testing.pairgen.forms import FORMS
from studybench.verify import Verifier
from studybench.verify.comparison.forms import expand_pm, interval_like, list_items, read_set, read_tuple
from studybench.verify.comparison.matrices import read_matrix
from studybench.verify.reading.truth import truth_value
from studybench.verify.rules.mc import mc_rule
from studybench.verify.rules.tf import tf_rule

# (gold box, predicted box, answer type, expected, why)
SETS = [
    (r"\{(1,2),(3,4)\}", r"\{(3,4),(1,2)\}", "EX", True, "set of tuples in another order"),
    (r"\{(1,2),(3,4)\}", r"(3,4), (1,2)", "EX", True, "set of tuples as a bare list"),
    (r"\{(1,2),(3,4)\}", r"(3, 4) \text{ and } (1, 2)", "EX", True, "joined by and"),
    (r"\{(1,2),(3,4)\}", r"\{(4,3),(1,2)\}", "EX", False, "a swapped tuple entry"),
    (r"\{(1,2),(3,4)\}", r"\{(3,4),(1,2),(5,6)\}", "EX", False, "an extra element"),
    (r"\{(1,2),(3,4)\}", r"\{(3,4)\}", "EX", False, "an element dropped"),
    (r"\{(1,2),(3,4)\}", r"(3,4)", "EX", False, "one tuple of two"),
    (r"\{2,-3\}", r"\{-3,2\}", "EX", True, "numbers in another order"),
    (r"\{2,-3\}", r"-3, 2", "EX", True, "as a list"),
    (r"\{2,-3\}", r"x = -3 \text{ or } x = 2", "EX", True, "labelled values joined by or"),
    (r"\{2,-3\}", r"\{3,2\}", "EX", False, "a sign lost"),
    (r"\{2,-3\}", r"\{-3,2,5\}", "EX", False, "an extra number"),
    (r"S = \{\frac{1}{2}, 4\}", r"\left\{4, 0.5\right\}", "EX", True, "labelled gold; equivalent element"),
    (r"\{1,2\}", r"\{1,2,2\}", "EX", True, "a repeated element counts once"),
    (r"\emptyset", r"\varnothing", "EX", True, "empty set spelled otherwise"),
    (r"\emptyset", r"\{\}", "EX", True, "empty braces"),
    (r"\emptyset", r"\{0\}", "EX", False, "the set holding 0"),
    (r"(1,2),(3,4)", r"(3,4),(1,2)", "EX", True, "a list of solution tuples is a solution set"),
    (r"(1,2),(3,4)", r"\{(1,2),(3,4)\}", "EX", True, "written as a set"),
    (r"(1,2),(3,4)", r"(3,4),(2,1)", "EX", False, "a swapped tuple entry"),
    (r"(3;5;1),(5;3;1)", r"(5, 3, 1), (3, 5, 1)", "EX", True, "semicolons inside tuples"),
    (r"p=3,q=2;p=5,q=2", r"(3,2),(5,2)", "EX", True, "groups of labelled values as tuples"),
    (r"p=3,q=2;p=5,q=2", r"(2,3),(5,2)", "EX", False, "one group's values swapped"),
    (r"x = 2, -3", r"x = -3, x = 2", "EX", True, "values of one label in another order"),
    (r"x = 2, -3", r"x = -3, 3", "EX", False, "one value wrong"),
    (r"8 \text{ and } 9", r"8, 9", "EX", True, "a gold listing in words"),
    (r"5, 6", r"5 \text{ and } 6", "EX", True, "a prediction listing in words"),
    (r"5, 6", r"6, 5", "EX", False, "a plain list stays ordered (parts (a), (b))"),
]
TUPLES = [
    (r"(1,\frac{3}{2})", r"\left(1, 1.5\right)", "EX", True, "entries in equivalent forms"),
    (r"(1,\frac{3}{2})", r"\langle 1, \tfrac{3}{2} \rangle", "EX", True, "angle brackets"),
    (r"(1,\frac{3}{2})", r"(\frac{3}{2}, 1)", "EX", False, "entries swapped"),
    (r"(1,\frac{3}{2})", r"(1, \frac{3}{2}, 0)", "EX", False, "an extra entry"),
    (r"(p, q) = (5, 2)", r"(5, 2)", "EX", True, "label dropped"),
    (r"(5, 2)", r"(p, q) = (5, 2)", "EX", True, "label added"),
    (r"(5, 2)", r"(2, 5)", "EX", False, "order matters in a tuple"),
    (r"\begin{pmatrix}1\\2\\3\end{pmatrix}", r"(1, 2, 3)", "EX", True, "a column vector as a tuple"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\langle 1, 2\rangle", "EX", True, "a column vector in angle brackets"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\begin{pmatrix}1&2\end{pmatrix}^T", "EX", True, "a transposed row"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\begin{pmatrix}2\\1\end{pmatrix}", "EX", False, "entries swapped"),
    (r"\begin{pmatrix}1\\2\\3\end{pmatrix}", r"\begin{pmatrix}1&2&3\end{pmatrix}", "EX", False, "a row for a column"),
]
PLUS_MINUS = [
    (r"1\pm\sqrt{3}", r"1+\sqrt3, 1-\sqrt3", "EX", True, "both values"),
    (r"1\pm\sqrt{3}", r"1-\sqrt{3} \text{ and } 1+\sqrt{3}", "EX", True, "both values, other order"),
    (r"1\pm\sqrt{3}", r"1+\sqrt3, 2-\sqrt3", "EX", False, "one value wrong"),
    (r"1\pm\sqrt{3}", r"1+\sqrt3", "EX", False, "one value only"),
    (r"\{1\pm\sqrt{3}, 4\}", r"\{4, 1-\sqrt3, 1+\sqrt3\}", "EX", True, "inside a set"),
    (r"\{1\pm\sqrt{3}, 4\}", r"\{4, 1+\sqrt3\}", "EX", False, "inside a set, one value lost"),
    (r"\pm 7", r"\{-7,7\}", "EX", True, "a bare \\pm"),
    (r"\pm 7", r"7", "EX", False, "one sign only (EX)"),
    (r"x = \frac{-1 \pm \sqrt{5}}{2}", r"x = \frac{-1+\sqrt5}{2}, x = \frac{-1-\sqrt5}{2}", "EX", True, "labelled"),
]
MATRICES = [
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\begin{bmatrix}2&-1\\0&3\end{bmatrix}", "EX", True, "bmatrix"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\left[\begin{array}{cc}2&-1\\0&3\end{array}\right]", "EX", True, "array in brackets"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\left(\begin{array}{rr}2&-1\\0&3\\\end{array}\right)", "EX", True, "array, trailing row break"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"M = \begin{pmatrix}2.0&-\frac{2}{2}\\0&3\end{pmatrix}", "EX", True, "labelled, equivalent entries"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\begin{pmatrix}2&-1\\0&4\end{pmatrix}", "EX", False, "a wrong entry"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\begin{pmatrix}2&0\\-1&3\end{pmatrix}", "EX", False, "the transpose"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\begin{pmatrix}2&-1&0\\0&3&0\end{pmatrix}", "EX", False, "another shape"),
    (r"\begin{pmatrix}2&-1\\0&3\end{pmatrix}", r"\left[\begin{array}{cc}2&-1\\3&0\end{array}\right]", "EX", False, "array, entries swapped"),
    (r"\begin{pmatrix}x+1&2x\\3&4\end{pmatrix}", r"\begin{bmatrix}1+x&x\cdot 2\\3&4\end{bmatrix}", "EX", True, "symbolic entries"),
    (r"\begin{pmatrix}x+1&2x\\3&4\end{pmatrix}", r"\begin{bmatrix}1+x&x^2\\3&4\end{bmatrix}", "EX", False, "a wrong symbolic entry"),
    (r"\begin{pmatrix}\cos\theta&-\sin\theta\\\sin\theta&\cos\theta\end{pmatrix}",
     r"\begin{bmatrix}\cos(\theta)&-\sin(\theta)\\\sin(\theta)&\cos(\theta)\end{bmatrix}", "EX", True, "trigonometric entries"),
    (r"\begin{pmatrix}\cos\theta&-\sin\theta\\\sin\theta&\cos\theta\end{pmatrix}",
     r"\begin{bmatrix}\cos(\theta)&\sin(\theta)\\-\sin(\theta)&\cos(\theta)\end{bmatrix}", "EX", False, "the inverse rotation"),
    (r"\begin{vmatrix}1&2\\3&4\end{vmatrix}", r"-2", "EX", True, "a determinant"),
    (r"\begin{vmatrix}1&2\\3&4\end{vmatrix}", r"2", "EX", False, "a determinant, wrong sign"),
]
INTERVALS = [
    (r"(-\infty,-1)\cup(1,\infty)", r"x<-1 \text{ or } x>1", "IN", True, "a union as inequalities joined by or"),
    (r"(-\infty,-1)\cup(1,\infty)", r"x<-1 \text{ or } x\ge 1", "IN", False, "or-form, one end closed"),
    (r"(-\infty, 2]\cup[5,\infty)", r"x \le 2 \lor x \ge 5", "IN", True, "\\lor"),
    (r"\{-1\}\cup[0,7)", r"[0,7)\cup\{-1\}", "IN", True, "a point and an interval in another order"),
    (r"\{-1\}\cup[0,7)", r"[0,7)", "IN", False, "the point dropped"),
    (r"\{-1\}\cup[0,7)", r"\{1\}\cup[0,7)", "IN", False, "the point moved"),
    (r"(2,\infty)", r"\{x \mid x>2\}", "IN", True, "set-builder notation"),
    (r"(2,\infty)", r"\left\{x\in\mathbb{R} : x>2\right\}", "IN", True, "set-builder over the reals"),
    (r"(2,\infty)", r"\{x \mid x\ge2\}", "IN", False, "set-builder, end included"),
    (r"\mathbb{R}", r"(-\infty,\infty)", "IN", True, "the reals"),
    (r"(0,1)\cup(1,2)", r"(0,2)\setminus\{1\}", "IN", True, "a difference"),
    (r"(0,1)\cup(1,2)", r"(0,2)", "IN", False, "the hole filled"),
    (r"[-1,1]", r"[-1,0]\cup[0,1]", "IN", True, "touching intervals merged"),
    (r"[-1,1]", r"[-1,0)\cup(0,1]", "IN", False, "a hole at 0"),
    (r"(-\infty, 2]\cup[5,\infty)", r"[5,\infty)\cup(-\infty,2]", "EX", True, "EX gold: a union in another order"),
    (r"(-\infty, 2]\cup[5,\infty)", r"(-\infty,2)\cup[5,\infty)", "EX", False, "EX gold: a bracket flipped"),
    (r"[1,4)", r"(1,4)", "EX", False, "EX gold: a bracket flipped"),
    (r"-3 \le x \le 8", r"x \in [-3,8]", "EX", True, "EX gold: a double inequality against a membership"),
    (r"-20 < b < 3", r"(-20, 3)", "EX", True, "EX gold: a double inequality against an interval"),
    (r"-20 < b < 3", r"[-20, 3)", "EX", False, "EX gold: an end included"),
    (r"2 \le |y| \le 5", r"y \in [-5,-2]\cup[2,5]", "EX", True, "an absolute value as two intervals"),
    (r"2 \le |y| \le 5", r"y \in [-5,-2]\cup[2,6]", "EX", False, "an end moved"),
]
TABLES = {"sets": SETS, "tuples": TUPLES, "plus-minus": PLUS_MINUS, "matrices": MATRICES, "intervals": INTERVALS}
ALL_CASES = [(kind, *c) for kind, rows in TABLES.items() for c in rows]


@pytest.fixture(scope="module")
def table_verdicts(verifier: Verifier) -> dict[tuple[str, str, str], Any]:
    items = [([g], [p], at, "") for _, g, p, at, _, _ in ALL_CASES]
    return {(g, p, at): v for (_, g, p, at, _, _), v in zip(ALL_CASES, verifier.verify_many(items), strict=True)}


@pytest.mark.parametrize(("kind", "gold", "pred", "at", "expected", "why"), ALL_CASES, ids=[f"{c[0]}:{c[5]}" for c in ALL_CASES])
def test_general_forms(kind: str, gold: str, pred: str, at: str, expected: bool, why: str, table_verdicts: dict[Any, Any]) -> None:
    v = table_verdicts[(gold, pred, at)]
    assert v.correct is expected, f"{kind} ({why}): {gold!r} vs {pred!r}: {v.reason}"


def test_every_table_has_wrong_twins() -> None:
    for kind, rows in TABLES.items():
        assert any(r[3] for r in rows) and sum(not r[3] for r in rows) >= 3, kind


# whole responses, with the answer inside text and boxes (the extraction step too)
RESPONSES = [
    (r"\boxed{\{4, -7\}}", r"So the roots are $\boxed{-7, 4}$.", "EX", True),
    (r"\boxed{(3,5),(5,3)}", r"Both work: \boxed{(x, y) = (5, 3) \quad \text{and} \quad (3, 5)}", "EX", True),
    (r"\boxed{(3,5),(5,3)}", r"Final Answer: \boxed{(5, 3), (3, 5), (4, 4)}", "EX", False),
    (r"\boxed{(2, \frac{\pi}{3})}", r"The polar form is $\boxed{\left(2, \frac{\pi}{3}\right)}$.", "EX", True),
    (r"\boxed{\begin{pmatrix} 3 & 1 \\ 0 & 2 \end{pmatrix}}",
     r"Here $\left[\begin{array}{cc} 3 & 1 \\ 0 & 5 \end{array}\right]$ was wrong, so \boxed{\begin{bmatrix} 3 & 1 \\ 0 & 2 \end{bmatrix}}", "EX", True),
    (r"\boxed{\begin{pmatrix} \frac{1}{4} \\ \frac{1}{5} \end{pmatrix}}", r"Final Answer: \boxed{\begin{pmatrix} 0.25 \\ 0.2 \end{pmatrix}}", "EX", True),
    (r"\boxed{\begin{pmatrix} \frac{1}{4} \\ \frac{1}{5} \end{pmatrix}}", r"Final Answer: \boxed{\begin{pmatrix} 0.25 \\ 0.3 \end{pmatrix}}", "EX", False),
    (r"\boxed{\{-2\} \cup [1, 4)}", r"Therefore \boxed{x \in [1,4) \cup \{-2\}}.", "EX", True),
    (r"\boxed{\text{False}}", r"Checking the claim: \boxed{\text{No, it does not hold}}", "TF", True),
    (r"\boxed{\text{True}}", r"Final Answer: \boxed{\text{It is not false}}", "TF", False),
    (r"\boxed{B}", r"Final Answer: \boxed{\text{B) } 3.2\ \mathrm{m/s}}", "MC", True),
    (r"\boxed{B}", r"Final Answer: \boxed{\text{B or C}}", "MC", False),
]


def test_general_forms_inside_responses(verifier: Verifier) -> None:
    out = verifier.verify_responses([(g, r, at, "") for g, r, at, _ in RESPONSES])
    wrong = [(g, r[-60:], v.reason) for (g, r, _, e), (_, v) in zip(RESPONSES, out, strict=True) if v.correct is not e]
    assert not wrong, wrong


# ----------------------------------------------------------------------------------- TF and MC

TRUTH = [
    ("True", True), ("no", False), (r"\text{Yes}", True), (r"\text{No, they cannot be distinguished}", False),
    (r"\text{That claim is false}", False), (r"\text{Yes, it holds}", True), (r"\text{No, it does not hold}", False),
    (r"\text{The statement is true.}", True), (r"\text{Correct}", True), (r"\text{The statement is incorrect}", False),
    (r"\text{It is false.}", False), (r"\text{not true}", False), (r"\text{The statement is not true.}", False),
    (r"\text{It isn't true}", False), (r"\text{It doesn't hold}", False), (r"\text{No, it doesn't.}", False),
    (r"\text{Yes, it does.}", True), (r"\text{That's right}", True), (r"\text{The answer is no}", False),
    (r"\text{False, since } x > 0", False), (r"\text{Yes, because the energy is conserved}", True),
    # no single truth value: rejected whatever the gold
    (r"\text{it is not false that it holds}", None), (r"\text{It is not false}", None), (r"\text{not false}", None),
    (r"\text{It is not wrong}", None), (r"\text{It is not not true}", None), (r"\text{Yes, it does not hold}", None),
    (r"\text{No, it holds}", None), (r"\text{No, it is.}", None), (r"\text{True, not false}", None),
    (r"\text{true and false}", None), (r"\text{True, but only for small angles}", None), (r"\text{No, not always}", None),
    (r"\text{Sometimes true}", None), (r"\text{I think it is true}", None), (r"\text{probably true}", None),
    (r"\text{Neither}", None), (r"\text{It does}", None),
]


@pytest.mark.parametrize(("box", "value"), TRUTH)
def test_truth_values_written_as_sentences(box: str, value: bool | None) -> None:
    assert truth_value(box) is value
    for gold in (r"\text{True}", r"\text{False}"):
        ok, _ = tf_rule(gold, box)
        assert ok is (value is not None and value == (gold == r"\text{True}")), (gold, box)


MC = [
    ("B", r"(B)", True), ("B", r"\text{Option B}", True), ("B", r"\text{The answer is B}", True), ("B", r"B) 3.2 m/s", True),
    ("B", r"\text{B) 3.2 m/s}", True), ("B", r"\text{The correct answer is (B) 3.2 m/s}", True), ("B", r"\text{Answer: B}", True),
    ("B", r"\textbf{(B)}", True), ("B", r"\text{The answer is B, 3.2 m/s}", True), ("B", r"\text{The answer is option B.}", True),
    ("B", r"\text{I choose B}", True), ("b", r"\text{Choice (b)}", True), ("B", r"\text{B: 3.2 m/s}", True),
    ("B", r"\text{B and C}", False), ("B", r"\text{(B) or (C)}", False), ("B", r"\text{B, D}", False), ("B", r"\text{B, not C}", False),
    ("B", r"\text{Either B or C}", False), ("B", r"\text{B (or possibly C)}", False), ("B", r"\text{B is incorrect}", False),
    ("B", r"\text{options B and C}", False), ("B", r"\text{B/C}", False), ("B", r"\text{C}", False), ("B", r"\text{I choose C}", False),
    ("C", r"\text{The answer is (C), not (B)}", False),
]


@pytest.mark.parametrize(("gold", "pred", "expected"), MC)
def test_choices_written_as_sentences(gold: str, pred: str, expected: bool) -> None:
    assert mc_rule(gold, pred)[0] is expected


# ----------------------------------------------------------------------------------- readers

def test_readers_of_the_forms() -> None:
    assert read_set(r"\left\{ (1,2), (3,4) \right\}") == ["(1,2)", "(3,4)"]
    assert read_set(r"x \in \{1, 2\}") == ["1", "2"]
    assert read_set(r"\varnothing") == []
    assert read_set(r"\{x \mid x > 2\}") is None  # set-builder: no element list
    assert read_set(r"\frac{1}{4}\left\{a + b\right\} c") is None  # braces as brackets inside an expression
    assert read_tuple(r"(p, q) = (3, 2)") == ["3", "2"]
    assert read_tuple(r"[0, 1)") is None and read_tuple("(3)") is None
    assert expand_pm(r"1 \pm \sqrt{3}") == [r"1 + \sqrt{3}", r"1 - \sqrt{3}"]
    assert expand_pm(r"\pm a \pm b") == [r"\pm a \pm b"]  # two signs: not expanded
    assert list_items(r"1, 2, \text{and } 3") == ["1", "2", "3"]
    assert list_items(r"\text{between } 2 \text{ and } 3 \text{ m}") != ["2", "3"]
    m = read_matrix(r"A = \left[\begin{array}{cc} 1 & 2 \\ 3 & 4 \\ \hline \end{array}\right]")
    assert m is not None and m.rows == (("1", "2"), ("3", "4")) and not m.det
    m = read_matrix(r"\begin{pmatrix} 1 & 2 \end{pmatrix}^{\top}")
    assert m is not None and m.shape == (2, 1)
    assert read_matrix(r"\begin{vmatrix} 1 & 2 \\ 3 & 4 \end{vmatrix}").det  # type: ignore[union-attr]
    assert read_matrix(r"\begin{pmatrix} 1 & 2 \\ 3 \end{pmatrix}") is None  # ragged
    assert read_matrix(r"2\begin{pmatrix} 1 \end{pmatrix}") is None  # a scalar times a matrix: the symbolic path
    assert interval_like(r"(-\infty, 2] \cup [5, \infty)", "x") and interval_like("[1, 4)", "[1, 4)")
    assert not interval_like("(1, 4)", "(1, 4)") and not interval_like(r"\{1, 2\}", r"\{2, 1\}")


# ----------------------------------------------------------------------------------- generated pairs

FORM_NAMES = [t.name for t in FORMS]
FLOORS: dict[str, float] = {n: 0.95 for n in FORM_NAMES if not n.startswith("miss:")} | {"tf:sentence": 0.95, "mc:sentence": 0.95}
"""Recall floors of the general-form, TF and MC classes on the generated sample (measured 1.000 each; the
verifier of commit 833fd6c: set:order 0.00, set:list 0.00, set:words 0.17, set:pm 0.00, set:entries 0.29,
tuple:entries 0.00, matrix:env 0.50, matrix:entries 0.57, matrix:vector 0.33, interval:order 0.58,
interval:ineq 0.63, interval:builder 0.00, interval:merge 0.00, tf:negation 0.00, tf:lead 0.44, tf:sentence
0.50, mc:gloss 0.83, mc:lead 0.83). Raise, never lower."""


@pytest.fixture(scope="module")
def choice_golds(data_dir: Path) -> list[Gold]:
    return [g for g in load_golds(data_dir).golds if {"TF", "MC"} & set(g.type_sequence.split(",") + [g.answer_type])]


@pytest.fixture(scope="module")
def form_pairs(choice_golds: list[Gold]) -> list[Any]:
    return generate_pairs(general_golds(6) + choice_golds, transformations=FORM_NAMES + ["tf:sentence", "mc:sentence"], cap=2)


def test_general_golds_are_seeded_and_cover_every_kind() -> None:
    a, b = general_golds(3, seed=1), general_golds(3, seed=1)
    assert a == b and a != general_golds(3, seed=2)
    assert {g.gold_id.split(":")[1] for g in a} == set(GENERAL_KINDS)
    assert all(g.source == "general" and g.answer == f"\\boxed{{{g.boxes[0]}}}" for g in a)


def _multiset(box: str) -> list[str] | None:
    """Elements of a generated set / list, read with a splitter of this test's own (no verifier code)."""
    t = re.sub(r"\\left|\\right|\s+", "", box)
    t = re.sub(r"\\text\{(and|or)\}|\\quad|\\lor|,\\text\{and\}", ",", t)
    if t.startswith("x="):
        t = t[2:]
    t = t.replace("x=", "")
    m = re.fullmatch(r"\\\{(.*)\\\}", t)
    t = m.group(1) if m else t
    out, depth, cur = [], 0, ""
    for c in t:
        depth += c in "([{"
        depth -= c in ")]}"
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    out.append(cur)
    return sorted(out)


def test_set_pairs_keep_or_change_their_elements_by_construction(form_pairs: list[Any]) -> None:
    seen = set()
    for p in form_pairs:
        if p.transformation in ("set:order", "set:list", "set:words"):
            assert _multiset(p.pred_box) == _multiset(p.gold_box), (p.transformation, p.gold_box, p.pred_box)
            seen.add(p.transformation)
        elif p.transformation in ("miss:set-swap", "miss:set-extra", "miss:set-drop", "miss:set-value"):
            assert _multiset(p.pred_box) != _multiset(p.gold_box), (p.transformation, p.gold_box, p.pred_box)
            seen.add(p.transformation)
    assert len(seen) == 7


def test_every_form_class_makes_pairs(form_pairs: list[Any]) -> None:
    made = {p.transformation for p in form_pairs}
    assert set(FORM_NAMES) <= made, sorted(set(FORM_NAMES) - made)
    assert generate_pairs(general_golds(6), transformations=FORM_NAMES, cap=2) == generate_pairs(
        general_golds(6), transformations=FORM_NAMES, cap=2)


def test_form_classes_floors_and_no_near_miss_accepted(form_pairs: list[Any], verifier: Verifier) -> None:
    rows = {r.name: r for r in score(form_pairs, judge_pairs(form_pairs, verifier))}
    low = {n: (rows[n].recall, f) for n, f in FLOORS.items() if (rows[n].recall or 0.0) < f}
    assert not low, f"recall below its floor (measured, floor): {low}"
    accepted = {n: rows[n].false_accepts for n in FORM_NAMES if n.startswith("miss:") and rows[n].false_accepts}
    assert not accepted, f"near misses accepted: {accepted}"
    assert rows["all"].precision == 1.0
