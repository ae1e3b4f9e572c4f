"""The messages of the lean HTTP/1.1 client (:mod:`studybench.models.http11`): its failures, its response, JSON bodies, URLs.

- **Failures**: :class:`HttpError` and its subclasses, named as ``httpx`` names them (the backend's
  error messages and health records stay the same whichever client runs); :class:`HttpStatusError`
  for a complete response with an error status.
- **Bodies**: :func:`loads_body` reads a JSON body exactly as :func:`json.loads` does, mostly by
  ``orjson``; :func:`dumps_body` writes a request body as compact UTF-8 JSON.
- **URLs**: :func:`split_query` (a base URL's query string apart), :func:`sendable` (what the lean
  client can send to) and :func:`proxy_for` (a proxy from the environment).

Re-exported by :mod:`studybench.models.http11`, where callers import them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from urllib.request import getproxies_environment, proxy_bypass_environment

import orjson

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "HttpError",
    "HttpResponse",
    "HttpStatusError",
    "HttpTimeout",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "dumps_body",
    "loads_body",
    "proxy_for",
    "sendable",
    "split_query",
]

class HttpError(Exception):
    """A request that got no complete HTTP response (the subclasses say why)."""


class ConnectError(HttpError):
    """The connection could not be opened: refused, unreachable, a DNS failure, a TLS handshake failure."""


class RemoteProtocolError(HttpError):
    """The server closed the connection without a complete response, or sent a malformed one."""


class ReadError(HttpError):
    """The connection failed (e.g. reset) while the response was awaited."""


class HttpTimeout(HttpError):
    """The request's ``timeout`` passed."""


class ConnectTimeout(HttpTimeout):
    """The ``timeout`` passed while the connection was being opened."""


class ReadTimeout(HttpTimeout):
    """The ``timeout`` passed while the response was awaited."""


class HttpResponse:
    """A complete response.

    Attributes:
        status: the status code.
        reason: the reason phrase.
        headers: header names in lower case -> value (repeated headers joined with ``", "``).
        body: the body, decoded from ``gzip``/``deflate`` when so encoded.
    """

    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    def __repr__(self) -> str:
        return f"HttpResponse({self.status}, {len(self.body)} bytes)"


class HttpStatusError(Exception):
    """A complete response whose status is not 2xx, read as the ``openai`` SDK reads one.

    Attributes:
        status_code: the status.
        headers: the response's headers (lower-case names).
        body: the error object: the body's ``error`` member when the body is a JSON object holding
            one, else the parsed body, else its text.
        message: ``"Error code: N"``, with ``" - <error.message>"`` when the body has one.
    """

    def __init__(self, response: HttpResponse) -> None:
        self.status_code = response.status
        self.headers = response.headers
        text = response.body.decode("utf-8", "replace").strip()
        body: Any = text
        self.message = f"Error code: {response.status}"
        try:
            body = json.loads(text)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            if isinstance(message, str) and message:
                self.message += f" - {message}"
        self.body = body.get("error", body) if isinstance(body, dict) else body
        super().__init__(self.message)


_LONG_INT = re.compile(rb"\d{19}")


def loads_body(body: bytes) -> Any:
    """A JSON response body, read exactly as :func:`json.loads` reads it, mostly by the faster ``orjson``.

    ``orjson`` reads integers beyond 64 bits as floats, and refuses ``NaN``, lone surrogates and
    some other input that :func:`json.loads` accepts: a body holding a run of 19 digits, or one
    ``orjson`` refuses, is read by :func:`json.loads` instead, so the value is always the same.

    Raises:
        json.JSONDecodeError, UnicodeDecodeError: not JSON (as :func:`json.loads`).
    """
    if _LONG_INT.search(body) is None:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


def dumps_body(payload: dict[str, Any]) -> bytes:
    """A request body: ``payload`` as compact UTF-8 JSON (``orjson``; ``json`` for what it refuses).

    Raises:
        ValueError: a ``NaN`` or an infinity among the payload's values or a message's fields
            (JSON has none; ``orjson`` would write ``null``).
        UnicodeEncodeError: a lone surrogate in a string.
    """
    for value in payload.values():
        if type(value) is float and not math.isfinite(value):
            raise ValueError("Out of range float values are not JSON compliant")
    for message in payload.get("messages") or ():
        if isinstance(message, dict):
            for value in message.values():
                if type(value) is float and not math.isfinite(value):
                    raise ValueError("Out of range float values are not JSON compliant")
    try:
        return orjson.dumps(payload)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def split_query(base_url: str | None) -> tuple[str | None, dict[str, str]]:
    """A base URL without its query string, and the query's parameters.

    ``http://h/v1?api_key=K`` must not reach the client as its base URL (paths are appended after
    the query: ``/v1?api_key=Kchat/completions``); its parameters go with every request instead.

    Args:
        base_url: the endpoint as given (``None``: the client's default).

    Returns:
        ``(url, params)``; ``(base_url, {})`` when there is no query string.
    """
    if not base_url or "?" not in base_url:
        return base_url, {}
    url, _, query = base_url.partition("?")
    query = query.split("#", 1)[0]
    return url, dict(parse_qsl(query, keep_blank_values=True))


def sendable(url: str) -> bool:
    """Whether :class:`Http11Pool` can send to ``url``: ``http`` or ``https`` with a host and a valid port.

    Args:
        url: a base URL.

    Returns:
        ``False`` for anything else (malformed URLs included; never raises).
    """
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a port that is not a number in range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def proxy_for(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
    less ``NO_PROXY``), or ``None``.

    Args:
        url: an ``http`` or ``https`` URL.

    Returns:
        The proxy URL, or ``None`` when the request goes straight to the host.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL a request could go to
        return None
    proxies = getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxy
