"""The stub server itself: HTTP handling, scripts, faults, loopback-only binding, CLI."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from studybench.testing import Fault, Reply, Script, start_stub_server
from studybench.testing.stub_server import main

pytestmark = pytest.mark.timeout(30)


def _post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw
    finally:
        conn.close()


def _chat(port: int, messages: list[dict[str, str]], **extra: Any) -> tuple[int, Any]:
    return _post(
        port, "/v1/chat/completions", json.dumps({"model": "m", "messages": messages, **extra}).encode()
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org", ""])
def test_refuses_non_loopback_host(host: str) -> None:
    with pytest.raises(ValueError, match="127.0.0.1"):
        start_stub_server(host=host)
    with pytest.raises(ValueError):
        start_stub_server(host=host, subprocess=True)
    assert main(["--host", host]) == 2


def test_binds_loopback_only() -> None:
    with start_stub_server() as server:
        assert server.host == "127.0.0.1" and server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        probe = socket.create_connection(("127.0.0.1", server.port), timeout=2)
        assert probe.getpeername()[0] == "127.0.0.1"
        probe.close()


def test_chat_completion_shape_and_models_endpoint() -> None:
    with start_stub_server(Script(reasoning="because")) as server:
        status, data = _chat(server.port, [{"role": "user", "content": "hello"}], seed=3)
        assert status == 200
        assert data["object"] == "chat.completion" and data["model"] == "m"
        assert isinstance(data["id"], str) and isinstance(data["created"], int)
        message = data["choices"][0]["message"]
        assert message == {
            "role": "assistant",
            "content": "Stub reasoning for turn 0.\nFinal Answer: \\boxed{0}",
            "reasoning_content": "because",
        }
        assert data["choices"][0]["finish_reason"] == "stop"
        usage = data["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/v1/models")
        models = json.loads(conn.getresponse().read())
        conn.close()
        assert models["data"][0]["id"] == "stub"
        assert server.requests[0]["seed"] == 3


def test_keep_alive_serves_many_requests_on_one_connection() -> None:
    with start_stub_server("ok {turn1}") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        for i in range(5):
            messages = [{"role": "user", "content": "q"}] * (i + 1)
            conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": messages}))
            data = json.loads(conn.getresponse().read())
            assert data["choices"][0]["message"]["content"] == f"ok {i + 1}"
        conn.close()
        assert server.count == 5


def test_invalid_request_body_is_400() -> None:
    with start_stub_server() as server:
        status, data = _post(server.port, "/v1/chat/completions", b"{not json")
        assert status == 400 and "invalid JSON" in data["error"]["message"]
        status, _ = _post(server.port, "/v1/nothing", b"{}")
        assert status == 404
        assert server.count == 0


def test_script_rules_turns_and_placeholders() -> None:
    script = Script.from_dict(
        {
            "turns": [
                "first {seed}",
                {"content": "second", "finish_reason": "length", "reasoning": "r{turn}"},
            ],
            "rules": [{"match": r"\bMC\b", "reply": "Final Answer: \\boxed{B}"}],
            "think": "t",
        }
    )
    assert Script.from_dict(json.loads(json.dumps(script.to_dict()))).to_dict() == script.to_dict()
    one = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    assert script({"messages": one, "seed": 5}) == Reply("<think>t</think>\nfirst 5")
    three = [*one, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]
    three += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]
    assert script({"messages": three}) == Reply(
        "<think>t</think>\nsecond", reasoning="r2", finish_reason="length"
    )
    mc = [{"role": "user", "content": "an MC question"}]
    assert script({"messages": mc}).content == "<think>t</think>\nFinal Answer: \\boxed{B}"
    with pytest.raises(ValueError):
        Script.from_dict({"turn": []})


def test_reply_function_and_its_failure() -> None:
    def reply(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        if text == "boom":
            raise RuntimeError("scripted failure")
        return text.upper()

    with start_stub_server(reply) as server:
        assert (
            _chat(server.port, [{"role": "user", "content": "echo"}])[1]["choices"][0]["message"]["content"]
            == "ECHO"
        )
        status, data = _chat(server.port, [{"role": "user", "content": "boom"}])
        assert status == 500 and "scripted failure" in data["error"]["message"]
    with pytest.raises(TypeError):
        start_stub_server(reply, subprocess=True)


def test_fault_queue_at_and_when() -> None:
    with start_stub_server() as server:
        server.fault_at(3, Fault("status", status=503))
        server.rate_limit(retry_after=2.5)
        server.fault_when("poison", Fault("status", status=500), times=2)
        statuses = []
        for text in ["a", "poison", "b", "c", "poison", "poison", "d"]:
            statuses.append(_chat(server.port, [{"role": "user", "content": text}])[0])
        # request 0: queued 429; 1: rule; 2: ok; 3: fault_at 503; 4: rule (last time); 5, 6: ok
        assert statuses == [429, 500, 200, 503, 500, 200, 200]
        assert server.count == 7
        server.clear_faults()
        server.fail(502)
        server.clear_faults()
        assert _chat(server.port, [{"role": "user", "content": "x"}])[0] == 200


def test_retry_after_header_and_error_body() -> None:
    with start_stub_server() as server:
        server.rate_limit(retry_after=1.5)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("POST", "/v1/chat/completions", body=json.dumps({"messages": []}))
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
        assert resp.status == 429 and resp.getheader("Retry-After") == "1.5"
        assert body["error"]["type"] == "rate_limit_error"


def test_drop_and_malformed() -> None:
    with start_stub_server() as server:
        server.drop()
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _chat(server.port, [{"role": "user", "content": "x"}])
        server.malformed()
        status, raw = _chat(server.port, [{"role": "user", "content": "x"}])
        assert status == 200 and isinstance(raw, bytes)
        with pytest.raises(ValueError):
            json.loads(raw)
        assert server.count == 2
        assert server.stats()["inflight"] == 0


def test_slow_reply_and_max_concurrency() -> None:
    import threading
    import time

    with start_stub_server() as server:
        server.slow(0.3)
        t0 = time.monotonic()
        assert _chat(server.port, [{"role": "user", "content": "x"}])[0] == 200
        assert time.monotonic() - t0 >= 0.3
        server.reset_stats()
        server.set_latency(0.2)
        threads = [
            threading.Thread(target=_chat, args=(server.port, [{"role": "user", "content": "x"}]))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.count == 4 and server.max_concurrent == 4


def test_record_off() -> None:
    with start_stub_server(record=False) as server:
        _chat(server.port, [{"role": "user", "content": "x"}])
        assert server.count == 1
        with pytest.raises(RuntimeError):
            _ = server.requests


def test_cli_prints_listening_line_and_uses_script(tmp_path: Any) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"turns": ["one", "two"], "faults": [{"kind": "status", "status": 503, "at": 0}]}),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "studybench.testing.stub_server", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("LISTENING http://127.0.0.1:") and line.endswith("/v1")
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        assert _chat(port, [{"role": "user", "content": "x"}])[0] == 503
        status, data = _chat(port, [{"role": "user", "content": "x"}])
        assert data["choices"][0]["message"]["content"] == "one"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "Warning" not in err


def test_cli_reply_option() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "studybench.testing.stub_server", "--reply", "fixed \\boxed{{turn1}}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1].split("/")[0])
        data = _chat(port, [{"role": "user", "content": "x"}])[1]
        assert data["choices"][0]["message"]["content"] == "fixed \\boxed{1}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_routes_only_under_v1_like_vllm() -> None:
    with start_stub_server(Script(default="x")) as srv:
        root = srv.base_url.removesuffix("/v1")
        assert root.startswith("http://127.0.0.1:")
        for path, status in (("/v1/models", 200), ("/models", 404)):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
            conn.request("GET", path)
            assert conn.getresponse().status == status
            conn.close()
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}).encode()
        assert _post(srv.port, "/chat/completions", body)[0] == 404
        assert _post(srv.port, "/v1/chat/completions", body)[0] == 200


def test_endpoint_check_names_the_missing_v1() -> None:
    from types import SimpleNamespace

    from studybench.models.preflight import EndpointError, check_endpoint

    with start_stub_server(Script(default="x")) as srv:
        root = srv.base_url.removesuffix("/v1")
        backend = SimpleNamespace(base_url=root, api_key_env="NO_SUCH_KEY_ENV", request_timeout=10.0, model="stub",
                                  describe=lambda: {"base_url": root})
        with pytest.raises(EndpointError, match=r"serve under /v1; use http://127\.0\.0\.1:\d+/v1"):
            check_endpoint(backend)
        backend.base_url = srv.base_url
        assert check_endpoint(backend) == []


def test_health_like_vllm_for_routers() -> None:
    """``GET /health`` answers 200 with an empty body at the root, as vLLM does (vllm-router polls it)."""
    with start_stub_server(Script(default="x")) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        conn.request("GET", "/health")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"")
        conn.close()
        assert srv.count == 0  # a health check is not a chat request


def test_kill_is_a_crash_of_the_server_process() -> None:
    with start_stub_server(Script(default="x")) as srv, pytest.raises(RuntimeError, match="subprocess"):
        srv.kill()
    with start_stub_server(Script(default="x"), subprocess=True) as srv:
        assert _chat(srv.port, [{"role": "user", "content": "q"}])[0] == 200
        srv.kill()
        with pytest.raises(ConnectionRefusedError):
            _chat(srv.port, [{"role": "user", "content": "q"}])
