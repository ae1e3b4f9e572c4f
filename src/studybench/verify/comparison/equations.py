r"""Equations compared by their solution sets (docs/protocol.md section 5, EQ).

:func:`equation_equal` decides whether two equations state the same thing: sides swapped, terms moved,
scaled by a constant or by a nonzero factor that clears a written denominator (``2mE = p^2`` for
``E = p^2/2m``; never a factor that can vanish); a gold with a numeric right side compares its left
side and the value by the NV rules; ``x = \pm a`` states both solutions; squared, inverted or solved
for another symbol by :mod:`studybench.verify.comparison.equation_forms`. The EQ rule
(:mod:`studybench.verify.rules.eq`) applies it part by part, the NV rule to a gold such as
``\beta = 1``. Worker side.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from studybench.answers import match_brace
from studybench.verify.comparison.equation_forms import (
    is_proportionality,
    proportional_rule,
    same_linear_solution,
    same_solution_sets,
)
from studybench.verify.comparison.numeric import compare_quantities
from studybench.verify.comparison.parts import match_unordered, same_lhs
from studybench.verify.comparison.symbolic import (
    closed_value,
    evaluate_at,
    has_float,
    latex_equal,
    monomial_factor,
    nonfinite,
    rationalize,
    replace_undef,
    sample_points,
    symbol_sort_key,
)
from studybench.verify.comparison.tolerance import (
    DECIMAL_GOLD_REL_TOL,
    EXACT_REL_TOL,
    rel_close,
    sample_tolerance,
    written_tolerance,
)
from studybench.verify.physics.definitions import Definitions
from studybench.verify.physics.identities import reconcile
from studybench.verify.physics.units import plain_quantity
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import symbol_keys, to_sympy, to_sympy_readings
from studybench.verify.reading.latex import LatexError, norm_string, split_relations
from studybench.verify.reading.numbers import (
    EQ_ONLY,
    ODD_TEXT_GROUP,
    Quantity,
    plain_value_text,
    quantity_candidates,
)
from studybench.verify.reading.prose import split_conditions, strip_remark
from studybench.verify.verdict import RuleResult

__all__ = ["ExpressionRule", "equation_equal"]

ExpressionRule = Callable[[str, str], RuleResult]
"""``expression(gold, pred)``: how two sides that are no equations compare (the EX rule, handed in)."""


def equation_equal(gold: str, pred: str, *, expression: ExpressionRule, definitions: Definitions | None) -> RuleResult:
    r"""Two equations with the same solution set (one answer each; the EQ rule's core).

    A trailing remark is dropped and a stated condition (``\text{ for } r < R``) must match the gold's
    (:func:`studybench.verify.reading.prose.split_conditions`); then ``x = \pm a`` states both
    solutions, a proportionality is compared by its level sets, a gold ending in a value compares the
    left side and the value by the NV rules, and otherwise the two equations must be proportional
    (by a constant or a nonzero factor that clears a written denominator) or have the same solution
    sets. The NV rule uses this too, for a gold such as ``\beta = 1`` stated as ``v = c``.

    Args:
        gold: one gold answer.
        pred: one predicted answer.
        expression: how a gold that is no equation, or a prediction without ``=`` against a gold whose
            left side is one symbol, is compared: the EX rule, handed in by the caller.
        definitions: the verification's definitions, or ``None``.

    Returns:
        ``(match, reason)``.
    """
    gold, pred = strip_remark(gold), strip_remark(pred)
    res = split_conditions(gold, pred)
    if isinstance(res[0], bool):
        return res  # type: ignore[return-value]
    return _eq_plain(res[0], res[1], expression, definitions)


_PM = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")


def _pm_variants(s: str) -> list[str]:
    r"""``x = \pm a`` as the two equations ``x = +a`` and ``x = -a`` (first ``\pm`` only)."""
    m = _PM.search(s)
    if not m:
        return [s]
    plus, minus = ("+", "-") if m.group(0) == "\\pm" else ("-", "+")
    return [s[: m.start()] + plus + s[m.end() :], s[: m.start()] + minus + s[m.end() :]]


def _pm_squared(gold: str, pred: str) -> RuleResult | None:
    r"""``x = \pm a`` against ``x^2 = a^2`` (either side holding the ``\pm``): the same two solutions.

    The ``\pm`` side is squared (``L = \pm R`` becomes ``L^2 = R^2``) and compared with the other equation
    strictly, as proportional equations with no factor in the symbols of ``L`` and no positivity, so a
    dropped sign (``v = \sqrt{2gh}`` against ``v = \pm\sqrt{2gh}``) still fails. ``None`` when this
    form does not apply or does not match.
    """
    for pm_text, plain in ((gold, pred), (pred, gold)):
        if len(_PM.findall(pm_text)) != 1 or _PM.search(plain):
            continue
        segs, _ = split_relations(pm_text, frozenset({"="}))
        psegs, _ = split_relations(plain, frozenset({"="}))
        if len(segs) != 2 or len(psegs) != 2 or not all(x.strip() for x in segs + psegs):
            return None
        m = _PM.match(segs[1].strip())
        if m is None:
            return None
        left, right = f"\\left({segs[0]}\\right)^{{2}}", f"\\left({segs[1].strip()[m.end():]}\\right)^{{2}}"
        try:
            al = new_aliases(left + "=" + right, plain)
            gl, gr = to_sympy(left, al), to_sympy(right, al)
            pl, pr = to_sympy(psegs[0], al), to_sympy(psegs[1], al)
            forbidden = to_sympy(segs[0], al).free_symbols
        except (LatexError, AttributeError):
            return None
        ok, _ = _eq_diff_ratio(gl, gr, pl, pr, forbidden, EXACT_REL_TOL)
        return (True, "both +- solutions match (the equation squared)") if ok else None
    return None


def _eq_plain(gold: str, pred: str, expression: ExpressionRule, definitions: Definitions | None) -> RuleResult:
    """One EQ answer without remark or condition: +- solutions, a valued gold, or proportional equations."""
    if _PM.search(gold) or _PM.search(pred):
        squared = _pm_squared(gold, pred)
        if squared is not None:
            return squared
        # x = \pm a: the two solutions, matched as a set (a prediction must state both)
        gv, pv = _pm_variants(gold), _pm_variants(pred)
        if len(gv) != len(pv) or len(_PM.findall(gold)) > 1 or len(_PM.findall(pred)) > 1:
            return False, "the +- solutions differ"
        res = match_unordered(gv, pv, lambda g, p: _eq_plain(g, p, expression, definitions))
        return (res[0], "both +- solutions match") if res[0] else res
    if is_proportionality(gold) or is_proportionality(pred):
        return proportional_rule(gold, pred)
    gsegs, _ = split_relations(gold, frozenset({"="}))
    psegs, _ = split_relations(pred, frozenset({"="}))
    if len(psegs) == 2 and plain_quantity(psegs[0]) is not None and plain_quantity(psegs[1]) is None:
        psegs = [psegs[1], psegs[0]]  # 64.1^\circ = \varphi: the value written first
    if len(gsegs) < 2 or not gsegs[0]:
        return expression(gold, pred)
    if len(psegs) < 2:
        if _single_atom(gsegs[0]):
            return expression(gold, pred)
        return False, "prediction is not an equation"
    if any(not x for x in psegs):
        return False, "empty side in the prediction"
    gq = plain_quantity(gsegs[-1])
    if gq is not None:
        res = _eq_valued(gsegs, psegs, definitions)
        if res[0] or res[1] != "different left side" or gq.unit:
            return res
        # "m x'' - k x = 0" against "m x'' = k x": the same equation with terms moved
    # symbolic: every link the prediction states must be an equation equivalent to a gold link
    reason = "not equivalent"
    for j in range(1, len(psegs)):
        hit = False
        pending: list[tuple[Any, ...]] = []
        for k in range(1, len(gsegs)):
            try:
                al = new_aliases(gold, pred)
                gl, pl = to_sympy(gsegs[0], al), to_sympy(psegs[0], al)
                grs, prs = to_sympy_readings(gsegs[k], al, gold=True), to_sympy_readings(psegs[j], al)
            except LatexError as e:
                reason = str(e)
                continue
            lhs_syms = gl.free_symbols if _single_atom(gsegs[0]) and hasattr(gl, "free_symbols") else set()
            for gr in grs:
                for pr in prs:
                    (gl2, gr2), (pl2, pr2), applied = reconcile([gl, gr], [pl, pr], al, definitions=definitions)
                    if not has_float(gl2, gr2):
                        pl2, pr2 = rationalize(pl2, pred), rationalize(pr2, pred)
                    t = DECIMAL_GOLD_REL_TOL if has_float(gl2, gr2) else (written_tolerance(pred) if has_float(pl2, pr2) else EXACT_REL_TOL)
                    ok, why = _isolated_sides(gl2, gr2, pl2, pr2, t)
                    if ok is None:
                        ok, why = _eq_diff_ratio(gl2, gr2, pl2, pr2, lhs_syms, t, _written_denominators(al, gold, pred))
                    if not ok and why in _SOLVE_AFTER and len(gsegs) == len(psegs) == 2:
                        pending.append((gl2, gr2, pl2, pr2, next(iter(lhs_syms)) if len(lhs_syms) == 1 else None, t))
                    reason = why + (f" (using {', '.join(applied)})" if applied and ok else "")
                    if ok:
                        hit = True
                        break
                if hit:
                    break
            if hit:
                break
        if not hit and pending:
            hit, reason = _solved_forms(pending, reason)
        if not hit:
            return False, reason if len(psegs) == 2 else f"link {j}: {reason}"
    return True, reason


def _solved_forms(pending: list[tuple[Any, ...]], reason: str) -> tuple[bool, str]:
    """Squared, inverted, solved for another symbol: the same solution set (two reading pairs at most).

    Two equations linear in one shared symbol are decided by its one solution (any number of symbols),
    the others by their solution sets.
    """
    for gl, gr, pl, pr, target, tol in pending[:2]:
        ok, why = same_linear_solution(gl, gr, pl, pr, tol)
        if ok is None:
            ok, why = same_solution_sets(gl, gr, pl, pr, target, tol)
        if ok:
            return True, why
        if ok is False:
            reason = why
    return False, reason


_SOLVE_AFTER = frozenset({
    "pred equation holds where gold does not",
    "gold equation holds where pred does not",
    "equations not proportional",
    "not shown equivalent",
})


# ---------------------------------------------------------------------------------------------
# equations ending in a value

_PI = re.compile(r"\\pi(?![A-Za-z])")


def _pred_value(p: str) -> Quantity | None:
    """The one value a predicted side states: a plain quantity, or a closed form's value."""
    pq = quantity_candidates(p, EQ_ONLY)
    if len(pq) == 1:
        return pq[0]
    if not pq and plain_value_text(p) and not ODD_TEXT_GROUP.search(p):
        try:
            pv = closed_value(to_sympy(p))
        except LatexError:
            return None
        if pv is not None and abs(pv.imag) < 1e-12:
            return Quantity(pv.real)
    return None


def _link_equal(g: str, p: str, definitions: Definitions | None) -> bool:
    """One link of a chained answer (``A = B = C``) against a gold link.

    NV rules when the gold link is a plain quantity, else the same normalised string or SymPy equality.
    """
    gq = plain_quantity(g)
    if gq is not None:
        pq = _pred_value(p)
        return pq is not None and compare_quantities(gq, pq)[0]
    if norm_string(g) == norm_string(p):
        return True
    ok, _ = latex_equal(g, p, definitions=definitions)
    return ok is True


def _eq_valued(gsegs: list[str], psegs: list[str], definitions: Definitions | None) -> RuleResult:
    r"""EQ whose gold ends in a quantity (``T_1 = 279\,K``, ``L = 2v t = 6.4\,cm``).

    The same left side, the prediction's final value matching the gold's by NV rules, and every other
    link the prediction states matching a gold link. Never proportionality (``T_1 = 292.95`` is no
    multiple of a right answer).
    """
    if not same_lhs(gsegs[0], psegs[0], definitions=definitions):
        return False, "different left side"
    gq = plain_quantity(gsegs[-1])
    if gq is None:
        return False, "gold has no value"
    pq = _pred_value(psegs[-1])
    if pq is None:
        return False, "no value on the right side"
    if gq.degrees and not pq.unit and _PI.search(psegs[-1]):
        pq = replace(pq, unit="rad")  # \beta = \pi/3 against \beta = 60^\circ: a closed form with pi is in radians
    ok, why = compare_quantities(gq, pq)
    if not ok:
        return False, why
    for link in psegs[1:-1]:
        if not any(_link_equal(g, link, definitions) for g in gsegs[1:]):
            return False, "an intermediate link does not match"
    return True, why


# ---------------------------------------------------------------------------------------------
# proportional equations

def _single_atom(lhs: str) -> bool:
    r"""A short isolated left side such as ``v``, ``v_0``, ``\omega'``, ``T_{\mathrm{new}}``."""
    try:
        al = new_aliases()
        e = to_sympy(lhs, al)
    except LatexError:
        return False
    import sympy

    return isinstance(e, sympy.Symbol)


def _written_denominators(al: Any, *texts: str) -> set[Any]:
    r"""Symbols written in a denominator (``\frac{..}{DEN}`` or after ``/``) of the LaTeX as typed.

    Read before SymPy cancels anything (``\frac{\Delta V}{V}``), as the shared alias table's symbols.
    """
    import sympy

    keys: set[str] = set()
    for text in texts:
        for m in re.finditer(r"\\[dt]?frac\s*\{", text):
            end = match_brace(text, m.end() - 1)
            if end < 0 or end >= len(text) or text[end] != "{":
                continue
            end2 = match_brace(text, end)
            if end2 > 0:
                keys |= symbol_keys(text[end + 1 : end2 - 1]) or set()
        for m in re.finditer(r"/\s*(\([^()]*\)|\\?[A-Za-z]+(?:_\{[^{}]*\}|_\w)?)", text):
            keys |= symbol_keys(m.group(1)) or set()
    return {sympy.Symbol(al.table[k]) for k in keys if k in al.table}


def _denominator_symbols(*exprs: Any) -> set[Any]:
    """Symbols that appear in a denominator of any of ``exprs``."""
    import sympy

    out: set[Any] = set()
    for e in exprs:
        try:
            den = sympy.fraction(sympy.together(e))[1]
        except Exception:  # sympy raises many types
            continue
        out |= den.free_symbols
    return out


def _isolated_sides(g_l: Any, g_r: Any, p_l: Any, p_r: Any, tol: float) -> tuple[bool | None, str]:
    r"""Both equations solved for the same symbol (``X = f`` and ``X = g``, ``X`` in neither right side).

    Then they are equivalent exactly when ``f`` and ``g`` are equal, and that is what is compared: the
    ratio of ``X - f`` to ``X - g`` is close to 1 wherever ``f`` and ``g`` are small beside the sampled
    ``X`` (``\theta = \arctan[\ldots/1000]`` against ``\ldots/2000``), so it must not decide.

    Returns:
        ``(True, ...)`` equal right sides, ``(False, ...)`` different ones, ``(None, "")`` when the
        equations are not both solved for one symbol (or the sides cannot be evaluated): the ratio decides.
    """
    import sympy

    if not (isinstance(g_l, sympy.Symbol) and g_l == p_l) or not isinstance(g_r, sympy.Expr) or not isinstance(p_r, sympy.Expr):
        return None, ""
    if g_l in g_r.free_symbols or g_l in p_r.free_symbols or nonfinite(g_r, p_r):
        return None, ""
    syms = sorted(g_r.free_symbols | p_r.free_symbols, key=symbol_sort_key)
    seen = 0
    for pt in sample_points(syms, 8):
        a, b = evaluate_at(g_r, pt), evaluate_at(p_r, pt)
        if a is None or b is None or not all(math.isfinite(x) for x in (a.real, a.imag, b.real, b.imag)):
            continue
        seen += 1
        if not rel_close(b, a, tol):
            return False, "right sides differ"
    return (True, "same right side") if seen >= 3 else (None, "")


def _eq_diff_ratio(
    g_l: Any, g_r: Any, p_l: Any, p_r: Any, forbidden: Any = (), tol: float | None = None, extra_allowed: Any = None
) -> tuple[bool | None, str]:
    """Whether ``(g_l - g_r) / (p_l - p_r)`` is a finite nonzero constant, or a nonzero monomial factor.

    The factor may be ``2m`` or ``1/T``, never one containing the ``forbidden`` symbols (the gold's
    isolated left side). Any side that is or contains nan / zoo / +-oo never matches; the ratio must be
    finite and nonzero at every sample point.
    """
    import sympy

    dg = replace_undef(g_l - g_r)
    dp = replace_undef(p_l - p_r)
    if not isinstance(dg, sympy.Expr) or not isinstance(dp, sympy.Expr):
        return None, "not expressions"
    if nonfinite(dg, dp, g_l, g_r, p_l, p_r):
        return False, "equation side not finite"
    if tol is None:
        tol = sample_tolerance(has_float(dg))
    syms = sorted(dg.free_symbols | dp.free_symbols, key=symbol_sort_key)
    ratios = []
    for pt in sample_points(syms, 8):
        a, b = evaluate_at(dg, pt), evaluate_at(dp, pt)
        if a is None or b is None:
            continue
        if abs(b) < 1e-300:
            if abs(a) < 1e-300:
                continue
            return False, "pred equation holds where gold does not"
        r = a / b
        if not (math.isfinite(r.real) and math.isfinite(r.imag)):
            continue
        ratios.append(r)
    if len(ratios) >= 3:
        r0 = ratios[0]
        if abs(r0) < 1e-12:
            return False, "gold equation holds where pred does not"
        if all(rel_close(r, r0, tol) for r in ratios):
            return True, "equations proportional"
        allowed = _denominator_symbols(g_l, g_r, p_l, p_r) | set(extra_allowed or ())
        if all(abs(r) > 1e-12 for r in ratios) and monomial_factor(dg, dp, forbidden, allowed):
            return True, "equations equal up to a nonzero factor (clearing a denominator)"
        return False, "equations not proportional"
    try:
        q = sympy.simplify(dg / dp)
        if q.is_number and q.is_finite is True and q.is_zero is False and not nonfinite(q):
            return True, "equations proportional (simplify)"
    except Exception:  # sympy raises many types
        return None, "simplify failed"
    return False, "not shown equivalent"
