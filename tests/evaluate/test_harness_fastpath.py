"""The harness's fast path gives the results of the reference path (issue 27).

Issue 27 cut the harness's CPU per turn (``bench/harness_bench.py`` measures it; no test here is
timed). What these tests hold fixed instead:

- the lean HTTP client and the ``openai`` SDK give the same :class:`ChatResult` and send the same
  request for every kind of reply and failure of a server; the SDK is off the request path unless
  asked for (``http_client``, ``$STUDYBENCH_HTTP_CLIENT``) or a proxy applies;
- per request, no asyncio task of its own (the hung-server rule goes through the pool), and the
  secrets' redaction forms are worked out once per backend, not per reply (counted);
- every fast encoder and reader gives exactly what its reference gives: the conversation digest
  (every code point), the strict JSON reader (generated and mutated documents), the redactor;
- a run's manifest from before the HTTP client was recorded resumes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studybench import secrets as secrets_module
from studybench.files import InputFileError, parse_json
from studybench.files.strict_json import _parse_json_strictly
from studybench.models.base import PRESETS, ChatRequest, ChatResult
from studybench.models.openai_backend import HTTP_CLIENT_ENV, OpenAIBackend
from studybench.protocol import messages_digest, reference_messages_digest
from studybench.secrets import Redactor, redact, redact_model_text, redact_obj, redact_text
from studybench.testing import Fault, Reply, Script, start_stub_server

pytestmark = pytest.mark.timeout(120)

KEY = "sk-fast-Z9yXwV8uT7sR6qP5oN4m"


def _request(i: int = 0, text: str = "q") -> ChatRequest:
    return ChatRequest([{"role": "system", "content": "s"}, {"role": "user", "content": f"{text} {i}"}], i, None, 0)  # type: ignore[arg-type]


def _run(backend: OpenAIBackend, requests: list[ChatRequest]) -> list[ChatResult]:
    async def go() -> list[ChatResult]:
        try:
            return list(await asyncio.gather(*(backend.complete(r) for r in requests)))
        finally:
            await backend.aclose()

    return asyncio.run(go())


def _comparable(r: ChatResult) -> dict[str, Any]:
    extra = {k: v for k, v in (r.extra or {}).items() if k not in ("queue_s",)}
    return {"completion": r.completion, "reasoning": r.reasoning, "finish_reason": r.finish_reason, "usage": r.usage,
            "error": r.error, "attempts": r.attempts, "extra": extra}


# -- the two HTTP clients ---------------------------------------------------------------------------------


SERVER_CASES: list[tuple[str, list[Fault], int]] = [
    ("ok", [], 0),
    *[(f"HTTP {s}", [Fault("status", status=s, message=f"refused {s} with key {KEY}")], 0)
      for s in (400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504)],
    ("429 then ok", [Fault("status", status=429, retry_after=0.01)], 1),
    ("500 then ok", [Fault("status", status=500)], 1),
    ("dropped", [Fault("drop")], 0),
    ("dropped then ok", [Fault("drop")], 1),
    ("malformed", [Fault("malformed")], 0),
    ("malformed then ok", [Fault("malformed")], 1),
    ("timeout", [Fault("slow", delay=1.0)], 0),
    ("timeout then ok", [Fault("slow", delay=1.0)], 1),
]


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("SB_FAST_KEY", KEY)
    monkeypatch.delenv(HTTP_CLIENT_ENV, raising=False)
    yield "SB_FAST_KEY"


@pytest.mark.parametrize("name,faults,retries", SERVER_CASES, ids=[c[0] for c in SERVER_CASES])
def test_both_clients_give_the_same_result_and_send_the_same_request(name: str, faults: list[Fault], retries: int,
                                                                     key_env: str) -> None:
    script = Script(default=f"<think>t</think>Echo {KEY} and {base64.b64encode(KEY.encode()).decode()}. Final Answer: \\boxed{{1}}",
                    reasoning="r")
    seen: dict[str, Any] = {}
    for client in ("lean", "sdk"):
        with start_stub_server(script) as srv:
            for f in faults:
                srv.push_fault(f)
            be = OpenAIBackend("stub", srv.base_url, PRESETS["paper"], api_key_env=key_env, max_retries=retries,
                               backoff_initial=0.001, backoff_max=0.02, request_timeout=0.4, http_client=client)
            assert be.http_client == client and be.describe()["http_client"] == client
            (res,) = _run(be, [_request(3)])
            seen[client] = (_comparable(res), srv.requests, [h.get("authorization") for h in srv.headers])
    assert seen["lean"] == seen["sdk"]
    result = seen["lean"][0]
    assert KEY not in json.dumps(result)  # redacted the same way, base64 form included


def test_the_sdk_is_off_the_request_path_unless_asked_for(key_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    posts: list[int] = []
    real = openai.AsyncOpenAI.post

    async def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        posts.append(1)
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "post", counting)
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with start_stub_server() as srv:
        be = OpenAIBackend("stub", srv.base_url, api_key_env=key_env)
        assert be.http_client == "lean"
        assert all(r.error is None for r in _run(be, [_request(i) for i in range(5)]))
        assert posts == []  # before: one SDK post per request
        monkeypatch.setenv(HTTP_CLIENT_ENV, "sdk")
        assert all(r.error is None for r in _run(OpenAIBackend("stub", srv.base_url, api_key_env=key_env), [_request(1)]))
        assert len(posts) == 1
        monkeypatch.setenv(HTTP_CLIENT_ENV, "lean")
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # a proxy applies: the SDK honours it
        assert OpenAIBackend("stub", srv.base_url).http_client == "sdk"
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert OpenAIBackend("stub", srv.base_url).http_client == "lean"
    with pytest.raises(ValueError, match="http_client"):
        OpenAIBackend("stub", srv.base_url, http_client="curl")


def test_a_key_no_header_can_carry_fails_the_turn_without_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_FAST_KEY", "sk-line\r\nX-Injected: yes")
    with start_stub_server() as srv:
        (res,) = _run(OpenAIBackend("stub", srv.base_url, api_key_env="SB_FAST_KEY", http_client="lean"), [_request()])
        assert srv.count == 0
    assert res.error is not None and res.error.startswith("ValueError after 1 attempt") and "X-Injected" not in res.error


def test_no_task_per_request_and_redaction_forms_worked_out_once(key_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every request ran in a task of its own (so that a hung server could end it), and every
    reply worked out the secrets' forms again (known_secrets, per field)."""
    calls: list[int] = []
    real = secrets_module.known_secrets

    def counting(values: Any) -> tuple[str, ...]:
        calls.append(1)
        return real(values)

    n = 24
    with start_stub_server(Script(default="Final Answer: \\boxed{1}")) as srv:
        be = OpenAIBackend("stub", srv.base_url, api_key_env=key_env, liveness_timeout=20.0)
        monkeypatch.setattr(secrets_module, "known_secrets", counting)
        tasks: list[int] = []

        async def go() -> list[ChatResult]:
            loop = asyncio.get_running_loop()

            def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
                tasks.append(1)
                return asyncio.Task(coro, loop=loop, **kw)

            await be.complete(_request(-1))  # the pools are built, the probe loop started
            loop.set_task_factory(factory)
            try:
                return [await be.complete(_request(i)) for i in range(n)]
            finally:
                loop.set_task_factory(None)
                await be.aclose()

        results = asyncio.run(go())
    assert all(r.error is None for r in results)
    assert len(tasks) <= 2  # at most a liveness probe loop restarted; never one per request
    assert calls == []


# -- fast encoders and readers give the reference's result ----------------------------------------------


def test_the_conversation_digest_is_the_reference_digest_for_every_code_point() -> None:
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(cps), 8192):
        text = "".join(map(chr, cps[i:i + 8192]))
        msgs = [{"role": "system", "content": text}, {"content": text[::-1], "role": "user", "name": text[:40]}]
        assert messages_digest(msgs) == reference_messages_digest(msgs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=8), st.one_of(st.text(), st.none(), st.integers(), st.floats(allow_nan=False)),
                                max_size=4), max_size=5))
def test_the_conversation_digest_is_the_reference_digest_for_any_messages(msgs: list[dict[str, Any]]) -> None:
    def outcome(digest: Any) -> Any:
        try:
            return digest(msgs)
        except ValueError as e:  # an infinity: JSON has none
            return type(e)

    assert outcome(messages_digest) == outcome(reference_messages_digest)


def test_the_digest_of_a_lone_surrogate_takes_the_reference_path() -> None:
    msgs = [{"role": "user", "content": "a\ud800b"}]
    assert messages_digest(msgs) == reference_messages_digest(msgs)


def _outcome(text: bytes | str, fast: bool) -> Any:
    try:
        value = parse_json(text, "f.jsonl", line=3) if fast else _parse_json_strictly(text, "f.jsonl", line=3)
    except InputFileError as e:
        return ("refused", str(e))
    return ("ok", repr(value), repr(_types(value)))


def _types(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _types(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_types(x) for x in v]
    return type(v).__name__


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSON, st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), st.sampled_from(["flip", "drop", "dup", "insert"]),
                                 st.sampled_from(list(b'0123456789eE.-+"\\{}[],:nNaItfu \xff\xed\xa0\x80'))), max_size=3))
def test_the_strict_reader_fast_path_gives_the_reference_result(doc: Any, edits: list[tuple[int, str, int]]) -> None:
    text = bytearray(json.dumps(doc, ensure_ascii=random.random() < 0.5).encode("utf-8", "surrogatepass"))
    for pos, op, byte in edits:
        if not text:
            break
        i = pos % len(text)
        if op == "flip":
            text[i] = byte
        elif op == "drop":
            del text[i]
        elif op == "dup":
            text[i:i] = text[i:i + 1]
        else:
            text[i:i] = bytes([byte])
    data = bytes(text)
    assert _outcome(data, True) == _outcome(data, False)
    try:
        as_str = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    assert _outcome(as_str, True) == _outcome(as_str, False)


@pytest.mark.parametrize("text", [
    b'{"n": 9223372036854775807}', b'{"n": 9223372036854775808}', b'{"n": -9223372036854775809}', b'{"n": 18446744073709551615}',
    b'{"x": 1e308}', b'{"x": 1e309}', b'{"x": NaN}', b'{"x": -Infinity}', b'\xef\xbb\xbf{"a": 1}', b'{"s": "\\ud800"}',
    b'{"a": 1, "a": 2}', b'[' * 3000 + b']' * 3000, b'{"x": 0.1234567890123456789}', b'{"a":\t1}\n', b'',
])
def test_the_strict_reader_fast_path_on_the_edges(text: bytes) -> None:
    assert _outcome(text, True) == _outcome(text, False)


def _secret_texts(secret: str) -> list[str]:
    raw = secret.encode()
    texts = [f"plain {secret} end", f"url {quote(secret, safe='')} end", "x" * 3 + secret + secret]
    for pad in range(3):  # the key inside a longer base64 blob, at each byte offset
        blob = base64.b64encode(b"u" * pad + b":" + raw + b"tail").decode()
        texts += [f"Basic {blob}", f"id={quote(blob.replace('+', '-').replace('/', '_'), safe='')}"]
    return texts + ["Bearer abcdefghij0123456789xyz", "sk-" + "a1" * 15, "stop", "prompt_tokens", ""]


@pytest.mark.parametrize("secrets", [(KEY,), (KEY, "pw-0123456789"), ("1234",), ("short", KEY[::-1]), ()])
def test_the_redactor_gives_what_the_functions_give(secrets: tuple[str, ...]) -> None:
    red = Redactor(secrets)
    texts = [t for s in secrets or ("none-at-all",) for t in _secret_texts(s)]
    for text in texts:
        assert red.redact(text) == redact(text, secrets)
        assert red.model_text(text) == redact_model_text(text, secrets)
        assert red.text(text) == redact_text(text, secrets)
        assert red.text(text) == redact_text(text, secrets)  # remembered: the same again
    obj = {"a": texts, texts[0]: [1, None, texts[-2]]}
    assert red.obj(obj, shapes=True) == redact_obj(obj, secrets, shapes=True)
    assert red.obj(obj) == redact_obj(obj, secrets)


# -- resuming ----------------------------------------------------------------------------------------------


def test_a_run_recorded_before_the_http_client_resumes_with_either_client(tmp_path: Path, key_env: str) -> None:
    from studybench.store import OPERATIONAL_BACKEND_KEYS, Manifest

    assert "http_client" in OPERATIONAL_BACKEND_KEYS
    lean = OpenAIBackend("m", "http://127.0.0.1:9/v1", PRESETS["paper"], http_client="lean").describe()
    sdk = OpenAIBackend("m", "http://127.0.0.1:9/v1", PRESETS["paper"], http_client="sdk").describe()
    old = {k: v for k, v in lean.items() if k != "http_client"}  # a manifest written before issue 27

    class _Split:
        sha256 = "x"

    def manifest(backend: dict[str, Any]) -> Manifest:
        return Manifest.model_construct(backend=backend, split=_Split(), artefacts={})

    for a, b in ((old, lean), (lean, sdk), (sdk, old)):
        assert manifest(a).resume_conflicts(manifest(b)) == []
    assert manifest(old).resume_conflicts(manifest({**lean, "model": "other"})) == ["backend.model: 'm' -> 'other'"]


def test_a_reply_function_with_a_400_digit_usage_is_read_the_same_by_both_clients(key_env: str) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        return Reply("Final Answer: \\boxed{1}", usage={"prompt_tokens": 10**400, "completion_tokens": 5, "id": 2**64})

    out = []
    for client in ("lean", "sdk"):
        with start_stub_server(reply) as srv:
            (res,) = _run(OpenAIBackend("m", srv.base_url, api_key_env=key_env, http_client=client, max_retries=0), [_request()])
            out.append(_comparable(res))
    assert out[0] == out[1] and out[0]["error"] is None and out[0]["usage"] == {"completion_tokens": 5}


# -- the concurrency bound ---------------------------------------------------------------------------------


def test_slots_bound_fifo_and_cancellation_and_cost_does_not_grow_with_waiters() -> None:
    """asyncio.Semaphore scans its waiters on every release (Python 3.11-3.13): with 1,440 chains waiting on
    a generation pass's bound, that scan was the largest single cost at concurrency 1,024. Slots does the
    same job (at most n holders, first come first served, cancellation-safe) touching O(1) waiters each time."""
    from studybench.models.slots import Slots

    async def go() -> None:
        slots = Slots(2)
        order: list[int] = []
        inside = 0
        peak = 0

        async def worker(i: int) -> None:
            nonlocal inside, peak
            async with slots:
                inside += 1
                peak = max(peak, inside)
                order.append(i)
                await asyncio.sleep(0)
                inside -= 1

        tasks = [asyncio.ensure_future(worker(i)) for i in range(50)]
        await asyncio.sleep(0)
        tasks[10].cancel()  # a waiter cancelled while it waits gives up its place
        await asyncio.gather(*tasks, return_exceptions=True)
        assert peak == 2 and order == [i for i in range(50) if i != 10]
        assert not slots.locked()
        # handed a slot, then cancelled before it ran: the slot is passed on, never lost
        await slots.acquire()
        await slots.acquire()
        late = asyncio.ensure_future(slots.acquire())
        other = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        slots.release()  # goes to `late`
        late.cancel()
        await asyncio.gather(late, return_exceptions=True)
        await asyncio.wait_for(other, 5)  # got the slot `late` gave up
        slots.release()
        slots.release()
        assert not slots.locked()

        # work per release does not grow with the waiters: count the futures inspected
        class Counting(asyncio.Future):  # type: ignore[type-arg]
            checks = 0

            def done(self) -> bool:
                Counting.checks += 1
                return super().done()

        loop = asyncio.get_running_loop()
        for n in (100, 800):
            Counting.checks = 0
            real = loop.create_future
            loop.create_future = lambda: Counting(loop=loop)  # type: ignore[method-assign]
            try:
                s = Slots(1)
                await s.acquire()
                waiters = [asyncio.ensure_future(s.acquire()) for _ in range(n)]
                await asyncio.sleep(0)
                for _ in range(n):  # many releases before the woken run, as when many replies arrive at once
                    s.release()
                await asyncio.gather(*waiters)
            finally:
                loop.create_future = real  # type: ignore[method-assign]
            assert Counting.checks <= 3 * n, (n, Counting.checks)  # linear in the waiters, not quadratic

    asyncio.run(go())


@pytest.mark.parametrize("url", ["ftp://[::1", "http://[::1", "http://h:abc/v1", "http://h:99999/v1", "ftp://h/v1",
                                 "h:8000/v1", "http:///v1", "://", "http://[::1]:8000/v1"])
def test_a_url_the_lean_client_cannot_take_is_left_to_the_sdk_never_an_exception(url: str) -> None:
    """Before the fix (in this branch): ``ftp://[::1`` raised ValueError from the proxy check when the backend was built."""
    from studybench.models.http11 import proxy_for, sendable

    proxy_for(url)
    be = OpenAIBackend("m", url)
    assert be.http_client == ("lean" if url == "http://[::1]:8000/v1" else "sdk")
    assert sendable(url) == (be.http_client == "lean")
