"""A local OpenAI-compatible chat server with scripted replies and injectable faults.

Used by the tests and benchmarks of the model backends, the runner and resume logic; never by an
evaluation run. It listens on the loopback interface only (``127.0.0.1``) and refuses any other host.

Endpoints:

- ``POST /v1/chat/completions``: a non-streaming ``chat.completion`` object (``id``, ``object``,
  ``created``, ``model``, ``choices[0].message.content`` and optionally ``reasoning_content``,
  ``finish_reason``, ``usage``). The reply comes from a *reply function* of the request body; the
  default is a :class:`Script`.
- ``GET /v1/models``: one model (with vLLM's ``max_model_len`` when ``max_model_len`` is given).
- ``GET /health``: HTTP 200 with an empty body, as vLLM answers (what ``vllm-router`` polls).
- ``GET /props``: llama.cpp's ``default_generation_settings.n_ctx``, when ``n_ctx`` is given (else 404).
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
import os
import re
import signal
import subprocess as _subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from studybench.files import read_user_text
from studybench.testing.stub_core import HttpProtocol, StubCore
from studybench.testing.stub_script import (
    DEFAULT_REPLY,
    Fault,
    Reply,
    ReplyFn,
    Script,
    conversation_turn,
)

__all__ = [
    "DEFAULT_REPLY",
    "conversation_turn",
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
    core: StubCore, host: str, port: int, conns: set[HttpProtocol]
) -> asyncio.AbstractServer:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: HttpProtocol(core, loop, conns), _check_host(host), port, backlog=2048, reuse_address=True
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
        self._core: StubCore | None = None
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

    def _start_thread(self, core: StubCore, host: str, port: int, timeout: float) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []
        conns: set[HttpProtocol] = set()

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
        self, script: Script | None, host: str, port: int, latency: float, record: bool, timeout: float,
        context: tuple[int | None, int | None] = (None, None),
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
        for flag, value in zip(("--max-model-len", "--n-ctx"), context, strict=True):
            if value is not None:
                cmd += [flag, str(value)]
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

    def kill(self) -> None:
        """SIGKILL the server process, as a crashed replica dies (subprocess mode only): open
        connections are reset, nothing is answered any more. :meth:`close` still cleans up.

        Raises:
            RuntimeError: the server runs in a thread of this process.
        """
        if self._proc is None:
            raise RuntimeError("kill() needs a subprocess stub server (start_stub_server(subprocess=True))")
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

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
        """``{"count", "inflight", "max_concurrent", "pending_faults", "model_lists"}`` (``model_lists``: ``GET /v1/models`` requests)."""
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

    def hang(self, times: int = 1) -> None:
        """Never answer the next ``times`` chat requests (their connections stay open)."""
        self.push_fault(Fault("hang"), times)

    def hang_all(self, on: bool = True) -> None:
        """Stop (or resume) answering every route but the control plane: chat, ``/v1/models``, ``/health``,
        ``/props``. Requests are accepted and never answered, as by a stuck server."""
        self.control({"op": "hang", "on": on})

    def set_context(self, max_model_len: int | None = None, n_ctx: int | None = None) -> None:
        """Publish a context length: vLLM's ``max_model_len`` in ``/v1/models``, llama.cpp's ``n_ctx`` in
        ``/props`` (``None`` leaves each out)."""
        self.control({"op": "context", "max_model_len": max_model_len, "n_ctx": n_ctx})


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
    max_model_len: int | None = None,
    n_ctx: int | None = None,
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
        max_model_len: the context length ``/v1/models`` publishes, as vLLM does (``None``: none).
        n_ctx: the context length ``GET /props`` publishes, as llama.cpp does (``None``: no ``/props``).

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
        server._start_process(script_obj, host, port, latency, server._record, startup_timeout, (max_model_len, n_ctx))
    else:
        core = StubCore(reply_fn, record=server._record, latency=latency, model=model)
        core.max_model_len, core.n_ctx = max_model_len, n_ctx
        if script_obj is not None:
            core.install(script_obj.faults)
        server._start_thread(core, host, port, startup_timeout)
    return server


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


async def _serve(core: StubCore, host: str, port: int) -> None:
    conns: set[HttpProtocol] = set()
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
    parser.add_argument("--max-model-len", type=int, help="context length published in /v1/models (vLLM)")
    parser.add_argument("--n-ctx", type=int, help="context length published by GET /props (llama.cpp)")
    parser.add_argument("--hang", action="store_true", help="accept every request and never answer (a stuck server)")
    args = parser.parse_args(argv)
    try:
        _check_host(args.host)
        # a regular file only; numbers as Python reads them (a script may serve NaN usage on purpose)
        data = json.loads(read_user_text(args.script)) if args.script else {}
        script = Script.from_dict(data)
    except (ValueError, OSError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.reply is not None:
        script.default = args.reply
    core = StubCore(script, record=args.record, latency=args.latency, model=args.model)
    core.max_model_len, core.n_ctx, core.hung = args.max_model_len, args.n_ctx, args.hang
    core.install(script.faults)
    try:
        asyncio.run(_serve(core, args.host, args.port))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
