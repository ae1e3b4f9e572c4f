r"""Numbers, scientific notation and units (PROTOCOL.md section 5, NV).

:func:`parse_quantity` reads one numeric answer written in LaTeX - ``3\times10^{8}``,
``3\cdot 10^8``, ``3e8``, ``\frac{1}{2}``, ``-0.5``, ``98.5\%``, ``45^\circ``, ``51^{\circ}5'``,
``10^{4}`` - with an optional left side (``v =``, ``y \approx``) and an optional trailing unit
(``\,\mathrm{km\,s^{-1}}``, ``\text{ eV}``). It is a small hand-written scanner: no eval, no
SymPy, linear time, and exponents are capped, so it is safe on untrusted text.
:func:`compare_quantities` compares two parsed quantities by the NV rules (signs, ``\pm``, percent,
units) within the tolerance policy of :mod:`studybench.verify.comparison.tolerance`.

Units: trailing text counts as a unit only when it is shaped like one (:func:`unit_syntax_ok`;
``2 - 1``, ``2 \text{ or } 3``, ``2e99999`` are not plain numbers) and, for a prediction, only
when pint (plus a few astronomy units: ``M_\odot``, ``R_\oplus``, ``mag``, ``AU``, ``Jy``) reads it
and it is no constant or lone variable letter (:func:`is_unit`; ``2R``, ``2i`` are rejected).
:func:`convert_unit` converts with pint, treating angles as a dimension (``rad/s`` never equals
``Hz``; degrees, arcminutes, arcseconds and radians convert among themselves). The unit of a unitless
gold comes from the ``gold_unit`` hint (:func:`split_hints`, :func:`hint_unit`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from studybench.answers import split_top_level
from studybench.verify.comparison.tolerance import close_enough, written_resolution
from studybench.verify.reading.latex import (
    expand_braceless,
    join_digit_groups,
    norm_string,
    norm_text,
    split_relations,
)
from studybench.verify.reading.unitwords import mixed_units, turn_count, unit_glyphs, unit_phrases

__all__ = [
    "EQ_ONLY",
    "ODD_TEXT_GROUP",
    "Quantity",
    "compare_quantities",
    "convert_unit",
    "count_noun",
    "dimensionless",
    "effective_unit",
    "hint_unit",
    "is_unit",
    "parse_quantity",
    "plain_quantity",
    "plain_value_text",
    "quantity_candidates",
    "same_unit",
    "split_hints",
    "split_unit_suffix",
    "unit_syntax_ok",
    "value_ops",
]


MAX_EXP = 400


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


# ---------------------------------------------------------------------------------------------
# reading numbers

_CLEAN = [
    (re.compile(r"\$"), " "),
    (re.compile(r"\\(?:left|right|displaystyle|bigl|bigr|big|Big)(?![A-Za-z])"), ""),
    (re.compile(r"\\[dt]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\(?:,|;|:|!| |quad(?![A-Za-z])|qquad(?![A-Za-z]))|~"), " "),
]


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


def _norm_unit(u: str) -> str:
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
    t = _clean(t)
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
            rest = "deg" + _norm_unit(rest)
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
    if rest.startswith("\\%") or rest.startswith("%"):
        percent = True
        rest = rest[2:] if rest.startswith("\\%") else rest[1:]
        rest = rest.strip()
    if not (degrees or arc_unit or percent) and re.search(r"\d", rest):
        value, rest = mixed_units(value, rest) or (value, rest)  # 2 h 30 min -> 2.5 h
    unit = _norm_unit(rest)
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
    return Quantity(value, unit, percent, degrees, pm, written_resolution(t, value))


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
_UNIT_MARK = re.compile(
    r"\\(?:mathrm|text|textrm|rm|mbox|operatorname)\s*\{|\\[,;: ]|~|\\quad(?![A-Za-z])|\\circ|\u00b0|\\odot|\\oplus|\\AA|\\Omega"
)


def plain_quantity(s: str, ops: frozenset[str] = EQ_ONLY) -> Quantity | None:
    r"""The one quantity a text states when it is nothing but a number with an optional real unit.

    EX and EQ use the NV rules only then.

    Args:
        s: one box or one side of a relation.
        ops: the relations that separate values (:func:`value_ops`).

    Returns:
        The quantity; ``None`` when anything symbolic remains: brackets, operators, functions, or
        trailing letters that are no unit or are written as a product of symbols (``2mg``,
        ``\frac{180}{181}c``, ``\frac43 T``).
    """
    qs = quantity_candidates(s, ops)
    if len(qs) != 1:
        return None
    q = qs[0]
    if q.unit and not (is_unit(q.unit, upright=_upright_unit(s, q.unit)) and _UNIT_MARK.search(s)):
        return None
    return q


def _upright_unit(s: str, unit: str) -> bool:
    r"""Whether ``unit`` is written upright in ``s`` (``\mathrm{G}``, ``\text{ T}``)."""
    return re.search(r"\\(?:mathrm|text|rm|textrm|mbox)\s*\{\s*" + re.escape(unit) + r"\s*\}", s) is not None


# a \mathrm{...} / \text{...} group holding something that is neither letters nor a number: a unit
# such as \mathrm{/s} or \mathrm{1/s} that symbolic conversion would silently drop
ODD_TEXT_GROUP = re.compile(r"\\(?:mathrm|text|textrm|rm|mbox|operatorname)\s*\{\s*(?![A-Za-z]*\s*\}|[\d.]+\s*\})[^{}]*\}")


# ---------------------------------------------------------------------------------------------
# units (pint)

_UREG: Any = None
_CONSTANTS: frozenset[str] = frozenset()
_UNIT_SAFE = re.compile(r"[A-Za-z][A-Za-z0-9_ ^/\-*().]*")
# units pint lacks (astronomy) or spells differently; defined on first use
_EXTRA_UNITS = (
    "M_sun = 1.98847e30 * kilogram = M_solar",
    "R_sun = 6.957e8 * meter = R_solar",
    "L_sun = 3.828e26 * watt = L_solar",
    "M_earth = 5.9722e24 * kilogram",
    "R_earth = 6.371e6 * meter",
    "M_jup = 1.89813e27 * kilogram = M_J",
    "R_jup = 7.1492e7 * meter = R_J",
    "jansky = 1e-26 * watt / meter ** 2 / hertz = Jy",
    "mag = [astronomical_magnitude] = magnitude_astro",
    "gauss_si = 1e-4 * tesla",  # pint's gauss is the Gaussian-system unit, not convertible to T
)
# spellings mapped before pint sees them (pint's ``AU`` is the absorbance unit)
_TOKEN_ALIASES = {"AU": "au", "sec": "s", "yrs": "yr", "secs": "s", "hrs": "hr", "mins": "min", "deg": "degree", "cycles": "turn", "gauss": "gauss_si"}
_TOKEN_ALIASES.update({p + "G": p + "gauss_si" for p in ("", "u", "m", "n", "k")})
_TOKEN_ALIASES.update({w: "turn" for w in ("orbit", "orbits", "rotation", "rotations", "oscillation", "oscillations", "cycle")})
# pint knows these symbols, but written alone after a number they are far likelier a variable or a
# constant (2R, 3t, 2e, 4c) than a unit; they count as units only when the gold states a unit
_AMBIGUOUS_TOKENS = frozenset({"R", "k", "c", "e", "G", "M", "P", "a", "b", "B", "d", "t", "u", "l", "E", "I", "Q", "x", "y", "z", "n", "g_0", "h_bar"})
# pint constants that are also ordinary units
_CONSTANT_UNITS_OK = frozenset({"standard_atmosphere"})
# root unit that marks an angle (degree, arcminute, turn ... all reduce to radian; sr to radian**2)
_ANGLE_ROOT = "radian"


def _registry() -> Any:
    global _UREG, _CONSTANTS
    if _UREG is None:
        import os

        import pint

        ureg = pint.UnitRegistry()
        for d in _EXTRA_UNITS:
            try:
                ureg.define(d)
            except Exception:  # already defined in this pint version
                pass
        names: set[str] = set()
        try:
            path = os.path.join(os.path.dirname(pint.__file__), "constants_en.txt")
            with open(path, encoding="utf-8") as f:
                names = set(re.findall(r"(?m)^(\w+)\s*=", f.read()))
        except OSError:
            names = {"speed_of_light", "elementary_charge", "molar_gas_constant", "boltzmann_constant", "planck_constant", "dirac_constant"}
        _CONSTANTS = frozenset(names - _CONSTANT_UNITS_OK)
        _UREG = ureg
    return _UREG


def _pint_unit(u: str) -> str | None:
    if not u or len(u) > 60 or not _UNIT_SAFE.fullmatch(u):
        return None
    v = unit_phrases(u)  # per second, degrees Celsius, degC/m (a difference)
    v = re.sub(r"\^\s*\(?\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*\)?", r"**\1\2", v)
    v = re.sub(r"[A-Za-z]+(?:_[A-Za-z]+)?", lambda m: _TOKEN_ALIASES.get(m.group(0), m.group(0)), v)
    v = re.sub(r"\s*([/*()])\s*", r"\1", v.strip())
    v = re.sub(r"\*\*\+", "**", v)
    v = re.sub(r"\s+", "*", v)
    v = v.replace("***", "**")
    return v


def _parse_units(u: str) -> Any:
    """Pint units of a normalised unit string (magnitude 1), else None. Never raises."""
    v = _pint_unit(u)
    if v is None:
        return None
    try:
        ureg = _registry()
        q = ureg.parse_expression(v)
        if not hasattr(q, "units") or abs(float(q.magnitude) - 1.0) > 1e-12:
            return None
        return q.units
    except Exception:  # pint raises many types on unknown or odd units
        return None


def is_unit(u: str, upright: bool = False) -> bool:
    r"""Whether a normalised unit string is a real unit.

    pint (with a few astronomy units added) parses it, it names no physical constant (``R``, ``k_B``,
    ``c``) and it is not a lone symbol that is likelier a variable (``2R``, ``3t``).

    Args:
        u: a normalised unit string (from :func:`parse_quantity`).
        upright: it was written upright (``\mathrm{G}``), as units are; then a lone letter counts.

    Returns:
        Whether ``u`` is a unit. Never raises.
    """
    if not unit_syntax_ok(u):
        return False
    if u.strip() in _AMBIGUOUS_TOKENS and not upright:
        return False
    units = _parse_units(u)
    if units is None:
        return False
    try:
        names = set(units._units)
    except Exception:  # pragma: no cover - pint internals
        return False
    return not (names & _CONSTANTS)


def _angle_power(units: Any) -> float:
    """Power of radian in the root units (angle 1, solid angle 2, rad/s 1, Hz 0)."""
    ureg = _registry()
    _, root = ureg.get_root_units(units)
    return float(dict(root._units).get(_ANGLE_ROOT, 0))


def convert_unit(value: float, from_unit: str, to_unit: str) -> float | None:
    r"""Convert a value from one unit to another with pint.

    Angles are a dimension here: a unit with an angle (rad, degree, arcmin, arcsec, sr, turn) never
    converts to one without (``rad/s`` is not ``Hz``), while angle units convert among themselves
    (``1^\circ`` = 0.01745 rad). Meant for sandbox workers (pint is loaded lazily).

    Args:
        value: the value in ``from_unit``.
        from_unit: a normalised unit string.
        to_unit: a normalised unit string.

    Returns:
        The value in ``to_unit``; ``None`` when either unit is unknown or not unit-like, or the
        dimensions differ. Never raises.
    """
    a, b = _parse_units(from_unit), _parse_units(to_unit)
    if a is None or b is None:
        return None
    try:
        if _angle_power(a) != _angle_power(b):
            return None
        ureg = _registry()
        out = float(ureg.Quantity(value, a).to(b).magnitude)
    except Exception:  # pint raises many types on unknown or incompatible units
        return None
    return out if math.isfinite(out) else None


def same_unit(a: str, b: str) -> bool:
    """Whether two unit strings are equal after normalisation.

    Args:
        a: a unit string.
        b: another unit string.

    Returns:
        Whether they are written the same way (spaces and markup ignored).
    """
    return norm_string(a).replace(" ", "") == norm_string(b).replace(" ", "")


_NOT_NOUNS = frozenset({
    "or", "and", "to", "times", "more", "less", "than", "about", "approximately", "approx", "per", "of", "at", "least",
    "most", "not", "no", "plus", "minus", "percent", "over", "under", "up", "fewer", "thousand", "thousands", "million",
    "millions", "billion", "billions", "trillion", "hundred", "hundreds", "dozen", "dozens", "squared", "cubed", "halves",
    "half", "thirds", "quarters", "tenths", "hundredths", "ppm", "ppb", "ppt", "pct", "order", "orders", "magnitude",
    "powers", "power", "decades", "factor", "fold", "twice", "thrice", "hence", "so", "with", "without", "each", "only",
})


def count_noun(u: str) -> bool:
    """Whether the trailing words after a count name what is counted (``15 levels``, ``3 bright fringes``).

    Args:
        u: the text after the number.

    Returns:
        ``True`` for one to three lower-case words ending in a plural noun, none of them a hedge,
        operator or scale word (``or more``, ``thousand``, ``squared``).
    """
    words = u.split()
    return (
        1 <= len(words) <= 3
        and all(re.fullmatch(r"[a-z]{3,}", w) and w not in _NOT_NOUNS for w in words)
        and words[-1].endswith("s")
        and not words[-1].endswith(("ss", "ths"))
    )


def dimensionless(u: str) -> bool:
    r"""Whether a unit string is dimensionless with scale 1 (``rad``, ``sr``).

    ``0.5 rad`` may stand for an unlabelled 0.5; ``0.5 mrad``, ``0.5^\circ`` or ``5 ppm`` may not.

    Args:
        u: a normalised unit string.

    Returns:
        Whether the unit is dimensionless with factor 1. Never raises.
    """
    units = _parse_units(u)
    try:
        if units is None or dict(units.dimensionality):
            return False
        ureg = _registry()
        factor, _ = ureg.get_root_units(units)
        return abs(float(factor) - 1.0) < 1e-12
    except Exception:  # pint internals
        return False


_UNIT_GAP = re.compile(r"\\[,;: ]|~|\\q?quad(?![A-Za-z])|\\(?=(?:mathrm|text|rm|textrm|mbox)\s*\{)")


def split_unit_suffix(s: str) -> tuple[str, str]:
    r"""Split the unit from a symbolic answer that ends in an explicitly spaced or upright unit.

    Args:
        s: one answer (``\frac{q}{4\pi\varepsilon_0 r}\,\mathrm{V}``).

    Returns:
        ``(body, unit)``; ``(s, "")`` when there is none. The unit must be one pint reads
        (:func:`is_unit`); a bare trailing letter (``\, a^{-1}``) is a symbol.
    """
    for m in _UNIT_GAP.finditer(s):
        head, tail = s[: m.start()].rstrip(), s[m.end() :].strip()
        if not head or not tail or head.rstrip().endswith(("=", "+", "-", "\\cdot", "\\times")):
            continue
        u = _norm_unit(tail)
        if not u or not is_unit(u):
            continue
        # a bare trailing letter (\\, a^{-1}) is a symbol; a unit is upright or a multi-letter name
        if re.search(r"\\(?:mathrm|text|rm|textrm|mbox)(?![A-Za-z])", tail) or re.match(r"[A-Za-z]{2,}", u):
            return head, u
    return s, ""


# ---------------------------------------------------------------------------------------------
# the gold's unit hint (gold_unit)

_NO_UNIT = {"", "none", "null", "-", "n/a", "dimensionless", "unitless", "1"}


def split_hints(gold_unit: Any, n: int) -> list[str | None]:
    r"""Per-box unit hints from a ``gold_unit`` value (PROTOCOL.md section 5, units).

    Args:
        gold_unit: ``None``, one string, a comma-separated string with one entry per gold box
            (``"\mu\mathrm{m}, \hbar"``; ``None`` / ``\text{None}`` entries mean "no unit"), or a list.
            With one box and several entries the whole string goes to that box (a box listing several
            values); one entry for several boxes goes to each.
        n: the number of gold boxes.

    Returns:
        ``n`` entries (``None`` = no hint); all ``None`` when the entries do not fit. Never raises.
    """
    if gold_unit is None or n <= 0:
        return [None] * max(n, 0)
    if isinstance(gold_unit, (int, float)):
        gold_unit = str(gold_unit)
    try:
        if isinstance(gold_unit, str):
            items: list[Any] = split_top_level(gold_unit)
            if n == 1:
                items = [gold_unit]
        else:
            items = list(gold_unit)
    except Exception:  # a hint of the wrong shape is ignored
        return [None] * n
    out: list[str | None] = []
    for x in items:
        t = str(x).strip() if x is not None else ""
        out.append(None if norm_text(t) in _NO_UNIT else t)
    if len(out) == 1 and n > 1:
        out = out * n
    if len(out) != n:
        return [None] * n
    return out


def hint_unit(hint: str | None) -> tuple[str | None, str | None]:
    r"""Read a unit hint.

    Args:
        hint: one box's unit hint (:func:`split_hints`), or ``None``.

    Returns:
        ``(pint unit, None)`` when pint reads it (``\mu\mathrm{m}``, ``\text{MeV}``, ``Joules per
        Kelvin``), else ``(None, text)`` for a symbolic unit such as ``m_0`` or ``\hbar^2``;
        ``(None, None)`` without a hint.
    """
    if not hint:
        return None, None
    cands = [_norm_unit(re.sub(r"\\[,;: !]|~", " ", hint))]
    words = norm_text(hint)
    if re.fullmatch(r"[a-z ]+", words):
        cands.append(re.sub(r"\s+", "*", words.replace(" per ", "/")))
    for c in cands:
        if c and _parse_units(c) is not None and is_unit(c) or (c and c in ("m", "s", "g") and _parse_units(c) is not None):
            return c, None
    return None, hint


# ---------------------------------------------------------------------------------------------
# comparing quantities (NV rules)

def effective_unit(q: Quantity) -> str:
    r"""The unit a quantity is stated in, with ``^\circ`` read as the unit ``deg``.

    Args:
        q: a parsed quantity.

    Returns:
        The unit string ("" when none).
    """
    if q.degrees:
        return "deg" if not q.unit else "deg " + q.unit
    return q.unit


def compare_quantities(g: Quantity, p: Quantity) -> tuple[bool, str]:
    r"""Compare a predicted quantity with a gold one by the NV rules (PROTOCOL.md section 5).

    * ``\pm`` in the prediction but not in the gold: incorrect (a +- answer states two values);
      both with ``\pm``: magnitudes compared; gold only: the prediction's magnitude.
    * percent: a gold ``98.5\%`` accepts 98.5 or 0.985; a predicted ``10\%`` is 0.1 unless the
      gold is a percentage too.
    * units (``^\circ`` counts as ``deg``): equal strings compare as is; otherwise pint converts
      (angles never to or from non-angles); a prediction whose trailing text is no real unit is not a
      plain number (unless it is a count noun: ``15 levels``); a dimensional unit against a unitless
      nonzero gold is not accepted (the gold's unit is unknown; pass ``gold_unit``).
    * tolerance: :func:`studybench.verify.comparison.tolerance.close_enough` (1% plus half a unit in the gold's
      last written decimal, at most 2%).

    Args:
        g: the gold quantity.
        p: the predicted quantity.

    Returns:
        ``(match, reason)``.
    """
    if p.plus_minus and not g.plus_minus:
        return False, "prediction is a +- pair, gold is one value"
    if g.plus_minus and not p.plus_minus:
        return False, "gold is a +- pair, prediction states one value"
    # a gold 50\% accepts 50 or 0.5, but a predicted percentage must state the same percentage
    gvals = [g.value] + ([g.value / 100.0] if g.percent and not p.percent else [])
    pvals = [p.value / 100.0] if p.percent and not g.percent else [p.value]
    if g.plus_minus:
        gvals = [abs(v) for v in gvals]
        pvals = [abs(v) for v in pvals]
    unit_note = ""
    gu, pu = effective_unit(g), effective_unit(p)
    if pu and not (gu and same_unit(pu, gu)):
        conv = convert_unit(p.value, pu, gu) if gu else None
        if conv is not None:
            pvals = [abs(conv) if g.plus_minus else conv]
            unit_note = f" after {pu}->{gu}"
        elif not is_unit(pu):
            if gu or not count_noun(pu):
                return False, f"not a plain number (leftover {pu[:30]!r})"
            unit_note = f" ({pu!r} read as a count noun)"
        elif gu:
            return False, f"unit mismatch ({pu} vs {gu})"
        elif turn_count(pu):
            unit_note = f" ({pu!r} read as a count)"  # 12 orbits, 3 cycles: a count, not 2 pi rad each
        elif g.value != 0 and not dimensionless(pu):
            # the gold's unit is unknown (no unit in the box, no hint): 9.9 MeV may be 1000x off
            return False, f"gold states no unit; cannot check {pu}"
    for pv in pvals:
        for gv in gvals:
            res = g.resolution * abs(gv / g.value) if g.value else 0.0
            if close_enough(pv, gv, resolution=res):
                err = 0.0 if gv == 0 else abs(pv - gv) / abs(gv)
                return True, f"numeric match (rel. err {err:.2%}){unit_note}"
    return False, f"numeric mismatch ({pvals[0]:.6g} vs {gvals[0]:.6g}){unit_note}"
