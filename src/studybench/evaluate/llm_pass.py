"""The LLM pass: an LLM verdict for every counting rule rejection of a scope (paper 2.2; PROTOCOL.md 6).

Leaderboard mode (``rule+llm``) sends every current rule rejection (and, with
``judge_rule_accepts``, every rule accept too) to an LLM judge and appends one row per (turn, judge
configuration) to ``llm_judgements.jsonl``. A row is tied to the digest of the completion and of the
judge inputs it judged; which stored verdicts are reused is decided by
:func:`studybench.store.llm_verdict_status` (the one currency rule).

Each row records the judge's token usage (:mod:`studybench.llm_judge.usage`). When the judge has a
budget (:attr:`studybench.llm_judge.LLMJudge.budget`) and it is spent, the pass stops asking: the
verdicts obtained are kept, the turns not judged get no row (``skipped``, with ``budget_stop``
saying why) and a later pass judges them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from studybench.answers import extract_answers
from studybench.costs import TokenCounts
from studybench.evaluate.scope import ProgressFn, RunScope
from studybench.llm_judge import (
    JudgeBudgetExceeded,
    LLMJudge,
    LLMJudgeInputs,
    UnjudgeableTally,
    llm_judge_inputs,
)
from studybench.records import SubProblemRef
from studybench.store import LLMVerdictRow, RunStore, TurnKey, llm_verdict_status, rule_verdict_status

__all__ = ["LLMStats", "add_llm_verdicts_to_scope"]


@dataclass
class LLMStats:
    """Counts of one LLM pass.

    Attributes:
        candidates: turns the judge is asked about (counting rule rejections, plus rule accepts when
            ``judge_rule_accepts``).
        reused: of those, turns with an up-to-date final verdict of this judge in the run already.
        judged: verdicts obtained now (``cache_hits`` from the verdict cache, ``shared`` with a
            concurrent identical request, the rest over HTTP with ``requests`` chat requests in all).
        no_rule_verdict: turns skipped for lack of a counting rule verdict.
        verdicts: counts of TRUE / FALSE / unjudgeable / error among the judged.
        seconds: wall time of the pass.
        tally: the unjudgeable verdicts among the judged, with the alarm
            (:meth:`~studybench.llm_judge.UnjudgeableTally.alarm`) when the judge is not answering in
            its format.
        tokens: token counts of the judge replies received in this pass (what it spent).
        tokens_from_cache: what the verdicts served from the cache took when they were asked.
        skipped: turns left un-judged because the judge's budget was spent (judged by a re-run).
        budget_stop: why the pass stopped asking (the budget sentence), or ``None``.
    """

    candidates: int = 0
    reused: int = 0
    judged: int = 0
    cache_hits: int = 0
    shared: int = 0
    requests: int = 0
    no_rule_verdict: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    tally: UnjudgeableTally = field(default_factory=UnjudgeableTally)
    tokens: TokenCounts = field(default_factory=TokenCounts)
    tokens_from_cache: TokenCounts = field(default_factory=TokenCounts)
    skipped: int = 0
    budget_stop: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The counts as a JSON-ready dict."""
        return {
            "candidates": self.candidates, "reused": self.reused, "judged": self.judged, "cache_hits": self.cache_hits,
            "shared": self.shared, "requests": self.requests, "no_rule_verdict": self.no_rule_verdict,
            "verdicts": dict(self.verdicts), "seconds": round(self.seconds, 3), "unjudgeable": self.tally.to_dict(),
            "tokens": self.tokens.to_dict(), "tokens_from_cache": self.tokens_from_cache.to_dict(),
            "skipped": self.skipped, "budget_stop": self.budget_stop,
        }


async def add_llm_verdicts_to_scope(
    scope: RunScope,
    store: RunStore,
    judge: LLMJudge,
    *,
    judge_rule_accepts: bool = False,
    refresh: bool = False,
    progress: ProgressFn | None = None,
) -> LLMStats:
    """Add LLM verdicts for the scope's counting rule rejections (see the module docstring).

    Args:
        scope: the turns.
        store: the run directory; rows are appended to ``llm_judgements.jsonl``.
        judge: the LLM judge.
        judge_rule_accepts: also judge rule accepts (makes the rule verifier's false accepts
            observable in the consistency report; the cascade verdict of an accept is unchanged).
        refresh: judge again even where the run holds an up-to-date final verdict, asking the
            endpoint afresh: the verdict cache is not read during the pass, and the new verdicts are
            written through to it (if the judge has one).
        progress: see :data:`~studybench.evaluate.scope.ProgressFn` (phase ``"llm judge"``).

    Returns:
        Counts and the wall time of the pass. Turns need a counting rule verdict
        (:func:`~studybench.evaluate.rule_pass.add_rule_verdicts`) to be judged.

    Raises:
        studybench.llm_judge.LLMJudgeConfigError: the endpoint refuses every request (HTTP 401/403/404).

    A judge whose budget is spent is not an error: the turns it did not judge are counted in
    ``skipped`` and the stats' ``budget_stop`` says why.
    """
    gens = store.latest_generations()
    rules = store.latest_rule_verdicts()
    llm_rows = store.latest_llm_verdicts()
    jid = judge.judge_id
    desc = judge.describe()
    stats = LLMStats()
    t0 = time.perf_counter()
    if progress:
        progress("llm judge", 0, None)
    todo: list[tuple[TurnKey, SubProblemRef, str, bool, LLMJudgeInputs, list[str]]] = []
    for key, ref in scope.turns():
        rule = rule_verdict_status(gens.get(key), rules.get(key))
        if not rule.judgeable:
            continue  # not generated, or the generation failed
        if rule.verdict is None:
            stats.no_rule_verdict += 1
            continue
        assert rule.generation is not None and rule.completion_digest is not None
        if rule.verdict.correct and not judge_rule_accepts:
            continue
        stats.candidates += 1
        completion = rule.generation.completion or ""
        extracted = rule.verdict.extracted
        if extracted is None:
            extracted = extract_answers(completion, len(ref.sub.boxes))
        inputs = llm_judge_inputs(ref, completion, list(extracted))
        status = llm_verdict_status(llm_rows.get((key, jid)), rule.completion_digest, inputs.digest)
        if not refresh and status.stale is None:
            stats.reused += 1
            if progress:
                progress("llm judge", 1, None)
            continue
        todo.append((key, ref, rule.completion_digest, rule.verdict.correct, inputs, list(extracted)))
    store.llm_log.open()

    async def one(key: TurnKey, ref: SubProblemRef, cd: str, rule_ok: bool, inputs: LLMJudgeInputs, extracted: list[str]) -> None:
        try:
            v = await judge.judge(inputs)
        except JudgeBudgetExceeded as e:
            stats.skipped += 1
            stats.budget_stop = stats.budget_stop or str(e)
            if progress:
                progress("llm judge", 1, None)
            return
        store.append(LLMVerdictRow(
            **key.to_dict(),
            judge_id=jid,
            judge_model=desc.get("model"),
            template_digest=desc.get("template_digest"),
            completion_digest=cd,
            inputs_digest=inputs.digest,
            answer_type=ref.sub.answer_type.value,
            extracted=extracted,
            rule_correct=rule_ok,
            verdict=v.verdict,
            justification=v.justification,
            error=v.error,
            reply=(v.reply or None) if v.verdict == "unjudgeable" else None,
            cached=v.cached,
            shared=v.shared,
            requests=v.requests,
            usage=v.usage or None,
            time=time.time(),
        ))
        stats.judged += 1
        stats.requests += v.requests
        stats.cache_hits += v.cached
        stats.shared += v.shared
        if v.cached:
            stats.tokens_from_cache.merge(TokenCounts(requests=1, **v.usage))
        elif not v.shared:
            partial = "prompt_tokens" not in v.usage or "completion_tokens" not in v.usage  # tokens not all known
            stats.tokens.merge(TokenCounts(requests=v.requests, unreported=int(bool(v.requests) and partial), **v.usage))
        stats.verdicts[v.verdict] = stats.verdicts.get(v.verdict, 0) + 1
        stats.tally.add(v)
        if progress:
            progress("llm judge", 1, None)

    read_cache = getattr(judge, "read_cache", None)
    if refresh and read_cache:
        judge.read_cache = False  # write through: the fresh verdicts replace the cached ones
    try:
        await asyncio.gather(*(one(*t) for t in todo))
    finally:
        if refresh and read_cache:
            judge.read_cache = read_cache
        store.llm_log.sync()
        stats.seconds = time.perf_counter() - t0
    return stats
