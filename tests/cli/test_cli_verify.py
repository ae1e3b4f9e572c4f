"""`studybench verify` and `studybench verify-file`: exit codes, output rows, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _sb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "studybench.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "gold,response,args,code,why",
    [
        ("\\boxed{0.5}", "\\frac{1}{2}", ["--type", "NV"], 0, "bare response, equal value"),
        ("\\boxed{A}", "Reasoning.\nFinal Answer: \\boxed{B}", ["--type", "MC"], 1, "wrong letter"),
        ("\\boxed{1}, \\boxed{2}", "Final Answer: \\boxed{1}, \\boxed{2}", ["--type", "TUP", "--type-sequence", "NV,NV"], 0, "tuple"),
        ("\\boxed{1}, \\boxed{2}", "Final Answer: \\boxed{2}, \\boxed{1}", ["--type", "TUP", "--type-sequence", "NV,NV"], 1, "tuple order"),
        ("\\boxed{1}", "no answer here", ["--type", "NV"], 1, "prose is not a number"),
        ("\\boxed{1}", "1", ["--type", "XX"], 2, "unknown type"),
        ("\\boxed{1}", "1", ["--type", "TUP"], 2, "TUP without type sequence"),
        ("\\boxed{1}", "1", [], 2, "missing --type"),
    ],
)
def test_verify_exit_codes(gold: str, response: str, args: list[str], code: int, why: str) -> None:
    r = _sb("verify", gold, response, *args)
    assert r.returncode == code, (why, r.stdout, r.stderr)
    if code < 2:
        assert ("incorrect" in r.stdout) == (code == 1)


def test_verify_json_output() -> None:
    r = _sb("verify", "\\boxed{3\\times10^{8}}", "Final Answer: \\boxed{3e8}", "--type", "NV", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["correct"] is True and out["extracted"] == ["3e8"]


def test_verify_file_adds_verdicts_and_scores_labels(tmp_path: Path) -> None:
    rows = [
        {"gold": "\\boxed{2}", "response": "Final Answer: \\boxed{2.0}", "answer_type": "NV", "type_sequence": "", "label": True, "extra": 1},
        {"gold": "\\boxed{2}", "response": "Final Answer: \\boxed{3}", "answer_type": "NV", "type_sequence": "", "label": False},
        {"gold": "\\boxed{A}", "response": "nothing boxed", "answer_type": "MC", "label": True},
        {"gold": "\\boxed{v=1}, \\boxed{x}", "response": "Final Answer: \\boxed{v=1}, \\boxed{x}", "answer_type": "TUP", "type_sequence": "EQ,EX"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    out = tmp_path / "out.jsonl"
    r = _sb("verify-file", str(src), "-o", str(out), "--workers", "1")
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["correct"] for g in got] == [True, False, False, True]
    assert all(g["reason"].startswith("correct" if g["correct"] else "incorrect") for g in got)
    assert got[0]["extra"] == 1 and got[0]["label"] is True  # input fields kept
    assert "precision 1.0000, recall 0.5000" in r.stderr.replace("\n", " ")


@pytest.mark.parametrize(
    "line,needle",
    [
        ("{not json", "line 2: not valid JSON"),
        ('{"gold": "\\\\boxed{1}", "answer_type": "NV"}', "line 2: field 'response'"),
        ('{"gold": "\\\\boxed{1}", "response": "1", "answer_type": "ZZ"}', "line 2: field 'answer_type': unknown answer type"),
        ("[1, 2]", "line 2: expected a JSON object"),
    ],
)
def test_verify_file_bad_rows_name_the_line(tmp_path: Path, line: str, needle: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"gold": "\\boxed{1}", "response": "1", "answer_type": "NV"}) + "\n" + line + "\n")
    out = tmp_path / "out.jsonl"
    r = _sb("verify-file", str(src), "-o", str(out))
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert not out.exists()
