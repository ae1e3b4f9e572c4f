"""Par@k and Sub@k (paper section 2.2; docs/protocol.md section 3).

With P the parents of a set, n_p the number of sub-problems of parent p and ``c[p][j][a]`` in {0, 1}
the verdict on sub-problem j of parent p in attempt a (a = 0..k-1):

* Par@k = (1/|P|) * sum_p max_a prod_j ``c[p][j][a]``   (some single attempt solves every sub-problem)
* Sub@k = (1 / sum_p n_p) * sum_p sum_j max_a ``c[p][j][a]``

Values are reported in percent. Over seeds: the mean and the sample standard deviation
(ddof = 1; ``None`` for a single seed).

**pass@k** (Chen et al., 2021, the unbiased estimator) for k = 1..K from the K attempts of a run:
with n = K attempts of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k), the probability that
k attempts drawn without replacement from the n include a correct one (computed stably as
1 - prod_{i=n-c+1}^{n} (1 - k/i)). Per sub-problem, averaged over the sub-problems of a seed
(:func:`pass_at_k`); the parent analogue (:func:`par_pass_at_k`) counts as correct the attempts that
solve *every* sub-problem of the parent and averages over parents. At k = K they equal Sub@K and
Par@K exactly; at k = 1 they are the mean per-attempt accuracy (sub-problem, resp. whole-parent).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ParentVerdicts",
    "SeedStat",
    "breakdown",
    "mean_std",
    "par_at_k",
    "par_pass_at_k",
    "pass_at_k",
    "pass_at_k_curve",
    "pass_at_k_estimate",
    "pass_at_k_table",
    "sub_at_k",
    "sub_at_k_by",
]

ParentVerdicts = Sequence[Sequence[Sequence[bool]]]
"""Verdicts of one seed: ``v[p][j][a]`` for parent p, sub-problem j, attempt a."""


def _check_shape(verdicts: ParentVerdicts, k: int | None) -> int:
    ks = {len(att) for parent in verdicts for att in parent}
    if not ks:
        raise ValueError("no verdicts")
    if len(ks) != 1:
        raise ValueError(f"every sub-problem needs the same number of attempts, got {sorted(ks)}")
    kk = ks.pop()
    if k is not None and kk != k:
        raise ValueError(f"expected k={k} attempts per sub-problem, got {kk}")
    if any(len(parent) == 0 for parent in verdicts):
        raise ValueError("a parent has no sub-problems")
    return kk


def par_at_k(verdicts: ParentVerdicts, k: int | None = None) -> float:
    """Par@k in percent for one seed.

    Args:
        verdicts: ``v[p][j][a]`` booleans, shape parents x sub-problems x k attempts.
        k: expected number of attempts (checked when given).

    Raises:
        ValueError: empty input or ragged attempt counts.
    """
    kk = _check_shape(verdicts, k)
    solved = 0
    for parent in verdicts:
        if any(all(parent[j][a] for j in range(len(parent))) for a in range(kk)):
            solved += 1
    return 100.0 * solved / len(verdicts)


def sub_at_k(verdicts: ParentVerdicts, k: int | None = None) -> float:
    """Sub@k in percent for one seed (same input as :func:`par_at_k`)."""
    _check_shape(verdicts, k)
    total = sum(len(p) for p in verdicts)
    hit = sum(1 for p in verdicts for sub in p if any(sub))
    return 100.0 * hit / total


def sub_at_k_by(verdicts: ParentVerdicts, labels: Sequence[Sequence[str]]) -> dict[str, float]:
    """Sub@k per label, where ``labels[p][j]`` labels sub-problem j of parent p (e.g. answer type)."""
    hit: dict[str, int] = {}
    tot: dict[str, int] = {}
    for p, parent in enumerate(verdicts):
        for j, sub in enumerate(parent):
            lab = labels[p][j]
            tot[lab] = tot.get(lab, 0) + 1
            hit[lab] = hit.get(lab, 0) + (1 if any(sub) else 0)
    return {lab: 100.0 * hit[lab] / tot[lab] for lab in sorted(tot)}


@dataclass
class SeedStat:
    """Mean and sample standard deviation of a metric over seeds (percent)."""

    mean: float
    std: float | None
    per_seed: list[float]

    def to_dict(self) -> dict[str, object]:
        return {"mean": _r(self.mean), "std": None if self.std is None else _r(self.std), "per_seed": [_r(x) for x in self.per_seed]}

    def fmt(self) -> str:
        return f"{self.mean:.2f}" if self.std is None else f"{self.mean:.2f} ± {self.std:.2f}"


def _r(x: float) -> float:
    return round(x, 4)


def mean_std(values: Sequence[float]) -> SeedStat:
    """Mean and sample std (ddof = 1) of per-seed values; std is ``None`` for one value."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("no values")
    if any(math.isnan(v) for v in vals):
        raise ValueError("NaN in per-seed values")
    mean = statistics.fmean(vals)
    std = statistics.stdev(vals) if len(vals) > 1 else None
    return SeedStat(mean, std, vals)


def breakdown(
    per_seed: Mapping[int, ParentVerdicts],
    group_of_parent: Sequence[str],
    metric: Callable[[ParentVerdicts], float],
) -> dict[str, SeedStat]:
    """A parent-level metric per group (e.g. sub-discipline, source), mean ± std over seeds.

    Args:
        per_seed: seed -> verdicts ``v[p][j][a]`` (parents in the same order for every seed).
        group_of_parent: group label of each parent.
        metric: :func:`par_at_k` or :func:`sub_at_k`.
    """
    groups = sorted(set(group_of_parent))
    out: dict[str, SeedStat] = {}
    for g in groups:
        idx = [i for i, lab in enumerate(group_of_parent) if lab == g]
        vals = [metric([v[i] for i in idx]) for _, v in sorted(per_seed.items())]
        out[g] = mean_std(vals)
    return out


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate (a fraction in [0, 1]) from ``n`` attempts of which ``c`` are correct.

    ``1 - C(n-c, k) / C(n, k)``, computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` (no huge binomials).
    Exactly 1.0 when every k-subset holds a correct attempt (``n - c < k``), exactly 0.0 when ``c = 0``.

    Args:
        n: attempts (>= 1).
        c: correct attempts (0 <= c <= n).
        k: attempts drawn (1 <= k <= n).

    Returns:
        The probability that ``k`` attempts drawn without replacement include a correct one.

    Raises:
        ValueError: counts out of range.
    """
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k(verdicts: ParentVerdicts, k: int) -> float:
    """pass@k in percent for one seed: the mean over sub-problems of :func:`pass_at_k_estimate`.

    Args:
        verdicts: ``v[p][j][a]`` as for :func:`sub_at_k`; n = the number of attempts.
        k: attempts drawn, 1 <= k <= n.

    Returns:
        pass@k in percent (equals :func:`sub_at_k` at k = n).

    Raises:
        ValueError: empty or ragged input, or ``k`` out of range.
    """
    n = _check_shape(verdicts, None)
    return _mean_estimate(n, [sum(1 for x in sub if x) for parent in verdicts for sub in parent], k)


def par_pass_at_k(verdicts: ParentVerdicts, k: int) -> float:
    """Parent-level pass@k in percent for one seed: per parent, c = the attempts that solve every sub-problem.

    Args:
        verdicts: ``v[p][j][a]`` as for :func:`par_at_k`; n = the number of attempts.
        k: attempts drawn, 1 <= k <= n.

    Returns:
        The mean over parents of :func:`pass_at_k_estimate` (equals :func:`par_at_k` at k = n).

    Raises:
        ValueError: empty or ragged input, or ``k`` out of range.
    """
    n = _check_shape(verdicts, None)
    return _mean_estimate(n, _parent_counts(verdicts, n), k)


def _parent_counts(verdicts: ParentVerdicts, n: int) -> list[int]:
    """Per parent, the number of attempts that solve every sub-problem."""
    return [sum(1 for a in range(n) if all(sub[a] for sub in parent)) for parent in verdicts]


def _mean_estimate(n: int, counts: Sequence[int], k: int) -> float:
    """The mean pass@k estimate in percent over items with ``counts`` correct attempts of ``n`` (each distinct count once)."""
    tally = Counter(counts)
    return 100.0 * sum(m * pass_at_k_estimate(n, c, k) for c, m in tally.items()) / len(counts)


def pass_at_k_curve(n: int, c: int) -> list[float]:
    """:func:`pass_at_k_estimate` for every k = 1..n at once, in O(n).

    Uses ``C(n-c, k+1) / C(n, k+1) = C(n-c, k) / C(n, k) * (n-c-k) / (n-k)``; the values agree with
    :func:`pass_at_k_estimate` to rounding and are exactly 1.0 from k = n-c+1 on and exactly 0.0 when ``c = 0``.

    Args:
        n: attempts (>= 1).
        c: correct attempts (0 <= c <= n).

    Returns:
        ``[pass@1, ..., pass@n]`` as fractions.

    Raises:
        ValueError: counts out of range.
    """
    if not (n >= 1 and 0 <= c <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and n >= 1, got n={n}, c={c}")
    out: list[float] = []
    q = 1.0  # C(n-c, k) / C(n, k) at k = 0
    for k in range(n):
        q = q * (n - c - k) / (n - k) if n - c - k > 0 else 0.0
        out.append(1.0 - q)
    return out


def _mean_curve(n: int, counts: Sequence[int]) -> list[float]:
    """The mean pass@k curve in percent (k = 1..n) over items with ``counts`` correct attempts of ``n``."""
    tally = Counter(counts)
    curves = {c: pass_at_k_curve(n, c) for c in tally}
    return [100.0 * sum(m * curves[c][i] for c, m in tally.items()) / len(counts) for i in range(n)]


def pass_at_k_table(per_seed: Mapping[int, ParentVerdicts], k: int) -> dict[str, Any]:
    """pass@k for every k = 1..``k`` over seeds, as stored in ``report.json`` under ``pass_at_k``.

    Args:
        per_seed: seed -> verdicts ``v[p][j][a]`` with ``k`` attempts each.
        k: the number of attempts.

    Returns:
        ``{"k": [1..k], "sub": S, "par": S}`` where S = ``{"mean": [...], "std": [...],
        "per_seed": {"SEED": [...]}}`` (one value per k, percent; ``std`` entries are ``None`` for a
        single seed); ``sub`` is :func:`pass_at_k`, ``par`` is :func:`par_pass_at_k`.

    Raises:
        ValueError: empty or ragged input, or attempts other than ``k``.
    """
    ks = list(range(1, k + 1))
    out: dict[str, Any] = {"k": ks}
    seeds = list(per_seed)  # the caller's order: at k = K the mean is Sub@K's (Par@K's) to the last bit
    for s in seeds:
        _check_shape(per_seed[s], k)
    counts = {
        "sub": {s: [sum(1 for x in sub if x) for parent in per_seed[s] for sub in parent] for s in seeds},
        "par": {s: _parent_counts(per_seed[s], k) for s in seeds},
    }
    for name in ("sub", "par"):
        vals = {s: _mean_curve(k, counts[name][s]) for s in seeds}
        stats = [mean_std([vals[s][i] for s in seeds]) for i in range(len(ks))]
        out[name] = {
            "mean": [_r(st.mean) for st in stats],
            "std": [None if st.std is None else _r(st.std) for st in stats],
            "per_seed": {str(s): [_r(x) for x in vals[s]] for s in seeds},
        }
    return out
