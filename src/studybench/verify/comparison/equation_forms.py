r"""EQ in another but equivalent form: solution sets and proportionality (docs/protocol.md section 5).

:func:`same_solution_sets` decides two equations that are no multiple of each other - squared
(``v^2 = 2gh`` for ``v = \sqrt{2gh}``), inverted (``\theta = \arcsin(n_2/n_1)`` for
``\sin\theta = n_2/n_1``), solved for another symbol (``g = 4\pi^2 L/T^2`` for ``T = 2\pi\sqrt{L/g}``),
exponentiated (``\ln(N/N_0) = -\lambda t`` for ``N = N_0 e^{-\lambda t}``) - by solving both for each
shared symbol with SymPy and comparing the solution sets at seeded sample points.

Assumption policy (the sign of a symbol is never guessed from its name):

* the other symbols are sampled positive (physical magnitudes, as everywhere in the verifier);
* the solved-for symbol is taken positive only when the gold itself says so: every real solution of
  the gold is positive at every sample point, signed points included (``v = \sqrt{2gh}`` makes ``v``
  positive, so ``v^2 = 2gh`` matches; ``x = vt`` does not, so ``x^2 = v^2t^2`` does not);
* a gold whose isolated symbol equals a positive product with a root factor (``\omega_0 =
  \frac{q}{\sqrt{4\pi\epsilon_0 m r^3}}``, ``\omega = [\ldots]^{1/2}``) states magnitudes: the root is
  the principal, positive one, so every symbol is then taken positive, as the sampled symbols are
  (the squared form ``\omega_0^2 = \frac{q^2}{4\pi\epsilon_0 m r^3}`` matches; a flipped sign does not);
* a symbol inside ``\sin``/``\cos``/``\tan`` (either equation) is restricted to the principal range of
  that function's argument (``\sin\theta = k`` states ``\theta = \arcsin k``, not ``\pi - \arcsin k``);
* every symbol both equations can be solved for must give the same set, so a factor that can vanish
  (``PV^2 = nRTV``) or a dropped / extra root fails; a symbol whose only solution is 0 on both sides
  (a common factor, ``\Delta`` of ``\Delta\mu`` read as a product) decides nothing.

:func:`same_linear_solution` decides two equations that are both linear in one symbol (a gold
solved for another symbol, ``m_2 = \ldots``) by that symbol's one solution, whatever the number of
symbols.

:func:`proportional_rule` decides a gold written as a proportionality (``P \propto V^{-5/3}``) or a
conserved quantity (``PV^{5/3} = \text{const}``): two such relations match when their quantities have
the same level sets (parallel gradients at every sample point); a predicted equation with exactly one
symbol the gold lacks (``P = C V^{-5/3}``) is that symbol's level sets. An exact gold never accepts a
bare proportionality. Worker side.
"""

from __future__ import annotations

import math
import re
from typing import Any

from studybench.verify.comparison.symbolic import (
    evaluate_at,
    nonfinite,
    nonvanishing,
    replace_undef,
    sample_points,
    symbol_sort_key,
)
from studybench.verify.comparison.tolerance import rel_close
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import LatexError, split_relations
from studybench.verify.verdict import RuleResult

__all__ = [
    "is_proportionality",
    "proportional_rule",
    "proportionality_gold_check",
    "same_linear_solution",
    "same_solution_sets",
]

_MAX_OPS = 80  # larger equations are not solved (the worker's timeout would be spent for nothing)
_MAX_SYMBOLS = 6  # every shared symbol is tried (a count, never a clock: the verdict is the same on any machine)
_N_POINTS = 8


# ---------------------------------------------------------------------------------------------
# solution sets

def _principal(fn: Any) -> tuple[float, float] | None:
    """The principal range of the argument of a trigonometric function (where its inverse lands)."""
    import sympy

    half = math.pi / 2
    if isinstance(fn, (sympy.sin, sympy.tan, sympy.csc)):
        return (-half, half)
    if isinstance(fn, (sympy.cos, sympy.sec, sympy.cot)):
        return (0.0, math.pi)
    return None


def _trig_args(x: Any, *exprs: Any) -> list[tuple[Any, tuple[float, float]]]:
    """The arguments containing ``x`` of the trigonometric functions in ``exprs``, with their principal ranges."""
    import sympy

    out = []
    for e in exprs:
        for f in e.atoms(sympy.Function):
            rng = _principal(f)
            if rng is not None and f.args and x in f.args[0].free_symbols:
                out.append((f.args[0], rng))
    return out


def _solve(expr: Any, x: Any) -> list[Any] | None:
    """``solve(expr = 0, x)`` as a list of expressions free of ``x``; ``None`` when SymPy cannot."""
    import sympy

    try:
        sols = sympy.solve(expr, x, dict=False, simplify=False, rational=False)
    except Exception:  # sympy raises many types (NotImplementedError, ValueError, ...)
        return None
    if not isinstance(sols, list) or not all(isinstance(s, sympy.Expr) and x not in s.free_symbols for s in sols):
        return None
    if any(nonfinite(s) for s in sols):
        return None
    return sols


def _real_values(sols: list[Any], pt: dict[Any, Any]) -> list[float] | None:
    """The real values of ``sols`` at a point; ``None`` when one cannot be evaluated."""
    out = []
    for s in sols:
        v = evaluate_at(s, pt)
        if v is None:
            return None
        if abs(v.imag) <= 1e-9 * max(1.0, abs(v.real)):
            out.append(v.real)
    return out


def _in_domain(val: float, x: Any, pt: dict[Any, Any], positive: bool, trig: list[tuple[Any, tuple[float, float]]]) -> bool:
    """Whether a solution value lies in the target's domain (positivity, principal trig ranges)."""
    import sympy

    if positive and not val > 1e-12 * max(1.0, abs(val)):
        return False
    if not trig:
        return True
    full = dict(pt)
    full[x] = sympy.Float(val, 20)
    for arg, (lo, hi) in trig:
        a = evaluate_at(arg, full)
        if a is None or abs(a.imag) > 1e-9:
            return False
        slack = 1e-9 * max(1.0, abs(a.real))
        if not (lo - slack <= a.real <= hi + slack):
            return False
    return True


def _same_set(a: list[float], b: list[float], tol: float) -> bool:
    """Two sets of reals are equal within ``tol`` (duplicates ignored)."""
    return all(any(rel_close(u, v, tol) for v in b) for u in a) and all(any(rel_close(u, v, tol) for u in a) for v in b)


def _gold_positive(sols: list[Any], others: list[Any]) -> bool:
    """Whether every real gold solution is positive at every positive and signed sample point."""
    seen = 0
    for pt in sample_points(others, _N_POINTS) + sample_points(others, _N_POINTS, signed=True):
        vals = _real_values(sols, pt)
        if vals is None:
            continue
        if any(not v > 0 for v in vals):
            return False
        seen += len(vals)
    return seen > 0


def _transcendental_in(x: Any, *exprs: Any) -> bool:
    r"""Whether ``x`` occurs inside a function or an exponent in any of ``exprs``.

    For example in ``\sin x``, ``\arctan(x/a)``, ``e^{x}`` or ``a^{x}``, but not in ``(a - x)^{3/2}``.
    """
    import sympy

    for e in exprs:
        for f in e.atoms(sympy.Function):
            if x in f.free_symbols:
                return True
        for p in e.atoms(sympy.Pow):
            if x in p.exp.free_symbols:
                return True
    return False


def _compare_for(dg: Any, dp: Any, x: Any, tol: float, magnitudes: bool = False) -> bool | None:
    """Solve both for ``x`` and compare the real solutions in the domain; ``None`` when undecided.

    ``magnitudes``: take ``x`` positive whatever the gold says (a gold stating magnitudes). A point
    counts as informative only when the gold has a nonzero solution there.
    """
    gs, ps = _solve(dg, x), _solve(dp, x)
    if gs is None or ps is None:
        return None
    others = sorted((dg.free_symbols | dp.free_symbols) - {x}, key=symbol_sort_key)
    positive = magnitudes or (bool(gs) and _gold_positive(gs, others))
    trig = _trig_args(x, dg, dp)
    informative = 0
    for pt in sample_points(others, _N_POINTS):
        gv, pv = _real_values(gs, pt), _real_values(ps, pt)
        if gv is None or pv is None:
            continue
        gv = [v for v in gv if _in_domain(v, x, pt, positive, trig)]
        pv = [v for v in pv if _in_domain(v, x, pt, positive, trig)]
        if not _same_set(gv, pv, tol):
            return False
        informative += any(abs(v) > 1e-12 for v in gv)
    return True if informative >= 3 else None


def _root_factor(expr: Any) -> bool:
    """Whether a product has a factor that is a root (a power with a non-integer rational exponent) of symbols."""
    import sympy

    for f in sympy.Mul.make_args(expr):
        if isinstance(f, sympy.Pow) and f.exp.is_Rational:
            if not f.exp.is_Integer and f.base.free_symbols:
                return True
            if f.exp.is_Integer and _root_factor(f.base):
                return True  # 1/sqrt(x), written as (x^{1/2})^{-1}
        elif isinstance(f, sympy.Mul) and _root_factor(f):
            return True
    return False


def _states_magnitudes(g_l: Any, g_r: Any, target: Any) -> bool:
    r"""Whether the gold is ``target = R`` with ``R`` a product with a root factor, positive at the sample points.

    ``\omega_0 = \frac{q}{\sqrt{4\pi\epsilon_0 m r^3}}``: the root is the principal one, so the equation
    relates magnitudes (the module docstring's assumption policy).
    """
    import sympy

    if target is None or g_l != target or not isinstance(g_r, sympy.Expr) or target in g_r.free_symbols or not _root_factor(g_r):
        return False
    seen = 0
    for pt in sample_points(sorted(g_r.free_symbols, key=symbol_sort_key), _N_POINTS):
        v = evaluate_at(g_r, pt)
        if v is None:
            continue
        if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)) or not v.real > 0:
            return False
        seen += 1
    return seen >= 3


def _linear_root(d: Any, x: Any) -> Any:
    """The one solution of ``d = 0`` for ``x`` when ``d`` is linear in ``x`` (``a x + b``, ``a`` free of ``x``), else ``None``."""
    import sympy

    if x not in d.free_symbols:
        return None
    a = sympy.diff(d, x)
    if x in a.free_symbols or a == 0:
        return None
    return -d.xreplace({x: sympy.Integer(0)}) / a


def _vanishing_factors(expr: Any) -> list[Any]:
    """The factors of ``expr``'s numerator that can vanish (sums, not monomials)."""
    import sympy

    num = sympy.fraction(sympy.cancel(sympy.together(expr)))[0]
    return [f for f in sympy.Mul.make_args(num) if not nonvanishing(f)]


def _undefined_where_zero(solution: Any, coefficient: Any) -> bool:
    r"""Whether ``solution`` (``-b/a``) is undefined wherever its coefficient ``a`` can vanish.

    Each factor of ``a`` that can vanish must stay in the solution's denominator: dividing by it is what
    solving for the symbol means (``m_2 = \frac{\ldots}{2m_1G - v_2^2(r_1+r_2)}``). A factor that
    cancels (``(\tan\theta - \mu)(x - 1) = 0`` gives ``x = 1``) is a second solution branch the other
    equation does not state.
    """
    import sympy

    den = sympy.fraction(sympy.cancel(sympy.together(solution)))[1]
    for f in _vanishing_factors(coefficient):
        rest = sympy.fraction(sympy.cancel(sympy.together(den / f)))[1]
        if not nonvanishing(rest):
            return False
    return True


def same_linear_solution(g_l: Any, g_r: Any, p_l: Any, p_r: Any, tol: float = 1e-6) -> RuleResult:
    r"""Whether an equation solved for a symbol is the other equation, linear in that symbol, solved for it.

    ``m_2 = \ldots`` against ``E = \frac12 m_1v_1^2 + \frac12 m_2v_2^2 - \frac{Gm_1m_2}{r_1+r_2}`` (which is
    ``a\,m_2 + b = 0``): the equations are equivalent when the isolated side equals the other's one
    solution ``-b/a`` (compared at seeded positive sample points, so any number of symbols is fine),
    that solution is not 0 (a common factor such as ``\Delta`` of ``\Delta\mu`` decides nothing), and
    it is undefined wherever ``a`` can vanish (:func:`_undefined_where_zero`). Either side may be the
    isolated one.

    Args:
        g_l: the gold's left side (SymPy).
        g_r: the gold's right side.
        p_l: the prediction's left side, on the same alias table.
        p_r: the prediction's right side.
        tol: relative tolerance at the sample points.

    Returns:
        ``(match, reason)``; ``match`` is ``None`` when neither is solved for a symbol the other is
        linear in, or the check cannot decide. Never raises.
    """
    import sympy

    try:
        dg, dp = replace_undef(g_l - g_r), replace_undef(p_l - p_r)
        if not isinstance(dg, sympy.Expr) or not isinstance(dp, sympy.Expr) or nonfinite(dg, dp):
            return None, "not expressions"
        syms = dg.free_symbols
        if not syms or syms != dp.free_symbols or sympy.count_ops(dg) > 2 * _MAX_OPS or sympy.count_ops(dp) > 2 * _MAX_OPS:
            return None, "not compared as linear equations"
        for (lhs, rhs_), other in (((p_l, p_r), dg), ((g_l, g_r), dp)):
            if not isinstance(lhs, sympy.Symbol) or lhs in rhs_.free_symbols:
                continue
            x = lhs
            root = _linear_root(other, x)
            if root is None:
                continue
            others = sorted(syms - {x}, key=symbol_sort_key)
            seen = nonzero = 0
            for pt in sample_points(others, _N_POINTS):
                a, b = evaluate_at(root, pt), evaluate_at(replace_undef(rhs_), pt)
                if a is None or b is None:
                    continue
                if not rel_close(b, a, tol):
                    return False, "different solutions"
                seen += 1
                nonzero += abs(a) > 1e-12
            if seen >= 3 and nonzero >= 3 and _undefined_where_zero(root, sympy.diff(other, x)):
                return True, "the same equation solved for another symbol"
            return None, "linear solutions not decided"
        return None, "neither equation is solved for a symbol the other is linear in"
    except Exception:  # sympy raises many types
        return None, "solve failed"


def same_solution_sets(g_l: Any, g_r: Any, p_l: Any, p_r: Any, target: Any = None, tol: float = 1e-6) -> RuleResult:
    r"""Whether two equations have the same solutions for every symbol both can be solved for.

    The gold's isolated symbol (``target``) is solved for first and must be decided; then every other
    shared symbol (at most six in all) that occurs only algebraically (not inside ``\sin``, ``\arctan``,
    an exponent, ...); the transcendental ones only when no other symbol decided anything (SymPy can take
    minutes on them). The work is bounded by counts (symbols, operations, sample
    points), never by a clock, so the result is the same on a loaded machine; a solve that overruns the
    worker's hard timeout makes the whole verdict "timed out", never a looser one. The assumption
    policy is in the module docstring.

    Args:
        g_l: the gold's left side (SymPy).
        g_r: the gold's right side.
        p_l: the prediction's left side, on the same alias table.
        p_r: the prediction's right side.
        target: the gold's isolated left-side symbol, or ``None``.
        tol: relative tolerance at the sample points.

    Returns:
        ``(match, reason)``; ``match`` is ``None`` when no symbol could be decided. Never raises.
    """
    import sympy

    try:
        dg, dp = replace_undef(g_l - g_r), replace_undef(p_l - p_r)
        if not isinstance(dg, sympy.Expr) or not isinstance(dp, sympy.Expr) or nonfinite(dg, dp):
            return None, "not expressions"
        syms = dg.free_symbols
        if not syms or syms != dp.free_symbols:
            return False, "different symbols"
        if len(syms) > _MAX_SYMBOLS or sympy.count_ops(dg) > _MAX_OPS or sympy.count_ops(dp) > _MAX_OPS:
            return None, "too large to solve"
        order = sorted(syms, key=lambda s: (s != target, *symbol_sort_key(s)))
        magnitudes = _states_magnitudes(g_l, g_r, target)
        # a symbol inside a transcendental function (sin, atan, exp, a power with it in the exponent ...) can
        # take SymPy minutes to solve for: such a symbol is solved for only when it is the isolated one or
        # when no algebraic symbol decided anything (a rule of the equations' form, never of the clock)
        algebraic = [x for x in order if x == target or not _transcendental_in(x, dg, dp)]
        decided = []
        for rounds in (algebraic, [x for x in order if x not in algebraic]):
            if decided:
                break
            for x in rounds:
                res = _compare_for(dg, dp, x, tol, magnitudes)
                if res is False:
                    return False, "different solutions"
                if res is None and x == target:
                    return None, "solutions for the isolated symbol not decided"
                if res:
                    decided.append(x)
        if not decided:
            return None, "no symbol solved"
        return True, "same solution set"
    except Exception:  # sympy raises many types
        return None, "solve failed"


# ---------------------------------------------------------------------------------------------
# proportionality and conserved quantities

_PROPTO = re.compile(r"\\(?:propto|varpropto)(?![A-Za-z])|∝")
_CONST = re.compile(
    r"^\s*(?:\\(?:text|mathrm|rm|textrm|operatorname)\s*\{\s*)?(?:const(?:ant)?\.?|常数|常量|恒量)\s*\}?\s*\.?\s*$",
    re.IGNORECASE,
)


def _const_side(side: str) -> bool:
    return bool(_CONST.match(side))


def is_proportionality(text: str) -> bool:
    r"""Whether an answer states a proportionality (``\propto``) or a conserved quantity (``= \text{const}``).

    Args:
        text: one answer (LaTeX).

    Returns:
        ``True`` for ``A \propto B`` and for ``A = \text{const}`` (either side).
    """
    if _PROPTO.search(text):
        return True
    segs, _ = split_relations(text, frozenset({"="}))
    return len(segs) == 2 and (_const_side(segs[0]) != _const_side(segs[1]))


def _quantity(text: str, al: Any) -> Any:
    r"""The quantity a proportionality holds fixed: ``A/B`` for ``A \propto B``, ``A`` for ``A = const``."""
    parts = _PROPTO.split(text)
    if len(parts) == 2:
        a, b = to_sympy(parts[0], al), to_sympy(parts[1], al)
        return a / b
    if len(parts) > 2:
        raise LatexError("several proportionality signs")
    segs, _ = split_relations(text, frozenset({"="}))
    side = segs[1] if _const_side(segs[0]) else segs[0]
    return to_sympy(side, al)


def proportionality_gold_check(box: str) -> str | None:
    r"""Whether a proportionality gold (``P \propto V^{-5/3}``, ``PV = \text{const}``) converts to SymPy.

    Args:
        box: the gold box content.

    Returns:
        ``None`` when it does, else a short reason.
    """
    try:
        q = _quantity(box, new_aliases(box))
    except LatexError as e:
        return str(e)
    return None if getattr(q, "free_symbols", None) else "proportionality without symbols"


def _parallel(f: Any, g: Any, syms: list[Any], tol: float = 1e-6) -> bool | None:
    """Whether the gradients of ``f`` and ``g`` are parallel at every sample point (same level sets)."""
    import sympy

    gf = [sympy.diff(f, s) for s in syms]
    gg = [sympy.diff(g, s) for s in syms]
    good = 0
    for pt in sample_points(syms, _N_POINTS):
        a = [evaluate_at(d, pt) for d in gf]
        b = [evaluate_at(d, pt) for d in gg]
        if any(v is None for v in a + b):
            continue
        na, nb = max(abs(v) for v in a), max(abs(v) for v in b)  # type: ignore[arg-type]
        if na < 1e-12 or nb < 1e-12:
            if (na < 1e-12) != (nb < 1e-12):
                return False
            continue
        for i in range(len(syms)):
            for j in range(i + 1, len(syms)):
                cross = a[i] * b[j] - a[j] * b[i]  # type: ignore[operator]
                if abs(cross) > tol * na * nb:
                    return False
        good += 1
    return True if good >= 3 else None


def proportional_rule(gold: str, pred: str) -> RuleResult:
    r"""A proportionality or a conserved quantity: the same relation up to a constant.

    ``P \propto V^{-5/3}``, ``PV^{5/3} = \text{const}``, ``P^3V^5 = \text{const}`` and ``P = C V^{-5/3}``
    (one symbol the gold lacks, read as the constant) all match each other; a wrong exponent, a swapped
    symbol or a relation in other symbols does not. A gold that is an exact equation never accepts a
    proportionality.

    Args:
        gold: one gold answer.
        pred: one predicted answer.

    Returns:
        ``(match, reason)``.
    """
    import sympy

    if not is_proportionality(gold):
        return False, "the prediction states only a proportionality"
    try:
        al = new_aliases(gold, pred)
        fg = replace_undef(_quantity(gold, al))
        if is_proportionality(pred):
            fp = replace_undef(_quantity(pred, al))
        else:
            segs, _ = split_relations(pred, frozenset({"="}))
            if len(segs) != 2 or not all(segs):
                return False, "prediction is no proportionality or equation"
            dp = replace_undef(to_sympy(segs[0], al) - to_sympy(segs[1], al))
            extra = sorted(dp.free_symbols - fg.free_symbols, key=symbol_sort_key)
            if len(extra) != 1:
                return False, "the prediction's constant is not one symbol"
            sols = _solve(dp, extra[0])
            if not sols or len(sols) != 1:
                return False, "the prediction's constant is not determined"
            fp = sols[0]
    except LatexError as e:
        return False, str(e)
    if not isinstance(fg, sympy.Expr) or not isinstance(fp, sympy.Expr) or nonfinite(fg, fp):
        return False, "not expressions"
    syms = fg.free_symbols
    if not syms or syms != fp.free_symbols:
        return False, "different symbols"
    try:
        res = _parallel(fg, fp, sorted(syms, key=symbol_sort_key))
    except Exception:  # sympy raises many types
        return None, "could not compare"
    if res is None:
        return None, "proportionality not decided"
    return (True, "the same relation up to a constant") if res else (False, "a different proportionality")
