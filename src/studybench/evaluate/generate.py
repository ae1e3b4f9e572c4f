"""The generation pass: ask the model every missing or stale turn of a scope (PROTOCOL.md section 2).

Every (seed, attempt, parent) is one *chain*: its sub-problems are asked in order, each turn's
conversation built by :func:`studybench.protocol.build_messages` from the model's own earlier
replies. Chains run concurrently (bounded by ``concurrency`` turns in flight).

Resume: a stored turn is reused when its row has no error and its ``messages_digest`` equals the
digest of the conversation the protocol builds now (so a regenerated earlier turn invalidates the
later turns of its chain, and artefact changes cannot mix). Everything else is generated again and
the new row supersedes the old one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from studybench.answers import clean_surrogates
from studybench.evaluate.scope import ProgressFn, RunScope, request_seed
from studybench.models import ChatBackend, ChatRequest
from studybench.protocol import Artefacts, build_messages, messages_digest
from studybench.records import Parent, SubProblemRef
from studybench.store import GenerationRow, RunStore, TurnKey

__all__ = ["GenerationStats", "generate_turns"]


@dataclass
class GenerationStats:
    """Counts of one generation pass.

    Attributes:
        total: turns in the scope.
        reused: stored turns still valid.
        generated: turns requested now (failed ones included).
        failed: of those, turns that failed after the backend's retries.
        seconds: wall time of the pass.
    """

    total: int = 0
    reused: int = 0
    generated: int = 0
    failed: int = 0
    seconds: float = 0.0

    @property
    def turns_per_s(self) -> float:
        """Generated turns per second of the pass."""
        return self.generated / self.seconds if self.seconds > 0 else 0.0


async def generate_turns(
    scope: RunScope,
    store: RunStore,
    backend: ChatBackend,
    artefacts: Artefacts,
    *,
    concurrency: int = 64,
    progress: ProgressFn | None = None,
    on_error: Callable[[TurnKey, str], None] | None = None,
) -> GenerationStats:
    """Generate every missing or stale turn of ``scope`` (see the module docstring).

    Args:
        scope: the turns.
        store: the run directory; rows are appended to ``generations.jsonl``.
        backend: the model.
        artefacts: the method artefacts applied to every conversation.
        concurrency: most turns in flight.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn` (phase ``"generate"``).
        on_error: called with (turn key, error) for every turn that failed after the backend's retries.

    Returns:
        Counts and the wall time of the pass.
    """
    existing = store.latest_generations()
    stats = GenerationStats(total=scope.n_turns)
    sem = asyncio.Semaphore(max(1, concurrency))
    t0 = time.perf_counter()
    store.generation_log.open()
    if progress:
        progress("generate", 0, stats.total)

    async def chain(parent: Parent, seed: int, attempt: int) -> None:
        previous: list[str | None] = []
        for i, sub in enumerate(parent.subs()):
            ref = SubProblemRef(parent, i, sub)
            msgs = build_messages(ref, previous, artefacts)
            digest = messages_digest(msgs)
            key = scope.key(ref, seed, attempt)
            old = existing.get(key)
            if old is not None and old.messages_digest == digest and not old.error and old.completion is not None:
                previous.append(old.completion)
                stats.reused += 1
                if progress:
                    progress("generate", 1, None)
                continue
            rseed = request_seed(seed, attempt, parent.uid, ref.index)
            async with sem:
                res = await backend.complete(ChatRequest(msgs, rseed, ref, ref.index))
            completion = clean_surrogates(res.completion or "")
            row = GenerationRow(
                **key.to_dict(),
                turn=ref.index,
                messages_digest=digest,
                request_seed=rseed,
                completion=completion,
                reasoning=None if res.reasoning is None else clean_surrogates(res.reasoning),
                finish_reason=res.finish_reason,
                usage=res.usage,
                latency_s=round(res.latency_s, 6),
                attempts=res.attempts,
                error=res.error,
                time=time.time(),
                extra=res.extra or None,
            )
            store.append(row)
            stats.generated += 1
            if res.error:
                stats.failed += 1
                previous.append(None)
                if on_error:
                    on_error(key, res.error)
            else:
                previous.append(completion)
            if progress:
                progress("generate", 1, None)

    try:
        await asyncio.gather(*(chain(p, seed, a) for p, seed, a in scope.chains()))
    finally:
        store.generation_log.sync()
        stats.seconds = time.perf_counter() - t0
    return stats
