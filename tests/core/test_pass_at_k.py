"""pass@k (issue 12): the unbiased estimator of Chen et al. (2021) per sub-problem and per parent, and the
``pass_at_k`` table of every report."""

from __future__ import annotations

import itertools
import json
import random
from math import comb
from pathlib import Path
from typing import Any

import pytest
from _support import parent, sub, write_set

from studybench.datasets import load_dataset
from studybench.evaluate import EvalSpec, request_seed, run_eval
from studybench.metrics import (
    par_at_k,
    par_pass_at_k,
    pass_at_k,
    pass_at_k_curve,
    pass_at_k_estimate,
    pass_at_k_table,
    sub_at_k,
)
from studybench.report import build_report
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server

T, F = True, False


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (4, 1, 1, 0.25), (4, 1, 2, 0.5), (4, 1, 3, 0.75), (4, 1, 4, 1.0),  # one correct of four: k/4
        (4, 2, 1, 0.5), (4, 2, 2, 5 / 6), (4, 2, 3, 1.0),  # 1 - C(2,2)/C(4,2) = 1 - 1/6
        (4, 0, 4, 0.0), (4, 4, 1, 1.0), (1, 1, 1, 1.0), (1, 0, 1, 0.0),
        (10, 3, 5, 1 - comb(7, 5) / comb(10, 5)),
    ],
)
def test_hand_computed_cases(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k_estimate(n, c, k) == pytest.approx(expected, abs=1e-12)
    assert pass_at_k_curve(n, c)[k - 1] == pytest.approx(expected, abs=1e-12)


def test_the_estimator_is_the_share_of_k_subsets_with_a_correct_attempt() -> None:
    for n in range(1, 8):
        for c in range(n + 1):
            attempts = [True] * c + [False] * (n - c)
            curve = pass_at_k_curve(n, c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(attempts, k))
                brute = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k_estimate(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)
                assert curve[k - 1] == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_large_counts_stay_finite_and_exact_at_the_ends() -> None:
    curve = pass_at_k_curve(5000, 3)
    assert curve[0] == pytest.approx(3 / 5000) and curve[-3:] == [1.0, 1.0, 1.0]
    assert all(0.0 <= x <= 1.0 for x in curve) and curve == sorted(curve)
    assert pass_at_k_curve(5000, 0) == [0.0] * 5000
    assert pass_at_k_estimate(5000, 3, 2500) == pytest.approx(curve[2499], rel=1e-9)


@pytest.mark.parametrize("n,c,k", [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_counts_out_of_range_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k_estimate(n, c, k)


def _random_grid(rng: random.Random, parents: int, k: int, p: float) -> list[list[list[bool]]]:
    return [[[rng.random() < p for _ in range(k)] for _ in range(rng.randint(1, 4))] for _ in range(parents)]


@pytest.mark.parametrize("seed", range(20))
def test_identities_on_random_grids(seed: int) -> None:
    rng = random.Random(seed)
    k = rng.randint(1, 8)
    grids = {s: _random_grid(rng, rng.randint(1, 12), k, rng.choice([0.1, 0.4, 0.8])) for s in (3, 1, 2)}
    for v in grids.values():
        # k = K: exactly Sub@K and Par@K
        assert pass_at_k(v, k) == sub_at_k(v, k)
        assert par_pass_at_k(v, k) == par_at_k(v, k)
        # k = 1: the mean per-attempt accuracy (sub-problem attempts; whole-parent attempts)
        subs = [sub for parent in v for sub in parent]
        assert pass_at_k(v, 1) == pytest.approx(100.0 * sum(sum(s) for s in subs) / (len(subs) * k))
        whole = [all(sub[a] for sub in parent) for parent in v for a in range(k)]
        assert par_pass_at_k(v, 1) == pytest.approx(100.0 * sum(whole) / len(whole))
        curve = [pass_at_k(v, kk) for kk in range(1, k + 1)]
        assert curve == sorted(curve)  # non-decreasing in k
        pcurve = [par_pass_at_k(v, kk) for kk in range(1, k + 1)]
        assert pcurve == sorted(pcurve)
    table = pass_at_k_table(grids, k)
    assert table["k"] == list(range(1, k + 1)) and list(table["sub"]["per_seed"]) == ["3", "1", "2"]
    for name, fn in (("sub", pass_at_k), ("par", par_pass_at_k)):
        for s, v in grids.items():
            assert table[name]["per_seed"][str(s)] == pytest.approx([fn(v, kk) for kk in range(1, k + 1)], abs=1e-4)
        assert table[name]["mean"] == sorted(table[name]["mean"])
        assert all(sd is not None for sd in table[name]["std"])


def test_table_of_one_seed_has_no_std_and_checks_k() -> None:
    v = [[[T, F, F, F]], [[F, F, F, F], [T, T, T, T]]]
    table = pass_at_k_table({0: v}, 4)
    # sub-problems: c = 1, 0, 4 of n = 4 -> (k/4 + 0 + 1) / 3
    assert table["sub"]["mean"] == pytest.approx([100 * 1.25 / 3, 50.0, 100 * 1.75 / 3, 100 * 2 / 3], abs=1e-4)
    assert table["sub"]["std"] == [None] * 4 and table["sub"]["per_seed"] == {"0": table["sub"]["mean"]}
    # parents: P0 has one whole-parent success of 4 (c=1), P1 none (sub 0 never solved)
    assert table["par"]["mean"] == pytest.approx([12.5, 25.0, 37.5, 50.0])
    with pytest.raises(ValueError, match="expected k=3"):
        pass_at_k_table({0: v}, 3)


SET = [parent(f"P{i}", [sub("a", "\\boxed{2}", problem=f"Q1 of {i}: speed?"), sub("b", "\\boxed{3}", problem=f"Q2 of {i}: again?")],
              problem=f"Block {i}.")
       for i in range(2)]


def test_every_report_carries_pass_at_k(tmp_path: Path) -> None:
    """A stub that answers sub-problem a of P0 right in 1 of 3 attempts (by the request seed), b never,
    and P1 right always: hand-computed pass@k."""
    f = write_set(tmp_path / "set.json", SET)
    uid = load_dataset(f).parents[0].uid
    right = {request_seed(s, 0, uid, 0) for s in (0, 1)}  # attempt 0 of P0/a, in each seed

    def model(body: dict[str, Any]) -> Reply:
        turn, text = conversation_turn(body)
        if "of 1" in text or "Block 1" in text:  # P1
            return Reply("Final Answer: \\boxed{2}" if turn == 0 else "Final Answer: \\boxed{3}")
        return Reply("Final Answer: \\boxed{2}" if turn == 0 and body.get("seed") in right else "Final Answer: \\boxed{9}")

    with start_stub_server(model, model="stub-model") as srv:
        run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=3, seeds=[0, 1], concurrency=1),
                 tmp_path / "run")
    rep = build_report(tmp_path / "run")
    pk = rep["pass_at_k"]
    assert pk["k"] == [1, 2, 3]
    # sub-problems: P0/a c=1 (pass@k = k/3), P0/b c=0, P1/a and P1/b c=3
    assert pk["sub"]["mean"] == pytest.approx([100 * (1 / 3 + 2) / 4, 100 * (2 / 3 + 2) / 4, 75.0], abs=1e-4)
    assert pk["sub"]["std"] == [0.0, 0.0, 0.0]
    assert pk["par"]["mean"] == [50.0, 50.0, 50.0]  # P0 never solved whole, P1 always
    assert (pk["sub"]["mean"][-1], pk["par"]["mean"][-1]) == (rep["sub_at_k"]["mean"], rep["par_at_k"]["mean"])
    assert pk["sub"]["per_seed"] == {"0": pk["sub"]["mean"], "1": pk["sub"]["mean"]}
    assert json.loads((tmp_path / "run" / "report.json").read_text())["pass_at_k"] == pk
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## pass@k\n" in md
    assert "| 1 | 58.33 ± 0.00 | 50.00 ± 0.00 |" in md and "| 3 | 75.00 ± 0.00 | 50.00 ± 0.00 |" in md
    # a report for a smaller k draws from that many attempts only
    small = build_report(tmp_path / "run", k=2)["pass_at_k"]
    assert small["k"] == [1, 2] and small["sub"]["mean"][-1] == build_report(tmp_path / "run", k=2)["sub_at_k"]["mean"]
