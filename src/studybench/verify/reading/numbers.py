r"""Numbers as written: scientific notation, fractions, percent, degrees, and the unit text after them.

:func:`parse_quantity` reads one numeric answer written in LaTeX - ``3\times10^{8}``,
``3\cdot 10^8``, ``3e8``, ``\frac{1}{2}``, ``-0.5``, ``98.5\%``, ``45^\circ``, ``51^{\circ}5'``,
``10^{4}`` - with an optional left side (``v =``, ``y \approx``) and an optional trailing unit
(``\,\mathrm{km\,s^{-1}}``, ``\text{ eV}``), with the precision it is written to
(:func:`written_resolution`). It is a small hand-written scanner: no eval, no SymPy, no pint, linear
time, and exponents are capped, so it is safe on untrusted text. Trailing text counts as a unit only
when it is shaped like one (:func:`unit_syntax_ok`; ``2 - 1``, ``2 \text{ or } 3``, ``2e99999`` are
not plain numbers); whether pint reads it is :mod:`studybench.verify.physics.units`' question.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from studybench.answers import split_top_level
from studybench.verify.reading.latex import expand_braceless, join_digit_groups, split_relations
from studybench.verify.reading.unitwords import mixed_units, unit_glyphs

__all__ = [
    "EQ_ONLY",
    "MAX_EXP",
    "ODD_TEXT_GROUP",
    "Precision",
    "Quantity",
    "norm_unit",
    "parse_quantity",
    "plain_value_text",
    "quantity_candidates",
    "strip_value_words",
    "unit_syntax_ok",
    "value_ops",
    "written_precision",
    "written_resolution",
]


MAX_EXP = 400


@dataclass(frozen=True)
class Precision:
    r"""How precisely a number is written: its significant figures (the tolerance policy's input).

    Read by :func:`written_precision`; used by
    :func:`studybench.verify.comparison.tolerance.within_precision`.

    Attributes:
        half_unit: half a unit in the last significant digit, in the value's unit (``11`` -> 0.5,
            ``1.20\times10^{3}`` -> 5, ``1200`` -> 50, ``0.30`` -> 0.005); 0 when the number states
            no digit (a fraction, a bare power of ten, a closed form).
        sig: the significant figures (``1200`` -> 2, ``1.20\times10^{3}`` -> 3, ``0.0106`` -> 3); 0
            when none is stated.
        integer: written as a plain integer (no decimal point, no power of ten): without a unit it is
            a count or an exact ratio.
        ambiguous: an integer with trailing zeros and no decimal point (``500``, ``1200``): the zeros
            may or may not be significant; ``sig`` counts to the last non-zero digit.
    """

    half_unit: float = 0.0
    sig: int = 0
    integer: bool = False
    ambiguous: bool = False


@dataclass(frozen=True)
class Quantity:
    r"""A parsed numeric answer.

    Attributes:
        value: the number (percent kept as written: ``98.5\%`` -> 98.5 with ``percent=True``;
            degrees as written in degrees).
        unit: normalised unit string ("" when none).
        percent: the number carried a ``%`` sign.
        degrees: the number carried ``^\circ``.
        plus_minus: written with ``\pm`` (either sign is accepted).
    """

    value: float
    unit: str = ""
    percent: bool = False
    degrees: bool = False
    plus_minus: bool = False
    resolution: float = 0.0
    r"""Half a unit in the last written decimal place, in the value's unit (``1.537`` -> 0.0005,
    ``2.80\times10^{5}`` -> 500); 0 for integers and fractions."""
    precision: Precision = Precision()
    """The significant figures it is written to (:func:`written_precision`); ``Precision()`` (none
    stated) for computed values, fractions and closed forms."""


# ---------------------------------------------------------------------------------------------
# reading numbers

_CLEAN = [
    (re.compile(r"\$"), " "),
    (re.compile(r"\\(?:left|right|displaystyle|bigl|bigr|big|Big)(?![A-Za-z])"), ""),
    (re.compile(r"\\[dt]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\(?:,|;|:|!| |quad(?![A-Za-z])|qquad(?![A-Za-z]))|~"), " "),
    (re.compile("[\u2248\u2243\u223c]"), r" \\approx "),  # the glyphs of \approx, \simeq, \sim
]

# words a model wraps around a value, before it: hedges ("about", \approx), and "Answer:"
_LEAD_WORD = (
    r"about|approximately|approx\.?|roughly|around|nearly|circa|ca\."
    r"|(?:the\s+)?(?:final\s+)?(?:answer|result)(?:\s+is)?"
)
_LEAD_WORDS = re.compile(
    r"\s*(?:\\(?:text|textrm|mathrm|mbox|textit|textbf)\s*\{\s*(?:" + _LEAD_WORD + r")\s*[:=]?\s*\}"
    r"|(?:" + _LEAD_WORD + r")(?![A-Za-z])\s*:?"
    r"|\\(?:approx|simeq|sim|thickapprox|thicksim)(?![A-Za-z]))\s*",
    re.IGNORECASE,
)
# a comma (or a space: 160\ 000, which math mode prints as one number) between groups of exactly three
# digits: 10,455 and 160,000; 1,5 and 1,23 are no such number
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:(?:,\d{3})+|(?: \d{3})+)(?![\d,])")
_PERCENT_WORD = re.compile(
    r"\\(?:text|mathrm|textrm|mbox)\s*\{\s*(?:percent|per\s*cent|pct)\.?\s*\}|(?:percent|per\s*cent)(?![A-Za-z])",
    re.IGNORECASE,
)


def strip_value_words(t: str) -> str:
    r"""A value without the words a model puts before it: ``\text{about } 0.442``, ``\approx 10.3``, ``Answer: 9``.

    Hedges (about, approximately, approx., roughly, around, nearly, circa, ``\approx``, ``\sim``,
    ``\simeq`` and their glyphs) and an answer label (``Answer``, ``The final answer is``), bare or in
    ``\text{}``. Bounds ("at least", "less than", ``<``) are no hedge and stay.

    Args:
        t: cleaned text of one value.

    Returns:
        ``t`` without those leading words (at most three, one after the other).
    """
    for _ in range(3):
        m = _LEAD_WORDS.match(t)
        if not m or not m.group(0).strip() or m.end() >= len(t):
            break
        t = t[m.end() :]
    return t


def _clean(s: str) -> str:
    s = expand_braceless(s)
    for pat, rep in _CLEAN:
        s = pat.sub(rep, s)
    return s.strip().rstrip(",;").strip()


_SCI_E = re.compile(r"[eE]([+-]?\d{1,4})(?![A-Za-z\d])")
_TIMES = re.compile(r"\s*(?:\\times|\\cdot|\\ast|\*|x|×)\s*10\s*\^\s*(?:\{\s*([+-]?\s*\d{1,4})\s*\}|([+-]?\d))")
_POW10 = re.compile(r"10\s*\^\s*(?:\{\s*([+-]?\s*\d{1,4})\s*\}|([+-]?\d))")
_DEG = re.compile(r"\s*(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree)")
_FRAC = re.compile(r"\\frac\s*\{\s*([^{}]*)\}\s*\{\s*([^{}]*)\}")
# a plain number over a plain number (3/4); not over a power or a product (1/2\times10^{3})
_SLASH = re.compile(r"\s*/\s*(\d{1,40}(?:\.\d{1,40})?)(?![\d.]|\s*(?:\^|\\times|\\cdot|[eE][+-]?\d|\*|/))")


def _scan_number(s: str) -> tuple[float, str] | None:
    """Read a number at the start of ``s``; returns ``(value, rest)``."""
    s = s.lstrip()
    sign = 1.0
    if s.startswith("-"):
        sign, s = -1.0, s[1:].lstrip()
    elif s.startswith("+"):
        s = s[1:].lstrip()
    m = _FRAC.match(s)
    if m:
        a = _scan_number(m.group(1))
        b = _scan_number(m.group(2))
        if a is None or b is None or a[1].strip() or b[1].strip() or b[0] == 0:
            return None
        return sign * a[0] / b[0], s[m.end() :]
    m = _POW10.match(s)
    if m and not re.match(r"10\s*\.?\d", s[:3] + " "):
        e = int((m.group(1) or m.group(2)).replace(" ", ""))
        if abs(e) > MAX_EXP:
            return None
        return sign * 10.0**e, s[m.end() :]
    m = re.match(r"(?:\d+(?:\.\d*)?|\.\d+)", s)
    if not m:
        return None
    text = m.group(0)
    if len(text) > 40:
        return None
    rest = s[m.end() :]
    # digit groups written with thin spaces or braces: 15{,}000 / 15\,000 handled by caller cleaning
    value = float(text)
    md = _SLASH.match(rest)
    if md and float(md.group(1)) != 0:
        return sign * value / float(md.group(1)), rest[md.end() :]  # 1/100000000000000, 3/4
    me = _SCI_E.match(rest)
    if me:
        e = int(me.group(1))
        if abs(e) > MAX_EXP:
            return None
        return sign * value * 10.0**e, rest[me.end() :]
    mt = _TIMES.match(rest)
    if mt:
        e = int((mt.group(1) or mt.group(2)).replace(" ", ""))
        if abs(e) > MAX_EXP:
            return None
        return sign * value * 10.0**e, rest[mt.end() :]
    return sign * value, rest


def norm_unit(u: str) -> str:
    r"""Normalise a unit string: drop wrappers, braces, spaces.

    ``\mu`` -> ``u``, ``\Omega`` -> ``ohm``, ``M_\odot`` -> ``M_sun``, ``R_\oplus`` -> ``R_earth``,
    ``\cdot`` -> a space.
    """
    u = unit_glyphs(u)
    u = re.sub(r"\\(?:mathrm|text|textrm|rm|mbox|operatorname|mathit)(?![A-Za-z])", "", u)
    u = u.replace("\\AA", "angstrom").replace("\\Omega", "ohm").replace("\\sec", "s").replace("\u00b5", "u").replace("\u03bc", "u")
    u = re.sub(r"_\s*\{?\s*\\odot\s*\}?", "_sun", u)
    u = re.sub(r"_\s*\{?\s*\\oplus\s*\}?", "_earth", u)
    u = re.sub(r"\\(?:cdot|times)(?![A-Za-z])", " ", u)
    u = u.replace("\u00b7", " ").replace("\u22c5", " ")
    u = u.replace("{", "").replace("}", "")
    u = re.sub(r"\\mu\s*", "u", u)
    u = re.sub(r"\s+", " ", u).strip().strip(".")
    return u


# letter runs are matched atomically ((?=(X))\N: no backtracking into a run), so the pattern is
# linear; a plain [A-Za-z]+ repeated with optional separators backtracks exponentially
_UNIT_TOKEN = r"\(*(?=(?P<w{n}>[A-Za-z]+))(?P=w{n})(?:_(?=(?P<s{n}>[A-Za-z]+))(?P=s{n}))?(?:\s*\^\s*\(?\s*[+-]?\s*\d{{1,2}}(?:\.\d+)?\s*\)?)?\)*"
_UNIT_SYNTAX = re.compile(
    "(?:" + _UNIT_TOKEN.format(n=0) + ")(?:\\s*[/*]?\\s*(?:" + _UNIT_TOKEN.format(n=1) + "))*"
)
_ARC = re.compile(
    r"(?P<sec>''|\"|\\prime\s*\\prime|\^\s*\{\s*\\prime\s*\\prime\s*\}|\^\s*\{?\s*''\s*\}?)"
    r"|(?P<min>'|\\prime|\^\s*\{?\s*\\prime\s*\}?|\^\s*\{?\s*'\s*\}?)"
)


def unit_syntax_ok(u: str) -> bool:
    """Whether a normalised unit string is shaped like a unit.

    Letter words (``km``, ``M_sun``) with optional integer powers, joined by spaces, ``*`` or ``/``,
    optional parentheses. Digits other than powers, signs, relations and leftover macros are not units
    (``- 1``, ``or 3``, ``e99999``).

    Args:
        u: a normalised unit string.

    Returns:
        Whether it has the shape of a unit (at most 60 characters).
    """
    return bool(u) and len(u) <= 60 and _UNIT_SYNTAX.fullmatch(u) is not None


def parse_quantity(s: str) -> Quantity | None:
    """Parse one numeric answer (a box or a relation's right-hand side) into a :class:`Quantity`.

    A leading left side is *not* removed here; see :func:`quantity_candidates`.

    Args:
        s: the text (untrusted; at most 400 characters are read).

    Returns:
        The quantity, or ``None`` when the text is not a plain number with an optional unit (e.g. it
        contains symbols). Never raises.
    """
    try:
        return _parse_quantity(s)
    except (ValueError, OverflowError, ZeroDivisionError, RecursionError):
        return None


def _parse_quantity(s: str) -> Quantity | None:
    if not isinstance(s, str) or len(s) > 400:
        return None
    t = join_digit_groups(s)
    t = strip_value_words(_clean(t))
    t = _THOUSANDS.sub(lambda m: m.group(0).replace(",", "").replace(" ", ""), t, count=1)
    pm = False
    if t.startswith("\\pm"):
        pm, t = True, t[3:]
    elif t.startswith("\\mp"):
        pm, t = True, t[3:]
    got = _scan_number(t)
    if got is None:
        return None
    value, rest = got
    rest = rest.strip()
    degrees = False
    arc_unit = ""
    md = _DEG.match(rest)
    if md:
        degrees = True
        rest = rest[md.end() :].strip()
        # degrees-minutes(-seconds): 51^\circ 5' or 7^\circ 20'
        mm = re.match(r"(\d+(?:\.\d*)?)\s*(?:'(?!')|\\prime(?![A-Za-z])|\^\s*\{?\s*\\prime\s*\}?)", rest)
        if mm:
            value = value + math.copysign(float(mm.group(1)) / 60.0, value if value else 1.0)
            rest = rest[mm.end() :].strip()
            ms = re.match(r"(\d+(?:\.\d*)?)\s*(?:''|\"|\\prime\s*\\prime|\^\s*\{\s*\\prime\s*\\prime\s*\})", rest)
            if ms:
                value = value + math.copysign(float(ms.group(1)) / 3600.0, value if value else 1.0)
                rest = rest[ms.end() :].strip()
        if rest[:1] in ("C", "F", "K") or rest.startswith(("\\mathrm{C", "\\text{C", "\\mathrm{K", "\\text{K", "\\mathrm C", "\\text{ C", "\\mathrm{F", "\\text{F")):
            degrees = False  # a temperature, the unit carries the meaning
            rest = "deg" + norm_unit(rest)
        elif rest.startswith("/"):
            degrees = False  # an angular rate: 10^\circ/s
            rest = "deg" + rest
    else:
        # arcminutes / arcseconds written with primes: 30' or 12'' or 5' 30''
        ma = _ARC.match(rest)
        if ma:
            if ma.group("sec"):
                arc_unit = "arcsec"
                rest = rest[ma.end() :].strip()
            else:
                rest = rest[ma.end() :].strip()
                ms = re.match(r"(\d+(?:\.\d*)?)\s*(?:''|\"|\\prime\s*\\prime|\^\s*\{\s*\\prime\s*\\prime\s*\})", rest)
                if ms:
                    value = value + math.copysign(float(ms.group(1)) / 60.0, value if value else 1.0)
                    rest = rest[ms.end() :].strip()
                arc_unit = "arcmin"
    if rest.startswith(("^", "_", "!", "(", "[", "\\frac", "\\sqrt", "\\times", "\\cdot", "/", "'")):
        return None  # a power, factorial, product ...: not a plain number
    percent = False
    mw = _PERCENT_WORD.match(rest)
    if mw:
        rest = "%" + rest[mw.end() :]  # 5 percent, 5\text{ per cent}
    if rest.startswith("\\%") or rest.startswith("%"):
        percent = True
        rest = rest[2:] if rest.startswith("\\%") else rest[1:]
        rest = rest.strip()
    compound = value != got[0]  # 51^\circ 5': the written digits are those of the last part
    if not (degrees or arc_unit or percent) and re.search(r"\d", rest):
        mixed = mixed_units(value, rest)  # 2 h 30 min -> 2.5 h
        if mixed is not None:
            (value, rest), compound = mixed, True
    unit = norm_unit(rest)
    if arc_unit:
        if unit:
            return None
        unit = arc_unit
    if unit and not unit_syntax_ok(unit):
        return None  # leftovers that are no unit: "- 1", "or 3", "e99999", "+ x"
    if (degrees or percent) and unit:
        return None  # 45^\circ N, 10\% x: not a plain quantity
    if math.isnan(value) or math.isinf(value):
        return None
    precision = Precision() if compound else written_precision(t, value)
    return Quantity(value, unit, percent, degrees, pm, written_resolution(t, value), precision)


_VALUE_OPS = frozenset({"=", "<", ">", "<=", ">="})


def quantity_candidates(s: str, ops: frozenset[str] = _VALUE_OPS) -> list[Quantity]:
    r"""All numeric values a box states, left to right.

    ``T \approx 328\,K \approx 55^\circ C`` gives two; ``v = 3\times10^8`` gives one; a plain
    number gives one; a bound such as ``B < 0.866\,T`` gives the bound. Segments that are not
    numbers (the left side) are skipped. A trailing parenthetical restatement
    (``245^\circ \; (4.28\,rad)``) is also offered.

    Args:
        s: one box (untrusted; at most 2,000 characters are read).
        ops: the relations that separate values; a prediction is read with ``{"="}`` only
            (:func:`value_ops`), so that ``x > 2`` never states the value 2.

    Returns:
        The quantities, possibly none. Never raises.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return []
    segs, _ = split_relations(_clean(s), ops)
    out: list[Quantity] = []
    for seg in segs:
        q = parse_quantity(seg)
        if q is not None:
            out.append(q)
            continue
        m = re.fullmatch(r"(.*?)\s*\((.*)\)\s*", seg)
        if m:
            head = m.group(1).strip()
            inner = parse_quantity(m.group(2))
            if inner is None:
                continue
            if head in ("", "+"):
                out.append(inner)  # (3 m/s)
            elif head == "-":
                out.append(replace(inner, value=-inner.value))  # -(3 m/s): the sign is part of the value
            else:
                # a restatement such as 245^\circ (4.28 rad) needs a quantity on both sides; 2(a+b)
                # or 2mg(1-\cos\theta) states no number
                q = parse_quantity(head)
                if q is not None:
                    out.extend((q, inner))
    return out


EQ_ONLY = frozenset({"="})


def value_ops(gold: str) -> frozenset[str]:
    """The relations that may separate values in a prediction.

    Args:
        gold: the gold box.

    Returns:
        ``{"="}``, plus an inequality only when the gold states a bound with that relation
        (``x > 2`` does not state the value 2).
    """
    _, found = split_relations(gold, frozenset({"=", "<", ">", "<=", ">="}))
    return EQ_ONLY | frozenset(found)


def plain_value_text(pred: str) -> bool:
    r"""Whether a prediction is one the numeric fallback may evaluate: no prose (``\text{ or }``), no list.

    Args:
        pred: one predicted box.

    Returns:
        ``True`` when it holds no text group, no "or"/"and" and no top-level comma or semicolon.
    """
    if re.search(r"\\(?:text|mbox|textrm|textit|textbf)\s*\{", pred):
        return False
    if re.search(r"(?<![A-Za-z\\])(?:or|and)(?![A-Za-z])", pred):
        return False
    return len(split_top_level(pred)) == 1 and len(split_top_level(pred, ";")) == 1


# signs that trailing letters after a number are a unit, not symbols: a text wrapper, an explicit
# thin space, degrees or an astronomy unit macro (``3\,\mathrm{m/s}``, ``3\,kg``; ``3mg`` is 3mg)



# a \mathrm{...} / \text{...} group holding something that is neither letters nor a number: a unit
# such as \mathrm{/s} or \mathrm{1/s} that symbolic conversion would silently drop
ODD_TEXT_GROUP = re.compile(r"\\(?:mathrm|text|textrm|rm|mbox|operatorname)\s*\{\s*(?![A-Za-z]*\s*\}|[\d.]+\s*\})[^{}]*\}")


# ---------------------------------------------------------------------------------------------
# written precision

_INT_MANTISSA = re.compile(r"\s*(?:\\pm|\\mp)?\s*[+-]?\s*(\d{1,20})(?:[eE][+-]?\d|\s*(?:\\times|\\cdot|\*|\u00d7)\s*10\s*\^)")


_LEAD = re.compile(r"\s*(?:\\pm|\\mp)?\s*[+-]?\s*")
_WRITTEN = re.compile(r"(?P<int>\d*)(?:(?P<point>\.)(?P<frac>\d*))?")
_POWER = re.compile(r"\s*(?:[eE][+-]?\d|(?:\\times|\\cdot|\\ast|\*|\u00d7|x)\s*10\s*\^)")


def written_precision(t: str, value: float) -> Precision:
    r"""The significant figures a number is written to (the tolerance policy's input).

    * a decimal point makes every digit after the first non-zero one significant (``0.0106`` -> 3,
      ``0.30`` -> 2, ``300.`` -> 3), trailing zeros included;
    * a mantissa times a power of ten counts its digits (``1.2\times10^{3}`` and ``1.2e3`` -> 2,
      ``20\times10^{3}`` -> 2);
    * a plain integer counts to its last non-zero digit (``11`` -> 2, ``1200`` -> 2); trailing zeros
      without a decimal point are ambiguous (``500``: 1 or 3?) and marked so;
    * a fraction, a bare power of ten (``10^{5}``) or anything else states none.

    Args:
        t: the number as written (cleaned LaTeX, optionally after ``\pm`` and a sign).
        value: the number's value (its unit's scale: ``2.80\times10^{5}`` -> 2.8e5).

    Returns:
        The :class:`Precision` (``Precision()`` when nothing is stated or the value is 0).
    """
    if value == 0 or not math.isfinite(value):
        return Precision()
    lead = _LEAD.match(t)
    body = t[lead.end() if lead else 0 :]
    if body.startswith("\\frac") or re.match(r"10\s*\^", body):
        return Precision()  # a fraction or a bare power of ten: no digit written
    m = _WRITTEN.match(body)
    if not m or not (m.group("int") or m.group("frac")):
        return Precision()
    ip, frac = m.group("int") or "", m.group("frac") or ""
    rest = body[m.end() :]
    if rest.lstrip().startswith(("/", "\\frac")):
        return Precision()  # 1/3: a fraction
    digits = (ip + frac).lstrip("0")
    if not digits:
        return Precision()
    try:
        mant = float((ip or "0") + "." + (frac or "0"))
    except ValueError:  # pragma: no cover - the pattern only holds digits
        return Precision()
    if m.group("point"):
        # every digit after the first non-zero one is significant, trailing zeros included
        return Precision(abs(value) * 0.5 * 10.0 ** (-len(frac)) / mant, len(digits))
    if _POWER.match(rest):
        # an integer mantissa times a power of ten counts to its last digit (2\times10^{5}, 20e3)
        return Precision(abs(value) * 0.5 / mant, len(digits))
    stripped = digits.rstrip("0")
    zeros = len(digits) - len(stripped)
    return Precision(abs(value) * 0.5 * 10.0**zeros / mant, len(stripped), integer=True, ambiguous=zeros > 0)


def written_resolution(t: str, value: float) -> float:
    r"""Half a unit in the last written digit of a number's leading mantissa, scaled to its value.

    Args:
        t: the number as written (``1.537``, ``2.80\times10^{5}``, ``2\times10^{5}``, optionally after
            ``\pm``).
        value: the number's value.

    Returns:
        The resolution in the value's unit (``1.537`` -> 0.0005, ``2.80\times10^{5}`` -> 500,
        ``2\times10^{5}`` -> 50000); 0 for plain integers (``100``: trailing zeros are ambiguous, a
        count is exact), bare powers of ten and fractions.
    """
    m = re.match(r"\s*(?:\\pm|\\mp)?\s*[+-]?\s*(\d*)\.(\d+)", t)
    if not m:
        mi = _INT_MANTISSA.match(t)
        if not mi or value == 0 or int(mi.group(1)) == 0:
            return 0.0
        # an integer mantissa times a power of ten: significant to its last digit
        return abs(value) * 0.5 / int(mi.group(1))
    try:
        mant = float((m.group(1) or "0") + "." + m.group(2))
    except ValueError:
        return 0.0
    if mant == 0 or value == 0:
        return 0.0
    return abs(value) * (0.5 * 10.0 ** (-len(m.group(2)))) / mant
