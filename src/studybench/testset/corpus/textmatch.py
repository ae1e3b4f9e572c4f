"""OCR-robust verbatim matching between test items and book text (paper 2.3, appendix H).

Both sides are reduced to a *normalised character stream*: formatting LaTeX control words
(``\\frac``, ``\\mathrm``) are dropped, Greek-letter commands become the letter (``\\theta`` -> θ, as
OCR often writes it) and function commands their name (``\\tan`` -> tan); letters are case-folded
(NFKC), and only letters and digits are kept, so line breaks, doubled spaces, broken
super/subscripts (``10^{23}``, ``1 0 ^ {2 3}``, ``10 23``), braces, hyphenation and markup do not
matter. Finally, characters OCR confuses are folded to one representative (:data:`OCR_FOLD`:
``rn`` -> m, ``vv`` -> w, ``cl`` -> d, ``l``/``i``/``1`` -> l, ``0`` -> o, ``h`` -> b, ``5`` -> s), on
both sides alike, so "tbe 1ight rnass" matches "the light mass". :class:`NormText` keeps, for every
kept character, its offset in the original text, so a match maps back to an exact span of the file.

Matching (:func:`find_copies`): every *seed* (a ``k``-character window, default 24) of a query is
indexed; the book's stream is scanned for seed hits; hits of one query that lie within ``gap``
normalised characters of each other are merged into one segment (bridging OCR damage that breaks
seeds); a segment is a copy when the query characters it covers reach ``min(min_match, ratio *
len(query))``. Every such segment is returned, so every copy of a query is found, not only the
longest.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["Copy", "NormText", "find_copies", "normalise"]


_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "vartheta": "θ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "varpi": "π", "rho": "ρ", "varrho": "ρ", "sigma": "σ", "varsigma": "σ", "tau": "τ",
    "upsilon": "υ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "γ", "Delta": "δ", "Theta": "θ", "Lambda": "λ", "Xi": "ξ", "Pi": "π", "Sigma": "σ", "Upsilon": "υ",
    "Phi": "φ", "Psi": "ψ", "Omega": "ω", "hbar": "ħ", "ell": "l", "infty": "∞", "partial": "∂", "nabla": "∇",
}
_NAMED = frozenset(
    "sin cos tan cot sec csc sinh cosh tanh coth arcsin arccos arctan ln log exp lim max min det sup inf".split()
)
OCR_FOLD = {"rn": "m", "vv": "w", "cl": "d", "i": "l", "1": "l", "|": "l", "0": "o", "h": "b", "5": "s"}
"""OCR confusions folded to one representative in the matching stream (two-letter keys first)."""
_FOLD1 = {k: v for k, v in OCR_FOLD.items() if len(k) == 1}
_FOLD2 = {k: v for k, v in OCR_FOLD.items() if len(k) == 2}


def _command_text(name: str) -> str:
    """What a LaTeX control word contributes to the stream: a Greek letter, a function name, or nothing."""
    if name in _GREEK:
        return _GREEK[name]
    if name in _NAMED:
        return name
    return ""


@dataclass
class NormText:
    """A normalised character stream with offsets into the original text.

    Attributes:
        text: the normalised characters (letters case-folded, digits; nothing else).
        offsets: ``offsets[i]`` is the index in the original text of ``text[i]``.
    """

    text: str
    offsets: list[int]

    @classmethod
    def of(cls, original: str) -> NormText:
        """Normalise ``original`` (see the module docstring); linear in its length."""
        chars: list[str] = []
        offs: list[int] = []
        i = 0
        n = len(original)
        while i < n:
            ch = original[i]
            if ch == "\\" and i + 1 < n and original[i + 1].isascii() and original[i + 1].isalpha():
                j = i + 1
                while j < n and original[j].isascii() and original[j].isalpha():
                    j += 1
                for c in _command_text(original[i + 1 : j]):
                    chars.append(c)
                    offs.append(i)
                i = j
                continue
            if ch.isalnum():
                norm = unicodedata.normalize("NFKC", ch).casefold()
                for c in norm:
                    if c.isalnum():
                        chars.append(c)
                        offs.append(i)
            i += 1
        return cls(*_fold("".join(chars), offs))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original ``[a, b)`` covering normalised ``[start, end)`` (``end > start``)."""
        return self.offsets[start], self.offsets[end - 1] + 1


def _fold(text: str, offs: list[int]) -> tuple[str, list[int]]:
    """Apply :data:`OCR_FOLD` (two-character confusions first), keeping offsets aligned."""
    out: list[str] = []
    out_offs: list[int] = []
    i = 0
    n = len(text)
    while i < n:
        pair = text[i : i + 2]
        if pair in _FOLD2:
            out.append(_FOLD2[pair])
            out_offs.append(offs[i])
            i += 2
            continue
        out.append(_FOLD1.get(text[i], text[i]))
        out_offs.append(offs[i])
        i += 1
    return "".join(out), out_offs


def normalise(text: str) -> str:
    """The normalised stream of ``text`` (no offsets)."""
    return NormText.of(text).text


@dataclass(frozen=True)
class Copy:
    """One copy of a query in a book text.

    Attributes:
        query: index of the query in the list given to :func:`find_copies`.
        start, end: normalised ``[start, end)`` of the copy in the book stream.
        covered: query characters covered by seeds in this copy.
        query_len: length of the normalised query.
    """

    query: int
    start: int
    end: int
    covered: int
    query_len: int

    @property
    def coverage(self) -> float:
        return self.covered / self.query_len if self.query_len else 0.0


def find_copies(
    book: str,
    queries: list[str],
    *,
    k: int = 24,
    gap: int = 120,
    min_match: int = 100,
    ratio: float = 0.6,
) -> list[Copy]:
    """Every copy of every query in ``book`` (both already normalised with :func:`normalise`).

    Args:
        book: normalised book stream.
        queries: normalised query streams (problem statements, solutions ...).
        k: seed length in normalised characters.
        gap: hits closer than this (in book characters) belong to one copy.
        min_match: query characters a copy must cover (capped at ``ratio * len(query)`` for short
            queries; queries shorter than ``k`` are never matched).
        ratio: see ``min_match``.

    Returns:
        Copies sorted by (start, query).
    """
    index: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for qi, q in enumerate(queries):
        if len(q) < k:
            continue
        seen: set[str] = set()
        for p in range(len(q) - k + 1):
            seed = q[p : p + k]
            if seed in seen:
                continue
            seen.add(seed)
            index[seed].append((qi, p))
    if not index:
        return []
    hits: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for p in range(len(book) - k + 1):
        entry = index.get(book[p : p + k])
        if entry is None:
            continue
        for qi, qp in entry:
            hits[qi].append((p, qp))
    out: list[Copy] = []
    for qi, hs in hits.items():
        qlen = len(queries[qi])
        need = max(k, min(min_match, int(ratio * qlen)))
        hs.sort()
        segments: list[tuple[int, int, list[tuple[int, int]]]] = []
        for p, qp in hs:
            if segments and p <= segments[-1][1] + gap:
                s0, e0, cov = segments[-1]
                cov.append((qp, qp + k))
                segments[-1] = (s0, max(e0, p + k), cov)
            else:
                segments.append((p, p + k, [(qp, qp + k)]))
        for s0, e0, cov in segments:
            n = _union_length(cov)
            if n >= need:
                out.append(Copy(qi, s0, e0, n, qlen))
    out.sort(key=lambda c: (c.start, c.query))
    return out


def _union_length(intervals: list[tuple[int, int]]) -> int:
    total = 0
    cur_s = cur_e = -1
    for s, e in sorted(intervals):
        if s > cur_e:
            total += cur_e - cur_s if cur_e > cur_s else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    total += cur_e - cur_s if cur_e > cur_s else 0
    return total
