"""Numbers, scientific notation, units and the numeric tolerance policy (PROTOCOL.md section 5, NV).

:func:`parse_quantity` reads one numeric answer written in LaTeX - ``3\\times10^{8}``,
``3\\cdot 10^8``, ``3e8``, ``\\frac{1}{2}``, ``-0.5``, ``98.5\\%``, ``45^\\circ``, ``51^{\\circ}5'``,
``10^{4}`` - with an optional left side (``v =``, ``y \\approx``) and an optional trailing unit
(``\\,\\mathrm{km\\,s^{-1}}``, ``\\text{ eV}``). It is a small hand-written scanner: no eval, no
SymPy, linear time, and exponents are capped, so it is safe on untrusted text.

Tolerance policy (:func:`close_enough`): relative error at most 1% of the gold; when the gold is
exactly 0 the prediction must be within 1e-9 in absolute value.

Units (:func:`convert_unit`): a prediction without a unit, or with the same normalised unit
string, is compared as is; otherwise pint converts simple units (``km`` vs ``m``) when both unit
strings consist only of unit-like characters; anything else is a unit mismatch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from studybench.verify.latex import expand_braceless, norm_string, split_relations

__all__ = ["Quantity", "REL_TOL", "ABS_TOL_ZERO", "close_enough", "convert_unit", "parse_quantity", "quantity_candidates"]

REL_TOL = 0.01
"""Relative tolerance of NV comparisons (1% of the gold value)."""

ABS_TOL_ZERO = 1e-9
"""Absolute tolerance when the gold value is exactly zero."""

MAX_EXP = 400


@dataclass(frozen=True)
class Quantity:
    """A parsed numeric answer.

    Attributes:
        value: the number (percent kept as written: ``98.5\\%`` -> 98.5 with ``percent=True``;
            degrees as written in degrees).
        unit: normalised unit string ("" when none).
        percent: the number carried a ``%`` sign.
        degrees: the number carried ``^\\circ``.
        plus_minus: written with ``\\pm`` (either sign is accepted).
    """

    value: float
    unit: str = ""
    percent: bool = False
    degrees: bool = False
    plus_minus: bool = False


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


_NUM = re.compile(r"[+-]?\s*(?:\d+(?:\.\d*)?|\.\d+)")
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
    """Normalise a unit string: drop wrappers, braces, spaces; ``\\mu`` -> ``u``."""
    u = re.sub(r"\\(?:mathrm|text|textrm|rm|mbox|operatorname|mathit)(?![A-Za-z])", "", u)
    u = u.replace("\\mu", "u").replace("\\AA", "AA").replace("\\Omega", "ohm").replace("\\sec", "s")
    u = u.replace("{", "").replace("}", "")
    u = re.sub(r"\s+", " ", u).strip().strip(".")
    return u


def parse_quantity(s: str) -> Quantity | None:
    """Parse one numeric answer (a box or a relation's right-hand side) into a :class:`Quantity`.

    Returns ``None`` when the text is not a plain number with optional unit (e.g. it contains
    symbols). A leading left side is *not* removed here; see :func:`quantity_candidates`.
    Never raises.
    """
    try:
        return _parse_quantity(s)
    except (ValueError, OverflowError, ZeroDivisionError, RecursionError):
        return None


def _parse_quantity(s: str) -> Quantity | None:
    if not isinstance(s, str) or len(s) > 400:
        return None
    t = _clean(s)
    t = re.sub(r"(\d)\{,\}(\d)", r"\1\2", t)
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
    md = _DEG.match(rest)
    if md:
        degrees = True
        rest = rest[md.end() :].strip()
        # degrees-minutes(-seconds): 51^\circ 5' or 7^\circ 20'
        mm = re.match(r"(\d+(?:\.\d*)?)\s*(?:'|\\prime|\^\s*\{?\s*\\prime\s*\}?)", rest)
        if mm:
            value = value + math.copysign(float(mm.group(1)) / 60.0, value if value else 1.0)
            rest = rest[mm.end() :].strip()
            ms = re.match(r"(\d+(?:\.\d*)?)\s*(?:''|\")", rest)
            if ms:
                value = value + math.copysign(float(ms.group(1)) / 3600.0, value if value else 1.0)
                rest = rest[ms.end() :].strip()
        if rest[:1] in ("C", "F", "K") or rest.startswith(("\\mathrm{C", "\\text{C", "\\mathrm{K", "\\text{K", "\\mathrm C", "\\text{ C")):
            degrees = False  # a temperature, the unit carries the meaning
            rest = "deg" + _norm_unit(rest)
    if rest.startswith(("^", "_", "!", "(", "[", "\\frac", "\\sqrt", "\\times", "\\cdot", "/")):
        return None  # a power, factorial, product ...: not a plain number
    percent = False
    if rest.startswith("\\%") or rest.startswith("%"):
        percent = True
        rest = rest[2:] if rest.startswith("\\%") else rest[1:]
        rest = rest.strip()
    unit = _norm_unit(rest)
    if unit and re.search(r"\d", unit.replace("^-", "").replace("^", "")) and not re.fullmatch(r"[A-Za-z ]+(\^-?\d+)?( [A-Za-z]+(\^-?\d+)?)*", unit):
        # digits left over: not a plain quantity (e.g. "2 + 3")
        if not re.fullmatch(r"[A-Za-z/ ^\-\d]+", unit):
            return None
    if unit and re.search(r"[+=<>]|\\(?!AA)", unit):
        return None
    if math.isnan(value) or math.isinf(value):
        return None
    return Quantity(value, unit, percent, degrees, pm)


_VALUE_OPS = frozenset({"=", "<", ">", "<=", ">="})


def quantity_candidates(s: str) -> list[Quantity]:
    """All numeric values a box states, left to right.

    ``T \\approx 328\\,K \\approx 55^\\circ C`` gives two; ``v = 3\\times10^8`` gives one; a plain
    number gives one; a bound such as ``B < 0.866\\,T`` gives the bound. Segments that are not
    numbers (the left side) are skipped. A trailing parenthetical restatement
    (``245^\\circ \\; (4.28\\,rad)``) is also offered. Never raises.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return []
    segs, _ = split_relations(_clean(s), _VALUE_OPS)
    out: list[Quantity] = []
    for seg in segs:
        q = parse_quantity(seg)
        if q is not None:
            out.append(q)
            continue
        m = re.fullmatch(r"(.*?)\s*\((.*)\)\s*", seg)
        if m:
            for part in (m.group(1), m.group(2)):
                q = parse_quantity(part)
                if q is not None:
                    out.append(q)
    return out


def close_enough(pred: float, gold: float, rel_tol: float = REL_TOL) -> bool:
    """NV tolerance policy: ``|pred - gold| <= rel_tol * |gold|``; gold 0 needs ``|pred| <= 1e-9``."""
    if not (math.isfinite(pred) and math.isfinite(gold)):
        return False
    if gold == 0:
        return abs(pred) <= ABS_TOL_ZERO
    return abs(pred - gold) <= rel_tol * abs(gold) * (1 + 1e-12)


_UREG: Any = None
_UNIT_SAFE = re.compile(r"[A-Za-z][A-Za-z0-9 ^/\-*().]*")


def _pint_unit(u: str) -> str | None:
    if not u or len(u) > 60 or not _UNIT_SAFE.fullmatch(u):
        return None
    v = re.sub(r"\^\s*\(?\s*(-?\d+)\s*\)?", r"**\1", u)
    v = re.sub(r"\s+", "*", v.strip())
    v = v.replace("*/*", "/").replace("*/", "/").replace("/*", "/")
    return v


def convert_unit(value: float, from_unit: str, to_unit: str) -> float | None:
    """Convert ``value`` from ``from_unit`` to ``to_unit`` with pint; ``None`` when either unit is
    unknown, not unit-like, or the dimensions differ. Meant for sandbox workers (pint is loaded
    lazily). Never raises."""
    global _UREG
    a, b = _pint_unit(from_unit), _pint_unit(to_unit)
    if a is None or b is None:
        return None
    try:
        if _UREG is None:
            import pint

            _UREG = pint.UnitRegistry()
        q = _UREG.Quantity(value, _UREG.parse_units(a)) if "**" not in a and "*" not in a else value * _UREG.parse_expression(a)
        target = _UREG.parse_units(b) if "**" not in b and "*" not in b else _UREG.parse_expression(b).units
        return float(q.to(target).magnitude)
    except Exception:  # pint raises many types on unknown or incompatible units
        return None


def same_unit(a: str, b: str) -> bool:
    """Unit strings equal after normalisation."""
    return norm_string(a).replace(" ", "") == norm_string(b).replace(" ", "")
