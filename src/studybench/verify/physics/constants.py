r"""Named physical constants given numerically (docs/protocol.md section 5, NV).

A gold such as ``\frac{2GM_\odot}{c^2}`` is symbolic, but every symbol in it is a constant, so it
states a number with a unit (2953 m); :func:`constant_value` evaluates such an expression with CODATA
2018 values (SI) and tracks its dimension in SI base units, so that a numeric prediction
(``2.95\times10^{3}\,\mathrm{m}``, ``2.95\,\mathrm{km}``) is compared by the NV rules. Only when
*every* symbol is a constant of :data:`CONSTANTS`; letters that are as often variables (``e``, which
the parser reads as Euler's number, ``R``, ``g``, ``k``, ``q``) are not constants here. Worker side
(SymPy objects from :func:`studybench.verify.reading.conversion.to_sympy`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CONSTANTS", "constant_value"]

_BASE = ("m", "kg", "s", "A", "K", "mol")

CONSTANTS: dict[str, tuple[float, tuple[float, ...]]] = {
    # key (aliasing key): (SI value, powers of m, kg, s, A, K, mol)
    "c": (299792458.0, (1, 0, -1, 0, 0, 0)),
    "G": (6.67430e-11, (3, -1, -2, 0, 0, 0)),
    "h": (6.62607015e-34, (2, 1, -1, 0, 0, 0)),
    "\\hbar": (1.054571817e-34, (2, 1, -1, 0, 0, 0)),
    "k_{B}": (1.380649e-23, (2, 1, -2, 0, -1, 0)),
    "m_{e}": (9.1093837015e-31, (0, 1, 0, 0, 0, 0)),
    "m_{p}": (1.67262192369e-27, (0, 1, 0, 0, 0, 0)),
    "m_{n}": (1.67492749804e-27, (0, 1, 0, 0, 0, 0)),
    "N_{A}": (6.02214076e23, (0, 0, 0, 0, 0, -1)),
    "\\epsilon_{0}": (8.8541878128e-12, (-3, -1, 4, 2, 0, 0)),
    "\\mu_{0}": (1.25663706212e-6, (1, 1, -2, -2, 0, 0)),
    "\\sigma": (5.670374419e-8, (0, 1, -3, 0, -4, 0)),
    "a_{0}": (5.29177210903e-11, (1, 0, 0, 0, 0, 0)),
    "\\mu_{B}": (9.2740100783e-24, (2, 0, 0, 1, 0, 0)),
    "k_{e}": (8.9875517923e9, (3, 1, -4, -2, 0, 0)),
    "M_{\\odot}": (1.98847e30, (0, 1, 0, 0, 0, 0)),
    "R_{\\odot}": (6.957e8, (1, 0, 0, 0, 0, 0)),
    "L_{\\odot}": (3.828e26, (2, 1, -3, 0, 0, 0)),
    "M_{\\oplus}": (5.9722e24, (0, 1, 0, 0, 0, 0)),
    "R_{\\oplus}": (6.371e6, (1, 0, 0, 0, 0, 0)),
}
"""CODATA 2018 values (SI) and IAU nominal solar / Earth values, by aliasing key."""


class _NotConstant(Exception):
    pass


def _walk(e: Any, names: dict[str, str]) -> tuple[float, tuple[float, ...]]:
    import sympy

    zero = (0.0,) * len(_BASE)
    if isinstance(e, sympy.Symbol):
        key = names.get(str(e))
        if key not in CONSTANTS:
            raise _NotConstant(str(e))
        v, d = CONSTANTS[key]
        return v, tuple(float(x) for x in d)
    if e.is_Number or e in (sympy.pi, sympy.E):
        return float(e), zero
    if isinstance(e, sympy.Mul):
        v, d = 1.0, zero
        for a in e.args:
            av, ad = _walk(a, names)
            v, d = v * av, tuple(x + y for x, y in zip(d, ad, strict=True))
        return v, d
    if isinstance(e, sympy.Pow):
        if not e.exp.is_Rational:
            raise _NotConstant("non-rational power")
        bv, bd = _walk(e.base, names)
        p = float(e.exp)
        if bv < 0 and not e.exp.is_Integer:
            raise _NotConstant("root of a negative value")
        return bv**p, tuple(x * p for x in bd)
    if isinstance(e, sympy.Add):
        parts = [_walk(a, names) for a in e.args]
        if any(pd != parts[0][1] for _, pd in parts):
            raise _NotConstant("adds different dimensions")
        return sum(pv for pv, _ in parts), parts[0][1]
    if isinstance(e, sympy.Function) and len(e.args) == 1:
        av, ad = _walk(e.args[0], names)
        if any(ad):
            raise _NotConstant("function of a dimensional value")
        return complex(e.func(sympy.Float(av)).evalf()).real, zero
    raise _NotConstant(type(e).__name__)


def _unit_text(d: tuple[float, ...]) -> str:
    parts = []
    for name, p in zip(_BASE, d, strict=True):
        if abs(p) < 1e-12:
            continue
        pr = round(p, 6)
        parts.append(name if pr == 1 else f"{name}^{int(pr) if pr == int(pr) else pr}")
    return " ".join(parts)


def constant_value(expr: Any, names: dict[str, str]) -> tuple[float, str] | None:
    r"""The SI value and unit of an expression all of whose symbols are named constants.

    Args:
        expr: a SymPy expression (``2 G M_\odot / c^2`` with aliased symbols).
        names: symbol name -> aliasing key (``Aliaser.keys_by_name()``).

    Returns:
        ``(value, unit)`` with the unit in SI base units (``"m"``, ``"kg m^2 s^-1"``, ``""`` when
        dimensionless); ``None`` when the expression has no symbol, a symbol that is not a constant,
        adds different dimensions, or is not finite. Never raises.
    """
    try:
        if not getattr(expr, "free_symbols", None):
            return None
        v, d = _walk(expr, names)
    except (_NotConstant, TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if not math.isfinite(v) or v == 0:
        return None
    return v, _unit_text(d)
