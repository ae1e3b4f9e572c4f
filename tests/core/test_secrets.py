"""API keys never reach the disk or the console, and redaction never changes text that holds no secret.

A canary key is echoed by a hostile endpoint in every field of its responses (content, reasoning,
finish reason, usage key names, model, id, extra fields, error messages, the model list); after a
whole ``studybench eval`` with an LLM judge, no file under the run and cache directories and no line
of console output holds it. Keys given inside ``--base-url`` (``user:KEY@``, ``?api_key=KEY``) are
not recorded either. Ordinary answers (``disk-shaped``, ``bearer ring}}``, ``task-...``) are stored
and judged byte for byte.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _support import parent, sub, write_set

from studybench.evaluate import EvalSpec, run_eval
from studybench.fetch import FetchError
from studybench.llm_judge import LLMJudge, LLMJudgeInputs, LLMVerdictCache
from studybench.models.openai_backend import OpenAIBackend
from studybench.models.openai_backend import redact_url as backend_redact_url
from studybench.secrets import (
    env_name_problem,
    env_secrets,
    known_secrets,
    redact,
    redact_command,
    redact_model_text,
    redact_obj,
    redact_text,
    redact_token_shapes,
    redact_url,
    url_secrets,
)
from studybench.testing.stub_judge import format_verdict
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

CANARY = "canary-Q7xZ2mK9pL4vN8rT"  # not shaped like a key: only exact-value redaction catches it
JUDGE_CANARY = "jcanary-H3wE6yU1iO5aS2dF"
URL_CANARY = "ucanary-B4nM7qW2eR9tY6uI"
QUERY_CANARY = "qcanary-Z1xC8vB3nM5lK0jH"
CANARIES = (CANARY, JUDGE_CANARY, URL_CANARY, QUERY_CANARY)

ORDINARY = [
    "disk-shaped",
    "risk-free",
    "bearer ring}}",
    "Bearer of bad news",
    "\\text{sk-1}",
    "the task-abcdefghijklmnopqrstuvwxyz list",
    "whisk-abcdefghijklmnopqrstuvwxyz0123",
    "bearer\n  incomprehensibilities",
    "Bearer abcdefghijklmnopqrstuvwxyz",  # no digit: a word, not a token
]

SET = [parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{5}", problem="Q2: mass?"),
                     sub("c", "\\boxed{7}", problem="Q3: force?")], problem="A block.")]


# -- the module itself ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_never_altered(text: str) -> None:
    assert redact_token_shapes(text) == text
    assert redact_text(text, ()) == text
    assert redact_text(text, ("EMPTY", "abc")) == text  # placeholders and too-short values are no secrets
    assert redact_obj({text: [text]}, (), shapes=True) == {text: [text]}
    assert redact_command(["studybench", text]) == ["studybench", text]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefghijklmnopqrstuvwxyz01", "key sk-***"),
        ("(sk-proj-abcdefghijklmnopqrst1234)", "(sk-***)"),
        ("Authorization: Bearer abcdef0123456789abcdef01.x", "Authorization: Bearer ***"),
        ("bearer   eyJhbGciOiJIUzI1NiJ9abcdefgh", "bearer   ***"),
    ],
)
def test_well_delimited_token_shapes_are_masked(text: str, expected: str) -> None:
    assert redact_token_shapes(text) == expected


def test_configured_secrets_are_masked_in_every_form() -> None:
    secret = "my key/with+odd=chars"
    secrets = known_secrets([secret, None, "", "EMPTY", "ab"])
    assert secrets == (secret,)
    assert known_secrets(["Ollama", "sk-no-key-required", "EMPTY"]) == ()  # documented stand-ins for "no key"
    text = f"a {secret} b my%20key%2Fwith%2Bodd%3Dchars c my+key%2Fwith%2Bodd%3Dchars"
    assert redact(text, secrets) == "a *** b *** c ***"
    assert redact("nothing here", secrets) == "nothing here"
    obj = {f"k {secret}": [secret, 3, None, (f"x{secret}",)], "n": 1.5}
    assert redact_obj(obj, secrets) == {"k ***": ["***", 3, None, ("x***",)], "n": 1.5}
    # the longer secret is masked whole even when it holds a shorter one
    assert redact("abcdefgh-ijkl", known_secrets(["abcdefgh", "abcdefgh-ijkl"])) == "***"


@pytest.mark.parametrize("url", [False, True], ids=["base64", "base64url"])
@pytest.mark.parametrize("pad", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("offset", [0, 1, 2, 4, 5])
@pytest.mark.parametrize("quoted", [False, True], ids=["raw", "URL-encoded"])
def test_a_key_base64_encoded_anywhere_in_a_longer_text_is_masked(url: bool, pad: bool, offset: int, quoted: bool) -> None:
    for secret in (CANARY, "user:" + URL_CANARY, "k" * 8, "ключ-ÄÖÜ-\u2603-secret"):
        blob = _b64(secret, b"\x00{" * offset + b"x" * offset, b"-tail", url=url, pad=pad)
        if quoted:
            blob = quote(blob, safe="")
        out = redact(f"id: {blob}; done", [secret] if ":" not in secret else [URL_CANARY])
        assert out == "id: ***; done", (secret, offset, out)


def test_base64_text_without_the_key_and_short_keys_are_left_alone() -> None:
    other = base64.b64encode(b"an unrelated payload of bytes, quite long").decode()
    assert redact(f"img {other}", [CANARY]) == f"img {other}"
    assert redact(base64.b64encode(b"abc1234").decode(), ["abc1234"]) == base64.b64encode(b"abc1234").decode()  # 7 characters


def test_env_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_T_KEY1", CANARY)
    monkeypatch.setenv("SB_T_KEY2", "EMPTY")
    monkeypatch.delenv("SB_T_KEY3", raising=False)
    assert env_secrets(["SB_T_KEY1", "SB_T_KEY2", "SB_T_KEY3", None]) == (CANARY,)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:pw@127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
        ("https://TOKEN@host/v1", "https://host/v1"),
        ("http://host:abc/v1", "http://host:abc/v1"),  # a bad port is not interpreted (used to raise)
        ("http://u:p@host:abc/v1", "http://host:abc/v1"),
        ("http://u:p@[::1/v1", "http://[::1/v1"),  # malformed (used to be returned unchanged)
        ("http://h/v1?api_key=SECRET&x=1#frag", "http://h/v1?api_key=***&x=1#frag"),
        ("http://h/v1?Key=a&TOKEN=b&access_token=c&sig=d&model=m", "http://h/v1?Key=***&TOKEN=***&access_token=***&sig=***&model=m"),
        ("http://h/cb#access_token=abc&state=1", "http://h/cb#access_token=***&state=1"),
        ("http://h/v1?", "http://h/v1?"),
        ("not a url", "not a url"),
        ("", ""),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert backend_redact_url(url) == expected  # still importable from its old place


def test_url_secrets() -> None:
    assert url_secrets(f"http://user:{URL_CANARY}@h/v1") == (URL_CANARY,)
    assert url_secrets(f"http://h/v1?model=m&api_key={QUERY_CANARY}") == (QUERY_CANARY,)
    assert set(url_secrets("http://u:p%40ssword@h/v1")) == {"p%40ssword", "p@ssword"}
    assert url_secrets("http://h/v1") == () and url_secrets(None) == ()


def test_redact_command() -> None:
    argv = ["studybench", "eval", "--base-url", f"http://user:{URL_CANARY}@127.0.0.1:1/v1", "--api-key-env", "MY_KEY",
            f"--judge-base-url=http://h/v1?api_key={QUERY_CANARY}", "--api-key", "s3cret-value", "--token=abcd1234",
            f"--note={CANARY}"]
    out = redact_command(argv, (CANARY,))
    assert out == ["studybench", "eval", "--base-url", "http://127.0.0.1:1/v1", "--api-key-env", "MY_KEY",
                   "--judge-base-url=http://h/v1?api_key=***", "--api-key", "***", "--token=***", "--note=***"]


# -- a hostile endpoint that echoes the key everywhere --------------------------------------------------


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str]

    def log_message(self, *args: Any) -> None:
        pass

    def _credential(self) -> str:
        auth = self.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "basic":
            value = base64.b64decode(value).decode("utf-8", "replace")
        self.server.seen.append(value)  # type: ignore[attr-defined]
        return self.server.encode(value, auth)  # type: ignore[attr-defined]  # how this server echoes it

    def _send(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        key = self._credential()
        self._send(200, {"object": "list", "data": [{"id": f"model-{key}", "object": "model", "owner": key}]})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        key = self._credential()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        echo = f"{key} {self.path}"
        if body.get("model") == "echo-judge":
            content = format_verdict(True, f"The judge saw {echo}.")
        else:
            _, last = conversation_turn(body)
            if "Q3" in last:
                self._send(400, {"error": {"message": f"bad request from {echo}", "type": key}})
                return
            content = f"Using {echo}.\nFinal Answer: \\boxed{{2}}"
        self._send(200, {
            "id": f"chatcmpl-{key}",
            "object": "chat.completion",
            "model": key,
            "system_fingerprint": echo,
            key: key,
            "choices": [{"index": 0, "finish_reason": f"stop {echo}",
                         "message": {"role": "assistant", "content": content, "reasoning_content": f"thinking {echo}"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, f"tokens {echo}": 5, "total_tokens": 5},
        })


def _b64(raw: str, before: bytes = b"", after: bytes = b"", url: bool = False, pad: bool = True) -> str:
    enc = (base64.urlsafe_b64encode if url else base64.b64encode)(before + raw.encode() + after).decode()
    return enc if pad else enc.rstrip("=")


ECHOES = {
    "plain": lambda raw, header: raw,
    "base64": lambda raw, header: _b64(raw),
    "base64, unpadded": lambda raw, header: _b64(raw, pad=False),
    "base64url": lambda raw, header: _b64(raw, url=True),
    "base64url, unpadded": lambda raw, header: _b64(raw, url=True, pad=False),
    "base64 inside a blob, offset 1 mod 3": lambda raw, header: _b64(raw, b'{"k":"', b'"}'),
    "base64url inside a blob, offset 2 mod 3": lambda raw, header: _b64(raw, b'["k","', b'"]', url=True, pad=False),
    "base64 inside a blob, offset 0 mod 3": lambda raw, header: _b64(raw, b"key", b"-tail"),
    "URL-encoded base64": lambda raw, header: quote(_b64(raw, b"x"), safe=""),
    "URL-encoded": lambda raw, header: quote(raw, safe=""),
    "the Authorization header": lambda raw, header: header,
}
"""How a hostile endpoint echoes the credential it got (the key, or ``user:password`` from a Basic header)."""


def _cores(secret: str) -> list[str]:
    """What a base64 text holding ``secret`` always contains, whatever surrounds it: for each byte offset
    modulo 3, the characters two different surroundings encode alike (computed apart from the library)."""
    out = []
    for k in range(3):
        for url in (False, True):
            a, b = _b64(secret, b"A" * k, b"BBB", url), _b64(secret, b"\xff" * k, b"\xfe\xfe\xfe", url)
            same = "".join(x if x == y else "\n" for x, y in zip(a, b, strict=True)).split("\n")
            core = max(same, key=len)
            out += [core, quote(core, safe="")]
    return out


ENCODED_CANARIES = tuple(c for canary in CANARIES for c in _cores(canary))


@pytest.fixture(params=["plain"])
def echo(request: pytest.FixtureRequest) -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    srv.seen = []  # type: ignore[attr-defined]
    srv.encode = ECHOES[request.param]  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _eval(tmp_path: Path, base_url: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    split = write_set(tmp_path / "set.json", SET)
    full = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("OPENAI_BASE_URL", "STUDYBENCH_JUDGE_BASE_URL")}
    full.update({"STUDYBENCH_JUDGE_CACHE": str(tmp_path / "cache"), "COLUMNS": "1000", "NO_COLOR": "1", **(env or {})})
    cmd = [sys.executable, "-m", "studybench.cli", "eval", "--split", str(split), "--model", "echo-model", "--base-url", base_url,
           "-k", "1", "--seeds", "1", "--out", str(tmp_path / "run"), "--max-retries", "0", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=300)


def _leaks(root: Path, res: subprocess.CompletedProcess[str], canaries: tuple[str, ...] = CANARIES + ENCODED_CANARIES) -> list[str]:
    found = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            found += [f"{p.relative_to(root)}: {c}" for c in canaries if c.encode() in data]
    found += [f"console: {c}" for c in canaries if c in res.stdout + res.stderr]
    return found


def test_a_key_echoed_in_every_field_reaches_no_file_and_no_console(echo: ThreadingHTTPServer, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{echo.server_port}/v1"
    res = _eval(tmp_path, url, "--judge-model", "echo-judge", "--judge-base-url", url, "--judge-api-key-env", "SB_JUDGE_KEY",
                env={"OPENAI_API_KEY": CANARY, "SB_JUDGE_KEY": JUDGE_CANARY})
    # the run happened: keys sent, a turn answered, one refused, the judge asked and its verdict cached
    assert CANARY in echo.seen and JUDGE_CANARY in echo.seen, echo.seen  # type: ignore[attr-defined]
    assert res.returncode == 1, res.stdout + res.stderr  # the refused turn
    rows = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    ok = [r for r in rows if not r.get("error")]
    assert ok and ok[0]["completion"].startswith("Using *** /v1/chat/completions.")
    assert ok[0]["finish_reason"] == "stop *** /v1/chat/completions" and "tokens *** /v1/chat/completions" in ok[0]["usage"]
    assert any("bad request from ***" in (r.get("error") or "") for r in rows)
    assert "model-***" in res.stdout + res.stderr, res.stdout + res.stderr  # the model-list warning, redacted
    llm = [json.loads(x) for x in (tmp_path / "run" / "llm_judgements.jsonl").read_text().splitlines()] \
        if (tmp_path / "run" / "llm_judgements.jsonl").exists() else []
    cache_files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert cache_files and any(b"The judge saw ***" in p.read_bytes() for p in cache_files), llm
    assert _leaks(tmp_path, res) == []


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
@pytest.mark.parametrize("echo", list(ECHOES), indirect=True)
def test_a_key_echoed_in_any_encoding_reaches_no_file_and_no_console(echo: ThreadingHTTPServer, tmp_path: Path) -> None:
    """The endpoint and the judge echo their keys base64- or URL-encoded (alone, unpadded, inside a longer
    base64 text at each byte offset modulo 3) in every field: no file of the run and the cache, and no
    console line, holds a key in any of those encodings (issue 24 item 5: 27 files held it base64-encoded)."""
    url = f"http://127.0.0.1:{echo.server_port}/v1"
    res = _eval(tmp_path, url, "--judge-model", "echo-judge", "--judge-base-url", url, "--judge-api-key-env", "SB_JUDGE_KEY",
                env={"OPENAI_API_KEY": CANARY, "SB_JUDGE_KEY": JUDGE_CANARY})
    assert CANARY in echo.seen and JUDGE_CANARY in echo.seen, echo.seen  # type: ignore[attr-defined]
    rows = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    assert any(r["completion"] and r["completion"].startswith("Using ") for r in rows), res.stderr  # echoed and stored
    assert _leaks(tmp_path, res) == []


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
@pytest.mark.parametrize("echo", ["the Authorization header", "base64", "base64 inside a blob, offset 1 mod 3"], indirect=True)
def test_a_basic_auth_header_built_from_url_credentials_reaches_no_file(echo: ThreadingHTTPServer, tmp_path: Path) -> None:
    """``http://user:KEY@host``: the client sends ``Basic base64(user:KEY)``; an endpoint echoing that header
    (or ``user:KEY`` base64-encoded) leaves no trace of the key (issue 24 item 5: 4 files held it)."""
    url = f"http://user:{URL_CANARY}@127.0.0.1:{echo.server_port}/v1"
    res = _eval(tmp_path, url)
    assert f"user:{URL_CANARY}" in echo.seen, echo.seen  # type: ignore[attr-defined]
    assert _leaks(tmp_path, res) == [], res.stdout + res.stderr


@pytest.mark.parametrize("where", ["userinfo", "query"])
def test_a_key_inside_the_base_url_is_not_recorded(echo: ThreadingHTTPServer, tmp_path: Path, where: str) -> None:
    host = f"127.0.0.1:{echo.server_port}"
    url = f"http://user:{URL_CANARY}@{host}/v1" if where == "userinfo" else f"http://{host}/v1?api_key={QUERY_CANARY}"
    res = _eval(tmp_path, url)
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "--base-url" in man["command"] and man["backend"]["base_url"].startswith(f"http://{host}/v1")
    assert _leaks(tmp_path, res) == [], res.stdout + res.stderr


# -- ordinary answers are stored and judged as written -------------------------------------------------

PLAIN = [parent("P2", [sub("a", "\\boxed{\\text{disk-shaped}}", "QL", problem="Q1: shape?"),
                       sub("b", "\\boxed{\\text{bearer ring}}", "QL", problem="Q2: part?"),
                       sub("c", "\\boxed{\\text{task-abcdefghijklmnopqrstuvwxyz}}", "QL", problem="Q3: list?")],
                problem="Shapes.")]
PLAIN_REPLIES = {
    "Q1": "A risk-free guess: disk-shaped, like \\text{sk-1}.\nFinal Answer: \\boxed{\\text{disk-shaped}}",
    "Q2": "Bearer of bad news: the bearer ring}} holds.\nFinal Answer: \\boxed{\\text{bearer ring}}",
    "Q3": "From the whisk-abcdefghijklmnopqrstuvwxyz0123 pile.\nFinal Answer: \\boxed{\\text{task-abcdefghijklmnopqrstuvwxyz}}",
}


def test_ordinary_answers_are_stored_and_judged_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    split = write_set(tmp_path / "plain.json", PLAIN)

    def reply(body: dict[str, Any]) -> Reply:
        _, last = conversation_turn(body)
        text = next(v for k, v in PLAIN_REPLIES.items() if k in last)
        return Reply(text, reasoning=f"thinking: {text}", finish_reason="stop")

    with start_stub_server(reply, model="stub-model") as srv:
        result = run_eval(EvalSpec(split=str(split), model="stub-model", base_url=srv.base_url, k=1, seeds=[0]), tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    assert sorted(r["completion"] for r in rows) == sorted(PLAIN_REPLIES.values())
    assert sorted(r["reasoning"] for r in rows) == sorted(f"thinking: {v}" for v in PLAIN_REPLIES.values())
    assert result.sub_at_k == 100.0


def test_judge_replies_lose_only_the_configured_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_T_JUDGE_KEY", JUDGE_CANARY)
    ordinary = "The bearer ring}} is disk-shaped; see task-abcdefghijklmnopqrstuvwxyz."
    justification = f"{ordinary} Key: {JUDGE_CANARY}."
    inputs = LLMJudgeInputs("Find x.", "x = 42.", "Answer type: NV (numerical value)\n42", "so x = 42", "42")

    async def go(judge: LLMJudge) -> Any:
        try:
            return await judge.judge(inputs)
        finally:
            await judge.aclose()

    with start_stub_server(lambda body: Reply(format_verdict(True, justification)), model="stub-judge") as srv:
        judge = LLMJudge("stub-judge", srv.base_url, cache=LLMVerdictCache(tmp_path), api_key_env="SB_T_JUDGE_KEY")
        v = asyncio.run(go(judge))
        assert srv.headers[0]["authorization"] == f"Bearer {JUDGE_CANARY}"
    assert v.verdict == "TRUE" and v.justification == f"{ordinary} Key: ***."
    cached = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert JUDGE_CANARY.encode() not in cached and ordinary.encode() in cached


def test_backend_secrets_include_url_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_T_KEY1", CANARY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    be = OpenAIBackend("m", f"http://user:{URL_CANARY}@127.0.0.1:9/v1?api_key={QUERY_CANARY}", api_key_env="SB_T_KEY1")
    assert set(be.secrets) == {CANARY, URL_CANARY, QUERY_CANARY}
    assert be.describe()["base_url"] == "http://127.0.0.1:9/v1?api_key=***"
    assert OpenAIBackend("m", "http://host:abc/v1").describe()["base_url"] == "http://host:abc/v1"


# -- short keys and keys in odd places -------------------------------------------------------------------


def test_a_short_key_never_alters_model_text() -> None:
    # the model never sees the key; a short one is likely part of an answer (\boxed{1234} must stay)
    assert redact_model_text("Final Answer: \\boxed{1234}", ("1234",)) == "Final Answer: \\boxed{1234}"
    assert redact_model_text("x = abcdefg", ("abcdefg",)) == "x = abcdefg"
    assert redact_model_text(f"Using {CANARY}.", (CANARY, "1234")) == "Using ***."
    assert redact("error from 1234", ("1234",)) == "error from ***"  # not model text: masked as before


def test_a_run_with_a_short_key_is_judged_on_the_answer_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "1234")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    split = tmp_path / "set.json"
    split.write_text(json.dumps([{**SET[0], "sub_problems": [{**SET[0]["sub_problems"][0], "answer": "\\boxed{1234}"}]}]))
    with start_stub_server(lambda body: Reply("The result is 1234.\nFinal Answer: \\boxed{1234}"), model="stub-model") as srv:
        result = run_eval(EvalSpec(split=str(split), model="stub-model", base_url=srv.base_url, k=1, seeds=[0]), tmp_path / "run")
        assert srv.headers[0]["authorization"] == "Bearer 1234"
    rows = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in rows] == ["The result is 1234.\nFinal Answer: \\boxed{1234}"]
    assert result.sub_at_k == 100.0


def test_a_token_given_as_the_url_user_name_is_a_secret() -> None:
    token = "ghp_Tok3nAsUserName9x"
    assert token in url_secrets(f"https://{token}@example.org/raw")
    assert "user" not in url_secrets("https://user:pw-Hx7Kd2Lm9Nq4@example.org/raw")  # a user name with a password is not
    assert "p+w/rd-Zq8Wc3" in url_secrets("https://u:p%2Bw%2Frd-Zq8Wc3@example.org/raw")
    err = FetchError(f"download failed: https://{token}@example.org/raw/x.json: HTTP 404", url=f"https://{token}@example.org/raw/x.json")
    assert token not in str(err) and token not in err.url


@pytest.mark.parametrize("flag", ["--api-key-env", "--judge-api-key-env"])
def test_a_key_given_for_its_variable_name_is_refused_without_being_repeated(
    echo: ThreadingHTTPServer, tmp_path: Path, flag: str,
) -> None:
    url = f"http://127.0.0.1:{echo.server_port}/v1"
    extra = ["--judge-model", "echo-judge", "--judge-base-url", url] if flag.startswith("--judge") else []
    res = _eval(tmp_path, url, *extra, flag, f"sk-proj-{CANARY}")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{flag}: takes the NAME of an environment variable" in " ".join(res.stderr.split())
    assert not (tmp_path / "run").exists() and echo.seen == []  # type: ignore[attr-defined]
    assert _leaks(tmp_path, res) == []
    with pytest.raises(ValueError, match="api_key_env: takes the NAME"):
        EvalSpec(split="x", api_key_env="token-abc123")
    assert env_name_problem("MY_KEY_2") is None


@pytest.mark.parametrize("key", [f"{CANARY}\r", f"{CANARY} ", f"{CANARY}\n", "ключ-секрет-123"])
def test_a_key_no_header_can_carry_is_named_as_such(echo: ThreadingHTTPServer, tmp_path: Path, key: str) -> None:
    # a key pasted with a line break or a trailing space used to end in "is not a valid http(s) URL"
    # or "cannot reach the endpoint ... is the server running?"
    res = _eval(tmp_path, f"http://127.0.0.1:{echo.server_port}/v1", env={"OPENAI_API_KEY": key})
    assert res.returncode == 2, res.stdout + res.stderr
    assert "$OPENAI_API_KEY holds characters an HTTP header cannot carry" in " ".join(res.stderr.split())
    assert _leaks(tmp_path, res, (CANARY, "ключ")) == []
