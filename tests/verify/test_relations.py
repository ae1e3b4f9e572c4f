r"""Verifier round 2 (issue 14), kinds 2 and 3: relations inside EX / NV / TUP golds, and intervals.

Held-out pairs built from real golds with inequalities (ugphysics Thermodynamics ``f \ll
\frac{2\kappa}{\rho c \lambda^2}``, TheoreticalMechanics ``(\frac{b}{2m})^2 < (2-\sqrt2)\frac{g}{l}``;
the application set's ``F \ll \frac{2MV^2}{b}``, ``m \gg \ldots`` and ``B < 0.866\,\mathrm{T}``) and
textbook forms: every right rewrite comes with wrong twins (direction flipped, bound changed,
quantities swapped inside a chain, strict vs non-strict, open vs closed end).

Policy on the kind of a relation: ``<`` and ``\le`` never stand for each other (either way); ``\ll`` /
``\gg`` only for themselves (not ``<``); a gold ``\lesssim`` / ``\gtrsim`` accepts the sharper ``<`` /
``\le``, never the reverse; ``\ge``, ``\geq``, ``\geqslant``, ``\geqq``, ``\ge`` written ``>=`` are
one relation.
"""

from __future__ import annotations

import pytest

from studybench.verify import Verdict, Verifier
from studybench.verify.comparison.relations import chain_rule
from studybench.verify.reading.latex import relation_chain, states_inequality

SCHW = r"R \geq \frac{2GM}{c^2}"
FOURIER = r"f \ll \frac{2 \kappa}{\rho c \lambda^{2}}"  # ugphysics Thermodynamics, EX
DAMPED = r"\left(\frac{b}{2 m}\right)^{2} < (2-\sqrt{2}) \frac{g}{l}"  # ugphysics TheoreticalMechanics, IN
IMPULSE = r"m \gg \frac{q_1 q_2}{2\pi \epsilon_0 \gamma v^2 b}"  # application set, TUP slot

# (gold boxes, predicted boxes, answer_type, type_sequence, gold_unit, expected, why)
CASES: list[tuple[list[str], list[str], str, str, object, bool, str]] = [
    # --- kind 2: relations in EX golds -----------------------------------------------------------
    ([SCHW], [r"\frac{2GM}{c^2} \le R"], "EX", "", None, True, "sides swapped, direction flipped"),
    ([SCHW], [r"R \geqslant \frac{2 G M}{c^{2}}"], "EX", "", None, True, "geqslant"),
    ([SCHW], [r"R >= \frac{2GM}{c^2}"], "EX", "", None, True, ">= typed"),
    ([SCHW], [r"R c^2 \ge 2GM"], "EX", "", None, True, "scaled by a positive factor"),
    ([SCHW], [r"R \le \frac{2GM}{c^2}"], "EX", "", None, False, "direction flipped"),
    ([SCHW], [r"\frac{2GM}{c^2} \ge R"], "EX", "", None, False, "sides swapped without flipping"),
    ([SCHW], [r"R \geq \frac{GM}{c^2}"], "EX", "", None, False, "bound changed"),
    ([SCHW], [r"R \geq \frac{2GM}{c}"], "EX", "", None, False, "bound's power changed"),
    ([SCHW], [r"R > \frac{2GM}{c^2}"], "EX", "", None, False, "non-strict gold, strict prediction"),
    ([SCHW], [r"-R c^2 \le -2GM"], "EX", "", None, True, "multiplied by -1 and flipped"),
    ([SCHW], [r"-R c^2 \ge -2GM"], "EX", "", None, False, "multiplied by -1, not flipped"),
    ([SCHW], [r"\frac{2GM}{c^2}"], "EX", "", None, False, "bound without the relation"),
    ([r"v < c"], [r"v \le c"], "EX", "", None, False, "strict gold, non-strict prediction"),
    ([r"v < c"], [r"c > v"], "EX", "", None, True, "strict, sides swapped"),
    ([r"v < c"], [r"\frac{v}{c} < 1"], "EX", "", None, True, "divided by a positive symbol"),
    ([r"v < c"], [r"v - c < 0"], "EX", "", None, True, "moved to one side"),
    ([r"v < c"], [r"c - v < 0"], "EX", "", None, False, "moved to one side, sign lost"),
    ([r"\psi(x) = A e^{kx}, \quad x<0"], [r"\psi(x) = A e^{kx}, \quad 0 > x"], "EX", "", None, True, "a part that is a relation"),
    ([r"\psi(x) = A e^{kx}, \quad x<0"], [r"\psi(x) = A e^{kx}, \quad x>0"], "EX", "", None, False, "a part that is a relation, flipped"),
    ([FOURIER], [r"\frac{2\kappa}{\rho c \lambda^2} \gg f"], "EX", "", None, True, "ll as gg, sides swapped"),
    ([FOURIER], [r"\rho c \lambda^2 f \ll 2\kappa"], "EX", "", None, True, "ll scaled by a positive monomial"),
    ([FOURIER], [r"f \gg \frac{2\kappa}{\rho c \lambda^2}"], "EX", "", None, False, "ll flipped"),
    ([FOURIER], [r"f \ll \frac{\kappa}{\rho c \lambda^2}"], "EX", "", None, False, "ll bound changed"),
    ([FOURIER], [r"f < \frac{2\kappa}{\rho c \lambda^2}"], "EX", "", None, False, "ll is not <"),
    ([r"\lambda \ll d"], [r"d \gg \lambda"], "EX", "", None, True, "ll / gg"),
    ([r"\lambda \ll d"], [r"\lambda \gg d"], "EX", "", None, False, "ll / gg direction"),
    ([r"T \lesssim 10^4\,\mathrm{K}"], [r"T < 10^{4}\,\mathrm{K}"], "EX", "", None, True, "lesssim gold, sharper <"),
    ([r"T \lesssim 10^4\,\mathrm{K}"], [r"T \gtrsim 10^{4}\,\mathrm{K}"], "EX", "", None, False, "lesssim vs gtrsim"),
    ([r"T < 10^4\,\mathrm{K}"], [r"T \lesssim 10^{4}\,\mathrm{K}"], "EX", "", None, False, "< gold, weaker lesssim"),
    # chains: every link and every position
    ([r"a < b < c = d"], [r"d = c > b > a"], "EX", "", None, True, "chain read right to left"),
    ([r"a < b < c = d"], [r"a < c < b = d"], "EX", "", None, False, "two quantities swapped in a chain"),
    ([r"a < b < c = d"], [r"b < a < c = d"], "EX", "", None, False, "first two swapped in a chain"),
    ([r"a < b < c = d"], [r"a < b \le c = d"], "EX", "", None, False, "one link non-strict"),
    ([r"a < b < c = d"], ["d"], "EX", "", None, False, "only the last value of a relation chain"),
    ([r"a < b < c = d"], [r"a < b < c"], "EX", "", None, False, "a link dropped"),
    # --- kind 2: NV bounds -------------------------------------------------------------------------
    ([r"B < 0.866\,\mathrm{T}"], [r"B < 0.87\ \mathrm{T}"], "NV", "", None, True, "NV bound within tolerance"),
    ([r"B < 0.866\,\mathrm{T}"], [r"0.866\,\mathrm{T} > B"], "NV", "", None, True, "NV bound, sides swapped"),
    ([r"B < 0.866\,\mathrm{T}"], [r"B < 866\,\mathrm{mT}"], "NV", "", None, True, "NV bound, unit converted"),
    ([r"B < 0.866\,\mathrm{T}"], [r"B > 0.866\,\mathrm{T}"], "NV", "", None, False, "NV bound flipped"),
    ([r"B < 0.866\,\mathrm{T}"], [r"0.866\,\mathrm{T} < B"], "NV", "", None, False, "NV sides swapped, not flipped"),
    ([r"B < 0.866\,\mathrm{T}"], [r"B \le 0.866\,\mathrm{T}"], "NV", "", None, False, "NV strict vs non-strict"),
    ([r"B < 0.866\,\mathrm{T}"], [r"B < 0.95\,\mathrm{T}"], "NV", "", None, False, "NV bound changed"),
    ([r"B < 0.866\,\mathrm{T}"], [r"B < 0.866\,\mathrm{s}"], "NV", "", None, False, "NV bound, wrong unit"),
    ([r"0 < v_1 < v_2 < 3"], [r"0 < v_1 < v_2 < 3"], "NV", "", r"\mathrm{m/s}", True, "NV chain itself"),
    ([r"0 < v_1 < v_2 < 3"], [r"3 > v_2 > v_1 > 0"], "NV", "", r"\mathrm{m/s}", True, "NV chain reversed"),
    ([r"0 < v_1 < v_2 < 3"], [r"0 < v_2 < v_1 < 3"], "NV", "", r"\mathrm{m/s}", False, "NV chain, swap inside"),
    # --- kind 2: TUP slots (application set) --------------------------------------------------------
    ([r"\Phi = \frac{I}{MV}", r"F \ll \frac{2MV^2}{b}"], [r"\Phi = \frac{I}{MV}", r"\frac{2MV^2}{b} \gg F"], "TUP", "EX,EX", None, True, "TUP ll slot"),
    ([r"\Phi = \frac{I}{MV}", r"F \ll \frac{2MV^2}{b}"], [r"\Phi = \frac{I}{MV}", r"F \gg \frac{2MV^2}{b}"], "TUP", "EX,EX", None, False, "TUP ll slot flipped"),
    ([IMPULSE], [r"m \gg \frac{q_2 q_1}{2\pi \varepsilon_0 \gamma b v^2}"], "EX", "", None, True, "gg, factors reordered"),
    ([IMPULSE], [r"m \gg \frac{q_1 q_2}{2\pi \epsilon_0 v^2 b}"], "EX", "", None, False, "gg, gamma dropped"),
    # --- IN golds with relations ----------------------------------------------------------------
    ([DAMPED], [r"\frac{b^2}{4m^2} < \frac{(2-\sqrt2) g}{l}"], "IN", "", None, True, "IN rewritten"),
    ([DAMPED], [r"\frac{b^2}{4m^2} < \frac{(2+\sqrt2) g}{l}"], "IN", "", None, False, "IN bound changed"),
    ([DAMPED], [r"\frac{b^2}{4m^2} \le \frac{(2-\sqrt2) g}{l}"], "IN", "", None, False, "IN strict vs non-strict"),
    ([FOURIER], [r"\frac{2 \kappa}{\rho c \lambda^{2}} \gg f"], "IN", "", None, True, "IN ll (no SymPy relation)"),
    ([FOURIER], [r"f < \frac{2 \kappa}{\rho c \lambda^{2}}"], "IN", "", None, False, "IN ll is not <"),
    # --- kind 3: intervals -----------------------------------------------------------------------
    ([r"|x| \le a"], [r"-a \le x \le a"], "IN", "", None, True, "abs as a double inequality"),
    ([r"-a \le x \le a"], [r"|x| \le a"], "IN", "", None, True, "double inequality as abs"),
    ([r"-a \le x \le a"], [r"|x| < a"], "IN", "", None, False, "abs strict vs closed"),
    ([r"|x| \le a"], [r"-a \le x \le 2a"], "IN", "", None, False, "abs, bound changed"),
    ([r"|x| \le a"], [r"-a < x \le a"], "IN", "", None, False, "abs, one end open"),
    ([r"|x - x_0| < a"], [r"x_0 - a < x < x_0 + a"], "IN", "", None, True, "abs around a centre"),
    ([r"|x - x_0| < a"], [r"x_0 - a < x < x_0 + 2a"], "IN", "", None, False, "abs around a centre, bound changed"),
    ([r"|x| \le 2"], [r"x \in [-2, 2]"], "IN", "", None, True, "numeric abs as membership"),
    ([r"|x| \le 2"], [r"x \in (-2, 2)"], "IN", "", None, False, "numeric abs, open ends"),
    ([r"x \in [-a, a]"], [r"|x| \le a"], "IN", "", None, True, "membership as abs"),
    ([r"x \in [-a, a]"], [r"|x| < a"], "IN", "", None, False, "membership vs strict abs"),
    ([r"x \in [a, b]"], [r"a \le x \le b"], "IN", "", None, True, "membership as double inequality"),
    ([r"a \le x \le b"], [r"x \in [a, b]"], "IN", "", None, True, "double inequality as membership"),
    ([r"x \in (a, b]"], [r"a < x \le b"], "IN", "", None, True, "half-open membership"),
    ([r"a < x \le b"], [r"x \in (a, b]"], "IN", "", None, True, "half-open, other direction"),
    ([r"x \in (a, b]"], [r"a \le x \le b"], "IN", "", None, False, "open end closed"),
    ([r"x \in (a, b]"], [r"a < x < b"], "IN", "", None, False, "closed end opened"),
    ([r"a < x \le b"], [r"x \in [a, b]"], "IN", "", None, False, "open end closed, other direction"),
    ([r"x \in [a, b]"], [r"b \le x \le a"], "IN", "", None, False, "bounds swapped"),
    ([r"x \in [a, b]"], [r"a \le x \le 2b"], "IN", "", None, False, "bound changed"),
    ([r"x \in [a, b]"], [r"a \le y \le b"], "IN", "", None, False, "other variable"),
    ([r"x \in [0, 2]"], [r"0 \le x \le 2"], "IN", "", None, True, "closed at 0"),
    ([r"x \in [0, 2]"], [r"0 < x \le 2"], "IN", "", None, False, "end 0 opened"),
    ([r"0 \le \theta < \pi"], [r"\theta \in [0, \pi)"], "IN", "", None, True, "angle range"),
    ([r"0 \le \theta < \pi"], [r"\theta \in (0, \pi)"], "IN", "", None, False, "angle range, end 0 opened"),
    ([r"x \in [-1, 3]"], [r"-1 \le x \le 3"], "IN", "", None, True, "negative lower end"),
    ([r"x \in [-1, 3]"], [r"-1 < x \le 3"], "IN", "", None, False, "negative lower end opened"),
]


@pytest.mark.parametrize("gold,pred,atype,ts,unit,expected,why", CASES, ids=[f"{c[2]}-{c[6]}" for c in CASES])
def test_relation_cases(verifier: Verifier, gold: list[str], pred: list[str], atype: str, ts: str, unit: object, expected: bool, why: str) -> None:
    v = verifier.verify(gold, pred, atype, ts, gold_unit=unit)  # type: ignore[arg-type]
    assert isinstance(v, Verdict)
    assert v.correct is expected, f"{why}: {v.reason}"


def test_relation_chain_split() -> None:
    segs, rels = relation_chain(r"a < b \le c = d \gg e \gtrsim f")
    assert segs == ["a", "b", "c", "d", "e", "f"]
    assert rels == [(-1, "lt"), (-1, "le"), (0, "eq"), (1, "ll"), (1, "lsim")]
    # signs inside brackets and angle brackets do not split
    assert relation_chain(r"f(x<0) = \left< x \right>")[0] == ["f(x<0)", r"\left< x \right>"]
    assert relation_chain(r"R >= 2, x << y")[1] == [(1, "le"), (-1, "ll")]
    assert states_inequality(r"\lambda \ll d") and not states_inequality(r"E \approx mc^2 = 3")


def test_chain_rule_leaves_other_golds() -> None:
    assert chain_rule(r"E = mc^2", r"E = m c^2") is None  # no inequality: the type's own rule
    assert chain_rule(r"\le 3", r"x \le 3") is None  # an empty side: the type's own rule
    assert chain_rule(r"x \le 3", r"x \le 3") == (True, "same relation")


def test_gold_self_and_gold_check(verifier: Verifier) -> None:
    for gold, at in ((FOURIER, "EX"), (FOURIER, "IN"), (IMPULSE, "EX"), (SCHW, "EX"), (DAMPED, "IN")):
        assert verifier.verify([gold], [gold], at).correct
    from studybench.verify.rules import check_gold_parsable_local

    assert check_gold_parsable_local(FOURIER, "EX") is None
    assert check_gold_parsable_local(FOURIER, "IN") is None
