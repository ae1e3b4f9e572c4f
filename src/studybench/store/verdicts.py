"""The verdict table of a run: one :class:`TurnVerdict` per turn of the manifest's selection.

Reports and analyses read a run through this table, so that what a turn scores is decided once:
the rule verdict that counts (:func:`studybench.store.currency.rule_verdict_status`) and, in a
``rule+llm`` run, the active judge's LLM verdict on a rule rejection of a usable completion
(:func:`studybench.store.currency.llm_verdict_status`).
"""

from __future__ import annotations

from dataclasses import dataclass

from studybench.store.currency import (
    LLMVerdictStatus,
    RuleVerdictStatus,
    llm_verdict_status,
    rule_verdict_status,
)
from studybench.store.manifest import Manifest
from studybench.store.rows import GenerationRow, LLMVerdictRow, RuleVerdictRow, TurnKey
from studybench.store.run import RunStore

__all__ = ["RunRows", "TurnVerdict", "turn_verdicts"]


@dataclass(frozen=True)
class TurnVerdict:
    """What one turn scores.

    Attributes:
        key: the turn.
        answer_type: of its sub-problem.
        rule: the rule verdict's status (``rule.verdict`` is ``None`` when no verdict counts).
        llm: the active judge's verdict status when the judge is asked about this turn (a ``rule+llm``
            run, a counting rule rejection of a completion that did not fail); else ``None``.
    """

    key: TurnKey
    answer_type: str
    rule: RuleVerdictStatus
    llm: LLMVerdictStatus | None = None

    @property
    def missing(self) -> bool:
        """No rule verdict counts (not generated, not judged, or judged on an older completion)."""
        return self.rule.verdict is None

    @property
    def strict(self) -> bool:
        """Correct by the rule verifier alone (Physics-R1 "strict")."""
        return self.rule.verdict is not None and self.rule.verdict.correct

    @property
    def liberal(self) -> bool:
        """Correct by the cascade: rule OR LLM judge (the paper's leaderboard, Physics-R1 "liberal")."""
        return self.strict or (self.llm is not None and self.llm.value == "TRUE")

    @property
    def judgeable(self) -> bool:
        """False when the judge was asked and has no TRUE/FALSE verdict (unjudgeable, error, not judged)."""
        return self.llm is None or self.llm.value in ("TRUE", "FALSE")


@dataclass
class RunRows:
    """The last row per key of each log of a run directory (read once, shared by several tables)."""

    generations: dict[TurnKey, GenerationRow]
    rule_verdicts: dict[TurnKey, RuleVerdictRow]
    llm_verdicts: dict[tuple[TurnKey, str], LLMVerdictRow]

    @classmethod
    def read(cls, store: RunStore, llm: bool = True) -> RunRows:
        """Read the three logs of ``store`` (the LLM log only when ``llm``)."""
        return cls(store.latest_generations(), store.latest_rule_verdicts(), store.latest_llm_verdicts() if llm else {})


def turn_verdicts(manifest: Manifest, rows: RunRows, judge_id: str | None = None) -> list[TurnVerdict]:
    """One :class:`TurnVerdict` per turn of the manifest, in the order seeds, parents, sub-problems, attempts.

    Args:
        manifest: the run's manifest (its split, selection, k and seeds).
        rows: the run's rows.
        judge_id: the LLM judge whose verdicts count (``None``: rule verdicts only).

    Returns:
        ``len(manifest.seeds) * sub-problems * manifest.k`` entries.
    """
    split = manifest.split.name
    out: list[TurnVerdict] = []
    for seed in manifest.seeds:
        for p in manifest.parents:
            for s in p.subs:
                for a in range(manifest.k):
                    key = TurnKey(split, p.uid, s.id, seed, a)
                    rule = rule_verdict_status(rows.generations.get(key), rows.rule_verdicts.get(key))
                    llm = None
                    if judge_id is not None and rule.verdict is not None and not rule.verdict.correct and not rule.failed:
                        assert rule.completion_digest is not None
                        llm = llm_verdict_status(rows.llm_verdicts.get((key, judge_id)), rule.completion_digest)
                    out.append(TurnVerdict(key, s.answer_type, rule, llm))
    return out
