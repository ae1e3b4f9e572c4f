"""Paired tests and intervals with the parent as the unit (sub-problems nest in parents, seeds repeat them).

A run's outcomes are not independent items: a parent's sub-problems share one problem statement and
one conversation, and every seed asks the same parents again. Two runs that differ on 6 parents, with
3 identical seeds, show 18 discordant (seed, parent) items, and a test that counts them as 18
independent items gives p = 7.6e-06 where the evidence is 6 parents (p = 0.031). Every statistic
here therefore takes one paired observation per **unit** (a parent; an item only where the items
really are independent):

- per unit, ``a`` and ``b``: how many of the unit's items (its (seed, sub-problem) or (seed, parent)
  outcomes) each side solves, and ``n``: how many items the unit has. The pooled difference
  ``(sum(b) - sum(a)) / sum(n)`` is the difference of Sub@k (or Par@k) itself;
- :func:`sign_flip_test`: the exact paired sign-flip (randomisation) test of ``sum(b - a)``: under the
  null hypothesis that, within every unit, A's and B's outcomes are exchangeable (the two systems do
  the same on each parent), each unit's difference ``b - a`` is as likely as ``a - b``, so the
  reference distribution is that of ``sum(s_i * (b_i - a_i))`` over all ``2^m`` sign vectors. It is
  computed exactly (integer differences, a convolution over their values), needs no assumption about
  how a parent's seeds and sub-problems correlate, is exact for any number of parents (asymptotic
  clustered McNemar tests are not, with a handful of discordant parents), weighs parents as the
  reported metric does, and reduces to McNemar's exact test (= the two-sided sign test) when every
  unit is one 0/1 item. Duplicating every seed (or splitting every sub-problem) multiplies all
  differences by one factor and changes nothing; with ``m`` units that differ, no data can give a
  two-sided p below ``2 * 0.5^m``;
- the sign test on the units' directions (:func:`unit_directions`): units where B solves more, fewer,
  or as many; a coarser view that ignores by how much;
- :func:`studybench.analysis.paired.paired_bootstrap_diff` resamples whole units (with all their
  seeds and sub-problems) for the interval.

Needs numpy and scipy (the ``analysis`` extra).
"""

from __future__ import annotations

import importlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SignFlipTest", "UnitCounts", "UnitDirections", "sign_flip_test", "unit_counts", "unit_directions"]


def _need(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        from studybench.analysis.paired import EXTRA_HINT, AnalysisExtraMissing

        raise AnalysisExtraMissing(f"the paired tests need the optional package '{module.split('.')[0]}' ({e}); "
                                   f"install it with: {EXTRA_HINT}") from None


@dataclass(frozen=True)
class SignFlipTest:
    """The exact paired sign-flip test of ``sum(b - a)`` over units.

    Attributes:
        statistic: the observed ``sum(b - a)`` (in items: sub-problems or parents solved, summed over seeds).
        units: units given.
        differing: units whose difference is not 0 (the only ones the test looks at).
        p_value: two-sided: ``P(|T| >= |statistic|)`` under random signs (1.0 when no unit differs).
        p_a_better: one-sided, A better: ``P(T <= statistic)``.
        p_b_better: one-sided, B better: ``P(T >= statistic)``.
    """

    statistic: int
    units: int
    differing: int
    p_value: float
    p_a_better: float
    p_b_better: float


@dataclass(frozen=True)
class UnitDirections:
    """Units by the direction of their difference, and the sign test on those that differ.

    Attributes:
        a_better: units where A solves more of the unit's items than B.
        b_better: units where B solves more.
        tied: units where both solve as many (ties, including both-all and both-none).
        sign_p: two-sided sign test, ``binomtest(b_better, a_better + b_better)`` (1.0 when none differ).
        sign_p_a_better, sign_p_b_better: one-sided sign tests.
    """

    a_better: int
    b_better: int
    tied: int
    sign_p: float
    sign_p_a_better: float
    sign_p_b_better: float


@dataclass(frozen=True)
class UnitCounts:
    """Per unit, in order of first appearance: items solved by A and by B, and items.

    Attributes:
        names: the units (e.g. parent uids).
        a, b: items each side solves in the unit (summed over seeds and sub-problems).
        n: the unit's items.
    """

    names: list[str]
    a: list[int]
    b: list[int]
    n: list[int]

    @property
    def differences(self) -> list[int]:
        """``b - a`` per unit."""
        return [y - x for x, y in zip(self.a, self.b, strict=True)]


def unit_counts(ids: Iterable[str], a: Mapping[str, bool], b: Mapping[str, bool],
                clusters: Mapping[str, str] | None = None) -> UnitCounts:
    """Sum paired 0/1 item outcomes into one paired observation per unit.

    Args:
        ids: the items to use.
        a, b: item id -> solved, for each side.
        clusters: item id -> unit (e.g. the item's parent); ``None``: every item is its own unit.

    Returns:
        The per-unit counts, units in order of first appearance among ``ids``.

    Raises:
        KeyError: an item missing from ``a``, ``b`` or ``clusters``.
    """
    order: dict[str, int] = {}
    out = UnitCounts([], [], [], [])
    for i in ids:
        u = i if clusters is None else clusters[i]
        j = order.get(u)
        if j is None:
            j = order[u] = len(out.names)
            out.names.append(u)
            out.a.append(0)
            out.b.append(0)
            out.n.append(0)
        out.a[j] += bool(a[i])
        out.b[j] += bool(b[i])
        out.n[j] += 1
    return out


def sign_flip_test(differences: Sequence[Any]) -> SignFlipTest:
    """The exact paired sign-flip (randomisation) test of ``sum(differences)``.

    The reference distribution of ``T = sum(s_i * d_i)`` over independent random signs ``s_i = ±1``
    (the exchangeability of A and B within each unit) is computed exactly: units are grouped by
    ``|d_i|`` (divided by their common divisor), each group contributes ``v * (2X - c)`` with ``X ~
    Binomial(c, 1/2)``, and the groups are convolved on the integer lattice. The cost is about
    (number of lattice values) x (units that differ), small for runs (thousands of parents). Exact
    p-values below about 1e-300 come out as 0.

    Args:
        differences: per unit, ``b - a`` in solved items (integers: sums of 0/1 outcomes).

    Returns:
        The two-sided and one-sided p-values; all 1.0 when no unit differs.

    Raises:
        ValueError: a difference that is not a finite integer.
        studybench.analysis.paired.AnalysisExtraMissing: numpy or scipy is missing.
    """
    np = _need("numpy")
    try:
        raw = np.asarray(differences, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"expected integer differences (solved counts) per unit, got {differences!r:.80}") from None
    bad = np.flatnonzero(~np.isfinite(raw) | (raw != np.round(raw)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"unit {i}: expected an integer difference (solved counts), got {differences[i]!r}")
    d = raw.astype(np.int64)
    t = int(d.sum())
    nz = np.abs(d[d != 0])
    if not nz.size:
        return SignFlipTest(t, int(d.size), 0, 1.0, 1.0, 1.0)
    binom = _need("scipy.stats").binom
    g = math.gcd(*(int(x) for x in np.unique(nz)))
    mags = (nz // g).tolist()
    # the largest group first: it costs one vectorised step, each later one (its size + 1) steps
    groups = sorted(Counter(mags).items(), key=lambda vc: (-vc[1], vc[0]))
    dist = np.ones(1)  # dist[j] = P(T / g == j - offset), starting from the point mass at 0
    offset = 0
    for v, c in groups:
        pmf = binom.pmf(np.arange(c + 1), c, 0.5)
        new = np.zeros(dist.size + 2 * v * c)
        if dist.size == 1:
            new[::2 * v] = pmf * dist[0]
        else:
            for x in range(c + 1):  # T gains v * (2x - c): shift by 2vx on the widened lattice
                new[2 * v * x:2 * v * x + dist.size] += pmf[x] * dist
        dist, offset = new, offset + v * c
    values = np.arange(dist.size) - offset
    tg = t // g
    p_b = float(dist[values >= tg].sum())
    p_a = float(dist[values <= tg].sum())
    p_two = float(dist[np.abs(values) >= abs(tg)].sum())
    return SignFlipTest(t, int(d.size), len(mags), _clean(p_two), _clean(p_a), _clean(p_b))


def _clean(p: float) -> float:
    """At most 1, and 12 significant digits: sums of floating-point masses off by a few ulps (0.03125 is 2/64)."""
    return min(float(f"{p:.12g}"), 1.0)


def unit_directions(differences: Sequence[Any]) -> UnitDirections:
    """Count units by the direction of ``b - a`` and run the sign test on those that differ.

    Args:
        differences: per unit, ``b - a`` (any sign-comparable numbers).

    Returns:
        The counts and the sign test (``scipy.stats.binomtest``).

    Raises:
        studybench.analysis.paired.AnalysisExtraMissing: scipy is missing.
    """
    b_better = sum(1 for x in differences if x > 0)
    a_better = sum(1 for x in differences if x < 0)
    tied = len(differences) - a_better - b_better
    m = a_better + b_better
    if not m:
        return UnitDirections(a_better, b_better, tied, 1.0, 1.0, 1.0)
    binomtest = _need("scipy.stats").binomtest
    return UnitDirections(a_better, b_better, tied, min(float(binomtest(b_better, m, 0.5).pvalue), 1.0),
                          float(binomtest(a_better, m, 0.5, alternative="greater").pvalue),
                          float(binomtest(b_better, m, 0.5, alternative="greater").pvalue))
