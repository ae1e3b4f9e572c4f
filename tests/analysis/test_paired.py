"""Paired A/B comparison (issue 12 item 2): ``studybench compare`` and :mod:`studybench.analysis.paired`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import parent, require_extra, sub, write_set
from typer.testing import CliRunner

require_extra("analysis", "scipy", "statsmodels", "numpy", module_level=True)

import numpy as np  # noqa: E402
from scipy.stats import binomtest  # noqa: E402
from statsmodels.stats.contingency_tables import mcnemar  # noqa: E402
from statsmodels.stats.inter_rater import cohens_kappa  # noqa: E402

from studybench.analysis.paired import (  # noqa: E402
    PairedTable,
    compare_outcomes,
    paired_bootstrap_diff,
    ratio_statistic,
    read_outcome_file,
    run_outcomes,
)
from studybench.cli import app  # noqa: E402
from studybench.evaluate import EvalSpec, request_seed, run_eval  # noqa: E402
from studybench.report import IncompleteRunError  # noqa: E402
from studybench.testing.stub_server import Reply, start_stub_server  # noqa: E402


def _pairs(both: int, a_only: int, b_only: int, neither: int) -> tuple[dict[str, bool], dict[str, bool]]:
    cells = [(True, True)] * both + [(True, False)] * a_only + [(False, True)] * b_only + [(False, False)] * neither
    return ({f"item{i:03d}": x for i, (x, _) in enumerate(cells)}, {f"item{i:03d}": y for i, (_, y) in enumerate(cells)})


# --------------------------------------------------------------------------- statistics


def test_physics_r1_reported_values_from_its_counts() -> None:
    # Physics-R1: 59 paired items, 18 vs 8 correct, 13 vs 3 discordant
    a, b = _pairs(both=5, a_only=13, b_only=3, neither=38)
    r = compare_outcomes(a, b, resamples=2000)
    assert r.n == 59 and r.table == PairedTable(both=5, a_only=13, b_only=3, neither=38)
    assert (r.table.both + r.table.a_only, r.table.both + r.table.b_only) == (18, 8)
    assert r.acc_a == pytest.approx(18 / 59) and r.acc_b == pytest.approx(8 / 59)
    assert r.diff == pytest.approx(-10 / 59)
    # items are the units here (no clusters): the sign-flip test is the sign test / McNemar's exact test
    assert r.unit == "item" and r.units == 59
    assert r.p_a_better == pytest.approx(0.0106, abs=5e-5)  # one-sided sign test, reported ≈ 0.011
    assert r.p_a_better == pytest.approx(697 / 2**16)  # P(X >= 13 | n = 16, 1/2)
    assert r.p_value == pytest.approx(0.0213, abs=5e-5)  # exact McNemar, reported ≈ 0.021
    assert r.unit_table.sign_p == pytest.approx(r.p_value) and r.unit_table.sign_p_a_better == pytest.approx(r.p_a_better)
    assert (r.unit_table.a_better, r.unit_table.b_better, r.unit_table.tied) == (13, 3, 43)
    assert r.p_b_better > 0.99
    assert r.diff_ci[0] < r.diff < r.diff_ci[1] < 0
    assert r.conclusion().startswith("B is worse than A: -16.9 points (95% CI over items ")
    assert "exact sign-flip test over 59 items (16 differ): p = 0.021 (significant at 5%)" in r.conclusion()


@pytest.mark.parametrize("cells", [(10, 7, 2, 20), (3, 0, 6, 1), (0, 4, 4, 0), (12, 1, 1, 30)])
def test_statistics_agree_with_scipy_and_statsmodels_on_hand_cases(cells: tuple[int, int, int, int]) -> None:
    both, a_only, b_only, neither = cells
    a, b = _pairs(*cells)
    r = compare_outcomes(a, b, resamples=500)
    n = sum(cells)
    assert r.table == PairedTable(*cells)
    assert r.acc_a == pytest.approx((both + a_only) / n) and r.acc_b == pytest.approx((both + b_only) / n)
    d = a_only + b_only
    assert r.unit_table.sign_p == pytest.approx(binomtest(b_only, d).pvalue)
    assert r.p_b_better == pytest.approx(binomtest(b_only, d, alternative="greater").pvalue)
    assert r.p_a_better == pytest.approx(binomtest(a_only, d, alternative="greater").pvalue)
    assert r.p_value == pytest.approx(mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue)
    k = cohens_kappa(np.array([[both, a_only], [b_only, neither]], dtype=float)).kappa
    assert r.kappa == pytest.approx(k)
    # by hand: po = agreement, pe = chance agreement
    po = (both + neither) / n
    pa, pb = (both + a_only) / n, (both + b_only) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    assert r.kappa == pytest.approx((po - pe) / (1 - pe))


def test_no_discordant_items_and_an_undefined_kappa() -> None:
    a, b = _pairs(both=6, a_only=0, b_only=0, neither=0)
    r = compare_outcomes(a, b, resamples=100)
    assert (r.p_value, r.p_a_better, r.p_b_better, r.unit_table.sign_p) == (1.0, 1.0, 1.0, 1.0)
    assert r.kappa is None  # both sides say "correct" everywhere: chance agreement is 1
    assert r.diff == 0 and r.diff_ci == (0.0, 0.0)
    assert r.conclusion().startswith("A and B are equally accurate: +0.0 points")
    assert "(0 differ): p = 1.000 (not significant at 5%)" in r.conclusion()
    json.dumps(r.to_dict())  # JSON-ready


def test_bootstrap_contains_the_difference_and_is_deterministic_for_a_seed() -> None:
    a, b = _pairs(both=20, a_only=4, b_only=15, neither=21)
    r1 = compare_outcomes(a, b, seed=7)
    r2 = compare_outcomes(a, b, seed=7)
    r3 = compare_outcomes(a, b, seed=8)
    assert r1.diff_ci == r2.diff_ci
    assert r1.diff_ci != r3.diff_ci
    assert r1.diff_ci[0] < r1.diff < r1.diff_ci[1]
    assert r1.ci.resamples == 10_000 and r1.ci.level == 0.95 and r1.bootstrap_unit == "item"
    # a narrower level gives a narrower interval inside it
    r90 = compare_outcomes(a, b, seed=7, level=0.80)
    assert r1.diff_ci[0] <= r90.diff_ci[0] < r90.diff_ci[1] <= r1.diff_ci[1]


def test_bootstrap_is_paired() -> None:
    # B = A plus one point on every unit: each resample's difference is exactly 1, so the CI is a point;
    # an unpaired bootstrap (independent indices) would spread it widely
    rng = np.random.default_rng(1)
    xa = rng.normal(size=200)
    ci = paired_bootstrap_diff(xa, xa + 1.0, resamples=500, seed=3)
    assert ci.observed == pytest.approx(1.0)
    assert ci.lo == pytest.approx(1.0) and ci.hi == pytest.approx(1.0)


def test_bootstrap_over_clusters_with_a_ratio_statistic() -> None:
    # per cluster (solved, items): the observed statistic is the pooled ratio, not the mean of ratios
    a = [(1, 1), (0, 3)]
    b = [(1, 1), (3, 3)]
    ci = paired_bootstrap_diff(a, b, ratio_statistic, resamples=300, seed=0)
    assert ci.observed == pytest.approx(4 / 4 - 1 / 4)
    assert ci.units == 2 and ci.lo <= ci.observed <= ci.hi
    with pytest.raises(ValueError, match="same shape"):
        paired_bootstrap_diff([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap_diff([1, 0], [1, 1], resamples=0)
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap_diff([1, 0], [1, 1], level=95)


def test_mismatched_items_are_refused_and_never_silently_intersected() -> None:
    a = {"q1": True, "q2": False, "q3": True, "x9": True}
    b = {"q1": True, "q2": True, "q4": False}
    with pytest.raises(ValueError) as e:
        compare_outcomes(a, b, names=("A (orig.csv)", "B (trans.csv)"))
    msg = str(e.value)
    assert "2 only in A (orig.csv) ('q3', 'x9')" in msg and "1 only in B (trans.csv) ('q4')" in msg
    r = compare_outcomes(a, b, intersect=True, resamples=100)
    assert r.n == 2 and r.table == PairedTable(both=1, a_only=0, b_only=1, neither=0)
    with pytest.raises(ValueError, match="no items in common"):
        compare_outcomes({"a": True}, {"b": True}, intersect=True)


# --------------------------------------------------------------------------- outcome files


def test_outcome_files_csv_tsv_and_jsonl(tmp_path: Path) -> None:
    f = tmp_path / "a.csv"
    f.write_text("id,correct,note\nq1,1,x\nq2,0,\"multi\nline\"\n\nq3,True,z\n")
    assert read_outcome_file(f).outcomes == {"q1": True, "q2": False, "q3": True}
    t = tmp_path / "a.tsv"
    t.write_text("item\tok\n7\tyes\n8\tno\n")
    assert read_outcome_file(t, id_column="item", outcome_column="ok").outcomes == {"7": True, "8": False}
    j = tmp_path / "b.jsonl"
    j.write_text('{"id": "q1", "correct": 1}\n\n{"id": 2, "correct": false}\n{"id": "q3", "correct": "0"}\n')
    assert read_outcome_file(j).outcomes == {"q1": True, "2": False, "q3": False}


@pytest.mark.parametrize(("name", "text", "kw", "expected"), [
    ("x.csv", "id,correct\nq1,1\nq2,maybe\n", {}, "x.csv: line 3: field 'correct': expected 0/1"),
    ("x.csv", "id,correct\nq1,1\n,0\n", {}, "x.csv: line 3: field 'id': an item id must be"),
    ("x.csv", "id,correct\nq1,1\nq1,0\n", {}, "x.csv: line 3: field 'id': duplicate item id 'q1' (first on line 2)"),
    ("x.csv", "id,score\nq1,1\n", {}, "x.csv: line 2: no field 'correct' (fields: 'id', 'score')"),
    ("x.csv", "id,correct\nq1,1,extra\n", {}, "x.csv: line 2: 3 fields, the header has 2"),
    ("x.csv", "id,correct\n", {}, "x.csv: no items"),
    ("x.jsonl", '{"id": "q1", "correct": 1}\n{"id": "q2", "correct": 0.5}\n', {}, "x.jsonl: line 2: field 'correct'"),
    ("x.jsonl", '{"id": "q1", "correct": 1}\n\n{"id": "q2"\n', {}, "x.jsonl: line 3: not valid JSON"),
    ("x.jsonl", '[1, 2]\n', {}, "x.jsonl: line 1: expected a JSON object"),
    ("x.jsonl", '{"id": true, "correct": 1}\n', {}, "x.jsonl: line 1: field 'id'"),
    ("x.jsonl", '{"qid": "a", "correct": 1}\n', {"id_column": "item"}, "x.jsonl: line 1: no field 'item'"),
])
def test_bad_outcome_rows_name_the_file_line_and_field(tmp_path: Path, name: str, text: str, kw: dict[str, str], expected: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ValueError) as e:
        read_outcome_file(f, **kw)
    assert str(e.value).startswith(str(tmp_path / expected.split(":", 1)[0]) + ":" + expected.split(":", 1)[1])


def test_an_outcome_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        read_outcome_file(tmp_path)


# --------------------------------------------------------------------------- runs

SET = [parent(pid, [sub("a", "\\boxed{2}", problem="Q1: speed?"), sub("b", "\\boxed{2}", problem="Q2: again?")],
              problem=f"Block {pid}.")
       for pid in ("P1", "P2", "P3")]
SEEDS, K = (0, 1), 2
# correct turns, as (seed, attempt, parent, sub); every other turn answers wrong
PLAN_A = {
    *((s, t, "P1", x) for s in SEEDS for t in range(K) for x in "ab"),  # P1: always right
    *((s, 0, "P2", "a") for s in SEEDS), *((s, 1, "P2", "b") for s in SEEDS),  # P2: each sub once, never together
    (1, 1, "P3", "a"), (1, 1, "P3", "b"),  # P3: solved by seed 1's second attempt only
}
PLAN_B = {
    *((s, 0, "P1", "a") for s in SEEDS),  # P1: sub a only
    *((s, 1, "P2", x) for s in SEEDS for x in "ab"),  # P2: both subs in attempt 1
}


def _run(tmp_path: Path, name: str, plan: set[tuple[int, int, str, str]], seeds: tuple[int, ...] = SEEDS) -> Path:
    f = write_set(tmp_path / "set.json", SET)
    by_seed = {request_seed(s, t, f"S//{p}", i): (s, t, p, x)
               for s in seeds for t in range(K) for p in ("P1", "P2", "P3") for i, x in enumerate("ab")}

    def model(body: dict[str, Any]) -> Reply:
        return Reply("Final Answer: \\boxed{2}" if by_seed[body["seed"]] in plan else "Final Answer: \\boxed{9}")

    with start_stub_server(model, model="stub-model") as srv:
        run_eval(EvalSpec(split=str(f), model="stub-model", base_url=srv.base_url, k=K, seeds=list(seeds)), tmp_path / name)
    return tmp_path / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("paired")
    return _run(d, "run_a", PLAN_A), _run(d, "run_b", PLAN_B)


def test_run_outcomes_and_the_2x2_tables_at_both_levels(runs: tuple[Path, Path]) -> None:
    a, b = runs
    sa, sb = run_outcomes(a, "sub-problem"), run_outcomes(b, "sub-problem")
    # by hand, (seed, parent, sub) solved within k=2 attempts
    assert sa.outcomes == {f'[{s},"S//{p}","{x}"]': not (s == 0 and p == "P3") for s in SEEDS for p in ("P1", "P2", "P3") for x in "ab"}
    assert {k for k, v in sb.outcomes.items() if v} == {f'[{s},"S//{p}","{x}"]' for s in SEEDS for p, x in (("P1", "a"), ("P2", "a"), ("P2", "b"))}
    assert sa.scoring == sb.scoring == "strict" and sa.level == "sub-problem"
    assert sa.clusters is not None and sa.clusters['[1,"S//P2","b"]'] == "S//P2"  # the parent, over all seeds
    sub = compare_outcomes(sa.outcomes, sb.outcomes, resamples=500, clusters=sa.clusters, cluster_name="parent")
    # both: P1a, P2a, P2b in each seed; A only: P1b x2 + seed 1's P3a, P3b; neither: seed 0's P3a, P3b
    assert sub.table == PairedTable(both=6, a_only=4, b_only=0, neither=2)
    assert sub.bootstrap_unit == sub.unit == "parent" and sub.ci.units == sub.units == 3
    # per parent (solved over seeds and subs): A 4, 4, 2; B 2, 4, 0: two parents A better, by 2 each
    assert (sub.unit_table.a_better, sub.unit_table.b_better, sub.unit_table.tied) == (2, 0, 1)
    assert sub.p_value == pytest.approx(0.5) and sub.p_a_better == pytest.approx(0.25)

    pa, pb = run_outcomes(a, "parent"), run_outcomes(b, "parent")
    assert pa.outcomes == {'[0,"S//P1"]': True, '[0,"S//P2"]': False, '[0,"S//P3"]': False,
                           '[1,"S//P1"]': True, '[1,"S//P2"]': False, '[1,"S//P3"]': True}
    assert pb.outcomes == {'[0,"S//P1"]': False, '[0,"S//P2"]': True, '[0,"S//P3"]': False,
                           '[1,"S//P1"]': False, '[1,"S//P2"]': True, '[1,"S//P3"]': False}
    assert pa.clusters == {k: json.loads(k)[1] for k in pa.outcomes}
    par = compare_outcomes(pa.outcomes, pb.outcomes, resamples=500, clusters=pa.clusters, cluster_name="parent")
    assert par.table == PairedTable(both=0, a_only=3, b_only=2, neither=1)
    # per parent (seeds solved): A 2, 0, 1; B 0, 2, 0: T = -1, and every sign vector gives an odd |T| >= 1
    assert par.units == 3 and (par.unit_table.a_better, par.unit_table.b_better) == (2, 1)
    assert par.p_value == 1.0 and par.p_a_better == pytest.approx(0.5)
    # the per-item accuracies are the run's own Sub@k and Par@k
    rep_a = json.loads((a / "report.json").read_text())
    assert 100 * sub.acc_a == pytest.approx(rep_a["sub_at_k"]["mean"])
    assert 100 * par.acc_a == pytest.approx(rep_a["par_at_k"]["mean"])


def test_runs_over_different_seeds_are_refused(runs: tuple[Path, Path], tmp_path: Path) -> None:
    one_seed = _run(tmp_path, "run_c", PLAN_B, seeds=(0,))
    with pytest.raises(ValueError) as e:
        compare_outcomes(run_outcomes(runs[0], "parent").outcomes, run_outcomes(one_seed, "parent").outcomes)
    assert """3 only in A ('[1,"S//P1"]', '[1,"S//P2"]', '[1,"S//P3"]')""" in str(e.value)
    res = CliRunner().invoke(app, ["compare", str(runs[0]), str(one_seed), "--level", "parent"])
    assert res.exit_code == 2 and "cover different items: 3 only in A" in res.output


def test_cli_json_on_two_runs(runs: tuple[Path, Path]) -> None:
    a, b = runs
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--json", "--resamples", "400", "--seed", "3"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [c["level"] for c in out["comparisons"]] == ["sub-problem", "parent"]
    sub, par = out["comparisons"]
    assert {k: sub["table"][k] for k in ("both", "a_only", "b_only", "neither")} == {"both": 6, "a_only": 4, "b_only": 0, "neither": 2}
    assert {k: par["table"][k] for k in ("both", "a_only", "b_only", "neither")} == {"both": 0, "a_only": 3, "b_only": 2, "neither": 1}
    assert sub["bootstrap_unit"] == par["bootstrap_unit"] == sub["unit"] == par["unit"] == "parent"
    assert sub["units"] == par["units"] == sub["ci"]["units"] == par["ci"]["units"] == 3
    assert sub["ci"]["resamples"] == 400 and sub["ci"]["seed"] == 3
    assert par["p_value"] == pytest.approx(1.0) and sub["p_value"] == pytest.approx(0.5)
    assert sub["unit_table"] == {"a_better": 2, "b_better": 0, "tied": 1, "sign_p": 0.5, "sign_p_a_better": 0.25,
                                 "sign_p_b_better": 1.0}
    assert sub["test"] == "exact paired sign-flip test over parents"
    assert not {"mcnemar_p", "sign_p", "sign_p_a_better", "sign_p_b_better"} & set(sub)  # the item-level tests are gone
    assert sub["conclusion"].startswith("B is worse than A: -33.3 points")
    again = json.loads(CliRunner().invoke(app, ["compare", str(a), str(b), "--json", "--resamples", "400", "--seed", "3"]).stdout)
    assert again == out


def test_cli_tables_on_two_runs(runs: tuple[Path, Path]) -> None:
    a, b = runs
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--level", "parent", "--resamples", "300"],
                             catch_exceptions=False, env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "level: parent" in res.output and "level: sub-problem" not in res.output
    assert "exact sign-flip test over parents" in res.output and "Cohen's kappa" in res.output
    assert "McNemar" not in res.output
    assert "B is worse than A: -16.7 points" in res.output


def test_cli_on_outcome_files(tmp_path: Path) -> None:
    a, b = _pairs(both=5, a_only=13, b_only=3, neither=38)
    fa, fb = tmp_path / "original.csv", tmp_path / "translated.jsonl"
    fa.write_text("qid,ok\n" + "".join(f"{k},{int(v)}\n" for k, v in a.items()))
    fb.write_text("".join(json.dumps({"qid": k, "ok": v}) + "\n" for k, v in b.items()))
    res = CliRunner().invoke(app, ["compare", str(fa), str(fb), "--id-column", "qid", "--outcome-column", "ok", "--json",
                                   "--resamples", "200"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    (c,) = json.loads(res.stdout)["comparisons"]
    assert c["level"] == "file" and c["n"] == 59
    assert c["p_a_better"] == pytest.approx(0.0106, abs=5e-5) and c["p_value"] == pytest.approx(0.0213, abs=5e-5)
    assert c["unit"] == "item" and c["units"] == 59
    res = CliRunner().invoke(app, ["compare", str(fa), str(fb)])  # default columns id/correct are absent
    assert res.exit_code == 2 and "original.csv: line 2: no field 'id'" in res.output


def test_cli_usage_errors(runs: tuple[Path, Path], tmp_path: Path) -> None:
    f = tmp_path / "o.csv"
    f.write_text("id,correct\nq,1\n")
    r = CliRunner()
    assert "must both be run directories or both be outcome files" in r.invoke(app, ["compare", str(runs[0]), str(f)]).output
    res = r.invoke(app, ["compare", str(f), str(tmp_path / "nope.csv")])
    assert res.exit_code == 2 and "B:" in res.output and "does not exist" in res.output
    res = r.invoke(app, ["compare", str(f), str(f), "--level", "problem"])
    assert res.exit_code == 2 and "--level must be one of" in res.output
    res = r.invoke(app, ["compare", str(tmp_path), str(tmp_path)])
    assert res.exit_code == 2 and "not a run directory" in res.output


def test_cli_says_how_to_install_the_analysis_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "o.csv"
    f.write_text("id,correct\nq,1\nr,0\n")
    monkeypatch.setitem(sys.modules, "scipy.stats", None)  # import scipy.stats now raises ImportError
    res = CliRunner().invoke(app, ["compare", str(f), str(f)])
    assert res.exit_code == 1
    assert "optional package 'scipy'" in res.output and 'pip install "studybench[analysis]"' in res.output


def test_an_incomplete_run_counts_missing_verdicts_as_incorrect_and_says_so(runs: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    part = tmp_path / "partial"
    shutil.copytree(runs[0], part)
    lines = (part / "judgements.jsonl").read_text().splitlines(keepends=True)
    (part / "judgements.jsonl").write_text("".join(x for x in lines if json.loads(x)["seed"] == 0))  # seed 1's are gone
    with pytest.raises(IncompleteRunError, match=r"partial: incomplete run .12 of 24 (generated )?turns have no (current )?rule verdict"):
        run_outcomes(part, "parent")  # refused unless allowed
    o = run_outcomes(part, "parent", allow_incomplete=True)
    assert any("incomplete, 12 of 24 turns have no verdict" in n for n in o.notes)
    assert o.health is not None and not o.health["complete"] and o.health["turns_missing"] == 12
    assert [k for k, v in o.outcomes.items() if v] == ['[0,"S//P1"]']
    res = CliRunner().invoke(app, ["compare", str(runs[0]), str(part), "--level", "parent", "--resamples", "100"])
    assert res.exit_code == 2 and "incomplete run" in res.output and "Cohen" not in res.output
    res = CliRunner().invoke(app, ["compare", str(runs[0]), str(part), "--level", "parent", "--resamples", "100",
                                   "--allow-incomplete"])
    assert res.exit_code == 1 and "incomplete, 12 of 24 turns have no verdict" in res.output and "INCOMPLETE" in res.output
