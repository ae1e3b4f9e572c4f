"""Stage-1 candidate search of the contamination audit: MinHash signatures and LSH banding, vectorised.

The signatures are datasketch's own (:class:`datasketch.MinHash` with ``num_perm`` permutations drawn
from ``seed``, the identity hash on the 32-bit shingle ids): the permutation parameters and the scheme
(``legacy`` before datasketch 2.0, ``affine32`` since) are taken from a datasketch ``MinHash``, and the
arithmetic is the same numpy arithmetic datasketch applies to one set at a time, applied here to all
sets at once (one matrix of ``shingles x num_perm`` per chunk, minimum per set with
``np.minimum.reduceat``). The LSH candidates are those of a :class:`datasketch.MinHashLSH` at the same
threshold: its bands (``b`` bands of ``r`` rows, from datasketch's own parameter choice), and a pair is
a candidate when at least one band of its two signatures is equal. :func:`reference_candidates` builds
the same candidates through datasketch's objects one set at a time; the tests and
``bench/audit_bench.py`` check that both agree.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from studybench.audit.common import require_extra

__all__ = [
    "lsh_bands",
    "lsh_candidates",
    "minhash_signatures",
    "reference_candidates",
    "reference_signatures",
]

_CHUNK = 4096
"""Ids per matrix of permuted hashes (``_CHUNK x num_perm`` values: small enough to stay in the CPU cache)."""

_MERSENNE = (1 << 61) - 1
_MAX32 = (1 << 32) - 1
_FMIX32 = (16, 0x85EBCA6B, 13, 0xC2B2AE35, 16)


def _identity_hash(x: int) -> int:
    # Shingle ids are distinct non-negative integers; MinHash applies its own random permutations.
    return x & _MAX32


def _template(num_perm: int, seed: int, scheme: str | None) -> tuple[str, Any, Any, Any]:
    """``(scheme, a, b, empty row)`` of datasketch's MinHash for ``num_perm``, ``seed`` and ``scheme``."""
    datasketch = require_extra("datasketch")
    kw = {} if scheme is None else {"scheme": scheme}
    m = datasketch.MinHash(num_perm=num_perm, seed=seed, hashfunc=_identity_hash, **kw)
    scheme = getattr(m, "scheme", "legacy")
    if scheme not in ("legacy", "affine32"):
        raise ValueError(f"unsupported datasketch MinHash scheme {scheme!r}")
    a, b = m.permutations
    return scheme, a, b, m.hashvalues.copy()


def _permute(ids: Any, scheme: str, a: Any, b: Any) -> Any:
    """Permuted hash values ``(len(ids), num_perm)`` of 32-bit ids, as datasketch computes them."""
    np = require_extra("numpy")
    if scheme == "legacy":
        out = np.multiply.outer(ids.astype(np.uint64), a)
        out += b
        np.remainder(out, np.uint64(_MERSENNE), out=out)
        np.bitwise_and(out, np.uint64(_MAX32), out=out)
        return out
    s1, m1, s2, m2, s3 = (np.uint32(c) for c in _FMIX32)
    hv = ids.astype(np.uint32)
    hv ^= hv >> s1
    hv *= m1
    hv ^= hv >> s2
    hv *= m2
    hv ^= hv >> s3
    out = np.multiply.outer(hv, a)
    out += b
    return out


def _flat_ids(sets: Sequence[frozenset[int]]) -> Any:
    """All ids of all sets, in order, modulo 2^32, as one uint64 array."""
    np = require_extra("numpy")
    total = sum(len(s) for s in sets)
    try:
        flat = np.fromiter(itertools.chain.from_iterable(sets), dtype=np.uint64, count=total)
    except OverflowError:  # a negative id or one past 64 bits: reduce each in Python
        flat = np.fromiter((x & _MAX32 for s in sets for x in s), dtype=np.uint64, count=total)
    flat &= np.uint64(_MAX32)
    return flat


def minhash_signatures(
    sets: Sequence[frozenset[int]], num_perm: int = 128, seed: int = 1, *, scheme: str | None = None
) -> Any:
    """MinHash signatures of integer sets, all at once.

    Args:
        sets: shingle-id sets (:func:`studybench.audit.ngrams.shingle_sets`); ids are used modulo 2^32.
        num_perm: permutations.
        seed: permutation seed.
        scheme: datasketch's permutation scheme, ``"affine32"`` (datasketch >= 2.0) or ``"legacy"``
            (before); ``None``: the installed datasketch's default.

    Returns:
        A numpy array ``(len(sets), num_perm)``: row ``k`` equals ``datasketch.MinHash(num_perm=num_perm,
        seed=seed, scheme=scheme)`` updated with the ids of ``sets[k]`` (its ``hashvalues``); an empty set gets
        datasketch's empty signature (every value the maximum hash).

    Raises:
        ValueError: a scheme other than those two.
        AuditExtraMissing: datasketch or numpy is not installed.
    """
    np = require_extra("numpy")
    scheme, a, b, empty = _template(num_perm, seed, scheme)
    out = np.empty((len(sets), num_perm), dtype=empty.dtype)
    out[:] = empty
    rows = np.array([k for k, s in enumerate(sets) if s], dtype=np.int64)
    if not len(rows):
        return out
    kept = [sets[k] for k in rows.tolist()]
    lengths = np.array([len(s) for s in kept], dtype=np.int64)
    ends = np.cumsum(lengths)
    flat = _flat_ids(kept)
    first = 0
    while first < len(kept):
        # whole sets, about _CHUNK ids at a time (a larger set makes a chunk of its own)
        base = int(ends[first - 1]) if first else 0
        last = max(int(np.searchsorted(ends, base + _CHUNK, side="right")), first + 1)
        offsets = np.concatenate(([0], ends[first : last - 1] - base))
        perm = _permute(flat[base : int(ends[last - 1])], scheme, a, b)
        out[rows[first:last]] = np.minimum.reduceat(perm, offsets, axis=0)
        first = last
    return out


def lsh_bands(threshold: float, num_perm: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` signature columns of each band of a datasketch ``MinHashLSH`` at ``threshold``.

    Raises:
        ValueError: datasketch refuses the threshold or ``num_perm``.
        AuditExtraMissing: datasketch is not installed.
    """
    datasketch = require_extra("datasketch")
    return [tuple(r) for r in datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm).hashranges]


def lsh_candidates(
    train_sig: Any, eval_sig: Any, bands: Sequence[tuple[int, int]], *, train_rows: Sequence[int] | None = None,
    eval_rows: Sequence[int] | None = None,
) -> list[set[int]]:
    """Training rows sharing at least one band with each evaluation row (MinHash LSH candidates).

    Args:
        train_sig, eval_sig: signatures (:func:`minhash_signatures`), ``(N_train, num_perm)`` and
            ``(N_eval, num_perm)``.
        bands: :func:`lsh_bands`.
        train_rows, eval_rows: the rows that take part (default: all); others (empty sets) are never
            candidates and get no candidates.

    Returns:
        One set of training row indices per evaluation row (``N_eval`` sets).
    """
    np = require_extra("numpy")
    n_train, n_eval = train_sig.shape[0], eval_sig.shape[0]
    tr = np.arange(n_train) if train_rows is None else np.asarray(train_rows, dtype=np.int64)
    ev = np.arange(n_eval) if eval_rows is None else np.asarray(eval_rows, dtype=np.int64)
    out: list[set[int]] = [set() for _ in range(n_eval)]
    if not len(tr) or not len(ev):
        return out
    both = np.concatenate((train_sig[tr], eval_sig[ev]))
    is_eval = np.concatenate((np.zeros(len(tr), dtype=bool), np.ones(len(ev), dtype=bool)))
    for start, end in bands:
        band = np.ascontiguousarray(both[:, start:end])
        keys = band.view(np.dtype((np.void, band.dtype.itemsize * (end - start)))).ravel()
        _, group = np.unique(keys, return_inverse=True)
        group = group.ravel()
        # only groups holding both an evaluation row and a training row give candidates
        ev_groups = np.zeros(group.max() + 1, dtype=bool)
        ev_groups[group[is_eval]] = True
        tr_groups = np.zeros_like(ev_groups)
        tr_groups[group[~is_eval]] = True
        shared = ev_groups & tr_groups
        if not shared.any():
            continue
        tg = group[~is_eval]
        keep = shared[tg]
        members: dict[int, list[int]] = {}
        for g, k in zip(tg[keep].tolist(), tr[keep].tolist(), strict=True):
            members.setdefault(g, []).append(k)
        eg = group[is_eval]
        keep = shared[eg]
        for g, j in zip(eg[keep].tolist(), ev[keep].tolist(), strict=True):
            out[j].update(members[g])
    return out


def reference_signatures(
    sets: Sequence[frozenset[int]], num_perm: int = 128, seed: int = 1, *, scheme: str | None = None
) -> list[Any]:
    """datasketch ``MinHash`` objects of the non-empty sets, one set at a time (``None`` for an empty one).

    The reference :func:`minhash_signatures` is checked against (tests, ``bench/audit_bench.py``).
    """
    datasketch = require_extra("datasketch")
    non_empty = [s for s in sets if s]
    kw = {} if scheme is None else {"scheme": scheme}
    hashes = datasketch.MinHash.bulk(
        [sorted(s) for s in non_empty], num_perm=num_perm, seed=seed, hashfunc=_identity_hash, **kw
    )
    it = iter(hashes)
    return [next(it) if s else None for s in sets]


def reference_candidates(
    train_sets: Sequence[frozenset[int]], eval_sets: Sequence[frozenset[int]], threshold: float, num_perm: int = 128,
    seed: int = 1,
) -> list[set[int]]:
    """The candidates of :func:`lsh_candidates`, through a datasketch ``MinHashLSH`` index and its queries.

    The reference the vectorised path is checked against (tests, ``bench/audit_bench.py``).
    """
    datasketch = require_extra("datasketch")
    train_mh = reference_signatures(train_sets, num_perm, seed)
    eval_mh = reference_signatures(eval_sets, num_perm, seed)
    lsh = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for i, mh in enumerate(train_mh):
            if mh is not None:
                session.insert(i, mh, check_duplication=False)
    return [set(lsh.query(mh)) if mh is not None else set() for mh in eval_mh]
