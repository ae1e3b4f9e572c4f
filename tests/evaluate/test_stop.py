"""Runs that stop early stop well, end to end through the CLI: a dead endpoint ends the run with a
message and an incomplete report; Ctrl-C and SIGTERM end it with one line; re-running resumes."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _support import count_lines, parent, sub, wait_for, write_set

from studybench.testing import start_stub_server

N_PARENTS = 12
TURNS = sum(1 + i % 3 for i in range(N_PARENTS)) * 3 * 2  # k=3, two seeds


def _cmd(data: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "stub-model", "--base-url",
            base_url, "-k", "3", "--seeds", "2", "--out", str(out), "--concurrency", "2", "--verify-workers", "1",
            "--max-retries", "1", *extra]


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]


def _usable(out: Path) -> set[tuple]:
    last = {(r["parent"], r["sub_id"], r["seed"], r["attempt"]): r for r in _rows(out)}
    return {k for k, r in last.items() if not r["error"]}


@pytest.mark.slow
def test_a_dead_endpoint_stops_the_run_which_reports_itself_incomplete_and_resumes(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", N_PARENTS)
    out = tmp_path / "run"
    server = start_stub_server("Work.\nFinal Answer: \\boxed{1}", subprocess=True, latency=0.05)
    try:
        proc = subprocess.Popen(_cmd(data, out, server.base_url, "--max-consecutive-failures", "3"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: count_lines(out / "generations.jsonl") >= 10, proc)
    finally:
        server.close()  # the endpoint dies mid-run
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    done = _usable(out)
    m = re.search(r"error: the endpoint stopped answering at \d\d:\d\d:\d\d \(3 turns in a row failed \(connection error"
                  r"[^)]*\) after 2 attempts\)\); (\d+) turns done, (\d+) left; the run is incomplete \(the report says so\); "
                  r"re-run the same command to resume once the endpoint is back", " ".join(stderr.split()))
    assert m, stderr
    assert (int(m.group(1)), int(m.group(2))) == (len(done), TURNS - len(done))
    # it stopped instead of trying every remaining turn: failed turns are the streak plus those in flight
    failed = [r for r in _rows(out) if r["error"]]
    assert 3 <= len(failed) <= 3 + 2
    assert len(done) + len(failed) < TURNS - 20
    rep = json.loads((out / "report.json").read_text())
    assert rep["complete"] is False and rep["not_generated"] > 0
    assert "**Incomplete run:" in (out / "report.md").read_text()
    assert "incomplete run:" in stderr
    # the endpoint is back (another port: an operational change): the same command resumes and finishes
    with start_stub_server("Work.\nFinal Answer: \\boxed{1}") as again:
        r = subprocess.run(_cmd(data, out, again.base_url), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert again.count == TURNS - len(done)  # no finished turn asked twice
    rep = json.loads((out / "report.json").read_text())
    assert rep["complete"] is True and rep["not_generated"] == 0
    assert "Incomplete" not in (out / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_ends_with_one_line_and_resumes(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    data = write_set(tmp_path / "set.json", N_PARENTS)
    out = tmp_path / "run"
    with start_stub_server("Work.\nFinal Answer: \\boxed{1}", latency=0.3) as srv:
        # a shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored:
        # give the child the default a terminal's Ctrl-C meets, whatever ran these tests
        proc = subprocess.Popen(_cmd(data, out, srv.base_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        wait_for(lambda: count_lines(out / "generations.jsonl") >= 4, proc)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == code, stderr
        assert "Traceback" not in stderr and "Aborted" not in stderr
        saved = _usable(out)
        last = stderr.strip().splitlines()[-1]
        assert last == (f"interrupted: {len(saved)} of {TURNS} turns generated and saved; "
                        "re-run the same command to resume")
        assert 4 <= len(saved) < TURNS
        n = srv.count
        r = subprocess.run(_cmd(data, out, srv.base_url), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert srv.count - n == TURNS - len(saved)
    keys = Counter((r["parent"], r["sub_id"], r["seed"], r["attempt"]) for r in _rows(out))
    assert len(keys) == TURNS and max(keys.values()) == 1  # turns in flight at the signal were not written
    assert json.loads((out / "report.json").read_text())["complete"] is True


def test_a_dead_endpoint_is_noticed_from_request_attempts_not_after_every_turns_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At the default of six retries with backoff, a turn takes about a minute to fail for good; counting
    failed turns, a dead endpoint was noticed only after several minutes. Counting unanswered request
    attempts across all turns in flight, the pass stops while those turns are still retrying."""
    import threading

    from studybench.evaluate import EndpointStoppedError, EvalSpec, run_eval
    from studybench.evaluate import generate as generate_mod

    monkeypatch.setattr(generate_mod, "DEAD_ENDPOINT_GRACE_S", 0.5)
    data = write_set(tmp_path / "set.json", N_PARENTS)
    out = tmp_path / "run"
    server = start_stub_server("Work.\nFinal Answer: \\boxed{1}", subprocess=True, latency=0.05)

    def kill_when_started() -> None:
        try:
            while count_lines(out / "generations.jsonl") < 6:
                threading.Event().wait(0.05)
        finally:
            server.close()

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    spec = EvalSpec(split=str(data), model="stub-model", base_url=server.base_url, k=3, seeds=[0, 1],
                    concurrency=4, verify_workers=1)  # max_retries: the default (6)
    with pytest.raises(EndpointStoppedError) as info:
        run_eval(spec, out)
    killer.join(timeout=60)
    stats = info.value.result.generation
    assert stats is not None and stats.stopped is not None
    assert "requests in a row got no answer" in stats.stopped, stats.stopped
    # no turn ran out of its retries: every turn in flight was cancelled while still retrying
    assert [r for r in _rows(out) if r["error"]] == []
    assert stats.left > 0 and len(_usable(out)) == stats.done


def test_a_slow_endpoint_behind_a_flaky_proxy_is_not_taken_for_dead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replies take longer than the grace period and a proxy answers the newer requests with HTTP 503
    meanwhile: the requests the server is still working on keep the endpoint alive."""
    from studybench.evaluate import EvalSpec, run_eval
    from studybench.evaluate import generate as generate_mod
    from studybench.testing import Fault

    monkeypatch.setattr(generate_mod, "DEAD_ENDPOINT_GRACE_S", 0.5)
    data = tmp_path / "set.json"
    write_set(data, [parent(f"P{i}", [sub("a", "\\boxed{1}", problem="Q1: speed?")], problem="A block.") for i in range(12)])
    with start_stub_server("Work.\nFinal Answer: \\boxed{1}") as srv:
        for n in range(6):  # the first six requests: answered after 3 s
            srv.fault_at(n, Fault("slow", delay=3.0))
        for n in range(6, 30):  # then a burst of 503s (each turn retries a few times, well within its 6 retries)
            srv.fault_at(n, Fault("status", status=503, retry_after=0.3))
        result = run_eval(EvalSpec(split=str(data), model="stub-model", base_url=srv.base_url, k=1, seeds=[0],
                                   concurrency=12, verify_workers=1), tmp_path / "run")
    assert result.generation is not None and result.generation.stopped is None
    assert [r for r in _rows(tmp_path / "run") if r["error"]] == [] and len(_usable(tmp_path / "run")) == 12
