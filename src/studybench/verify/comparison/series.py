r"""Series written with dots against an explicit sum (docs/protocol.md section 5, EX).

``1 + x + \frac{x^2}{2} + \cdots`` and ``\sum_{n=0}^{\infty}\frac{x^n}{n!}`` state the same series
when the sum's first terms are the written terms, one by one (:func:`series_equal`); two dotted
series when their written terms agree one by one. At least three written terms are needed (two
terms fix too little). Worker side: the terms are converted through the ordinary LaTeX path
(:func:`studybench.verify.reading.conversion.to_sympy`) with one alias table, and compared by
:func:`studybench.verify.comparison.symbolic.sym_equal`.
"""

from __future__ import annotations

import re
from typing import Any

from studybench.verify.comparison.symbolic import sym_equal
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import LatexError

__all__ = ["dotted_terms", "series_equal", "sum_parts"]

_DOTS = re.compile(r"\\(?:cdots|ldots|dots|dotsb|dotsc)(?![A-Za-z])|\.\.\.|\u2026")
_SUM = re.compile(
    r"\s*\\sum(?:\\limits)?\s*_\s*\{\s*([a-z])\s*=\s*(-?\d+)\s*\}\s*\^\s*(?:\{\s*(\\infty|\d+)\s*\}|(\\infty|\d))\s*(.+?)\s*",
    re.DOTALL,
)
_MIN_TERMS = 3
_MAX_TERMS = 12


def _top_level_terms(s: str) -> list[str] | None:
    """``s`` split at top-level ``+`` / ``-`` into signed terms (``None`` on unbalanced brackets)."""
    terms: list[str] = []
    cur = ""
    depth = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            m = re.match(r"\\(?:[A-Za-z]+|.)", s[i:])
            tok = m.group(0) if m else c
            cur += tok
            i += len(tok)
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
            if depth < 0:
                return None
        if depth == 0 and c in "+-" and cur.strip() and not re.search(r"[\^_]\s*$", cur):
            terms.append(cur.strip())
            cur = c
        else:
            cur += c
        i += 1
    if depth:
        return None
    if cur.strip():
        terms.append(cur.strip())
    return terms


def dotted_terms(s: str) -> list[str] | None:
    r"""The written terms of a series that ends with dots: ``1 - x + \frac{x^2}{2} - \cdots`` -> ``["1", "-x", "+\frac{x^2}{2}"]``.

    Args:
        s: one side (LaTeX).

    Returns:
        The signed terms before the dots, or ``None`` when ``s`` is no such series (no dots, dots not
        last, dots inside a term, or fewer than three terms).
    """
    if not isinstance(s, str) or len(s) > 2000:
        return None
    terms = _top_level_terms(s.strip())
    if not terms or not _DOTS.fullmatch(re.sub(r"^[+-]\s*", "", terms[-1]).strip()):
        return None
    body = terms[:-1]
    if len(body) < _MIN_TERMS or any(_DOTS.search(t) for t in body):
        return None
    return [re.sub(r"^\+\s*", "", t) for t in body[:_MAX_TERMS]]


def sum_parts(s: str) -> tuple[str, int, str] | None:
    r"""An explicit sum ``\sum_{n=a}^{b} body`` as ``(index, start, body)``.

    Args:
        s: one side (LaTeX).

    Returns:
        ``(index letter, start, body)``, or ``None`` when ``s`` is not one sum over an integer range.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return None
    m = _SUM.fullmatch(s)
    if not m:
        return None
    idx, start, end = m.group(1), int(m.group(2)), m.group(3) or m.group(4)
    if abs(start) > 1000 or end != "\\infty":
        return None  # a finite sum is a number or a closed form, compared as such
    return idx, start, m.group(5)


def _at_index(expr: Any, name: str, k: int) -> Any:
    """``expr`` with the index symbol (alias ``name``) set to ``k``."""
    rep = {s: k for s in getattr(expr, "free_symbols", set()) if getattr(s, "name", "") == name}
    return expr.xreplace(rep) if rep else expr


def series_equal(gold: str, pred: str) -> bool | None:
    r"""Whether a dotted series and an explicit infinite sum (or two dotted series) state the same series.

    Args:
        gold: the gold's value (LaTeX, no relation).
        pred: the prediction's value.

    Returns:
        ``True`` when the written terms are the sum's first terms (or the other dotted series' terms)
        one by one, ``False`` when some term differs, ``None`` when neither form applies or a term
        cannot be read.
    """
    gd, pd = dotted_terms(gold), dotted_terms(pred)
    gs, ps = sum_parts(gold), sum_parts(pred)
    try:
        al = new_aliases(gold, pred)
        if gd is not None and pd is not None:
            if len(gd) != len(pd):
                return None
            pairs = [(to_sympy(a, al), to_sympy(b, al)) for a, b in zip(gd, pd, strict=True)]
        elif (gd is not None and ps is not None) or (pd is not None and gs is not None):
            terms = gd if gd is not None else pd
            idx, start, body = ps if ps is not None else gs  # type: ignore[misc]
            assert terms is not None
            explicit = [to_sympy(t, al) for t in terms]
            general = to_sympy(body, al)
            name = al.alias(idx)[len("\\mathrm{") : -1]
            summed = [_at_index(general, name, start + k) for k in range(len(explicit))]
            pairs = list(zip(explicit, summed, strict=True)) if gd is not None else list(zip(summed, explicit, strict=True))
        else:
            return None
    except (LatexError, RecursionError, ValueError, TypeError):
        return None
    for a, b in pairs:
        ok, _ = sym_equal(a, b)
        if not ok:
            return False
    return True
