"""TUP: an ordered tuple, compared slot by slot in ``type_sequence`` order (docs/protocol.md section 5)."""

from __future__ import annotations

from studybench.records import AnswerType
from studybench.verify.comparison.parts import regroup
from studybench.verify.rules._shared import Rule, compound_gold_check, slot_as_expression, whole_box_text
from studybench.verify.verdict import RuleResult, SlotRule

__all__ = ["RULE", "tup_rule"]


def tup_rule(
    golds: list[str], preds: list[str], ts: list[AnswerType], slot: SlotRule, hints: list[str | None]
) -> RuleResult:
    """Compare a TUP answer slot by slot, each slot by the rule of its type in ``type_sequence``.

    A single predicted box holding all slots is split at top-level commas (then semicolons)
    (:func:`studybench.verify.comparison.parts.regroup`). Without a ``type_sequence`` of the right length every
    slot is compared as EX.

    Args:
        golds: the gold boxes, one per slot (at least one).
        preds: the predicted boxes (at least one).
        ts: the primitive type of each slot (``type_sequence``).
        slot: compares one gold box with one predicted box of a type (the fast or the full tier).
        hints: one unit hint per gold box (:func:`studybench.verify.physics.units.split_hints`).

    Returns:
        ``(decision, reason)``: ``False`` at the first slot that fails (the reason names it), ``None``
        when some slot is undecided, else ``True``.
    """
    types = ts if len(ts) == len(golds) else [AnswerType.EX] * len(golds)
    preds = regroup(preds, len(golds))
    if len(preds) != len(golds):
        return False, f"expected {len(golds)} answers, got {len(preds)}"
    undecided = False
    for i, (g, p, t) in enumerate(zip(golds, preds, types, strict=True)):
        ok, why = slot(g, p, t, hints[i])
        if ok is False:
            return False, f"slot {i + 1} ({t.value}): {why}"
        if ok is None:
            undecided = True
    return (None, "") if undecided else (True, f"all {len(golds)} slots match")



RULE = Rule(fast=whole_box_text, full=slot_as_expression, gold_check=compound_gold_check, compound=tup_rule)
"""TUP: its slots combined by :func:`tup_rule`; a slot typed TUP is one whole box (text, then EX)."""
