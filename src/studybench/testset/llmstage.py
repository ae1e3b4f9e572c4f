"""The LLM plumbing of the test-set construction stages (``build decompose``, ``verify``, ``guide``).

- :class:`StageCache`: an append-only JSON Lines cache of teacher replies at ``DIR/cache/<stage>.jsonl``,
  keyed by the sha256 of the canonical JSON of (model, messages, sampling, salt): any change to the
  prompt (a fragment's text, a sub-problem, the template), the model or the sampling asks again. A reply
  the server gave (also a malformed or truncated one) is cached; a transport failure is not.
- :class:`StageLLM`: one ``ask`` = up to ``attempts`` requests under a concurrency bound. A reply the
  ``validate`` callable rejects (it raises :class:`ValueError`) or one cut by the token limit
  (``finish_reason == "length"``) is a failed attempt: the next attempt sends the conversation with
  that reply and a short correction, so it is a different request (and a different cache key) and a
  deterministic teacher is not asked the same question again. Transport errors are retried by the
  backend (:class:`~studybench.models.openai_backend.OpenAIBackend`: 429/5xx/timeouts with backoff)
  and then end the ask with ``error`` set. Token usage is totalled in :attr:`StageLLM.usage`
  (prompt, completion, reasoning and cached-prompt tokens of the replies received now; cached replies
  cost nothing).
- Budgets: a :class:`~studybench.costs.BudgetTracker` (:attr:`StageLLM.budget`) is charged with every
  reply received; once it is exceeded no new request is sent (:class:`StageBudgetExceeded`; cached
  replies are still served, requests in flight finish). A stage's budget starts from what the stage
  already spent in the same work directory: :meth:`StageCache.spent` sums the usage of every reply in
  its cache file, and every paid reply is appended there (deleting the cache forgets it).
  :func:`write_stage_usage` records the totals and the cost in ``DIR/<stage>.usage.json``.
- :func:`run_items`: the resumable driver: one output line per item key, appended and flushed as each
  item finishes, so a SIGKILL loses at most the items in flight; a re-run skips the keys already written.
  A spent budget stops it taking new items (``budget_stop``); items not finished are left for a re-run.
- :func:`check_stage_meta`: the first run's settings and input digests in ``DIR/<stage>.meta.json``; a
  re-run with different ones is refused (use ``--restart``).
- :func:`open_backend`: the chat backend for ``--teacher MODEL --base-url URL``, resolved the way
  ``studybench eval`` resolves ``--model``/``--base-url`` (:meth:`~studybench.evaluate.EvalSpec.make_backend`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.costs import BudgetTracker, TokenCounts, normalise_usage
from studybench.files import InputFileError, JsonlLog, atomic_write_text, dumps_json, file_sha256, read_json
from studybench.models import ChatBackend, ChatRequest, SamplingParams

__all__ = [
    "Asked",
    "StageBudgetExceeded",
    "StageCache",
    "StageLLM",
    "StageMetaError",
    "check_stage_meta",
    "input_digest",
    "open_backend",
    "read_rows",
    "run_items",
    "write_stage_usage",
]

#: The usage counters of :attr:`StageLLM.usage` (``cached``: replies served from the reply cache;
#: ``cached_tokens``: prompt tokens the server served from its prompt cache).
USAGE_KEYS = ("requests", "cached", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens",
              "reasked", "failures")


class StageBudgetExceeded(RuntimeError):
    """The stage's budget (:attr:`StageLLM.budget`) is spent: no new request is sent (the message says why)."""

_ECHO_LIMIT = 4000  # characters of a rejected reply sent back with the correction


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The complete JSON-object lines of a JSONL file written by a stage (a torn last line is skipped).

    Args:
        path: the file; a missing file has no rows.

    Returns:
        The rows in file order.

    Raises:
        studybench.files.InputFileError: not a regular file, too large, or a complete line that is not
            a strict JSON object (the message names the file and the line).
    """
    return list(JsonlLog(path).rows())


class StageCache:
    """Teacher replies of one stage, append-only at ``path`` (normally ``DIR/cache/<stage>.jsonl``).

    Each line is ``{"key", "model", "text", "reasoning", "finish_reason", "usage"}``; the last line for
    a key wins. A torn last line (a writer killed mid-line) is skipped on reading and cut before the
    next append.

    Args:
        path: the cache file (created on the first :meth:`put`).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._log = JsonlLog(self.path, strict=False)  # a lost row is only a miss
        self._entries: dict[str, dict[str, Any]] = {}
        for row in self._log.rows():
            key = row.get("key")
            if isinstance(key, str) and isinstance(row.get("text"), str):
                self._entries[key] = row

    @classmethod
    def for_stage(cls, work: Path, stage: str) -> StageCache:
        """The cache of ``stage`` in the work directory ``work`` (``work/cache/<stage>.jsonl``)."""
        return cls(Path(work) / "cache" / f"{stage}.jsonl")

    @staticmethod
    def key(model: str, messages: list[dict[str, str]], sampling: dict[str, Any], salt: str = "") -> str:
        """sha256 hex of the canonical JSON of ``[model, messages, sampling, salt]``.

        Args:
            model: the model name at the endpoint.
            messages: the chat messages sent.
            sampling: the sampling sent (temperature, max_tokens, ...).
            salt: anything else that must separate requests (a template version, an attempt index).

        Returns:
            64 hex characters.
        """
        return hashlib.sha256(_canonical([model, messages, sampling, salt]).encode("utf-8")).hexdigest()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached reply for ``key`` (a dict with ``text``, ``reasoning``, ``finish_reason``, ``usage``), or ``None``."""
        return self._entries.get(key)

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Append a reply for ``key`` (one complete line, written at once).

        Raises:
            OSError: the cache cannot be written (``filename`` names it).
        """
        row = {"key": key, **{k: v for k, v in entry.items() if k != "key"}}
        self._log.append(row)
        self._entries[key] = row

    def close(self) -> None:
        """fsync and close the file (idempotent)."""
        self._log.close()

    def spent(self) -> dict[str, TokenCounts]:
        """The tokens of every reply in the cache file, per model: what the stage paid for, in this
        invocation and earlier ones (each line is one request; a cache hit adds no line).

        Returns:
            ``{model: TokenCounts}``.
        """
        out: dict[str, TokenCounts] = {}
        for row in self._log.rows():
            if isinstance(row.get("key"), str) and isinstance(row.get("text"), str):
                model = row.get("model")
                out.setdefault(model if isinstance(model, str) else "", TokenCounts()).add(row.get("usage"))
        return out


@dataclass
class Asked:
    """The outcome of one :meth:`StageLLM.ask`.

    Attributes:
        text: the last reply's content (``""`` after a transport failure).
        parsed: what ``validate`` returned for it (``None`` without ``validate`` or when it was rejected).
        finish_reason: the last reply's ``finish_reason``.
        truncated: the last reply was cut by the token limit (``finish_reason == "length"``).
        usage: token counts of the last reply as the server reported them.
        from_cache: the last reply came from the cache.
        attempts: replies obtained (cached or asked), at most the ``attempts`` of the ask.
        error: why the ask failed (transport error, every reply malformed or truncated), or ``None``.
        validated: whether a ``validate`` callable was given (then :attr:`ok` needs ``parsed``).
    """

    text: str
    parsed: Any | None = None
    finish_reason: str | None = None
    truncated: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    from_cache: bool = False
    attempts: int = 0
    error: str | None = None
    validated: bool = False

    @property
    def ok(self) -> bool:
        """No error, not truncated, and parsed when a ``validate`` was given."""
        return self.error is None and not self.truncated and (self.parsed is not None or not self.validated)


class StageLLM:
    """Ask a teacher with a cache, bounded concurrency, re-asks and token accounting (see the module docstring).

    Args:
        backend: the chat backend (:func:`open_backend`); its ``model`` attribute (else ``name``) keys the cache.
        cache: the reply cache, or ``None`` for none.
        concurrency: most requests in flight at once (>= 1).
        budget: charged with every reply received (under :attr:`model`); once exceeded, an ask that
            needs a request raises :class:`StageBudgetExceeded` (also settable as :attr:`budget`).

    Raises:
        ValueError: ``concurrency`` below 1.
    """

    def __init__(self, backend: ChatBackend, cache: StageCache | None, *, concurrency: int = 16,
                 budget: BudgetTracker | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.backend = backend
        self.cache = cache
        self.concurrency = concurrency
        self.model = str(getattr(backend, "model", None) or getattr(backend, "name", "model"))
        self.usage: dict[str, int] = dict.fromkeys(USAGE_KEYS, 0)
        self.budget = budget
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _sem(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore, self._loop = asyncio.Semaphore(self.concurrency), loop
        return self._semaphore

    def _count(self, usage: dict[str, int] | None) -> None:
        for key, value in normalise_usage(usage).items():
            self.usage[key] += value

    async def _one(self, messages: list[dict[str, str]], sampling: dict[str, Any], salt: str) -> tuple[dict[str, Any], bool]:
        """One reply (cached or asked) as a cache entry dict, and whether it came from the cache."""
        key = StageCache.key(self.model, messages, sampling, salt)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.usage["cached"] += 1
                return hit, True
        request = ChatRequest(messages, None, None, 0, sampling=SamplingParams(**sampling))
        async with self._sem():
            why = self.budget.exceeded() if self.budget is not None else None
            if why:
                raise StageBudgetExceeded(why)
            result = await self.backend.complete(request)
        self.usage["requests"] += 1
        if result.error is not None:
            if result.usage and self.budget is not None:
                self.budget.charge(self.model, result.usage, answered=False)
            return {"error": result.error}, False
        entry = {
            "model": self.model,
            "text": result.completion,
            "reasoning": result.reasoning,
            "finish_reason": result.finish_reason,
            "usage": dict(result.usage or {}),
        }
        self._count(entry["usage"])
        if self.budget is not None:
            self.budget.charge(self.model, entry["usage"])
        if self.cache is not None:
            self.cache.put(key, entry)
        return entry, False

    async def ask(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float,
        max_tokens: int,
        validate: Callable[[str], Any] | None = None,
        attempts: int = 3,
        salt: str = "",
    ) -> Asked:
        """Ask until a usable reply or ``attempts`` replies.

        Args:
            messages: the chat messages (system first).
            temperature: sampling temperature sent.
            max_tokens: completion budget sent; a reply that reaches it (``finish_reason == "length"``)
                is a failed attempt.
            validate: parses the reply text; raises :class:`ValueError` for a malformed reply (re-asked);
                must return something other than ``None`` for a usable one.
            attempts: the most replies to obtain (>= 1).
            salt: separates cache keys of otherwise identical requests (e.g. a prompt version).

        Returns:
            An :class:`Asked`; never raises for a model or transport failure (``error`` is set).

        Raises:
            ValueError: ``attempts`` below 1 or a non-finite ``temperature``.
            StageBudgetExceeded: the budget is spent and a reply is needed that is not cached.
        """
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        if not math.isfinite(temperature):
            raise ValueError("temperature must be finite")
        sampling = {"temperature": float(temperature), "max_tokens": int(max_tokens)}
        convo = list(messages)
        last = Asked(text="", validated=validate is not None)
        for attempt in range(attempts):
            if attempt:
                self.usage["reasked"] += 1
            entry, cached = await self._one(convo, sampling, f"{salt}#{attempt}")
            if "error" in entry:
                self.usage["failures"] += 1
                return Asked(text="", attempts=attempt + 1, error=str(entry["error"]), validated=validate is not None)
            text = str(entry.get("text") or "")
            finish = entry.get("finish_reason")
            usage = {k: v for k, v in (entry.get("usage") or {}).items() if isinstance(v, int)}
            last = Asked(text=text, finish_reason=finish, truncated=finish == "length", usage=usage,
                         from_cache=cached, attempts=attempt + 1, validated=validate is not None)
            if last.truncated:
                problem = f"the reply was cut off by the token limit ({max_tokens} tokens)"
                correction = "Your reply was cut off by the token limit. Answer again, much more briefly, in the required format."
            else:
                if validate is None:
                    return last
                try:
                    parsed = validate(text)
                except ValueError as e:
                    parsed, problem = None, f"malformed reply: {' '.join(str(e).split())[:300]}"
                else:
                    if parsed is not None:
                        last.parsed = parsed
                        return last
                    problem = "malformed reply: nothing usable"
                correction = f"Your reply could not be used ({problem}). Answer again, following the required format exactly."
            last.error = f"{problem} (after {attempt + 1} attempt{'s' if attempt else ''})"
            convo = [*messages, {"role": "assistant", "content": text[:_ECHO_LIMIT]}, {"role": "user", "content": correction}]
        self.usage["failures"] += 1
        return last

    def describe(self) -> dict[str, Any]:
        """The backend's description (no secrets) and the concurrency."""
        describe = getattr(self.backend, "describe", None)
        return {"backend": describe() if callable(describe) else {"model": self.model}, "concurrency": self.concurrency}

    async def aclose(self) -> None:
        """Close the backend's connections and the cache file."""
        await self.backend.aclose()
        if self.cache is not None:
            self.cache.close()


async def run_items(
    items: Iterable[Any],
    key: Callable[[Any], str],
    work: Callable[[Any], Awaitable[dict[str, Any]]],
    out: Path,
    *,
    concurrency: int,
    progress: Callable[[int, int], None] | None = None,
    restart: bool = False,
) -> dict[str, Any]:
    """Run ``work`` on every item whose key is not yet in ``out``, appending one line per item.

    Items are processed by ``concurrency`` workers; each result is written (with its ``"key"``) as soon
    as it is ready, in completion order. A SIGKILL loses only the items in flight: the next run skips
    every key already in ``out`` (a torn last line is cut first). The first exception from ``work``
    stops the run (items in flight are cancelled; lines written stay) and propagates, except
    :class:`StageBudgetExceeded`: then no new item is started, items in flight finish (or stop at
    their next request), and the reason is returned as ``budget_stop``.

    Args:
        items: the items (keys must be unique; a repeated key is done once).
        key: the item's key (a string stored as ``"key"``).
        work: the coroutine function computing an item's output row (a JSON-serialisable dict).
        out: the JSONL output file.
        concurrency: items in progress at once (>= 1).
        progress: called with ``(advance, total)`` as items finish (``total`` = items to do this run).
        restart: delete ``out`` first and do every item.

    Returns:
        ``{"total": items, "skipped": already done, "done": written now, "left": not done (a re-run
        does them), "budget_stop": why the budget stopped the run, or None}``.

    Raises:
        ValueError: ``concurrency`` below 1.
        OSError: ``out`` cannot be written.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    out = Path(out)
    if restart and out.exists():
        out.unlink()
    log = JsonlLog(out)
    done = {str(r["key"]) for r in log.rows() if "key" in r}
    todo: list[tuple[str, Any]] = []
    seen: set[str] = set()
    total = 0
    for item in items:
        k = str(key(item))
        if k in seen:
            continue
        seen.add(k)
        total += 1
        if k not in done:
            todo.append((k, item))
    log.open()
    queue = iter(todo)
    written = 0
    stop: list[str] = []

    async def worker() -> None:
        nonlocal written
        while not stop:
            nxt = next(queue, None)
            if nxt is None:
                return
            k, item = nxt
            try:
                row = await work(item)
            except StageBudgetExceeded as e:
                stop.append(str(e))
                return
            log.append({**row, "key": k})
            written += 1
            if progress is not None:
                progress(1, len(todo))

    tasks = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(todo)))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        log.close()
    return {"total": total, "skipped": total - len(todo), "done": written, "left": len(todo) - written,
            "budget_stop": stop[0] if stop else None}


class StageMetaError(ValueError):
    """A stage's inputs or settings differ from those of the run that wrote its output (use ``--restart``)."""


def input_digest(path: Path) -> str:
    """sha256 hex of an input file (``"missing"`` when it does not exist).

    Raises:
        studybench.files.InputFileError: it exists and is not a regular file, or cannot be read.
    """
    path = Path(path)
    return file_sha256(path) if os.path.lexists(path) else "missing"


def check_stage_meta(work: Path, stage: str, settings: dict[str, Any], *, restart: bool = False) -> Path:
    """Record or check ``DIR/<stage>.meta.json``: the settings (and input digests) of a stage's output.

    The first run (or ``restart``) writes ``settings``; a later run with different ones is refused,
    so a resumed stage never mixes outputs of two configurations.

    Args:
        work: the work directory.
        stage: the stage name (``decompose``, ``verify``, ...).
        settings: JSON-serialisable settings, including input file digests (:func:`input_digest`).
        restart: overwrite the recorded settings (the caller also discards the stage's output).

    Returns:
        The meta file's path.

    Raises:
        StageMetaError: the recorded settings differ (names the keys that changed).
        OSError: the file cannot be written.
    """
    path = Path(work) / f"{stage}.meta.json"
    fresh = json.loads(_canonical(settings))
    if os.path.lexists(path) and not restart:
        try:
            old = read_json(path)
        except InputFileError as e:
            raise StageMetaError(f"{e}; re-run with --restart to start {stage} again") from None
        if isinstance(old, dict):
            if old == fresh:
                return path
            changed = sorted(k for k in set(old) | set(fresh) if old.get(k) != fresh.get(k))
            raise StageMetaError(f"{path}: the {stage} output was made with other inputs or settings "
                                 f"(changed: {', '.join(changed)}); re-run with --restart to start {stage} again")
    atomic_write_text(path, dumps_json(fresh) + "\n")
    return path


def open_backend(
    model: str,
    base_url: str | None,
    *,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int = 16,
    request_timeout: float = 600.0,
    max_retries: int = 6,
    thinking: bool | None = None,
) -> ChatBackend:
    """The chat backend of a teacher: ``model`` at the OpenAI-compatible endpoint ``base_url``.

    Resolved as ``studybench eval`` resolves ``--model``/``--base-url`` (``$OPENAI_BASE_URL`` when
    ``base_url`` is ``None``; the API key from the variable ``api_key_env``), always the openai
    backend (the offline ``reference`` replay cannot teach). Sampling is set per request by
    :meth:`StageLLM.ask`.

    Args:
        model: the model name at the endpoint.
        base_url: e.g. ``http://127.0.0.1:8000/v1``; ``None``: ``$OPENAI_BASE_URL``.
        api_key_env: environment variable holding the API key (never stored).
        concurrency: the backend's own bound on requests in flight.
        request_timeout: seconds per HTTP attempt.
        max_retries: retries on 429/5xx/timeouts/dropped connections.
        thinking: send ``chat_template_kwargs.enable_thinking`` when not ``None``.

    Returns:
        An :class:`~studybench.models.openai_backend.OpenAIBackend` (no request made).

    Raises:
        ValueError: no endpoint, or an invalid setting (the message names the option).
    """
    from studybench.evaluate import EvalError, EvalSpec

    try:
        spec = EvalSpec.create(model=model, backend="openai", base_url=base_url, api_key_env=api_key_env,
                               concurrency=concurrency, request_timeout=request_timeout, max_retries=max_retries,
                               thinking=thinking, min_completion_tokens=1)
        return spec.make_backend()
    except EvalError as e:
        raise ValueError(str(e).replace("base_url is required for the openai backend", "an endpoint is required for the teacher")) from None


def write_stage_usage(
    work: Path,
    stage: str,
    roles: dict[str, StageLLM],
    budget: BudgetTracker | None,
    budget_stop: str | None = None,
) -> dict[str, Any]:
    """Write ``DIR/<stage>.usage.json``: this invocation's tokens per role, the stage's totals, cost.

    Args:
        work: the work directory.
        stage: the stage name.
        roles: the stage's models by role (``{"teacher": llm}``, ``{"writer": w, "reviewer": r}``);
            the same :class:`StageLLM` under two roles is counted once.
        budget: the stage's tracker (its ``by_model`` holds the stage's totals over every invocation,
            its ``pricing`` the prices); ``None``: this invocation's counts only.
        budget_stop: why the budget stopped this invocation, or ``None``.

    Returns:
        What was written: ``stage``, ``now`` (``{role: {"model", usage counters, "cost"}}``), ``total``
        (``{"models": {model: TokenCounts dict + "cost"}, "total_tokens", "cost"}``), ``currency``,
        ``limits`` and ``budget_stop``. A cost is ``None`` without pricing or for a model the
        pricing has no price for.

    Raises:
        OSError: the file cannot be written.
    """
    pricing = budget.pricing if budget is not None else None
    now: dict[str, Any] = {}
    seen: set[int] = set()
    for role, llm in roles.items():
        if id(llm) in seen:
            continue
        seen.add(id(llm))
        now[role] = {"model": llm.model, **llm.usage,
                     "cost": pricing.cost(llm.model, llm.usage) if pricing is not None else None}
    models: dict[str, Any] = {}
    costs: list[float | None] = []
    for model, counts in sorted((budget.by_model if budget is not None else {}).items()):
        cost = pricing.cost(model or None, counts) if pricing is not None else None
        costs.append(cost)
        models[model] = {**counts.to_dict(), "cost": cost}
    out = {
        "stage": stage,
        "now": now,
        "total": {"models": models, "total_tokens": sum(m["total_tokens"] for m in models.values()),
                  "cost": None if pricing is None or None in costs else sum(c for c in costs if c is not None)},
        "currency": pricing.currency if pricing is not None else None,
        "limits": {"max_cost": budget.max_cost if budget is not None else None,
                   "max_total_tokens": budget.max_total_tokens if budget is not None else None},
        "budget_stop": budget_stop,
    }
    atomic_write_text(Path(work) / f"{stage}.usage.json", dumps_json(out) + "\n")
    return out
