"""``build capability`` and ``build retry`` (issue 15, item 7) with the stub server as the filter model."""

from __future__ import annotations

import json
import random
import re

import pytest

from studybench.datasets import Dataset, load_dataset
from studybench.evaluate import EvalError
from studybench.records import Parent
from studybench.testing.stub_script import message_text
from studybench.testing.stub_server import start_stub_server
from studybench.testset.filters.passk import partition, run_capability, run_retry, select_parents


def _parent(pid: str, disc: str, kind: str = "textbook_problem") -> dict:
    return {"source": "Book", "year": "", "source_problem_id": pid, "problem_type": disc, "source_kind": kind,
            "problem": f"Problem {pid}: compute the number.", "answer": "\\boxed{5}", "answer_type": "NV"}


POOL = [_parent(f"M{i}", "Mechanics") for i in range(4)] + [
    _parent("O1", "Optics"), _parent("O2", "Optics"), _parent("S1", "Mechanics"), _parent("C1", "Mechanics", "competition")]
# correct attempts per parent (k = 3): M* and C1 fail, O1 solved once, O2 and S1 solved
SOLVES = {"O1": 1, "O2": 3, "S1": 2}


def _filter_model():
    seen: dict[str, int] = {}

    def reply(body):
        text = message_text(body["messages"][-1]["content"])
        pid = re.search(r"Problem (\w+):", text).group(1)
        n = seen.get(pid, 0)
        seen[pid] = n + 1
        return f"Final Answer: \\boxed{{{5 if n < SOLVES.get(pid, 0) else 999}}}"

    return reply


def test_partition_and_selection(tmp_path):
    split = tmp_path / "pool.json"
    split.write_text(json.dumps(POOL))
    ds = load_dataset(split)
    guidance = tmp_path / "g.jsonl"
    guidance.write_text("".join(json.dumps({"source": "Book", "year": "", "source_problem_id": p["source_problem_id"],
                                            "problem_id": p["source_problem_id"], "guidance": "hint"}) + "\n" for p in POOL))
    with start_stub_server(_filter_model()) as srv:
        res = run_capability(ds, "stub", tmp_path / "cap", base_url=srv.base_url, k=3, seed=7, per_discipline=2,
                             admit_solved_once_for=["optics"], guidance=guidance, eval_options={"max_retries": 0})
    assert res.counts == {"failed": 5, "solved_once": 1, "solved": 2}
    rows = {json.loads(x)["source_problem_id"]: json.loads(x) for x in (tmp_path / "cap/partition.jsonl").read_text().splitlines()}
    assert {k: r["group"] for k, r in rows.items() if k in ("O1", "O2", "S1", "C1")} == {
        "O1": "solved_once", "O2": "solved", "S1": "solved", "C1": "failed"}
    chosen = {k for k, r in rows.items() if r["selected"]}
    assert len(chosen & {"M0", "M1", "M2", "M3"}) == 2  # failed textbook parents subsampled per discipline
    assert {"C1", "O1"} <= chosen and not chosen & {"O2", "S1"}  # competition kept; thin subject admits solved-once
    out = load_dataset(tmp_path / "cap/test_set.json")
    assert {p.source_problem_id for p in out.parents} == chosen
    assert len((tmp_path / "cap/guidance.jsonl").read_text().splitlines()) == len(chosen)
    md = (tmp_path / "cap/summary.md").read_text()
    assert "| Optics | 2 | 0 | 1 | 1 | 1 | 1 |" in md and "**Total** | 8 | 5 | 1 | 2 |" in md


def test_seeded_subsampling_is_deterministic_and_order_free():
    parents = [Parent(**_parent(f"M{i}", "Mechanics")) for i in range(20)]
    groups = {p.uid: "failed" for p in parents}
    a = {p.uid for p in select_parents(parents, groups, seed=3, per_discipline=5)}
    shuffled = parents[:]
    random.Random(0).shuffle(shuffled)
    b = {p.uid for p in select_parents(shuffled, groups, seed=3, per_discipline=5)}
    assert a == b and len(a) == 5
    assert any({p.uid for p in select_parents(parents, groups, seed=s, per_discipline=5)} != a for s in range(4, 10))
    assert partition(0) == "failed" and partition(1) == "solved_once" and partition(2) == "solved"


def test_retry_admits_parents_solved_with_guidance(tmp_path):
    pool = [_parent("A", "Mechanics"), _parent("B", "Mechanics"), _parent("N", "Mechanics")]
    ds = Dataset.from_parents([Parent(**p) for p in pool], "cands")
    work = tmp_path / "w"
    work.mkdir()
    (work / "guidance.jsonl").write_text("".join(
        json.dumps({"source": "Book", "year": "", "source_problem_id": pid, "problem_id": pid, "guidance": f"KEYHINT {pid}"}) + "\n"
        for pid in ("A", "B")))

    def reply(body):
        text = " ".join(message_text(m["content"]) for m in body["messages"])
        return "Final Answer: \\boxed{5}" if "KEYHINT A" in text else "Final Answer: \\boxed{1}"

    with start_stub_server(reply) as srv:
        res = run_retry(work, ds, "stub", base_url=srv.base_url, k=2, eval_options={"max_retries": 0})
    assert res == {"candidates": 2, "admitted": 1, "run_dir": str(work / "retry")}
    rows = {json.loads(x)["source_problem_id"]: json.loads(x) for x in (work / "admitted.jsonl").read_text().splitlines()}
    assert rows["A"]["admitted"] and rows["A"]["solves"] == 2 and not rows["B"]["admitted"] and "N" not in rows

    # the same work directory with another filter model: refused, and the way out is the retry's own
    # directory (build retry has no --out to point elsewhere)
    with start_stub_server(reply) as srv, pytest.raises(EvalError) as err:
        run_retry(work, ds, "another-model", base_url=srv.base_url, k=2, eval_options={"max_retries": 0})
    msg = str(err.value)
    assert str(work / "retry") in msg and "--out" not in msg and "another --work" in msg and err.value.field == "work"


def test_capability_cli_budget_stops_cleanly_and_resumes(tmp_path):
    """`build capability --max-total-tokens`: the filter run stops (exit 3), and a re-run without it completes."""
    from typer.testing import CliRunner

    from studybench.cli import app
    from studybench.cli.budget import BUDGET_EXIT_CODE

    split = tmp_path / "pool.json"
    split.write_text(json.dumps(POOL))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"*": {"input": 1.0, "output": 2.0}}}))
    with start_stub_server(_filter_model()) as srv:
        def cap(*extra):
            args = ["build", "capability", "--split", str(split), "--model", "stub", "--out", str(tmp_path / "cap"),
                    "-k", "3", "--seed", "7", "--base-url", srv.base_url, "--pricing", str(prices), "--concurrency", "1",
                    *extra]
            return CliRunner().invoke(app, args, catch_exceptions=False)

        res = cap("--max-total-tokens", "200")
        assert res.exit_code == BUDGET_EXIT_CODE, res.output
        assert "--max-total-tokens" in res.output and not (tmp_path / "cap/test_set.json").exists()
        asked = srv.count
        assert 0 < asked < len(POOL) * 3
        res = cap()
        assert res.exit_code == 0, res.output
        assert srv.count == len(POOL) * 3  # only the attempts not yet made were asked
    assert (tmp_path / "cap/test_set.json").is_file()
