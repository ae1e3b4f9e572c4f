"""Batch rewards (issue 16 item 3): verl's batch reward manager and TRL judge a whole batch in one
verifier call, and every rollout gets exactly what the per-rollout reward gives it."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import SHARED_DATA, require_data_file

from studybench import rewards as rewards_module
from studybench.rewards import (
    DENSE_WEIGHTS,
    close_reward_verifier,
    compute_score,
    compute_score_batch,
    compute_score_batch_dense,
    compute_score_dense,
    reward_verifier,
    trl_reward,
    trl_reward_dense,
)


def _dev_pairs_path() -> Path:
    """The labelled dev pairs, found as tests/verify/test_dev_pairs.py finds them."""
    env = os.environ.get("STUDYBENCH_VERIFIER_PAIRS")
    if env:
        return Path(env)
    candidates = [SHARED_DATA / "verifier" / "dev_pairs.jsonl"]
    data = os.environ.get("STUDYBENCH_DATA")
    if data:
        candidates += [Path(data).parent / "verifier" / "dev_pairs.jsonl", Path(data) / "verifier" / "dev_pairs.jsonl"]
    return next((c for c in candidates if c.is_file()), candidates[0])


DEV_PAIRS = _dev_pairs_path()

_NV = {"answer": "\\boxed{3\\times10^{8}\\,\\mathrm{m/s}}", "answer_type": "NV", "type_sequence": ""}
_TUP = {"answer": "\\boxed{1}, \\boxed{2}", "answer_type": "TUP", "type_sequence": ["NV", "NV"], "gold_unit": None}
_DEF_PROBLEM = "Three lowest states of N fermions in the trap, where $\\omega = \\sqrt{k/m}$. Find the mean square size."
_DEF_GT = {"answer": "\\boxed{\\frac{\\hbar}{2 m \\omega}\\left(N^{2}+4\\right)}", "answer_type": "EX", "type_sequence": "",
           "gold_unit": ""}
_DEF_RIGHT = "Final Answer: \\boxed{\\frac{\\hbar}{2\\sqrt{mk}}\\left(N^{2}+4\\right)}"

# malformed or odd rollouts: (solution_str, ground_truth, extra_info); each keeps its per-rollout reward
_ODD: list[tuple[Any, Any, Any]] = [
    (None, _NV, None),  # no solution
    (b"Final Answer: \\boxed{3e8}", _NV, None),  # bytes, not a string
    (7, _NV, {}),
    ("Final Answer: \\boxed{3e8}", None, None),  # missing ground truth
    ("Final Answer: \\boxed{1}", {"answer": "\\boxed{1}"}, None),  # no answer_type
    ("Final Answer: \\boxed{1}, \\boxed{2}", {"answer": "\\boxed{1}, \\boxed{2}", "answer_type": "TUP"}, None),  # TUP, no type_sequence
    ("Final Answer: \\boxed{1}", {"answer": "\\boxed{1}", "answer_type": "XX"}, None),
    ("Final Answer: \\boxed{1}", {"answer": "", "answer_type": "NV"}, None),
    ("Final Answer: \\boxed{1}", {"answer": "\\boxed{1}", "answer_type": "TUP", "type_sequence": {"a": 1}}, None),
    ("no box at all", _NV, None),
    ("Final Answer: \\boxed{3e8}", json.dumps(_NV), None),  # JSON text
    ("Final Answer: \\boxed{3e8}", json.dumps(_NV).encode(), {"reward": "dense"}),
    ("Final Answer: \\boxed{B}", "\\boxed{B}", {"answer_type": "MC"}),  # plain gold, types from extra_info
    ("Final Answer: \\boxed{1}, \\boxed{2}", _TUP, {"reward": "dense"}),
    ("Final Answer: \\boxed{2}, \\boxed{1}", _TUP, None),
    ("Final Answer: \\boxed{3e8}", _NV, ["not", "a", "dict"]),
    ("Final Answer: \\boxed{3e8}", _NV, {"reward": object(), "gold_unit": [1]}),
    (_DEF_RIGHT, _DEF_GT, {"problem": _DEF_PROBLEM}),  # a definition from the problem text
    (_DEF_RIGHT, {**_DEF_GT, "problem": _DEF_PROBLEM}, {"reward": "dense"}),  # dense: answer judged without it
    (_DEF_RIGHT, _DEF_GT, None),
    ("{" * 10_000 + "\\boxed{1" * 1000, _NV, None),
]


class _ObjectArray:
    """What verl hands over for ``data_sources`` / ``extra_infos``: a numpy object array (len, iter, index)."""

    def __init__(self, values: list[Any]) -> None:
        self._v = list(values)

    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._v)

    def __getitem__(self, i: int) -> Any:
        return self._v[i]


def _dev_rollouts(k: int, seed: int = 16) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``k`` dev pairs (right and wrong answers, every answer type) plus a few repeats, dense on every third."""
    require_data_file(DEV_PAIRS, "verifier dev pairs")
    with DEV_PAIRS.open(encoding="utf-8") as f:
        pairs = [json.loads(line) for line in f if line.strip()]
    pairs = [p for p in pairs if len(p["gold"]) <= 120]  # every answer type, none of the slowest long equations
    rng = random.Random(seed)
    picked = rng.sample(pairs, k)
    picked += rng.sample(picked, k // 8)  # RL batches repeat answers
    assert {p["label"] for p in picked} == {True, False}
    out = []
    for i, p in enumerate(picked):
        gt = {"answer": p["gold"], "answer_type": p["answer_type"], "type_sequence": p["type_sequence"],
              "gold_unit": p["gold_unit"]}
        out.append((p["response"], gt, {"reward": "dense"} if i % 3 == 0 else {"index": i}))
    return out


class _Spy:
    """Counts the shared reward verifier's calls (and forwards them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: dict[str, int] = {"verify_many": 0, "verify": 0, "verify_response": 0}
        self.sizes: list[int] = []
        v = reward_verifier()
        for name in self.calls:
            monkeypatch.setattr(v, name, self._wrap(name, getattr(v, name)))

    def _wrap(self, name: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name == "verify_many":
                self.sizes.append(len(args[0]))
            return fn(*args, **kwargs)
        return call


@pytest.fixture(scope="module")
def fresh_verifier() -> Iterator[None]:
    """A fresh shared reward verifier for this module: two workers, a generous timeout; closed afterwards.

    One verifier for all the tests here (a worker pool start is the slow part on a loaded machine).
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STUDYBENCH_REWARD_WORKERS", "2")
        mp.setenv("STUDYBENCH_REWARD_TIMEOUT", "120")  # a loaded CI machine must not time out one path only
        for name in ("STUDYBENCH_REWARD_DICT", "STUDYBENCH_REWARD"):
            mp.delenv(name, raising=False)
        close_reward_verifier()
        yield
        close_reward_verifier()


def test_batch_equals_per_rollout_on_dev_pairs_and_odd_rows(fresh_verifier: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _dev_rollouts(48)
    rows += [(s, g, e) for s, g, e in _ODD]
    rng = random.Random(3)
    rng.shuffle(rows)
    sols, gts, infos = ([r[i] for r in rows] for i in range(3))
    close_reward_verifier()  # an empty memo: the batch judges everything itself
    spy = _Spy(monkeypatch)
    batch = compute_score_batch(data_sources=_ObjectArray(["studybench"] * len(rows)), solution_strs=sols,
                                ground_truths=gts, extra_infos=_ObjectArray(infos), return_dict=True)
    # the whole batch in ONE verifier call: nothing judged one rollout at a time
    assert spy.calls == {"verify_many": 1, "verify": 0, "verify_response": 0}
    assert spy.sizes[0] > 48
    assert reward_verifier().stats["worker"] > 20  # spread over the worker pool, not all decided in-process
    # the reference: one compute_score call per rollout (its verifications are keyed as verify_response
    # keys them, so a batch item keyed or routed wrongly shows as a difference)
    single = [compute_score("studybench", s, g, e, return_dict=True) for s, g, e in rows]
    assert {d["acc"] for d in single} == {0.0, 1.0}  # type: ignore[index]
    assert any(str(d["reason"]).startswith("malformed ground truth") for d in single)  # type: ignore[index]
    assert batch == single
    floats = compute_score_batch(None, sols, gts, infos)
    assert floats == [d["score"] for d in single]  # type: ignore[index]
    assert all(type(x) is float for x in floats)
    dense = compute_score_batch_dense(None, sols[:30], gts[:30], None)
    assert dense == [compute_score("d", s, g, None, variant="dense") for s, g in zip(sols[:30], gts[:30], strict=True)]


def test_batch_reward_kwargs_and_short_or_missing_columns(fresh_verifier: None, monkeypatch: pytest.MonkeyPatch) -> None:
    sols = ["Final Answer: \\boxed{3e8}", "Final Answer: \\boxed{3e7}", "Final Answer: \\boxed{3e8}"]
    # verl merges reward_kwargs into the call; strings from the command line count as in compute_score
    assert compute_score_batch(None, sols, [_NV] * 3, None, return_dict="false") == [1.0, 0.0, 1.0]
    got = compute_score_batch(data_sources=None, solution_strs=sols, ground_truths=[_NV] * 3, extra_infos=None,
                              variant="DENSE", return_dict="true", reward_router_address=None)
    assert [d["score"] for d in got] == [pytest.approx(0.9), pytest.approx(0.1), pytest.approx(0.9)]  # type: ignore[index]
    monkeypatch.setenv("STUDYBENCH_REWARD_DICT", "1")
    assert compute_score_batch(None, sols[:1], [_NV], None)[0]["acc"] == 1.0  # type: ignore[index]
    monkeypatch.delenv("STUDYBENCH_REWARD_DICT")
    # a ground-truth column shorter than the batch: the missing rows are malformed, the rest judged
    assert compute_score_batch(None, sols, [_NV], [{}]) == [1.0, 0.0, 0.0]
    assert compute_score_batch(None, sols, None, None) == [0.0, 0.0, 0.0]
    for bad in (None, "Final Answer: \\boxed{1}", 5, {"a": 1}):
        assert compute_score_batch(None, bad, [_NV], None) == []
    assert compute_score_batch(None, [], [], []) == []



def test_a_per_rollout_call_of_the_batch_function_scores_that_rollout(
        fresh_verifier: None, caplog: pytest.LogCaptureFixture) -> None:
    # verl's naive manager and its reward loop call the configured function once per rollout, by keyword;
    # pointed at compute_score_batch, that used to return [] silently (no score, no warning).
    right, wrong = "Final Answer: \\boxed{3e8}", "Final Answer: \\boxed{3e7}"
    rewards_module._WARNED.discard("per-rollout")  # the warning is shown once per process
    with caplog.at_level("WARNING", logger=rewards_module._log.name):
        got = [compute_score_batch(data_source="studybench", solution_str=s, ground_truth=_NV, extra_info=None,
                                   reward_router_address=None) for s in (right, wrong)]
    assert got == [compute_score("studybench", right, _NV), compute_score("studybench", wrong, _NV)] == [1.0, 0.0]
    assert sum("called for one rollout" in r.getMessage() for r in caplog.records) == 1
    dense = compute_score_batch_dense(data_source="s", solution_str=wrong, ground_truth=json.dumps(_NV), extra_info={},
                                      return_dict=True, variant="binary")
    assert dense == compute_score_dense("s", wrong, _NV, {}, return_dict=True)
    assert compute_score_batch(data_source="s", solution_str=right, ground_truth=_NV, extra_info={"reward": "dense"}) \
        == pytest.approx(0.9)
    assert compute_score_batch(None, [right], [_NV], None, solution_str="ignored") == [1.0]  # the batch form wins

def test_one_bad_rollout_never_fails_the_batch(fresh_verifier: None, monkeypatch: pytest.MonkeyPatch) -> None:
    real = rewards_module._ground_truth

    def flaky(ground_truth: Any, info: dict[str, Any]) -> Any:
        if info.get("boom"):
            raise RuntimeError("boom")
        return real(ground_truth, info)

    monkeypatch.setattr(rewards_module, "_ground_truth", flaky)
    sols = ["Final Answer: \\boxed{3e8}"] * 3
    infos = [{}, {"boom": 1, "reward": "dense"}, {"reward": "dense"}]
    got = compute_score_batch(None, sols, [_NV] * 3, infos, return_dict=True)
    assert got == [compute_score(None, s, _NV, e, return_dict=True) for s, e in zip(sols, infos, strict=True)]
    assert got[1]["reason"] == "internal error (RuntimeError)" and got[1]["score"] == DENSE_WEIGHTS["no_answer"]  # type: ignore[index]
    assert got[0]["score"] == 1.0 and got[2]["score"] == pytest.approx(0.9)  # type: ignore[index]


def test_trl_judges_the_batch_in_one_call_with_the_same_rewards(fresh_verifier: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _dev_rollouts(24, seed=7)
    completions: list[Any] = [s if i % 2 else [{"role": "assistant", "content": s}] for i, (s, _, _) in enumerate(rows)]
    completions += ["Final Answer: \\boxed{B}", "Final Answer: \\boxed{B}", None, _DEF_RIGHT]
    cols: dict[str, list[Any]] = {k: [g.get(k) for _, g, _ in rows] for k in ("answer", "answer_type", "type_sequence", "gold_unit")}
    for k, extra in (("answer", ["\\boxed{B}", None, "\\boxed{B}", _DEF_GT["answer"]]), ("answer_type", ["MC", None, "MC", "EX"]),
                     ("type_sequence", ["", "", "", ""]), ("gold_unit", [None, None, None, ""])):
        cols[k] += extra
    cols["problem"] = [None] * len(rows) + [None, None, None, _DEF_PROBLEM]
    n = len(completions)

    def reference(dense: bool) -> list[float | None]:
        out: list[float | None] = []
        for i, c in enumerate(completions):
            if cols["answer"][i] is None:
                out.append(None)
                continue
            text = c if isinstance(c, str) or c is None else c[-1]["content"]
            gt = {k: cols[k][i] for k in ("answer", "answer_type", "type_sequence", "gold_unit", "problem")}
            out.append(float(compute_score("trl", text, gt, None, variant="dense" if dense else "binary")))  # type: ignore[arg-type]
        return out

    spy = _Spy(monkeypatch)
    got = trl_reward(prompts=["p"] * n, completions=completions, completion_ids=[[1]] * n, trainer_state=None, **cols)
    got_dense = trl_reward_dense(completions, **cols)
    assert spy.calls == {"verify_many": 2, "verify": 0, "verify_response": 0}  # one call per batch
    assert got == reference(False)
    assert got[-4:] == [1.0, None, 0.0, 1.0] and 0.0 in got and 1.0 in got
    assert got_dense == reference(True)


def test_batch_with_an_unusable_verifier_setting_gives_the_lowest_rewards(fresh_verifier: None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    close_reward_verifier()
    monkeypatch.setenv("STUDYBENCH_REWARD_WORKERS", "many")  # the verifier cannot start
    rows = [("Final Answer: \\boxed{3e8}", _NV, {}), ("no box", _NV, {"reward": "dense"}),
            ("Final Answer: \\boxed{1}", {"answer": "\\boxed{1}"}, None)]
    single = [compute_score(None, s, g, e, return_dict=True) for s, g, e in rows]
    batch = compute_score_batch(None, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], return_dict=True)
    assert batch == single
    assert batch[0]["reason"] == "internal error (ValueError)" and batch[0]["score"] == 0.0  # type: ignore[index]
    assert batch[2]["reason"] == "malformed ground truth: answer_type missing"  # type: ignore[index]
