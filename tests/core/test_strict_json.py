"""Numbers that never mislead in files (issue 24, items 3): the one strict JSON reader, the append-only
log as input, absurd usage counts from a server, and JSON output that is always JSON.

Before the fix: Python's ``json`` read ``NaN``, ``Infinity`` and ``1e999999`` (as inf) and wrote them back
as ``NaN`` / ``Infinity`` (not JSON); a 400-digit usage count raised ``OverflowError`` in
``math.isfinite``, which failed every turn of a server reporting it as a transient error; a named pipe
in a log's place blocked its writer for ever.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import REPO, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.costs import TokenCounts, normalise_usage
from studybench.files import InputFileError, JsonlLog, dumps_json, json_line, parse_json, read_json
from studybench.models.replies import parse_reply as _parse
from studybench.testing import Reply, start_stub_server

SRC = REPO / "src" / "studybench"
posix = pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="POSIX only")

# -- the reader ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,problem", [
    ('{"a": NaN}', "field 'a': NaN is not valid JSON"),
    ('{"a": [1, -Infinity]}', "field 'a[1]': -Infinity is not valid JSON"),
    ('{"a": {"b": 1e999999}}', "field 'a.b': number out of range (1e999999 is not a finite number)"),
    ('{"usage": {"prompt_tokens": ' + "9" * 400 + "}}", "field 'usage.prompt_tokens': integer out of range (400 digits"),
    ('[{"n": ' + "9" * 5000 + "}]", "field '[0].n': integer out of range (5000 digits"),
    ("[" + str(2**63) + "]", f"field '[0]': integer out of range ({2**63}"),
    ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    ('{"a": 1,}', "line 1: not valid JSON (Expecting property name enclosed in double quotes at column 9)"),
    (b'{"a": "\xff"}', "line 1: not valid UTF-8"),
])
def test_parse_json_refuses_what_json_does_not_allow_naming_the_field(text: str | bytes, problem: str) -> None:
    with pytest.raises(InputFileError) as e:
        parse_json(text, "f.json")
    assert str(e.value).startswith(f"f.json: {problem}"), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    with pytest.raises(InputFileError, match=r"^f\.jsonl: line 7: "):
        parse_json(text, "f.jsonl", line=7)


def test_parse_json_reads_every_valid_number_and_says_which_errors_are_syntax() -> None:
    obj = {"big": 2**63 - 1, "small": -(2**63), "max": 1.7976931348623157e308, "tiny": 5e-324, "s": "NaN"}
    assert parse_json(json.dumps(obj), "f") == obj
    with pytest.raises(InputFileError) as e:
        parse_json('{"a": 1}\n{"a": 2}\n', "f")
    assert e.value.syntax  # JSON Lines under a JSON reader: readers of "JSON or JSONL" try JSONL next
    with pytest.raises(InputFileError) as e:
        parse_json('{"a": NaN}', "f")
    assert not e.value.syntax


@posix
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
@pytest.mark.timeout(60)  # before: opening a named pipe for appending blocked for ever
def test_a_log_that_is_not_a_regular_file_is_refused_for_reading_and_appending(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "log.jsonl"
    {"fifo": lambda: os.mkfifo(path), "dev-zero": lambda: path.symlink_to("/dev/zero"), "directory": path.mkdir}[kind]()
    what = {"fifo": "a named pipe", "dev-zero": "a character device", "directory": "a directory"}[kind]
    for call in (lambda: list(JsonlLog(path).rows()), lambda: JsonlLog(path).append({"a": 1}), lambda: read_json(path)):
        with pytest.raises(InputFileError, match=f"not a regular file \\({what}\\)"):
            call()


def test_a_log_row_over_the_line_limit_is_refused_and_a_torn_tail_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = JsonlLog(path, line_limit=100)
    log.append({"a": 1})
    log.close()
    with open(path, "ab") as f:
        f.write(json_line({"a": "x" * 200}).encode() + b"\n" + b'{"a": ')
    with pytest.raises(InputFileError, match=r"line 2: too long \(over 100 bytes"):
        list(log.rows())
    big = JsonlLog(path, line_limit=1000)
    assert [r["a"] for r in big.rows()] == [1, "x" * 200]  # the torn last line is a killed writer's: skipped
    big.append({"a": 3})  # and cut before the next row
    big.close()
    assert [r["a"] for r in big.rows()] == [1, "x" * 200, 3]


# -- usage counts from a server ---------------------------------------------------------------------

ABSURD: list[Any] = [10**400, -(10**400), -5, True, float("inf"), float("-inf"), float("nan"), 2**53]


@pytest.mark.parametrize("value", ABSURD, ids=["400-digits", "minus-400-digits", "negative", "bool", "inf", "-inf", "nan", "2^53"])
def test_an_absurd_usage_count_is_unreported_never_an_exception(value: Any) -> None:
    # before: math.isfinite(10**400) raised OverflowError here and in the backend's reply parser
    usage = {"prompt_tokens": value, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": value},
             "completion_tokens_details": {"reasoning_tokens": value}}
    assert normalise_usage(usage) == {"completion_tokens": 7}
    counts = TokenCounts.of([usage, {"prompt_tokens": 3, "completion_tokens": 4}])
    assert (counts.requests, counts.unreported, counts.prompt_tokens, counts.completion_tokens) == (2, 1, 3, 11)
    res = _parse({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                  "usage": {"total_tokens": value, **usage}})
    assert res.completion == "ok" and res.usage == {"completion_tokens": 7}
    json.loads(json_line(res.usage))  # stored as valid JSON


def test_a_server_reporting_400_digit_usage_fails_no_turn(tmp_path: Path) -> None:
    """Before: every turn failed as "transient" (OverflowError in the reply parser), and re-running repeated it."""
    data = write_set(tmp_path / "set.json", 2)  # 1 + 2 = 3 turns

    def reply(body: dict[str, Any]) -> Reply:
        return Reply("Final Answer: \\boxed{1}", usage={"prompt_tokens": 10**400, "completion_tokens": 5,
                                                          "total_tokens": -(10**400)})

    with start_stub_server(reply) as srv:
        res = CliRunner().invoke(app, ["eval", "--split", str(data), "--model", "m", "--base-url", srv.base_url, "-k", "1",
                                       "--seeds", "1", "--out", str(tmp_path / "run"), "--max-retries", "0",
                                       "--verify-workers", "1"], catch_exceptions=False)
        assert srv.count == 3  # each turn asked once: none failed, none retried
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and not any(r.get("error") for r in rows)
    assert all(r["usage"] == {"completion_tokens": 5} for r in rows)
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    assert rep["tokens"]["total"]["unreported"] == 3 and rep["tokens"]["total"]["completion_tokens"] == 15


# -- JSON output is JSON ---------------------------------------------------------------------------


def _json_dump_calls_without_allow_nan_false() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        if "testing" in path.relative_to(SRC).parts:  # the stub server serves hostile replies on purpose
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("dump", "dumps")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"
                    and not any(k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                                for k in node.keywords)):
                bad.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return bad


def test_every_json_writer_refuses_nan_and_infinity() -> None:
    assert _json_dump_calls_without_allow_nan_false() == []
    for value in (float("nan"), float("inf"), {"a": [float("-inf")]}):
        with pytest.raises(ValueError):
            dumps_json(value)
        with pytest.raises(ValueError):
            json_line(value)


@pytest.mark.parametrize("literal,problem", [
    ("1e999999", "field 'score': number out of range (1e999999 is not a finite number)"),
    ("NaN", "field 'score': NaN is not valid JSON"),
    ("-Infinity", "field 'score': -Infinity is not valid JSON"),
    ("9" * 400, "field 'score': integer out of range (400 digits"),
])
def test_verify_file_refuses_numbers_it_could_not_write_back(tmp_path: Path, literal: str, problem: str) -> None:
    # before: the row was written back with "score": Infinity (or NaN), which is not JSON, and exit 0
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ok = '{"gold": "\\\\boxed{1}", "response": "\\\\boxed{1}", "answer_type": "NV"'
    src.write_text(ok + "}\n" + ok + f', "score": {literal}}}\n')
    r = subprocess.run([sys.executable, "-m", "studybench.cli", "verify-file", str(src), "-o", str(out)],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("error:") == 1 and f"error: {src}: line 2: {problem}" in r.stderr.replace("\n", ""), r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
