"""Option sets shared by several commands (declared once) and the deprecated flag names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from studybench.cli import app

SET = [{"source": "S", "year": "", "source_problem_id": "P1", "problem": "q", "answer": "\\boxed{1}",
        "answer_type": "NV", "type_sequence": "", "sub_problems": []}]


def _invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("command", ["eval", "judge"])
def test_shared_options_appear_on_each_command(command: str) -> None:
    text = _invoke(command, "--help").output  # type: ignore[attr-defined]
    for flag in ("--verify-timeout", "--verify-workers", "--judge-model", "--judge-cache", "--no-judge-cache"):
        assert flag in text, flag
    assert "--judge-timeout" not in text and "--judge-workers" not in text  # deprecated: hidden


def test_deprecated_verifier_flags_still_work(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "run", "--judge-timeout", 7, "--judge-workers", 1)
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert "--judge-timeout is deprecated; use --verify-timeout" in res.output  # type: ignore[attr-defined]
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["verifier"]["timeout"] == 7.0
    rows = [json.loads(x) for x in (tmp_path / "run" / "judgements.jsonl").read_text().splitlines()]
    assert rows and all(r["verifier"]["timeout"] == 7.0 for r in rows)
    again = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "run", "--judge-timeout", 7, "--only-judge")
    assert again.exit_code == 0 and "--only-judge is deprecated; use --only-verify" in again.output  # type: ignore[attr-defined]
    assert "generated" not in again.output  # type: ignore[attr-defined]


def test_new_verifier_flags(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "run", "--verify-timeout", 3, "--verify-workers", 1)
    assert res.exit_code == 0 and "deprecated" not in res.output  # type: ignore[attr-defined]
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["verifier"]["timeout"] == 3.0


def test_a_setting_under_its_old_and_new_name_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", tmp_path / "run", "--verify-timeout", 9, "--judge-timeout", 6)
    assert res.exit_code == 2 and "give only --verify-timeout" in res.output  # type: ignore[attr-defined]
    assert not (tmp_path / "run").exists()


def test_only_verify_with_another_timeout_verifies_again(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    run = tmp_path / "run"
    assert _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", run).exit_code == 0  # type: ignore[attr-defined]
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", run, "--only-verify", "--verify-timeout", 4)
    assert "verified 1 turn (0 reused)" in res.output  # type: ignore[attr-defined]
    assert json.loads((run / "manifest.json").read_text())["verifier"]["timeout"] == 4.0


def test_data_check_json_is_json_lines(data_dir: Path) -> None:
    res = _invoke("data", "check", "--split", "transfer", "--data-dir", data_dir, "--json")
    lines = [ln for ln in res.output.splitlines() if ln.strip()]  # type: ignore[attr-defined]
    rows = [json.loads(ln) for ln in lines]
    assert rows and all(r["split"] == "transfer" and "kind" in r for r in rows)


def test_verify_an_empty_gold_is_bad_input() -> None:
    res = _invoke("verify", "  ", "\\boxed{1}", "--type", "NV")
    assert res.exit_code == 2 and "empty" in res.output  # type: ignore[attr-defined]


def test_only_generate_with_failed_turns_exits_1(tmp_path: Path) -> None:
    from studybench.testing.stub_server import Fault, start_stub_server

    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    with start_stub_server() as srv:
        srv.fault_when(".", Fault("status", status=500), times=None)
        res = _invoke("eval", "--split", f, "--model", "stub", "--base-url", srv.base_url, "-k", 1, "--seeds", 1,
                      "--max-retries", 0, "--out", tmp_path / "run", "--only-generate")
    out = " ".join(res.output.split())  # type: ignore[attr-defined]
    assert res.exit_code == 1 and "1 failure looked transient" in out and "run the same command again" in out


def test_failed_turns_a_rerun_cannot_fix_are_said_to_be_so(tmp_path: Path) -> None:
    """HTTP 400 (the prompt is longer than the server's context) used to end in "run the same command
    again to retry them", which repeats the same failure."""
    from studybench.evaluate import is_permanent_error
    from studybench.testing.stub_server import Fault, start_stub_server

    assert is_permanent_error("HTTP 400 after 1 attempt: This model's maximum context length is 2048 tokens")
    assert is_permanent_error("HTTP 404 after 1 attempt: model not found")
    assert is_permanent_error("completion budget 73 tokens is below the floor of 256: ...")
    assert is_permanent_error("the prompt alone (~3000 tokens estimated, ...) does not fit the context budget 2048")
    for transient in ("HTTP 500 after 7 attempts", "HTTP 429 after 7 attempts", "HTTP 503 after 7 attempts",
                      "connection error (ConnectError) after 7 attempts", "timeout after 7 attempts (request_timeout=600s)"):
        assert not is_permanent_error(transient), transient
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    with start_stub_server() as srv:
        srv.fault_when(".", Fault("status", status=400, message="This model's maximum context length is 2048 tokens"),
                       times=None)
        res = _invoke("eval", "--split", f, "--model", "stub", "--base-url", srv.base_url, "-k", 1, "--seeds", 1,
                      "--out", tmp_path / "run")
    out = " ".join(res.output.split())  # type: ignore[attr-defined]
    assert res.exit_code == 1
    assert "failed with an error a re-run will repeat" in out and "--context-budget" in out
    assert "run the same command again to retry them" not in out


def test_paths_and_names_are_not_console_markup(tmp_path: Path) -> None:
    f = tmp_path / "set.json"
    f.write_text(json.dumps(SET))
    out = tmp_path / "runs" / "a[/b]"
    res = _invoke("eval", "--split", f, "-k", 1, "--seeds", 1, "--out", out)
    assert res.exit_code == 0 and f"{out}/report.json" in res.output.replace("\n", "")  # type: ignore[attr-defined]
