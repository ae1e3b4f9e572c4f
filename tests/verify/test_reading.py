r"""Reading robustness (issue 25, item 3): argument scope, degrees, spacing, slash derivatives, ``e``, solved forms.

Each kind is generated over its variants (functions, following factors, spacing commands, angles, ...)
and every right form comes with wrong twins (a changed factor, a swallowed factor, a wrong angle, a flipped
sign) that must stay rejected. The minimal pairs of VERIFY25's known bugs 2, 3, 6, 8-12 are here too.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy

from studybench.verify import Verifier
from studybench.verify.comparison.equation_forms import same_solution_sets
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import LatexError

# (answer type, gold, prediction, expected, why)
Case = tuple[str, str, str, bool, str]


# --- function-argument scope: a written space, an exponential, a root or a fraction ends a brace-less argument
_FUNCS = [r"\sin", r"\cos", r"\tan", r"\ln"]
_FACTORS = [
    (r"\,e^{-t/\tau}", r"e^{-t/\tau}"),
    (r"e^{-t/\tau}", r"e^{-t/\tau}"),
    (r"\,\sqrt{2gh}", r"\sqrt{2gh}"),
    (r"\frac{a}{b}", r"\frac{a}{b}"),
    (r"\, x", r"x"),
]


def _scope_cases() -> list[Case]:
    out: list[Case] = []
    for f in _FUNCS:
        for written, plain in _FACTORS:
            gold = rf"A {f}\phi_0{written}"
            out.append(("EX", gold, rf"A {plain} {f}(\phi_0)", True, f"{f} then {plain}: a separate factor"))
            out.append(("EX", gold, rf"A {f}\left(\phi_0 {plain}\right)", False, f"{f} swallowing {plain}"))
            out.append(("EX", gold, rf"2A {plain} {f}(\phi_0)", False, f"{f} then {plain}, factor 2"))
        # only numbers and pi before a fraction or a root: they are the argument's coefficient
        out.append(("EX", rf"{f} 2\pi\frac{{x}}{{\lambda}}", rf"{f}\left(\frac{{2\pi x}}{{\lambda}}\right)", True, f"{f} 2 pi x/lambda"))
        out.append(("EX", rf"{f} 2\pi\frac{{x}}{{\lambda}}", rf"{f}\left(\frac{{\pi x}}{{\lambda}}\right)", False, f"{f} 2 pi x/lambda, 2 lost"))
        out.append(("EX", rf"{f} 3\sqrt{{x}}", rf"{f}\left(3\sqrt{{x}}\right)", True, f"{f} 3 sqrt x"))
        out.append(("EX", rf"{f} 3\sqrt{{x}}", rf"\sqrt{{x}}\,{f}(3)", False, f"{f} 3 sqrt x, root outside"))
    return out


# --- a braced argument is the whole argument (bug 3): \sin{\left(x \right)} \cdot \sin{\left(y \right)}
def _braced_cases() -> list[Case]:
    out: list[Case] = []
    for f in _FUNCS:
        for join, gold_join in ((r"\cdot", ""), ("", ""), ("/", "/")):
            gold = rf"{f} x {f} y" if gold_join != "/" else rf"\frac{{{f}(x)}}{{{f}(y)}}"
            pred = rf"{f}{{\left(x \right)}} {join} {f}{{\left(y \right)}}"
            out.append(("EX", gold, pred, True, f"braced {f} {join or 'juxtaposed'}"))
            twin = rf"{f}{{\left(x \right)}} {join} {f}{{\left(2 y \right)}}"
            out.append(("EX", gold, twin, False, f"braced {f} {join or 'juxtaposed'}, argument doubled"))
    out += [
        ("EX", r"\frac{\cos(\omega t)}{m}", r"\cos{\left(\omega t \right)} / m", True, "braced cos over m"),
        ("EX", r"\frac{\cos(\omega t)}{m}", r"\cos{\left(\omega t \right)} \cdot m", False, "braced cos times m"),
        ("EX", r"\frac{\cos(\omega t)}{m}", r"\cos{\left(\omega t / m \right)}", False, "m inside the argument"),
    ]
    return out


# --- spacing before and after "=" (bug 2)
_SPACES = [r"\,", r"\;", r"\:", r"\ ", "~", r"\quad", r"\!"]


def _spacing_cases() -> list[Case]:
    out: list[Case] = []
    gold = r"\gamma = \omega^{2}\tau"
    for sp in _SPACES:
        out.append(("EQ", gold, rf"\tau {sp}= \frac{{\gamma}}{{\omega^{{2}}}}", True, f"{sp} before ="))
        out.append(("EQ", gold, rf"\tau ={sp} \frac{{\gamma}}{{\omega^{{2}}}}{sp}", True, f"{sp} after = and at the end"))
        out.append(("EQ", gold, rf"\tau {sp}= \frac{{\gamma}}{{\omega}}", False, f"{sp} before =, exponent lost"))
        out.append(("EQ", gold, rf"{sp}\tau {sp}= -\frac{{\gamma}}{{\omega^{{2}}}}", False, f"{sp} before =, sign flipped"))
    return out


# --- degrees in equations and expressions
_ANGLES = [30, 45, 60, 90, 120, 135]


def _rad(deg: int) -> str:
    q = Fraction(deg, 180)
    num = r"\pi" if q.numerator == 1 else rf"{q.numerator}\pi"
    return num if q.denominator == 1 else rf"\frac{{{num}}}{{{q.denominator}}}"


def _degree_cases() -> list[Case]:
    out: list[Case] = []
    for d in _ANGLES:
        wrong = d + 15
        for sign in (r"^{\circ}", r"^\circ"):
            out.append(("EQ", rf"\beta = {_rad(d)}", rf"\beta = {d}{sign}", True, f"{d} degrees against radians"))
            out.append(("EQ", rf"\beta = {d}{sign}", rf"\beta = {_rad(d)}", True, f"radians against {d} degrees"))
            out.append(("EQ", rf"\beta = {_rad(d)}", rf"\beta = {wrong}{sign}", False, f"{wrong} degrees against {d}"))
            out.append(("EQ", rf"\beta = {d}{sign}", rf"\beta = {_rad(wrong)}", False, f"radians of {wrong} against {d}"))
        out.append(("EQ", rf"\beta = {_rad(d)}", rf"\beta = {d}", False, f"{d} without the degree sign is radians"))
        out.append(("EX", rf"\theta + {_rad(d)}", rf"\theta + {d}^\circ", True, f"{d} degrees in a sum"))
        out.append(("EX", rf"\theta + {_rad(d)}", rf"\theta + {d}", False, f"{d} in a sum without the degree sign"))
    out += [
        ("EQ", r"\alpha = \frac{\pi}{2} - \theta", r"\alpha = 90^\circ - \theta", True, "degrees beside a symbol"),
        ("EQ", r"\alpha = \frac{\pi}{2} - \theta", r"\alpha = 45^\circ - \theta", False, "wrong degrees beside a symbol"),
        ("EQ", r"\alpha = \frac{\pi}{2} - \theta", r"\alpha = 90 - \theta", False, "no degree sign beside a symbol"),
        ("EQ", r"\beta = 60^{\circ}", r"\beta = 1.047", False, "a bare decimal is not radians of a degree gold"),
    ]
    return out


# --- derivatives written with a slash (bug 10)
def _derivative_cases() -> list[Case]:
    out: list[Case] = []
    for d in ("d", r"\mathrm{d}", r"\partial "):
        frac = rf"\frac{{{d}I}}{{{d}x}}"
        slash = rf"{d}I/{d}x"
        out.append(("EQ", rf"{frac}=-n_0 s", rf"{slash}=-n_0 s", True, f"{d}I/{d}x against the fraction"))
        out.append(("EQ", rf"{slash}=-n_0 s", rf"{frac}=-n_0 s", True, f"the fraction against {d}I/{d}x"))
        out.append(("EQ", rf"{frac}=-n_0 s", rf"{d}x/{d}I=-n_0 s", False, f"{d}x/{d}I: inverted"))
        out.append(("EQ", rf"{frac}=-n_0 s", rf"{slash}=n_0 s", False, f"{d}I/{d}x, sign flipped"))
    out.append(("EQ", r"\frac{d^2x}{dt^2}=-\omega^2 x", r"d^2x/dt^2=-\omega^2 x", True, "second derivative with a slash"))
    out.append(("EQ", r"\frac{d^2x}{dt^2}=-\omega^2 x", r"d^2x/dt=-\omega^2 x", False, "second derivative, order lost"))
    at = r"B=-\frac{1}{2}\left(\frac{V_0}{R_0}+\left.\frac{dV}{dR}\right|_{R=R_0}\right)"
    out.append(("EQ", at, r"B=-\left(1/2\right)\left(V_0/R_0+\left.dV/dR\right|_{R=R_0}\right)", True, "slash derivative after left."))
    out.append(("EQ", at, r"B=-\left(1/2\right)\left(V_0/R_0+\left.dR/dV\right|_{R=R_0}\right)", False, "inverted after left."))
    return out


# --- the known bugs' minimal pairs (VERIFY25 2, 3, 6, 8, 9, 11) and their twins
KNOWN: list[Case] = [
    ("EX", r"\frac{eE}{m}", r"\frac{e^{2}E^{2}}{m e E}", True, "bug 6: e^{2} and e are one symbol"),
    ("EX", r"\frac{eE}{m}", r"\frac{e^{2}E^{2}}{m E}", False, "bug 6 twin: a factor e left over"),
    ("EX", r"\frac{e^2}{4\pi\epsilon_0 r}", r"\frac{e \cdot e}{4\pi\epsilon_0 r}", True, "e squared as a product"),
    ("EX", r"\frac{e^2}{4\pi\epsilon_0 r}", r"\frac{e}{4\pi\epsilon_0 r}", False, "charge squared lost"),
    ("NV", r"1 - e^{-1}", r"0.632", True, "no bare e: e to a number is Euler's number"),
    ("NV", r"1 - e^{-1}", r"0.368", False, "no bare e: e to a number, the complement"),
    ("EX", r"\frac{e^{3}E}{m e}", r"\frac{7.389 E}{m}", False, "with a bare e, e^{3} is the charge cubed, never a decimal"),
    ("EX", r"N_0 e^{-t/\tau}", r"\frac{N_0}{e^{t/\tau}}", True, "an exponential inverted"),
    ("EX", r"N_0 e^{-t/\tau}", r"\frac{N_0}{e^{2t/\tau}}", False, "an exponential inverted, factor 2"),
    (
        "EQ",
        r"\omega_0=\frac{q}{\sqrt{4\pi\epsilon_0 m r^3}}",
        r"\omega_0^2=\frac{q^2}{4\pi\epsilon_0 m r^3}",
        True,
        "bug 8: squared, the root in a denominator",
    ),
    (
        "EQ",
        r"\omega_0=\frac{q}{\sqrt{4\pi\epsilon_0 m r^3}}",
        r"\omega_0^2=\frac{q^2}{4\pi\epsilon_0 m r^2}",
        False,
        "bug 8 twin: wrong power",
    ),
    (
        "EQ",
        r"\omega_0=\frac{q}{\sqrt{4\pi\epsilon_0 m r^3}}",
        r"\omega_0=-\frac{q}{\sqrt{4\pi\epsilon_0 m r^3}}",
        False,
        "bug 8 twin: the negative root",
    ),
    (
        "EQ",
        r"\omega=\left[\frac{2 V_{0}}{\mu a^{2}(1+B)^{3}}\right]^{\frac{1}{2}}",
        r"\omega \sqrt{\mu} a \left(B + 1\right)^{\frac{3}{2}} = \sqrt{2} \sqrt{V_{0}}",
        True,
        "bug 11: the root cleared",
    ),
    (
        "EQ",
        r"\omega=\left[\frac{2 V_{0}}{\mu a^{2}(1+B)^{3}}\right]^{\frac{1}{2}}",
        r"\omega \sqrt{\mu} a \left(B + 1\right)^{\frac{1}{2}} = \sqrt{2} \sqrt{V_{0}}",
        False,
        "bug 11 twin: wrong exponent",
    ),
    (
        "EQ",
        r"\omega=\left[\frac{2 V_{0}}{\mu a^{2}(1+B)^{3}}\right]^{\frac{1}{2}}",
        r"\omega \sqrt{\mu} a \left(B + 1\right)^{\frac{3}{2}} = -\sqrt{2} \sqrt{V_{0}}",
        False,
        "bug 11 twin: sign flipped",
    ),
    (
        "EQ",
        r"E=\frac12 m_1\nu_1^2+\frac12 m_2\nu_2^2-\frac{Gm_1m_2}{r_1+r_2}",
        r"m_2=\frac{(-2E+m_1\nu_1^2)(r_1+r_2)}{2m_1G-\nu_2^2(r_1+r_2)}",
        True,
        "bug 9: solved for a linear symbol",
    ),
    (
        "EQ",
        r"E=\frac12 m_1\nu_1^2+\frac12 m_2\nu_2^2-\frac{Gm_1m_2}{r_1+r_2}",
        r"m_2=\frac{(-2E+m_1\nu_1^2)(r_1+r_2)}{2m_1G+\nu_2^2(r_1+r_2)}",
        False,
        "bug 9 twin: a sign in the denominator",
    ),
    (
        "EQ",
        r"E=\frac12 m_1\nu_1^2+\frac12 m_2\nu_2^2-\frac{Gm_1m_2}{r_1+r_2}",
        r"m_2=\frac{(-2E+m_1\nu_1^2)(r_1+r_2)}{m_1G-\nu_2^2(r_1+r_2)}",
        False,
        "bug 9 twin: a factor 2 lost",
    ),
    ("EQ", r"F = k x + b", r"x = \frac{F - b}{k}", True, "linear: solved for x"),
    ("EQ", r"F = k x + b", r"x = \frac{F + b}{k}", False, "linear: solved for x, sign"),
    ("EQ", r"\Delta\mu = k T", r"\Delta\mu = 2 k T", False, "bug 12: a common factor decides nothing"),
]

CASES = _scope_cases() + _braced_cases() + _spacing_cases() + _degree_cases() + _derivative_cases() + KNOWN


@pytest.mark.parametrize(("atype", "gold", "pred", "expected", "why"), CASES, ids=[c[4] for c in CASES])
def test_reading_cases(verifier: Verifier, atype: str, gold: str, pred: str, expected: bool, why: str) -> None:
    v = verifier.verify([gold], [pred], atype, "")
    assert v.correct is expected, f"{why}: {gold!r} vs {pred!r} -> {v.reason}"


def test_every_kind_has_wrong_twins() -> None:
    kinds = {"scope": _scope_cases(), "braced": _braced_cases(), "spacing": _spacing_cases(),
             "degrees": _degree_cases(), "derivatives": _derivative_cases(), "known": KNOWN}
    for name, cases in kinds.items():
        rights = sum(c[3] for c in cases)
        wrongs = len(cases) - rights
        assert rights and wrongs >= rights / 2, name


# --- the reading itself ------------------------------------------------------------------------------

def test_argument_scope_in_to_sympy() -> None:
    r"""``\sin\phi\,e^{-t/\tau}`` is sin(phi)*exp(-t/tau); ``\cos\omega t`` stays cos(omega t)."""
    e = to_sympy(r"\sin\phi\,e^{-t/\tau}")
    funcs = list(e.atoms(sympy.sin))
    assert len(funcs) == 1 and not funcs[0].has(sympy.exp), e
    assert e.has(sympy.exp)
    e = to_sympy(r"\cos\omega t")
    (c,) = e.atoms(sympy.cos)
    assert len(c.args[0].free_symbols) == 2, e  # the argument is omega*t
    e = to_sympy(r"\sin 2\,\theta")
    (s,) = e.atoms(sympy.sin)
    assert s.args[0].free_symbols, e  # only a number before the space: 2 theta is the argument


@pytest.mark.parametrize("text", [r"\tau \,", r"\,\tau\;", r"\tau\quad", r"\tau~", r"\displaystyle \tau", r"\tau.", r"\tau \\"])
def test_spacing_and_punctuation_at_the_edges(text: str) -> None:
    assert len(to_sympy(text).free_symbols) == 1


@pytest.mark.parametrize(("text", "degrees"), [(r"60^{\circ}", 60), (r"60^\circ", 60), ("60°", 60), (r"(90 - 30)^\circ", 60)])
def test_degrees_read_as_radians(text: str, degrees: int) -> None:
    assert abs(float(to_sympy(text)) - degrees * 3.141592653589793 / 180) < 1e-12


@pytest.mark.parametrize("text", [r"7^\circ 20'", r"7^\circ\,20'", r"25^\circ C", r"25^{\circ}\mathrm{C}", r"x^\circ"])
def test_degrees_that_are_not_an_angle_times_something(text: str) -> None:
    """Degrees and minutes, temperatures and degrees of a symbol are no reading (another rule decides)."""
    with pytest.raises(LatexError):
        to_sympy(text)


def test_common_zero_solution_decides_nothing() -> None:
    r"""Bug 12: a symbol whose only solution is 0 on both sides (``\Delta`` of ``\Delta\mu``) is no evidence.

    ``\Delta\sin\theta = \Delta\cos\theta`` against ``\Delta\sin\theta = 2\Delta\cos\theta``: solving for
    ``\Delta`` gives {0} on both sides; ``\theta`` differs (pi/4 against atan 2).
    """
    d, th = sympy.symbols("Delta theta")
    ok, why = same_solution_sets(d * sympy.sin(th), d * sympy.cos(th), d * sympy.sin(th), 2 * d * sympy.cos(th))
    assert ok is not True, why
    ok, _ = same_solution_sets(d * sympy.sin(th), d * sympy.cos(th), d * sympy.sin(th), d * sympy.cos(th))
    assert ok is not False
