"""GEPA with the StudyBench protocol (studybench.methods.gepa, `studybench gepa optimize`), against the stub server:
the task model answers correctly only under a system prompt holding a magic phrase, and the reflection model
(the same stub) proposes a prompt holding it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import REPO, require_data_file, require_extra

require_extra("gepa", "gepa", module_level=True)

from studybench.instructions import instruction_parents, load_instructions  # noqa: E402
from studybench.methods.gepa import (  # noqa: E402
    BEST_PROMPT_FILE,
    GepaError,
    StudyBenchAdapter,
    gepa_datasets,
    optimize,
    require_gepa,
)
from studybench.models.openai_backend import OpenAIBackend  # noqa: E402
from studybench.protocol import DEFAULT_SYSTEM_PROMPT  # noqa: E402
from studybench.records import Parent  # noqa: E402
from studybench.testing import start_stub_server  # noqa: E402
from studybench.testing.stub_script import message_text  # noqa: E402
from studybench.verify import Verifier  # noqa: E402

MAGIC = "CHECK-UNITS-TWICE"
REFLECTION_MARK = "I provided an assistant with the following instructions"
EVOLVED = f"You are an expert physicist. {MAGIC}: re-derive every number before you box it."
_VALUE = re.compile(r"value=(\d+)")


def _meta(i: int) -> dict[str, str]:
    return {"source": "Synth", "source_problem_id": f"E{i}", "source_chapter": "ch01", "sub_discipline": "Mechanics"}


def write_layers(d: Path, singles: int = 10, chains: int = 3) -> Path:
    """A train_data/ directory: ``singles`` single-turn records, ``chains`` two-record multi-sub chains."""
    d.mkdir(parents=True, exist_ok=True)
    single = [{"messages": [{"role": "user", "content": f"Single {i}: compute value={i}."}], "solution": "s",
               "answer": f"\\boxed{{{i}}}", "answer_type": "NV", "type_sequence": "", "metadata": _meta(i)}
              for i in range(singles)]
    multi = []
    for c in range(chains):
        i, q1, q2 = 100 + c, f"Chain {c} part a: value={200 + c}.", f"Chain {c} part b: value={300 + c}."
        multi.append({"messages": [{"role": "user", "content": q1}], "answer": f"\\boxed{{{200 + c}}}",
                      "answer_type": "NV", "metadata": _meta(i)})
        multi.append({"messages": [{"role": "user", "content": q1}, {"role": "assistant", "content": f"\\boxed{{{200 + c}}}"},
                                   {"role": "user", "content": q2}], "answer": f"\\boxed{{{300 + c}}}",
                      "answer_type": "NV", "metadata": _meta(i)})
    (d / "verifiable_instr.json").write_text(json.dumps(single))
    (d / "verifiable_instr_multi_subs.json").write_text(json.dumps(multi))
    return d


def magic_reply(body: dict[str, Any]) -> str:
    """Task model: right only under the magic phrase. Reflection model: a prompt with the phrase, in fences."""
    msgs = body["messages"]
    if REFLECTION_MARK in message_text(msgs[0]["content"]):
        return f"Here is a better instruction.\n```\n{EVOLVED}\n```"
    system = message_text(msgs[0]["content"])
    v = int(_VALUE.findall(message_text(msgs[-1]["content"]))[-1])
    return f"Some work.\nFinal Answer: \\boxed{{{v if MAGIC in system else v + 1000}}}"


def _is_task(body: dict[str, Any]) -> bool:
    return REFLECTION_MARK not in message_text(body["messages"][0]["content"])


# ----------------------------------------------------------------------------------------------- data


def test_datasets_split_by_exercise_seeded_with_both_layers(tmp_path: Path) -> None:
    d = write_layers(tmp_path / "train", singles=12, chains=4)
    train, val = gepa_datasets(d, val_size=5, seed=3)
    assert len(val) == 5 and len(train) == 11
    assert gepa_datasets(d, val_size=5, seed=3) == (train, val)
    assert [p.uid for p in gepa_datasets(d, val_size=5, seed=4)[1]] != [p.uid for p in val]
    assert {p.uid for p in train}.isdisjoint({p.uid for p in val})
    assert any(len(p.subs()) == 2 for p in train + val) and any(p.is_single for p in train + val)
    small_train, small_val = gepa_datasets(d, val_size=2, seed=0, limit=6)
    assert len(small_train) + len(small_val) <= 6 and len(small_val) == 2
    with pytest.raises(GepaError, match="not enough"):
        gepa_datasets(d, val_size=16)
    with pytest.raises(GepaError, match="no Instructions with Answer"):
        gepa_datasets(tmp_path / "empty")


def test_datasets_from_the_real_layers_keep_an_exercise_on_one_side() -> None:
    train_dir = Path(os.environ.get("STUDYBENCH_DATA", "/nonexistent")) / "train"
    require_data_file(train_dir / "verifiable_instr.json", "the single-turn instruction layer")
    train, val = gepa_datasets(train_dir, val_size=32, seed=0)
    assert len(val) == 32 and len(train) > 500
    key = lambda p: (p.source, p.source_problem_id.split("#")[0].split("/")[-1])  # noqa: E731
    assert not {key(p) for p in train} & {key(p) for p in val}
    assert any(not p.is_single for p in train + val)  # the multi-sub chains are in


# -------------------------------------------------------------------------------------------- adapter


def _chain_parent() -> Parent:
    layer = load_instructions(write_layers(Path(os.environ["PYTEST_TMP"]) / "t", 0, 1) / "verifiable_instr_multi_subs.json")
    return instruction_parents(layer)[0][0]


@pytest.fixture
def chain_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Parent:
    monkeypatch.setenv("PYTEST_TMP", str(tmp_path))
    return _chain_parent()


def test_evaluate_scores_a_multi_sub_parent_with_the_models_own_earlier_reply(chain_parent: Parent) -> None:
    def reply(body: dict[str, Any]) -> str:
        turn = sum(1 for m in body["messages"] if m["role"] == "user")
        return "Final Answer: \\boxed{999}" if turn == 1 else "Final Answer: \\boxed{300}"  # first wrong, second right

    with start_stub_server(reply) as srv, Verifier(workers=1) as v:
        adapter = StudyBenchAdapter(OpenAIBackend("m", srv.base_url, max_retries=0), v, concurrency=2)
        res = adapter.evaluate([chain_parent], {"system_prompt": "PROMPT-X"}, capture_traces=True)
        reqs = srv.requests
    assert res.scores == [0.5] and res.outputs[0]["correct"] == [False, True]
    second = reqs[1]["messages"]
    assert second[0] == {"role": "system", "content": "PROMPT-X"}
    assert second[2] == {"role": "assistant", "content": "Final Answer: \\boxed{999}"}  # its own reply, not the gold 200
    assert adapter.rollouts == 1
    data = adapter.make_reflective_dataset({"system_prompt": "PROMPT-X"}, res, ["system_prompt"])["system_prompt"]
    assert len(data) == 1
    rec = data[0]
    assert "value=200" in rec["Inputs"]["Sub-question 1"] and "value=300" in rec["Inputs"]["Sub-question 2"]
    assert "\\boxed{999}" in rec["Generated Outputs"]["Sub-question 1"]
    fb = rec["Feedback"]
    assert "Sub-question 1: Incorrect: expected \\boxed{200}; the verifier said: incorrect" in fb
    assert "Sub-question 2: Correct." in fb and "1/2" in fb


def test_reflective_dataset_of_a_single_question_has_gold_reason_and_a_short_tail(tmp_path: Path) -> None:
    layer = load_instructions(write_layers(tmp_path, 2, 0) / "verifiable_instr.json")
    parents = instruction_parents(layer)[0]
    long_reply = "x" * 50_000 + "\nFinal Answer: \\boxed{41}"
    with start_stub_server(long_reply) as srv, Verifier(workers=1) as v:
        adapter = StudyBenchAdapter(OpenAIBackend("m", srv.base_url, max_retries=0), v)
        res = adapter.evaluate(parents[1:], {"system_prompt": "P"}, capture_traces=True)
    assert res.scores == [0.0]
    rec = adapter.make_reflective_dataset({"system_prompt": "P"}, res, ["system_prompt"])["system_prompt"][0]
    assert rec["Inputs"] == {"Problem": "Single 1: compute value=1."}
    assert rec["Feedback"].startswith("Incorrect: expected \\boxed{1}; the verifier said: incorrect")
    assert "\\boxed{41}" in rec["Generated Outputs"] and len(json.dumps(rec)) < 3000  # the 50k reply is cut


def test_a_failed_request_is_incorrect_and_recorded(tmp_path: Path) -> None:
    layer = load_instructions(write_layers(tmp_path, 2, 0) / "verifiable_instr.json")
    parents = instruction_parents(layer)[0]
    with start_stub_server("Final Answer: \\boxed{0}") as srv, Verifier(workers=1) as v:
        srv.fail(status=400, times=1)
        adapter = StudyBenchAdapter(OpenAIBackend("m", srv.base_url, max_retries=0), v, concurrency=1)
        res = adapter.evaluate(parents[:1], {"system_prompt": "P"}, capture_traces=True)
    assert res.scores == [0.0] and res.outputs[0]["failed"] == 1 and adapter.failed_requests == 1
    assert "HTTP 400" in (adapter.last_error or "")
    rec = adapter.make_reflective_dataset({"system_prompt": "P"}, res, ["system_prompt"])["system_prompt"][0]
    assert "the request failed" in rec["Feedback"] and "\\boxed{0}" in rec["Feedback"]


def test_a_dead_task_endpoint_stops_the_run(tmp_path: Path) -> None:
    layer = load_instructions(write_layers(tmp_path, 2, 0) / "verifiable_instr.json")
    with Verifier(workers=1) as v:
        adapter = StudyBenchAdapter(OpenAIBackend("m", "http://127.0.0.1:9/v1", max_retries=0), v)
        with pytest.raises(GepaError, match="did not answer any of 2 requests"):
            adapter.evaluate(instruction_parents(layer)[0], {"system_prompt": "P"})


def test_missing_gepa_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gepa", None)
    with pytest.raises(GepaError, match=re.escape('pip install "studybench[gepa]"')):
        require_gepa()


# ------------------------------------------------------------------------------------------ optimize


def _run(srv: Any, train: Path, run_dir: Path, budget: int, **kw: Any) -> Any:
    return optimize(model="task-m", base_url=srv.base_url, reflection_model="refl-m", run_dir=run_dir,
                    max_metric_calls=budget, train_dir=train, val_size=4, seed=0, concurrency=4, max_retries=0,
                    verify_workers=1, snapshot_every=5, **kw)


def test_optimize_finds_the_phrase_snapshots_and_resumes_without_redoing_the_seed(tmp_path: Path) -> None:
    train = write_layers(tmp_path / "train")
    run_dir = tmp_path / "run"
    _, val = gepa_datasets(train, val_size=4, seed=0)
    val_values = {int(x) for p in val for s in p.subs() for x in _VALUE.findall(s.problem)}
    lines: list[str] = []
    with start_stub_server(magic_reply) as srv:
        first = _run(srv, train, run_dir, 4, log=lines.append)  # the seed's validation evaluation uses it all
        assert first.rollouts >= 4 and first.best_prompt == DEFAULT_SYSTEM_PROMPT and first.seed_score == 0.0
        n_first = srv.count
        second = _run(srv, train, run_dir, 30, log=lines.append)
        later = srv.requests[n_first:]
    assert second.resumed and not first.resumed
    # resumed: the seed prompt was not evaluated on the validation set again (only on training minibatches)
    seed_on_val = [b for b in later if _is_task(b) and b["messages"][0]["content"] == DEFAULT_SYSTEM_PROMPT
                   and int(_VALUE.findall(b["messages"][-1]["content"])[-1]) in val_values]
    assert seed_on_val == []
    assert any(not _is_task(b) for b in later)  # the reflection model was asked
    assert MAGIC in second.best_prompt and second.best_score == 1.0 > second.seed_score == 0.0
    assert MAGIC in (run_dir / BEST_PROMPT_FILE).read_text()
    snaps = sorted(int(p.stem.split("_")[-1]) for p in (run_dir / "snapshots").glob("best_at_*.md"))
    assert snaps and all(n % 5 == 0 for n in snaps) and snaps[-1] <= second.rollouts
    assert MAGIC in (run_dir / "snapshots" / f"best_at_{snaps[-1]}.md").read_text()
    # a snapshot holds the best prompt when the budget passed its multiple: at 5 rollouts only the seed was known
    assert (run_dir / "snapshots" / "best_at_5.md").read_text() == DEFAULT_SYSTEM_PROMPT + "\n"
    rec = json.loads((run_dir / "gepa_run.json").read_text())
    assert rec["invocations"] == 2 and rec["rollouts"] == second.rollouts and rec["best"]["score"] == 1.0
    assert rec["gepa_version"] and rec["task_model"]["model"] == "task-m" and rec["reflection_model"]["model"] == "refl-m"
    assert any(line.startswith("resuming GEPA") for line in lines)
    # another seed prompt in the same run directory is refused, naming the flag
    with start_stub_server(magic_reply) as srv, pytest.raises(GepaError, match="another --seed-prompt"):
        _run(srv, train, run_dir, 40, seed_prompt="Something else.")
    # so is another validation set, in a message that reads as English
    with start_stub_server(magic_reply) as srv, pytest.raises(GepaError, match=r"run with another validation set \(--train-dir"):
        _run(srv, write_layers(tmp_path / "other", singles=7, chains=1), run_dir, 40)


def test_cli_optimize_then_eval_with_the_evolved_prompt(tmp_path: Path) -> None:
    train = write_layers(tmp_path / "train")
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SECRET_KEY_VAR": "sk-" + "a1" * 15}
    with start_stub_server(magic_reply) as srv:
        url = srv.base_url + "?api_key=hunter2hunter2"
        r = subprocess.run([sys.executable, "-m", "studybench", "gepa", "optimize", "--model", "task-m", "--base-url", url,
                            "--reflection-model", "refl-m", "--reflection-base-url", srv.base_url, "--val-size", "4",
                            "--max-metric-calls", "30", "--run-dir", str(run_dir), "--train-dir", str(train),
                            "--api-key-env", "SECRET_KEY_VAR", "--snapshot-every", "10", "--verify-workers", "1",
                            "--max-retries", "0"], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        assert "best prompt: validation score 1.000" in r.stderr and "seed prompt: validation score 0.000" in r.stderr
        assert "rollouts used:" in r.stderr and r.stdout == ""
        best = run_dir / BEST_PROMPT_FILE
        assert MAGIC in best.read_text() and (run_dir / "snapshots" / "best_at_10.md").is_file()
        run_json = (run_dir / "gepa_run.json").read_text()
        assert "hunter2hunter2" not in run_json and env["SECRET_KEY_VAR"] not in run_json and "SECRET_KEY_VAR" in run_json
        # the evolved prompt through the real evaluation CLI
        test_set = tmp_path / "tiny.json"
        test_set.write_text(json.dumps([{"source": "Tiny", "year": "2024", "source_problem_id": "T1", "problem": "value=7?",
                                         "answer": "\\boxed{7}", "answer_type": "NV", "type_sequence": ""}]))
        n0 = srv.count
        r = subprocess.run([sys.executable, "-m", "studybench", "eval", "--split", str(test_set), "--model", "task-m",
                            "--base-url", srv.base_url, "--system-prompt", str(best), "-k", "1", "--seeds", "1",
                            "--out", str(tmp_path / "eval"), "--verify-workers", "1"],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        seen = srv.requests[n0:]
    assert len(seen) == 1 and MAGIC in seen[0]["messages"][0]["content"]
    rep = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert rep["par_at_k"]["mean"] == 100.0


def test_cli_without_an_endpoint_is_a_usage_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["PYTHONPATH"] = str(REPO / "src")
    r = subprocess.run([sys.executable, "-m", "studybench", "gepa", "optimize", "--model", "m", "--reflection-model", "r",
                        "--run-dir", str(tmp_path / "run"), "--max-metric-calls", "10"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "--base-url is required" in r.stderr and "Traceback" not in r.stderr


def test_cli_missing_train_dir_is_a_usage_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from studybench.cli import app

    res = CliRunner().invoke(app, ["gepa", "optimize", "--model", "m", "--reflection-model", "r", "--base-url",
                                   "http://127.0.0.1:9/v1", "--run-dir", str(tmp_path / "run"), "--max-metric-calls", "10",
                                   "--train-dir", str(tmp_path / "nope")], catch_exceptions=False)
    assert res.exit_code == 2 and "--train-dir" in res.output and "not a directory" in res.output
    assert not (tmp_path / "run").exists()


def test_evaluate_uses_definitions_stated_in_the_problem() -> None:
    # as eval's rule pass does: "let tau = RC" in the problem makes tau/2 an answer for RC/2 (and 2 tau is still wrong)
    parent = Parent(source="S", source_problem_id="1", problem="Let $\\tau = RC$. Find the half time constant.",
                    answer="\\boxed{\\frac{RC}{2}}", answer_type="EX")
    for reply, want in (("Final Answer: \\boxed{\\frac{\\tau}{2}}", 1.0), ("Final Answer: \\boxed{2\\tau}", 0.0)):
        with start_stub_server(reply) as srv, Verifier(workers=1) as v:
            adapter = StudyBenchAdapter(OpenAIBackend("m", srv.base_url, max_retries=0), v)
            res = adapter.evaluate([parent], {"system_prompt": "P"}, capture_traces=True)
        assert res.scores == [want], res.outputs
