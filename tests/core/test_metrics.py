"""Par@k / Sub@k formulas against hand-computed cases and the paper identities (PROTOCOL.md 3)."""

from __future__ import annotations

import pytest

from studybench.metrics import breakdown, mean_std, par_at_k, sub_at_k, sub_at_k_by

T, F = True, False


def test_par_needs_one_attempt_solving_every_sub() -> None:
    # parent 0: attempt 0 solves sub 0 only, attempt 1 solves sub 1 only -> not solved
    # parent 1: attempt 1 solves both -> solved
    v = [
        [[T, F], [F, T]],
        [[F, T], [F, T]],
    ]
    assert par_at_k(v, 2) == pytest.approx(50.0)
    # Sub@k: parent 0 both subs reached by some attempt, parent 1 both -> 4/4
    assert sub_at_k(v, 2) == pytest.approx(100.0)


def test_sub_counts_sub_problems_not_parents() -> None:
    # parent 0 has 3 subs (one solved), parent 1 has 1 sub (solved): Sub = 2/4, Par = 1/2
    v = [
        [[T], [F], [F]],
        [[T]],
    ]
    assert sub_at_k(v) == pytest.approx(50.0)
    assert par_at_k(v) == pytest.approx(50.0)


def test_single_question_parent_par_equals_sub() -> None:
    v = [[[F, F, T]], [[F, F, F]], [[T, T, T]]]
    assert par_at_k(v, 3) == pytest.approx(200 / 3)
    assert sub_at_k(v, 3) == pytest.approx(200 / 3)


def test_ragged_attempts_rejected() -> None:
    with pytest.raises(ValueError, match="same number of attempts"):
        par_at_k([[[T, F], [T]]])
    with pytest.raises(ValueError, match="expected k=3"):
        sub_at_k([[[T, F]]], 3)
    with pytest.raises(ValueError):
        par_at_k([])


def _seed_with_solved(n_parents: int, solved: int, k: int = 8) -> list[list[list[bool]]]:
    """n_parents single-question parents, the first ``solved`` solved in the last attempt only."""
    return [[[a == k - 1 and p < solved for a in range(k)]] for p in range(n_parents)]


def test_paper_identity_qwen3_application_par8() -> None:
    # Qwen3-8B Application Par@8 17.05 = 15/88
    assert round(par_at_k(_seed_with_solved(88, 15), 8), 2) == 17.05


def test_paper_identity_gepa_pooled_over_three_groups() -> None:
    # GEPA Application Par@8 34.85 = 92/264: three groups of 8 attempts whose solved counts sum to 92
    per = [par_at_k(_seed_with_solved(88, n), 8) for n in (30, 31, 31)]
    assert round(mean_std(per).mean, 2) == 34.85


def test_paper_identity_transfer_par8() -> None:
    # Transfer Par@8 7.04 = 19/270 (90 parents x 3 groups)
    per = [par_at_k(_seed_with_solved(90, n), 8) for n in (6, 6, 7)]
    assert round(mean_std(per).mean, 2) == 7.04


def test_mean_std_uses_sample_std() -> None:
    s = mean_std([10.0, 20.0, 30.0])
    assert s.mean == pytest.approx(20.0)
    assert s.std == pytest.approx(10.0)  # ddof=1; population std would be 8.165
    assert mean_std([5.0]).std is None


def test_sub_by_label_and_breakdown() -> None:
    v = [[[T], [F]], [[F], [F]], [[T], [T]]]
    labels = [["NV", "EX"], ["NV", "EX"], ["EQ", "NV"]]
    by = sub_at_k_by(v, labels)
    assert by == {"EQ": 100.0, "EX": 0.0, "NV": pytest.approx(200 / 3)}
    bd = breakdown({0: v, 1: v}, ["Mech", "EM", "Mech"], lambda x: par_at_k(x))
    assert bd["Mech"].mean == pytest.approx(50.0)
    assert bd["EM"].mean == 0.0
    assert bd["Mech"].std == 0.0
