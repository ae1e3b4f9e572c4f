"""MC: one option letter, or the same option text (docs/protocol.md section 5).

String-level and decisive: the fast tier always decides MC in-process (no worker).
"""

from __future__ import annotations

import re

from studybench.verify.reading.latex import norm_text
from studybench.verify.rules._shared import Rule
from studybench.verify.verdict import RuleResult

__all__ = ["RULE", "mc_gold_check", "mc_rule"]


_MC_WRAP = re.compile(r"\\(?:text|mathrm|textbf|mathbf|textrm|mbox|textit|mathit|emph|boldsymbol|bm)\s*\{([^{}]*)\}")
_MC_SPACING = re.compile(r"\\(?:,|;|:|!| |quad(?![A-Za-z])|qquad(?![A-Za-z]))|~")
_MC_HEAD = re.compile(r"\(\s*([A-Za-z])\s*\)|\[\s*([A-Za-z])\s*\]|([A-Za-z])(?![A-Za-z0-9])")
_MC_SEP = re.compile(r"\s*[:.)\],-]")
_MC_JOIN = re.compile(r"\s*(?:,|;|/|&|\+|\\&|\b(?:and|or|und|oder|et|ou|y|und/or|and/or)\b)\s*", re.IGNORECASE)
_MC_OTHER = re.compile(r"\(\s*([A-Za-z])\s*\)|([A-Za-z])(?![A-Za-z0-9])")
_MC_NEGATION = re.compile(r"\b(?:incorrect|wrong|not|false|neither|none|also|either|maybe|possibly|plausible|or|and)\b", re.IGNORECASE)


def _mc_letter(s: str) -> str | None:
    """The one option letter a box commits to (:func:`_mc_letter_first`).

    ``None`` when the box also names another option letter (``B (or C)``, ``A is wrong; the answer is
    C``) or qualifies its choice (``A is incorrect``).
    """
    letter = _mc_letter_first(s)
    if letter is None or not isinstance(s, str):
        return letter
    t = re.sub(r"\\(?:text|mathrm|textbf|textrm|mbox|emph)\s*\{([^{}]*)\}", r" \1 ", s)
    t = t.replace("$", " ").replace("{", " ").replace("}", " ")
    # other standalone option letters (A-H, either case) anywhere after the choice
    m = re.search(r"(?<![A-Za-z\\])\(?([A-Ha-h])\)?(?![A-Za-z0-9_^'=(])", t)
    rest = t[m.end() :] if m else t
    cls = "A-H" if letter == (m.group(1) if m else letter) else "a-h"
    others = {
        x.upper()
        for x in re.findall(r"(?<![A-Za-z0-9\\_^/*+=-])\(?([" + cls + r"])\)?(?![A-Za-z0-9_^'=(/*+-])", rest)
    }
    if others - {letter}:
        return None
    words = re.sub(r"\\[A-Za-z]+", " ", rest)
    if _MC_NEGATION.search(words) and not re.search(r"[=<>]", rest):
        return None
    return letter


def _mc_letter_first(s: str) -> str | None:
    r"""The option letter a box starts with: ``E``, ``(E)``, ``\text{E}``, ``Option E``, ``E: text``.

    Also ``\textbf{E}``, ``E. text``, ``(E) text``. ``None`` when there is none, and when the box hedges
    between options (``A and C``, ``A or B``, ``A, B``, ``A B``, ``(A) (C)``): a second standalone
    letter of the same case right after the first (joined by and / or / a comma / a slash / a space,
    or after a separator) means several options.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return None
    t = s
    for _ in range(3):
        t2 = _MC_WRAP.sub(r" \1 ", t)
        if t2 == t:
            break
        t = t2
    t = _MC_SPACING.sub(" ", t)
    t = t.replace("$", " ").replace("{", " ").replace("}", " ")
    t = " ".join(t.split())
    t = re.sub(
        r"^(?:(?:i\s+)?(?:choose|pick|select)\s+|(?:the\s+)?(?:correct\s+|final\s+|right\s+|best\s+)?(?:option|choice|answer)(?:\s+is)?\s*:?\s*)+",
        "", t, flags=re.IGNORECASE,
    )
    m = _MC_HEAD.match(t)
    if not m:
        return None
    letter = next(g for g in m.groups() if g)
    rest = t[m.end() :]
    ms = _MC_SEP.match(rest)
    after = rest[ms.end() :] if ms else rest
    if after and not ms and not after[:1].isspace() and m.group(3):
        return None  # "A1", "Ax": not a bare letter
    # a second option letter right after the first (possibly after a joining word) is hedging
    mj = _MC_JOIN.match(after)
    tail = after[mj.end() :] if mj else after.lstrip()
    mo = _MC_OTHER.match(tail)
    if mo:
        other = mo.group(1) or mo.group(2)
        joined = mj is not None or not ms
        after_other = tail[mo.end() :].lstrip()
        formula = mo.group(2) is not None and after_other[:1] in ("=", "_", "^", "\\", "<", ">") and mj is None
        if other.isupper() == letter.isupper() and (joined or not after_other) and not formula:
            return None
    return letter.upper()


def mc_rule(gold: str, pred: str) -> RuleResult:
    """MC: option-letter equality, case-insensitive (docs/protocol.md section 5).

    A gold that is a word (``Pluto``) needs the same normalised text, optionally after an option-letter
    prefix in the prediction. Hedging or negation (``A or C``, ``B (or C)``, ``A is incorrect``) is
    wrong.

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        ``(match, reason)``; always decided.
    """
    g = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", gold).strip()
    if re.fullmatch(r"\(?\s*[A-Za-z]\s*\)?", g.replace("{", "").replace("}", "")):
        gl = _mc_letter(g)
        pl = _mc_letter(pred)
        if pl is None:
            return False, f"no option letter in {pred[:40]!r}"
        return (gl == pl), f"option {pl} vs {gl}"
    gt = norm_text(gold)
    pt = norm_text(pred)
    if gt == pt:
        return True, "same option text"
    stripped = re.sub(r"^[a-z]\s+", "", pt)
    if stripped == gt:
        return True, "option text"
    head = _gloss_head(pred)
    if head is not None and re.sub(r"^[a-z]\s+", "", norm_text(head)) == gt:
        return True, "option text with a gloss"
    return False, "option text"


def _gloss_head(pred: str) -> str | None:
    """A prediction's option text before a trailing parenthetical gloss (``Jupiter (the largest planet)``).

    ``None`` when there is no such gloss, or when the gloss names another option letter or qualifies the
    choice (``Jupiter (or Saturn)``, ``Jupiter (not sure)``).
    """
    m = re.fullmatch(r"\s*(.*?\S)\s*\(([^()]{1,200})\)\s*\.?\s*", pred, flags=re.DOTALL)
    if not m or "(" in m.group(1) and ")" not in m.group(1):
        return None
    gloss = m.group(2)
    if _MC_NEGATION.search(gloss) or re.search(r"(?<![A-Za-z])[A-H](?![A-Za-z])", gloss):
        return None
    return m.group(1)


def mc_gold_check(box: str) -> str | None:
    """Whether an MC gold box can be read.

    Args:
        box: the gold box content (not empty).

    Returns:
        ``None`` when readable, else a short reason.
    """
    g = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", box).strip()
    return None if g else "empty option"


RULE = Rule(fast=mc_rule, full=None, gold_check=mc_gold_check)
"""MC: the fast tier always decides (option letters, option text)."""
