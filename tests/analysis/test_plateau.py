"""``studybench plateau``: score against GPU-hours per method and the plateau detector (issue 12 item 4).

The snapshots are real run directories made against one stub server: each snapshot is a model name,
and the reply function solves a fixed set of the 12 parents (one sub-problem each) for each name.

Bootstrap expectations, worked out by hand (12 parents, nested solved sets, so a parent either gains
1 or 0 and a resample's gain is (gaining parents drawn)/12 with draws ~ Binomial(12, g/12)):

- 2 -> 5 solved (3 gaining parents): P(no gaining parent drawn) = 0.75**12 = 3.2% > 2.5%, so the 2.5%
  quantile is 0: not significant; 5 -> 6 even less. The plateau is the first snapshot.
- 1 -> 7 solved (6 gaining): P(<= 2 drawn) = 79/4096 = 1.9% and P(<= 3) = 7.3%, so the lower bound
  is 3/12 = 25 points: significant; 7 -> 8 (1 gaining, P(0) = 35%) is not. The plateau is snapshot 1.
- 0 -> 4 -> 8 -> 12 (4 gaining each step): P(0 drawn) = (2/3)**12 = 0.8%, P(<= 1) = 5.4%: the lower
  bound is 1/12 = 8.33 points every step: the plateau is the last snapshot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _support import parent, require_extra, sub, write_set
from typer.testing import CliRunner

require_extra("analysis", "matplotlib", "numpy", module_level=True)

from studybench.analysis.plateau import (  # noqa: E402
    MethodSeries,
    PlateauError,
    Snapshot,
    detect_plateau,
    plot_plateau,
    read_snapshots,
    snapshot_scores,
)
from studybench.cli import app  # noqa: E402
from studybench.evaluate import EvalSpec, run_eval  # noqa: E402
from studybench.report import build_report  # noqa: E402
from studybench.report.build import parent_outcomes  # noqa: E402
from studybench.testing.stub_server import Reply, conversation_turn, start_stub_server  # noqa: E402

N = 12
SET = [parent(f"P{i:02d}", [sub("a", "\\boxed{2}", problem=f"PID{i:02d}: speed?")], problem=f"Block PID{i:02d}.")
       for i in range(N)]

SOLVES = {  # model name -> parents it solves (nested within each method)
    "base": range(1),
    "a0": range(2), "a1": range(5), "a2": range(6), "a3": range(6),
    "b0": range(1), "b1": range(7), "b2": range(8), "b3": range(8),
    "r0": range(0), "r1": range(4), "r2": range(8), "r3": range(12),
}


def _reply(body: dict[str, Any]) -> Reply:
    _, text = conversation_turn(body)
    m = re.search(r"PID(\d\d)", text)
    ok = m is not None and int(m.group(1)) in SOLVES[str(body.get("model"))]
    return Reply("Final Answer: \\boxed{2}" if ok else "Final Answer: \\boxed{9}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run directories ``runs/<model>`` for every model of :data:`SOLVES` (k=1, seeds 0 and 1)."""
    root = tmp_path_factory.mktemp("plateau")
    f = write_set(root / "set.json", SET)
    with start_stub_server(_reply) as srv:
        for model in SOLVES:
            run_eval(EvalSpec(split=str(f), model=model, base_url=srv.base_url, k=1, seeds=[0, 1],
                                     verify_workers=1), root / "runs" / model)
    return root


def _csv(root: Path, lines: list[str], name: str = "snapshots.csv") -> Path:
    p = root / name
    p.write_text("method,seed,gpu_hours,run_dir\n" + "".join(line + "\n" for line in lines))
    return p


def _method(name: str, prefix: str, seeds: tuple[str, ...] = ("0",)) -> list[str]:
    return [f"{name},{s},{10 * (i + 1)},runs/{prefix}{i}" for s in seeds for i in range(4)]


def test_parent_outcomes_add_up_to_the_report(runs: Path) -> None:
    po = parent_outcomes(runs / "runs" / "a1")
    rep = build_report(runs / "runs" / "a1")
    assert po["sub_problems"] == [1] * N and len(po["parents"]) == N
    for seed in (0, 1):
        assert po["per_seed"][seed]["subs_solved"] == [1] * 5 + [0] * 7
        assert po["per_seed"][seed]["solved"] == [True] * 5 + [False] * 7
        assert 100 * sum(po["per_seed"][seed]["subs_solved"]) / N == pytest.approx(rep["sub_at_k"]["per_seed"][seed], abs=1e-4)


def test_detector_marks_the_last_significant_gain(runs: Path) -> None:
    rows = read_snapshots(_csv(runs, ["base,0,,runs/base", *_method("A", "a", ("0", "1")), *_method("B", "b"),
                                      *_method("Rising", "r")]))
    scores = snapshot_scores(rows, "sub")
    assert scores["k"] == 1 and scores["base"]["mean"] == pytest.approx(100 / 12)
    a = scores["methods"]["A"]
    assert a.seeds == ["0", "1"]
    assert [round(s.mean, 2) for s in a.snapshots] == [16.67, 41.67, 50.0, 50.0]
    assert a.snapshots[1].std == 0.0 and a.snapshots[1].gpu_hours == 20
    det = detect_plateau(scores)

    # A: 2 -> 5 -> 6 -> 6 of 12: no gain is significant with 12 parents, the plateau is the first snapshot
    da = det["A"]
    assert [s["significant"] for s in da["snapshots"]] == [False, False, False, False]
    assert da["snapshots"][1]["compared_to"] == 0 and da["snapshots"][1]["gain"] == 25.0
    assert da["snapshots"][1]["ci_low"] == 0.0 and da["snapshots"][1]["ci_high"] > 25
    assert da["snapshots"][3]["compared_to"] == 2 and da["snapshots"][3]["gain"] == 0.0  # the earliest best
    assert (da["plateau"], da["plateau_gpu_hours"], da["share_after"]) == (0, 10.0, 0.75)
    assert (da["best"], da["best_to_final"]) == (2, 0.0)

    # B: 1 -> 7 is significant (lower bound 3/12), 7 -> 8 is not: the plateau is snapshot 1 at 20 GPU-hours
    db = det["B"]
    assert [s["significant"] for s in db["snapshots"]] == [False, True, False, False]
    assert db["snapshots"][1]["ci_low"] == 25.0
    assert (db["plateau"], db["plateau_gpu_hours"], db["total_gpu_hours"], db["share_after"]) == (1, 20.0, 40.0, 0.5)

    # Rising: every step of 4 parents is significant (lower bound 1/12): no plateau before the end
    dr = det["Rising"]
    assert [s["significant"] for s in dr["snapshots"]] == [False, True, True, True]
    assert [s["ci_low"] for s in dr["snapshots"][1:]] == [pytest.approx(100 / 12, abs=1e-3)] * 3
    assert (dr["plateau"], dr["share_after"], dr["best_to_final"]) == (3, 0.0, 0.0)
    assert detect_plateau(scores) == det  # seeded


def test_best_to_final_is_negative_after_a_drop(runs: Path) -> None:
    rows = read_snapshots(_csv(runs, ["D,0,1,runs/r1", "D,0,2,runs/b1", "D,0,3,runs/a1"]))
    d = detect_plateau(snapshot_scores(rows))["D"]
    assert (d["best"], d["final_value"], d["best_to_final"]) == (1, pytest.approx(41.6667), pytest.approx(-16.6667))
    assert d["snapshots"][2]["compared_to"] == 1 and d["snapshots"][2]["gain"] < 0


def test_par_metric_and_base_option(runs: Path) -> None:
    rows = read_snapshots(_csv(runs, _method("B", "b")))
    scores = snapshot_scores(rows, "par", base=runs / "runs" / "r1")
    assert scores["metric"] == "par" and scores["base"]["mean"] == pytest.approx(100 * 4 / 12)
    assert [round(s.mean, 2) for s in scores["methods"]["B"].snapshots] == [8.33, 58.33, 66.67, 66.67]


@pytest.mark.parametrize(("text", "message"), [
    ("method,seed,run_dir\nA,0,runs/a0\n", "line 1: missing column gpu_hours"),
    ("method,seed,gpu_hours,run_dir\nA,0,ten,runs/a0\n", "line 2, column gpu_hours: not a number: 'ten'"),
    ("method,seed,gpu_hours,run_dir\nA,0,1,runs/a0\nA,0,-1,runs/a1\n", "line 3, column gpu_hours: must be a finite"),
    ("method,seed,gpu_hours,run_dir\nA,0,1,runs/nope\n", "line 2, column run_dir: "),
    ("method,seed,gpu_hours,run_dir\nA,0,,runs/a0\n", "line 2, column gpu_hours: not a number: ''"),
    ("method,seed,gpu_hours,run_dir\nA,0,1,runs/a0\nA,0,1,runs/a1\n", "line 3: a second run for method 'A'"),
    ("method,seed,gpu_hours,run_dir\nbase,0,,runs/base\n", "no snapshot rows"),
])
def test_csv_errors_name_file_line_and_column(runs: Path, text: str, message: str) -> None:
    p = runs / "bad.csv"
    p.write_text(text)
    with pytest.raises(PlateauError) as e:
        read_snapshots(p)
    assert str(e.value).startswith(f"{p}, ") or str(e.value).startswith(f"{p}:")
    assert message in str(e.value)
    if "nope" in text:
        assert "runs/nope is not a run directory (no manifest.json)" in str(e.value)


def test_seeds_with_different_snapshot_counts_are_refused(runs: Path) -> None:
    rows = read_snapshots(_csv(runs, [*_method("A", "a"), "A,1,10,runs/a0"]))
    with pytest.raises(PlateauError, match=r"method 'A': its seeds have different numbers of snapshots \(seed 0: 4, seed 1: 1\)"):
        snapshot_scores(rows)


def test_runs_over_other_items_are_refused(runs: Path, tmp_path: Path) -> None:
    f = write_set(tmp_path / "set.json", SET[:6])
    with start_stub_server(_reply) as srv:
        run_eval(EvalSpec(split=str(f), model="a0", base_url=srv.base_url, k=1, seeds=[0, 1], verify_workers=1),
                 tmp_path / "small")
    rows = read_snapshots(_csv(runs, ["A,0,1,runs/a0", f"A,0,2,{tmp_path / 'small'}"], "mixed.csv"))
    with pytest.raises(PlateauError, match="is not over the same parents as"):
        snapshot_scores(rows)


def test_figures_are_valid_png_and_deterministic_svg(runs: Path, tmp_path: Path) -> None:
    rows = read_snapshots(_csv(runs, ["base,0,,runs/base", *_method("A", "a", ("0", "1")), *_method("Rising", "r")]))
    scores = snapshot_scores(rows)
    det = detect_plateau(scores, resamples=500)
    png, svg = plot_plateau(scores, tmp_path / "one" / "fig", det)
    assert (png.name, svg.name) == ("fig.png", "fig.svg")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    import xml.etree.ElementTree as ET

    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    _, svg2 = plot_plateau(scores, tmp_path / "two" / "fig", det)
    assert svg.read_bytes() == svg2.read_bytes()
    assert not list((tmp_path / "one").glob(".*tmp"))  # no temporary file left


def test_cli_prints_the_table_and_writes_the_figures(runs: Path, tmp_path: Path) -> None:
    csv_path = _csv(runs, ["base,0,,runs/base", *_method("B", "b"), *_method("Rising", "r")], "cli.csv")
    res = CliRunner().invoke(app, ["plateau", str(csv_path), "--out", str(tmp_path / "p"), "--resamples", "2000"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "p.png").is_file() and (tmp_path / "p.svg").is_file()
    assert "B" in res.output and "50%" in res.output and str(tmp_path / "p.png") in res.output.replace("\n", "")
    res = CliRunner().invoke(app, ["plateau", str(csv_path), "--out", str(tmp_path / "q"), "--json", "--metric", "par"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["metric"] == "par" and data["methods"]["B"]["plateau"] == 1
    assert data["figures"] == [str(tmp_path / "q.png"), str(tmp_path / "q.svg")]
    bad = CliRunner().invoke(app, ["plateau", str(csv_path), "--metric", "pass"])
    assert bad.exit_code == 2 and "--metric" in bad.output
    p = runs / "bad-cli.csv"
    p.write_text("method,seed,gpu_hours,run_dir\nA,0,x,runs/a0\n")
    bad = CliRunner().invoke(app, ["plateau", str(p)])
    assert bad.exit_code == 2 and "line 2, column gpu_hours: not a number" in bad.output


# ----------------------------------------------------------------------------- the detector on made-up snapshots
# (issue 26, mutation trial): which snapshot each one is compared with, and the interval's level


def _snap(i: int, solved: list[int]) -> Snapshot:
    numer = [float(x) for x in solved]
    mean = 100.0 * sum(numer) / len(numer)
    return Snapshot(index=i, gpu_hours=float(i + 1), per_seed={"0": mean}, mean=mean, std=None, runs=[f"r{i}"],
                    numer=numer, denom=[1.0] * len(numer))


def _detect(*solved: list[int], resamples: int = 2_000) -> dict[str, Any]:
    series = MethodSeries("M", ["0"], [_snap(i, s) for i, s in enumerate(solved)])
    return detect_plateau({"methods": {"M": series}}, resamples=resamples, seed=0)["M"]


def test_a_snapshot_is_compared_with_the_best_earlier_one_not_the_previous() -> None:
    n = 40
    half, tenth = [1] * 20 + [0] * 20, [1] * 4 + [0] * 36
    d = _detect(half, tenth, half)  # 50 %, a dip to 10 %, back to 50 %: no gain over the best earlier
    s2 = d["snapshots"][2]
    assert s2["compared_to"] == 0 and s2["gain"] == 0.0 and not s2["significant"], s2
    assert d["plateau"] == 0 and d["best"] == 0 and len(half) == n


def test_the_earliest_of_equal_best_snapshots_is_the_reference() -> None:
    a, b = [1] * 20 + [0] * 20, [0] * 20 + [1] * 20  # the same 50 %, other parents
    d = _detect(a, b, [1] * 40)
    assert d["snapshots"][2]["compared_to"] == 0 and d["snapshots"][1]["compared_to"] == 0
    assert d["best"] == 2 and d["plateau"] == 2


def test_the_interval_is_the_95_percent_percentile_interval() -> None:
    # new solves 20 of 40 parents, old none: a resample's gain is 2.5 x Binomial(40, 1/2) points, whose 2.5 % and
    # 97.5 % quantiles are 14 and 26 draws (cdf(13) = 0.019, cdf(14) = 0.040; symmetric), so the 95 % interval is
    # [35, 65]; a 90 % interval would be [37.5, 62.5]
    d = _detect([0] * 40, [1] * 20 + [0] * 20, resamples=10_000)
    s1 = d["snapshots"][1]
    assert (s1["ci_low"], s1["ci_high"]) == (35.0, 65.0), s1
    assert s1["gain"] == 50.0 and s1["significant"]
