"""What the rule modules share: the :class:`Rule` record, the :class:`Context` of one verification, helpers.

Private to :mod:`studybench.verify.rules`. A rule module never imports another rule module: a rule
that falls back on another answer type's rule (NV on EX, QL's second chance by EX, a TUP- or ALT-typed
slot by EX) asks the registry for it through :meth:`Context.full`; helpers two rules share live here
or lower, in :mod:`studybench.verify.comparison`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from studybench.answers import split_top_level
from studybench.records import AnswerType
from studybench.verify.physics.definitions import Definitions
from studybench.verify.physics.units import plain_quantity, split_unit_suffix
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import (
    LatexError,
    norm_text,
    relation_chain,
    split_relations,
    states_inequality,
)
from studybench.verify.reading.prose import trailing_words
from studybench.verify.verdict import RuleResult, SlotRule

__all__ = [
    "CompoundRule",
    "Context",
    "FullRule",
    "Rule",
    "compound_gold_check",
    "expression_gold_check",
    "slot_as_expression",
    "whole_box_text",
]

FullRule = Callable[[str, str, "str | None", "Context"], RuleResult]
"""``full(gold, pred, hint, context)``: one gold box against one predicted box, worker side; ``hint``
is the gold's unit hint (``gold_unit``, for the rules that use it)."""

CompoundRule = Callable[[list[str], list[str], list[AnswerType], SlotRule, list["str | None"]], RuleResult]
"""``rule(golds, preds, type_sequence, slot, hints)``: how the slots of a compound answer combine."""


@dataclass(frozen=True)
class Rule:
    """The rule of one answer type: how one gold box and one predicted box of that type compare.

    Every rule module defines one, ``RULE``; the registry (:data:`studybench.verify.rules.RULES`)
    collects them by the answer type table (:class:`studybench.answer_types.AnswerType`).

    Attributes:
        fast: the type's string-level decision, in-process (``fast(gold, pred)``); ``None`` when only
            the common string rules of :func:`studybench.verify.rules.fast_slot` apply before the full
            tier.
        full: the type's complete decision, worker side (:data:`FullRule`); ``None`` when :attr:`fast`
            always decides.
        gold_check: ``gold_check(box)`` is ``None`` when a gold box of this type can be read, else a
            short reason (:func:`studybench.verify.rules.check_gold_parsable_local`).
        compound: for a compound type (TUP, ALT), how its slots combine; ``None`` for an atomic type.
    """

    fast: Callable[[str, str], RuleResult] | None
    full: FullRule | None
    gold_check: Callable[[str], str | None]
    compound: CompoundRule | None = None


@dataclass(frozen=True)
class Context:
    """What the rules of one verification share, made per verification by the dispatch.

    Attributes:
        rules: the registry, every answer type's :class:`Rule`: the one way a rule reaches another
            type's rule (:meth:`full`).
        definitions: the item's definitions being substituted
            (:class:`studybench.verify.physics.definitions.Definitions`), or ``None`` on the plain pass.
    """

    rules: Mapping[AnswerType, Rule]
    definitions: Definitions | None = None

    def full(self, answer_type: AnswerType, gold: str, pred: str, hint: str | None = None) -> RuleResult:
        """Another answer type's full rule, in this context (a fallback: NV on EX, QL on EX ...).

        Args:
            answer_type: the type whose rule decides.
            gold: one gold box content.
            pred: one predicted box content.
            hint: the unit hint handed to that rule.

        Returns:
            ``(decision, reason)`` of that rule.

        Raises:
            ValueError: the type has no full rule.
        """
        rule = self.rules[answer_type].full
        if rule is None:
            raise ValueError(f"{answer_type.value} has no full rule")
        return rule(gold, pred, hint, self)


def whole_box_text(gold: str, pred: str) -> RuleResult:
    """A slot typed TUP or ALT (inside a compound answer) is compared as a whole box: same text first.

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        ``(True, "same text")``, else undecided (the EX rule decides in the full tier).
    """
    if norm_text(gold) == norm_text(pred):
        return True, "same text"
    return None, ""


def slot_as_expression(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    """A slot typed TUP or ALT inside a compound answer, once its text differs: the EX rule, no unit hint.

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the slot's unit hint (not passed on).
        ctx: the verification's context.

    Returns:
        ``(decision, reason)`` of the EX rule.
    """
    return ctx.full(AnswerType.EX, gold, pred)


def compound_gold_check(box: str) -> str | None:
    """A compound gold box is checked slot by slot with each slot's primitive type, not as a whole.

    Args:
        box: the gold box content.

    Returns:
        Always a reason: the caller checks the slots instead.
    """
    return "compound type: check each slot with its primitive type"


def expression_gold_check(box: str) -> str | None:
    """Whether every part and every side of a gold box converts to SymPy the way the EX rule reads it.

    The gold check of EX, and of EQ once the box is known to be an equation.

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when it converts, else the conversion's reason.
    """
    try:
        for part in split_top_level(box):
            segs = relation_chain(part)[0] if states_inequality(part) else split_relations(part, frozenset({"="}))[0]
            for seg in segs:
                if seg:
                    _read_as_rule(seg)
        return None
    except LatexError as e:
        return str(e)


def _read_as_rule(seg: str) -> None:
    r"""Convert one side of an EX gold the way the EX rule reads it.

    A trailing remark and a trailing unit (``3.44 \times 10^{5} \, \mathrm{J\,kg^{-1}}``) are not
    part of the formula; raises :class:`LatexError` when the formula cannot be read.
    """
    try:
        to_sympy(seg)
        return
    except LatexError:
        if plain_quantity(seg) is not None:  # a number with a unit: read by the NV rules
            return
        body = split_unit_suffix(trailing_words(seg)[0])[0].strip()
        if not body or body == seg.strip():
            raise
    to_sympy(body)
