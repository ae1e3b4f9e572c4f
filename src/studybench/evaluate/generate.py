"""The generation pass: ask the model every missing or stale turn of a scope (docs/protocol.md section 2).

Every (seed, attempt, parent) is one *chain*: its sub-problems are asked in order, each turn's
conversation built by :func:`studybench.protocol.build_messages` from the model's own earlier
replies. Chains run concurrently (bounded by ``concurrency`` turns in flight).

Resume: a stored turn is reused when its row has no error and its ``messages_digest`` equals the
digest of the conversation the protocol builds now (so a regenerated earlier turn invalidates the
later turns of its chain, and artefact changes cannot mix). Everything else is generated again and
the new row supersedes the old one.

A dead endpoint: the pass stops when the backend's :class:`~studybench.models.health.EndpointHealth`
(the OpenAI backend keeps one) has seen ``max_consecutive_failures`` request *attempts* in a row get
no answer (connection refused, reset or dropped, timeouts, HTTP 502/503/504), across all turns in
flight and retries included, and no answer for :data:`DEAD_ENDPOINT_GRACE_S` seconds: a dead server
is noticed within seconds instead of after every turn's retries. For backends without one, the same
count is kept over failed *turns* (:func:`is_unreachable_error`). A hung endpoint (it accepts
connections and answers neither the requests in flight nor its liveness probe: ``health.hung``, see
:class:`~studybench.models.health.LivenessCheck`) stops the pass the same way, however long the
requests' own timeout. On stopping, no new turn is asked,
turns in flight are cancelled (their rows are not written), and :attr:`GenerationStats.stopped` says
why. Everything finished before is saved; running the pass again resumes.

A parent whose prompt does not fit the budgets (:func:`studybench.evaluate.fit.parent_fit_problem`:
the context budget or the server's context leaves its last turn fewer completion tokens than the
floor) is skipped, not asked: each of its turns still to generate gets a failed row whose error
begins with :data:`~studybench.evaluate.fit.SKIPPED_PREFIX` and says why (``stats.skipped_parents``);
the other parents run normally.

A budget (``budget``, a :class:`~studybench.costs.BudgetTracker`): every reply is charged to it, and
it is checked before each request is sent; once a limit is reached no request is sent, the requests
in flight finish and are stored, and :attr:`GenerationStats.budget_stopped` says which limit
(:mod:`studybench.evaluate.stopping`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from studybench.answers import clean_surrogates
from studybench.costs import BudgetTracker
from studybench.evaluate.fit import SKIPPED_PREFIX, parent_fit_problem
from studybench.evaluate.scope import ProgressFn, RunScope, request_seed
from studybench.models import ChatBackend, ChatRequest, EndpointHealth
from studybench.models.slots import Slots
from studybench.protocol import Artefacts, build_messages, messages_digest
from studybench.records import Parent, SubProblemRef
from studybench.store import GenerationRow, RunStore, TurnKey

__all__ = [
    "DEAD_ENDPOINT_GRACE_S",
    "DEFAULT_MAX_CONSECUTIVE_FAILURES",
    "GenerationStats",
    "generate_turns",
    "is_permanent_error",
    "is_unreachable_error",
]

DEFAULT_MAX_CONSECUTIVE_FAILURES = 8
"""Request attempts (or, for backends that do not count attempts, turns) in a row that got no answer
from the endpoint, after which a generation pass stops."""

DEAD_ENDPOINT_GRACE_S = 10.0
"""Seconds without any answer from the endpoint before a generation pass gives up on it (so a server
restarting for a moment does not end a run)."""

_UNREACHABLE = re.compile(r"(connection error|timeout after|HTTP 50[234] after)\b")


def is_unreachable_error(error: str) -> bool:
    """Whether a failed turn's error says the endpoint could not be reached or did not answer.

    Connection errors (refused, reset, dropped), timeouts and the gateway statuses 502, 503 and 504,
    as :class:`~studybench.models.openai_backend.OpenAIBackend` words them. An HTTP 4xx or 500 means
    the endpoint answered, and does not count.

    Args:
        error: :attr:`studybench.models.ChatResult.error`.

    Returns:
        ``True`` for an unreachable-endpoint error.
    """
    return _UNREACHABLE.match(error) is not None


_PERMANENT_STATUS = re.compile(r"HTTP (4\d\d) after\b")
_BUDGET_REFUSAL = re.compile(r"(completion budget -?\d+ tokens|the prompt alone \()")


def is_permanent_error(error: str) -> bool:
    """Whether a failed turn's error is one that running the same command again cannot fix.

    An HTTP 4xx other than 408, 409 and 429 (the server refused the request itself: too long for its
    context, an unknown model, a bad parameter), a turn refused before sending because its
    completion budget fell below the floor, and a turn of a parent skipped because its prompt does
    not fit. Transport failures, 5xx and rate limits are transient.

    Args:
        error: :attr:`studybench.models.ChatResult.error`.

    Returns:
        ``True`` when a re-run would fail the same way.
    """
    m = _PERMANENT_STATUS.match(error)
    if m is not None:
        return int(m.group(1)) not in (408, 409, 429)
    return _BUDGET_REFUSAL.match(error) is not None or error.startswith(SKIPPED_PREFIX)


@dataclass
class GenerationStats:
    """Counts of one generation pass.

    Attributes:
        total: turns in the scope.
        reused: stored turns still valid.
        generated: turns requested now (failed ones included).
        failed: of those, turns that failed after the backend's retries.
        retried: of those, turns that needed more than one request (a transient failure retried).
        seconds: wall time of the pass.
        stopped: ``None`` when the pass ran to the end; else why it stopped early (the endpoint
            stopped answering: ``max_consecutive_failures`` unreachable-endpoint failures in a row).
        last_answer: epoch seconds of the last answered turn (the pass's start when none was answered).
        budget_stopped: ``None`` unless the pass stopped because its token or cost budget was spent
            (:meth:`studybench.costs.BudgetTracker.exceeded`'s sentence).
        skipped: turns of skipped parents recorded as failed now (not counted in ``generated``).
        skipped_parents: ``{parent uid: why}`` for the parents whose prompt does not fit the budgets.
    """

    total: int = 0
    reused: int = 0
    generated: int = 0
    failed: int = 0
    retried: int = 0
    seconds: float = 0.0
    stopped: str | None = None
    last_answer: float = 0.0
    budget_stopped: str | None = None
    skipped: int = 0
    skipped_parents: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> int:
        """Turns of the scope that hold a usable completion now (reused or generated without error)."""
        return self.reused + self.generated - self.failed

    @property
    def left(self) -> int:
        """Turns of the scope still to generate (failed, or never asked)."""
        return self.total - self.done

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
    max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES,
    budget: BudgetTracker | None = None,
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
        max_consecutive_failures: stop after this many request attempts in a row got no answer from
            the endpoint (``None`` or 0: never stop); see the module docstring.
        budget: charged with every reply (under the backend's described model); no request is sent
            once it is exceeded (``stats.budget_stopped``).

    Returns:
        Counts and the wall time of the pass; ``stats.stopped`` (the endpoint) or
        ``stats.budget_stopped`` is set when the pass stopped early.

    Raises:
        OSError: a row could not be written (e.g. the disk is full); rows written before are kept.
    """
    chains = list(scope.chains())  # (parent, seed, attempt) of every chain, in the order they start
    existing = store.latest_generations()
    stats = GenerationStats(total=scope.n_turns, last_answer=time.time())
    sem = Slots(max(1, concurrency))  # FIFO like asyncio.Semaphore, at a cost that does not grow with the chains waiting
    t0 = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []
    streak = 0
    store.generation_log.open()
    if progress:
        progress("generate", 0, stats.total)

    def record_outcome(error: str | None) -> None:
        nonlocal streak
        if not error:
            streak = 0
            stats.last_answer = time.time()
            return
        if not is_unreachable_error(error):
            streak = 0  # the endpoint answered (e.g. HTTP 400): it is alive
            return
        streak += 1
        if max_consecutive_failures and streak >= max_consecutive_failures and stats.stopped is None:
            stop(f"{streak} turns in a row failed ({error})")

    def stop(reason: str) -> None:
        stats.stopped = reason
        me = asyncio.current_task()
        for t in tasks:
            if t is not me:
                t.cancel()

    health = getattr(backend, "health", None)
    model = str(backend.describe().get("model") or "") if budget is not None else ""

    def hung(h: EndpointHealth) -> None:
        if stats.stopped is None:
            stats.last_answer = time.time() - h.silent_for()
            stop(f"the endpoint accepts connections but answers nothing: {h.hung}")

    async def watch(h: EndpointHealth) -> None:
        """Stop the pass when the endpoint's request attempts have gone unanswered for a while."""
        while stats.stopped is None:
            if h.hung is not None:
                hung(h)
                return
            if h.dead(max_consecutive_failures or 0, DEAD_ENDPOINT_GRACE_S):
                stats.last_answer = time.time() - h.silent_for()
                stop(f"{h.streak} requests in a row got no answer ({h.last_error}); "
                     f"no answer for {h.silent_for():.0f} s")
                return
            await asyncio.sleep(0.25)

    fits: dict[str, str | None] = {}

    def skip(parent: Parent, seed: int, attempt: int, previous: list[str | None], why: str) -> None:
        """Record every turn of the chain from ``len(previous)`` on as failed: the parent does not fit."""
        stats.skipped_parents[parent.uid] = why
        subs = parent.subs()
        for j in range(len(previous), len(subs)):
            ref = SubProblemRef(parent, j, subs[j])
            digest = messages_digest(build_messages(ref, previous + [None] * (j - len(previous)), artefacts))
            store.append(GenerationRow(**scope.key(ref, seed, attempt).to_dict(), turn=j, messages_digest=digest,
                                       request_seed=request_seed(seed, attempt, parent.uid, j), completion="",
                                       latency_s=0.0, attempts=0, error=SKIPPED_PREFIX + why, time=time.time()))
            stats.skipped += 1
            if progress:
                progress("generate", 1, None)

    async def chain(parent: Parent, seed: int, attempt: int) -> None:
        previous: list[str | None] = []
        for i, sub in enumerate(parent.subs()):
            if stats.stopped is not None:
                return
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
            if parent.uid not in fits:
                fits[parent.uid] = parent_fit_problem(backend, parent, artefacts)
            why = fits[parent.uid]
            if why is not None:  # never asked: its last turn cannot fit (turns already done are kept)
                skip(parent, seed, attempt, previous, why)
                return
            rseed = request_seed(seed, attempt, parent.uid, ref.index)
            async with sem:
                spent = budget.exceeded() if budget is not None else None
                if spent is not None or stats.budget_stopped is not None:
                    stats.budget_stopped = stats.budget_stopped or spent
                    return  # no new request; those in flight finish and are stored
                res = await backend.complete(ChatRequest(msgs, rseed, ref, ref.index))
            if isinstance(health, EndpointHealth) and health.hung is not None:
                hung(health)  # a turn ended by the hang is not written: the next run asks it again
                return
            if budget is not None:
                budget.charge(model, res.usage, answered=res.error is None)
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
            stats.retried += int((res.attempts or 1) > 1)
            record_outcome(res.error)
            if res.error:
                stats.failed += 1
                previous.append(None)
                if on_error:
                    on_error(key, res.error)
            else:
                previous.append(completion)
            if progress:
                progress("generate", 1, None)
            if stats.stopped is not None:
                return

    watcher: asyncio.Future[None] | None = None
    try:
        tasks.extend(asyncio.ensure_future(chain(p, seed, a)) for p, seed, a in chains)
        watcher = asyncio.ensure_future(watch(health)) if isinstance(health, EndpointHealth) and tasks else None
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # the endpoint stopped answering (the other chains were cancelled), an error, or an interrupt:
            # let no chain write after this, then report
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if stats.stopped is None:
                raise
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        store.generation_log.sync()
        stats.seconds = time.perf_counter() - t0
        if stats.budget_stopped is not None and budget is not None:  # what was spent once the requests in flight came back
            stats.budget_stopped = budget.exceeded() or stats.budget_stopped
    return stats
