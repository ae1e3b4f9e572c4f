"""The LLM pass: an LLM verdict for every counting rule rejection of a scope (paper 2.2; docs/protocol.md 6).

Leaderboard mode (``rule+llm``) sends every current rule rejection (and, with
``judge_rule_accepts``, every rule accept too) to an LLM judge and appends one row per (turn, judge
configuration) to ``llm_judgements.jsonl``. A row is tied to the digest of the completion and of the
judge inputs it judged; which stored verdicts are reused is decided by
:func:`studybench.store.llm_verdict_status` (the one currency rule).

Each row records the judge's token usage (:mod:`studybench.llm_judge.usage`). When the judge has a
budget (:attr:`studybench.llm_judge.LLMJudge.budget`) and it is spent, the pass stops asking: the
verdicts obtained are kept, the turns not judged get no row (``skipped``, with ``budget_stop``
saying why) and a later pass judges them.

The pass also stops asking, cancelling the judgements in flight, when asking on cannot give a
result (``stopped`` says why; the turns not judged, ``not_asked``, get no row and a later pass asks
them):

- the judge endpoint stopped answering: ``max_consecutive_failures`` request attempts in a row got
  no answer (dropped connections, a killed server, timeouts, HTTP 502-504) and none for
  ``dead_after_s`` seconds (:class:`studybench.models.EndpointHealth`, as for the model's endpoint);
- the verdicts are clearly mostly unjudgeable
  (:attr:`studybench.llm_judge.UnjudgeableTally.clearly_alarming`): the judge is not answering in
  its format, and every further request would be spent on another unjudgeable verdict.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from studybench.answers import extract_answers
from studybench.costs import TokenCounts
from studybench.evaluate.generate import DEAD_ENDPOINT_GRACE_S, DEFAULT_MAX_CONSECUTIVE_FAILURES
from studybench.evaluate.scope import ProgressFn, RunScope
from studybench.llm_judge import (
    JudgeBudgetExceeded,
    LLMJudge,
    LLMJudgeInputs,
    UnjudgeableTally,
    llm_judge_inputs,
)
from studybench.models import EndpointHealth
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
        stopped: why the pass stopped asking before every candidate was judged (the judge endpoint
            stopped answering, or its verdicts are clearly mostly unjudgeable), or ``None``.
        not_asked: turns left without a verdict by that stop (asked by a re-run).
        first_error: the first transport error of the pass (a verdict ``"error"``), or ``None``.
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
    stopped: str | None = None
    not_asked: int = 0
    first_error: str | None = None

    @property
    def missing(self) -> int:
        """Candidates left without a final verdict by this pass: errors, budget skips and turns not asked."""
        return self.verdicts.get("error", 0) + self.skipped + self.not_asked

    def to_dict(self) -> dict[str, Any]:
        """The counts as a JSON-ready dict."""
        return {
            "candidates": self.candidates, "reused": self.reused, "judged": self.judged, "cache_hits": self.cache_hits,
            "shared": self.shared, "requests": self.requests, "no_rule_verdict": self.no_rule_verdict,
            "verdicts": dict(self.verdicts), "seconds": round(self.seconds, 3), "unjudgeable": self.tally.to_dict(),
            "tokens": self.tokens.to_dict(), "tokens_from_cache": self.tokens_from_cache.to_dict(),
            "skipped": self.skipped, "budget_stop": self.budget_stop, "stopped": self.stopped,
            "not_asked": self.not_asked, "first_error": self.first_error,
        }


async def add_llm_verdicts_to_scope(
    scope: RunScope,
    store: RunStore,
    judge: LLMJudge,
    *,
    judge_rule_accepts: bool = False,
    refresh: bool = False,
    progress: ProgressFn | None = None,
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES,
    dead_after_s: float = DEAD_ENDPOINT_GRACE_S,
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
        max_consecutive_failures: stop once this many judge request attempts in a row got no answer
            (and none for ``dead_after_s`` seconds); 0: never stop for that.
        dead_after_s: seconds without any answer from the judge endpoint before it counts as gone.

    Returns:
        Counts and the wall time of the pass. Turns need a counting rule verdict
        (:func:`~studybench.evaluate.rule_pass.add_rule_verdicts`) to be judged.

    Raises:
        studybench.llm_judge.LLMJudgeConfigError: the endpoint refuses every request (HTTP 401/403/404).

    A judge whose budget is spent is not an error: the turns it did not judge are counted in
    ``skipped`` and the stats' ``budget_stop`` says why. Nor is a judge that stopped answering or
    answers mostly unjudgeable (see the module docstring): ``stopped`` says why, ``not_asked`` counts
    the turns left for a re-run.
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

    tasks: list[asyncio.Future[None]] = []

    def stop(reason: str) -> None:
        """Stop asking: cancel the judgements not finished (they get no row; a re-run asks them)."""
        if stats.stopped is None:
            stats.stopped = reason
            me = asyncio.current_task()
            for t in tasks:
                if t is not me:
                    t.cancel()

    async def watch(h: EndpointHealth) -> None:
        """Stop the pass once the judge's request attempts have gone unanswered for a while."""
        while stats.stopped is None:
            if h.dead(max_consecutive_failures, dead_after_s):
                stop(f"the judge endpoint stopped answering ({h.streak} requests in a row got no answer: {h.last_error}; "
                     f"no answer for {h.silent_for():.0f} s)")
                return
            await asyncio.sleep(min(0.25, dead_after_s / 4) if dead_after_s > 0 else 0.05)

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
        if v.verdict == "error" and stats.first_error is None:
            stats.first_error = v.error
        stats.tally.add(v)
        if progress:
            progress("llm judge", 1, None)
        if stats.tally.clearly_alarming:
            stop(f"the judge's verdicts are mostly unjudgeable: {stats.tally.stop_reason()}")

    read_cache = getattr(judge, "read_cache", None)
    if refresh and read_cache:
        judge.read_cache = False  # write through: the fresh verdicts replace the cached ones
    health = getattr(getattr(judge, "backend", None), "health", None)
    if isinstance(health, EndpointHealth) and not health.streak:
        health.last_answer = time.monotonic()  # the grace period counts from the first request of the pass
    watcher: asyncio.Future[None] | None = None
    try:
        tasks.extend(asyncio.ensure_future(one(*t)) for t in todo)
        if isinstance(health, EndpointHealth) and tasks and max_consecutive_failures > 0:
            watcher = asyncio.ensure_future(watch(health))
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # the pass stopped (the other judgements were cancelled), an error, or an interrupt: let no
            # judgement write after this, then report
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if stats.stopped is None:
                raise
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        if refresh and read_cache:
            judge.read_cache = read_cache
        store.llm_log.sync()
        stats.seconds = time.perf_counter() - t0
    stats.not_asked = len(todo) - stats.judged - stats.skipped
    return stats
