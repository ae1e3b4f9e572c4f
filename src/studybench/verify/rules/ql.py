r"""QL: short qualitative phrases by normalised text (docs/protocol.md section 5).

Two tiers, like every rule:

* :func:`ql_rule` (fast tier, in-process): normalised text equality (:func:`studybench.verify.reading.prose.prose_words`),
  labelled clauses in any order, ``Name (M42)`` either way. It decides every prose gold; real
  paraphrase is left to the LLM judge.
* :func:`ql_full_rule` (worker side): a gold that is really a formula or a number (no prose) is left
  undecided by :func:`ql_rule` and compared by the EX rule (asked of the registry,
  :meth:`studybench.verify.rules._shared.Context.full`), without a unit hint. This second chance is deliberate: a QL gold such as ``\frac{1}{2}`` or
  ``v_0 \cos\theta`` is an expression however it is labelled.
"""

from __future__ import annotations

import re

from studybench.records import AnswerType
from studybench.verify.reading.latex import norm_text
from studybench.verify.reading.prose import prose_words
from studybench.verify.reading.truth import truth_value
from studybench.verify.rules._shared import Context, Rule
from studybench.verify.verdict import RuleResult

__all__ = ["MAX_QL_CHARS", "RULE", "ql_alternatives", "ql_full_rule", "ql_gold_check", "ql_rule"]


MAX_QL_CHARS = 4000
"""QL texts longer than this are compared by plain normalised equality only (the fast tier runs
in-process, so every rule here must stay cheap)."""


_YES_NO = {"yes", "no", "true", "false"}


def _looks_mathy(s: str) -> bool:
    """A QL gold that is really a formula or number (no prose)."""
    if "\\text" in s:
        return False
    words = re.findall(r"(?<!\\)\b[A-Za-z]{4,}\b", s)
    return not words


def _ql_clauses(s: str) -> list[tuple[str, ...]]:
    """Clauses (split at ``;``) as word tuples.

    Clauses that all carry a label (``M87: synchrotron cooling``) may come in any order and are sorted;
    unlabelled clauses keep their order (``increases; decreases`` is not ``decreases; increases``).
    """
    t = re.sub(r"\\(?:text|mathrm|textrm|textbf|textit|mbox|emph)\s*\{([^{}]*)\}", r"\1", s)
    raw = [c for c in t.split(";") if prose_words(c)]
    clauses = [tuple(prose_words(c)) for c in raw]
    if len(raw) > 1 and all(re.match(r"\s*[^:]{1,40}:\s*\S", c) for c in raw):
        return sorted(clauses)
    return clauses


def ql_alternatives(gold: str) -> list[str]:
    """The names a short gold accepts: ``Aries (Ari)`` and ``Orion Nebula (M42)`` either way.

    The parenthesis must hold a short designation (one token of at most six characters with a capital
    or a digit), not a description (``Red (longer wavelength)``).

    Args:
        gold: one QL gold box.

    Returns:
        ``[gold, name, designation]``, or ``[gold]``.
    """
    t = re.sub(r"\\(?:text|mathrm|textrm|textbf|textit|mbox|emph)\s*\{([^{}]*)\}", r"\1", gold).strip()
    m = re.fullmatch(r"([A-Za-z][\w .'-]{0,40}?)\s*\(([A-Za-z0-9][\w.-]{0,5})\)", t)
    if m and len(m.group(1).split()) <= 4 and re.search(r"[A-Z0-9]", m.group(2)):
        return [gold, m.group(1), m.group(2)]
    return [gold]


def ql_rule(gold: str, pred: str) -> RuleResult:
    """QL: normalised text equality (docs/protocol.md section 5); the fast tier's rule.

    Case, punctuation, hyphens, articles, plurals, British spellings and a small synonym lexicon are
    ignored (:func:`studybench.verify.reading.prose.prose_words`), labelled clauses separated by ``;`` may come
    in any order, and a short gold written ``Name (M42)`` accepts either name. Anything else (real
    paraphrase, glosses, hedges) is left to the LLM judge.

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        ``(match, reason)``: decided for prose golds; ``(None, "formula-like QL")`` for a gold that is
        really a formula or number, which :func:`ql_full_rule` decides.
    """
    if norm_text(gold) == norm_text(pred):
        return True, "same text"
    if norm_text(gold) in _YES_NO:
        # a yes/no gold is judged like TF: "Yes." is right, "Yes, but only when ..." is a hedge
        g, p = truth_value(gold), truth_value(pred)
        if p is None:
            return False, f"not a yes/no answer: {pred[:40]!r}"
        return (g == p), f"yes/no: {p} vs {g}"
    if len(gold) > MAX_QL_CHARS or len(pred) > MAX_QL_CHARS:
        return False, "different text (too long for the phrase rules)"
    for g in ql_alternatives(gold):
        gk = _ql_clauses(g)
        if gk and _ql_clauses(pred) == gk:
            return True, "same text after normalisation"
    if _looks_mathy(gold):
        return None, "formula-like QL"
    return False, "different text"


def ql_full_rule(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    """QL on the worker side: a formula-like gold that :func:`ql_rule` left undecided, by the EX rule.

    The fast tier runs :func:`ql_rule` first; only a gold with no prose (``_looks_mathy``) reaches
    this function, and it is compared as an expression (the EX rule, through the registry; no unit
    hint).

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the unit hint (not passed on).
        ctx: the verification's context (the EX rule, the definitions).

    Returns:
        ``(decision, reason)`` of the EX rule.
    """
    return ctx.full(AnswerType.EX, gold, pred)


def ql_gold_check(box: str) -> str | None:
    """Whether a QL gold box has any text.

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when it has, else a short reason.
    """
    return None if norm_text(box) else "empty text"


RULE = Rule(fast=ql_rule, full=ql_full_rule, gold_check=ql_gold_check)
"""QL: the fast tier decides every prose gold; a formula-like gold gets the EX rule in the full tier."""
