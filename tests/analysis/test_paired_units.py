"""Paired statistics with the parent as the unit (issue 24 item 8): seeds and sub-problems are never
counted as independent items, in ``compare``'s tests and CIs and in the leaderboard's marks."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from _support import parent, require_extra, sub, write_set
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

require_extra("analysis", "scipy", "statsmodels", "numpy", module_level=True)

from scipy.stats import binomtest  # noqa: E402

from studybench.analysis.leaderboard import build_leaderboard, render_leaderboard  # noqa: E402
from studybench.analysis.paired import compare_outcomes, run_outcomes  # noqa: E402
from studybench.analysis.signflip import sign_flip_test, unit_counts  # noqa: E402
from studybench.cli import app  # noqa: E402
from studybench.evaluate import EvalSpec, request_seed, run_eval  # noqa: E402
from studybench.testing.stub_server import Reply, start_stub_server  # noqa: E402

# --------------------------------------------------------------------------- the issue's case, real data


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> tuple[Path, Path]:
    """The reference backend on the real Transfer Set, 3 seeds: the gold replayed, and the solutions' own answers."""
    root = tmp_path_factory.mktemp("reference")
    runs = []
    for mode in ("gold", "solution"):
        run_eval(EvalSpec(split=str(data_dir / "transfer.json"), k=1, seeds=[0, 1, 2], reference_mode=mode, verify_workers=2),
                 root / mode)
        runs.append(root / mode)
    return runs[0], runs[1]


def _differing_parents(run_a: Path, run_b: Path, level: str) -> tuple[set[str], int]:
    """By hand from the item outcomes: the parents where the two runs differ, and the items that differ."""
    oa, ob = run_outcomes(run_a, level), run_outcomes(run_b, level)
    items = [k for k in oa.outcomes if oa.outcomes[k] != ob.outcomes[k]]
    return {json.loads(k)[1] for k in items}, len(items)


@pytest.mark.parametrize("level", ["sub-problem", "parent"])
def test_the_issue_case_is_judged_on_six_parents_not_eighteen_items(reference_runs: tuple[Path, Path], level: str) -> None:
    gold, solution = reference_runs
    parents, items = _differing_parents(gold, solution, level)
    m = len(parents)
    assert m == 6 and items == 3 * 6  # the issue's case: 6 parents, each seen in 3 identical seeds
    res = CliRunner().invoke(app, ["compare", str(gold), str(solution), "--level", level, "--json", "--resamples", "500"])
    assert res.exit_code == 0, res.output
    (c,) = json.loads(res.stdout)["comparisons"]
    assert {k: c["table"][k] for k in ("a_only", "b_only")} == {"a_only": 18, "b_only": 0}  # the items, descriptive
    # counted per parent: the sign test on 6 parents, 6 vs 0, is 2 * 0.5^6 (not 7.6e-06, 18 items vs 0)
    assert c["unit"] == "parent" and c["units"] == 90 and c["ci"]["units"] == 90
    assert c["p_value"] == pytest.approx(2 * 0.5**m) == pytest.approx(0.03125)
    assert c["p_value"] > 1000 * binomtest(0, items).pvalue
    assert c["unit_table"]["a_better"] == m and c["unit_table"]["b_better"] == 0
    assert "exact sign-flip test over 90 parents (6 differ): p = 0.031" in c["conclusion"]


def test_the_issue_case_in_the_leaderboard(reference_runs: tuple[Path, Path]) -> None:
    gold, solution = reference_runs
    board = build_leaderboard([gold, solution], base_run=gold, resamples=500)
    (cell,) = [c for r in board["rows"] for c in r.cells.values() if c.significance is not None]
    sig = cell.significance
    assert sig is not None and sig["unit"] == "parent" and sig["parents"] == 90
    assert sig["delta_sub"]["p"] == sig["delta_par"]["p"] == 0.03125
    assert sig["delta_sub"]["parents_worse"] == 6 and sig["delta_sub"]["parents_tied"] == 84


# --------------------------------------------------------------------------- invariance (hypothesis)

# a "run pair": per parent, per sub-problem, the (A, B) outcome in one seed; seeds copy or vary it
_parent = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=3)
_pairs = st.lists(_parent, min_size=1, max_size=8)


def _items(parents: list[list[tuple[bool, bool]]], seeds: int = 1, split: int = 1, vary: list[int] | None = None
           ) -> tuple[dict[str, bool], dict[str, bool], dict[str, str]]:
    """Item outcomes with parent clusters: every sub-problem split into ``split`` equal pieces, each seed a copy
    (``vary``: per seed, how far to rotate each parent's sub-problems, so seeds differ)."""
    a: dict[str, bool] = {}
    b: dict[str, bool] = {}
    clusters: dict[str, str] = {}
    for s in range(seeds):
        for p, subs in enumerate(parents):
            r = (vary or [0] * seeds)[s] % len(subs)
            for j, (x, y) in enumerate(subs[r:] + subs[:r]):
                for piece in range(split):
                    key = json.dumps([s, f"P{p}", j, piece])
                    a[key], b[key], clusters[key] = x, y, f"P{p}"
    return a, b, clusters


def _result(a: dict[str, bool], b: dict[str, bool], clusters: dict[str, str]) -> tuple[Any, ...]:
    r = compare_outcomes(a, b, clusters=clusters, cluster_name="parent", resamples=200, seed=5)
    return (r.p_value, r.p_a_better, r.p_b_better, r.unit_table, round(r.diff, 12), tuple(round(x, 12) for x in r.diff_ci), r.units)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pairs, st.integers(2, 4), st.integers(2, 3))
def test_repeating_seeds_or_splitting_sub_problems_changes_nothing(parents: list[list[tuple[bool, bool]]], seeds: int,
                                                                   split: int) -> None:
    once = _result(*_items(parents))
    assert _result(*_items(parents, seeds=seeds)) == once  # identical seeds are one observation per parent
    assert _result(*_items(parents, split=split)) == once  # so are the pieces of a sub-problem


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pairs, st.integers(1, 4), st.integers(1, 3), st.lists(st.integers(0, 5), min_size=4, max_size=4))
def test_no_data_is_more_significant_than_its_differing_parents_allow(parents: list[list[tuple[bool, bool]]], seeds: int,
                                                                      split: int, vary: list[int]) -> None:
    a, b, clusters = _items(parents, seeds=seeds, split=split, vary=vary)
    r = compare_outcomes(a, b, clusters=clusters, cluster_name="parent", resamples=100)
    m = r.unit_table.a_better + r.unit_table.b_better
    assert m <= len(parents) and r.units == len(parents)
    assert r.p_value >= min(1.0, 2 * 0.5**m) - 1e-12
    assert min(r.p_a_better, r.p_b_better) >= 0.5**m - 1e-12
    # the direction-only view agrees: the sign test over the same m parents
    assert r.unit_table.sign_p >= min(1.0, 2 * 0.5**m) - 1e-12


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10), st.integers(0, 10), st.integers(1, 4), st.lists(st.integers(1, 5), min_size=10, max_size=10))
def test_splitting_any_parents_sub_problems_in_the_issue_case_leaves_p_alone(m: int, tied: int, seeds: int,
                                                                             subs: list[int]) -> None:
    """m parents where A solves more (as in the issue), each split into any number of sub-problems."""
    parents = [[(True, False)] * subs[p] for p in range(m)] + [[(True, True)]] * tied
    a, b, clusters = _items(parents, seeds=seeds)
    r = compare_outcomes(a, b, clusters=clusters, cluster_name="parent", resamples=50)
    assert r.p_value == pytest.approx(min(1.0, 2 * 0.5**m)) and r.p_a_better == pytest.approx(0.5**m)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(-6, 6), min_size=0, max_size=11))
def test_the_sign_flip_test_is_the_exact_randomisation_distribution(d: list[int]) -> None:
    t = sum(d)
    sums = [sum(s * x for s, x in zip(signs, d, strict=True)) for signs in itertools.product((1, -1), repeat=len(d))]
    r = sign_flip_test(d)
    n = len(sums)
    assert r.p_value == pytest.approx(sum(abs(v) >= abs(t) for v in sums) / n, abs=1e-12)
    assert r.p_b_better == pytest.approx(sum(v >= t for v in sums) / n, abs=1e-12)
    assert r.p_a_better == pytest.approx(sum(v <= t for v in sums) / n, abs=1e-12)
    assert r.differing == sum(1 for x in d if x) and r.statistic == t


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_one_item_per_unit_is_mcnemars_exact_test(both: int, a_only: int, b_only: int) -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    d = [-1] * a_only + [1] * b_only + [0] * both
    expected = 1.0 if a_only + b_only == 0 else mcnemar([[both, a_only], [b_only, 0]], exact=True).pvalue
    assert sign_flip_test(d).p_value == pytest.approx(min(1.0, expected))


def test_bad_differences_are_refused() -> None:
    with pytest.raises(ValueError, match="unit 1: expected an integer difference"):
        sign_flip_test([1, 0.5])
    with pytest.raises(ValueError, match="unit 0"):
        sign_flip_test([float("nan")])
    assert unit_counts(["x", "y"], {"x": True, "y": False}, {"x": True, "y": True}, {"x": "P", "y": "P"}).differences == [1]


# --------------------------------------------------------------------------- the CI resamples parents only

# four parents: P, R, S one sub-problem, Q two; three seeds with the same outcomes
SET = [parent(pid, [sub(x, "\\boxed{2}", problem=f"Q{x}: speed?") for x in ("ab" if pid == "Q" else "a")],
              problem=f"Block {pid}.")
       for pid in ("P", "Q", "R", "S")]
SEEDS = (0, 1, 2)
RIGHT = {"a": {("Q", "a"), ("R", "a")}, "b": {("P", "a"), ("Q", "a"), ("Q", "b")}}  # per run, (parent, sub) solved


def _runs(root: Path) -> dict[str, Path]:
    f = write_set(root / "set.json", SET)
    subs = {p["source_problem_id"]: [s["problem_id"] for s in p["sub_problems"]] for p in SET}
    key = {request_seed(s, 0, f"S//{p}", i): (p, x) for s in SEEDS for p, xs in subs.items() for i, x in enumerate(xs)}
    out = {}
    for name, right in RIGHT.items():
        def model(body: dict[str, Any], right: set[tuple[str, str]] = right) -> Reply:
            return Reply("Final Answer: \\boxed{2}" if key[body["seed"]] in right else "Final Answer: \\boxed{9}")

        with start_stub_server(model, model="stub-model") as srv:
            run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=1, seeds=list(SEEDS),
                              verify_workers=1), root / name)
        out[name] = root / name
    return out


def _parent_bootstrap(units: list[tuple[int, int, int]]) -> dict[Fraction, Fraction]:
    """By hand: the exact distribution of (sum b - sum a) / sum n over all ordered resamples of whole parents."""
    dist: dict[Fraction, Fraction] = {}
    w = Fraction(1, len(units) ** len(units))
    for seq in itertools.product(units, repeat=len(units)):
        v = Fraction(sum(u[1] - u[0] for u in seq), sum(u[2] for u in seq))
        dist[v] = dist.get(v, Fraction(0)) + w
    return dist


def _atom(dist: dict[Fraction, Fraction], q: float) -> Fraction:
    """The value at cumulative probability ``q``, asserting that q lies well inside one atom."""
    cum = Fraction(0)
    for v in sorted(dist):
        if cum + dist[v] > q:
            assert q - cum > 0.004 and cum + dist[v] - q > 0.004, "quantile too near an atom's edge for a robust check"
            return v
        cum += dist[v]
    raise AssertionError("no atom")


@pytest.fixture(scope="module")
def stub_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _runs(tmp_path_factory.mktemp("units"))


@pytest.mark.parametrize("level", ["sub-problem", "parent"])
def test_the_ci_resamples_whole_parents(stub_runs: dict[str, Path], level: str) -> None:
    a, b = run_outcomes(stub_runs["a"], level), run_outcomes(stub_runs["b"], level)
    # per parent, summed over the 3 seeds: (A solved, B solved, items)
    if level == "sub-problem":
        units = [(0, 3, 3), (3, 6, 6), (3, 0, 3), (0, 0, 3)]  # P, Q (two sub-problems), R, S
    else:
        units = [(0, 3, 3), (0, 3, 3), (3, 0, 3), (0, 0, 3)]  # Q is solved only when both sub-problems are
    got = unit_counts(sorted(a.outcomes), a.outcomes, b.outcomes, a.clusters)
    assert list(zip(got.a, got.b, got.n, strict=True)) == units
    r = compare_outcomes(a.outcomes, b.outcomes, clusters=a.clusters, cluster_name="parent", resamples=20_000, seed=2)
    dist = _parent_bootstrap(units)
    assert r.ci.units == 4 and r.bootstrap_unit == "parent"
    assert r.diff == pytest.approx(float(Fraction(sum(u[1] - u[0] for u in units), sum(u[2] for u in units))))
    assert r.diff_ci[0] == pytest.approx(float(_atom(dist, 0.025)))
    assert r.diff_ci[1] == pytest.approx(float(_atom(dist, 0.975)))
    # resampling (seed, parent) pairs or items would reach values no parent resample can give
    assert all(Fraction(x).limit_denominator(100) in dist for x in r.diff_ci)


# --------------------------------------------------------------------------- leaderboard marks

N = 12


def _board_runs(root: Path, known: dict[str, dict[int, set[int]]]) -> dict[str, Path]:
    """Single-question parents; run ``name`` answers parent i right in seed s when i is in known[name][s]."""
    parents = [{"source": "Syn", "year": "", "source_problem_id": f"P{i}", "problem_type": "Mechanics",
                "problem": f"item-{i}: compute.", "answer": "\\boxed{2}", "answer_type": "NV", "type_sequence": ""}
               for i in range(N)]
    f = root / "set.json"
    f.write_text(json.dumps(parents))
    key = {request_seed(s, 0, f"Syn//P{i}", 0): (s, i) for s in (0, 1) for i in range(N)}
    out = {}
    for name, plan in known.items():
        def model(body: dict[str, Any], plan: dict[int, set[int]] = plan) -> Reply:
            s, i = key[body["seed"]]
            return Reply("Final Answer: \\boxed{2}" if i in plan[s] else "Final Answer: \\boxed{9}")

        with start_stub_server(model, model="stub-model") as srv:
            run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=1, seeds=[0, 1],
                              verify_workers=1), root / name)
        out[name] = root / name
    return out


def test_the_marks_follow_the_parent_level_test(tmp_path: Path) -> None:
    """'five': 5 parents better in both seeds: p = 2/32 = 0.0625, no mark (a bootstrap CI over 12 parents misses all 5
    with probability (7/12)^12 < 2.5%, so a CI-based mark would claim one). 'seed0': 6 parents better in seed 0 only:
    per parent +1 of 2 seeds, p = 2/64 = 0.031, marked (a McNemar test per seed would find nothing in seed 1)."""
    base: dict[int, set[int]] = {0: set(), 1: set()}
    runs = _board_runs(tmp_path, {"base": base, "five": {0: set(range(5)), 1: set(range(5))},
                                  "seed0": {0: set(range(6)), 1: set()}})
    board = build_leaderboard(list(runs.values()), base_run=runs["base"], resamples=4000, seed=1)
    cells = {Path(c.run_dir).name: c for r in board["rows"] for c in r.cells.values()}
    five, seed0 = cells["five"].significance, cells["seed0"].significance
    assert five is not None and seed0 is not None
    for sig, m in ((five, 5), (seed0, 6)):
        for key in ("delta_par", "delta_sub"):
            assert sig[key]["p"] == pytest.approx(sign_flip_test([1] * m + [0] * (N - m)).p_value) == pytest.approx(2 * 0.5**m)
    assert five["delta_sub"]["lo"] > 0  # the CI alone would have marked it
    assert not five["sub_significant"] and not five["par_significant"]
    assert seed0["sub_significant"] and seed0["par_significant"]
    md = render_leaderboard(board, "markdown")
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "+41.67" in rows["five"] and "†" not in rows["five"] and "‡" not in rows["five"]
    assert rows["seed0"].rstrip(" |").endswith("+25.00†‡")
    assert "sign-flip test over parents" in md.split("\n\nRun health")[0].splitlines()[-1]
    data = json.loads(render_leaderboard(board, "json"))
    assert data["significance"]["unit"] == "parent"


# --------------------------------------------------------------------------- outcome files with clusters


def test_outcome_files_can_group_items_into_units(tmp_path: Path) -> None:
    """Per-seed rows of 6 problems (3 seeds each): A right everywhere, B wrong on every seed of problems 0-5."""
    rows = [(f"q{p}-s{s}", f"q{p}", s) for p in range(20) for s in range(3)]
    fa, fb = tmp_path / "a.csv", tmp_path / "b.jsonl"
    fa.write_text("id,problem,correct\n" + "".join(f"{i},{p},1\n" for i, p, _ in rows))
    fb.write_text("".join(json.dumps({"id": i, "problem": p, "correct": int(p not in {f"q{j}" for j in range(6)})}) + "\n"
                          for i, p, _ in rows))
    base = ["compare", str(fa), str(fb), "--json", "--resamples", "300"]
    flat = json.loads(CliRunner().invoke(app, base).stdout)["comparisons"][0]
    assert flat["unit"] == "item" and flat["units"] == 60 and flat["p_value"] == pytest.approx(2 * 0.5**18)
    res = CliRunner().invoke(app, [*base, "--cluster-column", "problem"])
    assert res.exit_code == 0, res.output
    grouped = json.loads(res.stdout)["comparisons"][0]
    assert grouped["unit"] == "problem" and grouped["units"] == 20 and grouped["ci"]["units"] == 20
    assert grouped["p_value"] == pytest.approx(2 * 0.5**6) and grouped["unit_table"]["a_better"] == 6
    # the two files must agree on each item's cluster, and every row needs one
    fb.write_text(fb.read_text().replace('"problem": "q7"', '"problem": "q8"', 1))
    res = CliRunner().invoke(app, [*base, "--cluster-column", "problem"])
    assert res.exit_code == 2 and "item 'q7-s0' is in 'q7' in A" in res.output
    fa.write_text("id,problem,correct\nq1,,1\n")
    res = CliRunner().invoke(app, [*base, "--cluster-column", "problem"])
    assert res.exit_code == 2 and "a.csv: line 2: field 'problem': a cluster must be" in res.output


# --------------------------------------------------------------------------- issue 26 (mutation trial): each mark and
# bound is checked where the two metrics, or the two sides of an interval, differ


def test_the_sign_test_counts_only_the_units_that_differ() -> None:
    from studybench.analysis.signflip import unit_directions

    way = unit_directions([1] * 5 + [0] * 5)  # 5 better, 5 tied: binomtest(5, 5), the ties left out
    assert (way.b_better, way.a_better, way.tied) == (5, 0, 5)
    assert way.sign_p == pytest.approx(binomtest(5, 5, 0.5).pvalue) == pytest.approx(0.0625)
    assert way.sign_p_b_better == pytest.approx(1 / 32) and way.sign_p_a_better == pytest.approx(1.0)


def test_p_between_the_level_and_twice_it_is_not_significant_and_the_interval_reads_low_to_high() -> None:
    # 5 of 12 parents better on B, none worse: exact two-sided p = 2/32 = 0.0625, above 5 % (below 10 %)
    a = {f"P{i}": False for i in range(12)}
    b = {f"P{i}": i < 5 for i in range(12)}
    r = compare_outcomes(a, b, resamples=4000, seed=1)
    assert r.p_value == pytest.approx(0.0625)
    assert not r.significant()
    lo, hi = r.diff_ci
    assert lo <= r.diff <= hi and lo < hi
    line = r.conclusion()
    assert "not significant at 5%" in line
    assert f"CI over items {100 * lo:+.1f} to {100 * hi:+.1f}" in line, line


def _two_part_runs(root: Path, known: dict[str, set[tuple[int, str]]]) -> dict[str, Path]:
    """N two-part parents (sub-problems a, b); run ``name`` answers (parent, sub) right, in both seeds, when in known[name]."""
    parents = [parent(f"P{i}", [sub(x, "\\boxed{2}", problem=f"{x}: compute.") for x in "ab"], source="Syn", problem=f"item-{i}.")
               for i in range(N)]
    f = write_set(root / "set.json", parents)
    key = {request_seed(s, 0, f"Syn//P{i}", t): (i, x) for s in (0, 1) for i in range(N) for t, x in enumerate("ab")}
    out = {}
    for name, right in known.items():
        def model(body: dict[str, Any], right: set[tuple[int, str]] = right) -> Reply:
            return Reply("Final Answer: \\boxed{2}" if key[body["seed"]] in right else "Final Answer: \\boxed{9}")

        with start_stub_server(model, model="stub-model") as srv:
            run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=1, seeds=[0, 1],
                              verify_workers=1), root / name)
        out[name] = root / name
    return out


def test_each_mark_follows_its_own_metric(tmp_path: Path) -> None:
    """'subs': sub-problem a of 6 parents right in both seeds, never b: ΔSub@1 has p = 2/64 (marked †) while no
    parent is solved, so ΔPar@1 is 0 with p = 1 (no ‡)."""
    runs = _two_part_runs(tmp_path, {"base": set(), "subs": {(i, "a") for i in range(6)}})
    board = build_leaderboard(list(runs.values()), base_run=runs["base"], resamples=4000, seed=1)
    cells = {Path(c.run_dir).name: c for r in board["rows"] for c in r.cells.values()}
    sig = cells["subs"].significance
    assert sig is not None
    assert sig["delta_sub"]["p"] == pytest.approx(2 / 64) and sig["delta_par"]["p"] == pytest.approx(1.0)
    assert sig["sub_significant"] and not sig["par_significant"]
    for key in ("delta_sub", "delta_par"):
        d = sig[key]
        assert d["lo"] <= d["observed"] <= d["hi"], (key, d)
    assert sig["delta_sub"]["lo"] < sig["delta_sub"]["hi"]
    md = render_leaderboard(board, "markdown")
    row = next(line for line in md.splitlines() if line.startswith("| subs"))
    assert row.rstrip(" |*").endswith("+25.00†"), row
