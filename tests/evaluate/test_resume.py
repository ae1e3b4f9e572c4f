"""End to end through the `studybench` CLI against the local stub server: a run SIGKILLed at
several moments and then resumed with the same command ends with the same report as an
uninterrupted run, with no duplicate or torn rows and no finished turn generated twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from _support import REPO, baseline, deadline

from studybench.testing import Script, start_stub_server

N_PARENTS = 12


def _dataset(path: Path) -> None:
    parents = []
    for i in range(N_PARENTS):
        n_sub = 1 + i % 3
        subs = [
            {
                "problem_id": f"P{i}({chr(97 + j)})",
                "problem": f"item-{i}-{j}: compute the quantity.",
                "answer": f"\\boxed{{{i + j}}}",
                "answer_type": "NV",
                "type_sequence": "",
            }
            for j in range(n_sub)
        ]
        parents.append(
            {
                "source": "Synthetic",
                "year": "2024",
                "source_problem_id": f"P{i}",
                "problem_type": ["Mechanics", "Optics"][i % 2],
                "problem": f"Stem of problem {i}.",
                "answer": "",
                "answer_type": "",
                "type_sequence": "",
                "sub_problems": subs,
            }
        )
    path.write_text(json.dumps(parents))


def _script() -> Script:
    # deterministic replies per sub-problem: right for even i+j, wrong (off by 100) otherwise
    rules = []
    for i in range(N_PARENTS):
        for j in range(1 + i % 3):
            val = i + j if (i + j) % 2 == 0 else i + j + 100
            rules.append({"match": rf"item-{i}-{j}:", "reply": f"<think>t</think>Work.\nFinal Answer: \\boxed{{{val}}}"})
    return Script(rules=rules, default="no answer")


def _cmd(data: Path, out: Path, base_url: str) -> list[str]:
    return [
        sys.executable, "-m", "studybench.cli", "eval",
        "--split", str(data), "--model", "stub-model", "--base-url", base_url,
        "-k", "3", "--seeds", "2", "--out", str(out), "--concurrency", "3",
        "--verify-workers", "1", "--max-retries", "2",
    ]


def _lines(p: Path) -> int:
    try:
        return p.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _run_and_kill_at(cmd: list[str], log: Path, at_rows: int, timeout: float = 60) -> bool:
    """Start the command, SIGKILL it once ``log`` has ``at_rows`` rows; False if it finished first."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < timeout:
        if _lines(log) >= at_rows:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.002)
    proc.wait(timeout=timeout)
    return False


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    _dataset(data)
    total_turns = sum(1 + i % 3 for i in range(N_PARENTS)) * 3 * 2
    with start_stub_server(_script(), latency=0.01) as srv:
        clean = tmp_path / "clean"
        r = subprocess.run(_cmd(data, clean, srv.base_url), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        clean_requests = srv.count
        assert clean_requests == total_turns

        killed = tmp_path / "killed"
        gen_log = killed / "generations.jsonl"
        kills = 0
        for at in (10, 40, 75):
            kills += _run_and_kill_at(_cmd(data, killed, srv.base_url), gen_log, at)
        assert kills >= 2, "the run finished before it could be killed"
        r = subprocess.run(_cmd(data, killed, srv.base_url), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "resuming" in r.stderr

    # no torn rows, and no turn generated twice: one row per key
    raw = gen_log.read_bytes()
    assert raw.endswith(b"\n")
    rows = [json.loads(x) for x in raw.splitlines()]
    keys = Counter((r["parent"], r["sub_id"], r["seed"], r["attempt"]) for r in rows)
    assert len(keys) == total_turns
    assert max(keys.values()) == 1, [k for k, v in keys.items() if v > 1]
    # requests beyond the minimum are only turns in flight at a kill (at most concurrency each)
    killed_requests = srv.count - clean_requests
    assert total_turns <= killed_requests <= total_turns + 3 * kills

    a = json.loads((clean / "report.json").read_text())
    b = json.loads((killed / "report.json").read_text())
    for field in ("k", "seeds", "par_at_k", "sub_at_k", "breakdowns", "turns", "unsolved_sub_problems"):
        assert a[field] == b[field], field
    # sanity: the scripted answers make the metrics non-trivial
    assert 0 < a["sub_at_k"]["mean"] < 100
    jrows = [json.loads(x) for x in (killed / "judgements.jsonl").read_bytes().splitlines()]
    assert len({(r["parent"], r["sub_id"], r["seed"], r["attempt"]) for r in jrows}) == total_turns


@pytest.mark.slow
def test_kill_during_judging_then_only_verify(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    _dataset(data)
    with start_stub_server(_script()) as srv:
        out = tmp_path / "run"
        r = subprocess.run([*_cmd(data, out, srv.base_url), "--only-generate"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert not (out / "judgements.jsonl").exists() and not (out / "report.json").exists()
        n = srv.count
        # judge, killed almost at once, then finish with --only-verify: no new requests
        _run_and_kill_at([*_cmd(data, out, srv.base_url), "--only-verify"], out / "judgements.jsonl", 1)
        r = subprocess.run([*_cmd(data, out, srv.base_url), "--only-verify"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert srv.count == n
    rep = json.loads((out / "report.json").read_text())
    assert rep["turns"]["missing_judgements"] == 0
    assert 0 < rep["par_at_k"]["mean"] < 100


def test_resume_refuses_a_different_model(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    _dataset(data)
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "reference", "-k", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    r2 = subprocess.run(
        [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "other", "--base-url",
         "http://127.0.0.1:9/v1", "-k", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert r2.returncode == 2
    # one line in the words of the command line, with the fix; no dictionaries
    assert (f"{out} holds another run: it was made with --model 'reference' (the reference backend) and you asked for "
            "'other' (the openai backend); use another --out for a new run") in r2.stderr
    assert len(r2.stderr.strip().splitlines()) == 1 and "{" not in r2.stderr


def test_failed_turns_exit_1_then_retry_and_only_judge_needs_no_endpoint(tmp_path: Path) -> None:
    from studybench.testing import Fault

    data = tmp_path / "synthetic.json"
    _dataset(data)
    out = tmp_path / "run"
    with start_stub_server(_script()) as srv:
        srv.fault_when(r"item-1-0:", Fault(kind="status", status=500))
        cmd = [*_cmd(data, out, srv.base_url), "--max-retries", "1"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, r.stderr
        assert "turn failed" in r.stderr and "HTTP 500" in r.stderr
        rep = json.loads((out / "report.json").read_text())
        # P1 has 2 subs; sub 0 fails in all 3 x 2 attempts, sub 1 then sees the placeholder
        assert rep["turns"]["failed"] == 6
        srv.clear_faults()
        # a different port / concurrency is an operational change: resuming is allowed
        r = subprocess.run([*cmd[:-2], "--concurrency", "5"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["turns"]["failed"] == 0
    # judge again offline: no --base-url, the server is gone
    r = subprocess.run(
        [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "stub-model", "-k", "3",
         "--seeds", "2", "--out", str(out), "--only-verify", "--verify-timeout", "7"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "report.json").read_text())["sub_at_k"] == rep["sub_at_k"]


def test_unreachable_endpoint_fails_fast(tmp_path: Path) -> None:
    data = tmp_path / "synthetic.json"
    _dataset(data)
    # the time of a command that does nothing is the baseline; retrying 6 times with backoff would take minutes
    base = baseline(lambda: subprocess.run([sys.executable, "-m", "studybench.cli", "version"], capture_output=True, timeout=120), 1)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "m", "--base-url",
         "http://127.0.0.1:9/v1", "-k", "1", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2 and "cannot reach the endpoint" in r.stderr
    assert time.monotonic() - t0 < deadline(0.0, base, hang=120.0)


# A run directory written before EvalSpec had parts (f51c815: a manifest without ``config``) resumes
# with today's code to the same report. Made two ways: by the code of that commit itself, taken
# from the repository's history when it is there (a shallow clone has no history: then skipped),
# and by today's code with the manifest written as that commit wrote it (``config`` dropped, the only
# manifest field the parts added).
BEFORE_PARTS = "f51c815"
_OLD_RUN = (
    "import sys\n"
    "from studybench.evaluate import EvalSpec, run_eval\n"
    "run_eval(EvalSpec(split=sys.argv[1], model='reference', k=2, seeds=[0, 1], limit=8), sys.argv[2])\n"
)


def _run_made_before_parts(how: str, data: Path, out: Path, tmp: Path) -> None:
    if how == "flat manifest":
        subprocess.run([sys.executable, "-c", _OLD_RUN, str(data), str(out)], check=True, capture_output=True)
        man = json.loads((out / "manifest.json").read_text())
        del man["config"]
        (out / "manifest.json").write_text(json.dumps(man, indent=2) + "\n")
        return
    root = REPO
    have = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{BEFORE_PARTS}^{{commit}}"], capture_output=True)
    if have.returncode != 0:
        pytest.skip(f"the repository's history lacks {BEFORE_PARTS} (a shallow clone)")
    archive = subprocess.run(["git", "-C", str(root), "archive", BEFORE_PARTS, "src/studybench"], check=True,
                             capture_output=True).stdout
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp / "old", filter="data")
    env = {**os.environ, "PYTHONPATH": str(tmp / "old" / "src")}
    subprocess.run([sys.executable, "-c", _OLD_RUN, str(data), str(out)], check=True, capture_output=True, env=env)


@pytest.mark.parametrize("how", [BEFORE_PARTS, "flat manifest"])
def test_a_run_made_before_the_nested_configuration_resumes_to_the_same_report(how: str, tmp_path: Path) -> None:
    from studybench.evaluate import EvalSpec, run_eval
    from studybench.store import RunStore

    data, out = tmp_path / "set.json", tmp_path / "run"
    _dataset(data)
    _run_made_before_parts(how, data, out, tmp_path)
    before = json.loads((out / "manifest.json").read_text())
    assert "config" not in before and "k" in before and "backend" in before  # the flat record of the run
    old_report = json.loads((out / "report.json").read_text())
    assert RunStore(out).read_manifest().config is None  # loads as it is
    result = run_eval(EvalSpec(split=str(data), model="reference", k=2, seeds=[0, 1], limit=8), out)
    assert result.generation is not None and result.generation.generated == 0  # resumed: nothing asked again
    assert result.generation.reused == result.report["turns"]["expected"] > 0
    new_report = json.loads(json.dumps(result.report))
    if how == BEFORE_PARTS:  # fields reports gained after that commit: the errata block names its test set
        added = {f: new_report["errata"].pop(f) for f in ("split", "official_test_set")}
        assert added == {"split": "set", "official_test_set": False}
    assert new_report == old_report
    after = RunStore(out).read_manifest()
    assert after.config is not None and after.config["data"]["k"] == 2 and after.created == before["created"]
