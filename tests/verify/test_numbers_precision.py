r"""Issue 25, item 4 and the numbers / units part of items 2, 3 and 5: the precision policy, words around
values, thousands separators, percent in words, units written as text, degrees from a unit hint.

* **The precision policy** (:func:`studybench.verify.comparison.tolerance.within_precision`): a table of
  edges checked on the function (exactly half a unit, negatives, scientific notation, ambiguous
  trailing zeros, zero, tiny and huge magnitudes, a prediction with fewer digits than the gold), then
  generated over many golds written to one to four significant figures: every careful value that rounds
  to the gold (within the documented caps) is accepted, every value that rounds elsewhere is rejected,
  through the whole verifier, in the gold's unit and after a unit conversion.
* **Words around a value**: every hedge and label form x several values; each with its wrong twin (the
  value changed) and bounds ("at least", ``<``) that must stay bounds.
* **Separators and forms**: thousands separators generated from numbers, with lists and tuples that
  must stay lists; percent in words; ``1/10^{14}`` as a plain fraction.
* **Units**: an EX answer whose unit is written in ``\text{}`` keeps it (every prefix against every
  base: the right rescaling accepted, the wrong prefix rejected); a degree hint (``^\circ``) makes the
  gold an angle.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest

from studybench.verify import Verifier
from studybench.verify.comparison.tolerance import ROUNDING_CAP, tolerance_width, within_precision
from studybench.verify.physics.units import hint_unit, unit_words
from studybench.verify.reading.numbers import Precision, parse_quantity, strip_value_words, written_precision
from studybench.verify.reading.unitwords import count_noun


def _judge(verifier: Verifier, cases: list[tuple[str, str, str, str | None]]) -> list[tuple[bool, str]]:
    """(correct, reason) for (gold, pred, answer type, gold_unit) cases, in one batch."""
    out = verifier.verify_many([([g], [p], at, "", u) for g, p, at, u in cases])
    return [(v.correct, v.reason) for v in out]


def _assert_all(verifier: Verifier, cases: list[tuple[str, str, str, str | None, bool]]) -> None:
    got = _judge(verifier, [c[:4] for c in cases])
    wrong = [(c[0], c[1], c[2], c[3], c[4], r) for c, (ok, r) in zip(cases, got, strict=True) if ok is not c[4]]
    assert not wrong, f"{len(wrong)} of {len(cases)} wrong (gold, pred, type, unit, expected, reason): {wrong[:12]}"


# ----------------------------------------------------------------------------------- significant figures

@pytest.mark.parametrize("text,value,sig,half,integer,ambiguous", [
    ("11", 11, 2, 0.5, True, False),
    ("1200", 1200, 2, 50, True, True),
    ("500", 500, 1, 50, True, True),
    ("300.", 300, 3, 0.5, False, False),
    ("0.30", 0.3, 2, 0.005, False, False),
    ("0.0106", 0.0106, 3, 0.00005, False, False),
    (r"1.2\times10^{3}", 1200, 2, 50, False, False),
    ("1.2e3", 1200, 2, 50, False, False),
    (r"20\times10^{3}", 20000, 2, 500, False, False),
    (r"-2.50\times10^{-19}", -2.5e-19, 3, 5e-22, False, False),
    ("-11", -11, 2, 0.5, True, False),
    (r"10^{5}", 1e5, 0, 0, False, False),
    (r"\frac{1}{3}", 1 / 3, 0, 0, False, False),
    ("3/4", 0.75, 0, 0, False, False),
    ("4 / 2", 2, 0, 0, False, False),
    ("0", 0, 0, 0, False, False),
])
def test_written_precision_counts_significant_figures(text: str, value: float, sig: int, half: float, integer: bool, ambiguous: bool) -> None:
    q = parse_quantity(text)
    assert q is not None and q.value == pytest.approx(value)
    p = q.precision
    assert (p.sig, p.integer, p.ambiguous) == (sig, integer, ambiguous), p
    assert p.half_unit == pytest.approx(half, rel=1e-9, abs=1e-300)
    assert written_precision(text, value) == p


def test_compound_numbers_state_no_single_precision() -> None:
    for text in (r"51^\circ 5'", r"2\ \mathrm{h}\ 30\ \mathrm{min}"):
        q = parse_quantity(text)
        assert q is not None and q.precision == Precision()


def _p(text: str) -> Precision:
    q = parse_quantity(text)
    assert q is not None
    return q.precision


# (gold as written, prediction, exact gold, expected, why): the policy's edges on the function itself
POLICY: list[tuple[str, float, bool, bool, str]] = [
    ("11", 11.28, False, True, "rounds to 11 at 2 s.f. (2.5% off)"),
    ("11", 11.6, False, False, "rounds to 12"),
    ("11", 10.5, False, True, "exactly half a unit below: half away from zero rounds 10.5 up to 11"),
    ("11", 11.5, False, False, "exactly half a unit above: 11.5 rounds to 12"),
    ("-11", -10.5, False, True, "negative tie: -10.5 rounds to -11"),
    ("-11", -11.5, False, False, "negative tie: -11.5 rounds to -12"),
    ("-11", 11.0, False, False, "a sign flip is never within tolerance"),
    ("1.2", 1.15, False, True, "a decimal tie (1.15 is not exact in binary): rounds up to 1.2"),
    ("1.2", 1.25, False, False, "1.25 rounds to 1.3"),
    ("1.0", 1.04, False, True, "1.0 kg accepts 1.04 (rounds to 1.0)"),
    ("1.0", 1.06, False, False, "1.06 rounds to 1.1"),
    ("1.0", 1.02, False, True, "the relative tolerance: 2% at most"),
    (r"1.2\times10^{3}", 1240, False, True, "scientific notation: 2 s.f."),
    (r"1.2\times10^{3}", 1250, False, False, "scientific notation: 1250 rounds to 1.3e3"),
    (r"2\times10^{5}", 2.09e5, False, True, "one significant figure: 4.5% off, within the 5% cap"),
    (r"2\times10^{5}", 1.89e5, False, False, "one significant figure: rounds to 2e5 but 5.5% off (the cap)"),
    (r"2\times10^{5}", 2.4e5, False, False, "one significant figure: rounds to 2e5 but 20% off"),
    ("0.3", 0.33, False, False, "one significant figure: 10% off"),
    ("1200", 1183, False, True, "ambiguous trailing zeros: 1.4%, within 2%"),
    ("1200", 1150, False, False, "ambiguous trailing zeros: 4.2% is beyond the 2% of the stricter reading"),
    ("500", 509, False, True, "ambiguous: 1.8%"),
    ("500", 520, False, False, "ambiguous: 4% (rounds to 500 at 1 s.f., not at 3)"),
    ("3", 3.04, True, False, "an exact integer (a count) keeps 1%"),
    ("3", 3.02, True, True, "an exact integer: 0.67% off, within 1%"),
    ("100", 100.9, True, True, "an exact integer: 0.9%"),
    ("1.04", 1.0, False, False, "a prediction with fewer digits: 3.8% off a 3 s.f. gold"),
    ("1.537", 1.552, False, True, "3 s.f.: 1% plus half a unit (0.03%)"),
    ("1.537", 1.555, False, False, "3 s.f.: 1.2%"),
    ("0", 1e-30, False, False, "a gold of 0 needs 0"),
    ("0.0", 0.01, False, False, "a gold of 0.0 needs 0 too (1.6e-19 C is not 0)"),
    (r"1.6\times10^{-19}", 1.64e-19, False, True, "tiny magnitudes scale alike (2.5%, rounds to 1.6)"),
    (r"1.6\times10^{-19}", 1.66e-19, False, False, "tiny: rounds to 1.7"),
    (r"6.0\times10^{23}", 6.04e23, False, True, "huge magnitudes alike"),
    (r"6.0\times10^{23}", 6.12e23, False, False, "huge: 2% off, rounds to 6.1"),
    (r"10^{5}", 1.03e5, False, False, "a bare power of ten states no digit: 1%"),
    (r"\frac{1}{3}", 0.3364, False, True, "a fraction is exact: 0.9% is within 1%"),
    (r"\frac{1}{3}", 0.34, False, False, "a fraction is exact: 2%"),
]


@pytest.mark.parametrize("gold,pred,exact,expected,why", POLICY, ids=[c[4] for c in POLICY])
def test_precision_policy_edges(gold: str, pred: float, exact: bool, expected: bool, why: str) -> None:
    q = parse_quantity(gold)
    assert q is not None
    assert within_precision(pred, q.value, q.precision, exact=exact) is expected, why
    # the widest accepted distance bounds every accept
    if expected:
        assert abs(pred - q.value) <= tolerance_width(q.value, q.precision, exact=exact) * (1 + 1e-9)


def _rounds_to(pred: Decimal, gold: Decimal, sig: int) -> bool:
    """Independent rounding (decimal, half away from zero for these positive values) at ``sig`` figures."""
    q = Decimal(1).scaleb(gold.adjusted() - sig + 1)
    return pred.quantize(q, rounding=ROUND_HALF_UP) == gold.quantize(q)


def _golds() -> list[tuple[str, Decimal, int]]:
    """Golds written to 1-4 significant figures, as decimals and in scientific notation."""
    out = []
    for mant in ("1", "2", "4.7", "9.8", "1.1", "3.0", "2.50", "7.25", "1.005", "6.674"):
        for k in (-19, -3, 0, 2, 8):
            d = Decimal(mant).scaleb(k)
            sig = len(mant.replace(".", "").lstrip("0"))
            text = f"{mant}\\times10^{{{k}}}" if k else mant
            out.append((text, d, sig))
    return out


def test_policy_matches_rounding_at_the_gold_precision_generated() -> None:
    """Every offset of every gold: accepted iff it rounds to the gold (capped) or lies within 1-2%."""
    n = 0
    for text, d, sig in _golds():
        q = parse_quantity(text)
        assert q is not None and q.value == pytest.approx(float(d))
        for permille in range(-80, 81, 3):  # -8% .. +8%
            p = d * (1 + Decimal(permille) / 1000)
            rel = abs(Decimal(permille)) / 1000
            rounds = _rounds_to(p, d, sig) and rel <= Decimal(str(ROUNDING_CAP))
            plain = rel <= min(Decimal("0.01") + Decimal(repr(q.precision.half_unit)) / abs(d), Decimal("0.02"))
            assert within_precision(float(p), float(d), q.precision) is (rounds or plain), (text, str(p))
            n += 1
    assert n > 2500


def test_careful_values_are_accepted_and_neighbours_rejected_by_the_verifier(verifier: Verifier) -> None:
    """End to end, with units: the careful value for 1-2 s.f. golds, in the gold's unit, another prefix, or the hint's."""
    cases: list[tuple[str, str, str, str | None, bool]] = []
    # golds whose half unit is over 2%: the rounding clause decides beyond the relative tolerance
    for gold, careful, neighbour in (("11", "11.28", "11.6"), ("1.2", "1.24", "1.26"), ("2", "2.08", "2.12"), ("15", "14.6", "14.4")):
        cases += [
            (gold + r"\,\mathrm{mm}", careful + r"\,\mathrm{mm}", "NV", None, True),
            (gold + r"\,\mathrm{mm}", f"{float(careful) / 1000:.8g}" + r"\,\mathrm{m}", "NV", None, True),
            (gold, careful, "NV", r"\mathrm{mm}", True),
            (gold + r"\,\mathrm{mm}", neighbour + r"\,\mathrm{mm}", "NV", None, False),
            (gold + r"\,\mathrm{mm}", careful + r"\,\mathrm{cm}", "NV", None, False),  # wrong prefix
            (gold + r"\,\mathrm{mm}", f"{float(neighbour) / 1000:.8g}" + r"\,\mathrm{m}", "NV", None, False),
            (f"d = {gold}\\,\\mathrm{{mm}}", f"d = {careful}\\,\\mathrm{{mm}}", "EX", None, True),
            (f"d = {gold}\\,\\mathrm{{mm}}", f"d = {neighbour}\\,\\mathrm{{mm}}", "EX", None, False),
        ]
    cases += [
        ("11", "11.28", "NV", None, False),  # a plain integer without a unit is a count: exact
        ("1.0\\,\\mathrm{kg}", "1.04\\,\\mathrm{kg}", "NV", None, True),
        ("1.0\\,\\mathrm{kg}", "1.06\\,\\mathrm{kg}", "NV", None, False),
        ("5\\%", "5.2\\%", "NV", None, True),
        ("5\\%", "0.052", "NV", None, True),
        ("5\\%", "5.6\\%", "NV", None, False),
        ("1200\\,\\mathrm{K}", "1183\\,\\mathrm{K}", "NV", None, True),
        ("1200\\,\\mathrm{K}", "1150\\,\\mathrm{K}", "NV", None, False),
    ]
    _assert_all(verifier, cases)


# ----------------------------------------------------------------------------------- words around a value

HEDGES = [
    r"\approx {v}", r"\approx\, {v}", "≈ {v}", "≈{v}", r"\sim {v}", r"\simeq {v}", r"\text{about } {v}", r"\text{about}\ {v}",
    r"\text{approximately } {v}", r"\text{roughly } {v}", r"\text{approx. } {v}", r"\text{around } {v}", r"\text{Answer } {v}",
    r"\text{Answer: } {v}", r"\text{The answer is } {v}", "about {v}", r"\text{about } \approx {v}", "~{v}",
]
VALUES = [("0.442", "0.461"), (r"3.2\times10^{-5}\,\mathrm{m}", r"3.2\times10^{-4}\,\mathrm{m}"), ("10.3", "10.9"), (r"-1.6\,\mathrm{J}", r"1.6\,\mathrm{J}")]


def test_words_before_a_value_are_read_and_the_value_still_checked(verifier: Verifier) -> None:
    cases: list[tuple[str, str, str, str | None, bool]] = []
    for h in HEDGES:
        for gold, wrong in VALUES:
            cases.append((gold, h.replace("{v}", gold), "NV", None, True))
            cases.append((gold, h.replace("{v}", wrong), "NV", None, False))
        cases.append(("x = 0.442", "x = " + h.replace("{v}", "0.442"), "NV", None, True))
    _assert_all(verifier, cases)


def test_bounds_and_other_words_are_no_hedges(verifier: Verifier) -> None:
    for text in (r"\text{at least } 5", r"\text{less than } 5", r"\text{more than } 5", r"\text{up to } 5", "< 5", r"\le 5"):
        assert strip_value_words(text) == text
    _assert_all(verifier, [
        ("5", r"\text{at least } 5", "NV", None, False),
        ("5", r"\text{less than } 5", "NV", None, False),
        ("5", r"\text{about } 5 \text{ or } 6", "NV", None, False),
        ("5", r"\text{about}", "NV", None, False),
        ("x > 5", r"\text{about } 5", "NV", None, False),
    ])


@pytest.mark.parametrize("noun", ["nuclei", "photons", "fringes", "orbits", "maxima", "bright fringes", "radii"])
def test_count_nouns_after_a_count(verifier: Verifier, noun: str) -> None:
    assert count_noun(noun)
    _assert_all(verifier, [
        ("0.0106", f"0.0106\\text{{ {noun}}}", "NV", None, True),
        ("12", f"12\\ \\text{{{noun}}}", "NV", None, True),
        ("12", f"13\\ \\text{{{noun}}}", "NV", None, False),
        ("12", f"12\\ \\text{{{noun}}}", "NV", r"\mathrm{m}", False),  # the gold has a unit: no count
    ])


def test_words_that_are_no_count_nouns() -> None:
    for w in ("or more", "thousand", "squared", "maximum", "less", "kg"):
        assert not count_noun(w), w


# ----------------------------------------------------------------------------------- separators and forms

def _grouped(n: int, sep: str) -> str:
    s = f"{n:,}"
    return s.replace(",", sep)


def test_thousands_separators_generated(verifier: Verifier) -> None:
    cases: list[tuple[str, str, str, str | None, bool]] = []
    for n in (1000, 10455, 160000, 2500000, 98765432, 1234567):
        for sep in (",", "{,}", r"\,", r"\ "):
            cases.append((str(n), _grouped(n, sep), "NV", None, True))
            cases.append((f"{n / 10 ** (len(str(n)) - 1):.6g}\\times10^{{{len(str(n)) - 1}}}", _grouped(n, sep), "NV", None, True))
            cases.append((str(n + n // 10), _grouped(n, sep), "NV", None, False))
            cases.append((str(n) + r"\,\mathrm{yr}", _grouped(n, sep) + r"\,\mathrm{yr}", "NV", None, True))
            cases.append((str(n) + r"\,\mathrm{yr}", _grouped(n, sep) + r"\,\mathrm{s}", "NV", None, False))
        cases.append((str(n) + ".5", f"{n:,}.5", "NV", None, True))
    _assert_all(verifier, cases)


def test_commas_that_are_no_thousands_separators(verifier: Verifier) -> None:
    _assert_all(verifier, [
        ("1.5", "1,5", "NV", None, False),  # a decimal comma is not read
        ("1.5", "1,500", "NV", None, False),  # groups of three: 1500, never 1.5
        ("12", "1,2", "NV", None, False),
        ("1234", "1,2345", "NV", None, False),
        ("1234", "12,34", "NV", None, False),
        ("1, 234", "1, 234", "NV", None, True),  # a list stays a list
        ("1, 234", "1,234", "NV", None, True),
        ("1, 234", "1234", "NV", None, False),
        ("(1, 234)", "(1,234)", "TUP", None, True),
    ])
    q = parse_quantity("1,234")
    assert q is not None and q.value == 1234
    assert parse_quantity("1,2") is None and parse_quantity("1,2345") is None


def test_percent_in_words(verifier: Verifier) -> None:
    cases: list[tuple[str, str, str, str | None, bool]] = []
    for form in ("{v} percent", r"{v}\text{ percent}", r"{v}\ \text{per cent}", r"{v}\,\%", r"{v}\%", r"{v}\ \mathrm{percent}"):
        cases += [
            (r"5\%", form.replace("{v}", "5"), "NV", None, True),
            ("0.05", form.replace("{v}", "5"), "NV", None, True),
            (r"12.5\%", form.replace("{v}", "12.5"), "NV", None, True),
            (r"5\%", form.replace("{v}", "6"), "NV", None, False),
            ("5", form.replace("{v}", "5"), "NV", None, False),  # 5 percent is 0.05, not 5
        ]
    _assert_all(verifier, cases)


def test_plain_fractions_and_tiny_exact_values(verifier: Verifier) -> None:
    _assert_all(verifier, [
        ("10^{-14}", "1/100000000000000", "NV", None, True),
        ("10^{-14}", "1/10000000000000", "NV", None, False),
        ("10^{-14}", r"\frac{1}{10^{7}\cdot10^{7}}", "NV", None, True),
        ("10^{-15}", r"\frac{1}{10^{7}\cdot10^{7}}", "NV", None, False),
        ("0.75", "3/4", "NV", None, True),
        ("0.75", "3/5", "NV", None, False),
        ("0", r"\sin(\pi)", "NV", None, True),
        (r"0.5\,\mathrm{m}", r"1/2\,\mathrm{m}", "NV", None, True),
    ])


# ----------------------------------------------------------------------------------- units

PREFIXES = {"": 1.0, "k": 1e3, "m": 1e-3, "M": 1e6, "u": 1e-6}
BASES = ["J", "m", "s", "V", "eV", "Pa"]


def _tex_prefix(p: str) -> str:
    return r"\mu " if p == "u" else p


def test_units_written_as_text_stay_with_the_value_generated(verifier: Verifier) -> None:
    """Bug 1: 3\\ \\text{kJ} against 3 J was accepted as EX (the unit read as a remark)."""
    cases: list[tuple[str, str, str, str | None, bool]] = []
    for base in BASES:
        for p, f in PREFIXES.items():
            if not p:
                continue
            unit = f"\\text{{{_tex_prefix(p)}{base}}}" if p != "u" else f"\\mu\\text{{{base}}}"
            for at in ("EX", "NV"):
                cases.append((f"3\\,\\mathrm{{{base}}}", f"3\\ {unit}", at, None, False))
                cases.append((f"3\\,\\mathrm{{{base}}}", f"{3 / f:.6g}\\ {unit}", at, None, True))
            cases.append((f"x = 0.5\\,\\mathrm{{{base}}}", f"x = {0.5 / f:.6g}\\ {unit}", "EX", None, True))
            cases.append((f"x = 0.5\\,\\mathrm{{{base}}}", f"x = {5 / f:.6g}\\ {unit}", "EX", None, False))
    cases += [
        (r"\frac{q}{r}\,\mathrm{V}", r"\frac{q}{r}\ \text{V}", "EX", None, True),
        (r"\frac{q}{r}\,\mathrm{V}", r"\frac{q}{r}\ \text{kV}", "EX", None, False),
        (r"\frac{q}{r}\,\mathrm{V}", r"\frac{1000 q}{r}\ \text{mV}", "EX", None, True),
        (r"v_0 \text{ upward}", r"v_0 \text{ upward}", "EX", None, True),
        (r"v_0 \text{ upward}", r"v_0 \text{ downward}", "EX", None, False),
    ]
    _assert_all(verifier, cases)


def test_unit_words_are_units_not_remarks() -> None:
    for w in ("kJ", "J", "km", "eV", "MeV", "s", "mJ"):
        assert unit_words(w), w
    for w in ("upward", "in", "at", "for an ion", "counterclockwise", "outside the sphere"):
        assert not unit_words(w), w


@pytest.mark.parametrize("hint", [r"^\circ", r"^{\circ}", r"\circ", "°", r"\degree", "degrees", r"\text{degrees}", "deg", r"$^\circ$"])
def test_a_degree_hint_makes_the_gold_an_angle(verifier: Verifier, hint: str) -> None:
    """Bug 7: gold 0.069 with gold_unit ^\\circ rejected 0.001204 rad."""
    assert hint_unit(hint) == ("deg", None)
    _assert_all(verifier, [
        ("0.069", r"0.001204\,\mathrm{rad}", "NV", hint, True),
        ("0.069", r"0.069^{\circ}", "NV", hint, True),
        ("0.069", "0.069", "NV", hint, True),
        ("0.069", r"0.069\,\mathrm{rad}", "NV", hint, False),
        ("0.069", r"0.0012\,\mathrm{mrad}", "NV", hint, False),
        ("60", r"\frac{\pi}{3}", "NV", hint, True),
        ("60", r"\frac{\pi}{6}", "NV", hint, False),
        ("60", r"1.047\,\mathrm{rad}", "NV", hint, True),
        ("60", r"60\,\mathrm{rad}", "NV", hint, False),
    ])


def test_a_unit_hint_gives_an_equation_gold_its_unit(verifier: Verifier) -> None:
    """EQ golds whose value states no unit read it from the hint, as NV does (was: "gold states no unit").

    The wrong twins: another prefix without rescaling, a value outside the tolerance, radians read as degrees
    (``\\theta = 30\\,\\mathrm{rad}`` against a 30-degree gold was accepted before).
    """
    _assert_all(verifier, [
        ("T_1 = 77", r"T_1 = 77\,\mathrm{K}", "EQ", r"\text{K}", True),
        ("T_1 = 77", "T_1 = 77", "EQ", r"\text{K}", True),
        ("T_1 = 77", r"T_1 = 0.077\,\mathrm{kK}", "EQ", r"\text{K}", True),
        ("T_1 = 77", r"T_1 = 77\,\mathrm{mK}", "EQ", r"\text{K}", False),
        ("T_1 = 77", r"T_1 = 78.5\,\mathrm{K}", "EQ", r"\text{K}", False),
        (r"\theta = 30", r"\theta = 0.5236\,\mathrm{rad}", "EQ", r"^\circ", True),
        (r"\theta = 30", r"\theta = 30", "EQ", r"^\circ", True),
        (r"\theta = 30", r"\theta = 30\,\mathrm{rad}", "EQ", r"^\circ", False),
        (r"\theta = 30", r"\theta = \frac{\pi}{3}", "EQ", r"^\circ", False),
        ("v = 3", r"v = 3\,\mathrm{m/s}", "EQ", r"\mathrm{m/s}", True),
        ("v = 3", r"v = 3\,\mathrm{km/s}", "EQ", r"\mathrm{m/s}", False),
        ("v = 3 a", "v = 3 a", "EQ", r"\mathrm{m/s}", True),
    ])
