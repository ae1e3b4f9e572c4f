r"""IN: intervals and inequalities (docs/protocol.md section 5).

:func:`in_rule`: bracket types and bounds (numbers by the NV tolerance, expressions symbolically),
unions part-wise in order; an interval against an inequality in any expression; double
inequalities; inequalities scaled by a positive factor; ``b \in (0, X)`` against an inequality in
``b`` (checked numerically for positive symbols, end points included; never for ranges reaching
negative values). Worker side. (The module is ``in_`` because ``in`` is a Python keyword.)
"""

from __future__ import annotations

import re
from typing import Any

from studybench.answers import split_top_level
from studybench.verify.comparison.intervals import same_real_set, set_notation
from studybench.verify.comparison.parts import same_lhs
from studybench.verify.comparison.relations import bound_equal, chain_rule, positive_multiple
from studybench.verify.comparison.symbolic import (
    evaluate_at,
    sample_points,
    symbol_sort_key,
)
from studybench.verify.physics.identities import reconcile
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import LatexError, relation_chain, states_inequality
from studybench.verify.rules._shared import Context, Rule
from studybench.verify.verdict import RuleResult

__all__ = ["RULE", "in_forms_rule", "in_gold_check", "in_rule"]


def in_rule(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    r"""IN: intervals and inequalities (docs/protocol.md section 5).

    The written forms first (:func:`in_forms_rule`); when they do not show the answers equal and either
    side uses set notation (a union, "or", points, set-builder notation, ``\mathbb{R}``, a difference),
    both are compared as subsets of the real line
    (:func:`studybench.verify.comparison.intervals.same_real_set`: unions in any order, touching intervals
    merged).

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the unit hint (not used by IN).
        ctx: the verification's context (its definitions).

    Returns:
        ``(match, reason)``.
    """
    try:
        res = in_forms_rule(gold, pred, hint, ctx)
    except Exception:  # sympy raises many types on a form the written rules do not expect ("a < x or x > b")
        alt = same_real_set(gold, pred) if set_notation(gold) or set_notation(pred) else None
        if alt is None:
            raise
        return alt
    if res[0] is not True and (set_notation(gold) or set_notation(pred)):
        alt = same_real_set(gold, pred)
        if alt is not None and alt[0] is True:
            return alt
    return res


def in_forms_rule(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    r"""IN as written: intervals and inequalities form by form.

    Intervals: bracket types must match, bounds equal by NV / EX rules, unions part-wise in order.
    Inequalities: same strictness, each gold relation matched by a prediction relation whose
    ``big - small`` is a positive multiple. An interval against an inequality in any expression, and
    ``b \in (0, X)`` against an inequality in ``b`` (solved numerically with positive symbols).

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the unit hint (not used by IN).
        ctx: the verification's context (its definitions).

    Returns:
        ``(match, reason)``.
    """
    mem = _in_membership(gold, pred, ctx)
    if mem is not None:
        return mem
    try:
        al = new_aliases(gold, pred)
        go = to_sympy(gold, al)
        po = to_sympy(pred, al)
    except LatexError as e:
        # \ll, \gtrsim: no SymPy relation, compared side by side
        rel = chain_rule(gold, pred) if states_inequality(gold) else None
        return rel if rel is not None else (False, str(e))
    (go,), (po,), _ = reconcile([go], [po], al, definitions=ctx.definitions)
    go, po = _expand_abs(go), _expand_abs(po)
    gi, pi = _interval_parts(go), _interval_parts(po)
    if gi is not None and pi is None and _relations(po) is not None and _interval_vs_relation(gi, po):
        return True, "interval written as an inequality"
    if pi is not None and gi is None and _relations(go) is not None and _interval_vs_relation(pi, go):
        return True, "inequality written as an interval"
    if (gi is None) != (pi is None):
        # interval against inequalities in one variable: x > 2 is (2, oo)
        if gi is None:
            gi = _relation_intervals(go)
        else:
            pi = _relation_intervals(po)
    if gi is not None and pi is not None:
        if len(gi) != len(pi):
            return False, "different number of intervals"
        for (gs, ge, glo, gro), (ps, pe, plo, pro) in zip(gi, pi, strict=True):
            if (glo, gro) != (plo, pro):
                return False, "bracket types differ"
            for x, y in ((gs, ps), (ge, pe)):
                if x != y and not bound_equal(x, y):
                    return False, "bounds differ"
        return True, "same intervals"
    gi2, pi2 = _relation_intervals(go), _relation_intervals(po)
    if gi2 is not None and pi2 is not None and go.free_symbols == po.free_symbols:
        # x > \frac{\sqrt3}{2} against x > 0.866: the same one-variable set, bounds by NV rules
        if len(gi2) == len(pi2) and all(
            (glo, gro) == (plo, pro) and all(a == b or bound_equal(a, b) for a, b in ((gs, ps), (ge, pe)))
            for (gs, ge, glo, gro), (ps, pe, plo, pro) in zip(gi2, pi2, strict=True)
        ):
            return True, "same set"
    gr, pr = _relations(go), _relations(po)
    if gr is not None and pr is not None:
        if len(gr) != len(pr):
            return False, "different number of inequalities"
        used: set[int] = set()
        for gs, ge in gr:
            hit = None
            for j, (ps, pe) in enumerate(pr):
                if j not in used and ps == gs and positive_multiple(ge, pe):
                    hit = j
                    break
            if hit is None:
                return False, "inequalities differ"
            used.add(hit)
        return True, "same inequalities"
    return False, "cannot compare these interval forms"


_IN_SET = re.compile(r"\\in(?![A-Za-z])")


def _membership(s: str) -> tuple[str, str] | None:
    r"""``(variable, interval)`` of ``b \in (0, 2m)``, else None."""
    parts = _IN_SET.split(s)
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        return None
    return parts[0].strip(), parts[1].strip()


def _in_membership(gold: str, pred: str, ctx: Context) -> RuleResult | None:
    r"""``b \in (0, X)`` on one side, against the other side's interval or inequality in ``b``.

    An inequality is checked numerically with positive symbols (it must hold inside the interval and
    fail outside it, for ``b > 0``, at several parameter points). ``None`` when neither side is a
    membership.
    """
    import sympy

    gm, pm = _membership(gold), _membership(pred)
    if gm is None and pm is None:
        return None
    if gm is not None and pm is not None:
        return in_rule(gm[1], pm[1], None, ctx) if same_lhs(gm[0], pm[0], definitions=ctx.definitions) else (False, "different variable")
    var_text, interval = pm if pm is not None else gm  # type: ignore[misc]
    other = gold if pm is not None else pred
    try:
        al = new_aliases(interval, other, var_text)
        iv = _interval_parts(to_sympy(interval, al))
        rel = _expand_abs(to_sympy(other, al))
        var = to_sympy(var_text, al)
    except LatexError as e:
        return False, str(e)
    if iv is None:
        return False, "not an interval"
    if _interval_parts(rel) is not None:
        return in_rule(other, interval, None, ctx) if pm is not None else in_rule(interval, other, None, ctx)
    two_sided = [c for c in _relation_candidates(rel) if isinstance(rel, sympy.And) and c[0] == var]
    if len(iv) == 1 and two_sided:
        # a <= x < b against x \in [a, b): the same ends, the same brackets (any signs)
        _, start, end, lo_open, hi_open = two_sided[0]
        if (lo_open, hi_open) != (iv[0][2], iv[0][3]):
            return False, "the end points differ (open vs closed)"
        if all(x == y or bound_equal(x, y) for x, y in ((iv[0][0], start), (iv[0][1], end))):
            return True, "same interval written as a double inequality"
        return False, "the bounds differ"
    if len(iv) != 1 or not isinstance(var, sympy.Symbol) or _relations(rel) is None or var not in rel.free_symbols:
        return False, "cannot compare the membership with the other side"
    lo, hi, _, _ = iv[0]
    params = sorted((rel.free_symbols | lo.free_symbols | hi.free_symbols) - {var}, key=symbol_sort_key)
    checked = 0
    for pt in sample_points(params, 4):
        a = complex(0.0) if lo == -sympy.oo else evaluate_at(lo, pt)
        b = None if hi == sympy.oo else evaluate_at(hi, pt)
        if a is None or abs(a.imag) > 1e-9 or (b is not None and (abs(b.imag) > 1e-9 or not a.real < b.real)):
            continue
        a_r = a.real
        if a_r < 0 or lo == -sympy.oo:
            return False, "cannot compare: the interval reaches negative values"
        exact = {k: sympy.Rational(str(v)) for k, v in pt.items()}  # exact, so the end point is exact
        for end, closed, val in ((lo, not iv[0][2], a), (hi, not iv[0][3], b)):
            if val is None or end in (sympy.oo, -sympy.oo) or val.real <= 0:
                continue
            try:
                at_end = rel.xreplace({**exact, var: end.xreplace(exact)})
            except Exception:  # sympy raises many types
                return False, "cannot evaluate the inequality"
            if at_end in (sympy.true, sympy.false) and bool(at_end) is not closed:
                return False, "the end points differ (open vs closed)"
        if b is None:  # (a, oo)
            inside = [a_r + f * (abs(a_r) + 1.0) for f in (0.02, 0.5, 3.0, 100.0)]
            outside = [a_r * f for f in (0.5, 0.97)] if a_r > 0 else []
        else:
            b_r = b.real
            inside = [a_r + f * (b_r - a_r) for f in (0.02, 0.3, 0.7, 0.98)]
            outside = [b_r * f for f in (1.03, 1.5, 3.0)] + ([a_r * f for f in (0.5, 0.97)] if a_r > 0 else [])
        for x, want in [(x, True) for x in inside] + [(x, False) for x in outside]:
            if not (0 < x < 1e300):
                continue
            try:
                got = rel.xreplace({**pt, var: sympy.Float(x)})
            except Exception:  # sympy raises many types
                return False, "cannot evaluate the inequality"
            if got not in (sympy.true, sympy.false) or bool(got) is not want:
                return False, "the inequality and the interval differ"
        checked += 1
    if checked < 2:
        return False, "cannot compare the membership with the other side"
    return True, "same set for positive values (checked numerically)"


# ---------------------------------------------------------------------------------------------
# intervals and relations

def _expand_abs(obj: Any) -> Any:
    r"""``|E| < a`` (or ``a > |E|``, ``\le``) as the chain ``-a < E < a``; anything else unchanged."""
    import sympy

    if not isinstance(obj, (sympy.StrictLessThan, sympy.LessThan, sympy.StrictGreaterThan, sympy.GreaterThan)):
        return obj
    small, big = (obj.lhs, obj.rhs) if isinstance(obj, (sympy.StrictLessThan, sympy.LessThan)) else (obj.rhs, obj.lhs)
    if not isinstance(small, sympy.Abs) or big.has(sympy.Abs):
        return obj
    e = small.args[0]
    cls = sympy.StrictLessThan if isinstance(obj, (sympy.StrictLessThan, sympy.StrictGreaterThan)) else sympy.LessThan
    try:
        return sympy.And(cls(-big, e, evaluate=False), cls(e, big, evaluate=False), evaluate=False)
    except Exception:  # sympy raises many types
        return obj


def _interval_parts(obj: Any) -> list[tuple[Any, Any, bool, bool]] | None:
    import sympy

    if isinstance(obj, sympy.Interval):
        return [(obj.start, obj.end, bool(obj.left_open), bool(obj.right_open))]
    if isinstance(obj, sympy.Union):
        out = []
        for a in obj.args:
            p = _interval_parts(a)
            if p is None:
                return None
            out.extend(p)
        return out
    return None


def _relations(obj: Any) -> list[tuple[bool, Any]] | None:
    """Relational / And of relationals as ``(strict, expr)`` meaning ``expr > 0`` (or >= 0)."""
    import sympy

    if isinstance(obj, sympy.And):
        out = []
        for a in obj.args:
            r = _relations(a)
            if r is None:
                return None
            out.extend(r)
        return out
    if isinstance(obj, (sympy.StrictLessThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.GreaterThan)):
        strict = isinstance(obj, (sympy.StrictLessThan, sympy.StrictGreaterThan))
        if isinstance(obj, (sympy.StrictLessThan, sympy.LessThan)):
            return [(strict, obj.rhs - obj.lhs)]
        return [(strict, obj.lhs - obj.rhs)]
    return None


def _relation_candidates(obj: Any) -> list[tuple[Any, Any, Any, bool, bool]]:
    """Readings of an inequality as ``(variable expression, start, end, left_open, right_open)``.

    ``X >= a`` gives ``(X, a, oo, False, True)`` and also ``(a, -oo, X, True, False)`` (either side may
    be the variable); a chain ``a < X < b`` gives ``(X, a, b, True, True)``.
    """
    import sympy

    out = []
    rels = list(obj.args) if isinstance(obj, sympy.And) else [obj]
    norm = []
    for r in rels:
        if isinstance(r, (sympy.StrictLessThan, sympy.LessThan)):
            norm.append((r.lhs, r.rhs, isinstance(r, sympy.StrictLessThan)))  # lhs < rhs
        elif isinstance(r, (sympy.StrictGreaterThan, sympy.GreaterThan)):
            norm.append((r.rhs, r.lhs, isinstance(r, sympy.StrictGreaterThan)))
        else:
            return []
    if len(norm) == 1:
        small, big, strict = norm[0]
        out.append((big, small, sympy.oo, strict, True))
        out.append((small, -sympy.oo, big, True, strict))
    elif len(norm) == 2:
        (s1, b1, st1), (s2, b2, st2) = norm
        if b1 == s2:
            out.append((b1, s1, b2, st1, st2))
        elif b2 == s1:
            out.append((b2, s2, b1, st2, st1))
    return out


def _interval_vs_relation(iv: list[tuple[Any, Any, bool, bool]], rel: Any) -> bool:
    r"""A single interval against an inequality whose variable side is any expression.

    ``[1/n_1, \infty)`` against ``r/R \ge 1/n_1``.
    """
    if len(iv) != 1:
        return False
    gs, ge, glo, gro = iv[0]
    for _, ps, pe, plo, pro in _relation_candidates(rel):
        if (glo, gro) != (plo, pro):
            continue
        if all(x == y or bound_equal(x, y) for x, y in ((gs, ps), (ge, pe))):
            return True
    return False


def _relation_intervals(obj: Any) -> list[tuple[Any, Any, bool, bool]] | None:
    """Intervals of an inequality (or a chain of them) in exactly one variable, else None."""
    import sympy

    if not isinstance(obj, (sympy.And, sympy.StrictLessThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.GreaterThan)):
        return None
    if len(obj.free_symbols) != 1 or _relations(obj) is None:
        return None
    try:
        return _interval_parts(obj.as_set())
    except Exception:  # sympy raises many types on odd input
        return None


def in_gold_check(box: str) -> str | None:
    """Whether every part of an IN gold box converts to SymPy.

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when it converts, else the conversion's reason.
    """
    try:
        for part in split_top_level(box):
            if part:
                try:
                    to_sympy(part)
                except LatexError:
                    if not states_inequality(part):
                        raise
                    for seg in relation_chain(part)[0]:  # \ll, \gtrsim: side by side
                        to_sympy(seg)
        return None
    except LatexError as e:
        return str(e)


RULE = Rule(fast=None, full=in_rule, gold_check=in_gold_check)
"""IN: the full tier decides (intervals, inequalities); the gold check reads every part."""
