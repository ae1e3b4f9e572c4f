"""Which stored verdict counts: the one rule of currency, used by the runner, the report and the analyses.

A run directory's logs are append-only, so a turn may hold rows made on completions that were
regenerated since, or with verifier settings that changed since. Two questions are asked of them,
and both are answered here and nowhere else:

**Does a stored verdict count for the turn?** (the report, the consistency analysis). A rule
verdict counts when it was made on the turn's current completion (same ``completion_digest`` as the
sha256 of the last generation row's ``completion``). An LLM verdict counts when, in addition, it too
was made on that completion. Nothing else matters for counting: a verdict made by an older verifier
version, one that timed out or one whose judge inputs changed still counts until it is replaced.

**Must a pass take the turn (again)?** (the rule pass verifies it, the LLM pass judges it). Yes when no verdict
counts, and also when the counting verdict is out of date: for a rule verdict, the generation's
``error`` changed or the rule verifier's settings changed (mode, version, timeout); for an LLM
verdict, its judge inputs changed (``inputs_digest``) or it is not final (``"error"``: a transport
failure).

**Timed-out rule verdicts** (``reason`` starts with :data:`RETRYABLE_RULE_REASON`) are final for the
verifier settings that made them: verifying again with the same timeout almost always times out
again. They are verified again when the settings change (e.g. a larger timeout) or when asked
(``retry_timeouts``, e.g. after a run on a loaded machine); reports count them.

**Rule verdicts that are internal errors** (:func:`rule_internal_error`: the verifier failed, e.g. a
worker whose SymPy import broke, rather than decided) count, as incorrect, until replaced, and are
never final: the rule pass verifies them again every time. Reports count them
(``turns.rule_internal_errors``) and a report holding one is not complete.

:func:`rule_verdict_status` and :func:`llm_verdict_status` return both answers at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from studybench.files import text_digest
from studybench.store.rows import FINAL_LLM_VERDICTS, GenerationRow, LLMVerdictRow, RuleVerdictRow

__all__ = [
    "RETRYABLE_RULE_REASON",
    "LLMVerdictStatus",
    "RuleVerdictStatus",
    "llm_verdict_status",
    "rule_internal_error",
    "rule_verdict_status",
]

RETRYABLE_RULE_REASON = "incorrect: timed out"
"""The reason of a rule verdict that timed out: final for its verifier settings, verified again only
when they change or with ``retry_timeouts``."""

_INTERNAL = re.compile(r"^incorrect:(?:.*?:)? internal error\b|^incorrect: worker died \(worker failed to start\)")


def rule_internal_error(reason: object) -> bool:
    """Whether a stored rule verdict's reason is an internal error of the verifier, not a decision.

    The same test as :func:`studybench.verify.is_internal_error` (the store sits below the verifier,
    so it keeps its own copy of the rule; a test keeps the two equal).

    Args:
        reason: a rule verdict row's ``reason``.

    Returns:
        ``True`` for ``"incorrect: internal error (...)"`` (also inside a compound answer's slot) and
        ``"incorrect: worker died (worker failed to start)"``.
    """
    return isinstance(reason, str) and _INTERNAL.search(reason) is not None


@dataclass(frozen=True)
class RuleVerdictStatus:
    """What the stored rows say about one turn's rule verdict.

    Attributes:
        generation: the turn's last generation row, ``None`` when it has none (or an unusable one).
        completion_digest: sha256 of ``generation.completion`` (``None`` without a generation).
        verdict: the rule verdict that counts for the turn (made on its current completion), or ``None``.
        stale: why the rule pass must verify the turn (again); ``None`` when ``verdict`` is up to date
            or when there is nothing to judge (no usable generation).
    """

    generation: GenerationRow | None
    completion_digest: str | None
    verdict: RuleVerdictRow | None
    stale: str | None

    @property
    def failed(self) -> bool:
        """The turn's generation failed (its row carries an ``error``)."""
        return self.generation is not None and bool(self.generation.error)

    @property
    def timed_out(self) -> bool:
        """The counting rule verdict timed out (its reason starts with :data:`RETRYABLE_RULE_REASON`)."""
        return self.verdict is not None and self.verdict.reason.startswith(RETRYABLE_RULE_REASON)

    @property
    def internal_error(self) -> bool:
        """The counting rule verdict is an internal error of the verifier (:func:`rule_internal_error`)."""
        return self.verdict is not None and rule_internal_error(self.verdict.reason)

    @property
    def judgeable(self) -> bool:
        """The turn has a usable completion, not a failed generation: LLM-judgeable when it counts."""
        return self.generation is not None and not self.generation.error


def rule_verdict_status(
    generation: GenerationRow | None,
    rule: RuleVerdictRow | None,
    settings: dict[str, Any] | None = None,
    *,
    retry_timeouts: bool = False,
) -> RuleVerdictStatus:
    """Whether a turn's stored rule verdict counts, and whether the rule pass must verify it again.

    Args:
        generation: the turn's last generation row (``None``: not generated).
        rule: the turn's last rule verdict row (``None``: never judged).
        settings: the rule verifier's settings now (see :func:`studybench.store.manifest.rule_settings`);
            ``None`` when the caller only counts (reports) and does not verify.
        retry_timeouts: a verdict that timed out is out of date even with the same settings (the
            caller asks to verify timeouts again); by default it is final for its settings.

    Returns:
        A :class:`RuleVerdictStatus` (see the module docstring for the rule).
    """
    if generation is None or generation.completion is None:
        return RuleVerdictStatus(None, None, None, None)
    cd = text_digest(generation.completion)
    if rule is None:
        return RuleVerdictStatus(generation, cd, None, "no rule verdict")
    if rule.completion_digest != cd:
        return RuleVerdictStatus(generation, cd, None, "made on another completion")
    stale: str | None = None
    if rule.generation_error != generation.error:
        stale = "the generation's error changed"
    elif settings is not None and rule.verifier != settings:
        stale = "the rule verifier's settings changed"
    elif retry_timeouts and rule.reason.startswith(RETRYABLE_RULE_REASON):
        stale = "timed out"
    elif settings is not None and rule_internal_error(rule.reason):
        stale = "internal error"
    return RuleVerdictStatus(generation, cd, rule, stale)


@dataclass(frozen=True)
class LLMVerdictStatus:
    """What the stored rows say about one turn's LLM verdict by one judge configuration.

    Attributes:
        verdict: the LLM verdict that counts (made on the turn's current completion), or ``None``.
        stale: why the LLM pass must judge the turn (again); ``None`` when ``verdict`` is up to date.
    """

    verdict: LLMVerdictRow | None
    stale: str | None

    @property
    def value(self) -> str | None:
        """The counting verdict's value (``"TRUE"``, ``"FALSE"``, ``"unjudgeable"``, ``"error"``) or ``None``."""
        return None if self.verdict is None else self.verdict.verdict


def llm_verdict_status(
    row: LLMVerdictRow | None, completion_digest: str, inputs_digest: str | None = None
) -> LLMVerdictStatus:
    """Whether a turn's stored LLM verdict counts, and whether the LLM pass must judge it again.

    Args:
        row: the last LLM verdict row of the turn for one judge id (``None``: never judged by it).
        completion_digest: sha256 of the turn's current completion (:attr:`RuleVerdictStatus.completion_digest`).
        inputs_digest: the judge inputs' digest now; ``None`` when the caller only counts.

    Returns:
        An :class:`LLMVerdictStatus` (see the module docstring for the rule).
    """
    if row is None:
        return LLMVerdictStatus(None, "not judged")
    if row.completion_digest != completion_digest:
        return LLMVerdictStatus(None, "made on another completion")
    if inputs_digest is not None and row.inputs_digest != inputs_digest:
        return LLMVerdictStatus(row, "the judge inputs changed")
    if row.verdict not in FINAL_LLM_VERDICTS:
        return LLMVerdictStatus(row, "no final verdict")
    return LLMVerdictStatus(row, None)
