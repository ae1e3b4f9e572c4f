"""ALT: any of the gold's alternative forms is accepted (docs/protocol.md section 5)."""

from __future__ import annotations

import re

from studybench.records import AnswerType
from studybench.verify.reading.latex import norm_string
from studybench.verify.rules._shared import Rule, compound_gold_check, slot_as_expression, whole_box_text
from studybench.verify.verdict import RuleResult, SlotRule

__all__ = ["RULE", "alt_rule"]


def alt_rule(
    golds: list[str], preds: list[str], ts: list[AnswerType], slot: SlotRule, hints: list[str | None]
) -> RuleResult:
    """Compare an ALT answer: a prediction matching any gold alternative is correct.

    Each gold box is one alternative, compared by the rule of its type in ``type_sequence`` (EX
    without one of the right length; an alternative typed TUP is compared as a whole box). Several
    different predicted boxes are accepted only when each is an accepted alternative (no hedging);
    ``A or B`` in one box only when every option it names is one.

    Args:
        golds: the gold alternatives, one per box (at least one).
        preds: the predicted boxes (at least one).
        ts: the primitive type of each alternative (``type_sequence``).
        slot: compares one gold box with one predicted box of a type (the fast or the full tier).
        hints: one unit hint per gold box (:func:`studybench.verify.physics.units.split_hints`).

    Returns:
        ``(decision, reason)``; ``None`` when only undecided comparisons could still match.
    """
    types = ts if len(ts) == len(golds) else [AnswerType.EX] * len(golds)
    undecided = False
    if len({norm_string(p) for p in preds}) > 1:
        # several different boxes: each must be an accepted alternative (no hedging)
        verdicts = [[slot(g, p, t, h)[0] for g, t, h in zip(golds, types, hints, strict=True)] for p in preds]
        if all(any(v is True for v in row) for row in verdicts):
            return True, f"each of {len(preds)} answers is an accepted alternative"
        if all(any(v is not False for v in row) for row in verdicts):
            return None, ""
        return False, "an answer matches no alternative"
    for g, t, h in zip(golds, types, hints, strict=True):
        for p in preds:
            ok, why = slot(g, p, t, h)
            if ok:
                return True, f"matches an alternative ({t.value}): {why}"
            if ok is None:
                undecided = True
    # "Aries or Pisces" when both are accepted alternatives: every option named is right
    for p in preds:
        parts = _or_parts(p)
        if len(parts) < 2:
            continue
        hits = [any(slot(g, q, t, h)[0] is True for g, t, h in zip(golds, types, hints, strict=True)) for q in parts]
        if all(hits):
            return True, f"names {len(parts)} options, each an accepted alternative"
    return (None, "") if undecided else (False, "matches no alternative")


_OR_TEXT = re.compile(r"^\s*\\(?:text|mathrm|textrm|mbox)\s*\{([^{}]*)\}\s*$")
_OR_SPLIT = re.compile(r"\s*\\(?:text|mbox|textrm)\s*\{\s*or\s*\}\s*|\s+or\s+")


def _or_parts(p: str) -> list[str]:
    r"""The options of ``A or B`` (``\text{Aries or Pisces}``, ``x = 1 \text{ or } x = 2``).

    One part when there is no top-level "or".
    """
    m = _OR_TEXT.match(p)
    if m:
        return ["\\text{" + x.strip() + "}" for x in re.split(r"\s+or\s+", m.group(1)) if x.strip()]
    parts = [x for x in _OR_SPLIT.split(p) if x.strip()]
    if any(x.count("{") != x.count("}") for x in parts):
        return [p]
    return parts



RULE = Rule(fast=whole_box_text, full=slot_as_expression, gold_check=compound_gold_check, compound=alt_rule)
"""ALT: its slots combined by :func:`alt_rule`; a slot typed ALT is one whole box (text, then EX)."""
