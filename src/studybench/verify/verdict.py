"""The verdict record every judge returns."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Verdict"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of judging one sub-problem.

    Attributes:
        correct: whether the predicted answer(s) match the gold.
        reason: a short human-readable reason, e.g. ``"correct: numeric match (rel. err 0.2%)"`` or
            ``"incorrect: timed out"``; always starts with ``correct`` or ``incorrect``.
        extracted: the predicted box contents that were judged.
    """

    correct: bool
    reason: str
    extracted: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        return {"correct": self.correct, "reason": self.reason, "extracted": list(self.extracted)}
