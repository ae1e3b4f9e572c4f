"""Files inside a run directory are input too (issue 24, item 3): every command that reads a file,
against every kind of bad file.

The matrix is generated: each command of :data:`COMMANDS` x each file it reads x each kind of
:data:`KINDS` (a named pipe, a symbolic link to ``/dev/zero``, a directory, a file over its size limit,
invalid UTF-8, truncated JSON, a 400-digit integer, ``NaN``, ``1e999999``, JSON nested 100,000 deep, a
missing file). Each cell must finish (no hang: the commands run in a child process, each under an
alarm, the child under a timeout and an address-space limit), exit non-zero with exactly one
``error:`` line that names the file and no traceback, and leave every other file as it was (nothing
half-written). The few cells where a bad file is a legitimate state are listed in :data:`TOLERATED`
with the reason, and must still finish without a traceback.

Before the fix: a named pipe blocked `report`, `label`, `compare`, ... forever, ``/dev/zero`` grew
`report` without bound, a 400-digit usage integer gave ``OverflowError`` tracebacks, ``NaN`` rows made
reports that were not JSON, and a directory in a log's place gave ``IsADirectoryError`` tracebacks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support import TESTS, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.files import MAX_JSON_BYTES, MAX_LOG_BYTES, MAX_TEXT_BYTES
from studybench.report.tokens import PRICING_LIMIT
from studybench.testing import start_stub_server
from studybench.testing.stub_judge import judge_reply_fn

# slow: every command against every bad file, 4 minutes under load (the CI step `pytest -m slow`)
pytestmark = [pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="POSIX only"),
              pytest.mark.slow]

HERE = TESTS

KINDS = ["fifo", "dev-zero", "directory", "oversized", "invalid-utf8", "truncated", "bigint", "nan", "infinity",
         "deep", "missing"]

#: size limit per file (the oversized kind is a sparse file one byte over it)
LIMITS = {"manifest.json": MAX_JSON_BYTES, "report.json": MAX_JSON_BYTES, "pricing.json": PRICING_LIMIT,
          "generations.jsonl": MAX_LOG_BYTES, "judgements.jsonl": MAX_LOG_BYTES, "llm_judgements.jsonl": MAX_LOG_BYTES,
          "verdicts.jsonl": MAX_LOG_BYTES, "fragments.jsonl": MAX_LOG_BYTES, "kp_canonical.jsonl": MAX_LOG_BYTES,
          "domain.json": MAX_TEXT_BYTES}

RUN_LOGS = ["generations.jsonl", "judgements.jsonl", "llm_judgements.jsonl"]
RUN_FILES = ["manifest.json", *RUN_LOGS]

# command -> (where its bad file lives: "run" / "cache" / "work", the files of it the command reads,
#             its arguments given the paths)
Args = Callable[[dict[str, Path]], list[object]]
COMMANDS: dict[str, tuple[str, list[str], Args]] = {
    "report": ("run", [*RUN_FILES, "pricing.json"], lambda p: ["report", p["run"]]),
    "report --html": ("run", [*RUN_FILES, "pricing.json"], lambda p: ["report", p["run"], "--html"]),
    "compare": ("run", RUN_FILES, lambda p: ["compare", p["run"], p["guided"]]),
    "leaderboard": ("run", RUN_FILES, lambda p: ["leaderboard", p["run"], "--no-significance", "--out", p["tmp"] / "board.md"]),
    "export attempts": ("run", RUN_FILES, lambda p: ["export", "attempts", p["run"], "--out", p["tmp"] / "attempts.csv"]),
    "label": ("run", [*RUN_FILES, "pricing.json", "report.json"], lambda p: ["label", p["run"], "team=x"]),
    "consistency": ("run", RUN_FILES, lambda p: ["consistency", p["run"]]),
    "eval --only-verify": ("run", RUN_FILES, lambda p: [
        "eval", "--split", p["set"], "--model", "reference", "-k", 1, "--seeds", 1, "--out", p["run"], "--only-verify",
        "--verify-workers", 1]),
    "judge": ("run", [*RUN_FILES, "pricing.json"], lambda p: [
        "judge", p["run"], "--judge-model", "stub-judge", "--judge-base-url", p["judge"], "--no-judge-cache",
        "--verify-workers", 1]),
    "guidance-gap": ("run", RUN_FILES, lambda p: ["guidance-gap", "--solo", p["run"], "--guided", p["guided"]]),
    "reproduce": ("run", ["manifest.json", "pricing.json"], lambda p: [
        "reproduce", p["run"], "--out", p["tmp"] / "again", "--judge-base-url", p["judge"], "--verify-workers", 1]),
    "cache show": ("cache", ["verdicts.jsonl"], lambda p: ["cache", "show", "--judge-cache", p["cache"]]),
    "build retrieve": ("work", ["fragments.jsonl", "kp_canonical.jsonl", "domain.json"], lambda p: [
        "build", "retrieve", "--work", p["work"], "--mode", "bm25", "--domain-map", p["work"] / "domain.json"]),
}

#: (command or "*", file, kind) -> why the bad file is a legitimate state (the cell must still finish
#: without a traceback, and its exit status is not checked here)
TOLERATED: dict[tuple[str, str, str], str] = {
    **{("*", f, "missing"): "a run without that log is an incomplete run (refused by the comparison surfaces)"
       for f in RUN_LOGS},
    ("*", "pricing.json", "missing"): "a run without recorded prices has no cost",
    ("label", "report.json", "missing"): "no report to refresh",
    ("cache show", "verdicts.jsonl", "missing"): "an empty cache",
    **{("cache show", "verdicts.jsonl", k): "a cache row that cannot be read is a miss, skipped"
       for k in ("invalid-utf8", "truncated", "bigint", "nan", "infinity", "deep")},
}


def _tolerated(command: str, file: str, kind: str) -> str | None:
    return TOLERATED.get((command, file, kind)) or TOLERATED.get(("*", file, kind))


# -- the bad files -----------------------------------------------------------------------------------

_MARK = "\u2603MARK\u2603"
_BAD_TEXT = {"bigint": b"9" * 400, "nan": b"NaN", "infinity": b"1e999999", "deep": b"[" * 100_000 + b"]" * 100_000,
             "invalid-utf8": b'"\xff\xfe"'}


def _plant(obj: Any) -> bool:
    """Put the marker in place of the first number (else the first string) of ``obj``; False if none."""
    for want in ((int, float), (str,)):
        stack = [obj]
        while stack:
            node = stack.pop(0)
            items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
            for k, v in items:
                if isinstance(v, want) and not isinstance(v, bool):
                    node[k] = _MARK
                    return True
                if isinstance(v, (dict, list)):
                    stack.append(v)
    return False


def _with_bad_value(text: bytes, kind: str, jsonl: bool) -> bytes:
    """``text`` with one value (of the first row, for JSONL) replaced by the bad one."""
    lines = text.split(b"\n") if jsonl else [text]
    obj = json.loads(lines[0])
    if isinstance(obj, dict) and isinstance(obj.get("usage"), dict):  # the case: a usage count
        obj["usage"]["prompt_tokens"] = _MARK
    elif not _plant(obj):
        obj = {"n": _MARK} if not isinstance(obj, list) else [_MARK]
    lines[0] = json.dumps(obj, ensure_ascii=True).encode().replace(json.dumps(_MARK).encode(), _BAD_TEXT[kind])
    return b"\n".join(lines)


def make_bad(path: Path, kind: str) -> None:
    """Replace ``path`` (a good file) by a bad file of ``kind``."""
    jsonl = path.suffix == ".jsonl"
    good = path.read_bytes()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "oversized":  # sparse: nothing is written but the size
        with open(path, "wb") as f:
            f.truncate(LIMITS[path.name] + 1)
    elif kind == "truncated":
        if jsonl:  # a complete line cut short (not a torn last line, which is a killed writer's, and skipped)
            first, _, rest = good.partition(b"\n")
            path.write_bytes(first[: len(first) // 2] + b"\n" + rest)
        else:
            path.write_bytes(good[: len(good) // 2])
    elif kind == "missing":
        pass
    else:
        path.write_bytes(_with_bad_value(good, kind, jsonl))


# -- the runs, made once -------------------------------------------------------------------------


def _invoke(*args: object) -> None:
    res = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A reference run with recorded prices and LLM verdicts, a guided twin, a verdict cache and a build work directory."""
    tmp = tmp_path_factory.mktemp("hostile")
    data = write_set(tmp / "set.json", 3)
    prices = tmp / "prices.json"
    prices.write_text(json.dumps({"models": {"*": {"input": 1.0, "output": 2.0}}}))
    guidance = tmp / "guidance.json"
    guidance.write_text(json.dumps([{"source": "Synthetic", "year": "2024", "source_problem_id": "P0", "problem_id": "P0(a)", "guidance": "g"}]))
    common = ["--split", data, "--model", "reference", "-k", 1, "--seeds", 1, "--verify-workers", 1, "--pricing", prices]
    _invoke("eval", *common, "--out", tmp / "run")
    _invoke("eval", *common, "--out", tmp / "guided", "--guidance", guidance)
    with start_stub_server(judge_reply_fn(lambda x: True), model="stub-judge") as srv:
        for run in ("run", "guided"):
            _invoke("judge", tmp / run, "--judge-model", "stub-judge", "--judge-base-url", srv.base_url, "--judge-rule-accepts",
                    "--judge-cache", tmp / "cache", "--verify-workers", 1)
    work = tmp / "work"
    work.mkdir()
    (work / "fragments.jsonl").write_text("".join(json.dumps({"id": f"f{i}", "book": "B", "text": f"energy is conserved {i}"}) + "\n"
                                                  for i in range(3)))
    (work / "kp_canonical.jsonl").write_text(json.dumps({"id": "k1", "name": "energy conservation", "uses": 1}) + "\n")
    (work / "domain.json").write_text(json.dumps({"Mechanics": ["B"]}))
    for name in RUN_FILES + ["pricing.json", "report.json"]:
        assert (tmp / "run" / name).is_file(), name
    assert (tmp / "cache" / "verdicts.jsonl").is_file()
    return {"set": data, "run": tmp / "run", "guided": tmp / "guided", "cache": tmp / "cache", "work": work}


def _snapshot(root: Path, skip: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root`` but ``skip``: kind and, for regular files, the sha256 of the bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p == skip or skip in p.parents:
                continue
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            out[str(p.relative_to(root))] = (kind, hashlib.sha256(p.read_bytes()).hexdigest() if kind == "file" else "")
    return out


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def _cells() -> list[tuple[str, str, str]]:
    return [(c, f, k) for c, (_, files, _) in COMMANDS.items() for f in files for k in KINDS]


@pytest.fixture(scope="module")
def results(base: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Run every cell of the matrix (each on its own copy of the directory it spoils) in one child process."""
    root = tmp_path_factory.mktemp("cells")
    with start_stub_server(judge_reply_fn(lambda x: True), model="stub-judge") as srv:
        return _run_cells(base, root, srv.base_url)


def _run_cells(base: dict[str, Path], root: Path, judge_url: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    cases, prepared = [], {}
    for n, (command, file, kind) in enumerate(_cells()):
        where, _, args = COMMANDS[command]
        cell = root / f"c{n}"
        cell.mkdir()
        paths: dict[str, Any] = {"set": base["set"], "guided": base["guided"], "tmp": cell / "out", "judge": judge_url}
        (cell / "out").mkdir()
        paths[where] = cell / where
        shutil.copytree(base[where], paths[where], symlinks=True)
        if where == "run":  # the guided twin, for compare and guidance-gap (its own copy: never spoiled)
            paths["guided"] = cell / "guided"
            shutil.copytree(base["guided"], paths["guided"], symlinks=True)
        bad = paths[where] / file
        make_bad(bad, kind)
        prepared[(command, file, kind)] = (cell, bad, _snapshot(cell, bad))
        cases.append([n, [str(a) for a in args(paths)]])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE), os.environ.get("PYTHONPATH", "")]),
           "STUDYBENCH_JUDGE_CACHE": str(root / "judge-cache"), "NO_COLOR": "1", "COLUMNS": "300"}
    try:
        proc = subprocess.run([sys.executable, str(HERE / "_cli_cases.py")], input=json.dumps({"cases": cases, "case_timeout": 60}),
                              capture_output=True, text=True, timeout=900, env=env, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired as e:
        started = [line for line in (e.stderr or b"").decode(errors="replace").splitlines() if '"started"' in line]
        pytest.fail(f"the commands did not finish: last started {started[-1:] if started else 'none'}", pytrace=False)
    got = {row["id"]: row for row in map(json.loads, proc.stdout.splitlines())}
    assert len(got) == len(cases), proc.stderr[-3000:]
    out = {}
    for n, key in enumerate(_cells()):
        cell, bad, before = prepared[key]
        out[key] = {**got[n], "bad": bad, "unchanged": _snapshot(cell, bad) == before}
    return out


@pytest.mark.parametrize("command,file,kind", _cells(), ids=[f"{c}/{f}/{k}" for c, f, k in _cells()])
def test_a_bad_file_is_one_error_line(results: dict[tuple[str, str, str], dict[str, Any]], command: str, file: str,
                                      kind: str) -> None:
    r = results[(command, file, kind)]
    shown = f"exit {r['exit_code']}, {r['seconds']} s\n{r['output']}\n{r['exception'] or ''}"
    assert r["exception"] is None, shown  # no traceback, no blocking (the alarm), no MemoryError
    assert "Traceback" not in r["output"], shown
    if _tolerated(command, file, kind):
        return
    assert r["exit_code"] != 0, shown
    errors = [line for line in r["output"].splitlines() if line.startswith("error:")]
    assert len(errors) == 1, shown
    bad = r["bad"]  # named as the file, or (a missing manifest) as "RUN: not a run directory (no manifest.json)"
    assert str(bad) in errors[0] or (str(bad.parent) in errors[0] and bad.name in errors[0]), shown
    assert r["unchanged"], f"a file was written or changed\n{shown}"
