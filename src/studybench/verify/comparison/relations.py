r"""Relations compared as relations: chains of inequalities, their sides and bounds (docs/protocol.md section 5).

:func:`chain_rule` compares a gold that states a relation chain (``R \geq \frac{2GM}{c^2}``,
``a < b < c = d``, ``\lambda \ll d``) with a prediction, link by link, in either reading direction;
the NV, EX and IN rules use it for golds that state a bound. :func:`bound_equal` compares two bounds
(numbers by the NV tolerance, else SymPy) and :func:`positive_multiple` two sides up to a positive
factor. The chains are split by :func:`studybench.verify.reading.latex.relation_chain`. Worker side.
"""

from __future__ import annotations

from typing import Any

from studybench.verify.comparison.symbolic import (
    closed_value,
    evaluate_at,
    has_abs,
    has_float,
    monomial_factor,
    sample_points,
    sym_equal,
    symbol_sort_key,
)
from studybench.verify.comparison.tolerance import close_enough, rel_close, sample_tolerance
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import LatexError, norm_string, relation_chain
from studybench.verify.verdict import RuleResult

__all__ = ["bound_equal", "chain_rule", "positive_multiple"]


def positive_multiple(a: Any, b: Any) -> bool:
    """Whether ``a`` is ``b`` times a positive constant or a positive monomial."""
    import sympy

    if not isinstance(a, sympy.Expr) or not isinstance(b, sympy.Expr):
        return False
    tol = sample_tolerance(has_float(a))
    syms = sorted(a.free_symbols | b.free_symbols, key=symbol_sort_key)
    ratios = []
    for pt in sample_points(syms, 8) + (sample_points(syms, 8, signed=True) if has_abs(a, b) else []):
        x, y = evaluate_at(a, pt), evaluate_at(b, pt)
        if x is None or y is None or abs(y) < 1e-300:
            continue
        ratios.append(x / y)
    if not ratios or (syms and len(ratios) < 3):
        return False
    r0 = ratios[0]
    if abs(r0.imag) < 1e-9 and r0.real > 0 and all(rel_close(r, r0, tol) for r in ratios):
        return True
    # scaled by a positive monomial (both sides multiplied by 4 m^2): positive at every sample
    # point and a product of powers of (positive) symbols
    if not all(abs(r.imag) < 1e-9 and r.real > 0 for r in ratios):
        return False
    if not monomial_factor(a, b):
        return False
    try:
        q = sympy.cancel(sympy.together(a / b))
        return not q.atoms(sympy.Function) and (q.as_coeff_Mul()[0] > 0)
    except Exception:  # sympy raises many types
        return False


def bound_equal(x: Any, y: Any) -> bool:
    r"""Interval bounds equal: numbers by the NV tolerance (``\frac{\sqrt3}{2}`` vs ``0.866``).

    Expressions by :func:`studybench.verify.comparison.symbolic.sym_equal`.
    """
    vx, vy = closed_value(x), closed_value(y)
    if vx is not None and vy is not None and abs(vx.imag) < 1e-12 and abs(vy.imag) < 1e-12:
        return close_enough(vy.real, vx.real)
    return sym_equal(x, y)[0] is True


def _kind_ok(gold: str, pred: str) -> bool:
    r"""Whether a predicted relation kind states the gold's: the same kind, or ``<`` / ``\le`` for ``\lesssim``."""
    return gold == pred or (gold == "lsim" and pred in ("lt", "le"))


def _default_segment_equal(g: str, p: str) -> bool:
    """Two sides of a relation: equal strings, else equal bounds (numbers by NV tolerance, else SymPy)."""
    try:
        al = new_aliases(g, p)
        return bound_equal(to_sympy(g, al), to_sympy(p, al))
    except LatexError:
        return False


def chain_rule(gold: str, pred: str, segment_equal: Any = None) -> RuleResult | None:
    r"""A gold stating a relation chain (``R \geq \frac{2GM}{c^2}``, ``a < b < c = d``), compared as relations.

    The prediction must state a chain with as many links, read left to right or right to left
    (``\frac{2GM}{c^2} \le R``), every link with the same direction and kind, and every link holding
    between the same two sides: both sides equal by ``segment_equal`` (so a swap of two quantities
    inside a chain fails), or the link's ``big - small`` a positive multiple of the gold's (a
    positive constant or a product of powers of the symbols, which are taken positive: ``R c^2 \ge
    2GM``). Kinds: strict (``<``) and non-strict (``\le``) never stand for each other (a bound's
    strictness is part of the answer); ``\ll`` / ``\gg`` only for themselves; a gold
    ``\lesssim`` / ``\gtrsim`` accepts itself and the sharper ``<`` / ``\le``, never the reverse.

    Args:
        gold: one gold answer (no conditions or trailing words).
        pred: one predicted answer.
        segment_equal: ``segment_equal(gold_side, pred_side) -> bool`` or a ``RuleResult``-returning
            callable; default: equal strings or equal bounds (numbers by the NV tolerance).

    Returns:
        ``(match, reason)``, or ``None`` when the gold states no inequality or either side has an
        empty side (``\le 3``; the type's own rule decides).
    """
    gsegs, grels = relation_chain(gold)
    if not any(d != 0 for d, _ in grels) or any(not x for x in gsegs):
        return None
    psegs, prels = relation_chain(pred)
    if not prels:
        return False, "the gold states a relation; the prediction does not"
    if any(not x for x in psegs):
        return None
    readings = [(psegs, prels), (psegs[::-1], [(-d, k) for d, k in prels[::-1]])]
    shaped = [
        (ps, pr) for ps, pr in readings
        if len(pr) == len(grels) and all(gd == pd and _kind_ok(gk, pk) for (gd, gk), (pd, pk) in zip(grels, pr, strict=True))
    ]
    if not shaped:
        if len(prels) != len(grels):
            return False, "a different number of relations in the chain"
        return False, "different relations (direction, strict vs non-strict, or much-less)"
    cmp = segment_equal or _default_segment_equal

    def seg_eq(g: str, p: str) -> bool:
        if norm_string(g) == norm_string(p):
            return True
        r = cmp(g, p)
        return (r[0] is True) if isinstance(r, tuple) else bool(r)

    reason = "the sides of a relation differ"
    for ps, _ in shaped:
        same = [seg_eq(g, p) for g, p in zip(gsegs, ps, strict=True)]
        ok = True
        for k, (gd, _) in enumerate(grels):
            if same[k] and same[k + 1]:
                continue
            if not _link_scaled(gold, pred, (gsegs[k], gsegs[k + 1]), (ps[k], ps[k + 1]), gd):
                ok = False
                reason = f"relation {k + 1} of the chain differs" if len(grels) > 1 else "the sides of the relation differ"
                break
        if ok:
            return True, "same relation" if len(grels) == 1 else f"all {len(grels)} relations of the chain match"
    return False, reason


def _link_scaled(gold: str, pred: str, gl: tuple[str, str], pl: tuple[str, str], direction: int) -> bool:
    """One link ``a R b`` against ``c R d``: ``b - a`` a positive multiple of ``d - c`` (any nonzero multiple for ``=``)."""
    try:
        al = new_aliases(gold, pred)
        ga, gb = to_sympy(gl[0], al), to_sympy(gl[1], al)
        pa, pb = to_sympy(pl[0], al), to_sympy(pl[1], al)
        gdiff, pdiff = gb - ga, pb - pa
    except (LatexError, TypeError):
        return False
    except Exception:  # sympy raises many types on odd objects
        return False
    if direction == 0:
        return positive_multiple(gdiff, pdiff) or positive_multiple(gdiff, -pdiff)
    return positive_multiple(gdiff, pdiff)
