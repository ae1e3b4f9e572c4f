"""The table of exit statuses (docs/exit-statuses.md, once the README's), checked against the commands (issue 24 item 6).

- A full disk: every command that writes files, run in a real subprocess whose file system refuses
  every write under one directory with ``ENOSPC`` (simulated at the ``os`` / ``io`` level: creating a
  file or directory there fails), exits with the table's status for "a file could not be written", on
  one line, never a traceback. (``report`` and ``consistency`` used to exit 2, the others 1.) Each
  command first runs on a writable disk and exits 0, so the status comes from the disk.
- An ``--out`` name over 255 characters: the table's usage status, on one line (it used to be a
  traceback), and a NUL byte or escape sequence in a name is never printed raw.
- Every command of the CLI is classified below (writes / writes no file / cannot be simulated here,
  with the reason), so a new command cannot escape the check.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from _support import REPO, parent, sub, write_set
from typer.testing import CliRunner

import studybench
from studybench.cli import app
from studybench.testing.stub_judge import format_verdict
from studybench.testing.stub_server import Reply, start_stub_server

ROOT = REPO
SRC = str(Path(studybench.__file__).resolve().parent.parent)


def readme_statuses() -> dict[str, int]:
    """The table of docs/exit-statuses.md: ``{"written": status, "usage": status, "budget": status, "ok": status}``."""
    section = (ROOT / "docs" / "exit-statuses.md").read_text(encoding="utf-8")
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+)(?: / \d+)? \| (.+) \|$", section, re.M)}
    out = {"ok": next(s for s, t in rows.items() if t.startswith("done")),
           "written": next(s for s, t in rows.items() if "a file could not be written" in t),
           "usage": next(s for s, t in rows.items() if t.startswith("a usage or input error")),
           "budget": next(s for s, t in rows.items() if "--max-cost" in t)}
    assert len(set(out.values())) == 4, out
    return out


def test_the_table_holds_the_statuses_the_code_uses() -> None:
    """The README's statuses are the ones the CLI uses by name (usage errors, failed writes, budget stops)."""
    import inspect

    from studybench.cli.budget import BUDGET_EXIT_CODE
    from studybench.cli.common import fail, fail_write

    st = readme_statuses()
    assert st == {"ok": 0, "written": 1, "usage": 2, "budget": 3}
    assert fail.__defaults__ == (st["usage"],) and BUDGET_EXIT_CODE == st["budget"]
    assert f"fail(msg, {st['written']})" in inspect.getsource(fail_write)


# ----------------------------------------------------------------------------- a full disk, simulated

FULL_DISK = r"""
import builtins, errno, io, os, sys
root = os.path.realpath(sys.argv[1])
def full(path):
    try:
        p = os.path.realpath(os.fsdecode(os.fspath(path)))
    except TypeError:
        return False  # a file descriptor
    return p == root or p.startswith(root + os.sep)
def enospc(path):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fsdecode(os.fspath(path)))
_open = os.open
def os_open(path, flags, *a, **k):
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC) and full(path):
        raise enospc(path)
    return _open(path, flags, *a, **k)
_io_open = io.open
def io_open(file, mode="r", *a, **k):
    if not isinstance(file, int) and any(c in mode for c in "wax+") and full(file):
        raise enospc(file)
    return _io_open(file, mode, *a, **k)
_mkdir = os.mkdir
def mkdir(path, *a, **k):
    if full(path) and not os.path.exists(path):
        raise enospc(path)
    return _mkdir(path, *a, **k)
os.open, io.open, builtins.open, os.mkdir = os_open, io_open, io_open, mkdir
sys.argv = ["studybench", *sys.argv[2:]]
from studybench.cli import main
main()
"""
"""``python -c FULL_DISK DIR ARGS...``: the command ``studybench ARGS`` on a disk that is full under DIR."""

SET = [parent(f"P{i}", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{x^2}", "EX", problem="Q2: mass?")],
              problem="A block.")
       for i in range(2)]


def _model(body: dict[str, Any]) -> Reply:
    return Reply("Final Answer: \\boxed{2}" if "Q1" in body["messages"][-1]["content"] else "Final Answer: \\boxed{y}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Inputs for every command (outside the full directory) and a stub model and judge."""
    d = tmp_path_factory.mktemp("inputs")
    write_set(d / "set.json", SET)
    (d / "guidance.jsonl").write_text("".join(json.dumps({"source": "S", "year": "", "source_problem_id": f"P{i}",
                                                          "problem_id": s, "guidance": "Use energy."}) + "\n"
                                              for i in range(2) for s in "ab"))
    (d / "pairs.jsonl").write_text(json.dumps({"gold": "\\boxed{2}", "response": "\\boxed{2}", "answer_type": "NV"}) + "\n")
    (d / "train").mkdir()
    (d / "train" / "verifiable_instr.json").write_text(json.dumps([
        {"messages": [{"role": "user", "content": f"Q{i}"}], "solution": "s", "answer": "\\boxed{2}", "answer_type": "NV",
         "type_sequence": "", "metadata": {"source": "B", "source_problem_id": f"P{i}", "source_chapter": "c1",
                                            "sub_discipline": "Mechanics"}} for i in range(4)]))
    chapter = d / "books" / "Book_A" / "ch01"
    chapter.mkdir(parents=True)
    text = "\n\n".join(f"# Section {i}\n\n" + "The force on the block is the mass times the acceleration. " * 30 for i in range(4))
    from studybench.datasets import load_dataset
    from studybench.testset.corpus.redact import marker

    markers = "\n\n".join(marker(parent) for parent in load_dataset(d / "set.json").parents)  # corpus audit: every parent redacted
    (chapter / "clean.redacted.md").write_text(text + "\n\n" + markers + "\n")
    (chapter / "clean.md").write_text(text)
    (d / "skills" / "one").mkdir(parents=True)
    (d / "skills" / "one" / "SKILL.md").write_text("---\nname: one\ndescription: a skill\n---\nSolve carefully.\n")
    (d / "train.jsonl").write_text(json.dumps({"id": "t1", "problem": "A block slides down an incline of angle 30 degrees."}) + "\n")
    (d / "eval.jsonl").write_text(json.dumps({"id": "e1", "problem": "A block slides down an incline of angle 30 degrees."}) + "\n")
    env = {**os.environ, "PYTHONPATH": SRC, "STUDYBENCH_JUDGE_CACHE": str(d / "cache"), "STUDYBENCH_VERIFY_WARM": "0"}
    with start_stub_server(_model, model="stub-model") as m, \
            start_stub_server(lambda body: Reply(format_verdict(True)), model="stub-judge") as j:
        w = {"d": d, "env": env, "model": m.base_url, "judge": j.base_url}
        for name, extra in (("run", []), ("guided", ["--guidance", str(d / "guidance.jsonl")])):
            res = _run(w, ["eval", "--split", str(d / "set.json"), "--model", "stub-model", "--base-url", m.base_url, "-k", "1",
                           "--seeds", "1", "--out", str(d / name), "--verify-workers", "1", "--judge-model", "stub-judge",
                           "--judge-base-url", j.base_url, *extra])
            assert res.returncode == 0, res.stderr
        (d / "snapshots.csv").write_text(f"method,seed,gpu_hours,run_dir\nbase,0,0,{d / 'run'}\nA,0,10,{d / 'guided'}\n"
                                         f"A,0,20,{d / 'run'}\n")
        yield w


def _run(w: dict[str, Any], args: list[str], full: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", FULL_DISK, str(full), *args] if full else [sys.executable, "-m", "studybench", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=w["env"], cwd=w["d"])


def _writes(w: dict[str, Any], full: Path) -> dict[str, list[str]]:
    """Per command that writes: arguments that make it write under ``full`` (a run directory copied there when it writes into one)."""
    d = w["d"]
    run = full / "run"
    judge = ["--judge-model", "stub-judge", "--judge-base-url", w["judge"]]
    return {
        "eval": ["eval", "--split", str(d / "set.json"), "--model", "stub-model", "--base-url", w["model"], "-k", "1", "--seeds", "1",
                 "--out", str(full / "new"), "--verify-workers", "1"],
        "reproduce": ["reproduce", str(d / "run"), "--out", str(full / "new"), "--base-url", w["model"], "--judge-base-url", w["judge"]],
        "report": ["report", str(run)],
        "report --html": ["report", str(d / "run"), "--html-out", str(full / "report.html")],
        "consistency": ["consistency", str(run)],
        "label": ["label", str(run), "method=x"],
        "judge": ["judge", str(run), *judge, "--refresh"],
        "leaderboard": ["leaderboard", str(d / "run"), "--out", str(full / "board.md")],
        "guidance-gap": ["guidance-gap", "--solo", str(d / "run"), "--guided", str(d / "guided"), "--out", str(full / "gap.md")],
        "plateau": ["plateau", str(d / "snapshots.csv"), "--out", str(full / "plateau"), "--resamples", "50"],
        "verify-file": ["verify-file", str(d / "pairs.jsonl"), "-o", str(full / "out.jsonl"), "--workers", "1"],
        "export attempts": ["export", "attempts", str(d / "run"), "--out", str(full / "attempts.csv")],
        "export csv": ["export", "csv", "--train-dir", str(d / "train"), "--layers", "single", "--out", str(full / "agent.csv")],
        "export chunks": ["export", "chunks", "--books", str(d / "books"), "--out", str(full / "chunks.jsonl"), "--size", "64"],
        "artefact evoskill": ["artefact", "evoskill", str(d / "skills"), "--out", str(full / "prompt.md")],
        "cache clear": ["cache", "clear", "--yes", "--judge-model", "stub-judge", "--judge-cache", str(full / "cache")],  # a rewrite
        "audit contamination": ["audit", "contamination", "--train", str(d / "train.jsonl"), "--eval", str(d / "eval.jsonl"),
                                "--out", str(full / "audit"), "--no-embeddings", "--text-field", "problem"],
        "build fragments": ["build", "fragments", "--books", str(d / "books"), "--work", str(full / "work")],
        "corpus audit": ["corpus", "audit", "--books", str(d / "books"), "--split", str(d / "set.json"), "--out", str(full / "reports")],
    }


NO_FILES = {
    "verify": "prints a verdict", "version": "prints the version", "data check": "prints findings",
    "data ids": "prints keys", "data stats": "prints tables", "cache show": "prints the cache's counts",
    "compare": "prints tables", "corpus check": "prints checks", "data errata": "prints the errata list (issue 24 item 7)",
}
"""Commands that write no file (nothing a full disk can break)."""

NOT_SIMULATED = {
    "export verl": "Parquet is written by pyarrow's C++ writer, below the simulation; its OSError goes to fail_write (exit 1)",
    "export trl": "written by the datasets library's Arrow writer, below the simulation; its OSError goes to fail_write (exit 1)",
    "data fetch": "downloads (no network in tests); a write error goes to fail_write (exit 1)",
    "gepa optimize": "a GEPA run against a model and a reflection model; a write error goes to fail_write (exit 1)",
    "corpus parse": "needs MinerU", "corpus ingest-cnxml": "needs pandoc and OpenStax CNXML",
    "corpus clean": "rewrites the books' clean.md in place from full.md (a MinerU output); reports through fail_write (exit 1)",
    "corpus redact": "needs chapters that hold the test set's problems; reports through fail_write (exit 1)",
    "build retrieve": "needs fragments, knowledge points and an embedding model", "build decompose": "needs a teacher endpoint",
    "build verify": "needs a teacher endpoint", "build guide": "needs a teacher endpoint",
    "build retry": "runs a filter model over a build's work directory", "build capability": "runs a filter model over a pool",
}
"""Commands this test cannot run with a full disk here, and why (each routes its OSError to fail_write)."""


def _commands() -> list[str]:
    out: list[str] = []

    def walk(c: Any, prefix: list[str]) -> None:
        if hasattr(c, "commands"):
            for n, sc in c.commands.items():
                walk(sc, [*prefix, n])
        else:
            out.append(" ".join(prefix))

    walk(typer.main.get_command(app), [])
    return out


def test_every_command_is_classified(tmp_path: Path) -> None:
    writes = {c.split(" --")[0] for c in _writes({"d": tmp_path, "model": "", "judge": ""}, tmp_path)}
    classified = writes | set(NO_FILES) | set(NOT_SIMULATED)
    assert sorted(set(_commands()) - classified) == [], "classify new commands in test_exit_statuses.py"


@pytest.mark.slow  # end to end, tens of seconds under load: the CI step `pytest -m slow`
@pytest.mark.parametrize("command", list(_writes({"d": Path("."), "model": "", "judge": ""}, Path("."))))
def test_a_full_disk_gives_the_tables_status_on_one_line(world: dict[str, Any], tmp_path: Path, command: str) -> None:
    status = readme_statuses()
    writable, full = tmp_path / "writable", tmp_path / "full"
    for root in (writable, full):
        root.mkdir()
        shutil.copytree(world["d"] / "run", root / "run")
        shutil.copytree(world["d"] / "cache", root / "cache")
    ok = _run(world, _writes(world, writable)[command])
    assert ok.returncode == status["ok"], (command, ok.stderr[-2000:])
    res = _run(world, _writes(world, full)[command], full=full)
    err = res.stderr.strip().splitlines()
    assert res.returncode == status["written"], (command, res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and err and err[-1].startswith("error:"), (command, res.stderr[-2000:])
    assert "No space left on device" in err[-1], (command, err[-1])


# ----------------------------------------------------------------------------- names


LONG = "x" * 300


@pytest.mark.parametrize("command", ["eval", "reproduce", "leaderboard", "guidance-gap", "verify-file", "export attempts",
                                     "export csv", "artefact evoskill", "audit contamination", "build fragments"])
def test_an_out_name_over_255_characters_is_a_one_line_usage_error(world: dict[str, Any], tmp_path: Path, command: str) -> None:
    args = _writes(world, tmp_path)[command]
    args = [a.replace(str(tmp_path), str(tmp_path / LONG)) if a.startswith(str(tmp_path)) else a for a in args]
    res = CliRunner().invoke(app, args)
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == readme_statuses()["usage"], (command, res.output)
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith("error:") and "File name too long" in lines[-1] and "…" in lines[-1], lines


def test_names_are_printed_with_their_control_characters_escaped(tmp_path: Path) -> None:
    """A NUL byte and an escape sequence in a source id, a split file's name and a run directory's name
    reach the terminal escaped, in every command that prints them (real subprocesses: raw bytes)."""
    name = "set\x1b[31m"
    split = tmp_path / f"{name}.json"
    bad = [{**SET[0], "source": "S\x00X\x1b[2J", "source_problem_id": "P\x001\u202e"}, SET[1]]
    split.write_text(json.dumps(bad))
    env = {**os.environ, "PYTHONPATH": SRC, "STUDYBENCH_VERIFY_WARM": "0"}
    run = tmp_path / "run\x1b[31m"
    for args in (["data", "check", "--split", str(split)], ["data", "ids", "--split", str(split)],
                 ["eval", "--split", str(split), "--model", "reference", "-k", "1", "--seeds", "1", "--out", str(run),
                  "--verify-workers", "1"],
                 ["report", str(run)], ["export", "attempts", str(run)]):
        res = subprocess.run([sys.executable, "-m", "studybench", *args], capture_output=True, timeout=300, env=env, cwd=tmp_path)
        out = res.stdout + res.stderr
        assert b"\x00" not in out and b"\x1b[2J" not in out and b"\x1b[31m" not in out and "\u202e".encode() not in out, (args, out[-800:])
        assert b"\\x00" in out or b"\\x1b" in out, (args, out[-800:])


@pytest.mark.parametrize("args", [["--help"], ["eval", "--help"], ["data", "ids", "--split", "transfer"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(args: list[str], data_dir: Path) -> None:
    """`studybench ... | head -1`: the pipe closes early; no `error: Broken pipe` line, no traceback."""
    env = {**os.environ, "STUDYBENCH_DATA": str(data_dir)}
    p = subprocess.Popen([sys.executable, "-m", "studybench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # the reader goes away
    err = p.stderr.read().decode("utf-8", "replace")
    assert p.wait(timeout=120) in (0, 1), err
    assert "Traceback" not in err and "error" not in err.lower(), err
