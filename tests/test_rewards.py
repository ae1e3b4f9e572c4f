"""Rule-only RL rewards: verl and TRL signatures, never raising."""

from __future__ import annotations

import json

import pytest

from studybench.rewards import compute_score, reward_for, trl_reward

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
        ("Final Answer: \\boxed{__import__('os').system('touch /tmp/STUDYBENCH_REWARD_CANARY')}", GT, None, 0.0),
    ],
)
def test_verl_compute_score(solution: object, ground_truth: object, extra: object, expected: float) -> None:
    assert compute_score("studybench", solution, ground_truth, extra) == expected


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
