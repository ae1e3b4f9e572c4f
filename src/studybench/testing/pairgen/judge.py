"""Judging generated pairs with the rule verifier, and the table per transformation.

:func:`judge_pairs` runs :meth:`studybench.verify.Verifier.verify_responses` on the pairs;
:func:`score` counts, per transformation, family and overall, the pairs, accepts, true and false
accepts, unparsable verdicts and timeouts; :func:`format_table` prints them;
:func:`failure_kinds` groups the wrong verdicts by transformation and normalised reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from studybench.testing.pairgen.pairs import TRANSFORMATIONS, Pair

__all__ = ["UNPARSABLE", "Row", "failure_kinds", "format_table", "judge_pairs", "reason_kind", "score"]

UNPARSABLE = re.compile(r"unparsable|could not read|cannot read|unreadable|not a plain number|leftover|cannot parse", re.I)
"""A verdict reason saying the answer (or gold) could not be read."""


def judge_pairs(pairs: Sequence[Pair], verifier: Any, chunk: int = 2000) -> list[Any]:
    """Verdicts of the rule verifier on every pair, in order.

    Args:
        pairs: the pairs.
        verifier: a :class:`studybench.verify.Verifier`.
        chunk: pairs per :meth:`~studybench.verify.Verifier.verify_responses` call.

    Returns:
        One :class:`studybench.verify.Verdict` per pair.
    """
    out: list[Any] = []
    for i in range(0, len(pairs), chunk):
        out += [v for _, v in verifier.verify_responses([p.item() for p in pairs[i: i + chunk]])]
    return out


@dataclass
class Row:
    """Counts of one table row (a transformation, a family or everything)."""

    name: str
    family: str
    pairs: int = 0
    positives: int = 0
    true_accepts: int = 0
    false_accepts: int = 0
    unparsable: int = 0
    timeouts: int = 0

    @property
    def precision(self) -> float | None:
        """True accepts over accepts (``None`` with no accept)."""
        acc = self.true_accepts + self.false_accepts
        return self.true_accepts / acc if acc else None

    @property
    def recall(self) -> float | None:
        """True accepts over positives (``None`` with no positive pair)."""
        return self.true_accepts / self.positives if self.positives else None

    def add(self, p: Pair, v: Any) -> None:
        """Count one pair and its verdict."""
        self.pairs += 1
        self.positives += bool(p.label)
        if v.correct:
            if p.label:
                self.true_accepts += 1
            else:
                self.false_accepts += 1
        if UNPARSABLE.search(v.reason or ""):
            self.unparsable += 1
        if (v.reason or "").startswith("incorrect: timed out"):
            self.timeouts += 1


def score(pairs: Sequence[Pair], verdicts: Sequence[Any]) -> list[Row]:
    """Rows per transformation (table order), then per family, then ``all``."""
    by_t: dict[str, Row] = {}
    by_f: dict[str, Row] = {}
    total = Row("all", "all")
    for p, v in zip(pairs, verdicts, strict=True):
        by_t.setdefault(p.transformation, Row(p.transformation, p.family)).add(p, v)
        by_f.setdefault(p.family, Row(f"[{p.family}]", p.family)).add(p, v)
        total.add(p, v)
    order = {n: i for i, n in enumerate(TRANSFORMATIONS)}
    rows = sorted(by_t.values(), key=lambda r: (r.family == "near-miss", order.get(r.name, 1 << 30), r.name))
    return rows + sorted(by_f.values(), key=lambda r: (r.family == "near-miss", r.family)) + [total]


def _f(x: float | None, places: int = 3) -> str:
    return "-" if x is None else f"{x:.{places}f}"


def format_table(rows: Sequence[Row]) -> str:
    """The rows as a fixed-width table: transformation, family, pairs, P, R, false accepts, unparsable, timeouts."""
    head = f"{'transformation':<22} {'family':<10} {'pairs':>6} {'P':>7} {'R':>6} {'FA':>5} {'unpars':>6} {'t/o':>4}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.name.startswith("[") and not lines[-1].startswith("-"):
            lines.append("-" * len(head))
        fa = str(r.false_accepts) if r.pairs > r.positives else "-"
        prec = _f(r.precision, 4) if r.positives else "-"  # a near-miss row alone has no precision to speak of
        lines.append(f"{r.name:<22} {r.family:<10} {r.pairs:>6} {prec:>7} {_f(r.recall):>6} {fa:>5} "
                     f"{r.unparsable:>6} {r.timeouts:>4}")
    return "\n".join(lines)


def reason_kind(reason: str) -> str:
    """A verdict reason with numbers, quoted text and parenthesised detail collapsed (for grouping)."""
    r = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", reason or "")
    r = re.sub(r"\([^()]*\)", "(…)", r)
    r = re.sub(r"-?\d+(?:\.\d+)?(?:e-?\d+)?%?", "N", r)
    return r.strip()[:90]


def failure_kinds(pairs: Sequence[Pair], verdicts: Sequence[Any]) -> Counter[tuple[str, str]]:
    """Wrong verdicts (a right answer rejected, a wrong one accepted) by (transformation, reason kind)."""
    out: Counter[tuple[str, str]] = Counter()
    for p, v in zip(pairs, verdicts, strict=True):
        if bool(v.correct) != p.label:
            out[(p.transformation, reason_kind(v.reason))] += 1
    return out
