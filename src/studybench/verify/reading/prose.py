r"""Words in answers: normalised words, prose between formulas, trailing remarks, conditions (docs/protocol.md 5).

* :func:`prose_words`: the normalised words of a phrase (case, punctuation, hyphens, articles,
  plurals, British spellings, a small synonym lexicon); the QL rule and the words between formulas
  of EX answers compare these.
* :func:`prose_segments`: an answer cut into formulas and prose groups (``\text{...}`` with a space).
* :func:`strip_remark`, :func:`trailing_words`: a trailing remark or phrase split from the formula.
* :func:`split_condition`, :func:`split_conditions`: a stated condition (``\text{ for } r < R``)
  split from the value; a gold's condition must be stated, and a prediction may not add one.

Pure string work, safe in-process. None of these raises.
"""

from __future__ import annotations

import re

from studybench.answers import match_brace
from studybench.verify.reading.latex import norm_string, norm_text
from studybench.verify.verdict import RuleResult

__all__ = [
    "prose_after_math",
    "prose_equal",
    "prose_segments",
    "prose_words",
    "split_condition",
    "split_conditions",
    "strip_remark",
    "trailing_words",
]


# ---------------------------------------------------------------------------------------------
# words

_ARTICLES = frozenset({"a", "an", "the"})
_SPELLING_SKIP = frozenset({"wise", "rise", "noise", "precise", "concise", "exercise", "otherwise", "likewise", "expertise", "premise", "promise", "surprise", "raise", "praise", "poise", "arise"})
_SYNONYMS = {
    "anticlockwise": "counterclockwise", "counter clockwise": "counterclockwise", "counter-clockwise": "counterclockwise",
    "doesn't": "does not", "don't": "do not", "can't": "cannot", "isn't": "is not", "won't": "will not",
}


def _spelling(w: str) -> str:
    """British to American spelling of one word (``polarised`` -> ``polarized``, ``colour`` -> ``color``).

    ``centre`` -> ``center``; words such as ``clockwise`` or ``noise`` are left alone.
    """
    if w in _SPELLING_SKIP or w.endswith("wise"):
        return w
    m = re.fullmatch(r"([a-z]{3,})is(e|ed|es|ing|ation|ations)", w)
    if m:
        return m.group(1) + "iz" + m.group(2)
    if re.fullmatch(r"[a-z]{2,}our(s?)", w) and w not in ("four", "hour", "hours", "pour", "tour", "your", "yours", "sour", "flour"):
        return w[: w.rindex("our")] + "or" + w[w.rindex("our") + 3 :]
    if re.fullmatch(r"[a-z]{3,}tre(s?)", w):
        return w[: w.rindex("tre")] + "ter" + w[w.rindex("tre") + 3 :]
    return "gray" if w == "grey" else w


def prose_words(s: str) -> list[str]:
    """The normalised words of one clause.

    Case-folded, hyphens as spaces, articles dropped, a few synonyms mapped (``anticlockwise`` ->
    ``counterclockwise``, ``can't`` -> ``cannot``), British spellings mapped, a plural or third-person
    ``s`` removed.

    Args:
        s: a phrase, possibly with LaTeX text wrappers.

    Returns:
        The words in order.
    """
    t = norm_text(s)
    for a, b in _SYNONYMS.items():
        t = re.sub(r"(?<![a-z])" + re.escape(a) + r"(?![a-z])", b, t)
    t = t.replace("-", " ").replace("\u2013", " ").replace("/", " / ")
    out = []
    for w in t.split():
        if w in _ARTICLES:
            continue
        w = _spelling(w)
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        out.append(w)
    return out


def prose_equal(a: str, b: str) -> bool:
    """Whether two phrases have the same normalised words (:func:`prose_words`).

    Args:
        a: a phrase.
        b: another phrase.

    Returns:
        Whether their words are equal, in order.
    """
    return prose_words(a) == prose_words(b)


# ---------------------------------------------------------------------------------------------
# prose between formulas

_PROSE = re.compile(r"\\(?:text|mbox|textrm|textit|textbf)\s*\{")


def prose_segments(s: str) -> list[tuple[bool, str]]:
    r"""Cut an answer at its prose groups (``\text{...}`` with a space inside).

    One-word groups (``\text{max}``) stay inside the math.

    Args:
        s: one answer.

    Returns:
        ``(is_prose, text)`` pieces in order, empty pieces dropped. Never raises.
    """
    out: list[tuple[bool, str]] = []
    i = pos = 0
    while True:
        m = _PROSE.search(s, pos)
        if not m:
            break
        end = match_brace(s, m.end() - 1)
        if end < 0:
            break
        content = s[m.end() : end - 1].strip()
        if " " in content:
            math = s[i : m.start()].strip()
            if math:
                out.append((False, math))
            out.append((True, content))
            i = end
        pos = end
    tail = s[i:].strip()
    if tail:
        out.append((False, tail))
    return out


def prose_after_math(seg: list[tuple[bool, str]]) -> bool:
    r"""Whether a formula follows some prose (``A \text{ for } B``), not only trailing words.

    Args:
        seg: the pieces of :func:`prose_segments`.

    Returns:
        ``True`` when a formula piece comes after a prose piece.
    """
    seen_prose = False
    for is_p, _ in seg:
        if is_p:
            seen_prose = True
        elif seen_prose:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# remarks and conditions

_REMARK = re.compile(
    r"\\(?:text|mbox|textrm|textit)\s*\{\s*\([^{}]*\)\s*\}\s*$"  # \text{(both rotating)}
    r"|\s*\((?=[^()\\^_=]*[A-Za-z]{3,}\s+[A-Za-z]{3,})[^()\\^_=]*\)\s*$"  # (zero outside): prose only
)
_TRAILING_SPACE = re.compile(r"(?:\\[,;: ]|~|\\q?quad(?![A-Za-z])|\s)+$")
_CONDITION = re.compile(r"\\(?:text|mbox|textrm)\s*\{\s*,?\s*(?:for|if|when|where|with)\b")


def strip_remark(s: str) -> str:
    r"""Drop a trailing parenthetical remark: ``\text{ (both rotating)}``, ``(axial, zero outside)``.

    Args:
        s: one answer.

    Returns:
        ``s`` without the remark (``s`` itself when nothing would be left).
    """
    t = _TRAILING_SPACE.sub("", s)
    for _ in range(3):
        t2 = _TRAILING_SPACE.sub("", _REMARK.sub("", t))
        if t2 == t:
            break
        t = t2
    return t or s


def trailing_words(s: str) -> tuple[str, str]:
    r"""Split a trailing remark or phrase from the formula.

    Args:
        s: one answer (``v_0 \text{ upward}``, ``\omega \text{ (counterclockwise)}``,
            ``E (outside the sphere)``).

    Returns:
        ``(body, words)``; ``(s, "")`` when there are none.
    """
    body = strip_remark(s)
    if body != s:
        return body, s[len(body) :]
    m = re.search(r"\\(?:text|mbox|textrm|textit)\s*\{\s*([A-Za-z][A-Za-z \-]*)\}\s*\.?\s*$", s)
    if m and s[: m.start()].strip() and not _CONDITION.match(s[m.start() :]):
        return _TRAILING_SPACE.sub("", s[: m.start()]), m.group(1)
    return s, ""


def split_condition(s: str) -> tuple[str, str]:
    r"""Split the stated condition from a value: ``B = 0 \text{ for } r < r_1``.

    Args:
        s: one answer.

    Returns:
        ``(value, condition)``; ``(s, "")`` without a condition.
    """
    m = _CONDITION.search(s)
    if not m or not s[: m.start()].strip():
        return s, ""
    return _TRAILING_SPACE.sub("", s[: m.start()]).rstrip(","), s[m.start() :]


def split_conditions(gold: str, pred: str) -> tuple[str, str] | RuleResult:
    r"""The gold and the prediction without their conditions (``\text{ for } r < R``), when these agree.

    A gold condition must be stated, and a prediction may not add a condition or definition the gold
    does not state.

    Args:
        gold: one gold answer.
        pred: one predicted answer.

    Returns:
        ``(gold value, predicted value)`` (both unchanged when neither states a condition), or a
        failing :data:`studybench.verify.verdict.RuleResult` that says what differs.
    """
    gv, gc = split_condition(gold)
    pv, pc = split_condition(pred)
    if gc and not pc:
        return False, "the gold's condition is missing"
    if pc and not gc:
        return False, "the prediction adds a condition or definition the gold does not state"
    if gc and _condition_key(gc) != _condition_key(pc):
        return False, "different condition"
    return (gv, pv) if gc else (gold, pred)


def _condition_key(c: str) -> list[str]:
    t = re.sub(r"\\(?:text|mbox|textrm)\s*\{([^{}]*)\}", r" \1 ", c)
    t = re.sub(r"\b(?:for|if|when|where|with)\b", " ", t)
    parts = re.split(r"\band\b|,|;|\\quad|\\wedge", t)
    return sorted(norm_string(x).replace(" ", "") for x in parts if x.strip())
