"""Every construction stage that asks a model behaves alike when the endpoint fails (issue 26, item 6).

For each stage (``build decompose``, ``verify``, ``guide``, ``retry``, ``capability``), against the stub
server's scripted faults:

* a transient failure (a dropped connection, then an HTTP 500) is retried by the one retry policy of the
  models layer (``--max-retries``, with backoff) and the stage ends as a healthy run does: exit 0, the same
  requests plus the two that failed;
* a persistent failure of one item (HTTP 500 on every try) ends the stage with exit 1 and the item recorded
  as failed, and the same command, once the endpoint answers, asks that item again and no other.

Before, ``build retry`` and ``build capability`` exited 0 with every failed turn counted as an unsolved
attempt (a parent the filter model never saw could be selected as "failed").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.testing import Fault
from studybench.testing.stub_script import message_text
from studybench.testing.stub_server import start_stub_server

pytestmark = pytest.mark.timeout(300)

PARENTS = [{"source": "Book", "year": "2020", "source_problem_id": f"P{i}", "problem_type": "Mechanics",
            "source_kind": "textbook_problem", "problem": f"A block of mass {i + 2} kg slides down ramp number {i}.",
            "sub_problems": [{"problem_id": "a", "problem": f"Find its acceleration on ramp number {i}.",
                              "answer": f"\\boxed{{{i + 1}}}", "answer_type": "NV"}]}
           for i in range(3)]
ONE = "ramp number 1"  # the item that fails in the persistent case
KPS = {"knowledge_points": [
    {"type": "law_or_equation", "name": "Newton's second law", "description": "F = ma.", "keywords": ["force", "mass"]},
    {"type": "concept", "name": "free-body diagram", "description": "Forces drawn on a body.",
     "keywords": ["forces", "diagram"]},
    {"type": "technique", "name": "resolving forces on an incline", "description": "Components along the incline.",
     "keywords": ["incline", "components"]}]}
GUIDANCE = "Apply Newton's second law along the incline and resolve the weight into components."
REVIEW = '{"verdict": "pass", "reasons": []}'


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _split(tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    split = tmp / "set.json"
    split.write_text(json.dumps(PARENTS), encoding="utf-8")
    return split


def _decompose(tmp: Path, work: Path) -> list[str]:
    return ["build", "decompose", "--work", work, "--split", _split(tmp), "--teacher", "t", "--no-embed-merge"]


def _verify(tmp: Path, work: Path) -> list[str]:
    work.mkdir(parents=True)
    subs = [f"s{i}" for i in range(3)]
    _write(work / "kps.jsonl", [{"key": s, "source": "X", "year": "2020", "source_problem_id": "P", "problem_id": s,
                                 "sub_discipline": "Mechanics", "status": "ok"} for s in subs])
    _write(work / "kp_canonical.jsonl", [{"id": "A", "type": "law_or_equation", "name": "Newton second law",
                                          "descriptions": ["F = ma."], "keywords": ["force"], "sub_discipline": "Mechanics",
                                          "uses": subs}])
    _write(work / "retrieval.jsonl", [{"kp_id": "A", "candidates": [{"fragment_id": f"f{i}", "rank": i + 1, "score": 0.03}
                                                                    for i in range(3)]}])
    _write(work / "fragments.jsonl", [{"id": f"f{i}", "source": "UP1", "chapter": "5", "section": "5.3", "kind": "exposition",
                                       "text": f"On ramp number {i} the net external force on a system equals its mass times "
                                               "its acceleration."} for i in range(3)])
    return ["build", "verify", "--work", work, "--teacher", "t"]


def _guide(tmp: Path, work: Path) -> list[str]:
    work.mkdir(parents=True)
    (work / "fragments.jsonl").write_text(json.dumps({"fragment_id": "f1", "text": "F = ma.", "book": "OS"}) + "\n")
    _write(work / "coverage.jsonl", [{
        "key": {"source": "Book", "year": "2020", "source_problem_id": p["source_problem_id"], "problem_id": "a"},
        "status": "covered", "kps": [{"kp_id": "k1", "name": "Newton's second law", "type": "law", "covered": True,
                                      "matches": [{"fragment_id": "f1", "score": 3, "kind": "exposition"}]}]}
        for p in PARENTS])
    return ["build", "guide", "--work", work, "--teacher", "t", "--split", _split(tmp)]


def _retry(tmp: Path, work: Path) -> list[str]:
    work.mkdir(parents=True)
    _write(work / "guidance.jsonl", [{"source": p["source"], "year": p["year"], "source_problem_id": p["source_problem_id"],
                                      "problem_id": "a", "guidance": GUIDANCE} for p in PARENTS])
    return ["build", "retry", "--work", work, "--model", "m", "--split", _split(tmp), "-k", "2"]


def _capability(tmp: Path, work: Path) -> list[str]:
    return ["build", "capability", "--split", _split(tmp), "--model", "m", "--out", work, "-k", "2"]


def _reply(body: dict[str, Any]) -> str:
    system = message_text(body["messages"][0]["content"]) if body["messages"][0].get("role") == "system" else ""
    text = " ".join(message_text(m.get("content")) for m in body["messages"])
    if system.startswith("You review"):
        return REVIEW
    if '"score"' in text or "score" in system.lower() and "quote" in text.lower():
        return json.dumps({"score": 3, "quote": "the net external force on a system equals its mass times its acceleration"})
    if "knowledge point" in text.lower():
        return "```json\n" + json.dumps(KPS) + "\n```"
    if "guidance" in text.lower() and "Final Answer" not in text:
        return GUIDANCE
    return "The acceleration follows from the second law.\nFinal Answer: \\boxed{1}"


STAGES: dict[str, Callable[[Path, Path], list[str]]] = {
    "decompose": _decompose, "verify": _verify, "guide": _guide, "retry": _retry, "capability": _capability}


def _run(args: list[Any], base_url: str, *extra: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args] + ["--base-url", base_url, *extra],
                              env={"STUDYBENCH_PROGRESS": "0", "COLUMNS": "200"}, catch_exceptions=False)


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_transient_failure_is_retried_and_the_stage_succeeds(stage: str, tmp_path: Path) -> None:
    with start_stub_server(_reply) as srv:
        healthy = _run(STAGES[stage](tmp_path / "a", tmp_path / "a" / "w"), srv.base_url)
        assert healthy.exit_code == 0, healthy.output
        baseline = srv.count
    with start_stub_server(_reply) as srv:
        srv.push_fault(Fault("drop"))
        srv.push_fault(Fault("status", status=500, retry_after=0.0))
        res = _run(STAGES[stage](tmp_path / "b", tmp_path / "b" / "w"), srv.base_url)
        assert res.exit_code == 0, res.output
        assert srv.count == baseline + 2  # the two failed requests were asked again, nothing else changed


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_persistent_failure_exits_1_and_the_next_run_asks_only_it(stage: str, tmp_path: Path) -> None:
    work = tmp_path / "w"
    args = STAGES[stage](tmp_path, work)
    with start_stub_server(_reply) as srv:
        srv.fault_when(re.escape(ONE), Fault("status", status=500, retry_after=0.0))  # every try of that item
        res = _run(args, srv.base_url, "--max-retries", "1")
        assert res.exit_code == 1, res.output
        assert "failed" in res.output and "again" in res.output  # says what failed and that a re-run asks it
    with start_stub_server(_reply) as srv:
        res = _run(args, srv.base_url)
        assert res.exit_code == 0, res.output
        asked = [" ".join(message_text(m.get("content")) for m in r["messages"]) for r in srv.requests]
    assert asked and all(ONE in a for a in asked), asked  # the failed item, and no other


def test_decompose_reports_the_kp_name_embedding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedding merges of ``build decompose`` (every KP name of the set, through the embedding model) report
    progress chunk by chunk, as ``build retrieve``'s fragment embedding does."""
    np = pytest.importorskip("numpy")
    import studybench.testset.embedding as embedding
    import studybench.testset.knowledge.points as decompose_mod

    embedded: list[int] = []

    def fake_embedder(*_a: Any, **_k: Any) -> Callable[[list[str]], Any]:
        def embed(texts: list[str]) -> Any:
            embedded.append(len(texts))
            return np.eye(len(texts), 8, dtype=np.float32)
        return embed

    monkeypatch.setattr(decompose_mod, "load_embedder", fake_embedder)
    monkeypatch.setattr(embedding, "EMBED_CHUNK", 2)
    with start_stub_server(_reply) as srv:
        args = [str(a) for a in _decompose(tmp_path, tmp_path / "w") if a != "--no-embed-merge"]
        res = CliRunner().invoke(app, [*args, "--base-url", srv.base_url],
                                 env={"STUDYBENCH_PROGRESS": "lines", "COLUMNS": "200"}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert embedded == [2, 1]  # the 3 distinct KP names, in chunks of 2
    lines = [x for x in res.output.splitlines() if x.startswith("embedding KP names: ")]
    assert lines and lines[-1].startswith("embedding KP names: 3/3"), res.output
