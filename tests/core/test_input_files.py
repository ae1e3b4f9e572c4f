"""Files a user names: only regular files are read, with a size limit; JSONL splits on "\\n" only;
verify-file rows are type-checked field by field (issue 11, item 5).

Every CLI call that could block on a named pipe (or read ``/dev/zero`` without bound) runs in a
subprocess with a timeout and an address-space limit, so a regression fails the test instead of
hanging the suite or eating the machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import parent, sub

from studybench.files import InputFileError, jsonl_lines, read_user_bytes, read_user_text


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _sb(*args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the CLI; a child that blocks (a named pipe opened for reading) fails the test at the timeout."""
    try:
        return subprocess.run([sys.executable, "-m", "studybench.cli", *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"studybench {' '.join(map(str, args))} blocked for {timeout}s", pytrace=False)

# two parents: a two-part one and a single question (the keys tests/evaluate/test_guidance_keys.py uses)
SET = [parent("Q1", [sub("Q1(a.)", "\\boxed{1}", problem="first"), sub("Q1(b.)", "\\boxed{2}", problem="second")],
              source="IPhO", year="1983", problem="stem"),
       parent("P2", source="Book", problem="single", answer="\\boxed{3}", answer_type="NV")]


def _dataset(tmp_path: Path) -> Path:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    return f


def _fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="POSIX only")


# -- the helper -----------------------------------------------------------------------------------


def test_read_user_bytes_refuses_directories_and_large_files(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="not a regular file \\(a directory\\)"):
        read_user_bytes(tmp_path)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InputFileError, match="too large"):
        read_user_bytes(big, limit=100)
    assert read_user_bytes(big, limit=101) == b"x" * 101
    with pytest.raises(InputFileError, match="cannot read file"):
        read_user_bytes(tmp_path / "missing")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nok\n\xff")
    with pytest.raises(InputFileError, match="line 3: not valid UTF-8"):
        read_user_text(bad)


def test_jsonl_lines_split_on_newline_only() -> None:
    text = json.dumps({"a": "x\u2028y\u2029z\x85w\x1cv\x0bu\x0ct"}, ensure_ascii=False) + "\r\n\n" + json.dumps([1]) + "\n"
    assert len(text.splitlines()) > 3  # what the old readers did
    got = list(jsonl_lines(text))
    assert [n for n, _ in got] == [1, 3]
    assert json.loads(got[0][1]) == {"a": "x\u2028y\u2029z\x85w\x1cv\x0bu\x0ct"}


# -- every CLI input refuses a named pipe and /dev/zero, without blocking -------------------------


def _cases(tmp_path: Path, bad: Path) -> dict[str, list[object]]:
    data = _dataset(tmp_path)
    run = ["eval", "--split", data, "-k", 1, "--seeds", 1, "--out", tmp_path / "run"]
    return {
        "guidance": [*run, "--guidance", bad],
        "system prompt": [*run, "--system-prompt", bad],
        "playbook": [*run, "--playbook", bad],
        "judge template": [*run, "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-prompt", bad],
        "pairs file": ["verify-file", bad, "-o", tmp_path / "out.jsonl"],
        "audit records": ["audit", "contamination", "--train", bad, "--eval", data, "--out", tmp_path / "audit",
                          "--no-embeddings", "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1"],
    }


@needs_fifo
@pytest.mark.parametrize("what", ["guidance", "system prompt", "playbook", "judge template", "pairs file", "audit records"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_cli_refuses_named_pipes_and_devices(tmp_path: Path, what: str, kind: str) -> None:
    bad = _fifo(tmp_path) if kind == "fifo" else Path("/dev/zero")
    r = _sb(*_cases(tmp_path, bad)[what])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "not a regular file" in r.stderr and str(bad) in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "run" / "manifest.json").exists()


@needs_fifo
def test_report_refuses_a_manifest_that_is_a_named_pipe(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _fifo(run).rename(run / "manifest.json")
    r = _sb("report", run)
    assert r.returncode != 0 and "manifest.json: not a regular file (a named pipe)" in r.stderr.replace("\n", ""), r.stderr
    assert "Traceback" not in r.stderr


# -- verify-file: JSONL round trip and type-checked rows ------------------------------------------


def test_verify_file_reads_its_own_output_with_unicode_line_separators(tmp_path: Path) -> None:
    rows = [
        {"gold": "\\boxed{1}", "response": "Line\u2028two\x85three\x1c.\nFinal Answer: \\boxed{1}", "answer_type": "NV",
         "note": "a\u2028b\u2029c\x85d"},
        {"gold": "\\boxed{2}", "response": "Final Answer: \\boxed{3}", "answer_type": "NV", "label": False},
    ]
    src, out, again = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "again.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    r = _sb("verify-file", src, "-o", out, "--workers", 1)
    assert r.returncode == 0, r.stderr
    assert "\u2028" in out.read_text(encoding="utf-8")  # written raw, so the reader must not split there
    r2 = _sb("verify-file", out, "-o", again, "--workers", 1)
    assert r2.returncode == 0, r2.stderr
    got = [json.loads(line) for _, line in jsonl_lines(again.read_text(encoding="utf-8"))]
    assert [g["correct"] for g in got] == [True, False]
    assert got[0]["note"] == rows[0]["note"] and got[0]["response"] == rows[0]["response"]


OK = {"gold": "\\boxed{1}", "response": "1", "answer_type": "NV"}


@pytest.mark.parametrize(
    "row,needle",
    [
        ({**OK, "answer_type": "TUP", "type_sequence": ["NV", 3]}, "field 'type_sequence[1]': must be a string"),
        ({**OK, "answer_type": "TUP", "type_sequence": [["NV"], "NV"]}, "field 'type_sequence[0]': must be a string"),
        ({**OK, "type_sequence": {"NV": 1}}, "field 'type_sequence': must be a comma-separated string or a list"),
        ({**OK, "answer_type": "TUP", "type_sequence": "NV,QQ"}, "field 'type_sequence': unknown type 'QQ'"),
        ({**OK, "gold": 3}, "field 'gold': must be a string, got a number"),
        ({**OK, "gold": "  "}, "field 'gold': empty"),
        ({**OK, "response": None}, "field 'response': must be a string, got null"),
        ({**OK, "answer_type": ["NV"]}, "field 'answer_type': must be a string, got a list"),
        ({**OK, "answer_type": "XYZ"}, "field 'answer_type': unknown answer type 'XYZ'"),
        ({**OK, "gold_unit": [1]}, "field 'gold_unit[0]': must be a string or null, got a number"),
        ({**OK, "gold_unit": {"u": "m"}}, "field 'gold_unit': must be a string, a list or null, got an object"),
        ({**OK, "label": "yes"}, "field 'label': must be true, false or null, got a string"),
    ],
)
def test_verify_file_wrong_types_name_file_line_and_field(tmp_path: Path, row: dict, needle: str) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps(OK) + "\n" + json.dumps(row) + "\n")
    r = _sb("verify-file", src, "-o", out)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{src}: line 2: {needle}" in r.stderr.replace("\n", ""), r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
