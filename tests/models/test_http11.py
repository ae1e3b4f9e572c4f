"""The lean HTTP/1.1 client (studybench.models.http11) against scripted loopback servers (issue 27).

Every response framing (Content-Length, chunked with extensions and trailers, up to the close, gzip
and deflate, interim 1xx, 204) is read the same however the server's bytes are split into writes;
every way a server can fail maps to a named error and leaves the pool usable; a connection is never
reused once its response went wrong, timed out, was cancelled or aborted, or the server closed it.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from studybench.models.http11 import (
    ConnectError,
    Http11Pool,
    HttpStatusError,
    ReadTimeout,
    RemoteProtocolError,
    loads_body,
    proxy_for,
)

pytestmark = pytest.mark.timeout(60)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """(head, body) of one request, or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


async def _serve(handler: Handler, body: Callable[[Http11Pool, dict[str, Any]], Awaitable[None]], **pool_kw: Any) -> dict[str, Any]:
    """Run ``body(pool, state)`` against a loopback server whose connections ``handler`` serves."""
    state: dict[str, Any] = {"connections": 0, "requests": [], "open": 0, "max_open": 0}

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        state["open"] += 1
        state["max_open"] = max(state["max_open"], state["open"])
        try:
            await handler(reader, writer, state)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            state["open"] -= 1
            writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Http11Pool(f"http://127.0.0.1:{port}/v1", **{"max_connections": 4, **pool_kw})
    try:
        await body(pool, state)
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()
    return state


def _replies(*responses: bytes, split: int = 0, close_after: bool = False) -> Handler:
    """A handler answering each request on a connection with the next response (cycling), written in
    pieces of ``split`` bytes (0: one write)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
        i = 0
        while (req := await _read_request(reader)) is not None:
            state["requests"].append(req)
            data = responses[i % len(responses)]
            i += 1
            for k in range(0, len(data), split or len(data)):
                writer.write(data[k:k + (split or len(data))])
                await writer.drain()
                if split:
                    await asyncio.sleep(0)
            if close_after:
                return

    return handler


BODY = b'{"choices": [{"message": {"content": "Final Answer: \\\\boxed{1}"}}], "n": 12345}'


def _framings() -> list[tuple[str, bytes]]:
    chunks = [BODY[:7], BODY[7:30], BODY[30:]]
    chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks)
    return [
        ("content-length", b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)),
        ("chunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n"),
        ("chunked+trailers", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + chunked + b"0\r\nX-T: 1\r\n\r\n"),
        ("gzip", b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(gzip.compress(BODY))
         + gzip.compress(BODY)),
        ("deflate", b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: %d\r\n\r\n" % len(zlib.compress(BODY))
         + zlib.compress(BODY)),
        ("100-continue first", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)),
        ("folded case, repeated header", b"HTTP/1.1 200 OK\r\nCONTENT-LENGTH: %d\r\nX-A: 1\r\nx-a: 2\r\n\r\n%s" % (len(BODY), BODY)),
    ]


@pytest.mark.parametrize("split", [0, 1, 5])
@pytest.mark.parametrize("name,response", _framings(), ids=[n for n, _ in _framings()])
def test_every_framing_reads_the_same_body_however_the_bytes_arrive(name: str, response: bytes, split: int) -> None:
    got: list[Any] = []

    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        for _ in range(3):  # keep-alive: the same connection each time
            r = await pool.request("POST", "/chat/completions", b'{"q": 1}', timeout=10)
            got.append((r.status, r.body))

    state = asyncio.run(_serve(_replies(response, split=split), body))
    assert got == [(200, BODY)] * 3
    assert state["connections"] == 1


def test_close_delimited_and_204_and_connection_close() -> None:
    got: list[Any] = []
    close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY
    empty = b"HTTP/1.1 204 No Content\r\n\r\n"

    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        for _ in range(2):
            r = await pool.request("POST", "/x", b"{}", timeout=10)
            got.append((r.status, r.body))

    state = asyncio.run(_serve(_replies(close, close_after=True), body))
    assert got == [(200, BODY)] * 2 and state["connections"] == 2  # never reused after Connection: close
    got.clear()
    state = asyncio.run(_serve(_replies(empty), body))
    assert got == [(204, b"")] * 2 and state["connections"] == 1


def test_the_request_is_one_write_with_the_fixed_headers_and_query() -> None:
    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        await pool.request("POST", "/chat/completions", b'{"a":1}', timeout=10)
        await pool.request("GET", "/models", None, timeout=10)

    response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    state = asyncio.run(_serve(_replies(response), body, headers={"Authorization": "Bearer k-123"}, params={"api_key": "q k"}))
    (post, post_body), (get, get_body) = state["requests"]
    lines = post.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions?api_key=q+k HTTP/1.1"
    assert "Authorization: Bearer k-123" in lines and "Content-Length: 7" in lines
    assert "Content-Type: application/json" in lines and any(x.startswith("Host: 127.0.0.1:") for x in lines)
    assert post_body == b'{"a":1}'
    assert get.decode().startswith("GET /v1/models?api_key=q+k HTTP/1.1") and get_body == b""


@pytest.mark.parametrize("bad", ["a\r\nX-Injected: 1", "a\nb", "a\0b", "ключ"])
def test_a_header_that_cannot_be_sent_is_refused_before_anything_is_sent(bad: str) -> None:
    with pytest.raises(ValueError, match="header 'Authorization'"):
        Http11Pool("http://127.0.0.1:9/v1", max_connections=1, headers={"Authorization": f"Bearer {bad}"})
    with pytest.raises(ValueError, match="http"):
        Http11Pool("ftp://h/v1", max_connections=1)


# -- failures -------------------------------------------------------------------------------------------


async def _hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
    state["requests"].append(await _read_request(reader))
    await asyncio.sleep(30)


async def _close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
    state["requests"].append(await _read_request(reader))


def _partial(data: bytes) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
        state["requests"].append(await _read_request(reader))
        writer.write(data)
        await writer.drain()

    return handler


FAILURES: list[tuple[str, Handler, type[Exception], dict[str, Any]]] = [
    ("closed without a response", _close_at_once, RemoteProtocolError, {}),
    ("closed mid-head", _partial(b"HTTP/1.1 200 OK\r\nContent-Len"), RemoteProtocolError, {}),
    ("closed mid-body", _partial(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"), RemoteProtocolError, {}),
    ("closed mid-chunk", _partial(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc"), RemoteProtocolError, {}),
    ("malformed status line", _partial(b"HTTX/1.1 200 OK\r\n\r\n"), RemoteProtocolError, {}),
    ("malformed header", _partial(b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"), RemoteProtocolError, {}),
    ("malformed content-length", _partial(b"HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n"), RemoteProtocolError, {}),
    ("malformed chunk size", _partial(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), RemoteProtocolError, {}),
    ("chunk without CRLF", _partial(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX"), RemoteProtocolError, {}),
    ("unknown transfer-encoding", _partial(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: br\r\n\r\n"), RemoteProtocolError, {}),
    ("head too long", _partial(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000), RemoteProtocolError, {}),
    ("body over the limit", _partial(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"), RemoteProtocolError, {"max_body": 1000}),
    ("undecodable gzip", _partial(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"), RemoteProtocolError, {}),
    ("no answer", _hang, ReadTimeout, {}),
]


@pytest.mark.parametrize("name,handler,error,kw", FAILURES, ids=[f[0] for f in FAILURES])
def test_every_failure_is_named_and_the_pool_recovers(name: str, handler: Handler, error: type[Exception], kw: dict[str, Any]) -> None:
    good = _replies(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    calls = {"n": 0}

    async def first_bad(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
        calls["n"] += 1
        await (handler if calls["n"] == 1 else good)(reader, writer, state)

    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        with pytest.raises(error):
            await pool.request("POST", "/x", b"{}", timeout=0.5)
        assert pool.describe()["open"] == 0  # the failed connection was closed, never pooled
        r = await pool.request("POST", "/x", b"{}", timeout=10)  # a fresh connection works
        assert (r.status, r.body) == (200, b"{}")

    state = asyncio.run(_serve(first_bad, body, **kw))
    assert state["connections"] == 2


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def go() -> None:
        pool = Http11Pool(f"http://127.0.0.1:{port}/v1", max_connections=2)
        with pytest.raises(ConnectError):
            await pool.request("GET", "/models", None, timeout=5)
        assert pool.describe()["open"] == 0
        await pool.aclose()

    asyncio.run(go())


def test_an_idle_connection_the_server_closed_or_that_expired_is_not_reused() -> None:
    response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        for _ in range(3):
            r = await pool.request("GET", "/m", None, timeout=10)
            assert r.status == 200
            await asyncio.sleep(0.05)  # the server's close reaches the client

    # the server closes after each response (without saying so): every request still succeeds
    state = asyncio.run(_serve(_replies(response, close_after=True), body))
    assert state["connections"] == 3
    state = asyncio.run(_serve(_replies(response), body, keepalive_expiry=0.0))  # expired at once
    assert state["connections"] == 3
    state = asyncio.run(_serve(_replies(response), body))
    assert state["connections"] == 1


def test_the_pool_never_opens_more_than_max_connections() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
        while (req := await _read_request(reader)) is not None:
            state["requests"].append(req)
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()

    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        out = await asyncio.gather(*(pool.request("GET", "/m", None, timeout=20) for _ in range(9)))
        assert [r.status for r in out] == [200] * 9

    state = asyncio.run(_serve(slow, body, max_connections=2))
    assert state["max_open"] <= 2 and len(state["requests"]) == 9


def test_abort_and_cancel_end_requests_in_flight_and_close_their_connections() -> None:
    class Hung(Exception):
        pass

    async def body(pool: Http11Pool, state: dict[str, Any]) -> None:
        tasks = [asyncio.ensure_future(pool.request("GET", "/m", None, timeout=30)) for _ in range(3)]
        while len(state["requests"]) < 3:
            await asyncio.sleep(0.01)
        assert pool.in_use == 3
        assert pool.abort(lambda: Hung("no answer")) == 3
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, Hung) for r in results)
        assert pool.describe()["open"] == 0 and pool.in_use == 0
        task = asyncio.ensure_future(pool.request("GET", "/m", None, timeout=30))
        while len(state["requests"]) < 4:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pool.describe()["open"] == 0
        # a request still opening its connection when the abort comes ends as soon as it has one
        loop = asyncio.get_running_loop()
        real = loop.create_connection

        async def slow_connect(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.2)
            return await real(*args, **kwargs)

        loop.create_connection = slow_connect  # type: ignore[method-assign]
        try:
            task = asyncio.ensure_future(pool.request("GET", "/m", None, timeout=30))
            await asyncio.sleep(0.05)
            assert pool.abort(lambda: Hung("no answer")) == 0  # nothing in flight yet
            with pytest.raises(Hung):
                await task
        finally:
            loop.create_connection = real  # type: ignore[method-assign]
        assert len(state["requests"]) == 4  # it was never sent

    asyncio.run(_serve(_hang, body))


# -- reading bodies and status errors ---------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    b'{"a": 1}', b'{"id": 18446744073709551616, "n": -9223372036854775809}', b'{"u": NaN}', b'{"x": 1e400}',
    b'{"s": "\\ud800"}', b'[' * 2000 + b']' * 2000, b'{"a": 1, "a": 2}', b'\xef\xbb\xbf{"a": 1}', b"\xff", b"", b"{",
])
def test_loads_body_gives_what_json_loads_gives(text: bytes) -> None:
    import json

    def outcome(f: Callable[[bytes], Any]) -> Any:
        try:
            value = f(text)
        except (ValueError, RecursionError) as e:
            return ("error", type(e).__name__)
        return ("ok", repr(value), repr([type(v) for v in (value.values() if isinstance(value, dict) else [value])]))

    assert outcome(loads_body) == outcome(json.loads)


def test_a_status_error_reads_the_message_as_the_sdk_does() -> None:
    from studybench.models.http11 import HttpResponse

    err = HttpStatusError(HttpResponse(400, "Bad Request", {"retry-after": "2"}, b'{"error": {"message": "too long"}}'))
    assert (err.status_code, err.message, err.body, err.headers["retry-after"]) == (400, "Error code: 400 - too long",
                                                                                   {"message": "too long"}, "2")
    plain = HttpStatusError(HttpResponse(502, "", {}, b"<html>bad gateway</html>"))
    assert plain.message == "Error code: 502" and plain.body == "<html>bad gateway</html>"


def test_proxy_for_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert proxy_for("http://10.0.0.1:8000/v1") is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert proxy_for("http://10.0.0.1:8000/v1") == "http://proxy:3128"
    assert proxy_for("https://api.example/v1") is None
    monkeypatch.setenv("NO_PROXY", "10.0.0.1")
    assert proxy_for("http://10.0.0.1:8000/v1") is None


def test_https_with_the_callers_tls_context(tmp_path: Any) -> None:
    """TLS: the server's certificate is checked against the context given (an untrusted one is a ConnectError)."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (it makes the test certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    trusted = ssl.create_default_context(cafile=str(cert))
    handler = _replies(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

    async def go() -> tuple[Any, ...]:
        state: dict[str, Any] = {"connections": 0, "requests": [], "open": 0, "max_open": 0}
        server = await asyncio.start_server(lambda r, w: handler(r, w, state), "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        good = Http11Pool(f"https://127.0.0.1:{port}/v1", max_connections=2, ssl_context=trusted)
        bad = Http11Pool(f"https://127.0.0.1:{port}/v1", max_connections=2, ssl_context=ssl.create_default_context())
        try:
            first = await good.request("POST", "/chat/completions", b"{}", timeout=20)
            second = await good.request("POST", "/chat/completions", b"{}", timeout=20)
            reused = good.describe()["open"]
            with pytest.raises(ConnectError):
                await bad.request("POST", "/chat/completions", b"{}", timeout=20)
        finally:
            await good.aclose()
            await bad.aclose()
            server.close()
        return first.body, second.body, reused, len(state["requests"])

    assert asyncio.run(go()) == (b"{}", b"{}", 1, 2)  # two requests over one TLS connection
