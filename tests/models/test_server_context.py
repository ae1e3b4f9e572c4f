"""The server's context length is read and planned within; a parent that does not fit is skipped,
not a reason to abort the run (issue 24 item 8).

``--preset paper`` asks prompt + completion <= 32,768 tokens; a server with a smaller context (vLLM's
``max_model_len`` in its model list, llama.cpp's ``n_ctx`` in ``/props``) now caps that, the manifest
records it and the terminal says it once. A parent whose prompt does not fit used to abort the whole
run (exit 2); it is now skipped: its turns are recorded as failed with the reason, the report lists
it, the run is incomplete (exit 1) and the other parents run normally.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub
from typer.testing import CliRunner

from studybench.cli import app
from studybench.evaluate import EvalError, EvalSpec, is_permanent_error, prepare_eval, run_eval
from studybench.models.openai_backend import OpenAIBackend, estimate_prompt_tokens
from studybench.models.preflight import ServerContext, server_context_length
from studybench.testing import start_stub_server


def _parent(pid: str, problem: str, subs: int = 2) -> dict[str, Any]:
    return parent(pid, [sub(f"{pid}{chr(97 + j)}", "\\boxed{1}", problem=f"Q{j}: speed?") for j in range(subs)], problem=problem)


LONG = "A long stem. " * 1500  # ~19,500 characters: ~6,500 estimated tokens


@pytest.fixture
def test_set(tmp_path: Path) -> Path:
    f = tmp_path / "set.json"
    f.write_text(json.dumps([_parent("P1", "A block."), _parent("P2", LONG), _parent("P3", "A ball.")]))
    return f


# ----------------------------------------------------------------------------- what servers publish


@contextmanager
def _server(routes: dict[str, Any]) -> Iterator[str]:
    """A loopback server answering ``GET path`` with ``routes[path]`` as JSON (404 otherwise)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = routes.get(self.path.split("?")[0])
            data = (body if isinstance(body, bytes) else json.dumps(body).encode()) if body is not None else b"{}"
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _models(**entry: Any) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": "other"}, {"id": "m", "object": "model", **entry}]}


SHAPES = [
    ("vllm", {"/v1/models": _models(max_model_len=8192)}, ServerContext(8192, "max_model_len in /v1/models")),
    ("llama.cpp props", {"/v1/models": _models(meta={"n_ctx_train": 131072}), "/props": {"default_generation_settings": {"n_ctx": 4096}}},
     ServerContext(4096, "n_ctx in /props")),
    ("llama.cpp meta only", {"/v1/models": _models(meta={"n_ctx_train": 32768})}, ServerContext(32768, "meta.n_ctx_train in /v1/models")),
    ("openai api: none", {"/v1/models": _models()}, None),
    ("no model list", {}, None),
    ("not json", {"/v1/models": b"<html>"}, None),
    ("bool", {"/v1/models": _models(max_model_len=True)}, None),
    ("negative", {"/v1/models": _models(max_model_len=-5)}, None),
    ("string", {"/v1/models": _models(max_model_len="8192")}, None),
    ("float", {"/v1/models": _models(max_model_len=8192.0)}, None),
    ("huge", {"/v1/models": _models(max_model_len=10 ** 400)}, None),
    ("bad props", {"/v1/models": _models(), "/props": {"default_generation_settings": [1]}}, None),
    ("data not a list", {"/v1/models": {"data": {"id": "m"}}}, None),
]


@pytest.mark.parametrize("routes,want", [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_the_context_length_is_read_where_servers_publish_it(routes: dict[str, Any], want: ServerContext | None) -> None:
    with _server(routes) as url:
        assert server_context_length(OpenAIBackend("m", url), timeout=10) == want


# ----------------------------------------------------------------------------- planning within it


def test_the_server_context_caps_the_budget_is_recorded_and_said_once(tmp_path: Path) -> None:
    data = tmp_path / "set.json"
    data.write_text(json.dumps([_parent("P1", "A block."), _parent("P3", "A ball.")]))
    with start_stub_server("Final Answer: \\boxed{1}", model="stub-model", max_model_len=3000) as srv:
        res = CliRunner().invoke(app, ["eval", "--split", str(data), "--model", "stub-model", "--base-url", srv.base_url,
                                       "--preset", "paper", "-k", "1", "--seeds", "1", "--out", str(tmp_path / "run"),
                                       "--verify-workers", "1"])
        sent = srv.requests
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    said = "the server's context is 3000 tokens (max_model_len in /v1/models): every turn is planned within prompt + completion <= 3000 (asked: 32768)"
    assert flat.count(said) == 1, flat
    assert sent and all(r["max_tokens"] == 3000 - estimate_prompt_tokens(r["messages"]) for r in sent)
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["backend"]["server_context"] == {"length": 3000, "source": "max_model_len in /v1/models", "cap": 3000}
    assert man["backend"]["sampling"]["context_budget"] == 32768  # what was asked stays the run's identity


def test_a_larger_server_context_changes_nothing_and_a_run_resumes_on_another_server(tmp_path: Path) -> None:
    data = tmp_path / "set.json"
    data.write_text(json.dumps([_parent("P1", "A block.")]))
    spec = EvalSpec(split=str(data), model="stub-model", preset="paper", k=1, seeds=[0], verify_workers=1)
    with start_stub_server("Final Answer: \\boxed{1}", model="stub-model", max_model_len=131072) as srv:
        run_eval(spec.merge({"base_url": srv.base_url}), tmp_path / "run")
        assert srv.requests[0]["max_tokens"] == 32768 - estimate_prompt_tokens(srv.requests[0]["messages"])
    with start_stub_server("Final Answer: \\boxed{1}", model="stub-model", n_ctx=8000) as srv:  # llama.cpp, smaller
        result = run_eval(spec.merge({"base_url": srv.base_url}), tmp_path / "run")
        assert srv.count == 0  # resumed: the finished turns are kept
    assert result.report is not None and result.report["complete"]
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["backend"]["server_context"] == {"length": 8000, "source": "n_ctx in /props", "cap": 8000}


# ----------------------------------------------------------------------------- a parent that does not fit


def test_a_parent_that_does_not_fit_is_skipped_reported_and_the_others_run(test_set: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with start_stub_server("Final Answer: \\boxed{1}", model="stub-model") as srv:
        res = CliRunner().invoke(app, ["eval", "--split", str(test_set), "--model", "stub-model", "--base-url", srv.base_url,
                                       "--context-budget", "4000", "-k", "2", "--seeds", "1", "--out", str(out),
                                       "--verify-workers", "1"])
        asked = [m["content"] for r in srv.requests for m in r["messages"]]
    flat = " ".join(res.output.split())
    assert res.exit_code == 1, flat  # incomplete: never 0 (and no longer 2: the run went on)
    assert "1 of 3 parents do not fit and are skipped" in flat and "S//P2 / P2b (turn 2)" in flat
    assert "skipped 1 parent whose prompt does not fit the context (4 turns recorded as failed" in flat
    assert srv.count == 8 and not any("A long stem" in a for a in asked)  # P1 and P3 in full; P2 never asked
    rows = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    skipped = [r for r in rows if r["parent"] == "S//P2"]
    assert len(skipped) == 4 and all(r["attempts"] == 0 and r["completion"] == "" for r in skipped)
    for r in skipped:
        assert r["error"].startswith("parent skipped: S//P2 / P2b (turn 2): the prompt alone (~"), r["error"]
        assert "does not fit the context budget 4000" in r["error"] and is_permanent_error(r["error"])
    assert not [r for r in rows if r["parent"] != "S//P2" and r["error"]]
    rep = json.loads((out / "report.json").read_text())
    assert rep["complete"] is False and rep["turns"]["failed"] == 4
    assert [s["parent"] for s in rep["skipped_parents"]] == ["S//P2"]
    assert "does not fit the context budget 4000" in rep["skipped_parents"][0]["reason"]
    md = (out / "report.md").read_text()
    assert "Skipped parents (1)" in md and "- S//P2: S//P2 / P2b (turn 2)" in md


def test_a_parent_that_does_not_fit_the_servers_context_is_skipped(test_set: Path, tmp_path: Path) -> None:
    with start_stub_server("Final Answer: \\boxed{1}", model="stub-model", max_model_len=5000) as srv:
        spec = EvalSpec(split=str(test_set), model="stub-model", base_url=srv.base_url, preset="paper", k=1, seeds=[0],
                        verify_workers=1)
        plan = prepare_eval(spec, tmp_path / "run")
        assert not plan.notes  # P2 fits the 32,768 asked
        from studybench.evaluate import check_endpoints, run_plan

        warnings = check_endpoints(plan)
        result = run_plan(plan, preflight=False)
    assert any("1 of 3 parents do not fit" in w and "the server's context length 5000" in w for w in warnings), warnings
    assert result.generation is not None and list(result.generation.skipped_parents) == ["S//P2"]
    assert result.report is not None and result.report["complete"] is False
    assert "server's context length 5000" in result.report["skipped_parents"][0]["reason"]


def test_a_selection_where_no_parent_fits_is_still_refused_before_any_request(tmp_path: Path) -> None:
    data = tmp_path / "set.json"
    data.write_text(json.dumps([_parent("P2", LONG)]))
    with pytest.raises(EvalError) as e:
        prepare_eval(EvalSpec(split=str(data), model="m", base_url="http://127.0.0.1:9/v1", context_budget=4000), tmp_path / "r")
    assert e.value.field == "context_budget" and "S//P2 / P2b (turn 2)" in str(e.value)
