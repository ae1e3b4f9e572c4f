"""A lean HTTP/1.1 keep-alive client for JSON APIs, on asyncio's transports.

:class:`OpenAIBackend <studybench.models.openai_backend.OpenAIBackend>` sends its chat requests
through it by default (``http_client="lean"``): per request it costs a fraction of the CPU of the
``openai`` SDK over ``httpx``/``httpcore``/``h11``/``anyio`` (which build several objects, tasks and
cancel scopes per request), and it is what lets the harness keep up with many fast replicas (see
``bench/harness_bench.py``). What it does:

- **Connections**: a pool of keep-alive connections to one origin (``http`` or ``https``: TLS with
  the given :class:`ssl.SSLContext`), at most ``max_connections`` open; an idle connection is
  reused last-in first-out, and dropped when the server closed it or after ``keepalive_expiry``
  seconds idle (servers close idle connections after about 5 s: uvicorn, so vLLM, and SGLang).
  ``TCP_NODELAY`` is set (asyncio's default) and every request goes out in one write.
- **Responses**: status line and headers (at most :data:`MAX_HEAD_BYTES`), a body of
  ``Content-Length`` bytes, chunked, or up to the end of the connection, at most ``max_body`` bytes;
  ``gzip`` and ``deflate`` bodies are decoded; interim ``1xx`` responses are skipped.
- **Failures** raise a subclass of :class:`HttpError`, named as ``httpx`` names them (the backend's
  error messages and health records stay the same whichever client runs): :class:`ConnectError`
  (refused, unreachable, DNS, TLS handshake), :class:`RemoteProtocolError` (closed without a
  complete response, or a malformed one), :class:`ReadError` (reset while waiting),
  :class:`ConnectTimeout` and :class:`ReadTimeout` (the request's ``timeout``, seconds for the
  whole attempt). A connection that failed, timed out or was cancelled is closed, never reused.
- **Abort**: :meth:`Http11Pool.abort` ends every request in flight at once with an exception of the
  caller's (the backend's hung-server rule), without a task per request.

It sends no proxy, cookies or redirects: the backend uses the ``openai`` SDK where a proxy from the
environment applies (:func:`proxy_for`), and a redirect is an HTTP status like any other.

The failures, the response and the JSON body and URL helpers are in
:mod:`studybench.models.http_messages` (all importable from here); this module is the connection
and its response parser (:class:`Http11Pool`).
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from studybench.models.http_messages import (
    ConnectError,
    ConnectTimeout,
    HttpError,
    HttpResponse,
    HttpStatusError,
    HttpTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    dumps_body,
    loads_body,
    proxy_for,
    sendable,
    split_query,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "ConnectError",
    "ConnectTimeout",
    "Http11Pool",
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

MAX_HEAD_BYTES = 64 * 1024
"""The longest status line and headers accepted."""

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest response body accepted by default (a chat completion is a few KiB to a few MiB)."""

_HEAD, _LENGTH, _CHUNKED, _CLOSE, _DONE = range(5)


def _parse_head(head: bytes) -> tuple[int, str, dict[str, str], bool]:
    """(status, reason, headers, HTTP/1.1) of a response head without its final blank line.

    Raises:
        RemoteProtocolError: not an HTTP/1.x status line or a malformed header line.
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
        raise RemoteProtocolError(f"malformed status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise RemoteProtocolError(f"malformed header line {line[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers, parts[0] != "HTTP/1.0"


class _Connection(asyncio.Protocol):
    """One connection: sends a request, parses its response, resolves the request's future."""

    def __init__(self, pool: Http11Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.future: asyncio.Future[HttpResponse] | None = None
        self.buffer = bytearray()
        self.state = _DONE
        self.scanned = 0
        self.remaining = 0
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.keepalive = True
        self.head_only = False
        self.closed = False
        self.retired = False
        self.idle_since = 0.0

    # -- asyncio.Protocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.state == _DONE:  # nothing was asked: a server talking out of turn cannot be trusted
            self.pool._retire(self)
            return
        self.buffer += data
        try:
            self._parse()
        except HttpError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        if self.state == _CLOSE:
            self._finish(bytes(self.body))
        elif self.state != _DONE:
            started = self.state != _HEAD or self.buffer
            self._fail(RemoteProtocolError("Server disconnected " + ("mid-response." if started else "without sending a response.")))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.state == _CLOSE and exc is None:
            self._finish(bytes(self.body))
        elif self.state != _DONE:
            self._fail(ReadError(str(exc) or type(exc).__name__) if exc is not None
                       else RemoteProtocolError("Server disconnected without sending a response."))
        self.pool._retire(self)

    # -- a request ---------------------------------------------------------------------------------------

    def send(self, data: bytes, future: asyncio.Future[HttpResponse], head_only: bool) -> None:
        self.future = future
        self.state = _HEAD
        self.scanned = 0
        self.head_only = head_only
        self.body = bytearray()
        assert self.transport is not None
        self.transport.write(data)

    def _fail(self, exc: BaseException) -> None:
        self.state = _DONE
        future = self.future
        if future is not None and not future.done():
            future.set_exception(exc)
        self.pool._retire(self)

    def _finish(self, body: bytes) -> None:
        self.state = _DONE
        if self.buffer:  # bytes beyond the response: the connection is out of step
            self.keepalive = False
        encoding = self.headers.get("content-encoding", "").lower()
        if encoding in ("gzip", "x-gzip", "deflate") and body:
            try:
                body = zlib.decompress(body, 47 if encoding != "deflate" else 15)
            except zlib.error as exc:
                self._fail(RemoteProtocolError(f"undecodable {encoding} body: {exc}"))
                return
        future = self.future
        if future is not None and not future.done():
            future.set_result(HttpResponse(self.status, self.reason, self.headers, body))

    def _parse(self) -> None:
        buf = self.buffer
        while True:
            state = self.state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n", self.scanned)
                if end < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise RemoteProtocolError(f"response head over {MAX_HEAD_BYTES} bytes")
                    self.scanned = max(0, len(buf) - 3)
                    return
                if end > MAX_HEAD_BYTES:
                    raise RemoteProtocolError(f"response head over {MAX_HEAD_BYTES} bytes")
                self.status, self.reason, self.headers, http11 = _parse_head(bytes(buf[:end]))
                del buf[: end + 4]
                self.scanned = 0
                if 100 <= self.status < 200:
                    continue  # an interim response: the real one follows
                conn = self.headers.get("connection", "").lower()
                self.keepalive = ("keep-alive" in conn) if not http11 else ("close" not in conn)
                te = self.headers.get("transfer-encoding")
                length = self.headers.get("content-length")
                if self.head_only or self.status in (204, 304):
                    self._finish(b"")
                    return
                if te is not None:
                    if te.lower().rsplit(",", 1)[-1].strip() != "chunked":
                        raise RemoteProtocolError(f"unsupported transfer-encoding {te!r}")
                    self.state = _CHUNKED
                    self.remaining = -1
                elif length is not None:
                    if not length.isdigit() or len(length) > 18:
                        raise RemoteProtocolError(f"malformed content-length {length[:40]!r}")
                    self.remaining = int(length)
                    if self.remaining > self.pool.max_body:
                        raise RemoteProtocolError(f"response body over {self.pool.max_body} bytes")
                    self.state = _LENGTH
                else:
                    self.keepalive = False
                    self.state = _CLOSE
            elif state == _LENGTH:
                if len(buf) < self.remaining:
                    return
                body = bytes(buf[: self.remaining])
                del buf[: self.remaining]
                self._finish(body)
                return
            elif state == _CLOSE:
                self.body += buf
                buf.clear()
                if len(self.body) > self.pool.max_body:
                    raise RemoteProtocolError(f"response body over {self.pool.max_body} bytes")
                return
            elif state == _CHUNKED:
                if self.remaining == -2:  # after the last chunk
                    self._trailers()
                    return
                if self.remaining == -1:  # a size line
                    eol = buf.find(b"\r\n")
                    if eol < 0:
                        if len(buf) > MAX_HEAD_BYTES:
                            raise RemoteProtocolError("chunk size line too long")
                        return
                    line = bytes(buf[:eol])
                    del buf[: eol + 2]
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise RemoteProtocolError(f"malformed chunk size {line[:40]!r}") from None
                    if size < 0:
                        raise RemoteProtocolError(f"malformed chunk size {line[:40]!r}")
                    if len(self.body) + size > self.pool.max_body:
                        raise RemoteProtocolError(f"response body over {self.pool.max_body} bytes")
                    self.remaining = size if size else -2
                    continue
                if len(buf) < self.remaining + 2:
                    return
                if buf[self.remaining: self.remaining + 2] != b"\r\n":
                    raise RemoteProtocolError("malformed chunk (no CRLF after its data)")
                self.body += buf[: self.remaining]
                del buf[: self.remaining + 2]
                self.remaining = -1
            else:
                return

    def _trailers(self) -> None:
        """After the last chunk: skip the trailer fields up to the blank line, then finish."""
        buf = self.buffer
        if buf[:2] == b"\r\n":
            del buf[:2]
            self._finish(bytes(self.body))
            return
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise RemoteProtocolError("trailers too long")
            return
        del buf[: end + 4]
        self._finish(bytes(self.body))


class Http11Pool:
    """Keep-alive HTTP/1.1 connections to one origin (see the module docstring).

    Args:
        base_url: ``http://host:port/prefix`` or ``https://...``; request paths are appended to the prefix.
        max_connections: most connections open at once (requests beyond wait for one).
        headers: sent with every request (e.g. ``Authorization``); values must be printable Latin-1.
        params: a query string sent with every request (e.g. ``api_key`` for some gateways).
        ssl_context: for ``https`` (default :func:`ssl.create_default_context`).
        keepalive_expiry: seconds an idle connection is kept for reuse.
        max_body: the largest response body accepted, in bytes.

    Raises:
        ValueError: a URL that is not ``http``/``https`` with a host, a non-positive ``max_connections``,
            or a header that cannot be sent (a line break or non-Latin-1 character in a name or value).
    """

    def __init__(
        self,
        base_url: str,
        *,
        max_connections: int,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        keepalive_expiry: float = 4.0,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host: {parts.scheme}://{parts.hostname or ''}")
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        self.host = parts.hostname
        self.tls = parts.scheme == "https"
        default_port = 443 if self.tls else 80
        self.port = parts.port or default_port
        self.prefix = parts.path.rstrip("/")
        self.query = ("?" + urlencode(dict(params))) if params else ""
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.max_body = max_body
        self.ssl_context = (ssl_context or ssl.create_default_context()) if self.tls else None
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if self.port == default_port else f"{host}:{self.port}"
        fields = {"Host": authority, "Accept": "application/json", **(headers or {})}
        lines = []
        for name, value in fields.items():
            if any(c in "\r\n\0:" for c in name) or any(c in "\r\n\0" for c in value):
                raise ValueError(f"header {name!r}: a line break or NUL cannot be sent in an HTTP header")
            try:
                lines.append(f"{name}: {value}\r\n".encode("latin-1"))
            except UnicodeEncodeError:
                raise ValueError(f"header {name!r}: only Latin-1 characters can be sent in an HTTP header") from None
        self._fixed = b"".join(lines)
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._open = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False
        self._aborts = 0  # abort() calls so far
        self._abort_error: Callable[[], BaseException] | None = None

    # -- connections -----------------------------------------------------------------------------------

    def _retire(self, conn: _Connection) -> None:
        """Close ``conn`` for good and free its place (idempotent)."""
        if not conn.retired:
            conn.retired = True
            self._open -= 1
            self._busy.discard(conn)
            self._wake()
        if conn.transport is not None and not conn.closed:
            conn.closed = True
            conn.transport.close()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connection(self, deadline: float) -> _Connection:
        """An idle connection, a new one, or (at ``max_connections``) the next one freed."""
        loop = asyncio.get_running_loop()
        while True:
            idle = self._idle
            while idle:
                conn = idle.pop()
                if conn.retired or conn.closed:
                    continue
                if loop.time() - conn.idle_since > self.keepalive_expiry:
                    self._retire(conn)
                    continue
                return conn
            if self._open < self.max_connections:
                break
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise ConnectTimeout("timed out waiting for a free connection") from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._open += 1
        conn = _Connection(self)
        try:
            await asyncio.wait_for(
                loop.create_connection(lambda: conn, self.host, self.port, ssl=self.ssl_context,
                                       server_hostname=self.host if self.tls else None),
                max(0.0, deadline - loop.time()),
            )
        except BaseException as exc:
            conn.retired = True
            self._open -= 1
            self._wake()
            if conn.transport is not None:
                conn.transport.close()
            if isinstance(exc, asyncio.TimeoutError):
                raise ConnectTimeout(f"timed out connecting to {self.host}:{self.port}") from None
            if isinstance(exc, (OSError, ssl.SSLError)):
                raise ConnectError(str(exc) or type(exc).__name__) from None
            raise
        return conn

    # -- requests ----------------------------------------------------------------------------------------

    async def request(self, method: str, path: str, body: bytes | None = None, *, timeout: float,
                      content_type: str = "application/json") -> HttpResponse:
        """Send one request and return its complete response (any status).

        Args:
            method: ``GET``, ``POST`` ...
            path: appended to the base URL's path (e.g. ``/chat/completions``).
            body: the request body (``None``: none).
            timeout: seconds for the whole attempt: waiting for a connection, connecting, sending, the response.
            content_type: the body's ``Content-Type``.

        Returns:
            The response.

        Raises:
            HttpError: no complete response (see the module docstring); an exception given to
                :meth:`abort` while the request was in flight.
            RuntimeError: the pool was closed.
        """
        if self._closed:
            raise RuntimeError("the HTTP pool is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        aborts = self._aborts
        conn = await self._connection(deadline)
        if self._aborts != aborts and self._abort_error is not None:  # aborted while it waited for a connection
            conn.idle_since = loop.time()
            self._idle.append(conn)
            self._wake()
            raise self._abort_error()
        head = f"{method} {self.prefix}{path}{self.query} HTTP/1.1\r\n".encode("latin-1") + self._fixed
        if body is not None:
            data = head + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode("latin-1") + body
        else:
            data = head + b"\r\n"
        future: asyncio.Future[HttpResponse] = loop.create_future()
        self._busy.add(conn)
        timer = loop.call_at(deadline, self._expire, conn, future)
        try:
            conn.send(data, future, method == "HEAD")
            response = await future
        except BaseException:  # failed, timed out, aborted or cancelled: the connection is out of step
            self._retire(conn)
            raise
        finally:
            timer.cancel()
        self._busy.discard(conn)
        if conn.keepalive and not conn.closed and not self._closed:
            conn.idle_since = loop.time()
            self._idle.append(conn)
            self._wake()
        else:
            self._retire(conn)
        return response

    def _expire(self, conn: _Connection, future: asyncio.Future[HttpResponse]) -> None:
        if not future.done():
            future.set_exception(ReadTimeout("timed out waiting for the response"))
        self._retire(conn)

    def abort(self, error: Callable[[], BaseException]) -> int:
        """End every request in flight now with ``error()`` (their connections are closed).

        Args:
            error: makes the exception each request raises.

        Returns:
            The number of requests ended (a request still waiting for its connection ends too, once it has one).
        """
        self._aborts += 1
        self._abort_error = error
        n = 0
        for conn in list(self._busy):
            future = conn.future
            if future is not None and not future.done():
                future.set_exception(error())
                n += 1
            self._retire(conn)
        return n

    @property
    def in_use(self) -> int:
        """Requests in flight."""
        return len(self._busy)

    async def aclose(self) -> None:
        """Close every connection (idempotent); requests in flight fail with :class:`ReadError`."""
        self._closed = True
        for conn in [*self._idle, *self._busy]:
            if not conn.closed and conn.transport is not None:
                conn.closed = True
                conn.transport.close()
            if conn.future is not None and not conn.future.done():
                conn.future.set_exception(ReadError("the client was closed"))
        self._idle.clear()
        self._busy.clear()
        await asyncio.sleep(0)  # let the transports close

    def describe(self) -> dict[str, Any]:
        """Connection counts (for tests and diagnostics): ``open``, ``idle``, ``busy``, ``max``."""
        return {"open": self._open, "idle": len(self._idle), "busy": len(self._busy), "max": self.max_connections}
