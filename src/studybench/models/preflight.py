"""Check that an OpenAI-compatible endpoint answers before a long job starts.

``studybench eval`` and ``studybench judge`` call :func:`check_endpoint` before generating or
judging, so that a wrong URL, a server that is not running or a refused key fails at once with a
clear message instead of after the retries of the first requests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from studybench.secrets import known_secrets, redact_text, url_secrets

__all__ = ["EndpointError", "ServerContext", "check_endpoint", "server_context_length"]

_MAX_CONTEXT = 100_000_000  # a published context length above this is not a number to plan with


class EndpointError(RuntimeError):
    """The endpoint cannot be used: invalid URL, unreachable, or it refuses the API key."""


def _url_path(url: str) -> str:
    """The path part of ``url`` (empty when it has none)."""
    return httpx.URL(url).path if url else ""


def _suggest_v1(base_url: str, key: str, timeout: float, what: str, shown: Any) -> None:
    """Raise when ``{base_url}/v1/models`` answers: the user left ``/v1`` out of the URL."""
    probe = base_url.rstrip("/") + "/v1/models"
    try:
        r = httpx.get(probe, headers={"Authorization": f"Bearer {key}"}, timeout=min(30.0, timeout))
    except httpx.HTTPError:
        return
    if r.status_code == 200:
        fix = str(shown or "").rstrip("/") + "/v1"
        raise EndpointError(
            f"the {what} {shown} has no /models but {fix}/models answers: OpenAI-compatible servers "
            f"(vllm serve, llama.cpp) serve under /v1; use {fix}"
        )


def check_endpoint(backend: Any, what: str = "endpoint") -> list[str]:
    """``GET {base_url}/models`` once.

    Args:
        backend: an object with ``base_url``, ``api_key_env``, ``request_timeout``, ``model`` and
            ``describe()`` (:class:`studybench.models.openai_backend.OpenAIBackend`).
        what: how messages name the endpoint (``"endpoint"``, ``"judge endpoint"``).

    Returns:
        Warnings (e.g. the endpoint lists models but not ``backend.model``); empty when all is well
        or when the server does not implement ``/models``. What the server sent is redacted of the
        backend's secrets (:attr:`~studybench.models.openai_backend.OpenAIBackend.secrets`, else the
        key and the URL's credentials) and of key shapes.

    Raises:
        EndpointError: a key an HTTP header cannot carry (e.g. with a trailing line break), an
            invalid URL, no connection, HTTP 401/403 (the key is refused), or a base URL
            without the ``/v1`` the server answers under.
    """
    shown = backend.describe().get("base_url")
    base = getattr(backend, "url_without_query", backend.base_url)
    query = getattr(backend, "query", None) or None
    url = str(base or "").rstrip("/") + "/models"
    key = os.environ.get(backend.api_key_env) or "EMPTY"
    secrets = getattr(backend, "secrets", None)
    if not isinstance(secrets, tuple):
        secrets = known_secrets([key, *url_secrets(str(backend.base_url or ""))])
    if key != key.strip() or not key.isascii() or not key.isprintable():  # httpx would fail with a misleading error
        raise EndpointError(f"${backend.api_key_env} holds characters an HTTP header cannot carry (a line break, "
                            "a space at either end or a non-ASCII character); set it to the key alone")
    try:
        r = httpx.get(url, params=query, headers={"Authorization": f"Bearer {key}"},
                      timeout=min(30.0, backend.request_timeout))
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as e:
        raise EndpointError(redact_text(f"the {what} URL {shown!r} is not a valid http(s) URL ({e})", secrets)) from None
    except httpx.HTTPError as e:
        raise EndpointError(f"cannot reach the {what} {shown} ({type(e).__name__}); is the server running?") from None
    if r.status_code in (401, 403):
        raise EndpointError(f"the {what} refused the API key (HTTP {r.status_code}); set ${backend.api_key_env}")
    if r.status_code == 404 and not _url_path(url).rstrip("/").endswith("/v1/models"):
        _suggest_v1(str(base), key, backend.request_timeout, what, shown)
    if r.status_code != 200:
        return []  # some servers do not implement /models
    try:
        ids = [m.get("id") for m in r.json().get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []
    if ids and backend.model not in ids:
        return [redact_text(f"the {what} lists {', '.join(map(str, ids[:8]))} but not {backend.model!r}", secrets)]
    return []


@dataclass(frozen=True)
class ServerContext:
    """The context length (prompt + completion tokens) a server publishes, and where it said so.

    Attributes:
        length: tokens.
        source: where it was read (``"max_model_len in /v1/models"``, ``"n_ctx in /props"``, ...).
    """

    length: int
    source: str


def _context_value(value: Any) -> int | None:
    """``value`` when it is a plausible context length (a positive integer, not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_CONTEXT:
        return None
    return value


def _get_json(url: str, key: str, query: Any, timeout: float) -> Any:
    """The JSON body of ``GET url`` (``None``: no answer, not HTTP 200, or not JSON)."""
    try:
        r = httpx.get(url, params=query, headers={"Authorization": f"Bearer {key}"}, timeout=timeout)
    except (httpx.HTTPError, ValueError):
        return None
    if r.status_code != 200 or len(r.content) > 16 * 1024 * 1024:
        return None
    try:
        return r.json()
    except ValueError:
        return None


def server_context_length(backend: Any, timeout: float = 30.0) -> ServerContext | None:
    """The context length the endpoint's server publishes, where servers publish it.

    - vLLM: ``max_model_len`` in the model's entry of ``GET {base_url}/models``;
    - llama.cpp (``llama-server``): ``default_generation_settings.n_ctx`` of ``GET /props`` at the
      server's root (the context of one slot), else ``meta.n_ctx`` / ``meta.n_ctx_train`` in the model's
      ``/models`` entry.

    Args:
        backend: an object with ``base_url``, ``api_key_env``, ``model`` (and optionally
            ``url_without_query`` and ``query``), such as
            :class:`~studybench.models.openai_backend.OpenAIBackend`.
        timeout: seconds per request.

    Returns:
        The length and its source, or ``None`` when the server publishes none (the OpenAI API, SGLang,
        a proxy), does not answer, or publishes something that is not a positive integer.
    """
    base = str(getattr(backend, "url_without_query", backend.base_url) or "").rstrip("/")
    if not base:
        return None
    query = getattr(backend, "query", None) or None
    key = os.environ.get(backend.api_key_env) or "EMPTY"
    if key != key.strip() or not key.isascii() or not key.isprintable():
        return None
    listing = _get_json(base + "/models", key, query, timeout)
    entries = [m for m in listing.get("data", []) if isinstance(m, dict)] if isinstance(listing, dict) and isinstance(
        listing.get("data"), list) else []
    ours = [m for m in entries if m.get("id") == backend.model] or entries[:1]
    entry = ours[0] if ours else {}
    found = _context_value(entry.get("max_model_len"))
    if found is not None:
        return ServerContext(found, "max_model_len in /v1/models")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    props = _get_json(root + "/props", key, query, timeout)
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    found = _context_value(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if found is not None:
        return ServerContext(found, "n_ctx in /props")
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    for name in ("n_ctx", "n_ctx_train"):
        found = _context_value(meta.get(name))
        if found is not None:
            return ServerContext(found, f"meta.{name} in /v1/models")
    return None
