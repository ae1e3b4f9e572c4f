"""Labels on runs (issue 12): ``eval --label``, ``studybench label``, the manifest, the report.

Labels are free ``key=value`` strings; they never block a resume (a resumed run merges them, later
wins, and says so), bad ones are refused with the label named, and they reach report.json / report.md.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from _support import parent, sub, write_set
from typer.testing import CliRunner

from studybench.cli import app
from studybench.evaluate import EvalError, EvalSpec, prepare_eval, run_eval, run_plan
from studybench.report import build_report
from studybench.store import Manifest, RunDirInUseError, RunStore, check_labels, set_labels

SET = [parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?")], problem="A block.")]


@pytest.fixture
def test_set(tmp_path: Path) -> Path:
    f = write_set(tmp_path / "set.json", SET)
    return f


def _eval(test_set: Path, run: Path, *labels: str) -> object:
    args = ["eval", "--split", str(test_set), "-k", "1", "--seeds", "1", "--out", str(run)]
    for lab in labels:
        args += ["--label", lab]
    return CliRunner().invoke(app, args, catch_exceptions=False)


def _labels(run: Path) -> dict[str, str]:
    return json.loads((run / "manifest.json").read_text())["labels"]


def test_labels_round_trip_through_eval_label_and_report(test_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    res = _eval(test_set, run, "method=GEPA", "layer=Instructions with Answer", "base=Qwen3-8B", "note=a=b")
    assert res.exit_code == 0, res.output
    want = {"method": "GEPA", "layer": "Instructions with Answer", "base": "Qwen3-8B", "note": "a=b"}
    assert _labels(run) == want and list(_labels(run)) == list(want)  # the order given
    assert json.loads((run / "report.json").read_text())["labels"] == want
    md = (run / "report.md").read_text()
    assert "Labels: method = GEPA, layer = Instructions with Answer, base = Qwen3-8B, note = a=b\n" in md

    cli = CliRunner()
    res = cli.invoke(app, ["label", str(run), "base=Qwen3-14B", "seed set=3", "--remove", "note", "--remove", "absent"],
                     catch_exceptions=False)
    assert res.exit_code == 0, res.output
    want = {"method": "GEPA", "layer": "Instructions with Answer", "base": "Qwen3-14B", "seed set": "3"}
    assert _labels(run) == want
    assert "report.json and report.md refreshed" in res.output
    assert json.loads((run / "report.json").read_text())["labels"] == want  # refreshed, not stale
    assert "base = Qwen3-14B, seed set = 3" in (run / "report.md").read_text()
    res = cli.invoke(app, ["label", str(run)], catch_exceptions=False)
    assert res.exit_code == 0 and res.stdout.splitlines() == [
        "method=GEPA", "layer=Instructions with Answer", "base=Qwen3-14B", "seed set=3"]
    assert set_labels(run, {k: None for k in want}) == {}
    assert "labels" not in build_report(run)  # an unlabelled run's report has no labels key
    assert cli.invoke(app, ["label", str(run), "--show"]).stdout == "(no labels)\n"


def test_resume_is_not_blocked_by_labels_and_merges_them(test_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _eval(test_set, run, "method=GEPA", "layer=L1").exit_code == 0
    created = json.loads((run / "manifest.json").read_text())["created"]
    res = _eval(test_set, run, "method=ACE", "base=Qwen3-8B")
    assert res.exit_code == 0, res.output
    assert "resuming" in res.output
    assert "labels merged into the run's (later wins): method: 'GEPA' -> 'ACE'; base: 'Qwen3-8B' (new)" in res.output
    assert _labels(run) == {"method": "ACE", "layer": "L1", "base": "Qwen3-8B"}
    assert json.loads((run / "manifest.json").read_text())["created"] == created
    res = _eval(test_set, run)  # no --label: the run keeps its labels, and nothing is said
    assert res.exit_code == 0 and "labels merged" not in res.output
    assert _labels(run) == {"method": "ACE", "layer": "L1", "base": "Qwen3-8B"}
    man = RunStore(run).read_manifest()
    assert man.resume_conflicts(man.model_copy(update={"labels": {"other": "x"}})) == []


def test_labels_set_between_prepare_and_run_are_kept(test_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0], labels={"method": "GEPA"}), run)
    plan = prepare_eval(EvalSpec(split=str(test_set), k=1, seeds=[0], labels={"layer": "L2"}), run)
    set_labels(run, {"base": "Qwen3-8B", "method": "ACE"})  # another command came first
    run_plan(plan)
    assert _labels(run) == {"method": "ACE", "base": "Qwen3-8B", "layer": "L2"}


@pytest.mark.parametrize(
    "label,message",
    [
        ("method", "--label 'method': expected KEY=VALUE"),
        ("=GEPA", "a label key must not be empty"),
        ("method=", "the value is empty"),
        (" method=GEPA", "a key must not start or end with whitespace"),
        ("method=GE\nPA", "the value must be printable"),
        ("me\x1bthod=GEPA", "a key must be printable"),
        ("k" * 65 + "=v", "a key is at most 64 characters, got 65"),
        ("method=" + "v" * 501, "a value is at most 500 characters, got 501"),
    ],
)
def test_bad_labels_are_refused_on_the_command_line(test_set: Path, tmp_path: Path, label: str, message: str) -> None:
    run = tmp_path / "run"
    res = _eval(test_set, run, label)
    assert res.exit_code == 2 and message in res.output, res.output
    assert not (run / "manifest.json").exists()
    run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0]), run)
    res = CliRunner().invoke(app, ["label", str(run), label])
    assert res.exit_code == 2 and message.replace("--label", "label") in res.output, res.output
    assert _labels(run) == {}


def test_bad_labels_are_refused_by_the_library(test_set: Path, tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"labels: label 'a=b': a key must not contain '='") as e:
        EvalSpec(split=str(test_set), labels={"a=b": "x"})
    assert e.value.field == "labels"
    with pytest.raises(EvalError, match="labels: at most 64 labels, got 65"):
        EvalSpec(split=str(test_set), labels={f"k{i}": "v" for i in range(65)})
    with pytest.raises(ValueError, match="keys and values must be strings"):
        check_labels({"a": 1})
    run = tmp_path / "run"
    run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0]), run)
    with pytest.raises(ValueError, match="label 'a': the value is empty"):
        set_labels(run, {"a": ""})
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        set_labels(tmp_path / "nope", {"a": "b"})
    assert not (tmp_path / "nope").exists()
    obj = json.loads((run / "manifest.json").read_text())
    with pytest.raises(ValueError, match=r"field 'labels': label 'x': the value must be printable"):
        Manifest.parse({**obj, "labels": {"x": "a\tb"}})
    del obj["labels"]  # a manifest of an older version: no labels
    assert Manifest.parse(obj).labels == {}


def test_label_is_refused_while_another_command_writes_the_run(test_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_eval(EvalSpec(split=str(test_set), k=1, seeds=[0], labels={"method": "GEPA"}), run)
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with RunStore(run).lock(command="studybench eval (test)"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert held.wait(30)
        with pytest.raises(RunDirInUseError):
            set_labels(run, {"method": "ACE"})
        res = CliRunner().invoke(app, ["label", str(run), "method=ACE"])
        assert res.exit_code == 1 and "is in use by" in res.output
    finally:
        release.set()
        t.join()
    assert _labels(run) == {"method": "GEPA"}
    assert set_labels(run, {"method": "ACE"}) == {"method": "ACE"}
