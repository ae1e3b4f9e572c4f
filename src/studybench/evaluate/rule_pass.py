"""The rule pass: give every turn of a scope a current rule verdict (docs/protocol.md sections 4-5).

Which turns are verified is decided by :func:`studybench.store.rule_verdict_status` (the one currency
rule): a turn with a usable completion is verified when no verdict counts for it, or when the one that
counts is out of date (the generation's error changed or the verifier's settings changed). A verdict
that timed out is final for the settings that made it, unless ``retry_timeouts`` asks to verify it
again. A failed turn is recorded as incorrect with its error as the reason. A turn whose gold is an
erratum's correction (``--errata apply``) stores the erratum's tag with its settings
(:func:`studybench.errata.errata_tag`): switching the errata setting verifies exactly those turns again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from studybench.errata import errata_tag
from studybench.evaluate.scope import ProgressFn, RunScope
from studybench.records import SubProblemRef
from studybench.store import (
    RETRYABLE_RULE_REASON,
    RuleVerdictRow,
    RuleVerdictStatus,
    RunStore,
    TurnKey,
    rule_internal_error,
    rule_verdict_status,
)

__all__ = ["RuleStats", "RuleVerifier", "add_rule_verdicts", "problem_text"]


def problem_text(ref: SubProblemRef) -> str:
    """The text a sub-problem is asked with: the parent's stem, then the sub-problem's own text.

    Args:
        ref: the sub-problem.

    Returns:
        The stem and the sub-problem text joined by a blank line (either may be empty).
    """
    return "\n\n".join(t for t in (ref.parent.stem, ref.sub.problem) if t and t.strip())


class RuleVerifier(Protocol):
    """What the rule pass needs of a verifier (:class:`studybench.verify.Verifier`)."""

    def verify_responses(self, items: list[tuple[Any, ...]]) -> list[tuple[list[str], Any]]:
        """(extracted answers, verdict with ``correct`` and ``reason``) per item.

        An item is ``(gold answer, response, type, type_sequence, gold_unit, problem)``: ``gold_unit``
        is ``None`` and ``problem`` the parent's stem and the sub-problem's text, whose definitions
        the verifier may use (:mod:`studybench.verify.physics.definitions`).
        """
        ...


@dataclass
class RuleStats:
    """Counts of one rule pass.

    Attributes:
        total: turns with a usable completion.
        reused: of those, turns whose verdict was current.
        verified: turns verified now.
        correct: current verdicts that are correct (reused and new).
        timed_out: current verdicts that timed out (reused and new): incorrect, and final for these
            settings; a larger timeout (or ``retry_timeouts``) verifies them again.
        internal_errors: verdicts made now that are internal errors of the verifier
            (:func:`studybench.store.rule_internal_error`; never final: verified again next time).
        seconds: wall time of the pass.
    """

    total: int = 0
    reused: int = 0
    verified: int = 0
    correct: int = 0
    timed_out: int = 0
    internal_errors: int = 0
    seconds: float = 0.0


def add_rule_verdicts(
    scope: RunScope,
    store: RunStore,
    verifier: RuleVerifier,
    settings: dict[str, Any],
    *,
    progress: ProgressFn | None = None,
    chunk: int = 512,
    retry_timeouts: bool = False,
) -> RuleStats:
    """Verify every turn of ``scope`` that has no current rule verdict; append the verdicts.

    Args:
        scope: the turns.
        store: the run directory; rows are appended to ``judgements.jsonl``.
        verifier: the rule verifier.
        settings: the verifier's settings (:func:`studybench.store.rule_settings`), stored with each
            verdict; a stored verdict made with other settings is verified again.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn` (phase ``"verify"``).
        chunk: turns sent to the verifier at once.
        retry_timeouts: verify again turns whose verdict timed out with the same settings (by default
            such a verdict is final for its settings and reused).

    Returns:
        Counts and the wall time of the pass.
    """
    gens = store.latest_generations()
    rules = store.latest_rule_verdicts()
    stats = RuleStats()
    t0 = time.perf_counter()
    if progress:
        progress("verify", 0, scope.n_turns)
    todo: list[tuple[TurnKey, RuleVerdictStatus, SubProblemRef, dict[str, Any]]] = []
    for key, ref in scope.turns():
        tag = errata_tag(ref.parent.uid, ref.sub_id, ref.sub.answer)  # a corrected gold: its verdicts say so
        turn_settings = settings if tag is None else {**settings, "errata": tag}
        status = rule_verdict_status(gens.get(key), rules.get(key), turn_settings, retry_timeouts=retry_timeouts)
        if status.generation is None:
            continue  # not generated, or an unusable row: the next generation pass replaces it
        stats.total += 1
        if status.stale is None and status.verdict is not None:
            stats.reused += 1
            stats.correct += status.verdict.correct
            stats.timed_out += status.timed_out
            if progress:
                progress("verify", 1, None)
            continue
        todo.append((key, status, ref, turn_settings))
    store.rule_log.open()
    for start in range(0, len(todo), chunk):
        batch = todo[start : start + chunk]
        items = [(ref.sub.answer, st.generation.completion or "", ref.sub.answer_type, ref.sub.type_sequence, None,
                  problem_text(ref))
                 for _, st, ref, _ in batch if st.generation is not None and not st.generation.error]
        results = iter(verifier.verify_responses(items))
        for key, status, ref, turn_settings in batch:
            g = status.generation
            assert g is not None
            preds: list[str] = []
            if g.error:
                correct, reason = False, f"incorrect: generation failed ({g.error[:300]})"
            else:
                preds, v = next(results)
                correct, reason = bool(v.correct), v.reason
            store.append(RuleVerdictRow(
                **key.to_dict(),
                completion_digest=status.completion_digest,
                generation_error=g.error,
                answer_type=ref.sub.answer_type.value,
                type_sequence=ref.sub.type_sequence_str,
                extracted=preds,
                correct=correct,
                reason=reason,
                verifier=turn_settings,
                time=time.time(),
            ))
            stats.verified += 1
            stats.correct += correct
            stats.timed_out += reason.startswith(RETRYABLE_RULE_REASON)
            stats.internal_errors += rule_internal_error(reason)
            if progress:
                progress("verify", 1, None)
    store.rule_log.sync()
    stats.seconds = time.perf_counter() - t0
    return stats
