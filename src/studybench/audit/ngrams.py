"""Stage 1 and 1b of the contamination audit: normalisation, shingles, exact Jaccard and containment,
MinHash LSH candidates, and the naive all-pairs reference.

**Normalisation** (:func:`normalize_tokens`): Unicode NFKC, lower-case, LaTeX command backslashes
removed (``\\frac`` -> ``frac``), braces, ``$`` and all other punctuation act as separators; tokens are
runs of letters and digits (``\\w`` without ``_``), except that every CJK ideograph and kana is a
token of its own (Chinese and Japanese are not written with spaces). Shingles are word n-grams
(default n = 5); a non-empty text shorter than n tokens has the single shingle of its whole token
list, an empty text has none and is never matched.

**Stage 1, n-gram Jaccard** (:func:`stage1_jaccard`): ``J(A, B) = |A & B| / |A | B|`` on the
shingle sets. Candidates come from datasketch ``MinHash`` signatures (``num_perm`` = 128, fixed seed,
so runs are deterministic) in a ``MinHashLSH`` index built at a threshold *below* the reporting one
(default ``max(0.1, 0.5 * jaccard_threshold)``), which keeps the probability of missing a pair above
the reporting threshold negligible; every LSH candidate then gets its *exact* Jaccard, and a pair is
flagged by stage 1 when ``J >= jaccard_threshold`` (default 0.5: more than half of all distinct
5-grams of the two texts are shared, which ordinary physics problems on the same topic never reach,
while a verbatim copy with light edits stays well above). Jaccard is symmetric and penalises length
differences: a training record that copies one sub-problem of a long test-set parent may stay under
the threshold; ``containment = |A & B| / min(|A|, |B|)`` is reported beside it, and stage 2 or a lower
``--jaccard-threshold`` catches such cases.

**Stage 1b, containment** (:func:`stage_containment`, ours): an evaluation text, or one sub-problem
of a test-set parent, and a training record of which one lies at least 80% inside the other
(``|A & U| / min(|A|, |U|)``, exact, through an inverted index). It catches a verbatim copy buried in
a long training record, a single sub-problem copied on its own, or a record that is one part of a
test text, which Jaccard (diluted by length) and embeddings (truncated) miss. ``--containment-threshold 0`` turns it off.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from studybench.audit.common import ProgressFn
from studybench.audit.minhash import lsh_bands, lsh_candidates, minhash_signatures
from studybench.audit.records import AuditRecord

__all__ = [
    "JACCARD_SWEEP",
    "Stage1Result",
    "default_lsh_threshold",
    "eval_units",
    "exact_containment",
    "exact_jaccard",
    "naive_jaccard_pairs",
    "normalize_tokens",
    "shingle_sets",
    "shingles",
    "stage1_jaccard",
    "stage_containment",
]

JACCARD_SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Jaccard thresholds of the report's sweep."""


# --------------------------------------------------------------------------------------------------
# Normalisation and shingles
# --------------------------------------------------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_LATEX_CMD = re.compile(r"\\([A-Za-z]+)")


def normalize_tokens(text: str) -> list[str]:
    """The word tokens of ``text`` after normalisation (see the module docstring).

    ``"Find $\\frac{1}{2}mv^2$!"`` gives ``["find", "frac", "1", "2", "mv", "2"]``; each CJK character
    is one token. Never raises for a string.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    text = _LATEX_CMD.sub(r" \1 ", text)
    return _TOKEN.findall(text)


def shingles(tokens: Sequence[str], n: int = 5) -> set[str]:
    """Word ``n``-grams of ``tokens`` as space-joined strings.

    A non-empty token list shorter than ``n`` gives one shingle (all its tokens); an empty one gives
    the empty set. Raises ValueError for ``n < 1``.
    """
    if n < 1:
        raise ValueError("n-gram size must be >= 1")
    if not tokens:
        return set()
    if len(tokens) < n:
        return {" ".join(tokens)}
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def shingle_sets(
    texts_a: Sequence[str], texts_b: Sequence[str], n: int = 5
) -> tuple[list[frozenset[int]], list[frozenset[int]]]:
    """Shingle sets of two lists of texts with shingles mapped to shared integer ids.

    Returns ``(sets_a, sets_b)``, one frozenset of ids per text; equal shingles get equal ids on both
    sides, so :func:`exact_jaccard` on ids equals the Jaccard of the shingle strings. Ids are given
    in the order texts and their sorted shingles come, never in a set's iteration order, so the
    MinHash signatures built from them (and the LSH candidates) do not depend on Python's string
    hash seed.
    """
    vocab: dict[str, int] = {}
    out: list[list[frozenset[int]]] = []
    for texts in (texts_a, texts_b):
        side = []
        for t in texts:
            side.append(frozenset(vocab.setdefault(s, len(vocab)) for s in sorted(shingles(normalize_tokens(t), n))))
        out.append(side)
    return out[0], out[1]


def exact_jaccard(a: frozenset[int] | set[Any], b: frozenset[int] | set[Any]) -> float:
    """``|a & b| / |a | b|``; 0.0 when either set is empty (an empty text matches nothing)."""
    if not a or not b:
        return 0.0
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    return inter / (len(a) + len(b) - inter)


def exact_containment(a: frozenset[int], b: frozenset[int]) -> float:
    """``|a & b| / min(|a|, |b|)``; 0.0 when either set is empty."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def eval_units(rec: AuditRecord) -> list[str]:
    """Extra texts of an evaluation record whose containment is checked: for a StudyBench test-set
    parent, each sub-problem's own text (the record's text is the stem plus all of them)."""
    if rec.kind != "testset" or not isinstance(rec.raw, dict):
        return []
    out = []
    for sub in rec.raw.get("sub_problems") or []:
        t = sub.get("problem") if isinstance(sub, dict) else None
        if isinstance(t, str) and t.strip() and t.strip() != rec.text.strip():
            out.append(t)
    return out


def stage_containment(
    train_sets: Sequence[frozenset[int]],
    units: Sequence[tuple[int, frozenset[int]]],
    threshold: float = 0.8,
    *,
    min_shingles: int = 8,
) -> dict[tuple[int, int], float]:
    """Stage 1b: evaluation texts copied *inside* longer training records (ours; Jaccard is diluted
    by length and embeddings truncate long texts, so neither sees a verbatim copy buried in a long
    record, or one sub-problem copied on its own).

    Containment of unit ``U`` and training record ``A`` is ``|A & U| / min(|A|, |U|)`` on shingle ids
    (either text inside the other: a test text buried in a long record, or a record that is one part
    of a test text), computed exactly through an inverted index of the units' shingles.

    Args:
        train_sets: shingle sets of the training records.
        units: ``(evaluation index, shingle set)`` of every unit (the evaluation texts, plus each
            sub-problem of a test-set parent, see :func:`eval_units`).
        threshold: flag when containment ``>= threshold``.
        min_shingles: units and training records with fewer shingles are skipped (a few words are
            not evidence).

    Returns:
        ``{(train index, evaluation index): containment}`` (the best unit per pair) for pairs at or
        above the threshold.
    """
    index: dict[int, list[int]] = {}
    for u, (_, shingle_ids) in enumerate(units):
        if len(shingle_ids) < min_shingles:
            continue
        for h in shingle_ids:
            index.setdefault(h, []).append(u)
    out: dict[tuple[int, int], float] = {}
    for i, a in enumerate(train_sets):
        if len(a) < min_shingles:
            continue
        counts: dict[int, int] = {}
        for h in a:
            for u in index.get(h, ()):
                counts[u] = counts.get(u, 0) + 1
        for u, c in counts.items():
            j, shingle_ids = units[u]
            value = c / min(len(a), len(shingle_ids))
            if value >= threshold and value > out.get((i, j), 0.0):
                out[(i, j)] = value
    return out


# --------------------------------------------------------------------------------------------------
# Stage 1
# --------------------------------------------------------------------------------------------------


def default_lsh_threshold(jaccard_threshold: float) -> float:
    """The LSH candidate threshold used when none is given: ``max(0.1, 0.5 * jaccard_threshold)``."""
    return max(0.1, 0.5 * jaccard_threshold)


@dataclass
class Stage1Result:
    """Stage-1 output.

    Attributes:
        scores: exact Jaccard of every LSH candidate pair ``(train index, eval index)`` whose
            Jaccard is at least ``keep_min`` (the lowest sweep threshold or the reporting threshold).
        lsh_candidates: number of distinct pairs the LSH index proposed (before the exact check).
        seconds: wall-clock seconds (MinHash + LSH + exact Jaccard).
        containment_seconds: wall-clock seconds of stage 1b (:func:`stage_containment`).
    """

    scores: dict[tuple[int, int], float]
    lsh_candidates: int
    seconds: float
    containment_seconds: float = 0.0


def stage1_jaccard(
    train_sets: Sequence[frozenset[int]],
    eval_sets: Sequence[frozenset[int]],
    threshold: float = 0.5,
    *,
    lsh_threshold: float | None = None,
    num_perm: int = 128,
    seed: int = 1,
    keep_min: float | None = None,
    progress: ProgressFn | None = None,
) -> Stage1Result:
    """Stage 1 (paper 2.3): MinHash LSH candidate search, then the exact n-gram Jaccard.

    Args:
        train_sets, eval_sets: shingle-id sets from :func:`shingle_sets` (shapes: N_train, N_eval).
        threshold: the reporting Jaccard threshold in [0, 1].
        lsh_threshold: the LSH index threshold (default :func:`default_lsh_threshold`); lower means
            higher recall and more exact checks.
        num_perm: MinHash permutations.
        seed: MinHash seed (results are deterministic for a given seed).
        keep_min: keep candidates with Jaccard at least this (default ``min(threshold, 0.3)``, so the
            report's sweep from 0.3 up can be computed).
        progress: optional callback ``(label, done, total)``.

    Returns:
        :class:`Stage1Result`.

    Raises:
        ValueError: thresholds outside (0, 1] or ``num_perm < 2``.
        AuditExtraMissing: datasketch is not installed.
    """
    if not 0 < threshold <= 1:
        raise ValueError("the Jaccard threshold must be in (0, 1]")
    lsh_t = default_lsh_threshold(threshold) if lsh_threshold is None else lsh_threshold
    if not 0 < lsh_t <= 1:
        raise ValueError("the LSH threshold must be in (0, 1]")
    if num_perm < 2:
        raise ValueError("num_perm must be >= 2")
    keep = min(threshold, JACCARD_SWEEP[0]) if keep_min is None else keep_min
    started = time.perf_counter()
    total = len(train_sets) + len(eval_sets)
    if progress:
        progress("stage 1: MinHash", 0, total)
    bands = lsh_bands(lsh_t, num_perm)
    train_sig = minhash_signatures(train_sets, num_perm, seed)
    eval_sig = minhash_signatures(eval_sets, num_perm, seed)
    if progress:
        progress("stage 1: MinHash", len(train_sets), total)
    candidates = lsh_candidates(
        train_sig, eval_sig, bands,
        train_rows=[i for i, s in enumerate(train_sets) if s], eval_rows=[j for j, s in enumerate(eval_sets) if s],
    )
    scores: dict[tuple[int, int], float] = {}
    n_cand = 0
    for j, found in enumerate(candidates):
        b = eval_sets[j]
        n_cand += len(found)
        for i in sorted(found):
            jac = exact_jaccard(train_sets[i], b)
            if jac >= keep:
                scores[(i, j)] = jac
        if progress and (j % 64 == 63 or j == len(candidates) - 1):
            progress("stage 1: MinHash", len(train_sets) + j + 1, total)
    return Stage1Result(scores, n_cand, time.perf_counter() - started)


def naive_jaccard_pairs(
    train_sets: Sequence[frozenset[int]], eval_sets: Sequence[frozenset[int]], threshold: float, *, prune: bool = True
) -> dict[tuple[int, int], float]:
    """All pairs ``(train index, eval index)`` with exact Jaccard ``>= threshold``, by brute force.

    O(N_train x N_eval) pairs: the reference for recall checks and the benchmark. With ``prune`` a pair
    whose set sizes alone rule the threshold out (``J <= min/max``) skips the intersection.
    """
    out: dict[tuple[int, int], float] = {}
    for i, a in enumerate(train_sets):
        if not a:
            continue
        la = len(a)
        for j, b in enumerate(eval_sets):
            if not b:
                continue
            lb = len(b)
            if prune and min(la, lb) < threshold * max(la, lb):  # J <= min/max: cannot reach the threshold
                continue
            jac = exact_jaccard(a, b)
            if jac >= threshold:
                out[(i, j)] = jac
    return out
