r"""Truth values as written: ``True``, ``no``, ``\text{Yes}``, ``No, it does not hold``, ``That claim is false``.

:func:`truth_value` reads the one truth value a box states, or none (a hedge: ``True, but only
...``; a double negation: ``it is not false``; both values: ``true, not false``). Pure string work,
safe in-process: the TF rule and the yes/no QL golds read it.
"""

from __future__ import annotations

import re

from studybench.verify.reading.latex import norm_text

__all__ = ["truth_value"]


_TRUE = {"true", "yes", "correct", "right", "t", "y", "holds", "valid"}
_FALSE = {"false", "no", "incorrect", "wrong", "f", "n", "invalid", "not true"}
_TF_HEDGE = re.compile(
    r"\b(?:true|false|yes|no|correct|incorrect|wrong|right|but|except|however|unless|otherwise|fails?|only|depends|sometimes|not)\b"
)
_TF_LEAD = re.compile(r"^\s*(true|false|yes|no|correct|incorrect)\s*(?:[,;:.!]|--|\u2014|\u2013)\s*\S", re.IGNORECASE)
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textrm|textbf|textit|mbox|emph|mathbf|mathit)\s*\{")

# the words that carry a truth value in a sentence, and their values
_CORE = {
    "true": True, "yes": True, "correct": True, "right": True, "valid": True, "holds": True, "hold": True,
    "false": False, "no": False, "incorrect": False, "wrong": False, "invalid": False, "fails": False, "fail": False,
}
_NEGATION = {"not", "never"}
# words that may stand around the truth value without changing it ("the statement is true")
_FILLER = {
    "the", "this", "that", "it", "its", "statement", "claim", "assertion", "proposition", "given", "above",
    "answer", "final", "is", "was", "be", "does", "do", "did", "indeed", "definitely", "certainly", "therefore",
    "thus", "so", "hence", "a", "an", "entirely", "completely", "absolutely", "simply", "in", "fact", "actually",
    "result", "conclusion", "verdict", "stated", "as",
}


def _plain(s: str) -> str:
    t = _WRAPPERS.sub("", s).replace("}", "").replace("{", "").replace("$", "")
    return re.sub(r"\\(?:[,;: !]|q?quad(?![A-Za-z]))", " ", t)


def _sentence_value(text: str, bare: bool = False) -> bool | None:
    """The truth value of a sentence made only of truth words, negations and filler, else ``None``.

    ``That claim is false`` -> False, ``it does not hold`` -> False, ``the statement is correct`` ->
    True. One negation flips a true value (``not true``); a negated false value (``not false``, ``it is
    not false``) and two negations are ambiguous, as are sentences naming both values.
    """
    t = text.lower().replace("\u2019", "'")
    t = re.sub(r"n't\b", " not", t)
    t = re.sub(r"'s\b", " is", t)
    words = re.findall(r"[a-z]+|[^\sa-z]", t)
    words = [w for w in words if w not in (",", ".", ";", ":", "!", "-", "\u2014", "\u2013", "(", ")")]
    if not words or len(words) > 16:
        return None
    cores, negations = [], 0
    for w in words:
        if w in _CORE:
            cores.append(_CORE[w])
        elif w in _NEGATION:
            negations += 1
        elif w not in _FILLER:
            return None  # a content word: no bare truth statement
    if not cores and bare and negations <= 1 and any(w in ("is", "was", "does", "do", "did") for w in words):
        return negations == 0
    if not cores or len(set(cores)) > 1:
        return None
    value = cores[0]
    if negations == 0:
        return value
    if negations == 1 and value is True and len(cores) == 1:
        return False
    return None  # "not false", "not wrong", two negations: ambiguous


def truth_value(s: str) -> bool | None:
    r"""The truth value a box states (the TF rule, and QL golds that answer yes or no).

    A synonym alone (``True``, ``no``, ``\text{Yes}``); a sentence made of a truth word, at most one
    negation of a true word and filler (``That claim is false``, ``The statement is true.``, ``It does
    not hold``); a synonym leading a sentence that agrees (``Yes, it holds``, ``No, it does not hold``)
    or a justification after a comma, colon or dash (``No, they cannot be distinguished``). Not a
    qualified one (``True, but only ...``), a negated false word (``not false``, ``it is not false
    that ...``), a double negation, nor one naming both values.

    Args:
        s: one box content.

    Returns:
        ``True`` / ``False``, or ``None`` when the box states no single truth value.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return None
    t = norm_text(s)
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    plain = _plain(s).strip()
    lead = re.match(r"^\s*(yes|no)\b[\s,;:.!\u2014\u2013-]*", plain, flags=re.IGNORECASE)
    whole = None if lead and lead.end() < len(plain) else _sentence_value(plain)
    if whole is not None:
        return whole
    m = _TF_LEAD.match(plain)
    if m:
        v0 = m.group(1).lower() in _TRUE
        rest = plain[m.end() - 1 :]
    elif lead and lead.end() < len(plain):
        v0 = lead.group(1).lower() == "yes"
        rest = plain[lead.end() :]
    else:
        return None
    v1 = _sentence_value(rest, bare=True)
    if v1 is not None:
        return v0 if v1 == v0 else None  # "Yes, it holds"; "Yes, it does not hold" contradicts itself
    if not m or _TF_HEDGE.search(rest.lower()):
        return None  # "True, but only for small angles; otherwise false": no single truth value
    return v0
