"""Runs that fail well: one writer per run directory, explicit settings win, refusals that say why
in one line, a full disk named as such; the dead endpoint and Ctrl-C/SIGTERM are in test_stop.py."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest
from _support import count_lines, wait_for, write_set
from typer.testing import CliRunner

import studybench.files as files
from studybench.cli import app
from studybench.datasets import load_dataset
from studybench.evaluate import EvalError, EvalSpec, prepare_eval, resume_refusal, run_plan
from studybench.files import JsonlLog, atomic_write_text
from studybench.models import PRESETS
from studybench.store import Manifest, ParentIndex, RunDirInUseError, RunStore, SplitInfo, SubIndex
from studybench.testing import start_stub_server


def _invoke(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


# ----------------------------------------------------------------------------- 4: one writer at a time


def _eval_cmd(data: Path, out: Path, base_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "--model", "stub-model", "--base-url",
            base_url, "-k", "2", "--seeds", "2", "--out", str(out), "--concurrency", "2", "--verify-workers", "1", *extra]


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
def test_a_second_writer_is_refused_and_a_killed_writer_leaves_no_stale_lock(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json")
    out = tmp_path / "run"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Another system prompt.")
    with start_stub_server(latency=1.0) as srv:  # 48 turns, 2 at a time: the first run lasts until it is killed
        first = subprocess.Popen(_eval_cmd(data, out, srv.base_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True)
        try:
            wait_for(lambda: count_lines(out / "generations.jsonl") >= 1, first)
            for extra in ([], ["--system-prompt", str(prompt)]):  # the same run, and another configuration
                r = subprocess.run(_eval_cmd(data, out, srv.base_url, *extra), capture_output=True, text=True, timeout=120)
                assert r.returncode == 1, r.stderr
                assert f"run directory {out} is in use by pid {first.pid} (studybench eval --split" in r.stderr
                assert "wait for it to finish or stop it" in r.stderr and "Traceback" not in r.stderr
            assert first.poll() is None
            os.killpg(first.pid, signal.SIGKILL)  # a crash: the kernel drops the lock with the process
            first.wait(30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(30)
            assert first.stderr is not None
            first.stderr.close()
        r = subprocess.run(_eval_cmd(data, out, srv.base_url), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "resuming" in r.stderr
    rows = [json.loads(x) for x in (out / "generations.jsonl").read_text().splitlines()]
    keys = [(r["parent"], r["sub_id"], r["seed"], r["attempt"]) for r in rows]
    # every request came from one writer at a time: no turn was asked twice (a killed run's turns in flight aside)
    assert len(keys) - len(set(keys)) <= 2
    assert json.loads((out / "report.json").read_text())["complete"] is True


def test_the_lock_names_its_holder_and_is_reentrant_in_one_thread_only(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 2)
    store = RunStore(tmp_path / "run")
    with store.lock(command="studybench eval --out run"):
        with store.lock():  # re-entrant: run_plan inside a caller's lock
            pass
        holder = json.loads(store.lock_path.read_text())
        assert holder["pid"] == os.getpid() and holder["command"] == "studybench eval --out run"
        errors: list[BaseException] = []

        def other_thread() -> None:
            try:
                run_plan(prepare_eval(EvalSpec(split=str(data), k=1, seeds=[0]), store.root))
            except BaseException as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

        t = threading.Thread(target=other_thread)
        t.start()
        t.join(60)
        assert len(errors) == 1 and isinstance(errors[0], RunDirInUseError)
        assert "studybench eval --out run" in str(errors[0])
        r = subprocess.run([sys.executable, "-m", "studybench.cli", "eval", "--split", str(data), "-k", "1", "--seeds", "1",
                            "--out", str(store.root)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and f"is in use by pid {os.getpid()} (studybench eval --out run" in r.stderr
        assert not store.exists()  # refused before writing anything
    # released: the lock file stays (deleting it would be racy) but names nobody; a writer gets in
    assert store.lock_path.read_text() == ""
    res = run_plan(prepare_eval(EvalSpec(split=str(data), k=1, seeds=[0]), store.root))
    assert res.report is not None and res.report["complete"] is True


def test_judge_refuses_a_run_directory_in_use(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 2)
    out = tmp_path / "run"
    assert _invoke("eval", "--split", data, "-k", 1, "--seeds", 1, "--out", out).exit_code == 0
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom studybench.store import RunStore\n"
                               "with RunStore(sys.argv[1]).lock('studybench eval (test holder)'):\n"
                               "    print('locked', flush=True)\n    time.sleep(120)\n", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        res = _invoke("judge", out, "--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1")
        assert res.exit_code == 1
        assert f"run directory {out} is in use by pid {holder.pid} (studybench eval (test holder)" in " ".join(res.output.split())
    finally:
        holder.kill()
        holder.wait(30)
        assert holder.stdout is not None
        holder.stdout.close()


def test_a_plan_prepared_before_another_writer_finished_is_refused(tmp_path: Path) -> None:
    # two invocations prepared at the same time with different configurations: the second to run must not mix
    data = write_set(tmp_path / "set.json", 2)
    playbook = tmp_path / "playbook.md"
    playbook.write_text("Check units.")
    a = prepare_eval(EvalSpec(split=str(data), k=1, seeds=[0]), tmp_path / "run")
    b = prepare_eval(EvalSpec(split=str(data), k=1, seeds=[0], playbook=playbook), tmp_path / "run")
    run_plan(a)
    with pytest.raises(EvalError, match=r"holds another run: it was made without --playbook: leave --playbook out"):
        run_plan(b)
    rows = (tmp_path / "run" / "generations.jsonl").read_text().splitlines()
    assert len(rows) == 3  # only the first configuration's turns


# ----------------------------------------------------------------------------- 6: a full disk


class _FullDisk:
    """``os`` for :mod:`studybench.files` whose ``write`` fails with ENOSPC after ``allowed`` calls."""

    def __init__(self, allowed: int, partial: bool = False) -> None:
        self.allowed = allowed
        self.partial = partial
        self.calls = 0

    def module(self) -> types.ModuleType:
        fake = types.ModuleType("os")
        fake.__dict__.update(os.__dict__)

        def write(fd: int, data: Any) -> int:
            self.calls += 1
            if self.calls > self.allowed:
                if self.partial and self.calls == self.allowed + 1:
                    return os.write(fd, bytes(data)[: len(data) // 2])  # half a line, then the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return os.write(fd, data)

        fake.write = write  # type: ignore[attr-defined]
        return fake


def test_a_full_disk_names_the_file_and_the_run_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_set(tmp_path / "set.json")
    out = tmp_path / "run"
    monkeypatch.setattr(files, "os", _FullDisk(allowed=5).module())
    res = _invoke("eval", "--split", data, "-k", 2, "--seeds", 1, "--out", out, "--verify-workers", 1)
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert f"error: cannot write {out / 'generations.jsonl'}: No space left on device" in text
    assert "free some space, then re-run the same command and it resumes from what is saved" in text
    monkeypatch.undo()
    assert count_lines(out / "generations.jsonl") == 5  # nothing written before was lost
    again = _invoke("eval", "--split", data, "-k", 2, "--seeds", 1, "--out", out, "--verify-workers", 1)
    assert again.exit_code == 0, again.output
    assert "(5 reused, 0 failed)" in again.output


def test_file_helpers_name_the_file_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    fake = types.ModuleType("os")
    fake.__dict__.update(os.__dict__)

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    fake.fsync = fsync  # type: ignore[attr-defined]
    monkeypatch.setattr(files, "os", fake)
    with pytest.raises(OSError) as e:
        atomic_write_text(target, "new")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target)
    monkeypatch.undo()
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_torn_append_is_repaired_before_the_next_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = JsonlLog(tmp_path / "log.jsonl")
    log.append({"n": 1})
    monkeypatch.setattr(files, "os", _FullDisk(allowed=0, partial=True).module())
    with pytest.raises(OSError) as e:
        log.append({"n": 2, "pad": "x" * 100})
    assert e.value.filename == str(log.path)
    monkeypatch.undo()
    log.append({"n": 3})  # space freed: the half line is dropped first, not glued to this row
    log.close()
    assert [r["n"] for r in log.rows()] == [1, 3]
    assert log.path.read_bytes().count(b"\n") == 2


# ----------------------------------------------------------------------------- 15: explicit settings win


def test_an_explicit_data_dir_that_does_not_exist_is_an_error_whatever_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    write_set(env_dir / "transfer.json", 2)
    monkeypatch.setenv("STUDYBENCH_DATA", str(env_dir))
    typo = tmp_path / "dta"
    res = _invoke("eval", "--split", "transfer", "--data-dir", typo, "-k", 1, "--seeds", 1, "--out", tmp_path / "run")
    assert res.exit_code == 2
    assert f"error: --data-dir: {typo} is not a directory" in " ".join(res.output.split())
    assert not (tmp_path / "run").exists()
    # the environment alone is used when no --data-dir is given
    ok = _invoke("eval", "--split", "transfer", "-k", 1, "--seeds", 1, "--out", tmp_path / "run")
    assert ok.exit_code == 0, ok.output


def test_out_pointing_at_a_non_empty_directory_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 2)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    res = _invoke("eval", "--split", data, "-k", 1, "--seeds", 1, "--out", out)
    assert res.exit_code == 2
    assert (f"error: --out: {out} is not empty and holds no run (no manifest.json; it has notes.txt); "
            "give a new or empty directory") in " ".join(res.output.split())
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    # an empty directory, or one left with only the lock file of a writer that died early, is fine
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / RunStore.LOCK).write_text("")
    assert _invoke("eval", "--split", data, "-k", 1, "--seeds", 1, "--out", fresh).exit_code == 0


# ----------------------------------------------------------------------------- 16: refusals that say why


def _manifest(**kw: Any) -> Manifest:
    base: dict[str, Any] = {
        "split": SplitInfo(name="transfer", path="/data/transfer.json", sha256="aaa"), "k": 2, "seeds": [0],
        "backend": {"backend": "openai", "model": "m", "base_url": "http://a/v1", "sampling": PRESETS["paper"].to_dict(),
                    "prompt_token_estimate": "chars/3", "concurrency": 8},
        "artefacts": {"digests": {}},
        "parents": [ParentIndex(uid="S//P1", subs=[SubIndex(id="P1", answer_type="NV")])],
    }
    base.update(kw)
    return Manifest(**base)


def _backend(**kw: Any) -> dict[str, Any]:
    return {"backend": "openai", "model": "m", "base_url": "http://b/v1", "sampling": PRESETS["paper"].to_dict(),
            "prompt_token_estimate": "chars/3", "concurrency": 64, **kw}


@pytest.mark.parametrize("change,preset,message", [
    ({"split": SplitInfo(name="application", path="/data/application.json", sha256="bbb")}, "paper",
     "it holds the transfer split and you asked for application; use another --out for a new run"),
    ({"split": SplitInfo(name="transfer", path="/data/transfer.json", sha256="ccc")}, "paper",
     "the transfer test-set file (/data/transfer.json) changed since the run was made (sha256 aaa -> ccc), and a run "
     "cannot mix two versions of a test set; use another --out for a new run"),
    ({"backend": _backend(sampling=PRESETS["none"].to_dict(), prompt_token_estimate=None)}, "none",
     "it was started with --preset paper and you ran without --preset: give --preset paper "
     "(or use another --out for a new run)"),
    ({"backend": _backend(sampling={**PRESETS["paper"].to_dict(), "temperature": 0.6})}, "paper",
     "its sampling differs: it was made with --temperature 1.0 (now 0.6): give the same sampling flags "
     "(or use another --out for a new run)"),
    ({"backend": _backend(model="other")}, "paper",
     "it was made with --model 'm' and you asked for 'other'; use another --out for a new run"),
    ({"artefacts": {"digests": {"system_prompt": "s1"}}}, "paper",
     "it was made without --system-prompt: leave --system-prompt out (or use another --out for a new run)"),
], ids=["split", "split-file-changed", "preset-forgotten", "temperature", "model", "system-prompt-added"])
def test_resume_refusals_say_what_differs_in_user_terms(change: dict[str, Any], preset: str, message: str) -> None:
    old = _manifest()
    new = _manifest(**{"backend": _backend(), **change})
    text = resume_refusal("runs/x", old, new, preset)
    assert text == f"runs/x holds another run: {message}"
    assert "\n" not in text and "{" not in text and "prompt_token_estimate" not in text
    assert resume_refusal("runs/x", old, _manifest(backend=_backend()), "paper") is None  # operational changes only


def test_forgetting_preset_paper_on_resume_is_one_line_with_the_fix(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set.json", 2)
    out = tmp_path / "run"
    with start_stub_server() as srv:
        base = ["eval", "--split", data, "--model", "m", "--base-url", srv.base_url, "-k", 1, "--seeds", 1, "--out", out,
                "--verify-workers", 1]
        assert _invoke(*base, "--preset", "paper").exit_code == 0
        n = srv.count
        res = _invoke(*base)
        assert srv.count == n
    assert res.exit_code == 2
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert lines == [f"error: {out} holds another run: it was started with --preset paper and you ran without --preset: "
                     "give --preset paper (or use another --out for a new run)"]


def test_a_different_split_in_the_run_directory_is_named(tmp_path: Path) -> None:
    a = write_set(tmp_path / "alpha.json", 2)
    b = write_set(tmp_path / "beta.json", 3)
    ds = load_dataset(a)
    assert ds.name == "alpha"
    assert _invoke("eval", "--split", a, "-k", 1, "--seeds", 1, "--out", tmp_path / "run").exit_code == 0
    res = _invoke("eval", "--split", b, "-k", 1, "--seeds", 1, "--out", tmp_path / "run")
    assert res.exit_code == 2
    assert ("holds another run: it holds the alpha split and you asked for beta; use another --out for a new run"
            in " ".join(res.output.split()))


def test_generate_turns_stops_when_the_endpoint_stops_answering(tmp_path: Path) -> None:
    # the generation pass alone: a backend that answers 5 turns, then refuses every connection
    from studybench.evaluate import RunScope, generate_turns
    from studybench.models.base import ChatRequest, ChatResult
    from studybench.protocol import Artefacts

    class Dying:
        name = "dying"

        def __init__(self, answers: int, error: str) -> None:
            self.calls = 0
            self.answers = answers
            self.error = error

        async def complete(self, request: ChatRequest) -> ChatResult:
            self.calls += 1
            await asyncio.sleep(0.001)
            if self.calls <= self.answers:
                return ChatResult("Final Answer: \\boxed{0}")
            return ChatResult("", error=self.error, attempts=3)

        async def aclose(self) -> None:
            pass

        def describe(self) -> dict[str, Any]:
            return {"backend": "dying", "model": "dying"}

    ds = load_dataset(write_set(tmp_path / "set.json", 12))
    scope = RunScope(ds.name, ds.parents, 4, [0, 1])
    dead = Dying(5, "connection error (ConnectError) after 3 attempts")
    st = asyncio.run(generate_turns(scope, RunStore(tmp_path / "a"), dead, Artefacts(), concurrency=4, max_consecutive_failures=6))
    assert st.stopped is not None and "6 turns in a row failed (connection error" in st.stopped
    # requests after the death: the streak plus what was in flight, not every remaining turn
    assert dead.calls - 5 <= 6 + 4 < scope.n_turns - 5
    usable = [r for r in RunStore(tmp_path / "a").latest_generations().values() if not r.error]
    assert st.done == len(usable) <= 5 and st.left == scope.n_turns - len(usable)
    # an endpoint that answers with an error (HTTP 400) is alive: the pass runs to the end
    alive = Dying(5, "HTTP 400 after 1 attempt: context too long")
    st = asyncio.run(generate_turns(scope, RunStore(tmp_path / "b"), alive, Artefacts(), concurrency=4, max_consecutive_failures=6))
    assert st.stopped is None and alive.calls == scope.n_turns - st.reused


def test_a_lock_file_that_is_a_symlink_is_never_followed(tmp_path: Path) -> None:
    # a run directory from elsewhere (a tarball) whose .lock points at another file: that file is not truncated
    data = write_set(tmp_path / "set.json", 2)
    out = tmp_path / "run"
    assert _invoke("eval", "--split", data, "-k", 1, "--seeds", 1, "--out", out).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / ".lock").unlink()
    (out / ".lock").symlink_to(victim)
    res = _invoke("eval", "--split", data, "-k", 1, "--seeds", 1, "--out", out)
    assert res.exit_code == 1 and "the lock file is a symbolic link (never followed); remove it" in res.output, res.output
    assert victim.read_text() == "precious\n"
    (out / ".lock").unlink()
    (out / ".lock").mkdir()
    res = _invoke("eval", "--split", data, "-k", 1, "--seeds", 1, "--out", out)
    assert res.exit_code == 1 and ".lock" in res.output, res.output


def test_the_lock_file_holds_no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the lock file lies in the run directory and a refused writer prints it
    monkeypatch.setenv("OPENAI_API_KEY", "envkey-Zq8Wc3Rt6Yu1Io4P")
    monkeypatch.setattr(sys, "argv", ["studybench", "eval", "--base-url", "http://u:pw-Hx7Kd2Lm9Nq4@127.0.0.1:9/v1",
                                      "--note", "envkey-Zq8Wc3Rt6Yu1Io4P", "--api-key", "flagkey-Vb5Nm8Qw2Er7"])
    store = RunStore(tmp_path / "run")
    with store.lock():
        text = store.lock_path.read_text()
    assert "studybench eval --base-url" in text
    for secret in ("pw-Hx7Kd2Lm9Nq4", "envkey-Zq8Wc3Rt6Yu1Io4P", "flagkey-Vb5Nm8Qw2Er7"):
        assert secret not in text, text


def test_forgetting_preset_paper_is_named_when_the_run_also_had_its_own_budget() -> None:
    """The new user's case: `--preset paper --max-tokens 4096`, then the same without `--preset`. The old
    wording listed every expanded sampling flag and never named the preset."""
    old = _manifest(backend=_backend(sampling={**PRESETS["paper"].to_dict(), "max_tokens": 4096}))
    new = _manifest(backend=_backend(sampling={**PRESETS["none"].to_dict(), "max_tokens": 4096}, prompt_token_estimate=None))
    text = resume_refusal("runs/x", old, new, "none")
    assert text is not None and "started with --preset paper" in text
    assert "give --preset paper --max-tokens 4096" in text and "--top-p" not in text
