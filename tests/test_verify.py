"""Rule-based verdicts per answer type (PROTOCOL.md section 5) and real-data self-acceptance."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from studybench.verify import Verdict, Verifier, check_gold_parsable, judge_boxes, judge_response
from studybench.verify.judges import fast_judge
from studybench.verify.latex import norm_string
from studybench.verify.quantity import parse_quantity


@pytest.fixture(scope="module")
def verifier() -> Iterator[Verifier]:
    with Verifier(workers=2, timeout=5.0) as v:
        yield v


# (gold boxes, predicted boxes, answer_type, type_sequence, expected, why)
CASES = [
    # NV
    ([r"\frac{1}{2}"], ["0.5"], "NV", "", True, "fraction vs decimal"),
    (["0.5"], [r"\frac{1}{2}"], "NV", "", True, "decimal vs fraction"),
    ([r"3 \times 10^{8}\,\mathrm{m/s}"], ["3e8"], "NV", "", True, "e-notation, unit omitted"),
    ([r"3 \times 10^{8}\,\mathrm{m/s}"], [r"3\cdot 10^8 \text{ m/s}"], "NV", "", True, "cdot notation, same unit"),
    ([r"3 \times 10^{-3}"], [r"0.003"], "NV", "", True, "negative exponent"),
    ([r"3 \times 10^{8}"], [r"4\times10^{8}"], "NV", "", False, "wrong mantissa"),
    ([r"3.05 \times 10^{6}"], ["3.0"], "NV", "", False, "3.0 must not equal 3.05e6"),
    (["3.0"], ["3.05e6"], "NV", "", False, "exponent matters"),
    (["10.3"], ["10.35"], "NV", "", True, "within 1%"),
    (["10.3"], ["10.5"], "NV", "", False, "outside 1%"),
    ([r"y \approx 5 \times 10^{-32}"], [r"5\times10^{-32}"], "NV", "", True, "gold with left side"),
    ([r"5\times10^{-32}"], [r"y = 5.0\times10^{-32}"], "NV", "", True, "prediction with left side"),
    ([r"130\,\mathrm{km}"], [r"1.3\times10^{5}\,\mathrm{m}"], "NV", "", True, "km vs m via pint"),
    ([r"130\,\mathrm{km}"], [r"130\,\mathrm{s}"], "NV", "", False, "incompatible unit"),
    ([r"98.5\%"], ["0.985"], "NV", "", True, "percent as fraction"),
    ([r"98.5\%"], [r"98.5\%"], "NV", "", True, "percent"),
    ([r"45^\circ"], [r"45^{\circ}"], "NV", "", True, "degree forms"),
    ([r"51^{\circ}5'"], [r"51.08^\circ"], "NV", "", True, "degrees and minutes"),
    (["0"], ["0.0"], "NV", "", True, "zero gold exact"),
    (["0"], ["0.001"], "NV", "", False, "zero gold: absolute tolerance 1e-9"),
    (["-2"], ["2"], "NV", "", False, "sign matters"),
    ([r"\frac{R}{2}"], [r"0.5R"], "NV", "", True, "symbolic NV gold uses EX rules"),
    # EX
    ([r"2\hbar\omega"], [r"2\omega"], "EX", "", False, "physical constants are symbols"),
    ([r"2\hbar\omega"], [r"\omega\hbar\cdot 2"], "EX", "", True, "commuted product"),
    ([r"\omega t"], [r"\omegat"], "EX", "", False, "space inside macros is meaningful"),
    ([r"\sin\omega t"], [r"\sin(\omega t)"], "EX", "", True, "function argument forms"),
    ([r"\frac{M}{m}"], [r"\frac{m}{M}"], "EX", "", False, "case of symbols matters"),
    ([r"\omega = \sqrt{\frac{2C}{MR^2}}"], [r"\frac{\sqrt{2C}}{R\sqrt{M}}"], "EX", "", True, "rhs after =, radicals"),
    ([r"\omega = \sqrt{\frac{2C}{MR^2}}"], [r"\sqrt{\frac{C}{MR^2}}"], "EX", "", False, "missing factor"),
    ([r"\frac{\sqrt{7}}{2}\omega_0"], [r"\sqrt{1.75}\,\omega_{0}"], "EX", "", True, "subscripts, decimal"),
    ([r"v_{0} / [ 1 + (\mu v_{0} t / l) ]"], [r"\frac{l v_0}{l+\mu v_0 t}"], "EX", "", True, "rearranged fraction"),
    ([r"\frac{180}{181}c"], [r"0.9945c"], "EX", "", True, "decimal coefficient within 1%"),
    ([r"x^2"], [r"x^3"], "EX", "", False, "different power"),
    ([r"E_0\cos(\omega t)"], [r"E_{0}\cos\left(\omega t\right)"], "EX", "", True, "E_0 followed by a function"),
    ([r"\hat{\mathbf{r}}\frac{q}{r^2}"], [r"\frac{q}{r^2}\hat{r}"], "EX", "", True, "bold hat vector"),
    # EQ
    ([r"E = mc^2"], [r"mc^2 = E"], "EQ", "", True, "swapped sides"),
    ([r"E = mc^2"], [r"E = Mc^2"], "EQ", "", False, "different symbol case"),
    ([r"2x = 4y"], [r"x = 2y"], "EQ", "", True, "proportional equations"),
    ([r"v = \sqrt{2gh}"], [r"\sqrt{2 g h}"], "EQ", "", True, "short left side kept; bare rhs accepted"),
    ([r"v = \sqrt{2gh}"], [r"v = \sqrt{gh}"], "EQ", "", False, "wrong rhs"),
    ([r"L = 1.09\,\text{H}"], [r"L = 1.09"], "EQ", "", True, "numeric rhs, unit omitted"),
    ([r"L = 1.09\,\text{H}"], [r"L = 2.09\,\text{H}"], "EQ", "", False, "numeric rhs wrong"),
    ([r"\tan \theta = \mu"], [r"\mu = \tan\theta"], "EQ", "", True, "trig equation swapped"),
    # IN
    (["[0, 1)"], ["[0,1)"], "IN", "", True, "same interval"),
    (["[0, 1)"], ["[0,1]"], "IN", "", False, "bracket types must match"),
    ([r"(0,1]\cup[2,3]"], [r"(0, 1] \cup [2, 3]"], "IN", "", True, "union"),
    ([r"u \geq 0.36"], [r"0.36 \le u"], "IN", "", True, "flipped inequality"),
    ([r"u \geq 0.36"], [r"u > 0.36"], "IN", "", False, "strictness differs"),
    ([r"h(2R-h)<4R^2"], [r"2Rh - h^2 < 4R^2"], "IN", "", True, "expanded inequality"),
    # MC
    (["E"], [r"\text{E}"], "MC", "", True, "letter in text"),
    (["E"], ["E: some text"], "MC", "", True, "letter with option text"),
    (["E"], ["(E)"], "MC", "", True, "parenthesised letter"),
    (["E"], ["E. text"], "MC", "", True, "letter with period"),
    (["E"], ["D"], "MC", "", False, "wrong letter"),
    (["(a)"], ["A"], "MC", "", True, "gold in parentheses, case-insensitive"),
    (["Pluto"], [r"\text{pluto}"], "MC", "", True, "word option"),
    (["Pluto"], ["Mars"], "MC", "", False, "wrong word option"),
    # TF
    ([r"\text{TRUE}"], ["yes"], "TF", "", True, "synonym"),
    ([r"\text{NO}"], [r"\text{False}"], "TF", "", True, "no = false"),
    ([r"\text{TRUE}"], [r"\text{False}"], "TF", "", False, "opposite"),
    ([r"\text{TRUE}"], ["maybe"], "TF", "", False, "not a truth value"),
    # QL
    ([r"\text{Capricornus (Cap)}"], ["capricornus  (cap)"], "QL", "", True, "case and spacing"),
    (["steeper"], [r"\text{Steeper.}"], "QL", "", True, "punctuation"),
    (["steeper"], ["flatter"], "QL", "", False, "different word"),
    # TUP / ALT / several boxes
    (["1", "2"], ["1, 2"], "TUP", "NV,NV", True, "packed tuple split at commas"),
    (["1", "2"], ["2, 1"], "TUP", "NV,NV", False, "order matters in TUP"),
    ([r"x = 1", "steeper"], ["x=1", "steeper"], "TUP", "EQ,QL", True, "mixed types"),
    (["1", "2"], ["1"], "TUP", "NV,NV", False, "missing slot"),
    ([r"7.0\times10^{-8}\ \text{rad}", r"0.014\ \text{arcsec}"], ["0.0140"], "ALT", "NV,NV", True, "any alternative"),
    ([r"7.0\times10^{-8}\ \text{rad}", r"0.014\ \text{arcsec}"], ["0.02"], "ALT", "NV,NV", False, "no alternative"),
    (["a", "b"], ["b", "a"], "EX", "", True, "atomic multi-box order-free"),
    (["a", "b"], ["a", "a"], "EX", "", False, "atomic multi-box needs each gold"),
    # brace-less macro arguments (TeX reads one token per argument)
    ([r"e = \frac{1}{2}"], [r"e = \frac12"], "NV", "", True, "frac12 with left side"),
    ([r"\frac{1}{2}"], [r"\frac13"], "NV", "", False, "frac13 is not one half"),
    ([r"r_S=\frac{1}{2}\alpha r_E"], [r"r_S=\frac12\alpha r_E"], "EX", "", True, "frac12 times symbols"),
    ([r"\frac12\mu_0\sigma\omega^2 r^3"], [r"0.5\,\mu_0\sigma\omega^2 r^3"], "EX", "", True, "gold frac12 vs decimal"),
    ([r"\frac{\pi}{4}"], [r"\frac\pi4"], "EX", "", True, "frac with control word argument"),
    ([r"\frac{\pi}{4}"], [r"\frac\pi3"], "EX", "", False, "wrong denominator"),
    ([r"\sqrt{2}\,g"], [r"\sqrt2 g"], "EX", "", True, "sqrt2"),
    ([r"\frac{1}{2}3"], [r"\frac{1}{23}"], "EX", "", False, "frac123 reads as (1/2)*3, not 1/23"),
    # safety / size
    ([r"5^{5^{5^{5^{5}}}}"], ["3"], "EX", "", False, "power tower rejected"),
    (["x"], ["x" * 3000], "EX", "", False, "oversized prediction"),
]


@pytest.mark.parametrize(
    "gold,pred,atype,ts,expected,why", CASES, ids=[f"{c[2]}-{c[5]}" for c in CASES]
)
def test_verifier_cases(
    verifier: Verifier, gold: list[str], pred: list[str], atype: str, ts: str, expected: bool, why: str
) -> None:
    v = verifier.judge(gold, pred, atype, ts)
    assert isinstance(v, Verdict)
    assert v.correct is expected, f"{why}: {v.reason}"
    assert v.reason.startswith("correct" if expected else "incorrect")


def test_judge_many_matches_judge(verifier: Verifier) -> None:
    items = [(c[0], c[1], c[2], c[3]) for c in CASES]
    got = verifier.judge_many(items)
    assert [v.correct for v in got] == [c[4] for c in CASES]


def test_fast_path_does_not_need_workers() -> None:
    with Verifier(workers=1) as v:
        res = v.judge_many([(["E"], [r"\text{E}"], "MC", ""), (["x^2"], ["x^{2}"], "EX", ""), (["\\text{yes}"], ["no"], "TF", "")])
        assert [r.correct for r in res] == [True, True, False]
        assert v.pool.size == 0


def test_memo_reuses_verdicts(verifier: Verifier) -> None:
    item = ([r"\frac{a}{b}"], [r"a b^{-1}"], "EX", "")
    first = verifier.judge(*item)
    before = verifier.stats["memo"]
    assert verifier.judge(*item) == first
    assert verifier.stats["memo"] == before + 1


# (gold answer, response, type, type_sequence, expected, why)
RESPONSE_CASES = [
    (r"\boxed{\frac{1}{2}}", r"so \boxed{\frac{1}{2}}", "NV", "", True, "fraction"),
    (r"\boxed{0.5}", "Final Answer: \\boxed{\\frac{1}{2}}", "NV", "", True, "0.5 vs fraction"),
    (r"\boxed{E}", r"Final Answer: \boxed{\text{E}}", "MC", "", True, "MC in text"),
    (r"\boxed{E}", r"Final Answer: \boxed{E: some text}", "MC", "", True, "MC with option text"),
    (r"\boxed{1}\boxed{2}", r"Final Answer: \boxed{1} \boxed{2}", "TUP", "NV,NV", True, "two boxes"),
    (r"\boxed{1, 2}", r"Final Answer: \boxed{1, 2}", "TUP", "NV,NV", True, "packed gold"),
    (r"\boxed{5}", "no box here", "NV", "", False, "no final answer"),
]


@pytest.mark.parametrize("gold,response,atype,ts,expected,why", RESPONSE_CASES, ids=[c[5] for c in RESPONSE_CASES])
def test_judge_response(gold: str, response: str, atype: str, ts: str, expected: bool, why: str) -> None:
    v = judge_response(gold, response, atype, ts)
    assert v.correct is expected, f"{why}: {v.reason}"


def test_no_final_answer_verdict() -> None:
    assert judge_response(r"\boxed{5}", "nothing", "NV") == Verdict(False, "incorrect: no final answer found", ())


def test_judge_boxes_default_verifier() -> None:
    assert judge_boxes([r"\frac{1}{2}"], ["0.5"], "NV").correct
    assert not judge_boxes(["3.05e6"], ["3.0"], "NV").correct


def test_bad_inputs_never_raise(verifier: Verifier) -> None:
    assert not verifier.judge(["1"], ["1"], "NOPE", "").correct
    assert not verifier.judge(["1"], [], "NV", "").correct
    assert not verifier.judge(["1"], [None], "NV", "").correct  # type: ignore[list-item]
    assert verifier.judge_many([("bad",)])[0].reason.startswith("incorrect")  # type: ignore[list-item]


# (box, type, parsable, why)
PARSABLE_CASES = [
    (r"3 \times 10^{8}\,\mathrm{m/s}", "NV", True, "number with unit"),
    (r"\text{see figure}", "NV", False, "text is not a number"),
    (r"\frac{a}{b}", "EX", True, "expression"),
    (r"a = b", "EQ", True, "equation"),
    (r"a + b", "EQ", False, "equation without ="),
    (r"\text{TRUE}", "TF", True, "truth value"),
    (r"\text{perhaps}", "TF", False, "not a truth value"),
]


@pytest.mark.parametrize("box,atype,ok,why", PARSABLE_CASES, ids=[c[3] for c in PARSABLE_CASES])
def test_check_gold_parsable(box: str, atype: str, ok: bool, why: str) -> None:
    assert (check_gold_parsable(box, atype) is None) is ok, why


def test_norm_string_keeps_macro_spaces() -> None:
    assert norm_string(r"\omega t") != norm_string(r"\omegat")
    assert norm_string(r"\frac{a}{bc}") != norm_string(r"\frac{ab}{c}")
    assert norm_string(r"\left( x \right)") == norm_string("(x)")


def test_parse_quantity_forms() -> None:
    assert parse_quantity(r"3\times10^{8}").value == pytest.approx(3e8)
    assert parse_quantity("3e8").value == pytest.approx(3e8)
    assert parse_quantity(r"2.8 \times 10^{-13} \mathrm{m}").unit == "m"
    assert parse_quantity(r"5^{5^{5}}") is None
    assert parse_quantity(r"x + 1") is None


def test_fast_judge_self_identity() -> None:
    v = fast_judge([r"\text{anything at all}"], [r"\text{anything at all}"], "QL", "")
    assert v is not None and v.correct


# -------------------------------------------------------------------------------------------------
# real data


def test_real_data_self_acceptance(data_dir: Path) -> None:
    from studybench.datasets import load_dataset

    files = [data_dir / "application.json", data_dir / "transfer.json"]
    items = []
    for f in files:
        for slot in load_dataset(f).slots():
            sub = slot.sub
            items.append((sub.boxes, list(sub.boxes), sub.answer_type, sub.type_sequence))
    assert len(items) == 389
    with Verifier(workers=2) as v:
        t0 = time.perf_counter()
        res = v.judge_many(items)
        elapsed = time.perf_counter() - t0
    bad = [(i, r.reason) for i, r in enumerate(res) if not r.correct]
    assert not bad, bad[:5]
    assert elapsed < 30


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.sampled_from(list("\\{}^_=<>()[],.0123456789xyEe+-*/ ") + [r"\frac", r"\sqrt", r"\text", r"\pm"]),
        max_size=30,
    ).map("".join),
    st.sampled_from(["NV", "EX", "EQ", "IN", "MC", "TF", "QL"]),
)
def test_random_predictions_never_raise(verifier: Verifier, pred: str, atype: str) -> None:
    v = verifier.judge([r"\frac{x}{2} = 1"], [pred], atype, "", timeout=2.0)
    assert isinstance(v, Verdict) and v.reason.split(":")[0] in ("correct", "incorrect")
