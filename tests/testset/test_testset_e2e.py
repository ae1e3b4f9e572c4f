"""`studybench build` end to end on a real slice: two OpenStax chapters and two Transfer-Set parents.

Every stage runs through the CLI, each reading what the previous one wrote in one work directory:
``corpus ingest-cnxml`` -> ``corpus redact`` -> ``build fragments`` -> ``build decompose`` ->
``build retrieve`` -> ``build verify`` -> ``build guide`` -> ``build retry`` (and ``build capability``).
The teacher, the reviewer and the filter model are one stub server with scripted replies: a malformed
JSON reply (re-asked), quotes that are not in the fragment (demoted), guidance that leaks a gold in an
equivalent form (caught by the gate), a writer reply cut at the token limit, and a reviewer that fails
every round. The embedder is a deterministic fake (hashed bag of words) put in place of the one loader
both ``decompose`` and ``retrieve`` use.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from _support import require_data_file, require_extra
from typer.testing import CliRunner

from studybench.cli import app
from studybench.datasets import Dataset, load_dataset
from studybench.protocol import load_artefacts
from studybench.testing.stub_script import message_text
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server
from studybench.testset.knowledge.points import sub_key
from studybench.testset.llmstage import read_rows

pytestmark = pytest.mark.timeout(180)

DATA = Path(os.environ.get("STUDYBENCH_DATA", "/work/shared/data/studybench"))
OPENSTAX = DATA.parent / "openstax-university-physics"
COLLECTION = OPENSTAX / "collections" / "university-physics-volume-1.collection.xml"
CHAPTERS = ("Angular Momentum", "Gravitation")
PARENTS = (("IPhO", "2011", "Q1"), ("IPhO", "1984", "Q2"))  # 3 sub-problems (LISA orbits) and 1 (a rod)

# what the scripted teacher does, by sub-problem id
MALFORMED_FIRST = "Q1(1.1)"  # decompose: malformed JSON first, re-asked
REVIEW_FAILS = "Q1(1.1)"  # guide: the reviewer fails every round -> sanitised fallback, not emitted
CUT_FIRST_ROUND = "Q1(1.3)"  # guide: every writer reply of round 1 cut at the token limit
LEAKS_FIRST_ROUND = "Q1(1.4)"  # guide: round 1 gives the gold 996 m/s as 9.96 x 10^2 m s^-1
LEAK = "Use the law of cosines for the equilateral triangle; the relative speed is $9.96\\times10^{2}\\,\\mathrm{m\\,s^{-1}}$."
CLEAN = {
    "Q1(1.1)": "Balance the gravitational attraction against the centripetal force of each mass about the centre of mass.",
    "Q1(1.3)": "Write the effective radial force with the conserved angular momentum, expand to first order in the displacement.",
    "Q1(1.4)": "Each spacecraft moves on a circle about the centroid; combine the two velocity vectors for the relative motion.",
    "Q2": "Find the centre of mass and moment of inertia, then write the torque equation for small oscillations.",
}


class FakeEmbed:
    """Hashed bag-of-words vectors: deterministic, no model."""

    def __call__(self, texts: list[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(n > 0, n, 1.0)


def _slice_collection(dest: Path) -> None:
    """A collection with only CHAPTERS of volume 1 (the modules linked, not copied)."""
    text = COLLECTION.read_text(encoding="utf-8")
    blocks = [re.search(r"<col:subcollection>\s*<md:title>" + re.escape(t) + r"</md:title>.*?</col:subcollection>",
                        text, re.S).group(0) for t in CHAPTERS]
    head = text[:text.index("<col:content>")]
    (dest / "collections").mkdir(parents=True)
    (dest / "collections" / COLLECTION.name).write_text(
        head + "<col:content><col:subcollection><md:title>Mechanics</md:title><col:content>" + "".join(blocks)
        + "</col:content></col:subcollection></col:content></col:collection>", encoding="utf-8")
    (dest / "modules").symlink_to(OPENSTAX / "modules")


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start) + len(start)
    return text[i:text.index(end, i)]


class Teacher:
    """One reply function for the teacher, the reviewer and the filter model (told apart by the prompts)."""

    def __init__(self, ds: Dataset) -> None:
        self.refs = ds.sub_problem_refs()
        self.demote: set[str] = set()  # KP names whose quotes are invented (filled in after decompose)
        self.seen: dict[str, int] = {}
        self.filter_prompts: list[str] = []

    def _ref(self, text: str) -> Any:
        hits = [r for r in self.refs if r.sub.problem.strip() and r.sub.problem.strip()[:80] in text]
        return max(hits, key=lambda r: len(r.sub.problem))

    def __call__(self, body: dict[str, Any]) -> Reply:
        system = message_text(body["messages"][0]["content"]) if body["messages"][0]["role"] == "system" else ""
        first = message_text(body["messages"][1]["content"]) if len(body["messages"]) > 1 else ""
        turn, last = conversation_turn(body)
        kind = ("decompose" if system.startswith("You are a physics teacher") else "verify" if system.startswith("You judge")
                else "writer" if system.startswith("You write method-only") else "review" if system.startswith("You review")
                else "filter")
        self.seen[kind] = self.seen.get(kind, 0) + 1
        if kind == "decompose":
            ref = self._ref(_between(first, "Sub-problem to analyse:\n", "\n\nReference solution"))
            if ref.sub_id == MALFORMED_FIRST and turn == 0:
                return Reply('{"knowledge_points": [{"type": "concept", "name": "oops"')
            kps = [{k: kp[k] for k in ("type", "name", "description", "keywords")} for kp in ref.sub.knowledge_points]
            return Reply(json.dumps({"knowledge_points": kps}))
        if kind == "verify":
            name = _between(first, "): ", "\n")
            frag = _between(first, "<<<\n", "\n>>>")
            if name in self.demote:
                return Reply(json.dumps({"score": 3, "quote": "this sentence is nowhere in the textbook fragment"}))
            line = max(frag.splitlines(), key=lambda x: sum(c.isalpha() for c in x))  # the wordiest line
            quote = " ".join(line.split()[:25])  # verbatim words from the fragment
            return Reply(json.dumps({"score": 2 if "; example)" in first else 3, "quote": quote}))
        if kind in ("writer", "review"):
            ref = self._ref(_between(first, "Sub-problem:\n", "\n\n"))
            sid = ref.sub_id
            if kind == "review":
                verdict = "fail" if sid == REVIEW_FAILS else "pass"
                return Reply(json.dumps({"verdict": verdict, "reasons": ["names an intermediate result"] if verdict == "fail" else []}))
            first_round = "previous guidance was rejected" not in first and "previous attempt failed" not in first
            if sid == CUT_FIRST_ROUND and first_round:
                return Reply(CLEAN[sid][:40], finish_reason="length")
            if sid == LEAKS_FIRST_ROUND and first_round:
                return Reply(LEAK)
            return Reply(CLEAN[sid])
        # the filter model: the gold of IPhO 2011 Q1's sub-problems, a wrong answer for the other parent
        self.filter_prompts.append(last)
        ref = self._ref(last)
        if ref.parent.source_problem_id == "Q1":
            return Reply(f"Reasoning.\nFinal Answer: {ref.sub.answer}")
        return Reply("Reasoning.\nFinal Answer: \\boxed{42}")


def _invoke(runner: CliRunner, args: list[str], code: int = 0) -> str:
    res = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == code, f"{args[:2]} exit {res.exit_code}:\n{res.output}"
    return res.output


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
def test_every_stage_chains_on_a_real_slice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_data_file(COLLECTION, "OpenStax University Physics CNXML")
    require_data_file(DATA / "transfer.json", "the Transfer Set")
    require_extra("build", "bm25s", "numpy")
    import studybench.testset.embedding as embedding_mod
    import studybench.testset.knowledge.points as decompose_mod

    def fake_loader(name: str | None = None, **_: Any) -> FakeEmbed:
        return FakeEmbed()

    monkeypatch.setattr(embedding_mod, "load_embedder", fake_loader)
    monkeypatch.setattr(decompose_mod, "load_embedder", fake_loader)
    runner = CliRunner()
    books, work = tmp_path / "books", tmp_path / "work"

    # --- corpus: CNXML -> Markdown chapters, then redacted against the slice of the test set
    src = tmp_path / "src"
    _slice_collection(src)
    _invoke(runner, ["corpus", "ingest-cnxml", src, "--books", books])
    chapters = sorted(p.parent.name for p in (books / "OpenStax_UniversityPhysics1").glob("*/clean.md"))
    assert chapters == ["ch01-angular-momentum", "ch01-angular-momentum-answers", "ch02-gravitation", "ch02-gravitation-answers"]
    full = load_dataset(DATA / "transfer.json", name="transfer")
    ds = Dataset.from_parents([p for k in PARENTS for p in full.parents if p.key == k], "transfer")
    assert len(ds.parents) == 2 and ds.n_sub_problems == 4
    split = tmp_path / "slice.json"
    split.write_text(json.dumps([p.model_dump(mode="json", exclude_unset=True) for p in ds.parents]), encoding="utf-8")
    _invoke(runner, ["build", "fragments", "--work", work, "--books", books], code=2)  # not redacted yet: refused
    _invoke(runner, ["corpus", "redact", "--books", books, "--split", split])

    # --- fragments
    _invoke(runner, ["build", "fragments", "--work", work, "--books", books])
    frags = read_rows(work / "fragments.jsonl")
    meta = json.loads((work / "fragments.meta.json").read_text())
    assert len(frags) == meta["fragments"] > 20 and meta["chapters"] == 4 and meta["unredacted_chapters"] == []
    assert {f["kind"] for f in frags} == {"exposition", "example"}
    assert all(f["redacted"] and len(f["text"].strip()) >= 200 for f in frags if f["parts"] == 1)
    by_id = {f["id"]: f for f in frags}

    teacher = Teacher(ds)
    with start_stub_server(teacher) as srv:
        llm = ["--teacher", "t", "--base-url", srv.base_url, "--max-retries", "0"]

        # --- decompose: the malformed reply is re-asked, nothing fails
        _invoke(runner, ["build", "decompose", "--work", work, "--split", split, *llm])
        rows = {r["problem_id"]: r for r in read_rows(work / "kps.jsonl")}
        assert sorted(rows) == ["Q1(1.1)", "Q1(1.3)", "Q1(1.4)", "Q2"] and {r["status"] for r in rows.values()} == {"ok"}
        assert rows[MALFORMED_FIRST]["attempts"] == 2 and all(r["attempts"] == 1 for k, r in rows.items() if k != MALFORMED_FIRST)
        canon = read_rows(work / "kp_canonical.jsonl")
        assert len(canon) >= 10 and {u for c in canon for u in c["uses"]} == {r["key"] for r in rows.values()}
        # invented quotes for every KP that only sub-problem 1.3 uses: they are demoted, the KPs uncovered
        only_13 = [c for c in canon if c["uses"] == [rows["Q1(1.3)"]["key"]]]
        assert only_13
        teacher.demote.update(c["name"] for c in only_13)

        # --- retrieve (hybrid; the fake embedder in place of MiniLM)
        out = _invoke(runner, ["build", "retrieve", "--work", work, "--top-n", "3"])
        assert f"wrote {len(canon)} knowledge points" in out
        retrieval = read_rows(work / "retrieval.jsonl")
        assert {r["kp"] for r in retrieval} == {c["id"] for c in canon}
        assert all(len(r["candidates"]) == 3 and all(c["fragment"] in by_id for c in r["candidates"]) for r in retrieval)

        # --- verify: every candidate scored; invented quotes demoted
        _invoke(runner, ["build", "verify", "--work", work, *llm])
        pairs = read_rows(work / "verify_pairs.jsonl")
        assert len(pairs) == 3 * len(canon) and all(p["status"] == "ok" for p in pairs)
        demoted = [p for p in pairs if p["demoted"]]
        assert len(demoted) == 3 * len(only_13) and all(p["raw_score"] == 3 and p["score"] == 1 for p in demoted)
        assert {p["rank"] for p in pairs} == {1, 2, 3}
        coverage = read_rows(work / "coverage.jsonl")
        subs = {r["problem_id"]: r for r in coverage if r["record"] == "sub_problem"}
        kp_lines = [r for r in coverage if r["record"] == "kp"]
        assert len(kp_lines) == len(canon)
        assert {r["status"] for r in kp_lines if r["name"] in teacher.demote} == {"uncovered"}
        assert subs["Q1(1.3)"]["status"] == "partial"
        assert {subs[k]["status"] for k in ("Q1(1.1)", "Q1(1.4)", "Q2")} == {"strongly covered"}

        # --- guide: gate, truncation, failing reviewer
        out = _invoke(runner, ["build", "guide", "--work", work, "--split", split, "--teacher", "t", "--base-url", srv.base_url])
        guide = {r["problem_id"]: r for r in read_rows(work / "guide.jsonl")}
        assert {k: r["path"] for k, r in guide.items()} == {
            "Q1(1.1)": "sanitised_fallback", "Q1(1.3)": "passed_round_2", "Q1(1.4)": "passed_round_2", "Q2": "passed_round_1"}
        assert [r["failed"] for r in guide[REVIEW_FAILS]["rounds"]] == ["review"] * 3 and not guide[REVIEW_FAILS]["review_passed"]
        r1 = guide[CUT_FIRST_ROUND]["rounds"][0]
        assert "token limit" in r1["failed"] and r1["writer"]["truncated"] and r1["writer"]["attempts"] == 3
        leak = guide[LEAKS_FIRST_ROUND]["rounds"][0]
        assert leak["failed"] == "leakage gate" and not leak["gate"]["passed"]
        assert guide[LEAKS_FIRST_ROUND]["guidance"] == CLEAN[LEAKS_FIRST_ROUND]
        # the fragments the writer saw are the verified matches of the covered KPs
        assert set(guide["Q2"]["fragments"]) <= {m["fragment_id"] for k in subs["Q2"]["kps"] for m in k["matches"]}
        art = load_artefacts(guidance=work / "guidance.jsonl")
        assert art.guidance == {("IPhO", "2011", "Q1", "Q1(1.3)"): CLEAN["Q1(1.3)"],
                                ("IPhO", "2011", "Q1", "Q1(1.4)"): CLEAN["Q1(1.4)"],
                                ("IPhO", "1984", "Q2", "Q2"): CLEAN["Q2"]}

        # --- retry: pass@2 with the guidance; Q1 solved, the other parent never
        out = _invoke(runner, ["build", "retry", "--work", work, "--split", split, "--model", "f", "--base-url", srv.base_url,
                               "-k", "2"])
        assert "1 of 2 parents admitted" in out
        admitted = {r["source_problem_id"]: r for r in read_rows(work / "admitted.jsonl")}
        assert admitted["Q1"]["admitted"] and admitted["Q1"]["solves"] == 2 and not admitted["Q2"]["admitted"]
        assert any(CLEAN["Q2"] in p for p in teacher.filter_prompts)  # the guidance reached the filter model
        assert not any(CLEAN[REVIEW_FAILS] in p for p in teacher.filter_prompts)  # the rejected one did not

        # --- capability: pass@2 without guidance; the failed parent is selected, with its guidance
        cap = work / "capability"
        _invoke(runner, ["build", "capability", "--split", split, "--model", "f", "--base-url", srv.base_url, "-k", "2",
                         "--out", cap, "--guidance", work / "guidance.jsonl"])
        part = {r["source_problem_id"]: r["group"] for r in read_rows(cap / "partition.jsonl")}
        assert part == {"Q1": "solved", "Q2": "failed"}
        assert [p.key for p in load_dataset(cap / "test_set.json").parents] == [("IPhO", "1984", "Q2")]
        assert [json.loads(x)["problem_id"] for x in (cap / "guidance.jsonl").read_text().splitlines()] == ["Q2"]
    assert teacher.seen["decompose"] == 5 and teacher.seen["verify"] == len(pairs)
    assert sub_key(ds.sub_problem_refs()[0]) == rows["Q1(1.1)"]["key"]
