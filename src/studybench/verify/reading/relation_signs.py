r"""Relation signs in LaTeX: top-level ``=``, ``\approx``, ``<``, ``\le``, ``\ll`` ... (docs/protocol.md section 5).

:func:`split_relations` splits at the signs normalised to ``=``, ``<``, ``>``, ``<=``, ``>=``;
:func:`rhs` is the last side of a chain of equalities; :func:`relation_chain` keeps each sign's
direction and kind, and :func:`states_inequality` says whether a text states an inequality. Signs
inside brackets never split. Pure string helpers that never raise, re-exported by
:mod:`studybench.verify.reading.latex`, where callers import them.
"""

from __future__ import annotations

import re

__all__ = ["relation_chain", "rhs", "split_relations", "states_inequality"]

_REL_MACROS = {
    "\\approx": "=",
    "\\simeq": "=",
    "\\sim": "=",
    "\\equiv": "=",
    "\\cong": "=",
    "\\le": "<=",
    "\\leq": "<=",
    "\\leqslant": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\geqslant": ">=",
    "\\lt": "<",
    "\\gt": ">",
    "\\ll": "<",
    "\\gg": ">",
}


def split_relations(s: str, ops: frozenset[str] = frozenset({"=", "<", ">", "<=", ">="})) -> tuple[list[str], list[str]]:
    r"""Split ``s`` at top-level relation symbols (outside any bracket).

    Operators are normalised to ``=``, ``<``, ``>``, ``<=``, ``>=`` (``\approx``/``\sim``/``\simeq``
    count as ``=``).

    Args:
        s: LaTeX text.
        ops: the normalised operators that split; others stay inside the segments.

    Returns:
        ``(segments, operators)`` with ``len(segments) == len(operators) + 1``, segments stripped.
        Never raises.
    """
    segs: list[str] = []
    found: list[str] = []
    depth = 0
    cur: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            m = re.match(r"\\[A-Za-z]+", s[i:])
            if m:
                name = m.group(0)
                if name in ("\\left", "\\right"):
                    cur.append(name)
                    i += len(name)
                    continue
                op = _REL_MACROS.get(name)
                if op is not None and depth == 0 and op in ops:
                    segs.append("".join(cur))
                    found.append(op)
                    cur = []
                    i += len(name)
                    continue
                cur.append(name)
                i += len(name)
                continue
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth = max(0, depth - 1)
        if depth == 0 and c in "=<>":
            op = c
            if i + 1 < n and s[i + 1] == "=" and c in "<>":
                op = c + "="
                i += 1
            if op in ops:
                segs.append("".join(cur))
                found.append(op)
                cur = []
                i += 1
                continue
            cur.append(op)
            i += 1
            continue
        cur.append(c)
        i += 1
    segs.append("".join(cur))
    return [x.strip() for x in segs], found


def rhs(s: str) -> str:
    r"""The last side of a chain of equalities: ``v = 3\,\mathrm{m/s}`` -> ``3\,\mathrm{m/s}``.

    Args:
        s: LaTeX text.

    Returns:
        The segment after the last top-level ``=`` (``s`` itself when there is none).
    """
    segs, _ = split_relations(s, frozenset({"="}))
    return segs[-1]


# the kinds of a relation: "lt" strict, "le" non-strict, "ll" much less, "lsim" less or about, "eq"
_REL_MACRO_KINDS = {
    "\\lt": (-1, "lt"), "\\gt": (1, "lt"),
    "\\le": (-1, "le"), "\\leq": (-1, "le"), "\\leqslant": (-1, "le"), "\\leqq": (-1, "le"),
    "\\ge": (1, "le"), "\\geq": (1, "le"), "\\geqslant": (1, "le"), "\\geqq": (1, "le"),
    "\\ll": (-1, "ll"), "\\lll": (-1, "ll"), "\\gg": (1, "ll"), "\\ggg": (1, "ll"),
    "\\lesssim": (-1, "lsim"), "\\lessapprox": (-1, "lsim"), "\\gtrsim": (1, "lsim"), "\\gtrapprox": (1, "lsim"),
    "\\approx": (0, "eq"), "\\simeq": (0, "eq"), "\\equiv": (0, "eq"),
}

_REL_CHAR_KINDS = {
    "<<": (-1, "ll"), ">>": (1, "ll"), "<=": (-1, "le"), ">=": (1, "le"), "<": (-1, "lt"), ">": (1, "lt"), "=": (0, "eq"),
    "\u2264": (-1, "le"), "\u2265": (1, "le"), "\u2a7d": (-1, "le"), "\u2a7e": (1, "le"),
    "\u226a": (-1, "ll"), "\u226b": (1, "ll"), "\u2272": (-1, "lsim"), "\u2273": (1, "lsim"), "\u2248": (0, "eq"),
}

_REL_CHARS = sorted(_REL_CHAR_KINDS, key=len, reverse=True)


def relation_chain(s: str) -> tuple[list[str], list[tuple[int, str]]]:
    r"""Split ``s`` at its top-level relation signs, keeping each sign's direction and kind.

    ``a < b \le c = d`` gives ``(["a", "b", "c", "d"], [(-1, "lt"), (-1, "le"), (0, "eq")])``: the
    direction is -1 for the less-than family, +1 for greater-than, 0 for equality (``=``,
    ``\approx``, ``\simeq``, ``\equiv``); the kind is ``"lt"`` (strict: ``<``, ``\lt``), ``"le"``
    (``\le``, ``\leq``, ``\leqslant``, ``\leqq``), ``"ll"`` (much less: ``\ll``, ``<<``),
    ``"lsim"`` (``\lesssim``, ``\lessapprox``) or ``"eq"``. Signs inside brackets do not split.

    Args:
        s: LaTeX text.

    Returns:
        ``(segments, relations)`` with ``len(segments) == len(relations) + 1``, segments stripped.
        Never raises.
    """
    segs: list[str] = []
    rels: list[tuple[int, str]] = []
    cur: list[str] = []
    depth = 0
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            m = re.match(r"\\[A-Za-z]+", s[i:])
            if m is None:
                cur.append(s[i : i + 2])
                i += 2
                continue
            name = m.group(0)
            if name in ("\\left", "\\right") and s[i + len(name) : i + len(name) + 1] in ("<", ">"):
                name = s[i : i + len(name) + 1]  # \left< is a bracket, not a relation
            kind = _REL_MACRO_KINDS.get(name)
            if kind is not None and depth == 0:
                segs.append("".join(cur))
                rels.append(kind)
                cur = []
            else:
                cur.append(name)
            i += len(name)
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth = max(0, depth - 1)
        if depth == 0:
            op = next((o for o in _REL_CHARS if s.startswith(o, i)), None)
            if op is not None:
                segs.append("".join(cur))
                rels.append(_REL_CHAR_KINDS[op])
                cur = []
                i += len(op)
                continue
        cur.append(c)
        i += 1
    segs.append("".join(cur))
    return [x.strip() for x in segs], rels


def states_inequality(s: str) -> bool:
    r"""Whether ``s`` states an inequality at top level (``<``, ``\ge``, ``\ll``, ``\gtrsim`` ...).

    Args:
        s: LaTeX text.

    Returns:
        Whether one of its top-level relation signs is not an equality.
    """
    return any(d != 0 for d, _ in relation_chain(s)[1])
