r"""Matrices and vectors written as LaTeX environments, compared entry by entry (docs/protocol.md section 5, EX).

:func:`read_matrix` reads ``\begin{pmatrix}`` / ``bmatrix`` / ``Bmatrix`` / ``matrix`` / ``smallmatrix`` /
``array`` (with or without ``\left( \right)`` or ``\left[ \right]`` around it) into rows of entry texts;
``vmatrix`` / ``Vmatrix`` and an ``array`` between bars are determinants (:attr:`Matrix.det`). A
transpose mark after the environment (``^T``, ``^{\top}``, ``^{\intercal}``) swaps rows and columns.
:func:`compare_matrices` compares a gold matrix with a prediction entry by entry with the caller's rule
for one entry (so the usual equivalences of an entry hold: ``\frac12`` = ``0.5``, ``2x`` = ``x \cdot 2``);
a vector may be written as a tuple (``(1, 2, 3)``, ``\langle 1, 2, 3\rangle``) or as a one-row or
one-column matrix of the same orientation. Pure string work: nothing is evaluated here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from studybench.answers import split_top_level
from studybench.verify.verdict import RuleResult

__all__ = ["Matrix", "compare_matrices", "has_matrix", "read_matrix", "read_vector"]

_ENVS = "pmatrix|bmatrix|Bmatrix|vmatrix|Vmatrix|matrix|smallmatrix|array"
_MATRIX = re.compile(
    r"\s*(?P<open>\\left\s*(?:\(|\[|\\\{|\\lbrace|\||\\vert|\\lvert)|\(|\[)?\s*"
    r"\\begin\s*\{(?P<env>" + _ENVS + r")\}(?:\s*\{[^{}]*\})?(?P<body>.*?)\\end\s*\{(?P=env)\}\s*"
    r"(?P<close>\\right\s*(?:\)|\]|\\\}|\\rbrace|\||\\vert|\\rvert)|\)|\])?"
    r"\s*(?P<tr>\^\s*(?:\{\s*(?:T|\\top|\\intercal|\\mathsf\s*\{\s*T\s*\}|\\mathrm\s*\{\s*T\s*\})\s*\}|T|\\top|\\intercal))?\s*\.?\s*",
    re.DOTALL,
)
_HAS_MATRIX = re.compile(r"\\begin\s*\{(?:" + _ENVS + r")\}")
_ROW_BREAK = re.compile(r"\\\\(?:\s*\[[^\]]{0,12}\])?")
_RULES = re.compile(r"\\(?:hline|cline\s*\{[^{}]*\}|midrule|toprule|bottomrule)")
_LABEL = re.compile(r"^\s*(?:\\mathbf\s*\{\s*[A-Za-z]\s*\}|\\mathbf\s*[A-Za-z]|\\boldsymbol\s*\{[^{}]*\}|[A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?|\\[A-Za-z]+)\s*=\s*")


@dataclass(frozen=True)
class Matrix:
    """A matrix as written: rows of entry texts.

    Attributes:
        rows: the entries, row by row (every row has the same length).
        det: written as a determinant (``vmatrix``, an array between bars).
    """

    rows: tuple[tuple[str, ...], ...]
    det: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, columns)``."""
        return len(self.rows), len(self.rows[0]) if self.rows else 0

    @property
    def entries(self) -> list[str]:
        """The entries row by row."""
        return [e for r in self.rows for e in r]


def has_matrix(s: str) -> bool:
    r"""Whether a LaTeX text holds a matrix environment (``\begin{pmatrix}`` ...)."""
    return isinstance(s, str) and _HAS_MATRIX.search(s) is not None


def read_matrix(s: str) -> Matrix | None:
    r"""The matrix one box writes, or ``None``.

    The whole box must be one environment, optionally after a label (``A =``, ``\mathbf{R} =``),
    between ``\left( \right)``-style delimiters and followed by a transpose mark. Rows are separated by
    ``\\`` (a trailing one and ``\hline`` are ignored), entries by ``&``.

    Args:
        s: one box (LaTeX).

    Returns:
        The :class:`Matrix`, or ``None`` when the box is not exactly one matrix (a nested environment,
        ragged rows, an empty entry, a product of matrices). Never raises.
    """
    if not isinstance(s, str) or len(s) > 5000 or not has_matrix(s):
        return None
    t = _LABEL.sub("", s.strip().replace("$", ""), count=1)
    m = _MATRIX.fullmatch(t)
    if not m or "\\begin" in m.group("body"):
        return None
    op, cl = m.group("open") or "", m.group("close") or ""
    if bool(op) != bool(cl):
        return None
    bars = "|" in op or "vert" in op
    body = _RULES.sub(" ", m.group("body"))
    rows = [r.strip() for r in _ROW_BREAK.split(body)]
    while rows and not rows[-1]:
        rows.pop()
    cells = tuple(tuple(c.strip() for c in r.split("&")) for r in rows)
    if not cells or any(not c for r in cells for c in r) or len({len(r) for r in cells}) != 1:
        return None
    if m.group("tr"):
        cells = tuple(zip(*cells, strict=True))
    return Matrix(cells, det=m.group("env") in ("vmatrix", "Vmatrix") or bars)


_TUPLE = re.compile(r"^\s*(?:\\left\s*)?(\(|\\langle|\[)(.*?)(?:\\right\s*)?(\)|\\rangle|\])\s*\.?\s*$", re.DOTALL)


def read_vector(s: str) -> list[str] | None:
    r"""The entries of a vector written as a tuple: ``(1, 2, 3)``, ``\langle 1, 2\rangle``, ``[1, 2, 3]``.

    Args:
        s: one box (LaTeX), optionally after a label (``\vec v =``).

    Returns:
        Two or more entries, or ``None`` (an interval such as ``[0, 1)``, a single value, no brackets).
    """
    if not isinstance(s, str) or len(s) > 3000:
        return None
    t = _LABEL.sub("", s.strip().replace("$", ""), count=1)
    m = _TUPLE.match(t)
    if not m:
        return None
    pairs = {"(": ")", "\\langle": "\\rangle", "[": "]"}
    if pairs[m.group(1)] != m.group(3):
        return None
    entries = [e.strip() for e in split_top_level(m.group(2))]
    if len(entries) < 2 or any(not e for e in entries) or split_top_level(t)[0].strip() != t.strip():
        return None
    if m.group(1) == "[" and len(entries) == 2:
        return None  # [a, b]: a closed interval as much as a vector
    return entries


def compare_matrices(gold: str, pred: str, one: Callable[[str, str], RuleResult]) -> RuleResult | None:
    """A gold matrix against a predicted matrix (or vector) entry by entry.

    Args:
        gold: one gold box.
        pred: one predicted box.
        one: the rule that compares one gold entry with one predicted entry.

    Returns:
        ``(decision, reason)``; ``None`` when the gold is no plain matrix or the prediction is no
        matrix this reader can read (a product, a scalar times a matrix: the caller's symbolic path
        decides), or when either is a determinant.
    """
    gm = read_matrix(gold)
    if gm is None or gm.det:
        return None
    pm = read_matrix(pred)
    if pm is None:
        vec = read_vector(pred)
        r, c = gm.shape
        if vec is None or not (r == 1 or c == 1):
            return None
        pm = Matrix(tuple((e,) for e in vec) if c == 1 else (tuple(vec),))
    if pm.det:
        return False, "a determinant against a matrix"
    if pm.shape != gm.shape:
        return False, f"matrix shapes differ ({pm.shape[0]}x{pm.shape[1]} vs {gm.shape[0]}x{gm.shape[1]})"
    undecided = False
    _, cols = gm.shape
    for k, (g, p) in enumerate(zip(gm.entries, pm.entries, strict=True)):
        ok, why = one(g, p)
        if ok is False:
            return False, f"matrix entry ({k // cols + 1},{k % cols + 1}): {why}"
        if ok is None:
            undecided = True
    return (None, "") if undecided else (True, f"all {len(gm.entries)} matrix entries match")
