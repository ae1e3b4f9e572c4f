"""A local OpenAI-compatible chat server with scripted replies and injectable faults.

Used by the tests and benchmarks of the model backends, the runner and resume logic; never by an
evaluation run. It listens on the loopback interface only (``127.0.0.1``) and refuses any other host.

Endpoints:

- ``POST /v1/chat/completions``: a non-streaming ``chat.completion`` object (``id``, ``object``,
  ``created``, ``model``, ``choices[0].message.content`` and optionally ``reasoning_content``,
  ``finish_reason``, ``usage``). The reply comes from a *reply function* of the request body; the
  default is a :class:`Script`.
- ``GET /v1/models``: one model.
- ``GET /_stub/stats``, ``GET /_stub/requests``, ``POST /_stub/control``: the control plane used by
  :class:`StubServer` when the server runs in a subprocess (statistics, recorded bodies, faults).

Speed: the server is a single asyncio :class:`asyncio.Protocol` with a minimal HTTP/1.1 keep-alive
parser (``Content-Length`` bodies only, no chunked uploads, no pipelining guarantees beyond
in-order answers), which answers well over ten thousand small requests per second on one core. For
benchmarks run it in its own process (``start_stub_server(subprocess=True)`` or
``python -m studybench.testing.stub_server --port 0``), so the client under test gets the other core.

Example (thread mode, for tests)::

    with start_stub_server(Script(turns=["Final Answer: \\\\boxed{1}", "Final Answer: \\\\boxed{2}"])) as srv:
        srv.rate_limit(retry_after=0.05)          # the next request gets HTTP 429 + Retry-After
        ...  # point a client at srv.base_url
        assert srv.count == 2 and srv.requests[1]["seed"] == 7

Command line (prints ``LISTENING http://127.0.0.1:PORT/v1`` once ready)::

    python -m studybench.testing.stub_server --port 0 [--script FILE.json] [--reply TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http
import http.client
import json
import math
import os
import re
import signal
import subprocess as _subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_REPLY",
    "Fault",
    "Reply",
    "ReplyFn",
    "Script",
    "StubServer",
    "main",
    "start_stub_server",
]

#: Hosts the server may bind; everything maps to the IPv4 loopback address.
_ALLOWED_HOSTS = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1"}

#: Default reply template: turn ``i`` (0-based) of a conversation answers ``\boxed{i}``.
DEFAULT_REPLY = "Stub reasoning for turn {turn}.\nFinal Answer: \\boxed{{turn}}"

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024


# --------------------------------------------------------------------------------------------------
# Replies and scripts
# --------------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """One assistant reply.

    Attributes:
        content: ``choices[0].message.content``.
        reasoning: sent as ``choices[0].message.reasoning_content`` (vLLM's reasoning parser) when
            not ``None``.
        finish_reason: ``choices[0].finish_reason``.
    """

    content: str
    reasoning: str | None = None
    finish_reason: str = "stop"

    @classmethod
    def coerce(cls, value: Reply | str | dict[str, Any]) -> Reply:
        """Build a reply from a string (the content), a dict of the fields, or a reply.

        Raises:
            TypeError: for any other type.
        """
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(content=value)
        if isinstance(value, dict):
            return cls(
                content=str(value.get("content", "")),
                reasoning=value.get("reasoning"),
                finish_reason=str(value.get("finish_reason", "stop")),
            )
        raise TypeError(f"cannot make a Reply from {type(value).__name__}")


#: A reply function: the parsed request body in, the reply (or just its content) out.
ReplyFn = Callable[[dict[str, Any]], "Reply | str"]


def _text_of(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def conversation_turn(body: dict[str, Any]) -> tuple[int, str]:
    """``(turn, last_user_text)`` of a chat request: turn = number of user messages - 1 (>= 0)."""
    messages = body.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = _text_of(users[-1].get("content")) if users else ""
    return max(len(users) - 1, 0), last


def _fill(text: str | None, ctx: dict[str, str]) -> str | None:
    """Replace the placeholders ``{turn}``, ``{turn1}``, ``{seed}``, ``{model}`` (plain text, not format)."""
    if text is None or "{" not in text:
        return text
    for key, val in ctx.items():
        text = text.replace("{" + key + "}", val)
    return text


@dataclass
class Script:
    """A declarative reply function (JSON-serialisable, so it also drives a subprocess server).

    The reply to a request is chosen as follows, with ``turn`` = number of user messages - 1:

    1. the first of ``rules`` whose ``match`` regex is found in the last user message;
    2. else ``turns[turn]`` (the last entry repeats for later turns) when ``turns`` is non-empty;
    3. else ``default``.

    A chosen reply is a string (the content) or a dict with ``content``, ``reasoning``,
    ``finish_reason``. Placeholders ``{turn}`` (0-based), ``{turn1}`` (1-based), ``{seed}`` and
    ``{model}`` are replaced by plain substitution, so LaTeX braces need no escaping:
    ``"Final Answer: \\\\boxed{{turn1}}"`` answers ``\\boxed{1}`` on the first turn. When ``think`` is set,
    the content is prefixed with ``<think>THINK</think>\\n``; when ``reasoning`` is set and the reply
    has none, it is sent as ``reasoning_content``.

    ``faults`` are installed when a server starts with this script: each a :class:`Fault` dict plus
    one of ``"at": N`` (request number N, 0-based), ``"match": REGEX`` (requests whose last user
    message matches; optional ``"times"``), or neither (a queue for the next requests; optional
    ``"times"``).
    """

    turns: list[str | dict[str, Any]] = field(default_factory=list)
    rules: list[dict[str, Any]] = field(default_factory=list)
    default: str = DEFAULT_REPLY
    think: str | None = None
    reasoning: str | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._compiled = [(re.compile(str(r["match"])), r["reply"]) for r in self.rules]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Script:
        """Build a script from its JSON form (the dataclass fields).

        Raises:
            ValueError: unknown keys or a non-object.
        """
        if not isinstance(data, dict):
            raise ValueError("a stub script must be a JSON object")
        known = {"turns", "rules", "default", "think", "reasoning", "faults"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown stub script keys: {sorted(unknown)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (inverse of :meth:`from_dict`)."""
        return {
            "turns": self.turns,
            "rules": self.rules,
            "default": self.default,
            "think": self.think,
            "reasoning": self.reasoning,
            "faults": self.faults,
        }

    def __call__(self, body: dict[str, Any]) -> Reply:
        turn, last = conversation_turn(body)
        chosen: Any = None
        for pattern, reply in self._compiled:
            if pattern.search(last):
                chosen = reply
                break
        if chosen is None:
            chosen = self.turns[min(turn, len(self.turns) - 1)] if self.turns else self.default
        reply = Reply.coerce(chosen)
        ctx = {
            "turn": str(turn),
            "turn1": str(turn + 1),
            "seed": str(body.get("seed")),
            "model": str(body.get("model")),
        }
        content = _fill(reply.content, ctx) or ""
        reasoning = _fill(reply.reasoning, ctx)
        if self.think is not None:
            content = f"<think>{_fill(self.think, ctx)}</think>\n{content}"
        if reasoning is None and self.reasoning is not None:
            reasoning = _fill(self.reasoning, ctx)
        return Reply(content=content, reasoning=reasoning, finish_reason=reply.finish_reason)


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------

_FAULT_KINDS = ("status", "slow", "drop", "malformed")


@dataclass
class Fault:
    """A fault to inject into one request.

    Attributes:
        kind: ``"status"`` (answer HTTP ``status`` with an OpenAI-style error body, with a
            ``Retry-After: retry_after`` header when set), ``"slow"`` (answer normally after
            ``delay`` seconds), ``"drop"`` (close the connection without a response, after
            ``delay`` seconds), ``"malformed"`` (HTTP 200 with a truncated JSON body).
        status: HTTP status for ``"status"``.
        retry_after: seconds for the ``Retry-After`` header (``"status"`` only); may be fractional.
        delay: seconds to wait before acting (all kinds; the point of ``"slow"``).
        message: error message for ``"status"``.

    Raises:
        ValueError: an unknown kind or a negative delay.
    """

    kind: str
    status: int = 500
    retry_after: float | None = None
    delay: float = 0.0
    message: str = "injected fault"

    def __post_init__(self) -> None:
        if self.kind not in _FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {_FAULT_KINDS}")
        if self.delay < 0:
            raise ValueError("fault delay must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "retry_after": self.retry_after,
            "delay": self.delay,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fault:
        keys = ("kind", "status", "retry_after", "delay", "message")
        return cls(**{k: data[k] for k in keys if k in data})


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


class _Core:
    """Request accounting, fault selection and reply rendering (runs on the server's event loop).

    Fault tables are guarded by a lock because thread-mode callers edit them from the test thread.
    """

    def __init__(self, reply_fn: ReplyFn, *, record: bool, latency: float, model: str) -> None:
        self.reply_fn = reply_fn
        self.record = record
        self.latency = latency
        self.model = model
        self.count = 0
        self.inflight = 0
        self.max_inflight = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._at: dict[int, Fault] = {}
        self._queue: deque[Fault] = deque()
        self._rules: list[_FaultRule] = []
        self._created = int(time.time())

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
        (``seconds``), ``stats``.

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
                self.count = 0
                self.max_inflight = self.inflight
                self.requests.clear()
                self.headers.clear()
            elif name == "latency":
                self.latency = float(op["seconds"])
            elif name != "stats":
                raise ValueError(f"unknown control op {name!r}")
        return self.stats()

    def stats(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "inflight": self.inflight,
            "max_concurrent": self.max_inflight,
            "pending_faults": len(self._queue) + len(self._at),
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
        if path in ("/v1/chat/completions", "/chat/completions"):
            if method != "POST":
                return _Action(0.0, _response(405, _error_body(405, "use POST")))
            return self._chat(headers, body)
        if path in ("/v1/models", "/models") and method == "GET":
            data = {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": self._created, "owned_by": "stub"}],
            }
            return _Action(0.0, _response(200, json.dumps(data).encode()))
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
            len(_text_of(m.get("content"))) for m in body.get("messages") or () if isinstance(m, dict)
        )
        prompt_tokens = math.ceil(prompt_chars / 4)
        completion_tokens = math.ceil((len(reply.content) + len(reply.reasoning or "")) / 4)
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
            },
        }
        return _response(200, json.dumps(data).encode())

    def finished(self) -> None:
        with self._lock:
            self.inflight -= 1


class _HttpProtocol(asyncio.Protocol):
    """Minimal HTTP/1.1 server connection: keep-alive, ``Content-Length`` bodies, in-order answers."""

    def __init__(self, core: _Core, loop: asyncio.AbstractEventLoop, conns: set[_HttpProtocol]) -> None:
        self.core = core
        self.loop = loop
        self.conns = conns
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.conns.discard(self)

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


def _check_host(host: str) -> str:
    """The address to bind for ``host``.

    Raises:
        ValueError: ``host`` is not the loopback interface.
    """
    try:
        return _ALLOWED_HOSTS[host]
    except KeyError:
        raise ValueError(f"the stub server binds 127.0.0.1 only; refusing host {host!r}") from None


async def _create_server(
    core: _Core, host: str, port: int, conns: set[_HttpProtocol]
) -> asyncio.AbstractServer:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: _HttpProtocol(core, loop, conns), _check_host(host), port, backlog=2048, reuse_address=True
    )


def _make_reply_fn(script: Script | dict[str, Any] | ReplyFn | str | None) -> tuple[ReplyFn, Script | None]:
    if script is None:
        s = Script()
        return s, s
    if isinstance(script, str):
        s = Script(default=script)
        return s, s
    if isinstance(script, dict):
        s = Script.from_dict(script)
        return s, s
    if isinstance(script, Script):
        return script, script
    if callable(script):
        return script, None
    raise TypeError(f"unsupported script type {type(script).__name__}")


# --------------------------------------------------------------------------------------------------
# Public handle
# --------------------------------------------------------------------------------------------------


class StubServer:
    """A running stub server (thread or subprocess mode); also a context manager that closes it.

    Attributes:
        base_url: ``http://127.0.0.1:PORT/v1``, for an OpenAI client's ``base_url``.
        host, port: where it listens.
        mode: ``"thread"`` or ``"subprocess"``.

    Build one with :func:`start_stub_server`.
    """

    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self.mode = "thread"
        self._core: _Core | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._proc: _subprocess.Popen[str] | None = None
        self._script_file: str | None = None
        self._record = True
        self._closed = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle ---------------------------------------------------------------------------------

    def _start_thread(self, core: _Core, host: str, port: int, timeout: float) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []
        conns: set[_HttpProtocol] = set()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                server = loop.run_until_complete(_create_server(core, host, port, conns))
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            self.port = server.sockets[0].getsockname()[1]
            self._loop = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                server.close()
                for conn in list(conns):
                    if conn.transport is not None:
                        conn.transport.abort()
                loop.run_until_complete(asyncio.sleep(0))
                loop.close()

        self._core = core
        self.mode = "thread"
        self._thread = threading.Thread(target=run, name=f"stub-server-{id(self):x}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("stub server thread did not start")
        if failure:
            raise failure[0]

    def _start_process(
        self, script: Script | None, host: str, port: int, latency: float, record: bool, timeout: float
    ) -> None:
        self.mode = "subprocess"
        cmd = [sys.executable, "-m", "studybench.testing.stub_server", "--host", host, "--port", str(port)]
        if script is not None:
            fd, path = tempfile.mkstemp(prefix="stub-script-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(script.to_dict(), fh)
            self._script_file = path
            cmd += ["--script", path]
        if latency:
            cmd += ["--latency", repr(latency)]
        if record:
            cmd += ["--record"]
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._proc = _subprocess.Popen(cmd, stdout=_subprocess.PIPE, text=True, env=env)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        first = line[0].strip() if line else ""
        m = re.fullmatch(r"LISTENING http://([\d.]+):(\d+)/v1", first)
        if not m:
            self.close()
            raise RuntimeError(f"stub server process did not start (first line: {first!r})")
        self.host, self.port = m.group(1), int(m.group(2))

    def close(self) -> None:
        """Stop the server (idempotent). Open connections are dropped."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(10)
                except _subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
        if self._script_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._script_file)

    def __enter__(self) -> StubServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- control plane -----------------------------------------------------------------------------

    def _http(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            body = None if payload is None else json.dumps(payload)
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read())
            if resp.status != 200:
                raise ValueError(data.get("error", {}).get("message", f"HTTP {resp.status}"))
            return data
        finally:
            conn.close()

    def control(self, op: dict[str, Any]) -> dict[str, Any]:
        """Apply a raw control operation (see the ``/_stub/control`` ops); returns the statistics."""
        if self._core is not None:
            return self._core.control(op)
        return self._http("POST", "/_stub/control", op)

    def stats(self) -> dict[str, Any]:
        """``{"count", "inflight", "max_concurrent", "pending_faults"}``."""
        return self.control({"op": "stats"})

    @property
    def count(self) -> int:
        """Number of chat-completion requests received (faulted ones included)."""
        if self._core is not None:
            return self._core.count
        return int(self.stats()["count"])

    @property
    def max_concurrent(self) -> int:
        """Most chat-completion requests in flight at once (received, not yet answered)."""
        return int(self.stats()["max_concurrent"])

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests received, in arrival order.

        Raises:
            RuntimeError: the server was started with ``record=False``.
        """
        if not self._record:
            raise RuntimeError("request recording is off (start_stub_server(record=True))")
        if self._core is not None:
            with self._core._lock:
                return list(self._core.requests)
        return list(self._http("GET", "/_stub/requests")["requests"])

    @property
    def headers(self) -> list[dict[str, str]]:
        """The HTTP headers (lower-case names) of each recorded chat-completion request."""
        if not self._record:
            raise RuntimeError("request recording is off (start_stub_server(record=True))")
        if self._core is not None:
            with self._core._lock:
                return list(self._core.headers)
        return list(self._http("GET", "/_stub/requests")["headers"])

    def reset_stats(self) -> None:
        """Zero the request count and maximum concurrency and forget recorded requests."""
        self.control({"op": "reset_stats"})

    def set_latency(self, seconds: float) -> None:
        """Delay every reply by ``seconds`` (makes requests overlap, e.g. for concurrency tests)."""
        self.control({"op": "latency", "seconds": seconds})

    def push_fault(self, fault: Fault, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` requests (after any earlier queued faults)."""
        self.control({"op": "push", "fault": fault.to_dict(), "times": times})

    def fault_at(self, n: int, fault: Fault) -> None:
        """Inject ``fault`` into request number ``n`` (0-based count since start or reset)."""
        self.control({"op": "at", "n": n, "fault": fault.to_dict()})

    def fault_when(self, match: str, fault: Fault, times: int | None = None) -> None:
        """Inject ``fault`` into every request whose last user message matches regex ``match``
        (at most ``times`` times; ``None`` = always)."""
        self.control({"op": "when", "match": match, "fault": fault.to_dict(), "times": times})

    def clear_faults(self) -> None:
        """Forget all pending faults."""
        self.control({"op": "clear"})

    # Shortcuts for the usual faults (each queues ``times`` faults).

    def fail(self, status: int = 500, times: int = 1, retry_after: float | None = None) -> None:
        """Answer the next ``times`` requests with HTTP ``status``."""
        self.push_fault(Fault("status", status=status, retry_after=retry_after), times)

    def rate_limit(self, retry_after: float | None = 0.0, times: int = 1) -> None:
        """Answer the next ``times`` requests with HTTP 429 and ``Retry-After: retry_after``."""
        self.push_fault(Fault("status", status=429, retry_after=retry_after, message="rate limited"), times)

    def slow(self, seconds: float, times: int = 1) -> None:
        """Answer the next ``times`` requests normally but only after ``seconds``."""
        self.push_fault(Fault("slow", delay=seconds), times)

    def drop(self, times: int = 1) -> None:
        """Close the connection of the next ``times`` requests without answering."""
        self.push_fault(Fault("drop"), times)

    def malformed(self, times: int = 1) -> None:
        """Answer the next ``times`` requests with HTTP 200 and a truncated JSON body."""
        self.push_fault(Fault("malformed"), times)


def start_stub_server(
    script: Script | dict[str, Any] | ReplyFn | str | None = None,
    *,
    subprocess: bool = False,
    host: str = "127.0.0.1",
    port: int = 0,
    latency: float = 0.0,
    record: bool | None = None,
    model: str = "stub",
    startup_timeout: float = 30.0,
) -> StubServer:
    """Start a stub server and return its handle (use it as a context manager, or call ``close()``).

    Args:
        script: the replies: a :class:`Script`, its dict form, a plain reply template string
            (``Script(default=...)``), a reply function of the request body (thread mode only), or
            ``None`` for the default script (turn ``i`` answers ``Final Answer: \\boxed{i}``).
        subprocess: run the server in its own Python process (for benchmarks) instead of a daemon
            thread of this process (for tests).
        host: must be ``"127.0.0.1"`` (or ``"localhost"``).
        port: TCP port; 0 picks a free one.
        latency: seconds added before every reply.
        record: keep every request body and headers (default: on in thread mode, off in subprocess
            mode, where it costs a little throughput).
        model: the model id reported by ``/v1/models`` (and in replies when the request has none).
        startup_timeout: seconds to wait for the server to listen.

    Raises:
        ValueError: a non-loopback ``host``.
        TypeError: a reply function with ``subprocess=True``.
        RuntimeError: the server did not start.
    """
    _check_host(host)
    reply_fn, script_obj = _make_reply_fn(script)
    server = StubServer()
    server._record = (not subprocess) if record is None else record
    if subprocess:
        if script_obj is None:
            raise TypeError("a subprocess stub server needs a Script (or dict / str), not a function")
        server._start_process(script_obj, host, port, latency, server._record, startup_timeout)
    else:
        core = _Core(reply_fn, record=server._record, latency=latency, model=model)
        if script_obj is not None:
            core.install(script_obj.faults)
        server._start_thread(core, host, port, startup_timeout)
    return server


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


async def _serve(core: _Core, host: str, port: int) -> None:
    conns: set[_HttpProtocol] = set()
    server = await _create_server(core, host, port, conns)
    bound = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    print(f"LISTENING http://127.0.0.1:{bound}/v1", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        for conn in list(conns):
            if conn.transport is not None:
                conn.transport.abort()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m studybench.testing.stub_server``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m studybench.testing.stub_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1", help="must be 127.0.0.1 (default)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument(
        "--script",
        type=Path,
        help="JSON file with a Script (turns, rules, default, think, reasoning, faults)",
    )
    parser.add_argument("--reply", help="reply template for every request (overrides the script's default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every reply")
    parser.add_argument("--record", action="store_true", help="record request bodies for GET /_stub/requests")
    parser.add_argument("--model", default="stub", help="model id for /v1/models")
    args = parser.parse_args(argv)
    try:
        _check_host(args.host)
        data = json.loads(args.script.read_text(encoding="utf-8")) if args.script else {}
        script = Script.from_dict(data)
    except (ValueError, OSError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.reply is not None:
        script.default = args.reply
    core = _Core(script, record=args.record, latency=args.latency, model=args.model)
    core.install(script.faults)
    try:
        asyncio.run(_serve(core, args.host, args.port))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
