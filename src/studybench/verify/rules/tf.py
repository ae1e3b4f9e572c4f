"""TF: truth values and their synonyms (PROTOCOL.md section 5).

String-level and decisive: the fast tier always decides TF in-process (no worker).
"""

from __future__ import annotations

import re

from studybench.verify.reading.latex import norm_text
from studybench.verify.verdict import RuleResult

__all__ = ["tf_gold_check", "tf_rule", "tf_value"]


_TRUE = {"true", "yes", "correct", "right", "t", "y", "holds", "valid"}
_FALSE = {"false", "no", "incorrect", "wrong", "f", "n", "invalid", "not true"}
_TF_HEDGE = re.compile(
    r"\b(?:true|false|yes|no|correct|incorrect|wrong|right|but|except|however|unless|otherwise|fails?|only|depends|sometimes|not)\b"
)
_TF_LEAD = re.compile(r"^\s*(true|false|yes|no|correct|incorrect)\s*(?:[,;:.!]|--|\u2014|\u2013)\s*\S", re.IGNORECASE)


def tf_value(s: str) -> bool | None:
    r"""The truth value a TF box states.

    A synonym alone (``True``, ``no``, ``\text{Yes}``) or one leading a justification after a comma,
    colon or dash (``No, they cannot be distinguished``), but not a qualified one (``True, but only
    ...``).

    Args:
        s: one box content.

    Returns:
        ``True`` / ``False``, or ``None`` when the box states no single truth value.
    """
    t = norm_text(s)
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    plain = re.sub(r"\\(?:text|mathrm|textrm|textbf|mbox|emph)\s*\{", "", s).replace("}", "").replace("$", "")
    m = _TF_LEAD.match(plain)
    if m:
        rest = plain[m.end() - 1 :].lower()
        if _TF_HEDGE.search(rest):
            return None  # "True, but only for small angles; otherwise false": no single truth value
        return m.group(1).lower() in _TRUE
    return None


def tf_rule(gold: str, pred: str) -> RuleResult:
    r"""TF: true/yes/correct vs false/no/incorrect synonyms, case-insensitive, inside ``\text{}``.

    Implements PROTOCOL.md section 5. A prediction that states no single truth value is wrong.

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        ``(match, reason)``; always decided.
    """
    g, p = tf_value(gold), tf_value(pred)
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
    return None if tf_value(box) is not None else "not a truth value"
