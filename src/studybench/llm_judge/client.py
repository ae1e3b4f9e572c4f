"""The LLM judge client (paper 2.2, appendices F-G; docs/protocol.md section 6).

:class:`LLMJudge` sends one request per judgement to any OpenAI-compatible endpoint (``vllm serve``,
SGLang, the OpenAI API) through :class:`studybench.models.openai_backend.OpenAIBackend`, so it has
the same transport behaviour: temperature 0, bounded concurrency, retries with exponential backoff
and ``Retry-After`` on HTTP 408/409/429/5xx, timeouts and dropped connections, a per-request
timeout, and an API key read only from the environment and redacted from every message.

What is asked and how the reply is read is its task (:class:`studybench.llm_judge.task.LLMJudgeTask`):
answer equivalence by default, the contamination audit's duplicate question in stage 3. On top of
the transport, for every task:

- HTTP 401/403/404 (wrong key, URL or model) raise :class:`LLMJudgeConfigError`; HTTP 400/413/422
  (e.g. inputs longer than the judge's context) make the verdict ``"unjudgeable"``;
- the reply, reasoning removed (:func:`studybench.llm_judge.parse.strip_judge_reasoning`), is parsed
  strictly by the task; a malformed reply is answered with the task's format reminder in the same
  conversation, up to ``parse_retries`` times; still malformed, the verdict is ``"unjudgeable"``;
- identical inputs in flight at the same time share one request;
- TRUE / FALSE verdicts are cached on disk (:class:`studybench.llm_judge.cache.LLMVerdictCache`) by
  judge model, template digest and inputs digest (``unjudgeable`` is not a verdict and is never
  cached); the judge's reasoning (``<think>`` or ``reasoning_content``) is neither part of the key
  nor of the verdict; ``read_cache=False`` asks afresh and overwrites the cached verdicts;
- a transport failure after all retries gives the verdict ``"error"``, which is not cached;
- token usage: every reply's ``usage`` (:func:`studybench.costs.normalise_usage`) is summed into the
  verdict's :attr:`LLMVerdict.usage` and stored with a cached verdict, so a cache hit still says
  what the judgement took when it was asked (it costs nothing now: ``cached`` is set); replies paid
  for now are summed in :attr:`LLMJudgeStats.tokens`;
- an optional :class:`~studybench.costs.BudgetTracker` (:attr:`LLMJudge.budget`) is charged with
  every reply; once it is exceeded, a judgement that would need a request raises
  :class:`JudgeBudgetExceeded` instead (cache hits are still served; judgements in flight finish).

Prompts and replies pass through :func:`studybench.answers.clean_surrogates` (lone surrogates cannot
be sent as JSON).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from studybench.answers import clean_surrogates
from studybench.costs import BudgetTracker, TokenCounts, normalise_usage
from studybench.llm_judge.cache import CACHED_VERDICTS, LLMVerdictCache, cache_key
from studybench.llm_judge.parse import MalformedReply, strip_judge_reasoning
from studybench.llm_judge.prompt import PLACEHOLDERS, LLMJudgeTemplate, LLMJudgeTemplateError
from studybench.llm_judge.task import ANSWER_EQUIVALENCE_TASK, LLMJudgeTask
from studybench.models.slots import Slots
from studybench.store.rows import FINAL_LLM_VERDICTS

__all__ = ["FINAL_VERDICTS", "JudgeBudgetExceeded", "LLMJudgeConfigError", "LLMJudgeInputs", "LLMJudgeStats", "LLMJudge", "LLMVerdict", "judge_id"]

FINAL_VERDICTS = FINAL_LLM_VERDICTS
"""Verdicts that are final (never re-requested within a run; TRUE and FALSE are also cached); ``"error"``
is the only other value."""

_MAX_REPLY_STORED = 4000
_STATUS = re.compile(r"^HTTP (\d{3}) ")
_FATAL_STATUSES = frozenset({401, 403, 404})
"""The endpoint refuses the key or does not know the model: no judgement can succeed."""
_FINAL_STATUSES = frozenset({400, 413, 422})
"""The endpoint refuses these inputs (e.g. longer than the judge's context): unjudgeable."""


class LLMJudgeConfigError(RuntimeError):
    """The judge endpoint refuses every request (HTTP 401/403/404): wrong key, URL or model.

    The message names the endpoint (credentials removed) and the environment variable of the key,
    never the key.
    """


class JudgeBudgetExceeded(RuntimeError):
    """The judge's budget (:attr:`LLMJudge.budget`) is spent: no new request is sent.

    The message says which limit and what was spent. The judgement is not made (no verdict); a
    re-run with a higher limit makes it.
    """


def _visible(reply: str) -> str:
    """The reply without judge reasoning where that can be removed (kept whole otherwise)."""
    try:
        return strip_judge_reasoning(reply).strip()
    except MalformedReply:
        return reply


def judge_id(model: str, template_digest: str) -> str:
    """Short identifier of a judge configuration.

    Args:
        model: the judge model name.
        template_digest: :attr:`LLMJudgeTemplate.digest` of its template.

    Returns:
        16 hex digits of sha256(JSON [model, template digest]).
    """
    return hashlib.sha256(json.dumps([model, template_digest], allow_nan=False).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LLMJudgeInputs:
    """The five inputs of one answer judgement (the default task's placeholders), as plain text.

    Built by :func:`studybench.llm_judge.llm_judge_inputs`; other tasks take a mapping of their own
    placeholder names to texts instead.

    Attributes:
        problem: the shared stem and the sub-problem's text.
        reference_solution: the sub-problem's reference solution.
        reference_answers: the answer type and the gold answer(s).
        student_solution: the student's reply, reasoning removed (fenced by the template).
        student_answers: the answers extracted from the reply's ``Final Answer:`` line.
    """

    problem: str
    reference_solution: str
    reference_answers: str
    student_solution: str
    student_answers: str

    def as_dict(self) -> dict[str, str]:
        """The inputs by placeholder name.

        Returns:
            ``{"problem": ..., "reference_solution": ..., ...}`` in :data:`PLACEHOLDERS` order.
        """
        return {p: getattr(self, p) for p in PLACEHOLDERS}

    @functools.cached_property
    def digest(self) -> str:
        """sha256 hex of the five inputs (order-fixed JSON; see :meth:`LLMJudgeTask.inputs_digest`); computed once."""
        return ANSWER_EQUIVALENCE_TASK.inputs_digest(self.as_dict())


@dataclass
class LLMVerdict:
    """Outcome of one LLM judgement.

    Attributes:
        verdict: ``"TRUE"``, ``"FALSE"``, ``"unjudgeable"`` (malformed after the parse retries, or
            inputs refused by the endpoint) or ``"error"`` (transport failure; not cached). For a
            yes/no task such as the audit's duplicate question, TRUE means yes.
        justification: the judge's stated reason (empty unless TRUE/FALSE).
        reply: the last reply content, reasoning removed by the server or not, truncated to 4000
            characters (for audits).
        requests: HTTP requests made for it (0 on a cache hit).
        cached: served from the verdict cache.
        shared: answered by a concurrent request for identical inputs (no request of its own).
        error: why it is unjudgeable or an error.
        finish_reason: the last reply's ``finish_reason`` (``"length"``: cut at the token budget).
        usage: token counts summed over the replies that made the verdict (format re-asks included;
            :data:`studybench.costs.USAGE_FIELDS`). For a cached or shared verdict, the counts of the
            replies that made it originally (nothing was spent now); empty when unknown.
    """

    verdict: str
    justification: str = ""
    reply: str = ""
    requests: int = 0
    cached: bool = False
    error: str | None = None
    shared: bool = False
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        """Whether the verdict is TRUE (unjudgeable and error count as not correct)."""
        return self.verdict == "TRUE"


@dataclass
class LLMJudgeStats:
    """Counters of one :class:`LLMJudge`.

    Attributes:
        judgements: verdicts returned (cached and shared ones included).
        cache_hits: verdicts served from the verdict cache.
        shared: verdicts answered by a concurrent request for identical inputs.
        requests: HTTP requests sent, transport retries and format re-asks included.
        malformed_replies: replies the task's parser refused.
        unjudgeable: verdicts ``"unjudgeable"``.
        errors: verdicts ``"error"`` (transport failures).
        verdicts: count per verdict value.
        tokens: token counts of the replies received now (cache hits and shared verdicts cost nothing).
    """

    judgements: int = 0
    cache_hits: int = 0
    shared: int = 0
    requests: int = 0
    malformed_replies: int = 0
    unjudgeable: int = 0
    errors: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    tokens: TokenCounts = field(default_factory=TokenCounts)

    def to_dict(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict.

        Returns:
            ``judgements``, ``cache_hits``, ``shared``, ``requests``, ``malformed_replies``,
            ``unjudgeable``, ``errors``, ``verdicts`` (count per verdict) and ``tokens``
            (:meth:`TokenCounts.to_dict` of the replies received now).
        """
        return {
            "judgements": self.judgements,
            "cache_hits": self.cache_hits,
            "shared": self.shared,
            "requests": self.requests,
            "malformed_replies": self.malformed_replies,
            "unjudgeable": self.unjudgeable,
            "errors": self.errors,
            "verdicts": dict(self.verdicts),
            "tokens": self.tokens.to_dict(),
        }


class LLMJudge:
    """Ask an LLM a task's yes/no question, by default final-answer equivalence (see the module docstring).

    Args:
        model: judge model name at the endpoint.
        base_url: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8001/v1``.
        template: the prompt template (default: the task's builtin template); it must have been
            validated for the task's placeholders.
        cache: verdict cache; ``None`` disables caching.
        parse_retries: extra requests after a malformed reply (default 2, so at most 3 replies).
        concurrency: most requests in flight.
        request_timeout: seconds per HTTP attempt.
        max_retries: transport retries per request (HTTP 429/5xx, timeouts ...).
        max_tokens: completion budget per reply (``None``: the server's default).
        api_key_env: environment variable holding the API key (never stored).
        backoff_initial, backoff_max: backoff seconds (see :class:`OpenAIBackend`).
        read_cache: use cached verdicts (``False`` re-asks and overwrites them: the cache is
            written through).
        task: what is asked and how replies are parsed (default :data:`ANSWER_EQUIVALENCE_TASK`).
        budget: charged with every reply (under the judge model's name); once exceeded, judgements
            that need a request raise :class:`JudgeBudgetExceeded` (also settable as :attr:`budget`).

    Raises:
        ValueError: negative ``parse_retries`` or invalid transport settings.
        LLMJudgeTemplateError: ``template`` has other placeholders than ``task``.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None,
        *,
        template: LLMJudgeTemplate | None = None,
        cache: LLMVerdictCache | None = None,
        parse_retries: int = 2,
        concurrency: int = 16,
        request_timeout: float = 300.0,
        max_retries: int = 6,
        max_tokens: int | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        read_cache: bool = True,
        task: LLMJudgeTask | None = None,
        budget: BudgetTracker | None = None,
    ) -> None:
        from studybench.models.base import SamplingParams
        from studybench.models.openai_backend import OpenAIBackend

        if parse_retries < 0:
            raise ValueError("parse_retries must be >= 0")
        self.task = task or ANSWER_EQUIVALENCE_TASK
        if template is not None and template.placeholders != self.task.placeholders:
            raise LLMJudgeTemplateError(
                f"{template.source}: a template with placeholders {list(template.placeholders)} cannot serve the "
                f"judge task {self.task.name} (placeholders {list(self.task.placeholders)})"
            )
        self.model = model
        self.template = template or self.task.builtin_template()
        self.cache = cache
        self.parse_retries = parse_retries
        self.read_cache = read_cache
        self.backend = OpenAIBackend(
            model,
            base_url,
            SamplingParams(temperature=0.0, max_tokens=max_tokens),
            concurrency=concurrency,
            request_timeout=request_timeout,
            max_retries=max_retries,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            api_key_env=api_key_env,
        )
        self.stats = LLMJudgeStats()
        self.budget = budget
        self._inflight: dict[str, asyncio.Future[LLMVerdict]] = {}
        self._gate: Slots | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None

    def _budget_gate(self) -> Slots:
        """Bounds judgements being asked under a budget, so the budget is checked when one can start."""
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate_loop is not loop:
            self._gate, self._gate_loop = Slots(self.backend.concurrency), loop
        return self._gate

    @property
    def judge_id(self) -> str:
        """:func:`judge_id` of this model and template."""
        return judge_id(self.model, self.template.digest)

    def describe(self) -> dict[str, Any]:
        """JSON description for manifests and reports.

        Returns:
            ``judge_id``, ``model``, ``base_url`` (without credentials or anything shaped like a key),
            ``template`` (source), ``template_digest``, ``parse_retries``, ``temperature``,
            ``max_tokens``, ``concurrency``, ``request_timeout``, ``max_retries`` and ``api_key_env``
            (the variable's name, never its value).
        """
        be = self.backend.describe()
        return {
            "judge_id": self.judge_id,
            "model": self.model,
            "base_url": be["base_url"],
            "template": self.template.source,
            "template_digest": self.template.digest,
            "parse_retries": self.parse_retries,
            "temperature": 0.0,
            "max_tokens": be["sampling"].get("max_tokens"),
            "concurrency": be["concurrency"],
            "request_timeout": be["request_timeout"],
            "max_retries": be["max_retries"],
            "api_key_env": be["api_key_env"],
        }

    def _count(self, v: LLMVerdict) -> LLMVerdict:
        self.stats.judgements += 1
        self.stats.verdicts[v.verdict] = self.stats.verdicts.get(v.verdict, 0) + 1
        if v.cached:
            self.stats.cache_hits += 1
        if v.shared:
            self.stats.shared += 1
        if v.verdict == "unjudgeable":
            self.stats.unjudgeable += 1
        if v.verdict == "error":
            self.stats.errors += 1
        return v

    async def judge(self, inputs: LLMJudgeInputs | Mapping[str, str]) -> LLMVerdict:
        """Judge one set of inputs: the cache first, else the endpoint.

        Identical inputs requested concurrently share one request.

        Args:
            inputs: :class:`LLMJudgeInputs` for the answer task, or a mapping of the task's
                placeholder names to texts.

        Returns:
            :class:`LLMVerdict`; endpoint and reply failures become ``"error"`` or
            ``"unjudgeable"`` verdicts rather than exceptions.

        Raises:
            LLMJudgeConfigError: the endpoint answered HTTP 401, 403 or 404 (bad key, URL or model).
            JudgeBudgetExceeded: :attr:`budget` is spent and the verdict is not cached.
            ValueError: ``inputs`` do not match the task's placeholders.
        """
        values = self.task.values(inputs.as_dict() if isinstance(inputs, LLMJudgeInputs) else inputs)
        if isinstance(inputs, LLMJudgeInputs) and self.task.placeholders == ANSWER_EQUIVALENCE_TASK.placeholders:
            inputs_digest = inputs.digest  # the same digest, already computed by the pass
        else:
            inputs_digest = self.task.inputs_digest(values)
        key = cache_key(self.model, self.template.digest, inputs_digest)
        if self.cache is not None and self.read_cache:
            row = self.cache.get(key)
            if row is not None:
                return self._count(
                    LLMVerdict(
                        verdict=row["verdict"],
                        justification=str(row.get("justification") or ""),
                        reply=str(row.get("reply") or ""),
                        requests=0,
                        cached=True,
                        error=row.get("error"),
                        usage=normalise_usage(row.get("usage")),
                    )
                )
        pending = self._inflight.get(key)
        if pending is not None:
            shared = await asyncio.shield(pending)
            return self._count(
                LLMVerdict(shared.verdict, shared.justification, shared.reply, 0, False, shared.error, shared=True,
                           finish_reason=shared.finish_reason, usage=dict(shared.usage))
            )
        fut: asyncio.Future[LLMVerdict] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            if self.budget is None:
                verdict = await self._ask(values)
            else:
                async with self._budget_gate():
                    why = self.budget.exceeded()
                    if why:
                        raise JudgeBudgetExceeded(why)
                    verdict = await self._ask(values)
            if self.cache is not None and verdict.verdict in CACHED_VERDICTS:  # never unjudgeable
                self.cache.put(
                    key,
                    {
                        "judge_model": self.model,
                        "task": self.task.name,
                        "template_digest": self.template.digest,
                        "inputs_digest": inputs_digest,
                        "verdict": verdict.verdict,
                        "justification": verdict.justification,
                        "reply": verdict.reply,
                        "error": verdict.error,
                        "requests": verdict.requests,
                        "usage": verdict.usage,
                    },
                )
            fut.set_result(verdict)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._inflight.pop(key, None)
        return self._count(verdict)

    async def _ask(self, values: dict[str, str]) -> LLMVerdict:
        from studybench.models.base import ChatRequest

        messages: list[dict[str, str]] = [{"role": "user", "content": clean_surrogates(self.template.render(values))}]
        requests = 0
        last_reply = ""
        last_finish: str | None = None
        problem = ""
        usage: dict[str, int] = {}
        for _ in range(self.parse_retries + 1):
            res = await self.backend.complete(ChatRequest(messages, None, None, 0))  # type: ignore[arg-type]
            requests += res.attempts
            self.stats.requests += res.attempts
            if not res.error or res.usage:
                counts = normalise_usage(res.usage)
                for name, n in counts.items():
                    usage[name] = usage.get(name, 0) + n
                self.stats.tokens.add_counts(counts)
                if self.budget is not None:
                    self.budget.charge(self.model, res.usage, answered=not res.error)
            if res.error:
                m = _STATUS.match(res.error)
                status = int(m.group(1)) if m else None
                if status in _FATAL_STATUSES:
                    raise LLMJudgeConfigError(
                        f"the judge endpoint {self.backend.describe()['base_url']} answered {res.error}; check "
                        f"--judge-model, --judge-base-url and ${self.backend.api_key_env}"
                    )
                if status in _FINAL_STATUSES:
                    return LLMVerdict("unjudgeable", requests=requests, error=f"the endpoint refused the request: {res.error}",
                                      usage=usage)
                return LLMVerdict("error", requests=requests, error=res.error, usage=usage)
            last_reply = clean_surrogates(_visible(res.completion or ""))
            last_finish = res.finish_reason
            try:
                parsed = self.task.parse(last_reply)
            except MalformedReply as e:
                self.stats.malformed_replies += 1
                problem = str(e)
                messages = [
                    *messages[:1],
                    {"role": "assistant", "content": last_reply[:_MAX_REPLY_STORED]},
                    {"role": "user", "content": self.template.format_reminder or self.task.format_reminder},
                ]
                continue
            return LLMVerdict(
                "TRUE" if parsed.correct else "FALSE",
                justification=parsed.justification,
                reply=last_reply[:_MAX_REPLY_STORED],
                requests=requests,
                usage=usage,
            )
        return LLMVerdict(
            "unjudgeable",
            reply=last_reply[:_MAX_REPLY_STORED],
            requests=requests,
            error=f"malformed reply after {self.parse_retries + 1} tries: {problem}",
            finish_reason=last_finish,
            usage=usage,
        )

    async def aclose(self) -> None:
        """Close HTTP connections and the cache file (the judge can be used again afterwards)."""
        await self.backend.aclose()
        if self.cache is not None:
            self.cache.close()
