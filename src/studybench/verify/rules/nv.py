r"""NV: numeric values with units (docs/protocol.md section 5).

:func:`nv_rule` reads numbers in any notation (:func:`studybench.verify.reading.numbers.quantity_candidates`),
an optional left side (compared when both sides state one), bounds, ``\pm`` pairs, number words and
count nouns, converts units with pint (the gold's own unit or its ``gold_unit`` hint), and compares
values within the tolerance policy (:mod:`studybench.verify.comparison.tolerance`). A closed-form gold
(``\sqrt{2}``) is a number too; a symbolic gold (``0.5 R``) falls back to the EX rule (through the
registry, :meth:`studybench.verify.rules._shared.Context.full`), and a relation such as ``\beta = 1``
stated as ``v = c`` is compared as equations (:func:`studybench.verify.comparison.equations.equation_equal`).
Worker side.
"""

from __future__ import annotations

import re
from dataclasses import replace

from studybench.answers import split_top_level
from studybench.records import AnswerType
from studybench.verify.comparison.equations import equation_equal
from studybench.verify.comparison.numeric import compare_quantities
from studybench.verify.comparison.parts import compare_parts, labels_compatible, match_in_order
from studybench.verify.comparison.relations import chain_rule
from studybench.verify.comparison.symbolic import closed_value
from studybench.verify.physics.constants import constant_value
from studybench.verify.physics.units import (
    convert_unit,
    effective_unit,
    hint_unit,
    is_unit,
    same_unit,
    split_hints,
    split_unit_suffix,
)
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import (
    LatexError,
    norm_string,
    norm_text,
    rhs,
    split_relations,
    value_link,
)
from studybench.verify.reading.numbers import (
    ODD_TEXT_GROUP,
    Quantity,
    plain_value_text,
    quantity_candidates,
    value_ops,
)
from studybench.verify.rules._shared import Context, Rule
from studybench.verify.verdict import RuleResult

__all__ = ["RULE", "nv_gold_check", "nv_rule"]


def nv_rule(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    r"""NV: numbers with units, left sides and bounds, within the tolerance policy (docs/protocol.md section 5).

    Scientific notation, fractions, percent, degrees, an optional unit and an optional left side;
    relative tolerance 1% widened to the gold's written precision, at most 2% (a gold of 0 needs 0).
    Falls back to a symbolic numeric value (``\frac{\sqrt2}{2}``) and then to the EX rule for symbolic
    NV golds. A gold listing several values (``1.822, 0.831, 1.8``) is compared value by value.

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the unit of a unitless gold (``gold_unit``): a prediction in a compatible unit is
            converted, one without a unit is read in the gold's unit, and one with a dimensional unit
            against a gold whose unit is unknown is not accepted (unless the gold is 0).
        ctx: the verification's context (its definitions; the EX rule for symbolic golds).

    Returns:
        ``(match, reason)``.
    """
    pred = value_link(pred)  # I \to 0 states 0
    if len(split_top_level(gold)) > 1:
        gparts = split_top_level(gold)
        ghints = split_hints(hint, len(gparts))
        pparts = split_top_level(pred)
        if len(pparts) == len(gparts) and len(set(gparts)) < len(gparts):
            # equal gold values with different hints: by position
            return match_in_order([str(i) for i in range(len(gparts))], pparts, lambda i, p: nv_rule(gparts[int(i)], p, ghints[int(i)], ctx))
        hmap = dict(zip(gparts, ghints, strict=True))
        res = compare_parts(gold, pred, lambda g, p: nv_rule(g, p, hmap.get(g), ctx), definitions=ctx.definitions)
        if res is not None:
            return res
    # a gold stating a bound (B < 0.866 T, 0 < v_1 < v_2 < 3): every side in its place (also 0.866 T > B)
    rel = chain_rule(gold, pred, lambda g, p: nv_rule(g, p, hint, ctx))
    if rel is not None:
        return rel
    unit, sym = hint_unit(hint)
    if sym:
        pred = _strip_symbolic_unit(pred, sym)
    word = _NUMBER_WORDS.get(norm_text(pred))
    if word is not None and word >= 0:
        pred = str(word)
    gq = quantity_candidates(gold)
    g_kind = p_kind = ""
    if not gq:
        # a closed-form gold (\sqrt{2}, 2\pi, 10\ln 2\ \mathrm{s}, 2GM_\odot/c^2) is a number: NV rules apply
        gq, g_kind = _closed_quantity(rhs(gold), unit)
    if unit:
        # the hint's unit; a degree hint (^\circ) makes the gold an angle in degrees, as if written 0.069^\circ
        gq = [q if q.unit or q.degrees or q.percent else replace(q, degrees=True) if unit == "deg" else replace(q, unit=unit) for q in gq]
    pq = quantity_candidates(pred, value_ops(gold))
    if not pq and gq:
        # constants on both sides (m_p against m_n) are compared symbolically, never at 1%
        # and a relation such as v = c is left to the EQ rules (beta = 1)
        lone = len(split_relations(pred, _VALUE_RELS)[0]) == 1
        pq, p_kind = _closed_quantity(rhs(pred), None, constants=g_kind != "const" and lone)
    if g_kind == "const" and not pq:
        return ctx.full(AnswerType.EX, gold, pred)
    if gq and pq:
        gq, pq = _pi_radians(gq, g_kind == "pi", pq, p_kind == "pi")
        gsegs, _ = split_relations(gold, _VALUE_RELS)
        psegs, _ = split_relations(pred, value_ops(gold))
        gl, pl = _norm_label(_value_lhs(gsegs)), _norm_label(_value_lhs(psegs))
        if gl and pl and not labels_compatible(gl, pl, definitions=ctx.definitions):
            return False, f"different left side ({pl[:30]!r} vs {gl[:30]!r})"
        if gl.startswith("\\Delta") or pl.startswith("\\Delta"):
            # \Delta T = 5\,^\circ C is a temperature difference: 5 K, not 278.15 K
            gq, pq = _as_difference(gq), _as_difference(pq)
        _, gops = split_relations(gold, _VALUE_RELS)
        _, pops = split_relations(pred, _VALUE_RELS)
        if {o for o in gops if o != "="} != {o for o in pops if o != "="}:
            return False, "the gold states a bound; the prediction does not state the same relation"
        stated = [
            x for x in (psegs[1:] if pl else psegs)
            if re.match(r"\s*[-+]?\s*(?:\d|\.\d|\\[dt]?frac\s*\{\s*[\d.]+\s*\}\s*\{\s*[\d.]+\s*\})", x)
        ]
        if len(pq) < len(stated):
            return False, "a stated value cannot be read"
        p = pq[-1]

        def golds_for(q: Quantity) -> list[Quantity]:
            # a gold chain T = 328 K = 55 C: a prediction in C is compared with the C link only
            same = [g for g in gq if effective_unit(g) and effective_unit(q) and same_unit(effective_unit(g), effective_unit(q))]
            return same or gq

        for extra in pq[:-1]:
            # a chained prediction (x = 5 = 2): every value it states must match the gold
            if not any(compare_quantities(g, extra)[0] for g in golds_for(extra)):
                return False, "a stated value does not match"
        reasons = []
        for g in golds_for(p):
            ok, why = compare_quantities(g, p)
            if ok:
                return True, why
            reasons.append(why)
        if any(g.unit and not is_unit(g.unit) for g in gq) and not p.unit:
            # a gold such as 0.5 R (a symbol, not a unit): EX rules decide
            ok, why = ctx.full(AnswerType.EX, gold, pred)
            if ok:
                return True, why
        return False, reasons[0]
    if not gq:
        return ctx.full(AnswerType.EX, gold, pred)
    if any(g.unit and not is_unit(g.unit) for g in gq):
        return ctx.full(AnswerType.EX, gold, pred)
    gsegs, _ = split_relations(gold, frozenset({"="}))
    psegs, _ = split_relations(pred, frozenset({"="}))
    if len(gsegs) == 2 and len(psegs) == 2 and _value_lhs(gsegs) and _value_lhs(psegs):
        # beta = 1 stated as v = c: the same relation by the identities (EQ rules)
        return equation_equal(gold, pred, expression=lambda a, b: ctx.full(AnswerType.EX, a, b), definitions=ctx.definitions)
    return False, "no number found"


_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "a hundred": 100, "one hundred": 100, "none": 0, "infinitely many": -1})


def _strip_symbolic_unit(pred: str, text: str) -> str:
    r"""``-0.167\,m_{0}`` with the symbolic unit ``m_0`` -> ``-0.167``."""
    p, t = norm_string(pred), norm_string(text)
    if t and p.endswith(t) and len(p) > len(t):
        head = p[: -len(t)].rstrip()
        if head and (head[-1].isdigit() or head[-1] in "}."):
            return head
    return pred


_VALUE_RELS = frozenset({"=", "<", ">", "<=", ">="})


def _closed_quantity(text: str, hint: str | None, constants: bool = True) -> tuple[list[Quantity], str]:
    r"""A closed form as a quantity: ``\sqrt{2}``, ``10\ln 2\ \mathrm{s}``, ``\frac{2GM_\odot}{c^2}``.

    Returns ``([quantity], kind)`` with kind ``"pi"`` (written with ``\pi``), ``"const"`` (named
    constants, evaluated in SI by :func:`studybench.verify.physics.constants.constant_value` and stated in the
    hint's unit when one is given; only when ``constants``) or ``""``; ``([], "")`` when it is none.
    """
    body, u = split_unit_suffix(text)
    for b, un in ((text, ""), (body, u)) if u else ((text, ""),):
        if not plain_value_text(b) or ODD_TEXT_GROUP.search(b):
            continue
        try:
            al = new_aliases(b)
            expr = to_sympy(b, al)
        except LatexError:
            continue
        v = closed_value(expr)
        if v is not None and abs(v.imag) < 1e-12:
            # evaluation noise (1e-16 for a zero) is 0; an exact tiny value (1/10^{14}) is not
            tiny = abs(v.real) <= 1e-14 and expr.is_zero is not False
            return [Quantity(0.0 if tiny else v.real, un)], "pi" if re.search(r"\\pi(?![A-Za-z])", b) else ""
        if un or not constants:
            continue
        cv = constant_value(expr, al.keys_by_name())
        if cv is not None:
            if hint and cv[1]:
                conv = convert_unit(cv[0], cv[1], hint)
                if conv is not None:
                    return [Quantity(conv, hint)], "const"
            return [Quantity(*cv)], "const"
    return [], ""


def _pi_radians(gq: list[Quantity], g_pi: bool, pq: list[Quantity], p_pi: bool) -> tuple[list[Quantity], list[Quantity]]:
    r"""A unitless closed form written with ``\pi`` beside an angle in degrees is in radians (``\pi/3`` = 60°)."""
    if p_pi and len(pq) == 1 and not pq[0].unit and any(g.degrees for g in gq):
        pq = [replace(pq[0], unit="rad")]
    if g_pi and len(gq) == 1 and not gq[0].unit and len(pq) == 1 and pq[0].degrees:
        gq = [replace(gq[0], unit="rad")]
    return gq, pq


def _as_difference(qs: list[Quantity]) -> list[Quantity]:
    """Lone Celsius / Fahrenheit degrees read as a temperature difference (``delta_degC``)."""
    return [replace(q, unit="delta_" + q.unit) if q.unit in ("degC", "degF") else q for q in qs]


def _norm_label(lhs: str) -> str:
    r"""``v_{\mathrm{max}}`` -> ``v_{\max}``: an upright operator name is the operator."""
    return re.sub(r"\\(?:mathrm|text|rm|operatorname)\s*\{\s*(max|min|sup|inf|lim)\s*\}", r"\\\1", lhs)


def _value_lhs(segs: list[str]) -> str:
    """The left side of ``v = 3 m/s`` (a symbolic first segment of a relation chain), else ""."""
    if len(segs) < 2 or not segs[0] or not re.search(r"[A-Za-z]", segs[0]):
        return ""
    return "" if quantity_candidates(segs[0]) else segs[0]


def nv_gold_check(box: str) -> str | None:
    """Whether an NV gold box states a number (plain, or a closed form SymPy can read).

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when it does, else a short reason.
    """
    if quantity_candidates(box):
        return None
    try:
        to_sympy(rhs(box))
        return None
    except LatexError as e:
        return f"not a number ({e})"


RULE = Rule(fast=None, full=nv_rule, gold_check=nv_gold_check)
"""NV: the full tier decides (numbers, units, tolerance); the gold check wants a number."""
