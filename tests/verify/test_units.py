r"""Verifier round 2 (issue 14), kinds 6, 7 and 10: units and quantities, named constants given
numerically, golds written to one or two significant figures. Every right form has wrong twins (a
wrong unit, a wrong power of ten, a Celsius offset misused, degrees against radians, a constant's
value off by 10%). Golds are written for these tests or taken from the shapes of real ugphysics golds
(``60^\circ``, ``64^\circ 10'``, ``\frac{1}{2}\hbar``), not from the dev pairs."""

from __future__ import annotations

import pytest

from studybench.verify import Verdict, Verifier
from studybench.verify.reading.numbers import parse_quantity, written_resolution
from studybench.verify.reading.unitwords import mixed_units, unit_phrases

# (gold, pred, gold_unit, expected, why)
CASES: list[tuple[str, str, object, bool, str]] = [
    # --- 6. units ----------------------------------------------------------------------------
    (r"1.5\,\AA", r"1.5\,\mathring{A}", None, True, "mathring A is the Angstrom"),
    (r"1.5\,\AA", "1.5\\,\u00c5", None, True, "the Angstrom glyph"),
    (r"1.5\,\mathring{A}", r"0.15\,\mathrm{nm}", None, True, "Angstrom to nm"),
    (r"1.5\,\mathring{A}", r"1.5\,\mathrm{nm}", None, False, "wrong unit: nm for Angstrom"),
    (r"1.5\,\mathring{A}", r"1.5\times10^{-9}\,\mathrm{m}", None, False, "wrong power of ten"),
    (r"2\times10^{-4}\,\mathrm{T}", r"2\,\mathrm{G}", None, True, "gauss is 1e-4 T"),
    (r"2\times10^{-4}\,\mathrm{T}", r"2\,\mathrm{mT}", None, False, "mT is not G"),
    (r"2\times10^{-4}\,\mathrm{T}", r"20\,\mathrm{G}", None, False, "gauss off by ten"),
    (r"5\,\mathrm{s^{-1}}", r"5\ \text{per second}", None, True, "per second"),
    (r"5\,\mathrm{s^{-1}}", r"5\ \text{per minute}", None, False, "per minute"),
    (r"2.5\,\mathrm{h}", r"2\ \mathrm{h}\ 30\ \mathrm{min}", None, True, "mixed units h and min"),
    (r"2.5\,\mathrm{h}", r"2\ \mathrm{h}\ 20\ \mathrm{min}", None, False, "mixed units, wrong minutes"),
    (r"2.5\,\mathrm{h}", r"2\ \mathrm{h}\ 30\ \mathrm{s}", None, False, "mixed units, s for min"),
    (r"3\,\mathrm{days}", r"72\,\mathrm{hours}", None, True, "days to hours"),
    (r"3\,\mathrm{days}", r"72\,\mathrm{min}", None, False, "days vs minutes"),
    (r"60^\circ", r"\frac{\pi}{3}", None, True, "a closed form with pi is in radians"),
    (r"60^\circ", r"\pi/3", None, True, "bare pi/3"),
    (r"60^\circ", r"\frac{\pi}{3}\,\mathrm{rad}", None, True, "pi/3 rad"),
    (r"60^\circ", r"\frac{\pi}{6}", None, False, "wrong angle in radians"),
    (r"60^\circ", r"60\,\mathrm{rad}", None, False, "degrees read as radians"),
    (r"60^\circ", r"1.047", None, False, "a bare decimal is not read as radians"),
    (r"\frac{\pi}{3}", r"60^\circ", None, True, "gold in radians, prediction in degrees"),
    (r"\frac{\pi}{3}", r"30^\circ", None, False, "gold in radians, wrong degrees"),
    (r"64^\circ 10'", r"1.12\,\mathrm{rad}", None, True, "degrees-minutes to radians"),
    (r"64^\circ 10'", r"64.1\,\mathrm{rad}", None, False, "degrees-minutes stated as radians"),
    (r"25^\circ\mathrm{C}", r"25\ \text{degrees Celsius}", None, True, "degrees Celsius in words"),
    (r"25^\circ\mathrm{C}", r"298\,\mathrm{K}", None, True, "absolute temperature: the 273.15 offset"),
    (r"25^\circ\mathrm{C}", r"25\,\mathrm{K}", None, False, "absolute temperature without the offset"),
    (r"0.5\,^\circ\mathrm{C/m}", r"0.5\,\mathrm{K/m}", None, True, "a gradient is a difference: no offset"),
    (r"0.5\,\mathrm{K/m}", r"0.5\,^\circ\mathrm{C}/\mathrm{m}", None, True, "gradient written the other way"),
    (r"0.5\,\mathrm{K/m}", r"273.65\,^\circ\mathrm{C}/\mathrm{m}", None, False, "offset wrongly applied to a gradient"),
    (r"\Delta T = 5\,\mathrm{K}", r"\Delta T = 5\,^\circ\mathrm{C}", None, True, "a Delta T is a difference"),
    (r"\Delta T = 5\,^\circ\mathrm{C}", r"\Delta T = 278.15\,\mathrm{K}", None, False, "offset on a difference"),
    (r"\sqrt{2}\,\mathrm{m}", r"1.41\,\mathrm{m}", None, True, "closed form with a unit"),
    (r"\sqrt{2}\,\mathrm{m}", r"1.41\,\mathrm{cm}", None, False, "closed form, wrong unit"),
    (r"10\ln 2\ \mathrm{s}", r"6.93\,\mathrm{s}", None, True, "10 ln 2 s is 6.93 s"),
    (r"10\ln 2\ \mathrm{s}", r"6.93\,\mathrm{ms}", None, False, "10 ln 2 s, wrong prefix"),
    (r"10\ln 2\ \mathrm{s}", r"3.01\,\mathrm{s}", None, False, "10 log10 2 is not 10 ln 2"),
    (r"12\ \text{revolutions}", r"12\ \text{orbits}", None, True, "orbits are revolutions"),
    (r"12\ \text{revolutions}", r"12\ \text{turns}", None, True, "turns are revolutions"),
    (r"12\ \text{revolutions}", r"13\ \text{cycles}", None, False, "wrong count"),
    (r"12\ \text{revolutions}", r"12\,\mathrm{rad}", None, False, "revolutions are not radians"),
    ("12", r"12\ \text{cycles}", None, True, "cycles are a count"),
    ("12", r"12\ \text{cycles}\ \text{per second}", None, False, "a rate is no count"),
    (r"v_{\max} = 3\,\mathrm{m/s}", r"v_{\mathrm{max}} = 3\,\mathrm{m/s}", None, True, "upright max"),
    (r"v_{\max} = 3\,\mathrm{m/s}", r"v_{\mathrm{min}} = 3\,\mathrm{m/s}", None, False, "max vs min"),
    # --- 7. named constants given numerically -------------------------------------------------
    (r"\frac{2GM_\odot}{c^2}", r"2.95\times10^{3}\,\mathrm{m}", None, True, "Schwarzschild radius of the Sun"),
    (r"\frac{2GM_\odot}{c^2}", r"2.95\,\mathrm{km}", None, True, "in km"),
    (r"\frac{2GM_\odot}{c^2}", r"2953", r"\mathrm{m}", True, "unitless, in the hint's unit"),
    (r"\frac{2GM_\odot}{c^2}", r"2.95", None, False, "unitless, not in SI"),
    (r"\frac{2GM_\odot}{c^2}", r"3.25\times10^{3}\,\mathrm{m}", None, False, "10% off"),
    (r"\frac{2GM_\odot}{c^2}", r"2.95\times10^{3}\,\mathrm{s}", None, False, "wrong unit"),
    (r"\frac{2GM_\odot}{c^2}", r"\frac{2 G M_{\odot}}{c^{2}}", None, True, "the same symbols"),
    (r"\frac{2GM}{c^2}", r"2953\,\mathrm{m}", None, False, "M is a variable, not a constant"),
    (r"\frac{h}{m_e c}", r"2.43\times10^{-12}\,\mathrm{m}", None, True, "Compton wavelength"),
    (r"\frac{h}{m_e c}", r"2.43\times10^{-11}\,\mathrm{m}", None, False, "Compton wavelength, power of ten"),
    (r"\frac{h}{m_e c}", r"3.86\times10^{-13}\,\mathrm{m}", None, False, "hbar for h"),
    (r"\frac{1}{2}\hbar", r"5.27\times10^{-35}\,\mathrm{J\,s}", None, True, "half hbar"),
    (r"\frac{1}{2}\hbar", r"5.8\times10^{-35}\,\mathrm{J\,s}", None, False, "half hbar off by 10%"),
    (r"\frac{1}{\sqrt{\mu_0\epsilon_0}}", r"3.00\times10^{8}\,\mathrm{m/s}", None, True, "c from mu_0 eps_0"),
    (r"\frac{1}{\sqrt{\mu_0\epsilon_0}}", r"3.3\times10^{8}\,\mathrm{m/s}", None, False, "c off by 10%"),
    (r"\frac{1}{\sqrt{\mu_0\epsilon_0}}", "c", None, True, "c by the identity"),
    (r"N_A k_B", r"8.314\,\mathrm{J\,mol^{-1}\,K^{-1}}", None, True, "R = N_A k_B"),
    (r"N_A k_B", r"9.15\,\mathrm{J\,mol^{-1}\,K^{-1}}", None, False, "R off by 10%"),
    (r"\frac{3}{2} N_A k_B T", r"\frac{3}{2} R T", None, True, "R = N_A k_B used symbolically"),
    (r"1.67\times10^{-27}\,\mathrm{kg}", "m_p", None, True, "a constant for its value"),
    (r"1.84\times10^{-27}\,\mathrm{kg}", "m_p", None, False, "a constant for a value 10% off"),
    ("m_p", "m_n", None, False, "two constants 0.14% apart are not compared at 1%"),
    (r"\beta \approx 1", r"v \approx c", None, True, "a relation stays with the EQ rules"),
    # --- 10. golds written to one or two significant figures -----------------------------------
    (r"2\times10^{5}", r"1.96\times10^{5}", None, True, "rounds to the gold at 1 s.f., within 2%"),
    (r"2\times10^{5}", r"2.04e5", None, True, "rounds to the gold, other side"),
    (r"2\times10^{5}", r"1.95\times10^{5}", None, True, "2.5% off, rounds to 2e5 at 1 s.f.: within the 5% rounding cap (issue 25)"),
    (r"2\times10^{5}", r"1.89\times10^{5}", None, False, "5.5% off: rounds to 2e5 but beyond the 5% rounding cap"),
    (r"2\times10^{5}", r"2.4\times10^{5}", None, False, "rounds to 2 at 1 s.f. but 20% off: the cap decides"),
    (r"2\times10^{5}", r"1.4\times10^{5}", None, False, "rounds to 1"),
    (r"2\times10^{5}", r"2.5\times10^{5}", None, False, "half way: rejected whichever rounding"),
    (r"2\times10^{5}", r"2\times10^{6}", None, False, "wrong power of ten"),
    ("2e5", r"1.97\times10^{5}", None, True, "e-notation gold"),
    (r"3.0\times10^{8}\,\mathrm{m/s}", r"2.95\times10^{8}\,\mathrm{m/s}", None, True, "two significant figures"),
    (r"3.0\times10^{8}\,\mathrm{m/s}", r"2.9\times10^{8}\,\mathrm{m/s}", None, False, "3.3% off a 2 s.f. gold"),
    ("100", "104", None, False, "100 is read as exact (ambiguous zeros): plain 1%"),
    ("100", "100.9", None, True, "100 within 1%"),
    ("3", "3.04", None, False, "an integer gold keeps 1%"),
    ("0.3", "0.305", None, True, "decimal gold: half a unit in the last place"),
    ("0.3", "0.33", None, False, "decimal gold: 10% off"),
]


@pytest.mark.parametrize("gold,pred,unit,expected,why", CASES, ids=[c[4] for c in CASES])
def test_round2_units(verifier: Verifier, gold: str, pred: str, unit: object, expected: bool, why: str) -> None:
    v = verifier.verify([gold], [pred], "NV", "", gold_unit=unit)  # type: ignore[arg-type]
    assert isinstance(v, Verdict)
    assert v.correct is expected, f"{why}: {v.reason}"


def test_gold_self_accepts(verifier: Verifier) -> None:
    # every gold of this file accepts itself (the bench's gold-self check, for these shapes)
    for gold in sorted({c[0] for c in CASES}):
        assert verifier.verify([gold], [gold], "NV", "").correct, gold


def test_written_resolution_significant_figures() -> None:
    assert written_resolution(r"2\times10^{5}", 2e5) == pytest.approx(5e4)
    assert written_resolution("2e5", 2e5) == pytest.approx(5e4)
    assert written_resolution(r"25\times10^{3}", 25e3) == pytest.approx(500)
    assert written_resolution(r"2.0\times10^{5}", 2e5) == pytest.approx(5e3)
    assert written_resolution("100", 100) == 0.0  # ambiguous trailing zeros: exact
    assert written_resolution(r"10^{5}", 1e5) == 0.0  # no digit written
    assert written_resolution(r"0\times10^{5}", 0.0) == 0.0


def test_unit_words() -> None:
    assert unit_phrases("per second") == "1/second"
    assert unit_phrases("m per s") == "m/s"
    assert unit_phrases("degrees Celsius") == "degC"
    assert unit_phrases("degC") == "degC"  # absolute
    assert unit_phrases("degC/m") == "delta_degC/m"  # a difference
    assert unit_phrases("J/(kg degC)") == "J/(kg delta_degC)"
    assert mixed_units(2.0, r"\mathrm{h} 30 \mathrm{min}") == (2.5, "h")
    assert mixed_units(5.0, "ft 3 in") == (5.25, "ft")
    assert mixed_units(2.0, "h 90 min") is None  # 90 min is not below one hour
    assert mixed_units(2.0, "min 30 h") is None  # increasing sizes
    assert mixed_units(2.0, "m 30 s") is None  # not one kind
    assert mixed_units(2.0, "h") is None
    q = parse_quantity(r"2\ \mathrm{h}\ 30\ \mathrm{min}")
    assert q is not None and q.value == pytest.approx(2.5) and q.unit == "h"
    q = parse_quantity(r"1.5\,\mathring{A}")
    assert q is not None and q.unit == "angstrom"
