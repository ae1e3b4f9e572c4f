"""The stub server's core: the request handler (:class:`StubCore`) and its HTTP/1.1 protocol (:class:`HttpProtocol`).

One asyncio protocol with a minimal keep-alive parser (``Content-Length`` bodies only); the core
answers ``/v1/chat/completions``, ``/v1/models``, ``/health``, ``/version`` (like vLLM, once a version is set with
the ``version`` control op; 404 before), ``/props`` (like llama.cpp's ``llama-server``, once ``n_ctx`` is set with
the ``context`` control op; 404 before) and the ``/_stub/...`` control plane. The ``hang`` control op makes
every route but the control plane accept requests and never answer (a stuck server). The public
handle is :class:`studybench.testing.stub_server.StubServer`.
"""

from __future__ import annotations

import asyncio
import http
import json
import math
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from studybench.testing.stub_script import Fault, Reply, ReplyFn, conversation_turn, message_text

__all__ = ["HttpProtocol", "StubCore"]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024


@dataclass
class _FaultRule:
    pattern: re.Pattern[str]
    fault: Fault
    times: int | None


# --------------------------------------------------------------------------------------------------
# Server core (shared by thread and process modes)
# --------------------------------------------------------------------------------------------------


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _response(status: int, body: bytes, *, close: bool = False, extra: str = "") -> bytes:
    connection = "Connection: close\r\n" if close else ""
    head = (
        f"HTTP/1.1 {status} {_phrase(status)}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}{connection}\r\n"
    )
    return head.encode("latin-1") + body


def _error_body(status: int, message: str) -> bytes:
    kind = (
        "rate_limit_error"
        if status == 429
        else ("server_error" if status >= 500 else "invalid_request_error")
    )
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


@dataclass
class _Action:
    """What the protocol does with one request: wait ``delay`` s, then send ``payload`` or drop."""

    delay: float
    payload: bytes | None
    counted: bool = False
    close: bool = False
    hang: bool = False


class StubCore:
    """Request accounting, fault selection and reply rendering (runs on the server's event loop).

    Fault tables are guarded by a lock because thread-mode callers edit them from the test thread.
    """

    def __init__(self, reply_fn: ReplyFn, *, record: bool, latency: float, model: str) -> None:
        self.reply_fn = reply_fn
        self.record = record
        self.latency = latency
        self.model = model
        self.count = 0
        self.model_lists = 0
        self.inflight = 0
        self.max_inflight = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._at: dict[int, Fault] = {}
        self._queue: deque[Fault] = deque()
        self._rules: list[_FaultRule] = []
        self._created = int(time.time())
        self.version: str | None = None
        self.max_model_len: int | None = None
        """Published as ``max_model_len`` in each ``/v1/models`` entry, as vLLM does (``None``: left out)."""
        self.n_ctx: int | None = None
        """Published as ``default_generation_settings.n_ctx`` by ``GET /props``, as llama.cpp does (``None``: 404)."""
        self.hung = False
        """Whether every route but the control plane hangs (accepts the request, never answers)."""

    # -- control plane -------------------------------------------------------------------------------

    def install(self, specs: list[dict[str, Any]]) -> None:
        """Install script faults (see :class:`Script`)."""
        for spec in specs:
            fault = Fault.from_dict(spec)
            if "at" in spec:
                self.control({"op": "at", "n": spec["at"], "fault": fault.to_dict()})
            elif "match" in spec:
                self.control(
                    {
                        "op": "when",
                        "match": spec["match"],
                        "fault": fault.to_dict(),
                        "times": spec.get("times"),
                    }
                )
            else:
                self.control({"op": "push", "fault": fault.to_dict(), "times": spec.get("times", 1)})

    def control(self, op: dict[str, Any]) -> dict[str, Any]:
        """Apply one control operation; returns the statistics afterwards.

        Operations (``op`` key): ``push`` (``fault``, ``times``), ``at`` (``n``, ``fault``),
        ``when`` (``match``, ``fault``, ``times``), ``clear``, ``reset_stats``, ``latency``
        (``seconds``), ``version`` (``version``: what ``GET /version`` reports; ``None``: 404), ``context``
        (``max_model_len`` for ``/v1/models``, ``n_ctx`` for ``/props``; ``None`` leaves each out), ``hang``
        (``on``: every route but the control plane stops answering), ``stats``.

        Raises:
            ValueError: unknown operation or bad arguments.
        """
        name = op.get("op")
        with self._lock:
            if name == "push":
                fault = Fault.from_dict(op["fault"])
                self._queue.extend([fault] * int(op.get("times", 1)))
            elif name == "at":
                self._at[int(op["n"])] = Fault.from_dict(op["fault"])
            elif name == "when":
                times = op.get("times")
                self._rules.append(
                    _FaultRule(
                        re.compile(str(op["match"])),
                        Fault.from_dict(op["fault"]),
                        None if times is None else int(times),
                    )
                )
            elif name == "clear":
                self._at.clear()
                self._queue.clear()
                self._rules.clear()
            elif name == "reset_stats":
                self.count = self.model_lists = 0
                self.max_inflight = self.inflight
                self.requests.clear()
                self.headers.clear()
            elif name == "latency":
                self.latency = float(op["seconds"])
            elif name == "version":
                self.version = None if op.get("version") is None else str(op["version"])
            elif name == "context":
                self.max_model_len = None if op.get("max_model_len") is None else int(op["max_model_len"])
                self.n_ctx = None if op.get("n_ctx") is None else int(op["n_ctx"])
            elif name == "hang":
                self.hung = bool(op.get("on", True))
            elif name != "stats":
                raise ValueError(f"unknown control op {name!r}")
        return self.stats()

    def stats(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "inflight": self.inflight,
            "max_concurrent": self.max_inflight,
            "pending_faults": len(self._queue) + len(self._at),
            "model_lists": self.model_lists,
        }

    def _pick_fault(self, n: int, body: dict[str, Any]) -> Fault | None:
        fault = self._at.pop(n, None)
        if fault is not None:
            return fault
        if self._queue:
            return self._queue.popleft()
        if self._rules:
            _, last = conversation_turn(body)
            for rule in self._rules:
                if rule.pattern.search(last):
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times <= 0:
                            self._rules.remove(rule)
                    return rule.fault
        return None

    # -- requests ----------------------------------------------------------------------------------

    def dispatch(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Action:
        """Route one parsed HTTP request."""
        path = path.split("?", 1)[0]
        if self.hung and not path.startswith("/_stub/") and path != "/v1/chat/completions":
            return _Action(0.0, None, hang=True)  # chat requests are counted first (_chat)
        if path == "/v1/chat/completions":  # like vLLM: no route without /v1
            if method != "POST":
                return _Action(0.0, _response(405, _error_body(405, "use POST")))
            return self._chat(headers, body)
        if path == "/health" and method == "GET":  # like vLLM: 200, empty body (routers' health checks)
            return _Action(0.0, _response(200, b""))
        if path == "/v1/models" and method == "GET":
            self.model_lists += 1
            entry: dict[str, Any] = {"id": self.model, "object": "model", "created": self._created, "owned_by": "stub"}
            if self.max_model_len is not None:
                entry["max_model_len"] = self.max_model_len
            data = {"object": "list", "data": [entry]}
            return _Action(0.0, _response(200, json.dumps(data).encode()))
        if path == "/props" and method == "GET" and self.n_ctx is not None:
            props = {"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": 1}
            return _Action(0.0, _response(200, json.dumps(props).encode()))
        if path == "/version" and method == "GET" and self.version is not None:
            return _Action(0.0, _response(200, json.dumps({"version": self.version}).encode()))
        if path == "/_stub/stats" and method == "GET":
            return _Action(0.0, _response(200, json.dumps(self.stats()).encode()))
        if path == "/_stub/requests" and method == "GET":
            with self._lock:
                data = {"requests": list(self.requests), "headers": list(self.headers)}
            return _Action(0.0, _response(200, json.dumps(data).encode()))
        if path == "/_stub/control" and method == "POST":
            try:
                result = self.control(json.loads(body))
            except (ValueError, KeyError, TypeError) as exc:
                return _Action(0.0, _response(400, _error_body(400, f"bad control request: {exc}")))
            return _Action(0.0, _response(200, json.dumps(result).encode()))
        return _Action(0.0, _response(404, _error_body(404, f"no route for {method} {path}")))

    def _chat(self, headers: dict[str, str], raw: bytes) -> _Action:
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as exc:
            return _Action(0.0, _response(400, _error_body(400, f"invalid JSON body: {exc}")))
        with self._lock:
            n = self.count
            self.count = n + 1
            self.inflight += 1
            if self.inflight > self.max_inflight:
                self.max_inflight = self.inflight
            if self.record:
                self.requests.append(body)
                self.headers.append(headers)
            fault = self._pick_fault(n, body) if (self._at or self._queue or self._rules) else None
            if self.hung:
                fault = Fault("hang")
        delay = self.latency
        if fault is None or fault.kind == "slow":
            if fault is not None:
                delay += fault.delay
            return _Action(delay, self._render(n, body), counted=True)
        delay += fault.delay
        if fault.kind == "status":
            extra = "" if fault.retry_after is None else f"Retry-After: {fault.retry_after:g}\r\n"
            return _Action(
                delay, _response(fault.status, _error_body(fault.status, fault.message), extra=extra), True
            )
        if fault.kind == "drop":
            return _Action(delay, None, counted=True)
        if fault.kind == "hang":
            return _Action(delay, None, counted=True, hang=True)
        # malformed: a 200 whose JSON body is cut off mid-object.
        bad = b'{"id": "chatcmpl-stub-%d", "object": "chat.completion", "choices": [{"index": 0, "mess' % n
        return _Action(delay, _response(200, bad), counted=True)

    def _render(self, n: int, body: dict[str, Any]) -> bytes:
        try:
            reply = Reply.coerce(self.reply_fn(body))
        except Exception as exc:  # a broken reply function is a server error, visible to the client
            return _response(
                500, _error_body(500, f"stub reply function failed: {type(exc).__name__}: {exc}")
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        prompt_chars = sum(
            len(message_text(m.get("content"))) for m in body.get("messages") or () if isinstance(m, dict)
        )
        prompt_tokens = math.ceil(prompt_chars / 4)
        completion_tokens = math.ceil((len(reply.content) + len(reply.reasoning or "")) / 4)
        # a prefix cache as vLLM's: every message but the last was seen before (earlier turns)
        msgs = [m for m in body.get("messages") or () if isinstance(m, dict)]
        cached_tokens = sum(len(message_text(m.get("content"))) for m in msgs[:-1]) // 4
        data = {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": min(cached_tokens, prompt_tokens)},
                "completion_tokens_details": {"reasoning_tokens": math.ceil(len(reply.reasoning or "") / 4)},
            },
        }
        if not (isinstance(reply.usage, str) and reply.usage == "auto"):
            data["usage"] = reply.usage  # scripted: sent as it is
        return _response(200, json.dumps(data).encode())

    def finished(self) -> None:
        with self._lock:
            self.inflight -= 1


class HttpProtocol(asyncio.Protocol):
    """Minimal HTTP/1.1 server connection: keep-alive, ``Content-Length`` bodies, in-order answers."""

    def __init__(self, core: StubCore, loop: asyncio.AbstractEventLoop, conns: set[HttpProtocol]) -> None:
        self.core = core
        self.loop = loop
        self.conns = conns
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.hanging: _Action | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.conns.discard(self)
        hanging, self.hanging = self.hanging, None
        if hanging is not None and hanging.counted:  # the client gave up on a request that was never answered
            self.core.finished()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._drain()

    def _bad(self, status: int, message: str) -> None:
        if self.transport is not None:
            self.transport.write(_response(status, _error_body(status, message), close=True))
            self.transport.close()
            self.transport = None

    def _drain(self) -> None:
        while self.transport is not None and not self.busy:
            buf = self.buf
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    self._bad(431, "request head too large")
                return
            try:
                lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
                method, path, version = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    key, _, value = line.partition(":")
                    headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                if length < 0:
                    raise ValueError("negative length")
            except ValueError:
                self._bad(400, "malformed request head")
                return
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._bad(411, "chunked request bodies are not supported; send Content-Length")
                return
            if length > _MAX_BODY:
                self._bad(413, "request body too large")
                return
            total = end + 4 + length
            if len(buf) < total:
                return
            body = bytes(buf[end + 4 : total])
            del buf[:total]
            conn = headers.get("connection", "").lower()
            close = conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive")
            action = self.core.dispatch(method, path, headers, body)
            action.close = action.close or close
            if action.hang:  # never answered; this connection reads nothing more
                self.busy = True
                self.hanging = action
                return
            if action.delay > 0:
                self.busy = True
                self.loop.call_later(action.delay, self._deliver_later, action)
                return
            self._deliver(action)

    def _deliver(self, action: _Action) -> None:
        if action.counted:
            self.core.finished()
        transport = self.transport
        if transport is None or transport.is_closing():
            self.transport = None
            return
        if action.payload is None:
            transport.abort()
            self.transport = None
            return
        transport.write(action.payload)
        if action.close:
            transport.close()
            self.transport = None

    def _deliver_later(self, action: _Action) -> None:
        self.busy = False
        self._deliver(action)
        if self.buf:
            self._drain()
