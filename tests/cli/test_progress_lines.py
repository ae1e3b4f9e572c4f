"""Progress in logs: with stderr not a terminal, ``eval``, ``judge`` and ``build retrieve`` print plain
progress lines instead of nothing (issue 24 item 8). Rich bars stay for terminals.

The rule (a line per tenth of a phase, at least every 30 s, a heartbeat when nothing finishes) is
tested with a fake clock; each command is run as a real process with its output piped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import write_fragments, write_set

from studybench.cli.progress import LineProgress, clock_text
from studybench.testing.stub_judge import judge_reply_fn
from studybench.testing.stub_server import start_stub_server


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _lines(**kw: Any) -> tuple[LineProgress, list[str], Clock]:
    out: list[str] = []
    clock = Clock()
    return LineProgress(out.append, clock=clock, **kw), out, clock


def test_a_line_per_tenth_of_a_phase_with_rate_and_eta() -> None:
    p, out, clock = _lines()
    p("generate", 0, 200)
    for _ in range(200):
        clock.t += 0.5
        p("generate", 1, None)
    assert out[0] == "generate: 0/200 turns"
    assert len(out) == 11  # the start, then 10%, 20%, ..., 100%
    assert out[1] == "generate: 20/200 turns (10%), 2.0 turns/s, elapsed 0:00:10, ETA 0:01:30"
    assert out[-1] == "generate: 200/200 turns (100%), 2.0 turns/s, elapsed 0:01:40, done"
    p.close()
    assert len(out) == 11  # a finished phase says nothing more


def test_fast_phases_print_their_first_and_last_lines_only() -> None:
    p, out, clock = _lines()
    p("verify", 0, 1000)
    for _ in range(1000):
        clock.t += 0.0001
        p("verify", 1, None)
    assert out == ["verify: 0/1000 turns", "verify: 1000/1000 turns (100%), 10000.0 turns/s, elapsed 0:00:00, done"]


def test_a_slow_phase_gets_a_line_every_30_s_even_when_nothing_finishes() -> None:
    p, out, clock = _lines()
    p("generate", 0, 1000)
    p("llm judge", 0, None)  # a phase of unknown total
    for _ in range(10):
        clock.t += 10
        p.tick()
    # every 30 s: a heartbeat per running phase, although no turn finished
    assert [line.split(":")[0] for line in out[2:]] == ["generate", "llm judge"] * 3
    assert out[2] == "generate: 0/1000 turns (0%), 0.0 turns/s, elapsed 0:00:30, ETA ?"
    assert out[3] == "llm judge: 0 turns, 0.0 turns/s, elapsed 0:00:30"
    clock.t += 31
    p("llm judge", 7, None)  # a phase with no total still reports at least every 30 s
    assert out[-1] == "llm judge: 7 turns, 0.1 turns/s, elapsed 0:02:11"
    clock.t += 1
    p("llm judge", 1, None)
    p.close()  # the last count of a phase that did not end with a line (no total, or stopped)
    assert out[-2:] == ["llm judge: 7 turns, 0.1 turns/s, elapsed 0:02:11", "llm judge: 8 turns, 0.1 turns/s, elapsed 0:02:12"]


def test_clock_text() -> None:
    assert [clock_text(x) for x in (0, 59.9, 61, 3600 * 25 + 1, float("inf"), -1)] == [
        "0:00:00", "0:00:59", "0:01:01", "25:00:01", "?", "?"]


# ----------------------------------------------------------------------------- the commands, piped


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k != "STUDYBENCH_PROGRESS"}
    return subprocess.run([sys.executable, "-m", "studybench.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**e, **(env or {})})


def _phase_lines(stderr: str, phase: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith(f"{phase}: ")]


@pytest.mark.slow
def test_eval_and_judge_print_progress_lines_when_piped(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 6)
    turns = sum(1 + i % 3 for i in range(6)) * 2
    run = tmp_path / "run"
    with start_stub_server("Work.\nFinal Answer: \\boxed{7}", model="stub-model") as model:  # wrong answers: judged
        r = _run("eval", "--split", str(data), "--model", "stub-model", "--base-url", model.base_url, "-k", "2",
                 "--seeds", "1", "--out", str(run), "--verify-workers", "1")
    assert r.returncode == 0, r.stderr
    for phase in ("generate", "verify"):
        lines = _phase_lines(r.stderr, phase)
        assert lines[0] == f"{phase}: 0/{turns} turns", r.stderr
        assert re.fullmatch(rf"{phase}: {turns}/{turns} turns \(100%\), [\d.,]+ turns/s, elapsed 0:00:\d\d, done", lines[-1])
    assert "━" not in r.stderr  # no bar drawn into the log
    # the user can still turn them off
    quiet = _run("eval", "--split", str(data), "--out", str(tmp_path / "ref"), "-k", "1", "--seeds", "1",
                 "--verify-workers", "1", env={"STUDYBENCH_PROGRESS": "0"})
    assert quiet.returncode == 0 and not _phase_lines(quiet.stderr, "generate")
    with start_stub_server(judge_reply_fn(lambda x: False), model="stub-judge") as judge:
        r = _run("judge", str(run), "--judge-model", "stub-judge", "--judge-base-url", judge.base_url,
                 env={"STUDYBENCH_JUDGE_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    lines = _phase_lines(r.stderr, "llm judge")
    candidates = re.search(r"llm judge stub-judge: (\d+) candidates", r.stderr)
    assert candidates is not None and int(candidates.group(1)) > 0, r.stderr
    assert lines[0] == "llm judge: started" and lines[-1].startswith(f"llm judge: {candidates.group(1)} turns, "), r.stderr


@pytest.mark.slow
def test_build_retrieve_prints_progress_lines_when_piped(tmp_path: Path) -> None:
    kp = {"type": "law_or_equation", "name": "Gauss's law", "description": "Flux through a closed surface.",
          "keywords": ["electric flux"]}
    rec = {"source": "X", "year": "2020", "source_problem_id": "1", "problem_type": "EM", "problem": "p",
           "sub_problems": [{"problem_id": "1", "answer": "\\boxed{1}", "answer_type": "NV", "type_sequence": "NV",
                             "knowledge_points": [kp]}]}
    split = tmp_path / "t.json"
    split.write_text(json.dumps([rec]), encoding="utf-8")
    work = tmp_path / "w"
    n = len(write_fragments(work))
    r = _run("build", "retrieve", "--work", str(work), "--from-split", str(split), "--mode", "bm25", "--top-n", "2")
    assert r.returncode == 0, r.stderr
    assert _phase_lines(r.stderr, "indexing fragments")[0] == f"indexing fragments: 0/{n}", r.stderr
    assert _phase_lines(r.stderr, "indexing fragments")[-1].startswith(f"indexing fragments: {n}/{n} (100%)")
    assert _phase_lines(r.stderr, "retrieving KPs")[-1].startswith("retrieving KPs: 1/1 (100%), ")
