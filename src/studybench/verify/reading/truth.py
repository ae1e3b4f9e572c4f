r"""Truth values as written: ``True``, ``no``, ``\text{Yes}``, ``No, they cannot be distinguished``.

:func:`truth_value` reads the one truth value a box states, or none (a hedge: ``True, but only
...``). Pure string work, safe in-process: the TF rule and the yes/no QL golds read it.
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


def truth_value(s: str) -> bool | None:
    r"""The truth value a box states (the TF rule, and QL golds that answer yes or no).

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
