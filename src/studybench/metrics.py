"""Par@k and Sub@k (paper section 2.2; PROTOCOL.md section 3).

With P the parents of a set, n_p the number of sub-problems of parent p and c[p][j][a] in {0, 1}
the verdict on sub-problem j of parent p in attempt a (a = 0..k-1):

* Par@k = (1/|P|) * sum_p max_a prod_j c[p][j][a]   (some single attempt solves every sub-problem)
* Sub@k = (1 / sum_p n_p) * sum_p sum_j max_a c[p][j][a]

Values are reported in percent. Over seeds: the mean and the sample standard deviation
(ddof = 1; ``None`` for a single seed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ParentVerdicts",
    "SeedStat",
    "breakdown",
    "mean_std",
    "par_at_k",
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
