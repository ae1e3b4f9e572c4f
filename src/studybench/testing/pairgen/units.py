r"""Units written in LaTeX, read into factors, converted with pint, printed back.

:func:`parse_unit` reads the unit text of a gold (``\,\mathrm{km/s}``, ``\text{MeV}/c^{2}``,
``\mu\mathrm{m}``, ``^{\circ}``, ``\mathrm{J\,mol^{-1}\,K^{-1}}``) into :class:`Factor` s
(prefix, base symbol, exponent) from a fixed table of symbols, so nothing is guessed: an unknown
word, ``%``, a temperature in degrees Celsius or an ambiguous ``a/b c`` gives ``None``.
:func:`convert` converts a value between two factor lists with pint (quantities built from
attributes of the registry, never from strings); :func:`unit_latex` prints factors in one of
several styles.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["BASES", "PREFIXES", "Factor", "convert", "parse_unit", "unit_latex"]

BASES: dict[str, tuple[str, bool]] = {
    "m": ("meter", True), "g": ("gram", True), "s": ("second", True), "A": ("ampere", True),
    "K": ("kelvin", True), "mol": ("mole", True), "N": ("newton", True), "J": ("joule", True),
    "W": ("watt", True), "Pa": ("pascal", True), "Hz": ("hertz", True), "C": ("coulomb", True),
    "V": ("volt", True), "F": ("farad", True), "H": ("henry", True), "T": ("tesla", True),
    "Wb": ("weber", True), "Ω": ("ohm", True), "eV": ("electron_volt", True), "L": ("liter", True),
    "rad": ("radian", True), "°": ("degree", False), "min": ("minute", False), "h": ("hour", False),
    "yr": ("year", True), "atm": ("standard_atmosphere", False), "bar": ("bar", True), "b": ("barn", True),
    "Å": ("angstrom", False), "u": ("unified_atomic_mass_unit", False), "pc": ("parsec", True),
    "ly": ("light_year", False), "cal": ("calorie", True), "c": ("speed_of_light", False),
}
"""Unit symbol -> (pint registry attribute, whether it takes SI prefixes)."""

PREFIXES: dict[str, int] = {"Y": 24, "Z": 21, "E": 18, "P": 15, "T": 12, "G": 9, "M": 6, "k": 3, "h": 2,
                            "da": 1, "d": -1, "c": -2, "m": -3, "u": -6, "n": -9, "p": -12, "f": -15, "a": -18}
"""SI prefix -> power of ten (``u`` is micro)."""


@dataclass(frozen=True)
class Factor:
    """One unit factor: ``prefix`` + ``base`` to the power ``exp`` (``km^{-1}`` = ``Factor("k", "m", -1)``)."""

    prefix: str
    base: str
    exp: int


_WRAP = re.compile(r"\\(?:mathrm|text|textrm|operatorname|mbox|rm|mathit)\s*\{([^{}]*)\}")
_SEP = re.compile(r"\\[,;:!> ]|\\cdot|\\times|\\quad|~|\*|·|\s+")


def _word(w: str) -> tuple[str, str] | None:
    if w in BASES:
        return "", w
    for p in sorted(PREFIXES, key=len, reverse=True):
        if w.startswith(p) and w[len(p):] in BASES and BASES[w[len(p):]][1]:
            return p, w[len(p):]
    return None


def parse_unit(text: str) -> list[Factor] | None:
    r"""Read a LaTeX unit into factors; ``None`` when any part is not in :data:`BASES` (with prefixes).

    Args:
        text: the unit as written after a number (``\,\mathrm{m\,s^{-1}}``, ``\text{ km/h}``,
            ``^{\circ}``, ``\mu\mathrm{b}``).

    Returns:
        The factors in order, or ``None``. Never raises.
    """
    if not isinstance(text, str) or not text.strip() or len(text) > 120:
        return None
    t = text.strip()
    if re.search(r"\\%|%|\\circ\s*\\?(?:mathrm\s*\{\s*)?[CF]|°\s*[CF]|\\degree\s*[CF]", t):
        return None  # percent, or a temperature in degrees Celsius / Fahrenheit: not a plain factor
    t = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree", " ° ", t)
    t = t.replace("\\mu", " u").replace("μ", "u").replace("µ", "u").replace("\\Omega", "Ω").replace("\\AA", "Å")
    for _ in range(3):
        t = _WRAP.sub(lambda m: " " + m.group(1) + " ", t)
    t = re.sub(r"u\s+(?=[A-Za-zΩ])", "u", t)  # \mu\mathrm{m} -> um
    t = _SEP.sub(" ", t).replace("{", " { ").replace("}", " } ")
    toks = re.findall(r"[A-Za-zΩÅ°]+|\^|-?\d+|[/(){}]|-", t)
    if "".join(toks).replace("-", "") != re.sub(r"[\s-]", "", t):
        return None  # something unread (digits in words, stray symbols)
    out: list[Factor] = []
    i, sign, pending_div = 0, 1, False
    group: list[Factor] | None = None

    def exponent(j: int) -> tuple[int, int]:
        if j < len(toks) and toks[j] == "^":
            if j + 1 < len(toks) and toks[j + 1] == "{":
                if j + 3 < len(toks) and re.fullmatch(r"-?\d+", toks[j + 2]) and toks[j + 3] == "}":
                    return int(toks[j + 2]), j + 4
                if j + 4 < len(toks) and toks[j + 2] == "-" and toks[j + 3].isdigit() and toks[j + 4] == "}":
                    return -int(toks[j + 3]), j + 5
                raise ValueError("bad exponent")
            if j + 1 < len(toks) and re.fullmatch(r"-?\d", toks[j + 1]):
                return int(toks[j + 1]), j + 2
            raise ValueError("bad exponent")
        return 1, j

    try:
        while i < len(toks):
            tk = toks[i]
            if tk == "/":
                if pending_div or not out:
                    return None
                pending_div, sign = True, -1
                i += 1
                continue
            if tk == "(":
                group = []
                i += 1
                continue
            if tk == ")":
                if group is None:
                    return None
                e, i = exponent(i + 1)
                out += [Factor(f.prefix, f.base, f.exp * e * sign) for f in group]
                group, sign = None, 1
                pending_div = False
                continue
            if tk in ("{", "}"):
                i += 1
                continue
            w = _word(tk)
            if w is None:
                return None
            e, i = exponent(i + 1)
            f = Factor(w[0], w[1], e)
            if group is not None:
                group.append(f)
                continue
            if pending_div and sign == 1:
                return None  # a/b c: ambiguous
            out.append(Factor(f.prefix, f.base, f.exp * sign))
            if pending_div:
                sign = 1  # the one factor after '/' is divided
    except ValueError:
        return None
    if group is not None or not out or any(f.exp == 0 for f in out):
        return None
    if any(f.base in ("°", "rad") for f in out) and len(out) > 1 and any(f.base == "°" for f in out):
        return None
    return out


@functools.lru_cache(maxsize=1)
def _registry() -> Any:
    import pint

    return pint.UnitRegistry()


def _pint_unit(factors: list[Factor]) -> Any:
    ureg = _registry()
    unit = ureg.dimensionless
    for f in factors:
        u = getattr(ureg, BASES[f.base][0]) * 10 ** PREFIXES.get(f.prefix, 0) if f.prefix else getattr(ureg, BASES[f.base][0])
        unit = unit * u ** f.exp
    return unit


def convert(value: float, src: list[Factor], dst: list[Factor]) -> float | None:
    """``value`` in ``src`` units expressed in ``dst`` units (pint); ``None`` when the dimensions differ."""
    try:
        q = (value * _pint_unit(src)).to((1 * _pint_unit(dst)).units)
        factor = (1 * _pint_unit(dst)).magnitude
    except Exception:  # noqa: BLE001 - DimensionalityError and friends
        return None
    return float(q.magnitude / factor)


_BASE_TEX = {"Ω": "\\Omega", "Å": "\\AA"}


def _factor_tex(f: Factor, exp: int) -> str:
    if f.base == "°":
        return "^{\\circ}"
    pre = "\\mu " if f.prefix == "u" else f.prefix
    body = pre + _BASE_TEX.get(f.base, f.base)
    return body + (f"^{{{exp}}}" if exp != 1 else "")


def unit_latex(factors: list[Factor], style: int = 0) -> str:
    r"""Factors printed as LaTeX, in one of four styles (``0``-``3``), with the leading space.

    ``0``: ``\,\mathrm{km/s^{2}}``; ``1``: ``\,\mathrm{km\,s^{-2}}``; ``2``: ``\ \text{km}/\text{s}^{2}``;
    ``3``: ``~\mathrm{km} \cdot \mathrm{s}^{-2}``. A degree is ``^{\circ}``, micro ``\mu``.
    """
    if len(factors) == 1 and factors[0].base == "°" and factors[0].exp == 1:
        return "^{\\circ}"
    num = [f for f in factors if f.exp > 0]
    den = [f for f in factors if f.exp < 0]
    if style == 0 and num:
        top = "\\,".join(_factor_tex(f, f.exp) for f in num)
        if not den:
            return f"\\,\\mathrm{{{top}}}"
        bottom = "\\,".join(_factor_tex(f, -f.exp) for f in den)
        return f"\\,\\mathrm{{{top}/{bottom if len(den) == 1 else '(' + bottom + ')'}}}"
    if style == 2 and num:
        def txt(f: Factor, e: int) -> str:
            t = _factor_tex(f, 1)
            return (f"\\text{{{t}}}" if "\\" not in t else f"\\mathrm{{{t}}}") + (f"^{{{e}}}" if e != 1 else "")
        top = " ".join(txt(f, f.exp) for f in num)
        if not den:
            return f"\\ {top}"
        bottom = " ".join(txt(f, -f.exp) for f in den)
        return f"\\ {top}/{bottom if len(den) == 1 else '(' + bottom + ')'}"
    if style == 3:
        return "~" + " \\cdot ".join(f"\\mathrm{{{_factor_tex(f, 1)}}}" + (f"^{{{f.exp}}}" if f.exp != 1 else "") for f in factors)
    return "\\,\\mathrm{" + "\\,".join(_factor_tex(f, f.exp) for f in factors) + "}"
