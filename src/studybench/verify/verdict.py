"""The verdict record the verifier returns, and the result type of every rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from studybench.records import AnswerType

__all__ = ["RuleResult", "SlotRule", "Verdict"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one sub-problem's answer.

    Attributes:
        correct: whether the predicted answer(s) match the gold.
        reason: a short human-readable reason, e.g. ``"correct: numeric match (rel. err 0.2%)"`` or
            ``"incorrect: timed out"``; always starts with ``correct`` or ``incorrect``.
        extracted: the predicted box contents that were compared.
    """

    correct: bool
    reason: str
    extracted: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        """The verdict as a JSON-ready dict.

        Returns:
            ``{"correct": ..., "reason": ..., "extracted": [...]}``.
        """
        return {"correct": self.correct, "reason": self.reason, "extracted": list(self.extracted)}


RuleResult = tuple[bool | None, str]
"""(decision, reason): decision ``None`` means undecided (needs the full tier)."""
SlotRule = Callable[[str, str, AnswerType, "str | None"], RuleResult]
