"""Rule-only RL rewards: verl and TRL signatures, never raising."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studybench.rewards import compute_score, compute_score_dense, reward_for, trl_reward

GT = {"answer": "\\boxed{3\\times10^{8}\\,\\mathrm{m/s}}", "answer_type": "NV", "type_sequence": ""}


@pytest.mark.parametrize(
    "solution,ground_truth,extra,expected",
    [
        ("<think>c</think>So c.\nFinal Answer: \\boxed{3e8}", GT, None, 1.0),
        ("Final Answer: \\boxed{3e7}", GT, None, 0.0),
        ("Final Answer: \\boxed{3e8}", json.dumps(GT), None, 1.0),
        ("Final Answer: \\boxed{B}", "\\boxed{B}", {"answer_type": "MC"}, 1.0),
        ("Final Answer: \\boxed{A}", "\\boxed{B}", {"answer_type": "MC"}, 0.0),
        ("no box at all", GT, None, 0.0),
        ("Final Answer: \\boxed{1}", {"answer": "\\boxed{1}"}, None, 0.0),  # no answer_type: 0, not an exception
        ("Final Answer: \\boxed{1}", None, None, 0.0),
        (None, GT, None, 0.0),
    ],
)
def test_verl_compute_score(solution: object, ground_truth: object, extra: object, expected: float) -> None:
    assert compute_score("studybench", solution, ground_truth, extra) == expected


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('os').system('touch {p}')",
        "\\text{{__import__('os').system('touch {p}')}}",
        "eval(\"open('{p}', 'w').write('x')\")",
    ],
)
@pytest.mark.parametrize("answer_type", ["NV", "EX", "QL"])
def test_reward_never_runs_code_in_a_completion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: str, answer_type: str) -> None:
    monkeypatch.chdir(tmp_path)  # a fresh directory per test: relative paths would land here too
    canary = tmp_path / "CANARY"
    text = payload.format(p=canary)
    gt = {"answer": "\\boxed{" + text + "}", "answer_type": answer_type, "type_sequence": ""}
    for reward in (compute_score, compute_score_dense):
        reward("studybench", f"Final Answer: \\boxed{{{text}}}", GT)
        reward("studybench", f"<think>{text}</think>Final Answer: \\boxed{{1}}", gt)
    assert trl_reward([f"Final Answer: \\boxed{{{text}}}"], answer=[gt["answer"]], answer_type=[answer_type],
                      type_sequence=[""]) in ([0.0], [1.0])
    assert not canary.exists() and list(tmp_path.iterdir()) == []


def test_trl_reward_strings_and_conversations() -> None:
    completions = [
        "Final Answer: \\boxed{1}, \\boxed{2}",
        [{"role": "assistant", "content": "Final Answer: \\boxed{2}, \\boxed{1}"}],
        [],
    ]
    got = trl_reward(
        completions,
        answer=["\\boxed{1}, \\boxed{2}"] * 3,
        answer_type=["TUP"] * 3,
        type_sequence=["NV,NV"] * 3,
        prompts=["p"] * 3,
    )
    assert got == [1.0, 0.0, 0.0]
    assert trl_reward(["x"]) == [0.0]  # missing columns never raise


def test_reward_for_bad_types() -> None:
    assert reward_for("Final Answer: \\boxed{1}", "\\boxed{1}", "XX") == 0.0
    assert reward_for("Final Answer: \\boxed{1}", "\\boxed{1}", "TUP") == 0.0


# --- the dense variant ---------------------------------------------------------------------------

from studybench.rewards import (  # noqa: E402
    DENSE_WEIGHTS,
    dense_components,
    dense_reward_for,
    trl_reward_dense,
)

_KM = r"\boxed{2.5}"


@pytest.mark.parametrize(
    "response,answer,atype,unit,components",
    [
        ("Final Answer: \\boxed{2500\\,\\mathrm{m}}", _KM, "NV", r"\mathrm{km}", {"answer": 0.8, "format": 0.1, "dimensional": 0.05}),
        ("Final Answer: \\boxed{3\\,\\mathrm{m}}", _KM, "NV", r"\mathrm{km}", {"answer": 0.0, "format": 0.1, "dimensional": 0.05}),
        ("Final Answer: \\boxed{3\\,\\mathrm{s}}", _KM, "NV", r"\mathrm{km}", {"answer": 0.0, "dimensional": -0.2}),
        ("I do not know.", _KM, "NV", None, {"answer": 0.0, "format": -0.5}),
        ("The answer is \\boxed{2.5}", _KM, "NV", None, {"answer": 0.8, "format": 0.0}),  # no Final Answer line
        ("Final Answer: \\boxed{1} \\boxed{2} \\boxed{3}", _KM, "NV", None, {"consistency": -0.2}),
        ("Final Answer: \\boxed{\\frac{m v^2}{2}}", r"\boxed{\frac{1}{2} m v^2}", "EX", None, {"answer": 0.8, "symbolic": 0.05}),
        ("Final Answer: \\boxed{m v^2}", r"\boxed{\frac{1}{2} m v^2}", "EX", None, {"answer": 0.0, "symbolic": 0.05}),
        ("Final Answer: \\boxed{m g h}", r"\boxed{\frac{1}{2} m v^2}", "EX", None, {"answer": 0.0, "symbolic": 0.0}),
    ],
)
def test_dense_components(response: str, answer: str, atype: str, unit: object, components: dict[str, float]) -> None:
    got = dense_components(response, answer, atype, "", unit)
    assert set(got) == {"answer", "format", "dimensional", "symbolic", "consistency"}
    for k, v in components.items():
        assert got[k] == pytest.approx(v), (k, got)
    total = dense_reward_for(response, answer, atype, "", unit)
    assert -1.0 <= total <= 1.0
    assert total == pytest.approx(max(-1.0, min(1.0, sum(got.values()))))


# the format bonus (issue 26, mutation trial): a Final Answer line *and* one box per gold slot, outside the reasoning
_FORMAT_CASES = [
    ("Final Answer: \\boxed{1}, \\boxed{2}", 0.1, "both slots boxed on the Final Answer line"),
    ("Final Answer: \\boxed{1}", 0.0, "one box for two slots"),
    ("<think>Final Answer: \\boxed{3}</think> The answers are \\boxed{1} and \\boxed{2}", 0.0,
     "the Final Answer line is in the reasoning only"),
    ("The answers are \\boxed{1} and \\boxed{2}", 0.0, "no Final Answer line"),
]


@pytest.mark.parametrize("response,bonus,why", _FORMAT_CASES, ids=[c[2] for c in _FORMAT_CASES])
def test_dense_format_bonus_needs_a_visible_final_line_with_one_box_per_slot(response: str, bonus: float, why: str) -> None:
    got = dense_components(response, "\\boxed{1}\\boxed{2}", "TUP", "NV,NV")
    assert got["format"] == pytest.approx(bonus), (why, got)


def test_dense_orders_right_above_wrong_and_never_raises() -> None:
    right = dense_reward_for("Final Answer: \\boxed{2500\\,\\mathrm{m}}", _KM, "NV", "", r"\mathrm{km}")
    near = dense_reward_for("Final Answer: \\boxed{3\\,\\mathrm{m}}", _KM, "NV", "", r"\mathrm{km}")
    bad_unit = dense_reward_for("Final Answer: \\boxed{3\\,\\mathrm{s}}", _KM, "NV", "", r"\mathrm{km}")
    none = dense_reward_for("nothing", _KM, "NV")
    assert right >= 0.9 > 0.3 >= near > bad_unit > none
    for bad in [(None, _KM, "NV"), ("x", None, "NV"), ("Final Answer: \\boxed{1}", _KM, "??"), ("Final Answer: \\boxed{1}", _KM, "TUP")]:
        assert dense_reward_for(*bad) == DENSE_WEIGHTS["no_answer"]


def test_dense_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    gt = {"answer": _KM, "answer_type": "NV", "gold_unit": r"\mathrm{km}"}
    sol = "Final Answer: \\boxed{2500\\,\\mathrm{m}}"
    assert compute_score("d", sol, gt) == 1.0  # binary by default, gold_unit honoured
    assert compute_score("d", sol, gt, {"reward": "dense"}) == pytest.approx(0.95)
    assert compute_score_dense("d", sol, json.dumps(gt)) == pytest.approx(0.95)
    assert compute_score_dense("d", None, None) == DENSE_WEIGHTS["no_answer"]
    assert trl_reward_dense([sol, "x"], answer=[_KM] * 2, answer_type=["NV"] * 2, gold_unit=[r"\mathrm{km}"] * 2) == pytest.approx([0.95, -0.5])
    monkeypatch.setenv("STUDYBENCH_REWARD", "dense")
    assert trl_reward([sol], answer=[_KM], answer_type=["NV"], gold_unit=[r"\mathrm{km}"]) == pytest.approx([0.95])


# --- verl 0.9 / TRL 1.x calling conventions ------------------------------------------------------

import logging  # noqa: E402

import studybench.rewards as rewards_module  # noqa: E402

_VERL_GT = {"answer": "\\boxed{3\\times10^{8}\\,\\mathrm{m/s}}", "answer_type": "NV", "type_sequence": "", "gold_unit": None}
_SOL = "<think>c = 1/sqrt(mu eps)</think>Final Answer: \\boxed{3.0e8}"


@pytest.mark.parametrize("ground_truth", [_VERL_GT, json.dumps(_VERL_GT)])
def test_verl_keyword_call_with_extra_keywords(ground_truth: object) -> None:
    extra = {"reward_router_address": "127.0.0.1:1", "reward_model_tokenizer": object(), "something_new": [1, 2]}
    got = compute_score(data_source="studybench", solution_str=_SOL, ground_truth=ground_truth, extra_info={"index": 3}, **extra)
    assert got == 1.0 and isinstance(got, float)
    assert compute_score(data_source="studybench", solution_str="Final Answer: \\boxed{2e8}", ground_truth=ground_truth, extra_info=None, **extra) == 0.0
    assert compute_score_dense(data_source="d", solution_str=_SOL, ground_truth=ground_truth, extra_info={}, **extra) == pytest.approx(0.9)


def test_verl_dict_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STUDYBENCH_REWARD_DICT", raising=False)
    got = compute_score(data_source="d", solution_str=_SOL, ground_truth=_VERL_GT, extra_info=None, return_dict=True)
    assert isinstance(got, dict) and set(got) == {"score", "acc", "reason", "answer_type", "extracted", "pred"}
    assert got["score"] == 1.0 and got["acc"] == 1.0 and got["answer_type"] == "NV"
    assert got["reason"].startswith("correct: numeric match") and got["extracted"] == got["pred"] == "3.0e8"
    assert all(isinstance(x, (str, float)) for x in got.values())  # scalars verl can log
    wrong = compute_score(data_source="d", solution_str="Final Answer: \\boxed{1}, \\boxed{3}", ground_truth="\\boxed{1}, \\boxed{2}",
                          extra_info={"answer_type": "TUP", "type_sequence": "NV,NV"}, return_dict=True)
    assert wrong["score"] == 0.0 and wrong["reason"].startswith("incorrect: slot 2") and wrong["extracted"] == "1 | 3"
    dense = compute_score_dense("d", _SOL, _VERL_GT, return_dict=True)
    assert dense["score"] == pytest.approx(0.9) and dense["acc"] == 1.0 and set(dense) == set(got)
    assert compute_score("d", _SOL, _VERL_GT) == 1.0  # float unless asked
    monkeypatch.setenv("STUDYBENCH_REWARD_DICT", "1")
    assert compute_score(data_source="d", solution_str=_SOL, ground_truth=_VERL_GT, extra_info=None)["score"] == 1.0  # type: ignore[index]
    assert compute_score("d", _SOL, _VERL_GT, return_dict=False) == 1.0


def test_ground_truth_as_stored_by_parquet() -> None:
    # parquet gives a list back for a list column, None for a missing unit; both are read
    gt = {"answer": "\\boxed{1}, \\boxed{2}", "answer_type": "TUP", "type_sequence": ["NV", "NV"], "gold_unit": None}
    assert compute_score("d", "Final Answer: \\boxed{1}, \\boxed{2}", gt) == 1.0
    assert compute_score("d", "Final Answer: \\boxed{1}, \\boxed{2}", json.dumps(gt).encode()) == 1.0
    gt_km = {"answer": "\\boxed{2.5}", "answer_type": "NV", "type_sequence": None, "gold_unit": "\\mathrm{km}"}
    assert compute_score("d", "Final Answer: \\boxed{2500\\,\\mathrm{m}}", gt_km) == 1.0


@pytest.mark.parametrize(
    "ground_truth,extra,reason",
    [
        ("\\boxed{1}", None, "malformed ground truth: answer_type missing"),
        ({"answer": "\\boxed{1}", "answer_type": None}, {}, "malformed ground truth: answer_type missing"),
        ({"answer": "\\boxed{1}", "answer_type": "XX"}, None, "malformed ground truth: unknown answer_type"),
        ({"answer": "\\boxed{1}", "answer_type": "TUP"}, None, "malformed ground truth: TUP needs a type_sequence"),
        ({"answer": "", "answer_type": "NV"}, None, "malformed ground truth: answer missing"),
        (None, None, "malformed ground truth: answer missing"),
    ],
)
def test_malformed_ground_truth_is_named_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, ground_truth: object, extra: object, reason: str
) -> None:
    monkeypatch.setattr(rewards_module, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="studybench.rewards"):
        for _ in range(3):
            got = compute_score(data_source="d", solution_str="Final Answer: \\boxed{1}", ground_truth=ground_truth,
                                extra_info=extra, return_dict=True)
            assert got["score"] == 0.0 and got["reason"] == reason  # type: ignore[index]
            assert compute_score("d", "Final Answer: \\boxed{1}", ground_truth, extra) == 0.0
    warnings = [r.getMessage() for r in caplog.records if r.name == "studybench.rewards"]
    assert len(warnings) == 1 and reason in warnings[0]


def test_trl_keyword_call_and_rows_without_gold() -> None:
    n = 4
    got = trl_reward(
        prompts=["p"] * n,
        completions=["Final Answer: \\boxed{B}", "Final Answer: \\boxed{A}", "Final Answer: \\boxed{B}", [{"role": "assistant", "content": "Final Answer: \\boxed{B}"}]],
        completion_ids=[[1, 2]] * n,
        trainer_state=object(),
        answer=["\\boxed{B}", "\\boxed{B}", None, ""],
        answer_type=["MC", "MC", None, None],
        instruction=["x"] * n,
        log_extra=None,
    )
    assert got == [1.0, 0.0, None, None]
    dense = trl_reward_dense(completions=["Final Answer: \\boxed{B}", "y"], answer=[None, "\\boxed{B}"], answer_type=[None, "MC"],
                             prompts=["p", "p"], trainer_state=None)
    assert dense[0] is None and dense[1] == DENSE_WEIGHTS["no_answer"]


@pytest.mark.parametrize(
    "reward_kwargs,want_dict,want_score",
    [
        ({"return_dict": True}, True, 1.0),
        ({"return_dict": "true"}, True, 1.0),
        ({"return_dict": "false"}, False, 1.0),  # a string from the command line, not a truthy object
        ({"return_dict": "0"}, False, 1.0),
        ({"variant": "DENSE", "return_dict": True}, True, 0.9),  # any case
        ({"variant": "Dense"}, False, 0.9),
    ],
)
def test_verl_reward_kwargs(monkeypatch: pytest.MonkeyPatch, reward_kwargs: dict[str, object], want_dict: bool,
                            want_score: float) -> None:
    # verl (0.9: verl/trainer/ppo/reward.py get_custom_reward_fn) merges
    # reward.custom_reward_function.reward_kwargs into every keyword call, the config's keys winning
    monkeypatch.delenv("STUDYBENCH_REWARD_DICT", raising=False)
    monkeypatch.delenv("STUDYBENCH_REWARD", raising=False)
    call = {"data_source": "studybench/single", "solution_str": _SOL, "ground_truth": _VERL_GT,
            "extra_info": {"index": 0, "num_turns": None, "rollout_reward_scores": {}}}
    got = compute_score(**{**call, **reward_kwargs})  # type: ignore[arg-type]
    assert isinstance(got, dict) is want_dict
    score = got["score"] if isinstance(got, dict) else got
    assert score == pytest.approx(want_score)


# ---- hostile input: a reward never raises ---------------------------------------------------------


@pytest.mark.parametrize("columns,completions,want", [
    ({"answer": 5}, ["\\boxed{1}"], [0.0]),  # a column that is not a list
    ({"answer": "\\boxed{1}", "answer_type": "NV"}, ["\\boxed{1}", "\\boxed{1}"], [0.0, 0.0]),  # not read per character
    ({"answer": ["\\boxed{1}"], "answer_type": 7}, ["\\boxed{1}"], [0.0]),
    ({"answer": ["\\boxed{1}"], "answer_type": ["NV"]}, None, []),
    ({"answer": ["\\boxed{1}"], "answer_type": ["NV"]}, 5, []),
    ({"answer": ["\\boxed{1}", "\\boxed{2}"], "answer_type": ["NV", "NV"]}, ["\\boxed{1}"], [1.0]),  # column longer
])
def test_trl_reward_malformed_columns_never_raise(columns: dict[str, object], completions: object,
                                                  want: list[float]) -> None:
    assert trl_reward(completions=completions, **columns) == want  # type: ignore[arg-type]


_DEEP = '{"answer": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("solution,ground_truth,extra_info", [
    ("\\boxed{1}", _DEEP, None),
    ("\\boxed{1}", "{" + '"a":{' * 50_000 + "}" * 50_001, None),
    ("\\boxed{1}", '{"answer": "\\\\boxed{1}", "answer_type": "NV", "n": ' + "9" * 5000 + "}", None),
    ("\\boxed{1}", {"answer": ["\\boxed{1}"], "answer_type": "NV"}, None),
    ("\\boxed{1}", {"answer": "\\boxed{1}", "answer_type": ["NV"]}, None),
    ("\\boxed{1}", {"answer": "\\boxed{1}", "answer_type": "TUP", "type_sequence": {"a": 1}}, None),
    ("\\boxed{1}", {"answer": "\\boxed{1}", "answer_type": "NV"}, ["not", "a", "dict"]),
    ("\\boxed{1}", {"answer": "\\boxed{1}", "answer_type": "NV"}, {"reward": object(), "gold_unit": [1]}),
    (None, {"answer": "\\boxed{1}", "answer_type": "NV"}, None),
    (b"\\boxed{1}", {"answer": "\\boxed{1}", "answer_type": "NV"}, None),
    ("\\boxed{\ud800}", {"answer": "\\boxed{\ud800}", "answer_type": "EX"}, None),
    ("{" * 10_000 + "\\boxed{1" * 1000, {"answer": "\\boxed{1}", "answer_type": "NV"}, None),
])
def test_compute_score_hostile_input_never_raises(solution: object, ground_truth: object, extra_info: object) -> None:
    for fn in (compute_score, compute_score_dense):
        assert isinstance(fn(solution_str=solution, ground_truth=ground_truth, extra_info=extra_info), float)
        d = fn(solution_str=solution, ground_truth=ground_truth, extra_info=extra_info, return_dict=True)
        assert isinstance(d, dict) and set(d) >= {"score", "acc", "reason"} and d["acc"] in (0.0, 1.0)


# A definition stated in the problem text counts in the reward as in the rule pass (issue 14 item 8).
_DEF_PROBLEM = "Three lowest states of N fermions in the trap, where $\\omega = \\sqrt{k/m}$. Find the mean square size."
_DEF_GOLD = "\\boxed{\\frac{\\hbar}{2 m \\omega}\\left(N^{2}+4\\right)}"
_DEF_RIGHT = "Final Answer: \\boxed{\\frac{\\hbar}{2\\sqrt{mk}}\\left(N^{2}+4\\right)}"
_DEF_WRONG = "Final Answer: \\boxed{\\frac{\\hbar}{\\sqrt{mk}}\\left(N^{2}+4\\right)}"


def test_reward_uses_definitions_from_the_problem_text() -> None:
    gt = {"answer": _DEF_GOLD, "answer_type": "EX", "type_sequence": "", "gold_unit": ""}
    assert compute_score(solution_str=_DEF_RIGHT, ground_truth=gt) == 0.0  # without the problem: not provable
    assert compute_score(solution_str=_DEF_RIGHT, ground_truth=gt, extra_info={"problem": _DEF_PROBLEM}) == 1.0
    assert compute_score(solution_str=_DEF_RIGHT, ground_truth={**gt, "problem": _DEF_PROBLEM}) == 1.0
    assert compute_score(solution_str=_DEF_WRONG, ground_truth=gt, extra_info={"problem": _DEF_PROBLEM}) == 0.0
    cols = {"answer": [_DEF_GOLD] * 2, "answer_type": ["EX"] * 2, "type_sequence": [""] * 2, "gold_unit": [""] * 2,
            "problem": [_DEF_PROBLEM] * 2}
    assert trl_reward([_DEF_RIGHT, _DEF_WRONG], **cols) == [1.0, 0.0]
