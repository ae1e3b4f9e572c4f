"""OpenAI-compatible chat backend (vLLM, SGLang, OpenAI, any ``/v1/chat/completions`` server).

Implements :class:`studybench.models.base.ChatBackend` for docs/protocol.md section 2:

- **Sampling** is sent the way vLLM accepts it: ``temperature``, ``top_p``, ``max_tokens``, ``seed``
  and ``presence_penalty`` are standard fields; ``top_k``, ``min_p`` and ``repetition_penalty`` are
  vLLM extensions (what the OpenAI SDK calls ``extra_body``); the thinking toggle is the chat-template
  argument ``chat_template_kwargs: {"enable_thinking": bool}``. Only non-``None`` values are sent.
- **Budget**: ``SamplingParams.max_tokens`` is the completion budget; ``SamplingParams.context_budget``
  caps prompt + completion, as in the reference scripts, so the completion limit sent is
  ``min(max_tokens, context_budget - estimate)`` with an *estimate* of the prompt's tokens
  (:func:`estimate_prompt_tokens`: ``ceil(chars / 3) + 4`` per message, an over-estimate for English
  and LaTeX with common tokenizers, so the request stays inside the model's context). A turn whose
  completion limit would fall below ``min_completion_tokens`` is not sent: it fails with an error
  naming the numbers (:meth:`OpenAIBackend.budget_problem`).
- **Errors**: transient failures (HTTP 408/409/429/5xx, timeouts, dropped connections, truncated or
  malformed response bodies) are retried with exponential backoff and jitter, honouring
  ``Retry-After`` (capped by ``backoff_max``); other 4xx are not retried. :meth:`OpenAIBackend.complete`
  never raises for such failures: it returns a :class:`ChatResult` with ``error`` set.
- **A hung server** (it accepts connections and never answers): while requests are in flight and
  none was answered for a while, the server's model list is probed
  (:class:`~studybench.models.health.LivenessCheck`); when the probes too get no answer for
  ``liveness_timeout`` seconds, every request in flight ends at once with a ``timeout`` error (not
  retried), and so does every request sent while the server stays silent; ``health.hung`` says why.
  A slow server that answers its model list is never cut (a long reasoning completion may take as
  long as ``request_timeout``).
- **Context length**: :attr:`OpenAIBackend.server_context`, when set (from the server's model list or
  ``/props``: :func:`studybench.models.preflight.server_context_length`), caps prompt + completion
  too: the cap used is ``min(context_budget, server_context)`` whenever a budget is sent.
- **Secrets**: the API key is read from the environment variable named by ``api_key_env`` only (the
  placeholder ``"EMPTY"``, which vLLM accepts, when unset). The key, and a password or ``?api_key=``
  value given inside ``base_url``, are this backend's configured secrets (:attr:`OpenAIBackend.secrets`):
  every field a server sends back is redacted of them before it is returned (completion, reasoning,
  finish reason, usage keys, response id, error messages; see :mod:`studybench.secrets`). Model text
  (completion, reasoning) loses only those exact values, and only those of 8 characters or more
  (:func:`~studybench.secrets.redact_model_text`), so text holding no such secret is returned
  byte for byte; the other fields, descriptions and logs also lose well-delimited key shapes.

Implementation notes: by default (``http_client="lean"``) requests go through
:mod:`studybench.models.http11`, a keep-alive HTTP/1.1 client on asyncio's transports, with the body
encoded by ``orjson`` and the reply read by :func:`~studybench.models.http11.loads_body` (the values
:func:`json.loads` gives); a request in flight is ended by the hung-server rule through the pool, with
no task of its own. ``http_client="sdk"`` (or ``$STUDYBENCH_HTTP_CLIENT=sdk``, or a proxy in the
environment) sends through the official :class:`openai.AsyncOpenAI` client instead (its own retries
off) with the raw-body ``client.post("/chat/completions", body=..., cast_to=object)`` call. Either way
the body is exactly the JSON :meth:`OpenAIBackend.build_payload` builds, errors read the same, and
connections are spread over several pools, each holding (and keeping alive) its share of
``concurrency``, so the pools never cap the requests in flight below it.

What is sent (sampling, budgets, the body) is :class:`~studybench.models.payload.RequestBuilder`,
which this backend extends; how replies and failures are read (retries, ``Retry-After``, the chat
completion) is :mod:`studybench.models.replies`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from studybench import __version__
from studybench.models.base import (
    PROMPT_ESTIMATE,
    ChatRequest,
    ChatResult,
    SamplingParams,
    estimate_prompt_tokens,
)
from studybench.models.health import (
    DEFAULT_LIVENESS_TIMEOUT,
    UNREACHABLE_STATUSES,
    EndpointHealth,
    LivenessCheck,
)
from studybench.models.http11 import (
    Http11Pool,
    HttpError,
    HttpStatusError,
    HttpTimeout,
    dumps_body,
    loads_body,
    proxy_for,
    sendable,
    split_query,
)
from studybench.models.payload import RequestBuilder
from studybench.models.replies import (
    BadResponse,
    is_retryable,
    parse_reply,
    retry_after,
    short_text,
    status_message,
)
from studybench.models.slots import Slots
from studybench.secrets import (
    Redactor,
    known_secrets,
    redact_text,
    redact_url,
    url_secrets,
)

__all__ = [
    "HTTP_CLIENTS",
    "HTTP_CLIENT_ENV",
    "OpenAIBackend",
    "PROMPT_ESTIMATE",
    "estimate_prompt_tokens",
    "is_retryable",
    "redact_url",
    "split_query",
]

log = logging.getLogger(__name__)

_PLACEHOLDER_KEY = "EMPTY"
_PER_SHARD = 8  # concurrent requests per SDK client instance
_PER_LEAN_SHARD = 64  # concurrent requests per lean connection pool
_MAX_SHARDS = 16

HTTP_CLIENTS = ("lean", "sdk")
"""The HTTP clients :class:`OpenAIBackend` can send through (its ``http_client``)."""

HTTP_CLIENT_ENV = "STUDYBENCH_HTTP_CLIENT"
"""The environment variable that picks the HTTP client when ``http_client`` is not given (``lean`` or ``sdk``)."""


class _NoAnswer(Exception):
    """The server is hung: neither this request nor the liveness probe got an answer (not retried)."""


@dataclass
class _LoopState:
    """Clients and semaphore bound to one event loop."""

    loop: asyncio.AbstractEventLoop
    clients: list[Any]  # openai.AsyncOpenAI (http_client "sdk") or Http11Pool ("lean")
    load: list[int]
    semaphore: Slots
    tls: Any = None
    hung: asyncio.Future[None] | None = None  # done once the server counts as hung
    watcher: asyncio.Task[None] | None = None  # the liveness probe loop, while requests are in flight
    refusal: str | None = None  # why the lean client cannot send at all (a header it cannot carry)


class OpenAIBackend(RequestBuilder):
    """Chat backend for an OpenAI-compatible endpoint (see the module docstring).

    Args:
        model: model name sent as ``model``.
        base_url: endpoint such as ``http://127.0.0.1:8000/v1``; ``None`` lets the SDK decide
            (``OPENAI_BASE_URL``, else the OpenAI API).
        sampling: sampling parameters (docs/protocol.md section 2; e.g. ``PRESETS["paper"]``); ``None``
            sends none.
        concurrency: most requests in flight at once (:class:`~studybench.models.slots.Slots`, held per
            attempt, not during backoff).
        request_timeout: seconds allowed per HTTP attempt.
        max_retries: retries after the first attempt (so at most ``max_retries + 1`` attempts).
        backoff_initial: seconds of the first backoff; attempt n waits between ``b/2`` and ``b``
            with ``b = min(backoff_max, backoff_initial * 2**(n-1))``, or ``Retry-After`` when the
            server sends one (capped by ``backoff_max``).
        backoff_max: cap on any single wait, seconds.
        api_key_env: name of the environment variable holding the API key (read at construction).
        min_completion_tokens: the floor on a turn's completion limit; a turn below it is not sent
            (default 1: never a non-positive limit; evaluations use :data:`~studybench.models.base.MIN_COMPLETION_TOKENS`).
        liveness_timeout: seconds the liveness probe may go unanswered, while requests are in flight,
            before the server counts as hung (module docstring); 0: never probe.
        http_client: ``"lean"`` (:mod:`studybench.models.http11`, the default) or ``"sdk"`` (the
            ``openai`` SDK over ``httpx``); ``None``: ``$STUDYBENCH_HTTP_CLIENT``, else ``"lean"``.
            Where a proxy from the environment applies to the endpoint the SDK is used (it honours
            ``HTTP(S)_PROXY``). Both send the same body and read replies the same way.

    Raises:
        ValueError: a non-positive ``concurrency``, ``request_timeout`` or ``min_completion_tokens``,
            a negative ``max_retries``, backoff or ``liveness_timeout``, an unknown ``http_client``.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        sampling: SamplingParams | None = None,
        *,
        concurrency: int = 64,
        request_timeout: float = 600.0,
        max_retries: int = 6,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        api_key_env: str = "OPENAI_API_KEY",
        min_completion_tokens: int = 1,
        liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
        http_client: str | None = None,
    ) -> None:
        client = http_client if http_client is not None else (os.environ.get(HTTP_CLIENT_ENV) or "lean").strip().lower()
        if client not in HTTP_CLIENTS:
            raise ValueError(f"http_client must be one of {', '.join(HTTP_CLIENTS)} (${HTTP_CLIENT_ENV}), got {client!r}")
        if not liveness_timeout >= 0:
            raise ValueError("liveness_timeout must be >= 0 seconds")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if request_timeout <= 0:
            raise ValueError("request_timeout must be > 0 seconds")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if backoff_initial < 0 or backoff_max < 0:
            raise ValueError("backoff times must be >= 0 seconds")
        if min_completion_tokens < 1:
            raise ValueError("min_completion_tokens must be >= 1")
        self.min_completion_tokens = min_completion_tokens
        self.model = model
        self.base_url = base_url
        self.url_without_query, self.query = split_query(base_url)
        """The base URL without its query string, and that query (``?api_key=...``), sent with every request."""
        self.sampling = sampling if sampling is not None else SamplingParams()
        self.concurrency = concurrency
        self.request_timeout = float(request_timeout)
        self.max_retries = max_retries
        self.health = EndpointHealth()
        """Unreachable attempts in a row across all requests (a generation pass stops on a dead endpoint)."""
        self.liveness_timeout = float(liveness_timeout)
        self.server_context: int | None = None
        """The server's context length (prompt + completion), when known: caps every budget sent."""
        self.backoff_initial = float(backoff_initial)
        self.backoff_max = float(backoff_max)
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or _PLACEHOLDER_KEY
        self._secrets = known_secrets(
            [self._api_key, *url_secrets(base_url), *url_secrets(os.environ.get("OPENAI_BASE_URL"))]
        )
        self._redactor = Redactor(self._secrets)
        self._endpoint = self.url_without_query or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        if client == "lean" and (not sendable(self._endpoint) or proxy_for(self._endpoint) is not None):
            client = "sdk"  # the SDK honours the environment's proxy (and reports an unusable URL its way)
        self.http_client = client
        """The HTTP client in use: ``"lean"`` or ``"sdk"`` (see the class's arguments)."""
        self._shards = min(_MAX_SHARDS, max(1, math.ceil(concurrency / (_PER_LEAN_SHARD if client == "lean" else _PER_SHARD))))
        self._state: _LoopState | None = None
        self._random = random.Random()

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={self._display_url()!r})"

    # -- description -----------------------------------------------------------------------------------

    def _display_url(self) -> str:
        url = self.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return redact_text(redact_url(url), self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values redacted from everything this backend returns or describes: the API key
        (unless the placeholder) and credentials inside the base URL (see :mod:`studybench.secrets`)."""
        return self._secrets

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description for the run manifest; never contains the API key."""
        return {
            "backend": self.name,
            "model": self.model,
            "base_url": self._display_url(),
            "sampling": self.sampling.to_dict(),
            "prompt_token_estimate": PROMPT_ESTIMATE if self.sampling.context_budget is not None else None,
            "min_completion_tokens": self.min_completion_tokens,
            "concurrency": self.concurrency,
            "request_timeout": self.request_timeout,
            "max_retries": self.max_retries,
            "backoff_initial": self.backoff_initial,
            "backoff_max": self.backoff_max,
            "api_key_env": self.api_key_env,
            "liveness_timeout": self.liveness_timeout,
            "http_client": self.http_client,
        }

    def _redact(self, text: str) -> str:
        """``text`` (not model text) with the configured secrets and key-shaped tokens masked."""
        return self._redactor.text(text)

    def _loop_state(self) -> _LoopState:
        """Clients and semaphore for the running loop (rebuilt if the loop changed)."""
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            # Each client's pool holds its share of the concurrency (requests go to the least-loaded
            # client): the SDK's default pool (1,000 connections, 100 kept alive) would cap the
            # requests in flight at 16,000 and reopen connections above 1,600.
            per_client = math.ceil(self.concurrency / self._shards)
            # one TLS context for every client (building one loads the CA bundle: ~30 ms each); the
            # liveness probe uses it too
            tls = httpx.create_ssl_context()
            refusal = None
            if self.http_client == "lean":
                try:
                    clients: list[Any] = [
                        Http11Pool(self._endpoint, max_connections=per_client, headers=self._lean_headers(),
                                   params=self.query or None, ssl_context=tls)
                        for _ in range(self._shards)
                    ]
                except ValueError as e:  # e.g. a line break in the key: refused before anything is sent
                    clients, refusal = [], self._redact(str(e))
            else:
                limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
                    max_connections=per_client, max_keepalive_connections=per_client
                )
                clients = [
                    openai.AsyncOpenAI(
                        api_key=self._api_key,
                        base_url=self.url_without_query,
                        default_query=self.query or None,
                        timeout=self.request_timeout,
                        max_retries=0,
                        http_client=openai.DefaultAsyncHttpxClient(limits=limits, verify=tls),
                    )
                    for _ in range(self._shards)
                ]
            state = _LoopState(loop, clients, [0] * len(clients), Slots(self.concurrency), tls,
                               loop.create_future(), refusal=refusal)
            if self.http_client == "lean":  # a hung server ends every request in flight at once
                assert state.hung is not None
                state.hung.add_done_callback(lambda _: self._abort_lean(state))
            self.health.hung = None  # a new loop (a new pass) asks the server afresh
            self._state = state
        return state

    def _lean_headers(self) -> dict[str, str]:
        """The headers the lean client sends with every request (those the SDK sends that servers read)."""
        headers = {"Authorization": f"Bearer {self._api_key}", "User-Agent": f"studybench/{__version__}"}
        for name, env in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if os.environ.get(env):
                headers[name] = os.environ[env]
        return headers

    def _abort_lean(self, state: _LoopState) -> None:
        """End every lean request in flight: the server counts as hung."""
        for pool in state.clients:
            pool.abort(lambda: _NoAnswer(self.health.hung or "the server is not answering"))

    # -- liveness --------------------------------------------------------------------------------------

    async def probe(self, timeout: float | None = None) -> str | None:
        """Ask the server's model list (``GET {base_url}/models``) once, on a connection of its own.

        Args:
            timeout: seconds to wait for an answer (default :attr:`liveness_timeout`, else 20).

        Returns:
            ``None`` when the server answered (any HTTP status: it is alive), else what happened
            (``"ReadTimeout"``, ``"ConnectError"``).
        """
        state = self._loop_state()
        limit = timeout if timeout is not None else (self.liveness_timeout or DEFAULT_LIVENESS_TIMEOUT)
        url = self._endpoint.rstrip("/") + "/models"
        try:
            async with httpx.AsyncClient(timeout=limit, verify=state.tls if state.tls is not None else True) as client:
                await client.get(url, params=self.query or None, headers={"Authorization": f"Bearer {self._api_key}"})
        except (httpx.HTTPError, OSError) as exc:
            return type(exc).__name__
        return None

    def _watch(self, state: _LoopState) -> None:
        """Start the liveness probe loop for ``state`` unless it runs (or probing is off)."""
        if self.liveness_timeout > 0 and (state.watcher is None or state.watcher.done()):
            state.watcher = asyncio.ensure_future(self._liveness(state))

    async def _liveness(self, state: _LoopState) -> None:
        """Probe the server while requests are in flight; mark it hung when the probes too go unanswered."""
        check = LivenessCheck(self.liveness_timeout)
        h = self.health
        while h.in_flight() and state.hung is not None and not state.hung.done():
            await asyncio.sleep(check.interval)
            if not check.due(h):
                continue
            sent = time.monotonic()
            error = await self.probe(self.liveness_timeout)
            if error is None:
                check.answered()
            elif check.unanswered(sent, h) and not state.hung.done():
                waited = time.monotonic() - (check.failing_since or sent)
                n = h.in_flight()
                h.hung = (f"{n} request{'s' if n != 1 else ''} in flight and the liveness probe (GET /models: {error}) got no "
                          f"answer for {waited:.0f} s")
                log.info("the endpoint %s looks hung: %s", self._display_url(), h.hung)
                state.hung.set_result(None)  # ends every request in flight; later ones are not sent

    async def _post(self, state: _LoopState, shard: int, payload: dict[str, Any]) -> Any:
        """One chat request; ended at once (:class:`_NoAnswer`) when the server counts as hung meanwhile.

        Raises:
            HttpStatusError, HttpError, json.JSONDecodeError: (lean client) a status other than 2xx,
                no complete response, a body that is not JSON.
            openai.APIStatusError, openai.APIConnectionError: (SDK) the same.
        """
        hung = state.hung
        live = self.liveness_timeout > 0 and hung is not None
        if live and hung.done():  # type: ignore[union-attr]
            raise _NoAnswer(self.health.hung or "the server is not answering")
        if self.http_client == "lean":
            # a hung server ends this request through Http11Pool.abort (no task of its own)
            response = await state.clients[shard].request("POST", "/chat/completions", dumps_body(payload),
                                                          timeout=self.request_timeout)
            if not 200 <= response.status < 300:
                raise HttpStatusError(response)
            return loads_body(response.body)
        post = state.clients[shard].post("/chat/completions", body=payload, cast_to=object)
        if not live:
            return await post
        task = asyncio.ensure_future(post)
        try:
            await asyncio.wait((task, hung), return_when=asyncio.FIRST_COMPLETED)  # type: ignore[arg-type]
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            raise _NoAnswer(self.health.hung or "the server is not answering")
        return task.result()

    def _backoff(self, exc: BaseException | None, attempt: int) -> float:
        """Seconds to sleep after failed attempt number ``attempt`` (1-based) before the next one."""
        hinted = retry_after(exc)
        if hinted is not None:
            return min(hinted, self.backoff_max)
        base = min(self.backoff_max, self.backoff_initial * 2 ** (attempt - 1))
        return base / 2 + self._random.uniform(0, base / 2)

    def _reason(self, exc: BaseException, attempts: int) -> str:
        """Short, key-free description of the final failure."""
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(exc, (openai.APIStatusError, HttpStatusError)):
            reason = f"HTTP {exc.status_code} after {tries}"
            if not is_retryable(exc):
                reason += f": {short_text(status_message(exc))}"
        elif isinstance(exc, (openai.APITimeoutError, HttpTimeout)):
            reason = f"timeout after {tries} (request_timeout={self.request_timeout:g}s)"
        elif isinstance(exc, _NoAnswer):
            reason = f"timeout after {tries} (the endpoint is hung: {exc})"
        elif isinstance(exc, HttpError):
            reason = f"connection error ({type(exc).__name__}) after {tries}"
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            detail = f" ({type(cause).__name__})" if cause is not None else ""
            reason = f"connection error{detail} after {tries}"
        elif isinstance(exc, (json.JSONDecodeError, BadResponse)):
            reason = f"malformed response after {tries}: {short_text(str(exc))}"
        else:
            reason = f"{type(exc).__name__} after {tries}: {short_text(str(exc))}"
        return self._redact(reason)

    async def _attempt(self, state: _LoopState, payload: dict[str, Any], started: list[float]) -> dict[str, Any]:
        """One attempt under the concurrency limit, recorded in :attr:`health`; the response body.

        ``started`` gets the time the first attempt got its slot (appended once).

        Raises:
            BadResponse: a 2xx body without choices; and whatever :meth:`_post` raises.
            ValueError: the lean client cannot send at all (a header it cannot carry).
        """
        if state.refusal is not None:
            raise ValueError(state.refusal)
        async with state.semaphore:
            if not started:
                started.append(time.monotonic())
            n = len(state.clients)
            shard = 0 if n < 2 else min(range(n), key=state.load.__getitem__)
            state.load[shard] += 1
            health = self.health
            token = health.begin()
            self._watch(state)
            try:
                data = await self._post(state, shard, payload)
            except _NoAnswer:
                health.unreachable("no answer (liveness probe)")
                raise
            except (openai.APIStatusError, HttpStatusError) as exc:
                if exc.status_code in UNREACHABLE_STATUSES:
                    health.unreachable(f"HTTP {exc.status_code}")
                else:
                    health.answered()
                raise
            except HttpError as exc:  # refused, reset, dropped, timed out
                health.unreachable(type(exc).__name__)
                raise
            except openai.APIConnectionError as exc:
                health.unreachable(type(exc.__cause__ or exc).__name__)
                raise
            else:
                health.answered()
            finally:
                health.end(token)
                state.load[shard] -= 1
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise BadResponse("no choices in the response body")
        return data

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Generate one turn; never raises for model or transport failures.

        Returns a :class:`ChatResult` with ``completion`` (``""`` if the server sent no content),
        ``reasoning`` (the server's ``reasoning_content``/``reasoning``), ``finish_reason``, ``usage``
        (integer token counts), ``latency_s`` (wall-clock seconds from the first attempt to the end,
        retries and backoff included), ``attempts`` and ``extra`` (``response_id``, ``max_tokens``
        sent, ``queue_s`` = seconds waited under the concurrency limit before the first attempt). On
        failure after retries, ``error`` is a short reason such as ``"HTTP 500 after 7 attempts"``.
        A turn whose completion limit is below the floor is not sent (``attempts`` 0, ``error`` from
        :meth:`budget_problem`).

        Transient failures (:func:`is_retryable`) are tried again up to ``max_retries`` times, after
        the backoff (``Retry-After`` first); a final failure, or any other, ends the turn.
        """
        sampling = self.sampling_for(request)
        limit = self.completion_budget(request.messages, sampling)
        payload = self._payload(request, sampling, limit)
        if limit is not None and limit < self.min_completion_tokens:  # never send a request the model cannot answer
            problem = self.budget_problem(request.messages, sampling)
            return ChatResult(completion="", error=problem, attempts=0, extra={"max_tokens": payload.get("max_tokens")})
        state = self._loop_state()
        attempts = 0
        called = time.monotonic()
        first: list[float] = []  # when the first attempt got its slot

        def failed(exc: BaseException) -> ChatResult:
            reason = self._reason(exc, attempts)
            log.info("chat request failed for model %s: %s", self.model, reason)
            return ChatResult(completion="", error=reason, attempts=attempts,
                              latency_s=time.monotonic() - (first[0] if first else called),
                              extra={"max_tokens": payload.get("max_tokens")})

        while True:
            attempts += 1
            try:
                data = await self._attempt(state, payload, first)
                break
            except Exception as exc:  # every failure becomes an error result (ChatBackend contract)
                if attempts > self.max_retries or not is_retryable(exc):
                    return failed(exc)
                wait = self._backoff(exc, attempts)
                log.info("retrying chat request (attempt %d failed: %s); sleeping %.2fs", attempts,
                         self._reason(exc, attempts), wait)
                await asyncio.sleep(wait)
        try:
            result = parse_reply(data)
        except Exception as exc:  # not retried: the server answered this
            return failed(exc)
        started = first[0] if first else called
        end = time.monotonic()
        # Everything the server sent is stored in the run directory: never let the key land there.
        # Model text loses only the configured secrets (it is judged as written); the rest also
        # loses key shapes.
        red = self._redactor
        result.completion = red.model_text(result.completion)
        if result.reasoning is not None:
            result.reasoning = red.model_text(result.reasoning)
        if result.finish_reason is not None:
            result.finish_reason = red.text(result.finish_reason)
        if result.usage is not None:
            result.usage = {red.text(k): v for k, v in result.usage.items()}
        result.extra = red.obj(result.extra, shapes=True)
        result.attempts = attempts
        result.latency_s = end - started
        result.extra["max_tokens"] = payload.get("max_tokens")
        result.extra["queue_s"] = started - called
        return result

    async def aclose(self) -> None:
        """Close the HTTP clients (idempotent). The backend can be used again afterwards."""
        state, self._state = self._state, None
        if state is None:
            return
        watcher = state.watcher
        if watcher is not None and not watcher.done() and state.loop is asyncio.get_running_loop():
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        for client in state.clients:
            try:
                await (client.aclose() if isinstance(client, Http11Pool) else client.close())
            except Exception:  # a client bound to a closed loop cannot be closed any more
                log.debug("ignoring error while closing an HTTP client", exc_info=True)


