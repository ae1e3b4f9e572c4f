"""The verdict record the verifier returns, and the result type of every rule."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from studybench.records import AnswerType

__all__ = ["RuleResult", "SlotRule", "Verdict", "is_internal_error"]

_INTERNAL = re.compile(r"^incorrect:(?:.*?:)? internal error\b|^incorrect: worker died \(worker failed to start\)")


def is_internal_error(reason: object) -> bool:
    """Whether a rule verdict's reason says the verifier failed rather than decided.

    An internal error (a rule or worker raised, e.g. ``ImportError`` from a broken install, also in one
    slot of a compound answer: ``"incorrect: slot 2 (NV): internal error (TypeError)"``) and a worker
    that could not start say nothing about the answer: callers count them, report them loudly and
    never treat a result holding one as complete. Timeouts (``"incorrect: timed out"``) and workers
    killed by their memory limit are verdicts of the verifier's policy, not internal errors.

    Args:
        reason: a :attr:`Verdict.reason` (any value; non-strings are not internal errors).

    Returns:
        ``True`` for an internal error.
    """
    return isinstance(reason, str) and _INTERNAL.search(reason) is not None


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

    @property
    def internal_error(self) -> bool:
        """The verifier failed rather than decided (:func:`is_internal_error`)."""
        return is_internal_error(self.reason)


RuleResult = tuple[bool | None, str]
"""(decision, reason): decision ``None`` means undecided (needs the full tier)."""
SlotRule = Callable[[str, str, AnswerType, "str | None"], RuleResult]
