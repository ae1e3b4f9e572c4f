"""``build verify`` against the stub server as teacher: rubric, quote check, failures, statuses, cache."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.cli import app
from studybench.testing import Fault
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server
from studybench.testset.llmstage import read_rows
from studybench.testset.verification.kpverify import (
    check_quote,
    kp_status,
    normalise_quote,
    parse_score,
    sub_problem_status,
)

pytestmark = pytest.mark.timeout(120)

EXPO = ("Newton's second law states that the net external force on a system equals its mass times its "
        "acceleration, F = ma. It holds in inertial frames.")
FRAGS = {
    "f1": ("exposition", "FRAG1 " + EXPO),
    "f2": ("example", "FRAG2 Example 5.3: a 2 kg crate is pushed with 10 N; using the second law the acceleration is 5 m/s^2."),
    "f3": ("exposition", "FRAG3 Energy is conserved in an isolated system; kinetic energy turns into potential energy."),
    "f4": ("exposition", "FRAG4 The history of thermometers and the Celsius scale."),
    "f5": ("exposition", "FRAG5 Gauss's law relates the flux through a closed surface to the enclosed charge."),
    "f6": ("exposition", "FRAG6 Ampere's law relates the circulation of B to the enclosed current."),
}


def _reply(body: dict[str, Any]) -> Reply:
    turn, last = conversation_turn(body)
    text = body["messages"][1]["content"]

    def score(s: int, q: str) -> Reply:
        return Reply(json.dumps({"score": s, "quote": q}))

    if "FRAG1" in text:
        return score(3, "the net external force on a system equals its mass times its acceleration")
    if "FRAG2" in text:  # malformed first, then a valid score 2
        return Reply("score: two") if turn == 0 else score(2, "using the second law the acceleration is 5 m/s^2")
    if "FRAG3" in text:  # a quote the fragment does not hold
        return score(3, "the conservation of energy follows from time-translation symmetry")
    if "FRAG4" in text:
        return score(0, "")
    if "FRAG5" in text:  # always cut by the token limit
        return Reply('{"score": 3, "quote": "Gauss', finish_reason="length")
    return score(3, "relates the circulation of B to the enclosed current")


def _kp(kp_id: str, name: str, uses: list[str]) -> dict[str, Any]:
    return {"id": kp_id, "type": "law_or_equation", "name": name, "descriptions": [f"{name}."],
            "keywords": [name, "physics"], "sub_discipline": "Mechanics", "uses": uses}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _setup(work: Path) -> None:
    work.mkdir()
    subs = ["s1", "s2", "s3", "s4", "s5", "s6"]
    _write(work / "kps.jsonl", [{"key": s, "source": "X", "year": "2020", "source_problem_id": "P", "problem_id": s,
                                 "sub_discipline": "Mechanics", "status": "failed" if s == "s5" else "ok"} for s in subs])
    _write(work / "kp_canonical.jsonl", [_kp("A", "Newton second law", ["s1", "s2", "s4"]), _kp("B", "Energy conservation", ["s2", "s3", "s6"]),
                                         _kp("C", "Gauss law", ["s4"]), _kp("D", "Ampere law", ["s6"])])
    _write(work / "retrieval.jsonl", [
        {"kp_id": "A", "candidates": [{"fragment_id": "f1", "rank": 1, "score": 0.03}, {"fragment_id": "f2", "rank": 2, "score": 0.02}]},
        {"kp_id": "B", "candidates": [{"fragment_id": "f3", "rank": 1, "score": 0.03}, {"fragment_id": "f4", "rank": 2, "score": 0.02}]},
        {"kp_id": "C", "candidates": [{"fragment_id": "f5", "rank": 1, "score": 0.03}]},
        {"kp_id": "D", "candidates": [{"fragment_id": "f6", "rank": 1, "score": 0.03}]},
    ])
    _write(work / "fragments.jsonl", [{"id": f, "source": "UP1", "chapter": "5", "section": "5.3", "kind": k, "text": t}
                                      for f, (k, t) in FRAGS.items()])


def test_quote_check() -> None:
    assert normalise_quote("F = m a, (Newton's 2nd law)!") == "fmanewtons2ndlaw"
    assert check_quote("the net external force on a SYSTEM equals its mass", EXPO) is None
    assert "not found" in (check_quote("the net force on a system is zero in equilibrium", EXPO) or "")
    assert "too short" in (check_quote("F = ma", EXPO) or "")


def test_parse_score() -> None:
    assert parse_score('<think>hmm</think> ```json\n{"score": 2, "quote": "x"}\n```') == {"score": 2, "quote": "x"}
    for bad in ('{"score": 4, "quote": ""}', '{"score": true}', '{"quote": "x"}', "score 3", '{"score": 2, "quote": 5}'):
        with pytest.raises(ValueError):
            parse_score(bad)


def test_statuses() -> None:
    ok = lambda s: {"status": "ok", "score": s}  # noqa: E731
    assert kp_status([ok(1), ok(3)]) == "strongly covered"
    assert kp_status([ok(2), {"status": "failed"}]) == "covered"
    assert kp_status([ok(1), {"status": "failed"}]) == "unverified"  # a failed call is never "uncovered"
    assert kp_status([ok(1), ok(0)]) == "uncovered" and kp_status([]) == "uncovered"
    assert kp_status([], retrieved=False) == "unverified"
    assert sub_problem_status(["strongly covered", "strongly covered"]) == "strongly covered"
    assert sub_problem_status(["strongly covered", "covered"]) == "covered"
    assert sub_problem_status(["covered", "uncovered", "unverified"]) == "partial"
    assert sub_problem_status(["covered", "unverified"]) == "unverified"
    assert sub_problem_status(["uncovered", "unverified"]) == "unverified"
    assert sub_problem_status(["uncovered"]) == "uncovered"
    assert sub_problem_status([], decomposed=False) == "unverified"


def test_verify_end_to_end_with_scripted_teacher(tmp_path: Path) -> None:
    work = tmp_path / "w"
    _setup(work)
    runner = CliRunner()
    with start_stub_server(_reply) as srv:
        srv.fault_when("FRAG6", Fault("status", status=500), times=1)  # one failing call
        args = ["build", "verify", "--work", str(work), "--teacher", "t", "--base-url", srv.base_url, "--max-retries", "0"]
        res = runner.invoke(app, args)
        assert res.exit_code == 1, res.output  # failed calls
        assert "2 failed calls" in res.output and "1 demoted" in res.output
        # f1, f2 x2 (malformed then good), f3, f4, f5 x3 (truncated every time), f6 (HTTP 500)
        assert srv.count == 1 + 2 + 1 + 1 + 3 + 1
        pairs = {r["fragment_id"]: r for r in read_rows(work / "verify_pairs.jsonl")}
        assert pairs["f2"]["score"] == 2 and pairs["f2"]["attempts"] == 2
        assert pairs["f3"]["raw_score"] == 3 and pairs["f3"]["score"] == 1 and "not found" in pairs["f3"]["demoted"]
        assert pairs["f5"]["status"] == "failed" and "token limit" in pairs["f5"]["error"]
        assert pairs["f6"]["status"] == "failed" and "HTTP 500" in pairs["f6"]["error"]
        cov = read_rows(work / "coverage.jsonl")
        kps = {r["kp_id"]: r for r in cov if r["record"] == "kp"}
        assert {k: r["status"] for k, r in kps.items()} == {"A": "strongly covered", "B": "uncovered", "C": "unverified", "D": "unverified"}
        assert [m["fragment_id"] for m in kps["A"]["matches"]] == ["f1", "f2"]
        subs = {r["key"]: r["status"] for r in cov if r["record"] == "sub_problem"}
        assert subs == {"s1": "strongly covered", "s2": "partial", "s3": "uncovered", "s4": "unverified",
                        "s5": "unverified", "s6": "unverified"}
        with open(work / "coverage_status.csv", newline="") as f:
            matrix = list(csv.reader(f))
        assert matrix[0] == ["sub_problem", "status", "A", "B", "C", "D"]
        assert matrix[2] == ["s2", "partial", "strongly covered", "uncovered", "", ""]
        md = (work / "coverage.md").read_text()
        assert "| partial | 1 |" in md and "| unverified | 3 |" in md

        # re-run: only failed pairs are tried again; f5's truncated replies come from the cache, f6 now answers
        before = srv.count
        res = runner.invoke(app, args)
        assert srv.count == before + 1, res.output
        kps = {r["kp_id"]: r for r in read_rows(work / "coverage.jsonl") if r["record"] == "kp"}
        assert kps["D"]["status"] == "strongly covered" and kps["C"]["status"] == "unverified"

        # a fragment's text changes: resuming is refused; with --restart only its pair is asked again
        frags = read_rows(work / "fragments.jsonl")
        frags[0]["text"] = "FRAG1 Revised. " + EXPO
        _write(work / "fragments.jsonl", frags)
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "--restart" in res.output
        before = srv.count
        res = runner.invoke(app, [*args, "--restart"])
        assert res.exit_code == 1, res.output  # f5 still truncated
        assert "replays from the cache" in res.output and "verify.jsonl" in res.output  # how to get new replies
        asked = srv.requests[before:]
        assert len(asked) == 1 and "FRAG1 Revised" in asked[0]["messages"][1]["content"]


def test_missing_input_names_the_stage(tmp_path: Path) -> None:
    work = tmp_path / "w"
    _setup(work)
    (work / "retrieval.jsonl").unlink()
    res = CliRunner().invoke(app, ["build", "verify", "--work", str(work), "--teacher", "t", "--base-url", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 2 and "build retrieve" in res.output
