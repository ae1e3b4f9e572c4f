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
