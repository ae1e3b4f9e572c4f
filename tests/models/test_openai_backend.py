"""OpenAIBackend against the local stub server: payload, retries, failures, concurrency, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from _support import deadline

from studybench.models.base import (
    MIN_COMPLETION_TOKENS,
    PRESETS,
    ChatBackend,
    ChatRequest,
    ChatResult,
    SamplingParams,
)
from studybench.models.openai_backend import OpenAIBackend, estimate_prompt_tokens
from studybench.testing import Fault, Script, StubServer, start_stub_server

pytestmark = pytest.mark.timeout(30)

SYSTEM = {"role": "system", "content": "You are a careful physics assistant."}
QUESTIONS = [
    "A block of mass 2 kg slides down a frictionless incline. Find its acceleration.",
    "Now the incline has friction coefficient 0.1. Find the new acceleration.",
    "How long does it take to slide 3 m from rest?",
]


def _request(messages: list[dict[str, Any]], seed: int | None = 7, turn: int = 0) -> ChatRequest:
    return ChatRequest(messages=messages, seed=seed, ref=None, turn_index=turn)  # type: ignore[arg-type]


def _complete(backend: OpenAIBackend, messages: list[dict[str, Any]], seed: int | None = 7) -> ChatResult:
    async def go() -> ChatResult:
        try:
            return await backend.complete(_request(messages, seed))
        finally:
            await backend.aclose()

    return asyncio.run(go())


def _fast(stub: StubServer, sampling: SamplingParams | None = None, **kw: Any) -> OpenAIBackend:
    kw.setdefault("backoff_initial", 0.001)
    kw.setdefault("backoff_max", 0.05)
    kw.setdefault("request_timeout", 5.0)
    return OpenAIBackend("stub-model", stub.base_url, sampling, **kw)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with start_stub_server() as server:
        yield server


def test_backend_satisfies_protocol(stub: StubServer) -> None:
    assert isinstance(_fast(stub), ChatBackend)


def test_multi_turn_script_round_trip() -> None:
    script = Script(
        turns=[
            "Turn one.\nFinal Answer: \\boxed{9.8}",
            "Final Answer: \\boxed{8.8}",
            "Final Answer: \\boxed{{turn1}}",
        ],
        think="scratch work {turn}",
        reasoning="reasoning for turn {turn}",
    )
    with start_stub_server(script) as server:
        backend = _fast(server, PRESETS["paper"])
        expected = [
            "<think>scratch work 0</think>\nTurn one.\nFinal Answer: \\boxed{9.8}",
            "<think>scratch work 1</think>\nFinal Answer: \\boxed{8.8}",
            "<think>scratch work 2</think>\nFinal Answer: \\boxed{3}",
        ]

        async def conversation() -> list[ChatResult]:
            messages: list[dict[str, Any]] = [SYSTEM]
            results = []
            for i, question in enumerate(QUESTIONS):
                messages = [*messages, {"role": "user", "content": question}]
                result = await backend.complete(_request(messages, seed=100 + i, turn=i))
                results.append(result)
                messages = [*messages, {"role": "assistant", "content": result.completion}]
            await backend.aclose()
            return results

        results = asyncio.run(conversation())
        for i, result in enumerate(results):
            assert result.error is None
            assert result.completion == expected[i]
            assert result.reasoning == f"reasoning for turn {i}"
            assert result.finish_reason == "stop"
            assert result.attempts == 1
            assert result.latency_s > 0
            assert result.usage is not None and set(result.usage) == {
                "prompt_tokens",
                "completion_tokens",
                "total_tokens",
                "reasoning_tokens",  # from completion_tokens_details, kept flat
                "cached_tokens",  # from prompt_tokens_details, kept flat
            }
            assert all(isinstance(v, int) for v in result.usage.values())
            assert result.usage["reasoning_tokens"] == -(-len(f"reasoning for turn {i}") // 4)
            # the stub caches every message but the last: the system prompt, then the whole history
            assert 0 < result.usage["cached_tokens"] < result.usage["prompt_tokens"]
            if i:
                assert result.usage["cached_tokens"] > results[i - 1].usage["cached_tokens"]
        sent = server.requests
        assert [len(body["messages"]) for body in sent] == [2, 4, 6]
        assert [body["seed"] for body in sent] == [100, 101, 102]
        assert sent[2]["messages"][4] == {"role": "assistant", "content": expected[1]}


def test_paper_preset_exact_json() -> None:
    with start_stub_server() as server:
        backend = _fast(server, PRESETS["paper"])
        messages = [SYSTEM, {"role": "user", "content": QUESTIONS[0]}]
        result = _complete(backend, messages, seed=1234)
        assert result.error is None
        chars = len(SYSTEM["content"]) + len(QUESTIONS[0])
        budget = 32768 - (math.ceil(chars / 3) + 4 * 2)
        assert server.requests == [
            {
                "model": "stub-model",
                "messages": messages,
                "temperature": 1.0,
                "top_p": 0.95,
                "presence_penalty": 1.5,
                "max_tokens": budget,
                "seed": 1234,
                "top_k": 20,
                "min_p": 0.0,
                "repetition_penalty": 1.0,
                "chat_template_kwargs": {"enable_thinking": True},
            }
        ]
        assert result.extra["max_tokens"] == budget


def test_only_non_none_parameters_are_sent(stub: StubServer) -> None:
    messages = [{"role": "user", "content": "hi"}]
    _complete(_fast(stub, PRESETS["none"]), messages, seed=None)
    _complete(_fast(stub, PRESETS["greedy"]), messages, seed=3)
    _complete(_fast(stub, SamplingParams(enable_thinking=False, top_k=5)), messages, seed=None)
    none, greedy, custom = stub.requests
    assert none == {"model": "stub-model", "messages": messages}
    assert greedy == {
        "model": "stub-model",
        "messages": messages,
        "temperature": 0.0,
        "max_tokens": 8192,
        "seed": 3,
    }
    assert custom == {
        "model": "stub-model",
        "messages": messages,
        "top_k": 5,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def test_two_budgets_completion_and_context() -> None:
    """--max-tokens is always the completion budget; the context budget caps prompt + completion."""
    messages = [{"role": "user", "content": "x" * 3000}]
    assert estimate_prompt_tokens(messages) == 1004

    def budget(**kw: Any) -> int | None:
        return OpenAIBackend("m", "http://127.0.0.1:9/v1", SamplingParams(**kw)).completion_budget(messages)

    assert budget() is None
    assert budget(max_tokens=200) == 200  # never reduced by the prompt
    assert budget(context_budget=2000) == 996
    assert budget(max_tokens=200, context_budget=2000) == 200
    assert budget(max_tokens=1500, context_budget=2000) == 996
    assert budget(context_budget=100) == 100 - 1004  # not floored at 1: budget_problem refuses it
    assert PRESETS["paper"].max_tokens is None and PRESETS["paper"].context_budget == 32768
    backend = OpenAIBackend("m", None, SamplingParams(context_budget=2000))
    assert backend.describe()["prompt_token_estimate"] == "ceil(chars/3) + 4 per message"
    assert backend.describe()["sampling"]["context_budget"] == 2000
    assert backend.describe()["min_completion_tokens"] == 1  # alone: never a non-positive limit
    assert backend.budget_problem([{"role": "user", "content": "x" * 5988}]) is not None  # 2000 - 2000 = 0
    assert backend.budget_problem([{"role": "user", "content": "x" * 5985}]) is None  # 1 token left


def test_a_turn_left_too_few_completion_tokens_is_not_sent(stub: StubServer) -> None:
    """A 500-token prompt under a 510-token cap used to be sent with max_tokens 1: now it fails unsent."""
    messages = [{"role": "user", "content": "x" * 1488}]
    assert estimate_prompt_tokens(messages) == 500
    assert MIN_COMPLETION_TOKENS == 256  # the floor of evaluations (EvalSpec.min_completion_tokens)
    floor = {"min_completion_tokens": MIN_COMPLETION_TOKENS}
    result = _complete(_fast(stub, SamplingParams(context_budget=510), **floor), messages)
    assert stub.requests == []
    assert result.attempts == 0 and result.completion == ""
    assert result.error is not None
    for part in ("completion budget 10 tokens", "floor of 256", "~500 tokens estimated", "context budget 510",
                 "--context-budget"):
        assert part in result.error
    result = _complete(_fast(stub, SamplingParams(max_tokens=100), **floor), messages)
    assert result.error is not None and "--max-tokens" in result.error and stub.requests == []
    # the floor is a setting; at or above it the turn is sent with the computed limit
    result = _complete(_fast(stub, SamplingParams(context_budget=510), min_completion_tokens=10), messages)
    assert result.error is None and [r["max_tokens"] for r in stub.requests] == [10]
    with pytest.raises(ValueError, match="min_completion_tokens"):
        _fast(stub, min_completion_tokens=0)


@pytest.mark.parametrize(
    "fault",
    [
        Fault("status", status=429, retry_after=0.01),
        Fault("status", status=500),
        Fault("status", status=503),
        Fault("status", status=408),
        Fault("drop"),
        Fault("malformed"),
        Fault("slow", delay=1.0),
    ],
    ids=["429", "500", "503", "408", "dropped", "malformed", "timeout"],
)
def test_transient_fault_is_retried(stub: StubServer, fault: Fault) -> None:
    stub.push_fault(fault)
    result = _complete(_fast(stub, request_timeout=0.3), [{"role": "user", "content": "q"}])
    assert result.error is None
    assert result.completion.endswith("\\boxed{0}")
    assert result.attempts == 2
    assert stub.count == 2


def test_several_faults_in_a_row_then_success(stub: StubServer) -> None:
    stub.fail(500)
    stub.rate_limit(retry_after=0)
    stub.drop()
    stub.fail(503)
    result = _complete(_fast(stub, max_retries=4), [{"role": "user", "content": "q"}])
    assert result.error is None and result.attempts == 5


def test_retry_after_is_honoured(stub: StubServer) -> None:
    stub.rate_limit(retry_after=0.4)
    result = _complete(_fast(stub, backoff_max=5.0), [{"role": "user", "content": "q"}])
    assert result.error is None and result.attempts == 2
    assert result.latency_s >= 0.4


def test_retry_after_is_capped_by_backoff_max(stub: StubServer) -> None:
    base = _complete(_fast(stub), [{"role": "user", "content": "q"}]).latency_s  # one plain request, now
    stub.rate_limit(retry_after=120)
    result = _complete(_fast(stub, backoff_max=0.05), [{"role": "user", "content": "q"}])
    assert result.error is None and result.attempts == 2
    assert result.latency_s < deadline(0.05, base, hang=120.0)  # not the 120 s the server asked for


def test_backoff_grows_exponentially(stub: StubServer) -> None:
    backend = _fast(stub, backoff_initial=0.1, backoff_max=10.0)
    base = _complete(_fast(stub), [{"role": "user", "content": "q"}]).latency_s  # one plain request, now
    stub.fail(500, times=3)
    result = _complete(backend, [{"role": "user", "content": "q"}])
    assert result.attempts == 4
    # waits are in [b/2, b] for b = 0.1, 0.2, 0.4: at least 0.35 s and at most 0.7 s in total (plus
    # the requests); with backoff_max as every wait it would be 30 s
    assert 0.35 <= result.latency_s < deadline(0.7, base, hang=30.0)


def test_turn_that_keeps_failing_returns_error(stub: StubServer) -> None:
    stub.fault_when("doomed", Fault("status", status=500))
    backend = _fast(stub, max_retries=3)
    result = _complete(backend, [{"role": "user", "content": "this turn is doomed"}])
    assert result.completion == ""
    assert result.error == "HTTP 500 after 4 attempts"
    assert result.attempts == 4
    assert stub.count == 4
    # other turns are unaffected
    ok = _complete(_fast(stub), [{"role": "user", "content": "fine"}])
    assert ok.error is None and ok.attempts == 1


def test_timeouts_exhausted(stub: StubServer) -> None:
    stub.slow(2.0, times=3)
    result = _complete(_fast(stub, max_retries=1, request_timeout=0.2), [{"role": "user", "content": "q"}])
    assert result.completion == ""
    assert result.error is not None and result.error.startswith("timeout after 2 attempts")
    assert result.attempts == 2


def test_unreachable_server_returns_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = OpenAIBackend(
        "m", f"http://127.0.0.1:{port}/v1", None, max_retries=2, backoff_initial=0.001, request_timeout=2
    )
    result = _complete(backend, [{"role": "user", "content": "q"}])
    assert result.completion == ""
    assert result.error is not None and result.error.startswith("connection error")
    assert result.error.endswith("after 3 attempts")
    assert result.attempts == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(stub: StubServer, status: int) -> None:
    stub.push_fault(Fault("status", status=status, message="bad request body"), times=5)
    result = _complete(_fast(stub), [{"role": "user", "content": "q"}])
    assert result.completion == ""
    assert result.error == f"HTTP {status} after 1 attempt: bad request body"
    assert result.attempts == 1
    assert stub.count == 1


def test_conflict_409_is_retried(stub: StubServer) -> None:
    stub.fail(409)
    result = _complete(_fast(stub), [{"role": "user", "content": "q"}])
    assert result.error is None and result.attempts == 2


def test_concurrency_bound_is_respected(stub: StubServer) -> None:
    stub.set_latency(0.05)
    backend = _fast(stub, concurrency=3)

    async def many() -> list[ChatResult]:
        try:
            return await asyncio.gather(
                *(
                    backend.complete(_request([{"role": "user", "content": f"q{i}"}], seed=i))
                    for i in range(24)
                )
            )
        finally:
            await backend.aclose()

    results = asyncio.run(many())
    assert all(r.error is None for r in results)
    assert stub.count == 24
    assert stub.max_concurrent == 3


def test_connection_pools_hold_the_whole_concurrency(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The requests in flight reach ``concurrency`` whatever the SDK's default pool: with a default of 2
    connections per client (8 clients for 64), the backend used to stop at 16 requests in flight (with the
    real default, 1,000 per client and at most 16 clients: 16,000)."""
    import openai._base_client

    monkeypatch.setattr(openai._base_client, "DEFAULT_CONNECTION_LIMITS",
                        type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=2, max_keepalive_connections=2))
    stub.set_latency(1.0)  # long enough for all 64 to be sent before the first answer
    backend = _fast(stub, concurrency=64)

    async def many() -> list[ChatResult]:
        try:
            return await asyncio.gather(
                *(backend.complete(_request([{"role": "user", "content": f"q{i}"}], seed=i)) for i in range(128))
            )
        finally:
            await backend.aclose()

    results = asyncio.run(many())
    assert all(r.error is None for r in results)
    assert stub.max_concurrent == 64


def test_the_clients_share_one_tls_context(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """High concurrency shards the requests over many clients; they load the CA bundle once, not once each."""
    import ssl

    loads = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    backend = _fast(stub, concurrency=1024)

    async def one() -> ChatResult:
        try:
            result = await backend.complete(_request([{"role": "user", "content": "q"}], seed=1))
            assert len(backend._loop_state().clients) > 1  # several clients were built
            return result
        finally:
            await backend.aclose()

    assert asyncio.run(one()).error is None
    assert len(loads) == 1


def test_concurrency_slot_is_released_during_backoff(stub: StubServer) -> None:
    # One request backs off for a long time; with concurrency 1 the others must still proceed.
    stub.fault_when("slow-lane", Fault("status", status=429, retry_after=0.5), times=1)
    backend = _fast(stub, concurrency=1, backoff_max=1.0)

    async def run() -> tuple[ChatResult, list[ChatResult]]:
        try:
            first = asyncio.create_task(
                backend.complete(_request([{"role": "user", "content": "slow-lane"}]))
            )
            # start the others only once the first request has had its 429 (it now backs off)
            while not any("slow-lane" in json.dumps(r) for r in stub.requests):
                await asyncio.sleep(0.001)
            others = await asyncio.gather(
                *(backend.complete(_request([{"role": "user", "content": f"q{i}"}])) for i in range(3))
            )
            assert not first.done()
            return await first, others
        finally:
            await backend.aclose()

    first, others = asyncio.run(run())
    assert first.error is None and first.attempts == 2
    assert all(r.error is None for r in others)


@pytest.mark.parametrize("secret", ["sk-test-Z9yXwV8uT7sR6qP5", "plain-Z9yXwV8uT7sR6qP5-token"])
def test_api_key_sent_but_never_exposed(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, secret: str
) -> None:
    monkeypatch.setenv("SB_TEST_API_KEY", secret)
    backend = _fast(stub, api_key_env="SB_TEST_API_KEY", max_retries=1)
    ok = _complete(backend, [{"role": "user", "content": "q"}])
    assert ok.error is None
    assert stub.headers[0]["authorization"] == f"Bearer {secret}"

    # A server that echoes the key in its error messages (as some gateways do).
    stub.push_fault(Fault("status", status=401, message=f"Incorrect API key provided: {secret}"))
    stub.push_fault(Fault("status", status=500, message=f"upstream saw key {secret}"), times=2)
    with caplog.at_level(logging.DEBUG):
        denied = _complete(backend, [{"role": "user", "content": "q"}])
        failed = _complete(backend, [{"role": "user", "content": "q"}])
    assert denied.error is not None and denied.error.startswith("HTTP 401 after 1 attempt: Incorrect API key")
    assert failed.error == "HTTP 500 after 2 attempts"
    for text in (
        json.dumps(backend.describe()),
        repr(backend),
        denied.error,
        failed.error,
        json.dumps(denied.extra),
        caplog.text,
    ):
        assert "Z9yXwV8uT7sR6qP5" not in text
    assert backend.describe()["api_key_env"] == "SB_TEST_API_KEY"


def test_missing_api_key_sends_placeholder(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SB_TEST_API_KEY", raising=False)
    _complete(_fast(stub, api_key_env="SB_TEST_API_KEY"), [{"role": "user", "content": "q"}])
    assert stub.headers[0]["authorization"] == "Bearer EMPTY"


def test_describe(stub: StubServer) -> None:
    backend = OpenAIBackend(
        "qwen3-8b",
        "http://user:pw@127.0.0.1:9/v1",
        PRESETS["paper"],
        concurrency=16,
        request_timeout=30,
        max_retries=2,
    )
    d = backend.describe()
    json.dumps(d)
    assert d["backend"] == "openai" and d["model"] == "qwen3-8b"
    assert d["base_url"] == "http://127.0.0.1:9/v1"
    assert d["sampling"] == PRESETS["paper"].to_dict()
    assert (d["concurrency"], d["request_timeout"], d["max_retries"]) == (16, 30.0, 2)
    assert _fast(stub, PRESETS["greedy"]).describe()["prompt_token_estimate"] is None


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        OpenAIBackend("m", None, None, concurrency=0)
    with pytest.raises(ValueError):
        OpenAIBackend("m", None, None, request_timeout=0)
    with pytest.raises(ValueError):
        OpenAIBackend("m", None, None, max_retries=-1)


def test_backend_survives_event_loop_change(stub: StubServer) -> None:
    backend = _fast(stub)
    first = asyncio.run(backend.complete(_request([{"role": "user", "content": "a"}])))
    second = asyncio.run(backend.complete(_request([{"role": "user", "content": "b"}])))
    assert first.error is None and second.error is None
    asyncio.run(backend.aclose())


def test_subprocess_server_end_to_end() -> None:
    script = Script(turns=["Final Answer: \\boxed{A}", "Final Answer: \\boxed{B}"], reasoning="r")
    with start_stub_server(script, subprocess=True, record=True) as server:
        assert server.mode == "subprocess"
        server.fail(503)
        backend = _fast(server, PRESETS["paper"])
        messages: list[dict[str, Any]] = [{"role": "user", "content": "q1"}]
        first = _complete(backend, messages)
        messages += [{"role": "assistant", "content": first.completion}, {"role": "user", "content": "q2"}]
        second = _complete(backend, messages)
        assert (first.completion, first.attempts, first.reasoning) == ("Final Answer: \\boxed{A}", 2, "r")
        assert (second.completion, second.attempts) == ("Final Answer: \\boxed{B}", 1)
        assert server.count == 3
        assert [len(b["messages"]) for b in server.requests] == [1, 1, 3]
        assert server.requests[0]["top_k"] == 20


def test_a_query_string_in_the_base_url_goes_with_every_request(tmp_path: Any) -> None:
    """``--base-url http://h/v1?api_key=K`` (some gateways take the key so): the query used to be glued
    in front of every path (``/v1?api_key=Kchat/completions``) and every turn failed with HTTP 404."""
    from studybench.models.openai_backend import split_query

    assert split_query("http://h/v1?api_key=K&x=1#f") == ("http://h/v1", {"api_key": "K", "x": "1"})
    assert split_query("http://h/v1") == ("http://h/v1", {})
    with start_stub_server(Script(default="Final Answer: \\boxed{1}")) as server:
        backend = OpenAIBackend(model="stub", base_url=server.base_url + "?api_key=query-key-0123456789",
                                sampling=PRESETS["greedy"], max_retries=0)
        from studybench.models import check_endpoint

        assert check_endpoint(backend) == []

        async def one() -> ChatResult:
            try:
                return await backend.complete(_request([SYSTEM, {"role": "user", "content": "q"}], seed=1, turn=0))
            finally:
                await backend.aclose()

        result = asyncio.run(one())
        assert result.error is None and result.completion == "Final Answer: \\boxed{1}"
        assert server.count == 1  # one request, answered under /v1/chat/completions (the stub routes nothing else)


def test_request_sampling_overrides_the_backend_for_that_request(stub: StubServer) -> None:
    backend = _fast(stub, SamplingParams(temperature=1.0, top_p=0.9, max_tokens=500))
    req = ChatRequest([{"role": "user", "content": "hi"}], None, None, 0, sampling=SamplingParams(temperature=0.0, max_tokens=7))
    body = backend.build_payload(req)
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.0, 0.9, 7)
    assert backend.build_payload(_request([{"role": "user", "content": "hi"}]))["max_tokens"] == 500
    tiny = ChatRequest([{"role": "user", "content": "hi"}], None, None, 0, sampling=SamplingParams(max_tokens=1))
    assert _fast(stub, min_completion_tokens=2).budget_problem(tiny.messages, backend.sampling_for(tiny)) is not None
