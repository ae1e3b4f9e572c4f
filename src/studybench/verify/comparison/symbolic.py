"""Symbolic comparison of SymPy objects and of LaTeX strings (docs/protocol.md section 5, EX).

:func:`sym_equal` decides equality by structure, then numerically at seeded random positive points
(:func:`sample_points`; signed points too when an absolute value is involved), then by
``simplify(a - b) == 0``. :func:`latex_equal` compares two LaTeX strings under every reading pair,
built with one alias table and reconciled by the physical-constant identities
(:mod:`studybench.verify.physics.identities`); a decimal in the prediction is read at its written precision
(:func:`rationalize`, and the bracketing of the gold by the decimals' precision intervals). The
tolerances come from :mod:`studybench.verify.comparison.tolerance`. Worker side: SymPy is imported lazily and
only runs inside sandbox workers.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from typing import Any

from studybench.verify.comparison.tolerance import (
    decimal_half_width,
    rel_close,
    sample_tolerance,
    written_decimals,
    written_tolerance,
)
from studybench.verify.physics.definitions import Definitions
from studybench.verify.physics.identities import reconcile
from studybench.verify.reading.aliasing import EULER_KEY, new_aliases
from studybench.verify.reading.conversion import symbol_keys, to_sympy_readings
from studybench.verify.reading.latex import LatexError

__all__ = [
    "closed_value",
    "euler_reading",
    "evaluate_at",
    "has_abs",
    "has_float",
    "latex_equal",
    "monomial_factor",
    "nonfinite",
    "nonvanishing",
    "rationalize",
    "replace_undef",
    "sample_points",
    "sym_equal",
    "symbol_sort_key",
]


# ---------------------------------------------------------------------------------------------
# sample points

_RNG_SEED = 20240917
_N_POINTS = 6


def replace_undef(expr: Any) -> Any:
    """Replace applied undefined functions ``f(x)`` by plain symbols (named by their printed form).

    Args:
        expr: a SymPy object.

    Returns:
        The object with every applied undefined function replaced (unchanged when there is none).
    """
    import sympy
    from sympy.core.function import AppliedUndef

    undefs = expr.atoms(AppliedUndef) if hasattr(expr, "atoms") else set()
    if not undefs:
        return expr
    # a digest of the printed form, never hash(): string hashes differ between processes (the
    # workers run with their own PYTHONHASHSEED), and the name decides the symbol's sample value
    return expr.xreplace({u: sympy.Symbol(f"F_{zlib.crc32(str(u).encode('utf-8')):08x}_{len(str(u))}") for u in undefs})


def symbol_sort_key(sym: Any) -> tuple[str, str]:
    """A total, process-independent sort key for SymPy symbols: the name, then the full structure.

    Two symbols with one name but different assumptions (``x`` and a positive ``x``) print alike;
    ``sympy.srepr`` tells them apart, so sorting never falls back to set order (which follows the
    process's hash seed).

    Args:
        sym: a SymPy symbol (or any SymPy object).

    Returns:
        ``(str(sym), srepr(sym))``.
    """
    import sympy

    return str(sym), sympy.srepr(sym)


def has_float(*exprs: Any) -> bool:
    """Whether any of the expressions contains a decimal number (a SymPy ``Float``).

    Args:
        *exprs: SymPy objects (others are ignored).

    Returns:
        ``True`` when one of them has a ``Float`` atom.
    """
    import sympy

    return any(bool(e.atoms(sympy.Float)) for e in exprs if hasattr(e, "atoms"))


def sample_points(symbols: list[Any], n: int = _N_POINTS, signed: bool = False) -> list[dict[Any, Any]]:
    """Seeded sample points, one value in [0.3, 2.7] per symbol (physical magnitudes are positive).

    Args:
        symbols: the free symbols to assign.
        n: number of points.
        signed: give each value a random sign too (used when an absolute value is involved, so that
            ``|q|`` never equals ``q``).

    Returns:
        ``n`` substitution dicts; a function of the *set* of symbols only (they are put in
        :func:`symbol_sort_key` order first), the same in every process and for every caller order.
    """
    import sympy

    rng = random.Random(_RNG_SEED)
    ordered = sorted(set(symbols), key=symbol_sort_key)
    pts = []
    for _ in range(n):
        pts.append({s: sympy.Float(round(rng.uniform(0.3, 2.7) * (rng.choice((-1, 1)) if signed else 1), 6)) for s in ordered})
    return pts


def has_abs(*exprs: Any) -> bool:
    """Whether any of the expressions contains an absolute value or a sign function.

    Args:
        *exprs: SymPy objects (others are ignored).

    Returns:
        ``True`` when one of them has ``Abs`` or ``sign``.
    """
    import sympy

    return any(hasattr(e, "has") and e.has(sympy.Abs, sympy.sign) for e in exprs)


def evaluate_at(expr: Any, pt: dict[Any, Any]) -> complex | None:
    """The numeric value of an expression at one sample point.

    Args:
        expr: a SymPy expression.
        pt: symbol -> value.

    Returns:
        The complex value (20 digits of evaluation), or ``None`` when it cannot be evaluated or is not
        finite.
    """
    try:
        v = expr.xreplace(pt).evalf(20)
        c = complex(v)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return None
    if not (math.isfinite(c.real) and math.isfinite(c.imag)):
        return None
    return c


def nonfinite(*exprs: Any) -> bool:
    r"""Whether any expression contains nan, zoo or +-oo (``0/0``, ``1/0``, ``0\cdot\infty``).

    Args:
        *exprs: SymPy objects (others are ignored).

    Returns:
        ``True`` when one of them does.
    """
    import sympy

    bad = (sympy.nan, sympy.zoo, sympy.oo, -sympy.oo)
    return any(hasattr(e, "has") and e.has(*bad) for e in exprs)


def _undefined(*exprs: Any) -> bool:
    """Whether any expression contains nan or zoo (never equal to anything)."""
    import sympy

    return any(hasattr(e, "has") and e.has(sympy.nan, sympy.zoo) for e in exprs)


def _fmt(v: complex) -> str:
    return f"{v.real:.6g}" if abs(v.imag) < 1e-12 else f"{v:.4g}"


def closed_value(expr: Any) -> complex | None:
    """The numeric value of a closed SymPy expression.

    Args:
        expr: a SymPy object.

    Returns:
        The complex value, or ``None`` when ``expr`` is no expression, has free symbols or cannot be
        evaluated.
    """
    import sympy

    if not isinstance(expr, sympy.Expr) or expr.free_symbols:
        return None
    return evaluate_at(expr, {})


# ---------------------------------------------------------------------------------------------
# decimals read at their written precision

def _simplest_fraction(v: float, tol: float) -> Any:
    """The fraction with the smallest denominator (at most 100) within ``tol`` of ``v``, else None."""
    import sympy

    for den in range(1, 101):
        num = round(v * den)
        if abs(num / den - v) <= tol:
            return sympy.Rational(num, den)
    return None


def rationalize(expr: Any, text: str) -> Any:
    """Read the decimals of a symbolic prediction as simple fractions within their written precision.

    ``0.33`` -> 1/3, ``1.5`` -> 3/2, ``2.1`` -> 21/10 (never 2): the fraction with the smallest
    denominator (at most 100) within :func:`studybench.verify.comparison.tolerance.decimal_half_width`. Decimals
    with no such fraction (``0.9945`` for 180/181) stay floats and are compared at their written
    precision (:func:`studybench.verify.comparison.tolerance.written_tolerance`).

    Args:
        expr: the prediction as a SymPy object.
        text: the prediction's LaTeX (for the written precision of each decimal).

    Returns:
        The expression with the decimals replaced.
    """
    import sympy

    floats = expr.atoms(sympy.Float) if hasattr(expr, "atoms") else set()
    if not floats:
        return expr
    places = written_decimals(text)
    rep = {}
    for f in floats:
        v = float(f)
        d = places.get(round(abs(v), 9))
        if d is None:
            continue
        r = _simplest_fraction(v, decimal_half_width(v, d))
        if r is not None:
            rep[f] = r
    return expr.xreplace(rep) if rep else expr


def _decimals_bracket(gold: Any, pred: Any, text: str) -> bool:
    r"""Whether the prediction's decimals, each read as the interval of its written precision, bracket the gold.

    ``1.414`` is [1.4135, 1.4145]; at every sample point the gold's value must lie between the
    prediction's values at the interval corners. ``\sqrt{2}`` matches ``1.414``; ``\sin 2\varphi``
    never matches ``\sin 2.1\varphi``. At most four decimals.
    """
    import itertools

    import sympy

    if not isinstance(gold, sympy.Expr) or not isinstance(pred, sympy.Expr):
        return False
    places = written_decimals(text)
    floats = sorted(pred.atoms(sympy.Float), key=float)
    if not floats or len(floats) > 4:
        return False
    deltas = []
    for f in floats:
        d = places.get(round(abs(float(f)), 9))
        if d is None:
            return False
        # written precision, but never more than 2% of the decimal (0.2 is no rounding of 1/4)
        deltas.append(decimal_half_width(float(f), d))
    corners = [
        pred.xreplace({f: sympy.Float(float(f) + s * dlt) for f, s, dlt in zip(floats, signs, deltas, strict=True)})
        for signs in itertools.product((-1, 1), repeat=len(floats))
    ]
    syms = sorted(gold.free_symbols | pred.free_symbols, key=symbol_sort_key)
    good = 0
    for pt in sample_points(syms):
        g = evaluate_at(gold, pt)
        vals = [evaluate_at(c, pt) for c in corners]
        if g is None or any(v is None for v in vals) or abs(g.imag) > 1e-9 * max(1.0, abs(g)):
            continue
        reals = [v.real for v in vals if v is not None]
        if any(abs(v.imag) > 1e-9 * max(1.0, abs(v)) for v in vals if v is not None):
            return False
        slack = 1e-12 * max(1.0, abs(g.real))
        if not (min(reals) - slack <= g.real <= max(reals) + slack):
            return False
        good += 1
        if not syms:
            break
    return good >= (1 if not syms else 3)


# ---------------------------------------------------------------------------------------------
# equality

def sym_equal(a: Any, b: Any, tol: float | None = None) -> tuple[bool | None, str]:
    """Whether two SymPy expressions are equal.

    Structural equality, then a numeric check at seeded random positive points
    (:func:`sample_points`), then ``simplify(a - b) == 0`` when the numeric check was inconclusive.
    Matrices are compared entry by entry; nan / zoo never equal anything.

    Args:
        a: the gold expression.
        b: the predicted expression.
        tol: relative tolerance at the sample points; by default
            :func:`studybench.verify.comparison.tolerance.sample_tolerance` (1e-6, or 1% when ``a`` contains a
            decimal number).

    Returns:
        ``(equal, reason)``; ``equal`` is ``None`` when the objects are no expressions or
        simplification failed.
    """
    import sympy
    from sympy.matrices import MatrixBase
    from sympy.matrices.expressions import MatrixExpr

    a = a.as_explicit() if isinstance(a, MatrixExpr) else a
    b = b.as_explicit() if isinstance(b, MatrixExpr) else b
    if isinstance(a, MatrixBase) or isinstance(b, MatrixBase):
        if not (isinstance(a, MatrixBase) and isinstance(b, MatrixBase)) or a.shape != b.shape:
            return False, "matrix against non-matrix or different shapes"
        for x, y in zip(a, b, strict=True):
            ok, why = sym_equal(x, y, tol)
            if not ok:
                return ok, "matrix entries: " + why
        return True, "same matrix"
    if not isinstance(a, sympy.Expr) or not isinstance(b, sympy.Expr):
        return None, "not expressions"
    if _undefined(a, b):
        return False, "undefined value (nan/zoo)"
    if a == b:
        return True, "identical"
    if nonfinite(a) != nonfinite(b):
        return False, "infinite on one side only"
    a, b = replace_undef(a), replace_undef(b)
    if tol is None:
        tol = sample_tolerance(has_float(a))  # decimals in the gold allow 1%; see rationalize
    syms = sorted(a.free_symbols | b.free_symbols, key=symbol_sort_key)
    good = 0
    pts = sample_points(syms) + (sample_points(syms, signed=True) if has_abs(a, b) else [])
    for pt in pts:
        va, vb = evaluate_at(a, pt), evaluate_at(b, pt)
        if va is None or vb is None:
            continue
        if not rel_close(va, vb, tol):
            if not syms:
                return False, f"values differ ({_fmt(vb)} vs {_fmt(va)})"
            return False, "differs at a sample point"
        good += 1
        if not syms:
            break
    if good >= (1 if not syms else 3):
        return True, "numerically equal"
    try:
        d = sympy.simplify(a - b)
        if d == 0 and not nonfinite(d):
            return True, "simplify(a-b)=0"
    except Exception:  # sympy raises many types on odd input
        return None, "simplify failed"
    return False, "not shown equal"


def _sym_pairs(g: str, p: str, definitions: Definitions | None, euler: bool = False) -> list[tuple[Any, Any, list[str], Any]]:
    """Every (gold reading, prediction reading) pair of two LaTeX strings.

    Both are built with one alias table (``euler``: ``e`` read as Euler's number) and reconciled by the
    item's definitions and the constant identities (:func:`studybench.verify.physics.identities.reconcile`).
    Raises LatexError when either side has no reading.
    """
    al = new_aliases(g, p, euler=euler)
    gs = to_sympy_readings(g, al, gold=True)
    ps = to_sympy_readings(p, al)
    out = []
    for ge in gs:
        for pe in ps:
            a, b, applied = reconcile([ge], [pe], al, definitions=definitions)
            out.append((a[0], b[0] if has_float(a[0]) else rationalize(b[0], p), applied, b[0]))
    return out


def euler_reading(*texts: str) -> bool:
    r"""Whether two texts may also be compared with ``e`` read as Euler's number.

    The verifier reads ``e`` as a symbol (the elementary charge) unless it is raised to a power that
    holds a symbol (:class:`studybench.verify.reading.aliasing.Aliaser`). Both readings are tried, the
    same reading for both sides, only when every text uses that symbol ``e`` and none writes a decimal:
    then ``e`` is one unknown on both sides, and a match under either reading is a match of the same
    function of ``e`` (a decimal such as 7.389 could otherwise stand for ``e^2``).

    Args:
        *texts: the LaTeX of both sides.

    Returns:
        Whether the Euler reading is tried too. Never raises.
    """
    if any(re.search(r"\d\.\d|(?<![\d.])\.\d", t) for t in texts):
        return False
    return all(EULER_KEY in (symbol_keys(t) or ()) for t in texts)


def latex_equal(a: str, b: str, tol: float | None = None, *, definitions: Definitions | None) -> tuple[bool | None, str]:
    """SymPy equality of two LaTeX strings under any pair of their readings.

    Both sides share one alias table (every symbol must correspond) and are reconciled by the item's
    definitions and the physical-constant identities; a prediction's decimals are read at their
    written precision. ``e`` is read as :func:`euler_reading` says (one reading for both sides at a time).

    Args:
        a: the gold LaTeX.
        b: the predicted LaTeX.
        tol: overrides the relative tolerance of :func:`sym_equal`.
        definitions: the verification's definitions (:class:`studybench.verify.physics.definitions.Definitions`),
            or ``None``.

    Returns:
        ``(equal, reason)``; ``equal`` is ``None`` when a side cannot be converted (the reason says
        why) or no reading pair could be decided.
    """
    try:
        pairs = _sym_pairs(a, b, definitions)
    except LatexError as e:
        return None, str(e)
    res = _first_equal(pairs, b, tol)
    if res[0] is not True and euler_reading(a, b):
        try:
            euler = _first_equal(_sym_pairs(a, b, definitions, euler=True), b, tol)
        except LatexError:
            return res
        if euler[0] is True:
            return True, euler[1] + " (e read as Euler's number on both sides)"
    return res


def _first_equal(pairs: list[tuple[Any, Any, list[str], Any]], b: str, tol: float | None) -> tuple[bool | None, str]:
    """The first reading pair that is equal (:func:`sym_equal`, the written precision), else the last reason."""
    res: tuple[bool | None, str] = (False, "not equal")
    for x, y, applied, y_raw in pairs:
        t = tol if tol is not None else (None if has_float(x) or not has_float(y) else written_tolerance(b))
        if tol is None and not has_float(x) and has_float(y_raw) and _decimals_bracket(x, y_raw, b):
            return True, "the gold lies within the prediction's written precision" + (f" (using {', '.join(applied)})" if applied else "")
        ok, why = sym_equal(x, y, t)
        if ok:
            return True, why + (f" (using {', '.join(applied)})" if applied else "")
        res = (ok, why)
    return res


# ---------------------------------------------------------------------------------------------
# nonzero factors

def _monomial(x: Any) -> bool:
    """A product of nonzero numbers, symbols and function values with numeric powers (no sum at the top).

    Such a factor cannot vanish for generic positive symbols.
    """
    import sympy

    if x.is_number:
        return bool(x != 0) and x.is_finite is not False
    if x.is_Symbol:
        return True
    if x.is_Pow:
        if x.exp.is_Rational and not x.exp.is_Integer:
            return True  # a root such as sqrt(1 - v^2/c^2): nonzero wherever it is defined
        return _monomial(x.base) and x.exp.is_number
    if x.is_Mul:
        return all(_monomial(a) for a in x.args)
    if isinstance(x, sympy.Function) and not isinstance(x, sympy.Abs):
        return True
    return False


def nonvanishing(x: Any) -> bool:
    """Whether a SymPy expression is a factor that cannot vanish for generic positive symbols.

    A product of nonzero numbers, symbols, function values and roots with numeric powers (no sum at the
    top): the factors :func:`monomial_factor` allows.

    Args:
        x: a SymPy expression.

    Returns:
        Whether it is such a product. Never raises.
    """
    try:
        return _monomial(x)
    except Exception:  # sympy raises many types
        return False


def _factors_allowed(q: Any, allowed: set[Any] | None) -> bool:
    """Every multiplicative factor of ``q`` is a number or uses only ``allowed`` symbols."""
    import sympy

    if allowed is None:
        return True
    num, den = sympy.fraction(q)
    for part in (num, den):
        for f in sympy.Mul.make_args(part):
            if f.free_symbols and not f.free_symbols <= allowed:
                return False
    return True


def monomial_factor(dg: Any, dp: Any, forbidden: Any = (), allowed: set[Any] | None = None) -> bool:
    """Whether two equation differences differ by a nonzero monomial factor.

    ``dg / dp`` must simplify to a monomial free of ``forbidden`` symbols and built only from
    ``allowed`` symbols (when given): the two equations then differ by a nonzero factor such as
    ``2m`` or ``T`` that clears a denominator, never by a factor that can vanish such as ``x`` in
    ``x(x^2 + y^2) = x R^2``.

    Args:
        dg: the gold's ``lhs - rhs``.
        dp: the prediction's ``lhs - rhs``.
        forbidden: symbols the factor may not contain (the gold's isolated left side).
        allowed: the only symbols the factor may be built from, or ``None`` for any.

    Returns:
        Whether such a factor exists. Never raises.
    """
    import sympy

    try:
        ratio = dg / dp
        roots = sorted(
            {a for a in ratio.atoms(sympy.Pow) if a.exp.is_Rational and not a.exp.is_Integer and a.base.free_symbols},
            key=sympy.default_sort_key,
        )
        # roots become opaque generators, so that sqrt(1 - v^2/c^2) cancels as a factor
        variants = [ratio]
        if roots:
            variants.append(ratio.xreplace({r: sympy.Symbol(f"_root{i}", positive=True) for i, r in enumerate(roots)}))
        for r in variants:
            q = sympy.cancel(sympy.together(r))
            if forbidden and q.free_symbols & set(forbidden):
                continue
            num, den = sympy.fraction(q)
            if _monomial(num) and _monomial(den) and _factors_allowed(q.xreplace({v: k for k, v in zip(roots, [sympy.Symbol(f"_root{i}", positive=True) for i in range(len(roots))], strict=True)}) if roots else q, allowed):
                return True
        return False
    except Exception:  # sympy raises many types
        return False
