r"""Units with pint, the ``gold_unit`` hints, and the quantities a text states with a real unit (docs/protocol.md 5).

A prediction's trailing text is a unit only when pint (plus a few astronomy units: ``M_\odot``,
``R_\oplus``, ``mag``, ``AU``, ``Jy``) reads it and it is no constant or lone variable letter
(:func:`is_unit`; ``2R``, ``2i`` are rejected); :func:`plain_quantity` is the one quantity a text
states when it is nothing but a number with such a unit. :func:`convert_unit` converts with pint,
treating angles as a dimension (``rad/s`` never equals ``Hz``; degrees, arcminutes, arcseconds and
radians convert among themselves). The unit of a unitless gold comes from the ``gold_unit`` hint
(:func:`split_hints`, :func:`hint_unit`). The numbers themselves are read by
:mod:`studybench.verify.reading.numbers`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from studybench.answers import split_top_level
from studybench.verify.reading.latex import norm_string, norm_text, split_relations
from studybench.verify.reading.numbers import (
    EQ_ONLY,
    Quantity,
    norm_unit,
    quantity_candidates,
    unit_syntax_ok,
)
from studybench.verify.reading.unitwords import unit_phrases

__all__ = [
    "convert_unit",
    "dimensionless",
    "effective_unit",
    "hint_unit",
    "is_unit",
    "plain_quantity",
    "same_unit",
    "split_hints",
    "split_unit_suffix",
    "state_hint_unit",
    "unit_words",
]


# ---------------------------------------------------------------------------------------------
# units (pint)

_UREG: Any = None
_CONSTANTS: frozenset[str] = frozenset()
_UNIT_SAFE = re.compile(r"\(*[A-Za-z][A-Za-z0-9_ ^/\-*().]*")
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
# constants that are part of a unit beside another unit (particle physics: MeV/c^2, GeV/c)
_UNIT_CONSTANTS = frozenset({"speed_of_light"})
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
    # a power, its own brackets only (s^(-2)); the bracket closing a group stays: J/(K m^3)
    v = re.sub(r"\^\s*(?:\(\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*\)|([+-]?)\s*(\d+(?:\.\d+)?))",
               lambda m: "**" + (m.group(1) or m.group(3) or "") + (m.group(2) or m.group(4)), v)
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
    if len(names) > 1:
        names -= _UNIT_CONSTANTS  # MeV/c^2, GeV/c: c beside another unit is part of the unit
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
        u = norm_unit(tail)
        if not u or not is_unit(u):
            continue
        # a bare trailing letter (\\, a^{-1}) is a symbol; a unit is upright or a multi-letter name
        if re.search(r"\\(?:mathrm|text|rm|textrm|mbox)(?![A-Za-z])", tail) or re.match(r"[A-Za-z]{2,}", u):
            return head, u
    return s, ""


# English words pint also reads as units (inch, technical atmosphere, are ...): words, not units, in text
_WORDS_NOT_UNITS = frozenset({"in", "at", "a", "an", "are", "or", "and", "to", "by", "on", "is", "per", "up", "out", "as"})


def unit_words(words: str) -> bool:
    r"""Whether words written in ``\text{}`` after a value are its unit (``kJ``, ``km``, ``eV``), not a remark.

    Args:
        words: the text of the group (``kJ``; ``upward`` and ``in`` are words).

    Returns:
        Whether it is a unit pint reads (upright: one letter counts, ``\text{ J}``).
    """
    w = norm_unit(words)
    return bool(w) and w.lower() not in _WORDS_NOT_UNITS and is_unit(w, upright=True)


# ---------------------------------------------------------------------------------------------
# the gold's unit hint (gold_unit)

_NO_UNIT = {"", "none", "null", "-", "n/a", "dimensionless", "unitless", "1"}


def split_hints(gold_unit: Any, n: int) -> list[str | None]:
    r"""Per-box unit hints from a ``gold_unit`` value (docs/protocol.md section 5, units).

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


_DEGREE_HINT = re.compile(
    r"\s*(?:\$\s*)?(?:\{\s*\}\s*)?(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\u00b0|\\degree|\\text\s*\{\s*degrees?\s*\}|degrees?|deg)(?:\s*\$)?\s*",
    re.IGNORECASE,
)


def hint_unit(hint: str | None) -> tuple[str | None, str | None]:
    r"""Read a unit hint.

    Args:
        hint: one box's unit hint (:func:`split_hints`), or ``None``.

    Returns:
        ``(pint unit, None)`` when pint reads it (``\mu\mathrm{m}``, ``\text{MeV}``, ``Joules per
        Kelvin``), else ``(None, text)`` for a symbolic unit such as ``m_0`` or ``\hbar^2``;
        ``(None, None)`` without a hint; a degree sign (``^\circ``, ``\degree``, ``°``) is ``deg``.
    """
    if not hint:
        return None, None
    if _DEGREE_HINT.fullmatch(hint):
        return "deg", None  # ^\circ, ^{\circ}, \degree, °, degrees: an angle in degrees
    cands = [norm_unit(re.sub(r"\\[,;: !]|~", " ", hint))]
    words = norm_text(hint)
    if re.fullmatch(r"[a-z ]+", words):
        cands.append(re.sub(r"\s+", "*", words.replace(" per ", "/")))
    upright = re.search(r"\\(?:mathrm|text|textrm|rm|mbox)\s*\{", hint) is not None  # \text{b}: the barn
    for c in cands:
        if c and _parse_units(c) is not None and is_unit(c, upright=upright) or (c and c in ("m", "s", "g") and _parse_units(c) is not None):
            return c, None
    return None, hint


def state_hint_unit(gold: str, hint: str | None) -> str:
    r"""A gold relation whose value states no unit, with the hint's unit written after the value.

    ``T_1 = 77`` with the hint ``\text{K}`` -> ``T_1 = 77\,\mathrm{K}`` (a degree hint writes
    ``^{\circ}``), so that rules comparing the written value (EQ) read it in the hint's unit, as the
    NV rule does.

    Args:
        gold: one gold box (``lhs = value``).
        hint: its unit hint, or ``None``.

    Returns:
        The gold with the unit written; ``gold`` unchanged without a real unit hint, or when the last
        side is no plain number without a unit.
    """
    unit = hint_unit(hint)[0]
    if not unit:
        return gold
    segs, _ = split_relations(gold, EQ_ONLY)
    if len(segs) < 2:
        return gold
    qs = quantity_candidates(segs[-1])
    if len(qs) != 1 or qs[0].unit or qs[0].degrees or qs[0].percent or not re.search(r"\d\s*\}?\s*$", gold):
        return gold
    return gold.rstrip() + ("^{\\circ}" if unit == "deg" else f"\\,\\mathrm{{{unit}}}")


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


# ---------------------------------------------------------------------------------------------
# a number with a real unit

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
