r"""EQ: equations with the same solution set (docs/protocol.md section 5).

:func:`eq_rule`: several equations are matched order-free with their labels
(:func:`studybench.verify.comparison.parts.compare_parts`), each pair by
:func:`studybench.verify.comparison.equations.equation_equal` (sides swapped, terms moved, scaled by a
constant or by a nonzero factor that clears a written denominator; a gold with a numeric right side
compares its left side and the value by the NV rules; ``x = \pm a`` states both solutions). A gold
that is no equation, or a prediction without ``=`` against a gold whose left side is one symbol, is
compared by the EX rule (through the registry). Worker side.
"""

from __future__ import annotations

from studybench.records import AnswerType
from studybench.verify.comparison.equation_forms import is_proportionality, proportionality_gold_check
from studybench.verify.comparison.equations import equation_equal
from studybench.verify.comparison.parts import compare_parts, flatten_env
from studybench.verify.physics.units import state_hint_unit
from studybench.verify.reading.latex import split_relations
from studybench.verify.rules._shared import Context, Rule, expression_gold_check
from studybench.verify.verdict import RuleResult

__all__ = ["RULE", "eq_gold_check", "eq_rule"]


def eq_rule(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    r"""EQ: the same solution set (docs/protocol.md section 5).

    Several comma-separated equations are matched order-free with their labels; a gold with a numeric
    right side compares the left side as a string/expression and the value by NV rules; otherwise
    ``lhs - rhs`` of both must be proportional by a nonzero constant or a nonzero factor that clears a
    written denominator. A prediction without ``=`` is compared with the right side when the gold's
    left side is one symbol.

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the unit hint: a gold ``T_1 = 77`` with ``\text{K}`` reads as ``T_1 = 77\,\mathrm{K}``.
        ctx: the verification's context (its definitions; the EX rule for sides that are no equations).

    Returns:
        ``(match, reason)``.
    """

    def one(g: str, p: str) -> RuleResult:
        return equation_equal(g, p, expression=lambda a, b: ctx.full(AnswerType.EX, a, b), definitions=ctx.definitions)

    gold = state_hint_unit(gold, hint)  # T_1 = 77 with the hint K: a value in kelvin, as in NV
    res = compare_parts(gold, pred, one, equations=True, definitions=ctx.definitions)
    if res is not None:
        return res
    return one(flatten_env(gold), flatten_env(pred))


def eq_gold_check(box: str) -> str | None:
    """Whether an EQ gold box is an equation whose sides convert to SymPy.

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when it is, else a short reason.
    """
    if is_proportionality(box):
        return proportionality_gold_check(box)
    if len(split_relations(box, frozenset({"="}))[0]) < 2:
        return "equation without '='"
    return expression_gold_check(box)


RULE = Rule(fast=None, full=eq_rule, gold_check=eq_gold_check)
"""EQ: the full tier decides (solution sets); the gold check wants an equation."""
