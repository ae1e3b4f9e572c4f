"""``build guide``: rounds, review, truncation, fallback marking (issue 15, item 6) against the stub server.

Defects of the reference implementation each test guards against: guidance the reviewer rejected in every
round shipped as passing; empty guidance after failed calls counted as passing; replies cut by the token
limit were not detected; the reviewer never saw the parent stem.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from studybench.datasets import load_dataset
from studybench.protocol import load_artefacts
from studybench.testing.stub_script import Reply, message_text
from studybench.testing.stub_server import start_stub_server
from studybench.testset.guidance.guide import GuideSettings, run_guide
from studybench.testset.llmstage import StageCache, StageLLM, open_backend

STEM = "A uniform sphere of mass 6e24 kg and radius 6.4e6 m spins once a day."
PARENT = {"source": "Book", "year": "2020", "source_problem_id": "P1", "problem_type": "Mechanics",
          "source_kind": "textbook_problem", "problem": STEM,
          "sub_problems": [{"problem_id": "a", "problem": "Find its spin angular momentum.",
                            "answer": "\\boxed{3.57e34 kg m^2/s}", "answer_type": "NV"}]}
LEAK = "Use $L = I\\omega$ with the moment of inertia of a solid sphere. Numerically $L = 3.57\\times10^{34}$."
CLEAN = "Use $L = I\\omega$ with the moment of inertia of a solid sphere and the angular speed of one turn per day."


def _work(tmp: Path) -> tuple[Path, object]:
    work = tmp / "work"
    work.mkdir(parents=True)
    split = tmp / "set.json"
    split.write_text(json.dumps([PARENT]))
    (work / "fragments.jsonl").write_text(json.dumps({"fragment_id": "f1", "text": "Angular momentum L = I omega.", "book": "OS"}) + "\n")
    (work / "coverage.jsonl").write_text(json.dumps({
        "key": {"source": "Book", "year": "2020", "source_problem_id": "P1", "problem_id": "a"}, "status": "covered",
        "kps": [{"kp_id": "k1", "name": "angular momentum", "type": "law", "covered": True,
                 "matches": [{"fragment_id": "f1", "score": 3, "kind": "exposition"}]},
                {"kp_id": "k2", "name": "uncovered thing", "type": "concept", "covered": False, "matches": []}]}) + "\n")
    return work, load_dataset(split)


def _run(work, ds, writer_replies, review_replies, *, accept=False, fail_writer=False):
    """Writer replies by round (last repeats); reviewer replies likewise. Returns (record, requests)."""
    counts = {"w": 0, "r": 0}

    def reply(body):
        system = message_text(body["messages"][0]["content"])
        if system.startswith("You review"):
            i = counts["r"]
            counts["r"] += 1
            return review_replies[min(i, len(review_replies) - 1)]
        i = counts["w"]
        counts["w"] += 1
        return writer_replies[min(i, len(writer_replies) - 1)]

    with start_stub_server(reply) as srv:
        if fail_writer:
            srv.fail(500, times=1000)

        async def go():
            b = open_backend("stub", srv.base_url, max_retries=0)
            llm = StageLLM(b, StageCache.for_stage(work, "guide"), concurrency=2)
            try:
                return await run_guide(work, ds, llm, llm, GuideSettings(teacher="stub", reviewer="stub", accept_fallback=accept))
            finally:
                await llm.aclose()

        res = asyncio.run(go())
        reqs = srv.requests
    rec = [json.loads(x) for x in (work / "guide.jsonl").read_text().splitlines()][0]
    return rec, reqs, res


PASS = '{"verdict": "pass", "reasons": []}'
FAIL = '{"verdict": "fail", "reasons": ["gives away the method result"]}'


def test_passes_in_round_two_and_reviewer_sees_stem_and_gold(tmp_path):
    work, ds = _work(tmp_path)
    rec, reqs, res = _run(work, ds, [LEAK, CLEAN], [PASS])
    assert rec["path"] == "passed_round_2" and rec["review_passed"] and rec["guidance"] == CLEAN
    assert rec["rounds"][0]["failed"] == "leakage gate"
    review = [r for r in reqs if message_text(r["messages"][0]["content"]).startswith("You review")]
    assert len(review) == 1
    text = message_text(review[0]["messages"][-1]["content"])
    assert STEM in text and "3.57e34" in text  # the stem with the given data, and the gold
    writer = message_text(reqs[0]["messages"][-1]["content"])
    assert "Angular momentum L = I omega." in writer and "uncovered thing" not in writer
    # the artefact is readable by `studybench eval --guidance`
    art = load_artefacts(guidance=work / "guidance.jsonl")
    assert art.guidance == {("Book", "2020", "P1", "a"): CLEAN}
    assert res["counts"]["emitted"] == 1


def test_reviewer_failing_every_round_is_marked_and_excluded(tmp_path):
    work, ds = _work(tmp_path)
    rec, _, res = _run(work, ds, [CLEAN], [FAIL])
    assert rec["path"] == "sanitised_fallback" and rec["review_passed"] is False
    assert [r["failed"] for r in rec["rounds"]] == ["review"] * 3
    assert (work / "guidance.jsonl").read_text() == "" and res["counts"]["emitted"] == 0


def test_accept_fallback_emits_marked_guidance(tmp_path):
    work, ds = _work(tmp_path)
    rec, _, _ = _run(work, ds, [LEAK], [PASS], accept=True)
    assert rec["path"] == "sanitised_fallback" and not rec["review_passed"]
    assert "3.57" not in rec["guidance"] and rec["removed"]
    line = json.loads((work / "guidance.jsonl").read_text())
    assert line["path"] == "sanitised_fallback" and line["review_passed"] is False


def test_reply_cut_at_token_limit_is_a_failed_round(tmp_path):
    work, ds = _work(tmp_path)
    rec, reqs, res = _run(work, ds, [Reply(CLEAN, finish_reason="length")], [PASS])
    assert rec["path"] == "failed" and rec["guidance"] == ""
    assert all("token limit" in r["failed"] for r in rec["rounds"])
    assert not any(message_text(r["messages"][0]["content"]).startswith("You review") for r in reqs)
    assert res["counts"]["emitted"] == 0


def test_empty_guidance_after_failed_calls_never_passes(tmp_path):
    work, ds = _work(tmp_path)
    rec, _, res = _run(work, ds, [CLEAN], [PASS], fail_writer=True, accept=True)
    assert rec["path"] == "failed" and rec["review_passed"] is False and rec["guidance"] == ""
    assert res["counts"]["emitted"] == 0
    work2, ds2 = _work(tmp_path / "b")
    rec2, _, _ = _run(work2, ds2, [""], [PASS], accept=True)
    assert rec2["path"] == "failed" and rec2["rounds"][0]["failed"] == "writer reply empty"


def test_unreadable_review_is_a_failed_round(tmp_path):
    work, ds = _work(tmp_path)
    rec, _, _ = _run(work, ds, [CLEAN], ["looks fine to me"])
    assert rec["path"] != "passed_round_1" and not rec["review_passed"]


def test_cli_guide_missing_coverage_is_a_clean_error(tmp_path):
    from typer.testing import CliRunner

    from studybench.cli import app

    split = tmp_path / "set.json"
    split.write_text(json.dumps([PARENT]))
    r = CliRunner().invoke(app, ["build", "guide", "--work", str(tmp_path / "w"), "--teacher", "m", "--split", str(split),
                                 "--base-url", "http://127.0.0.1:9/v1"], catch_exceptions=False)
    assert r.exit_code == 2 and "coverage.jsonl" in r.output


def test_cli_guide_reports_usage_and_warns_on_unreadable_reviews(tmp_path):
    """The summary formats token usage like the other stages and warns when review calls were unreadable
    (every row then ends in ``sanitised_fallback`` and nothing is emitted, which looked like a clean run)."""
    from typer.testing import CliRunner

    from studybench.cli import app

    work, _ = _work(tmp_path)
    split = tmp_path / "set.json"

    def reply(body):
        system = message_text(body["messages"][0]["content"])
        return "{}" if system.startswith("You review") else CLEAN

    with start_stub_server(reply) as srv:
        r = CliRunner().invoke(app, ["build", "guide", "--work", str(work), "--teacher", "m", "--split", str(split),
                                     "--base-url", srv.base_url], catch_exceptions=False)
    out = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "writer: " in out and "prompt" in out and "{'requests'" not in out
    assert "warning: 1 sub-problem(s) had a review call that failed or was unreadable" in out and "--restart" in out
    # a re-run resumes the row and says so
    with start_stub_server(reply) as srv:
        r = CliRunner().invoke(app, ["build", "guide", "--work", str(work), "--teacher", "m", "--split", str(split),
                                     "--base-url", srv.base_url], catch_exceptions=False)
    assert "1 sub-problem from an earlier run" in " ".join(r.output.split())


def test_cli_guide_writer_transport_failure_exits_1_and_is_asked_again(tmp_path):
    """A writer whose calls all fail in transport gives no outcome of the sub-problem: the stage exits 1
    (it used to exit 0 with the row final), and the same command, once the writer answers, asks it again."""
    from typer.testing import CliRunner

    from studybench.cli import app

    work, _ = _work(tmp_path)
    split = tmp_path / "set.json"
    cmd = ["build", "guide", "--work", str(work), "--teacher", "m", "--split", str(split)]

    def reply(body):
        system = message_text(body["messages"][0]["content"])
        return PASS if system.startswith("You review") else CLEAN

    with start_stub_server(reply) as srv:
        srv.fail(503, times=1000, retry_after=0.0)  # retried at once, then given up
        r = CliRunner().invoke(app, [*cmd, "--base-url", srv.base_url], catch_exceptions=False)
    out = " ".join(r.output.split())
    assert r.exit_code == 1, r.output
    assert "1 sub-problem failed" in out and "asks them again" in out
    rows = [json.loads(x) for x in (work / "guide.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["transport_failed"] is True and rows[0]["path"] == "failed"
    with start_stub_server(reply) as srv:
        r = CliRunner().invoke(app, [*cmd, "--base-url", srv.base_url], catch_exceptions=False)
        asked = len(srv.requests)
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (work / "guide.jsonl").read_text().splitlines()]
    assert asked >= 2 and len(rows) == 1 and rows[0]["path"] == "passed_round_1" and "transport_failed" not in rows[0]
    assert json.loads((work / "guidance.jsonl").read_text().splitlines()[0])["guidance"] == CLEAN
