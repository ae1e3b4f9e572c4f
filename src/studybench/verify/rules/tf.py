"""TF: truth values and their synonyms (docs/protocol.md section 5).

String-level and decisive: the fast tier always decides TF in-process (no worker).
"""

from __future__ import annotations

from studybench.verify.reading.latex import norm_text
from studybench.verify.reading.truth import truth_value
from studybench.verify.rules._shared import Rule
from studybench.verify.verdict import RuleResult

__all__ = ["RULE", "tf_gold_check", "tf_rule"]


def tf_rule(gold: str, pred: str) -> RuleResult:
    r"""TF: true/yes/correct vs false/no/incorrect synonyms, case-insensitive, inside ``\text{}``.

    Implements docs/protocol.md section 5. A prediction that states no single truth value is wrong.

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        ``(match, reason)``; always decided.
    """
    g, p = truth_value(gold), truth_value(pred)
    if p is None:
        return False, f"not a truth value: {pred[:40]!r}"
    if g is None:
        return (norm_text(gold) == norm_text(pred)), "text"
    return (g == p), f"{p} vs {g}"


def tf_gold_check(box: str) -> str | None:
    """Whether a TF gold box states a truth value.

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when it does, else a short reason.
    """
    return None if truth_value(box) is not None else "not a truth value"


RULE = Rule(fast=tf_rule, full=None, gold_check=tf_gold_check)
"""TF: the fast tier always decides (truth values)."""
