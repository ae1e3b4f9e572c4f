"""Two explicit token budgets (issue 11 item 10): ``max_tokens`` is always the completion budget,
``context_budget`` caps prompt + completion; a turn left fewer than the floor is never sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub, write_set

from studybench.evaluate import EvalError, EvalSpec, prepare_eval, run_eval
from studybench.models.openai_backend import estimate_prompt_tokens
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

SET = [parent("P1", [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{3}", problem="Q2: again?")], problem="A block.")]
URL = "http://127.0.0.1:9/v1"  # never contacted: prepare_eval makes no request


@pytest.fixture
def test_set(tmp_path: Path) -> Path:
    f = write_set(tmp_path / "set.json", SET)
    return f


def test_max_tokens_is_the_completion_budget_even_under_the_paper_preset() -> None:
    # before: the paper preset's budget was prompt + completion, so --max-tokens 200 on a 500-token
    # prompt sent a completion budget of 1
    s = EvalSpec(model="m", base_url=URL, preset="paper", max_tokens=300).sampling()
    assert (s.max_tokens, s.context_budget) == (300, 32768)
    s = EvalSpec(model="m", base_url=URL, preset="paper", context_budget=40000).sampling()
    assert (s.max_tokens, s.context_budget) == (None, 40000)
    s = EvalSpec(model="m", base_url=URL, preset="paper", context_budget=0, max_tokens=1000).sampling()
    assert (s.max_tokens, s.context_budget) == (1000, None)  # 0 lifts the preset's cap


@pytest.mark.parametrize(
    "settings,field,words",
    [
        ({"max_tokens": 100}, "max_tokens", ["completion budget 100", "floor of 256", "--min-completion-tokens"]),
        ({"preset": "paper", "context_budget": 200}, "context_budget", ["200", "floor of 256"]),
        ({"max_tokens": 100, "min_completion_tokens": 101}, "max_tokens", ["floor of 101"]),
        ({"min_completion_tokens": 0}, "min_completion_tokens", []),
    ],
)
def test_budgets_below_the_floor_are_refused(settings: dict[str, Any], field: str, words: list[str]) -> None:
    with pytest.raises(EvalError) as e:
        EvalSpec(model="m", base_url=URL, **settings)
    assert e.value.field == field and str(e.value).startswith(field)
    for w in words:
        assert w in str(e.value)
    EvalSpec(model="m", base_url=URL, max_tokens=100, min_completion_tokens=100)  # the floor is a setting


def test_a_selection_whose_prompt_leaves_too_little_is_refused_before_any_request(test_set: Path, tmp_path: Path) -> None:
    spec = EvalSpec(split=str(test_set), model="m", base_url=URL, context_budget=400, k=1, seeds=[0])
    with pytest.raises(EvalError) as e:
        prepare_eval(spec, tmp_path / "run")
    msg = str(e.value)
    assert e.value.field == "context_budget" and msg.startswith("context_budget: S//P1 / b (turn 2)")
    assert "context budget 400" in msg and "tokens estimated" in msg and "floor of 256" in msg
    assert not (tmp_path / "run").exists()
    prepare_eval(spec.merge({"context_budget": 4000}), tmp_path / "ok")  # enough room
    # a prompt that alone overflows the cap: no negative budget, and no advice that cannot help
    with pytest.raises(EvalError) as e:
        prepare_eval(spec.merge({"context_budget": 100, "min_completion_tokens": 16}), tmp_path / "run")
    msg = str(e.value)
    assert "does not fit the context budget 100" in msg and "-" not in msg.split("tokens estimated")[1].split("budget")[0]
    assert "--min-completion-tokens" not in msg and "--slice" in msg


def test_a_turn_whose_conversation_outgrows_the_budget_fails_unsent_naming_the_numbers(test_set: Path, tmp_path: Path) -> None:
    def model(body: dict[str, Any]) -> Reply:
        turn, _ = conversation_turn(body)
        return Reply("x" * 3000 + " Final Answer: \\boxed{2}" if turn == 0 else "Final Answer: \\boxed{3}")

    with start_stub_server(model, model="stub-model") as srv:
        spec = EvalSpec(split=str(test_set), model="stub-model", base_url=srv.base_url, context_budget=1200, k=1, seeds=[0])
        result = run_eval(spec, tmp_path / "run")
        assert srv.count == 1  # turn 2 (prompt ~1000 tokens of the first reply) was never sent
        assert srv.requests[0]["max_tokens"] == 1200 - estimate_prompt_tokens(srv.requests[0]["messages"])
    rows = [json.loads(line) for line in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["error"]]
    assert len(failed) == 1 and failed[0]["sub_id"] == "b" and failed[0]["attempts"] == 0
    assert "floor of 256" in failed[0]["error"] and "context budget 1200" in failed[0]["error"]
    assert result.failed_turns == 1


def test_the_manifest_records_both_budgets_and_an_old_run_resumes(test_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    spec = EvalSpec(split=str(test_set), model="m", base_url=URL, preset="paper", k=1, seeds=[0])
    plan = prepare_eval(spec, run)
    plan.open_store().close()
    manifest = json.loads((run / "manifest.json").read_text())
    sampling = manifest["backend"]["sampling"]
    assert (sampling["max_tokens"], sampling["context_budget"]) == (None, 32768)
    assert manifest["backend"]["min_completion_tokens"] == 256
    # a manifest written before the budgets were split: max_tokens + budget_includes_prompt
    del sampling["context_budget"], manifest["backend"]["min_completion_tokens"]
    sampling.update(max_tokens=32768, budget_includes_prompt=True)
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert prepare_eval(spec, run).resuming  # the same budgets: resuming is allowed
    with pytest.raises(EvalError, match=r"--context-budget 32768 \(now 16000\)"):
        prepare_eval(spec.merge({"context_budget": 16000}), run)
    # `--preset paper --max-tokens N` used to mean prompt + completion <= N: not the same run any more
    with pytest.raises(EvalError, match=r"--max-tokens unset \(now 4096\)"):
        prepare_eval(spec.merge({"max_tokens": 4096}), run)
    # an old completion-only budget (budget_includes_prompt false) maps to max_tokens
    greedy = spec.merge({"preset": "greedy"})
    prepare_eval(greedy, tmp_path / "greedy").open_store().close()
    manifest = json.loads((tmp_path / "greedy" / "manifest.json").read_text())
    sampling = manifest["backend"]["sampling"]
    assert (sampling["max_tokens"], sampling["context_budget"]) == (8192, None)
    del sampling["context_budget"], manifest["backend"]["min_completion_tokens"]
    sampling["budget_includes_prompt"] = False
    (tmp_path / "greedy" / "manifest.json").write_text(json.dumps(manifest))
    assert prepare_eval(greedy, tmp_path / "greedy").resuming
    sampling["budget_includes_prompt"] = True  # then 8192 was prompt + completion: another run
    (tmp_path / "greedy" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EvalError, match=r"--context-budget 8192 \(now unset\)"):
        prepare_eval(greedy, tmp_path / "greedy")
