r"""Subsets of the real line in any written form, compared as sets (docs/protocol.md section 5, IN).

:func:`same_real_set` reads each side into one SymPy set and compares the sets' components: unions in
any order (``[0,7) \cup \{-1\}``), touching intervals merged (``[-1,0] \cup [0,1]`` = ``[-1,1]``),
inequalities joined by "or" (``x < -1 \text{ or } x > 1``), set-builder notation (``\{x \mid x > 2\}``,
``\{x \in \mathbb{R} : x > 2\}``), ``\mathbb{R}``, differences (``(0,2) \setminus \{1\}``) and isolated points
(``\{-1\}``). The IN rule uses it when its own comparison of written forms could not show the answers
equal. Worker side (SymPy).
"""

from __future__ import annotations

import re
from typing import Any

from studybench.verify.comparison.forms import interval_pair, read_set
from studybench.verify.comparison.parts import split_top
from studybench.verify.comparison.relations import bound_equal
from studybench.verify.reading.aliasing import new_aliases
from studybench.verify.reading.conversion import to_sympy
from studybench.verify.reading.latex import LatexError
from studybench.verify.verdict import RuleResult

__all__ = ["same_real_set", "set_notation"]

_UNION = re.compile(
    r"\s*(?:\\cup(?![A-Za-z])|\\(?:text|textrm|mbox|mathrm)\s*\{\s*or\s*\}|\\(?:lor|vee)(?![A-Za-z])|(?<![A-Za-z\\])or(?![A-Za-z]))\s*"
)
_MINUS = re.compile(r"\s*\\setminus(?![A-Za-z])\s*|\s*\\backslash(?![A-Za-z])\s*")
_REALS = re.compile(r"\\mathbb\s*\{\s*R\s*\}|\\mathbb\s+R(?![A-Za-z])|\\R(?![A-Za-z])")
_BUILDER = re.compile(
    r"^\s*(?:\\left\s*)?(?:\\\{|\\lbrace)\s*(?P<var>[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?|\\[A-Za-z]+)\s*"
    r"(?:\\in\s*(?:\\mathbb\s*\{\s*R\s*\}|\\mathbb\s*R|\\R))?\s*(?:\\mid|\\vert|\||:)\s*(?P<cond>.+?)\s*(?:\\right\s*)?(?:\\\}|\\rbrace)\s*\.?\s*$",
    re.DOTALL,
)
_MEMBER = re.compile(r"\\in(?![A-Za-z])")
_STRUCTURE = re.compile(r"\\(?:cup|setminus|backslash|lor|vee|mathbb|R)(?![A-Za-z])|\\\{|\\lbrace|(?<![A-Za-z\\])or(?![A-Za-z])")
_MAX = 12


def set_notation(s: str) -> bool:
    r"""Whether a box uses set notation beyond one interval or inequality.

    A union, a difference, "or", ``\mathbb{R}``, braces (points or set-builder notation).

    Args:
        s: one box (LaTeX).

    Returns:
        Whether :func:`same_real_set` may read it differently from the plain interval reading.
    """
    return isinstance(s, str) and _STRUCTURE.search(s) is not None


def _rewrite(s: str) -> str:
    t = s.replace("$", "").strip().rstrip(".")
    m = _BUILDER.match(t)
    if m:
        t = m.group("cond")
    mem = split_top(t, _MEMBER)
    if len(mem) == 2 and re.fullmatch(r"[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?|\\[A-Za-z]+", mem[0]):
        t = mem[1]  # x \in [1, 4) \cup \{-2\}: the set
    return _REALS.sub(r"(-\\infty, \\infty)", t)


def _piece(p: str, al: Any) -> Any:
    """One set without unions: points, an interval, an inequality in one variable."""
    import sympy

    pts = read_set(p)
    if pts is not None:
        return sympy.FiniteSet(*[to_sympy(x, al) for x in pts])
    pair = interval_pair(p)
    if pair is not None:
        lo_open, hi_open, lo, hi = pair
        return sympy.Interval(to_sympy(lo, al), to_sympy(hi, al), lo_open, hi_open)
    rel = to_sympy(p, al)
    if isinstance(rel, sympy.Set):
        return rel
    if isinstance(rel, (sympy.And, sympy.Or, sympy.Rel)) and len(rel.free_symbols) == 1:
        return rel.as_set()
    raise LatexError("not a set")


def _as_set(s: str, al: Any) -> Any:
    import sympy

    t = _rewrite(s)
    pieces = split_top(t, _UNION)
    if len(pieces) > _MAX:
        raise LatexError("too many pieces")
    out = []
    for piece in pieces:
        parts = split_top(piece, _MINUS)
        base = _piece(parts[0], al)
        for r in parts[1:]:
            base = sympy.Complement(base, _piece(r, al))
        out.append(base)
    return sympy.Union(*out)


def _components(obj: Any) -> list[tuple[Any, Any, bool, bool]] | None:
    """A set as ``(start, end, left_open, right_open)`` components; a point is ``(a, a, False, False)``."""
    import sympy

    if isinstance(obj, sympy.Interval):
        return [(obj.start, obj.end, bool(obj.left_open), bool(obj.right_open))]
    if isinstance(obj, sympy.FiniteSet):
        return [(x, x, False, False) for x in obj.args]
    if isinstance(obj, sympy.Union):
        out = []
        for a in obj.args:
            c = _components(a)
            if c is None:
                return None
            out.extend(c)
        return out
    if obj == sympy.S.Reals:
        return [(-sympy.oo, sympy.oo, True, True)]
    if obj == sympy.S.EmptySet:
        return []
    return None


def _same(a: tuple[Any, Any, bool, bool], b: tuple[Any, Any, bool, bool]) -> bool:
    return a[2:] == b[2:] and all(x == y or bound_equal(x, y) for x, y in ((a[0], b[0]), (a[1], b[1])))


def same_real_set(gold: str, pred: str) -> RuleResult | None:
    r"""Whether two boxes describe the same subset of the real line (see the module docstring).

    Args:
        gold: one gold box.
        pred: one predicted box.

    Returns:
        ``(decision, reason)``, or ``None`` when either side cannot be read as a set. Never raises.
    """
    if not isinstance(gold, str) or not isinstance(pred, str) or len(gold) + len(pred) > 4000:
        return None
    try:
        al = new_aliases(gold, pred)
        gc, pc = _components(_as_set(gold, al)), _components(_as_set(pred, al))
    except (LatexError, TypeError, ValueError, NotImplementedError, AttributeError, RecursionError):
        return None
    except Exception:  # sympy raises many types on odd input
        return None
    if gc is None or pc is None:
        return None
    if len(gc) != len(pc):
        return False, f"different sets ({len(pc)} vs {len(gc)} pieces)"
    left = list(pc)
    for g in gc:
        hit = next((k for k, p in enumerate(left) if _same(g, p)), None)
        if hit is None:
            return False, "different sets"
        left.pop(hit)
    return True, "same set" + (f" ({len(gc)} pieces)" if len(gc) > 1 else "")
