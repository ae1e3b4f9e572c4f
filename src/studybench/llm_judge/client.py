"""The LLM judge client (paper 2.2, appendices F-G; PROTOCOL.md section 6).

:class:`LLMJudge` sends one request per judgement to any OpenAI-compatible endpoint (``vllm serve``,
SGLang, the OpenAI API) through :class:`studybench.models.openai_backend.OpenAIBackend`, so it has
the same transport behaviour: temperature 0, bounded concurrency, retries with exponential backoff
and ``Retry-After`` on HTTP 408/409/429/5xx, timeouts and dropped connections, a per-request
timeout, and an API key read only from the environment and redacted from every message.

On top of the transport:

- the reply is parsed strictly (:func:`studybench.llm_judge.parse.parse_verdict`); a malformed reply is
  answered with a format reminder in the same conversation, up to ``parse_retries`` times; still
  malformed, the verdict is ``"unjudgeable"``;
- verdicts are cached on disk (:class:`studybench.llm_judge.cache.LLMVerdictCache`) by judge model,
  template digest and inputs digest; the judge's reasoning (``<think>`` or ``reasoning_content``)
  is neither part of the key nor of the verdict;
- a transport failure after all retries gives the verdict ``"error"``, which is not cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from studybench.llm_judge.cache import LLMVerdictCache, cache_key
from studybench.llm_judge.parse import MalformedReply, parse_verdict, strip_judge_reasoning
from studybench.llm_judge.prompt import FORMAT_REMINDER, PLACEHOLDERS, LLMJudgeTemplate

__all__ = ["FINAL_VERDICTS", "LLMJudgeConfigError", "LLMJudgeInputs", "LLMJudgeStats", "LLMJudge", "LLMVerdict", "judge_id"]

FINAL_VERDICTS = ("TRUE", "FALSE", "unjudgeable")
"""Verdicts that are final (cached, never re-requested); ``"error"`` is the only other value."""

_MAX_REPLY_STORED = 4000
_SURROGATE = re.compile("[\ud800-\udfff]")
_STATUS = re.compile(r"^HTTP (\d{3}) ")
_FATAL_STATUSES = frozenset({401, 403, 404})
"""The endpoint refuses the key or does not know the model: no judgement can succeed."""
_FINAL_STATUSES = frozenset({400, 413, 422})
"""The endpoint refuses these inputs (e.g. longer than the judge's context): unjudgeable."""


class LLMJudgeConfigError(RuntimeError):
    """The judge endpoint refuses every request (HTTP 401/403/404): wrong key, URL or model."""


def _clean(text: str) -> str:
    """Text that can be sent as JSON: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _visible(reply: str) -> str:
    """The reply without judge reasoning where that can be removed (kept whole otherwise)."""
    try:
        return strip_judge_reasoning(reply).strip()
    except MalformedReply:
        return reply


def judge_id(model: str, template_digest: str) -> str:
    """Short identifier of a judge configuration: 16 hex of sha256(model, template digest)."""
    return hashlib.sha256(json.dumps([model, template_digest]).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LLMJudgeInputs:
    """The five inputs of one judgement (the template's placeholders), as plain text."""

    problem: str
    reference_solution: str
    reference_answers: str
    student_solution: str
    student_answers: str

    def as_dict(self) -> dict[str, str]:
        return {p: getattr(self, p) for p in PLACEHOLDERS}

    @property
    def digest(self) -> str:
        """sha256 hex of the five inputs (order-fixed JSON)."""
        blob = json.dumps([getattr(self, p) for p in PLACEHOLDERS], ensure_ascii=True)
        return hashlib.sha256(blob.encode("ascii")).hexdigest()


@dataclass
class LLMVerdict:
    """Outcome of one LLM judgement.

    Attributes:
        verdict: ``"TRUE"``, ``"FALSE"``, ``"unjudgeable"`` (malformed after the parse retries) or
            ``"error"`` (transport failure; not cached).
        justification: the judge's sentence (empty unless TRUE/FALSE).
        reply: the last reply content, reasoning removed by the server or not, truncated to 4000
            characters (for audits).
        requests: HTTP requests made for it (0 on a cache hit).
        cached: served from the verdict cache.
        shared: answered by a concurrent request for identical inputs (no request of its own).
        error: why it is unjudgeable or an error.

    Raises (from :meth:`LLMJudge.judge`):
        LLMJudgeConfigError: the endpoint answered HTTP 401, 403 or 404 (bad key, URL or model).
    """

    verdict: str
    justification: str = ""
    reply: str = ""
    requests: int = 0
    cached: bool = False
    error: str | None = None
    shared: bool = False

    @property
    def correct(self) -> bool:
        return self.verdict == "TRUE"


@dataclass
class LLMJudgeStats:
    """Counters of one :class:`LLMJudge` (requests are chat requests, retries included)."""

    judgements: int = 0
    cache_hits: int = 0
    shared: int = 0
    requests: int = 0
    malformed_replies: int = 0
    unjudgeable: int = 0
    errors: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judgements": self.judgements,
            "cache_hits": self.cache_hits,
            "shared": self.shared,
            "requests": self.requests,
            "malformed_replies": self.malformed_replies,
            "unjudgeable": self.unjudgeable,
            "errors": self.errors,
            "verdicts": dict(self.verdicts),
        }


class LLMJudge:
    """Judge final-answer equivalence with an LLM (see the module docstring).

    Args:
        model: judge model name at the endpoint.
        base_url: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8001/v1``.
        template: the prompt template (default: :meth:`LLMJudgeTemplate.builtin`).
        cache: verdict cache; ``None`` disables caching.
        parse_retries: extra requests after a malformed reply (default 2, so at most 3 replies).
        concurrency: most requests in flight.
        request_timeout: seconds per HTTP attempt.
        max_retries: transport retries per request (HTTP 429/5xx, timeouts ...).
        max_tokens: completion budget per reply (``None``: the server's default).
        api_key_env: environment variable holding the API key (never stored).
        backoff_initial, backoff_max: backoff seconds (see :class:`OpenAIBackend`).
        read_cache: use cached verdicts (``False`` re-asks and overwrites them).

    Raises:
        ValueError: negative ``parse_retries`` or invalid transport settings.
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
    ) -> None:
        from studybench.models.base import SamplingParams
        from studybench.models.openai_backend import OpenAIBackend

        if parse_retries < 0:
            raise ValueError("parse_retries must be >= 0")
        self.model = model
        self.template = template or LLMJudgeTemplate.builtin()
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
        self._inflight: dict[str, asyncio.Future[LLMVerdict]] = {}

    @property
    def judge_id(self) -> str:
        return judge_id(self.model, self.template.digest)

    def describe(self) -> dict[str, Any]:
        """JSON description for manifests and reports (no secrets)."""
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

    async def judge(self, inputs: LLMJudgeInputs) -> LLMVerdict:
        """Judge one answer; never raises for endpoint or reply failures.

        Identical inputs requested concurrently share one request.
        """
        key = cache_key(self.model, self.template.digest, inputs.digest)
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
                    )
                )
        pending = self._inflight.get(key)
        if pending is not None:
            shared = await asyncio.shield(pending)
            return self._count(
                LLMVerdict(shared.verdict, shared.justification, shared.reply, 0, False, shared.error, shared=True)
            )
        fut: asyncio.Future[LLMVerdict] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            verdict = await self._ask(inputs)
            if self.cache is not None and verdict.verdict in FINAL_VERDICTS:
                self.cache.put(
                    key,
                    {
                        "judge_model": self.model,
                        "template_digest": self.template.digest,
                        "inputs_digest": inputs.digest,
                        "verdict": verdict.verdict,
                        "justification": verdict.justification,
                        "reply": verdict.reply,
                        "error": verdict.error,
                        "requests": verdict.requests,
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

    async def _ask(self, inputs: LLMJudgeInputs) -> LLMVerdict:
        from studybench.models.base import ChatRequest

        messages: list[dict[str, str]] = [{"role": "user", "content": _clean(self.template.render(inputs.as_dict()))}]
        requests = 0
        last_reply = ""
        problem = ""
        for _ in range(self.parse_retries + 1):
            res = await self.backend.complete(ChatRequest(messages, None, None, 0))  # type: ignore[arg-type]
            requests += res.attempts
            self.stats.requests += res.attempts
            if res.error:
                m = _STATUS.match(res.error)
                status = int(m.group(1)) if m else None
                if status in _FATAL_STATUSES:
                    raise LLMJudgeConfigError(
                        f"the judge endpoint {self.backend.describe()['base_url']} answered {res.error}; check "
                        f"--judge-model, --judge-base-url and ${self.backend.api_key_env}"
                    )
                if status in _FINAL_STATUSES:
                    return LLMVerdict("unjudgeable", requests=requests, error=f"the endpoint refused the request: {res.error}")
                return LLMVerdict("error", requests=requests, error=res.error)
            last_reply = _clean(_visible(res.completion or ""))
            try:
                parsed = parse_verdict(last_reply)
            except MalformedReply as e:
                self.stats.malformed_replies += 1
                problem = str(e)
                messages = [
                    *messages[:1],
                    {"role": "assistant", "content": last_reply[:_MAX_REPLY_STORED]},
                    {"role": "user", "content": FORMAT_REMINDER},
                ]
                continue
            return LLMVerdict(
                "TRUE" if parsed.correct else "FALSE",
                justification=parsed.justification,
                reply=last_reply[:_MAX_REPLY_STORED],
                requests=requests,
            )
        return LLMVerdict(
            "unjudgeable",
            reply=last_reply[:_MAX_REPLY_STORED],
            requests=requests,
            error=f"malformed reply after {self.parse_retries + 1} tries: {problem}",
        )

    async def aclose(self) -> None:
        """Close HTTP connections and the cache file."""
        await self.backend.aclose()
        if self.cache is not None:
            self.cache.close()
