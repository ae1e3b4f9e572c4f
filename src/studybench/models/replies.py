"""The replies of an OpenAI-compatible endpoint, as :class:`~studybench.models.openai_backend.OpenAIBackend` reads them.

- **Retries**: :func:`is_retryable` (which failures are tried again: HTTP 408, 409, 429 and >= 500,
  timeouts, dropped connections, malformed 2xx bodies) and :func:`retry_after` (the server's
  ``Retry-After`` / ``retry-after-ms`` hint, in seconds).
- **Replies**: :func:`parse_reply` (a :class:`~studybench.models.base.ChatResult` from a chat
  completion's JSON body; :class:`BadResponse` when it is not one), :func:`status_message` (the
  server's message in an error response) and :func:`short_text` (one line for an error message).

Both HTTP clients' exceptions are known: the ``openai`` SDK's and :mod:`studybench.models.http11`'s.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from typing import Any

import openai

from studybench.costs import normalise_usage
from studybench.models.base import ChatResult
from studybench.models.http11 import HttpError, HttpStatusError

__all__ = ["BadResponse", "is_retryable", "parse_reply", "retry_after", "short_text", "status_message"]

_RETRY_STATUSES = frozenset({408, 409, 429})


class BadResponse(Exception):
    """A 2xx response whose body is not a usable chat completion (retried like a dropped connection)."""


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed request is worth retrying.

    True for HTTP 408, 409, 429 and >= 500, timeouts, connection errors (including a connection
    closed without a response) and malformed 2xx bodies; false for other HTTP statuses and anything
    else. Both HTTP clients' exceptions are known (the ``openai`` SDK's and
    :mod:`studybench.models.http11`'s).
    """
    if isinstance(exc, (openai.APIStatusError, HttpStatusError)):
        return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
    return isinstance(exc, (openai.APIConnectionError, HttpError, BadResponse, json.JSONDecodeError))


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds from a ``Retry-After`` / ``retry-after-ms`` response header, or ``None``."""
    if isinstance(exc, HttpStatusError):
        headers: Any = exc.headers
    else:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        value = when.timestamp() - time.time()
    if not math.isfinite(value):
        return None
    return max(0.0, value)


def short_text(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (``...`` marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def status_message(exc: openai.APIStatusError | HttpStatusError) -> str:
    """The server's own message in an error response (``error.message`` or ``message``), else the exception's."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(exc.message)


def parse_reply(data: dict[str, Any]) -> ChatResult:
    """A :class:`ChatResult` from a chat-completion JSON body (``choices`` known to be non-empty).

    Raises:
        BadResponse: the first choice is not an object.
    """
    choice = data["choices"][0]
    if not isinstance(choice, dict):
        raise BadResponse("choice is not an object")
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    reasoning = None
    if isinstance(message, dict):
        reasoning = message.get("reasoning_content") or message.get("reasoning")
    usage_raw = data.get("usage")
    usage = None
    if isinstance(usage_raw, dict):
        # counts only: a bool, a negative, non-finite or absurd number (a 400-digit integer) is dropped
        # (the reply's usage is then unreported), compared as is: converting it first would raise
        # OverflowError, and the turn would fail as if the server had dropped it
        usage = {
            str(k): int(v)
            for k, v in usage_raw.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 2**53
        }
        # reasoning and cached-prompt tokens come nested (``*_tokens_details``): keep them flat
        usage.update({k: v for k, v in normalise_usage(usage_raw).items() if k not in usage})
    extra: dict[str, Any] = {}
    if data.get("id") is not None:
        extra["response_id"] = str(data["id"])
    finish = choice.get("finish_reason")
    return ChatResult(
        completion=content if isinstance(content, str) else "",
        finish_reason=None if finish is None else str(finish),
        usage=usage,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        extra=extra,
    )
