r"""Written numbers: read a gold's value, print it in other formats and units, and make near misses.

:func:`read_number` reads a box that is one number with an optional power of ten and unit
(``2.80\times10^{5}\,\mathrm{m/s}``, ``x = 3e8``, ``10^{-4}``, ``60^{\circ}``), keeping the
written mantissa, so every format below is exact (:class:`decimal.Decimal`, no float round trip).

Equivalent forms (label ``True``): scientific notation in several spellings, ``e`` notation,
the plain decimal, thousands separators, a more precise value that rounds to the gold, the gold
rounded to three significant figures (within the documented 1%), trailing zeros; unit prefixes,
equivalent units and degrees / radians by pint (:mod:`studybench.testing.pairgen.units`), the unit
restyled, a stated unit written out; words around the value (``\approx``, "about", a count noun).

A careful value that rounds to a one- or two-significant-figure gold beyond the plain 1-2% (``11.28``
for ``11\,\mathrm{mm}``: the rubric's "round to the same value at the reference's stated precision").

Near misses (label ``False``): the value 3x the documented tolerance away
(:func:`studybench.verify.comparison.tolerance.tolerance_width`, the same policy the verifier applies),
a value that rounds to the next value at the gold's precision (``11.6`` for ``11\,\mathrm{mm}``), the
mantissa doubled or tripled, the power of ten off by one, the sign flipped, a wrong unit prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from random import Random

from studybench.testing.pairgen.base import Candidate, Slot, Transformation, norm_ws
from studybench.testing.pairgen.sym import split_equation
from studybench.testing.pairgen.units import BASES, PREFIXES, Factor, convert, parse_unit, unit_latex

__all__ = ["NUMBERS", "Num", "format_number", "read_number"]

_NUM = re.compile(
    r"(?P<sign>[-+−])?\s*(?:"
    r"(?P<mant>\d+(?:\.\d*)?|\.\d+)(?:\s*(?:\\times|\\cdot|\*|×)\s*10\s*\^\s*(?:\{\s*(?P<e1>[-+−]?\s*\d+)\s*\}|(?P<e2>[-+]?\d))"
    r"|\s*[eE](?P<e3>[-+]?\d+))?"
    r"|10\s*\^\s*(?:\{\s*(?P<e4>[-+−]?\s*\d+)\s*\}|(?P<e5>\d)))"
)
_UNIT_START = re.compile(r"\s*(?:\\[,;: ]|~|\\quad)?\s*(?:\\mathrm|\\text|\\textrm|\\operatorname|\\rm|\\mu|\^|\\circ|\\degree|°|\\?%|[A-Za-zΩ])")


@dataclass(frozen=True)
class Num:
    r"""A box read as one written number.

    Attributes:
        lhs: the text left of ``=`` (``None`` when there is none), kept as written.
        digits: the value as written, as a Decimal (``2.80E+5``; keeps the written digits).
        exp10: the written power of ten, ``None`` when there is none.
        bare_pow: written as ``10^{k}`` alone.
        unit_text: the unit as written (``\,\mathrm{m/s}``), ``""`` when there is none.
        unit: the unit's factors, or ``None`` when it has none or cannot be read.
        sig: significant digits written (a plain integer: without its trailing zeros).
        decimals: digits after the mantissa's point.
        mant_text: the mantissa as written (with the sign).
    """

    lhs: str | None
    digits: Decimal
    exp10: int | None
    bare_pow: bool
    unit_text: str
    unit: list[Factor] | None
    sig: int
    decimals: int
    mant_text: str

    @property
    def value(self) -> float:
        """The value as a float."""
        return float(self.digits)

    @property
    def plain_int(self) -> bool:
        """A plain integer (no point, no power of ten): exact, and its trailing zeros are ambiguous."""
        return self.exp10 is None and self.decimals == 0 and "." not in self.mant_text


def read_number(box: str) -> Num | None:
    r"""Read ``box`` as one written number with an optional power of ten and unit; ``None`` otherwise.

    Args:
        box: a box's content (``-1.6\times10^{-19}\,\mathrm{C}``, ``v = 340\ \text{m/s}``).

    Returns:
        A :class:`Num`, or ``None`` for anything else (a ``\pm``, several numbers, an expression, a
        unit that is not a unit). Never raises.
    """
    if not isinstance(box, str) or len(box) > 200 or "\\pm" in box or "\\mp" in box:
        return None
    try:
        lhs, rhs = split_equation(box)
    except ValueError:
        return None
    if lhs is not None and (not lhs or re.search(r"\d", re.sub(r"_\{[^{}]*\}|_\d", "", lhs))):
        return None
    text = rhs.strip().rstrip(".")
    m = _NUM.match(text)
    if not m or not m.group(0).strip():
        return None
    rest = text[m.end():]
    if rest.strip() and not _UNIT_START.match(rest):
        return None
    unit = parse_unit(rest) if rest.strip() else None
    if unit is not None and not re.search(r"\\(?:mathrm|text|textrm|rm|operatorname|mbox)|\\circ|°|\\degree", rest):
        # a bare letter after a number is a symbol as often as a unit (5m: five masses?); bare words only
        if any(len(w) < 2 for w in re.findall(r"[A-Za-zΩ]+", rest.replace("\\mu", ""))):
            return None
    if rest.strip() and unit is None and not re.fullmatch(r"\s*(?:\\[,;: ]|~)?\s*\\?%\s*", rest):
        return None  # only a unit it can read, or a percent sign kept as written
    neg = m.group("sign") in ("-", "−")
    e_txt = next((m.group(k) for k in ("e1", "e2", "e3", "e4", "e5") if m.group(k) is not None), None)
    exp10 = int(e_txt.replace("−", "-").replace(" ", "")) if e_txt is not None else None
    bare = m.group("mant") is None
    mant = "1" if bare else m.group("mant")
    if abs(exp10 or 0) > 300 or len(mant) > 30:
        return None
    d = Decimal(mant).scaleb(exp10 or 0)
    d = -d if neg else d
    intpart, _, frac = mant.partition(".")
    core = (intpart + frac).lstrip("0")
    if "." in mant or exp10 is not None:
        sig = max(len(core), 1) if "." in mant else max(len(intpart.lstrip("0")), 1)
    else:
        sig = max(len(core.rstrip("0")), 1)
    return Num(lhs=lhs, digits=d, exp10=exp10, bare_pow=bare, unit_text=rest if rest.strip() else "",
               unit=unit, sig=sig, decimals=len(frac), mant_text=("-" if neg else "") + mant)


def _round_sig(d: Decimal, sig: int) -> Decimal:
    if d == 0:
        return d
    q = Decimal(1).scaleb(d.adjusted() - sig + 1)
    r = d.quantize(q, rounding=ROUND_HALF_EVEN)
    if r.adjusted() != d.adjusted():
        r = r.quantize(Decimal(1).scaleb(r.adjusted() - sig + 1), rounding=ROUND_HALF_EVEN)
    return r


def _plain(d: Decimal) -> str:
    s = format(d, "f")
    return s


def format_number(d: Decimal, sig: int, style: str) -> str:
    r"""A value written with ``sig`` significant digits in one style.

    Styles: ``plain`` (``0.00150``), ``times`` (``1.50 \times 10^{-3}``), ``cdot``
    (``1.50 \cdot 10^{-3}``), ``tight`` (``1.50\times10^{-3}``, braces dropped for one digit), ``e``
    (``1.50e-3``), ``E`` (``1.50E-03``).
    """
    r = _round_sig(d, sig)
    if style == "plain" or r == 0:
        return _plain(r)
    k = r.adjusted()
    mant = r.scaleb(-k)
    m = format(mant.quantize(Decimal(1).scaleb(-(sig - 1))), "f") if sig > 1 else format(mant.quantize(Decimal(1)), "f")
    if style == "times":
        return f"{m} \\times 10^{{{k}}}"
    if style == "cdot":
        return f"{m} \\cdot 10^{{{k}}}"
    if style == "tight":
        return f"{m}\\times10^{k}" if 0 <= k <= 9 else f"{m}\\times10^{{{k}}}"
    if style == "e":
        return f"{m}e{k}"
    return f"{m}E{'+' if k >= 0 else '-'}{abs(k):02d}"


def _box(n: Num, value_text: str, unit_text: str | None = None) -> str:
    unit = n.unit_text if unit_text is None else unit_text
    body = f"{value_text}{unit}"
    return body if n.lhs is None else f"{n.lhs} = {body}"


def _cand(n: Num, slot: Slot, value_text: str, new_value: float, tol: float, note: str, unit_text: str | None = None) -> list[Candidate]:
    box = _box(n, value_text, unit_text)
    if norm_ws(box) == norm_ws(slot.box):
        return []
    return [Candidate(box, ("value", n.value, new_value, tol), note)]


def _sci(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.digits == 0 or (n.exp10 is None and 0.01 <= abs(n.value) < 100):
        return []
    style = rng.choice(["times", "cdot", "tight"])
    return _cand(n, slot, format_number(n.digits, n.sig, style), n.value, 1e-12, f"scientific ({style})")


def _e_notation(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.digits == 0 or (n.exp10 is None and 0.01 <= abs(n.value) < 1000):
        return []
    style = rng.choice(["e", "E"])
    return _cand(n, slot, format_number(n.digits, n.sig, style), n.value, 1e-12, f"{style} notation")


def _plain_form(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.exp10 is None or not -4 <= n.digits.adjusted() <= 6:
        return []
    return _cand(n, slot, _plain(n.digits), n.value, 1e-12, "plain decimal")


def _thousands(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or len(slot.gold.boxes) != 1 or slot.gold.answer_type in ("TUP", "ALT") or abs(n.value) < 1000 or n.digits.adjusted() > 12:
        return []
    text = _plain(n.digits)
    ip, _, frac = text.lstrip("-").partition(".")
    if len(ip) < 4:
        return []
    sep = rng.choice([",", "{,}", "\\,"])
    groups = []
    while len(ip) > 3:
        groups.insert(0, ip[-3:])
        ip = ip[:-3]
    groups.insert(0, ip)
    out = ("-" if text.startswith("-") else "") + sep.join(groups) + ("." + frac if frac else "")
    return _cand(n, slot, out, n.value, 1e-12, f"thousands separator {sep!r}")


def _more_precise(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.digits == 0 or n.plain_int:
        return []
    half = Decimal(5).scaleb(n.digits.adjusted() - n.sig)
    step = min(abs(half), abs(n.digits) * Decimal("0.01")) * Decimal("0.3") * rng.choice([1, -1])
    new = n.digits + step
    if _round_sig(new, n.sig) != _round_sig(n.digits, n.sig):
        return []
    style = "plain" if n.exp10 is None else "times"
    return _cand(n, slot, format_number(new, n.sig + 2, style), float(new), 0.004, "more digits that round to the gold")


def _fewer_digits(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.sig < 4 or n.plain_int:
        return []
    new = _round_sig(n.digits, 3)
    style = "plain" if n.exp10 is None else "times"
    return _cand(n, slot, format_number(new, 3, style), float(new), 0.005, "3 significant figures (within 1%)")


def _trailing_zeros(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.bare_pow:
        return []
    mant = n.mant_text + ("" if "." in n.mant_text else ".") + "0" * rng.choice([1, 2])
    if n.exp10 is not None:
        return _cand(n, slot, f"{mant} \\times 10^{{{n.exp10}}}", n.value, 1e-12, "trailing zeros")
    return _cand(n, slot, mant, n.value, 1e-12, "trailing zeros")


def _fraction(slot: Slot, rng: Random) -> list[Candidate]:
    from fractions import Fraction

    n = slot.number
    if n is None or n.exp10 is not None or n.decimals == 0 or n.digits == int(n.digits):
        return []
    f = Fraction(n.digits)
    if f.denominator > 20:
        return []
    sign = "-" if f < 0 else ""
    return _cand(n, slot, f"{sign}\\frac{{{abs(f.numerator)}}}{{{f.denominator}}}", float(f), 1e-12, "an exact decimal as a fraction")


def _value_text(n: Num, d: Decimal, sig: int) -> str:
    return format_number(d, sig, "plain" if -3 <= d.adjusted() <= 4 else "times")


def _with_unit(slot: Slot) -> tuple[Num | None, list[Factor] | None, bool]:
    """The number, the unit it is in (written, else the stated one) and whether the unit was stated only."""
    n = slot.number
    if n is None:
        return None, None, False
    if n.unit is not None:
        return n, n.unit, False
    if not n.unit_text and slot.unit:
        return n, parse_unit(slot.unit), True
    return n, None, False


def _prefix_options(f: Factor) -> list[str]:
    if not BASES[f.base][1]:
        return []
    pool = ["", "k", "m", "M", "u", "n"] + (["c"] if f.base == "m" else [])
    return [p for p in pool if p != f.prefix]


def _prefixable(slot: Slot) -> tuple[Num, list[Factor], int] | None:
    """The slot's number, its unit and the index of the first unit factor that takes another prefix."""
    n, unit, _stated = _with_unit(slot)
    if n is None or not unit or n.digits == 0:
        return None
    i = next((k for k, f in enumerate(unit) if _prefix_options(f)), None)
    return None if i is None else (n, unit, i)


def _unit_prefix(slot: Slot, rng: Random) -> list[Candidate]:
    found = _prefixable(slot)
    if found is None:
        return []
    n, unit, i = found
    f = unit[i]
    p = rng.choice(_prefix_options(f))
    shift = (PREFIXES.get(f.prefix, 0) - PREFIXES.get(p, 0)) * f.exp
    new = n.digits.scaleb(shift)
    dst = [*unit[:i], Factor(p, f.base, f.exp), *unit[i + 1:]]
    back = convert(float(new), dst, unit)
    if back is None or abs(back - n.value) > 1e-9 * abs(n.value):
        return []
    return _cand(n, slot, _value_text(n, new, max(n.sig, 2)), back, 1e-9, f"prefix {f.prefix or '-'} -> {p or '-'}",
                 unit_latex(dst, rng.randrange(4)))


_EQUIVALENT: dict[str, list[Factor]] = {
    "J": [Factor("", "N", 1), Factor("", "m", 1)], "W": [Factor("", "J", 1), Factor("", "s", -1)],
    "Pa": [Factor("", "N", 1), Factor("", "m", -2)], "Hz": [Factor("", "s", -1)],
    "N": [Factor("k", "g", 1), Factor("", "m", 1), Factor("", "s", -2)], "C": [Factor("", "A", 1), Factor("", "s", 1)],
    "V": [Factor("", "J", 1), Factor("", "C", -1)], "T": [Factor("", "Wb", 1), Factor("", "m", -2)],
    "eV": [Factor("", "J", 1)], "L": [Factor("d", "m", 3)], "min": [Factor("", "s", 1)], "h": [Factor("", "s", 1)],
    "atm": [Factor("", "Pa", 1)], "Wb": [Factor("", "T", 1), Factor("", "m", 2)],
}


def _unit_equivalent(slot: Slot, rng: Random) -> list[Candidate]:
    n, unit, _stated = _with_unit(slot)
    if n is None or not unit or n.digits == 0:
        return []
    idx = [k for k, f in enumerate(unit) if f.base in _EQUIVALENT and f.exp == 1]
    if not idx:
        return []
    i = rng.choice(idx)
    f = unit[i]
    rep = list(_EQUIVALENT[f.base])
    if f.prefix and f.base != "eV" and rep[0].exp == 1 and not rep[0].prefix and BASES[rep[0].base][1]:
        rep[0] = Factor(f.prefix, rep[0].base, 1)  # kJ = kN m; otherwise pint rescales the value
    dst = [*unit[:i], *rep, *unit[i + 1:]]
    new = convert(n.value, unit, dst)
    if new is None or new == 0:
        return []
    sig = max(n.sig, 3) + 1
    d = _round_sig(Decimal(repr(new)), sig)
    back = convert(float(d), dst, unit)
    return _cand(n, slot, _value_text(n, d, sig), back if back is not None else float("nan"), 1e-3, f"{f.prefix}{f.base} as {' '.join(g.prefix + g.base for g in rep)}",
                 unit_latex(dst, rng.randrange(4)))


def _unit_angle(slot: Slot, rng: Random) -> list[Candidate]:
    n, unit, _stated = _with_unit(slot)
    if n is None or not unit or len(unit) != 1 or unit[0].exp != 1 or unit[0].base not in ("°", "rad") or n.digits == 0:
        return []
    dst = [Factor("", "rad", 1)] if unit[0].base == "°" else [Factor("", "°", 1)]
    new = convert(n.value, unit, dst)
    if new is None:
        return []
    sig = max(n.sig, 3) + 1
    d = _round_sig(Decimal(repr(new)), sig)
    text = unit_latex(dst, rng.choice([0, 2])) if dst[0].base == "rad" else "^{\\circ}"
    back = convert(float(d), dst, unit)
    return _cand(n, slot, _value_text(n, d, sig), back if back is not None else float("nan"), 1e-3, "degrees <-> radians", text)


def _unit_style(slot: Slot, rng: Random) -> list[Candidate]:
    n, unit, stated = _with_unit(slot)
    if n is None or not unit:
        return []
    styles = list(range(4))
    rng.shuffle(styles)
    value = n.digits if n.exp10 is None else None
    vt = _plain(value) if value is not None else format_number(n.digits, n.sig, "times")
    for st in styles:
        out = _cand(n, slot, vt, n.value, 1e-12, "unit written out" if stated else f"unit style {st}", unit_latex(unit, st))
        if out:
            return out
    return []


_NOUNS = ("orbits", "photons", "fringes", "oscillations", "collisions", "electrons", "turns", "nuclei", "revolutions", "cycles")


def _words(kind: str):  # noqa: ANN202 - a small factory
    def apply(slot: Slot, rng: Random) -> list[Candidate]:
        n = slot.number
        if n is None or n.lhs is not None:
            return []
        if kind == "approx":
            text = rng.choice(["\\approx ", "≈ ", "\\approx\\, "]) + slot.box.strip()
        elif kind == "about":
            text = rng.choice(["\\text{about } ", "\\text{approximately } ", "\\text{about}\\ "]) + slot.box.strip()
        else:
            if n.unit_text or slot.unit or n.digits < 0:
                return []
            text = slot.box.strip() + rng.choice(["\\text{ ", "\\ \\text{", "~\\text{"]) + rng.choice(_NOUNS) + "}"
        return [Candidate(text, ("value", n.value, n.value, 1e-12), f"words: {kind}")]

    return apply


# ------------------------------------------------------------------------------------ near misses

def _precision(n: Num, slot: Slot):  # noqa: ANN202 - (Precision, exact)
    from studybench.verify.physics.units import hint_unit
    from studybench.verify.reading.numbers import Precision, written_precision

    if n.bare_pow:
        return Precision(), True
    written = n.mant_text + (f"\\times 10^{{{n.exp10}}}" if n.exp10 is not None else "")
    # a plain integer without a unit is exact (a count); with one, its digits are significant; a symbolic
    # unit hint (2 in units of \hbar^2: an eigenvalue) states no measured unit, so the integer stays exact
    measured = bool(n.unit_text) or (slot.unit is not None and hint_unit(slot.unit)[0] is not None)
    return written_precision(written, n.value), n.plain_int and not measured


def _tolerance(n: Num, slot: Slot) -> float:
    """The verifier's documented tolerance for this gold, relative (:func:`~studybench.verify.comparison.tolerance.tolerance_width`)."""
    from studybench.verify.comparison.tolerance import tolerance_width

    prec, exact = _precision(n, slot)
    return tolerance_width(n.value, prec, exact=exact) / abs(n.value)


def _rounding(slot: Slot, rng: Random, miss: bool) -> list[Candidate]:
    """A value that rounds to the gold at its significant figures beyond the 1-2% (or, ``miss``, to the next value)."""
    from studybench.verify.comparison.tolerance import MAX_REL_TOL, REL_TOL

    n = slot.number
    if n is None or n.digits == 0 or n.bare_pow:
        return []
    prec, exact = _precision(n, slot)
    if exact or prec.half_unit == 0:
        return []
    g = abs(n.value)
    h = prec.half_unit / g
    width = _tolerance(n, slot)
    sign = rng.choice([1, -1])
    if miss:
        rel = 1.2 * h  # past the half unit: rounds to the neighbouring value
        if rel <= width * 1.05 or rel < 0.025:
            return []
    else:
        plain = min(REL_TOL + h, MAX_REL_TOL)
        if width <= plain * 1.05:
            return []  # the rounding clause decides nothing beyond the relative tolerance here
        rel = (plain + width) / 2
    new = n.digits * (1 + Decimal(repr(rel)) * sign)
    sig = max(n.sig + 2, 4)
    d = _round_sig(new, sig)
    text = format_number(d, sig, "plain" if n.exp10 is None else "times")
    why = "rounds to the next value at the gold's precision" if miss else "rounds to the gold at its significant figures"
    return [Candidate(_box(n, text), ("value", n.value, float(d), -rel if miss else rel), f"{why} ({rel:.2%} away)")]


def _careful(slot: Slot, rng: Random) -> list[Candidate]:
    return _rounding(slot, rng, miss=False)


def _miss_rounding(slot: Slot, rng: Random) -> list[Candidate]:
    return _rounding(slot, rng, miss=True)


def _miss_tolerance(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.digits == 0:
        return []
    tol = _tolerance(n, slot)
    new = n.digits * (1 + Decimal(repr(3 * tol)) * rng.choice([1, -1]))
    sig = max(n.sig + 2, 4)
    d = _round_sig(new, sig)
    return [Candidate(_box(n, format_number(d, sig, "plain" if n.exp10 is None else "times")), ("value", n.value, float(d), -3 * tol),
                      f"3x the tolerance ({tol:.3%}) away")]


def _miss_coeff(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.digits == 0 or n.bare_pow:
        return []
    f = rng.choice([2, 3])
    new = n.digits * f
    mant = Decimal(n.mant_text) * f
    text = format(mant, "f") + (f" \\times 10^{{{n.exp10}}}" if n.exp10 is not None else "")
    return [Candidate(_box(n, text), ("value", n.value, float(new), -0.5), f"mantissa times {f}")]


def _miss_pow10(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.exp10 is None or n.digits == 0:
        return []
    k = n.exp10 + rng.choice([1, -1])
    text = (f"10^{{{k}}}" if n.bare_pow else f"{n.mant_text} \\times 10^{{{k}}}")
    return [Candidate(_box(n, text), ("value", n.value, float(n.digits.scaleb(k - n.exp10)), -0.5), "power of ten off by one")]


def _miss_sign(slot: Slot, rng: Random) -> list[Candidate]:
    n = slot.number
    if n is None or n.digits == 0 or n.bare_pow:
        return []
    mant = n.mant_text[1:] if n.mant_text.startswith("-") else "-" + n.mant_text
    text = mant + (f" \\times 10^{{{n.exp10}}}" if n.exp10 is not None else "")
    return [Candidate(_box(n, text), ("value", n.value, -n.value, -0.5), "sign flipped")]


def _miss_prefix(slot: Slot, rng: Random) -> list[Candidate]:
    found = _prefixable(slot)
    if found is None:
        return []
    n, unit, i = found
    f = unit[i]
    p = rng.choice([q for q in _prefix_options(f) if abs(PREFIXES.get(q, 0) - PREFIXES.get(f.prefix, 0)) >= 3] or [""])
    if p == f.prefix:
        return []
    dst = [*unit[:i], Factor(p, f.base, f.exp), *unit[i + 1:]]
    vt = _plain(n.digits) if n.exp10 is None else format_number(n.digits, n.sig, "times")
    wrong = convert(n.value, dst, unit)
    return [Candidate(_box(n, vt, unit_latex(dst, rng.randrange(4))), ("value", n.value, wrong, -0.5), f"prefix {f.prefix or '-'} -> {p or '-'} without rescaling")]


_NVQ = frozenset({"NV", "EQ", "EX"})


def _t(name: str, family: str, label: bool, fn, doc: str, types: frozenset[str] = _NVQ) -> Transformation:  # noqa: ANN001
    return Transformation(name, family, label, types, fn, doc)


NUMBERS: tuple[Transformation, ...] = (
    _t("num:sci", "number", True, _sci, "scientific notation (\\times, \\cdot, tight)"),
    _t("num:e", "number", True, _e_notation, "e notation (3e8, 3E+08)"),
    _t("num:plain", "number", True, _plain_form, "a power of ten written out as a plain decimal"),
    _t("num:thousands", "number", True, _thousands, "thousands separators (, {,} \\,)"),
    _t("num:more-digits", "number", True, _more_precise, "more digits that round to the gold at its precision"),
    _t("num:3sf", "number", True, _fewer_digits, "the gold rounded to 3 significant figures (within 1%)"),
    _t("num:trailing-zeros", "number", True, _trailing_zeros, "trailing zeros added"),
    _t("num:fraction", "number", True, _fraction, "an exact decimal written as a fraction"),
    _t("num:rounding", "number", True, _careful, "a careful value that rounds to a 1-2 significant-figure gold, beyond 1-2%"),
    _t("unit:prefix", "unit", True, _unit_prefix, "another SI prefix, value rescaled (pint)"),
    _t("unit:equivalent", "unit", True, _unit_equivalent, "an equivalent unit (J = N m, eV in J, ...) (pint)"),
    _t("unit:angle", "unit", True, _unit_angle, "degrees <-> radians (pint)"),
    _t("unit:style", "unit", True, _unit_style, "the unit restyled, or a stated unit written out"),
    _t("words:approx", "words", True, _words("approx"), "\\approx / ≈ before the value"),
    _t("words:about", "words", True, _words("about"), "'about' / 'approximately' before the value"),
    _t("words:count-noun", "words", True, _words("noun"), "a count noun after a unitless value"),
    _t("miss:tolerance", "near-miss", False, _miss_tolerance, "the value 3x the documented tolerance away"),
    _t("miss:rounding", "near-miss", False, _miss_rounding, "a value that rounds to the next value at the gold's precision (11.6 for 11)"),
    _t("miss:coeff", "near-miss", False, _miss_coeff, "the mantissa doubled or tripled"),
    _t("miss:exponent", "near-miss", False, _miss_pow10, "the power of ten off by one"),
    _t("miss:sign", "near-miss", False, _miss_sign, "the sign flipped"),
    _t("miss:unit-prefix", "near-miss", False, _miss_prefix, "a wrong unit prefix, value not rescaled"),
)
"""The number, unit and word transformations, in table order."""
