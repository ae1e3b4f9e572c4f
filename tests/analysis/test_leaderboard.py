"""The leaderboard (issue 12, Table 2) on runs with known numbers.

A stub "model" answers parent ``i`` correctly when ``i`` is in the set its method knows, whatever the
seed, so every cell is a hand computation: with single-question parents Par@1 = Sub@1 = the share of
parents known, the std over seeds is 0, and ΔSub@1 = Sub@1 - the base model's Sub@1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from studybench.analysis.leaderboard import LeaderboardError, build_leaderboard, render_leaderboard
from studybench.cli import app
from studybench.evaluate import EvalSpec, run_eval
from studybench.testing.stub_server import start_stub_server

N = 8
KNOWN = {  # model name at the endpoint -> parents it answers correctly
    "base": {0, 1},
    "gepa": {0, 1, 2, 3},
    "ttrl": {0, 1, 2},
}


def _write_split(path: Path) -> Path:
    parents = [{"source": "Synthetic", "year": "2024", "source_problem_id": f"P{i}", "problem_type": "Mechanics",
                "problem": f"item-{i}: compute.", "answer": f"\\boxed{{{i + 10}}}", "answer_type": "NV", "type_sequence": ""}
               for i in range(N)]
    path.write_text(json.dumps(parents))
    return path


def _reply(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    i = int(re.search(r"item-(\d+)", text).group(1))  # type: ignore[union-attr]
    right = i in KNOWN[body["model"]]
    return f"Final Answer: \\boxed{{{i + 10 if right else 0}}}"


def _label(run: Path, **labels: str) -> None:
    """Label a run the way `studybench label` does (the manifest's ``labels``)."""
    man = json.loads((run / "manifest.json").read_text())
    man["labels"] = {**(man.get("labels") or {}), **labels}
    (run / "manifest.json").write_text(json.dumps(man))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("lb")
    out: dict[tuple[str, str], Path] = {}
    with start_stub_server(_reply) as srv:
        for split in ("application", "transfer"):
            data = _write_split(root / f"{split}.json")
            for model in KNOWN:
                run = root / "runs" / f"{model}-{split}"
                run_eval(EvalSpec(split=str(data), model=model, base_url=srv.base_url, k=1, seeds=[0, 1],
                                  verify_workers=1), run)
                out[(model, split)] = run
                layer = "" if model == "base" else ("Instructions with Answer" if model == "ttrl" else "Textbook")
                _label(run, method="Qwen3-8B" if model == "base" else model.upper(), base="Qwen3-8B",
                       **({"layer": layer} if layer else {}))
    return out


def test_cells_deltas_and_order_match_a_hand_computation(runs: dict[tuple[str, str], Path]) -> None:
    board = build_leaderboard(sorted(runs.values()))
    assert [r.method for r in board["rows"]] == ["Qwen3-8B", "GEPA", "TTRL"]  # the base model first, then by layer
    assert board["splits"] == ["application", "transfer"] and board["k"] == 1 and board["seeds"] == [0, 1]
    for row in board["rows"]:
        model = "base" if row.method == "Qwen3-8B" else row.method.lower()
        share = 100 * len(KNOWN[model]) / N
        for split in ("application", "transfer"):
            cell = row.cells[split]
            assert cell.par["mean"] == cell.sub["mean"] == share and cell.sub["std"] == 0.0
            expected = None if model == "base" else share - 100 * len(KNOWN["base"]) / N  # ΔSub@k = Sub@k - base Sub@k
            assert cell.delta_sub == expected
    md = render_leaderboard(board, "markdown")
    assert "| GEPA | **50.00 ± 0.00** | **50.00 ± 0.00** | **+25.00** |" in md
    assert "| TTRL | 37.50 ± 0.00 | 37.50 ± 0.00 | +12.50 |" in md
    assert md.index("*Textbook*") < md.index("| GEPA") < md.index("*Instructions with Answer*") < md.index("| TTRL")
    tex = render_leaderboard(board, "latex")
    assert tex.startswith("\\begin{tabular}{lrrrrrr}\n\\toprule") and "\\bottomrule" in tex
    assert "\\textbf{+25.00}" in tex and "$\\Delta$Sub@1" in tex and "$\\pm$" in tex
    data = json.loads(render_leaderboard(board, "json"))
    assert data["rows"][1]["cells"]["transfer"]["delta_sub_at_k"] == 25.0
    csv_text = render_leaderboard(board, "csv").splitlines()
    assert csv_text[0].startswith("method,layer,base,is_base,application_par_mean")
    assert csv_text[2].split(",")[:4] == ["GEPA", "Textbook", "Qwen3-8B", "False"]


def test_an_explicit_base_run_and_unlabelled_runs(runs: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    app_runs = [runs[(m, "application")] for m in KNOWN]
    board = build_leaderboard(app_runs, base_run=runs[("ttrl", "application")])
    deltas = {r.method: r.cells["application"].delta_sub for r in board["rows"]}
    assert deltas["GEPA"] == 12.5 and deltas["TTRL"] is None  # the base itself has no Δ
    with pytest.raises(LeaderboardError, match="not one of the runs"):
        build_leaderboard(app_runs[:1], base_run=runs[("ttrl", "application")])


def test_runs_over_different_items_k_or_seeds_are_refused(runs: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    data = _write_split(tmp_path / "application.json")
    with start_stub_server(_reply) as srv:
        fewer = tmp_path / "fewer"
        run_eval(EvalSpec(split=str(data), model="gepa", base_url=srv.base_url, k=1, seeds=[0, 1], limit=4,
                          verify_workers=1), fewer)
        other_seeds = tmp_path / "seeds"
        run_eval(EvalSpec(split=str(data), model="gepa", base_url=srv.base_url, k=1, seeds=[5], verify_workers=1), other_seeds)
    base = runs[("base", "application")]
    with pytest.raises(LeaderboardError, match=r"application runs are not over the same items.*4 parents"):
        build_leaderboard([base, fewer])
    with pytest.raises(LeaderboardError, match=r"different seeds.*seeds=\[5\]"):
        build_leaderboard([base, other_seeds])
    res = CliRunner().invoke(app, ["leaderboard", str(base), str(fewer)])
    assert res.exit_code == 2 and "not over the same items" in res.output


def test_cli_formats_globs_and_files(runs: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    root = runs[("base", "application")].parent
    res = CliRunner().invoke(app, ["leaderboard", str(root / "*-transfer"), "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert len(res.output.strip().splitlines()) == 1 + len(KNOWN)
    out = tmp_path / "table.tex"
    res = CliRunner().invoke(app, ["leaderboard", str(root / "*"), "--format", "latex", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().count("\\\\") >= 1 + len(KNOWN)
    res = CliRunner().invoke(app, ["leaderboard", str(tmp_path / "nothing-*")])
    assert res.exit_code == 2 and "matches no run directory" in res.output


def test_significance_marks_a_real_difference_and_not_a_small_one(tmp_path: Path) -> None:
    """8 parents, two seeds. 'all' solves every parent, 'base' two: 6 parents differ (in both seeds), so
    the exact sign-flip test over parents gives p = 2 / 2^6 = 0.031 (the seeds are not 12 items), and a
    bootstrap resample misses all 6 with probability (2/8)^8 (the CI excludes 0). 'gepa' adds 2
    parents: p = 2 / 2^2 = 0.5, and a resample misses both with probability (6/8)^8 = 0.10 > 0.025 (the
    CI reaches 0)."""
    KNOWN["all"] = set(range(N))
    try:
        data = _write_split(tmp_path / "application.json")
        runs = {}
        with start_stub_server(_reply) as srv:
            for model in ("base", "gepa", "all"):
                runs[model] = tmp_path / model
                run_eval(EvalSpec(split=str(data), model=model, base_url=srv.base_url, k=1, seeds=[0, 1],
                                  verify_workers=1), runs[model])
    finally:
        del KNOWN["all"]
    board = build_leaderboard(list(runs.values()), base_run=runs["base"], resamples=4000, seed=1)
    cells = {r.method: r.cells["application"] for r in board["rows"]}
    strong, weak = cells["all"].significance, cells["gepa"].significance
    assert strong is not None and weak is not None and cells["base"].significance is None
    assert strong["delta_sub"]["observed"] == 75.0 and strong["delta_sub"]["lo"] > 0 and strong["sub_significant"]
    assert strong["unit"] == "parent" and strong["parents"] == N
    for key in ("delta_sub", "delta_par"):
        assert strong[key]["p"] == 0.03125 and strong[key]["p_run_better"] == 0.015625
        assert (strong[key]["parents_better"], strong[key]["parents_worse"], strong[key]["parents_tied"]) == (6, 0, 2)
        assert weak[key]["p"] == 0.5 and weak[key]["parents_better"] == 2
    assert strong["par_significant"] and strong["delta_par"]["observed"] == 75.0
    assert weak["delta_sub"]["observed"] == 25.0 and weak["delta_sub"]["lo"] == 0.0 and not weak["sub_significant"]
    assert not weak["par_significant"] and "mcnemar_p" not in strong
    md = render_leaderboard(board, "markdown")
    assert "+75.00†‡" in md and "+25.00 |" in md and "sign-flip test over parents" in md.split("\n\nRun health")[0].splitlines()[-1]
    assert "$^{\\dagger}$$^{\\ddagger}$" in render_leaderboard(board, "latex")
    plain = build_leaderboard(list(runs.values()), base_run=runs["base"], significance=False)
    assert "†" not in render_leaderboard(plain, "markdown") and plain["significance"] is None


EVIL = "<script>alert(1)</script><script>document.title='PWNED'</script>"


def test_the_html_page_escapes_labels_and_plots_sub_at_k(runs: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    import shutil
    import subprocess

    from _support import require_extra, required_extras

    require_extra("analysis", "jinja2", "matplotlib")
    evil = tmp_path / "evil"
    shutil.copytree(runs[("gepa", "application")], evil)
    _label(evil, method=EVIL, layer="a$x$ & <b>", base="Qwen3-8B")
    board = build_leaderboard([runs[(m, "application")] for m in ("base", "ttrl")] + [evil], significance=False)
    page = render_leaderboard(board, "html")
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "a$x$ &amp; &lt;b&gt;" in page  # shown as text, no mathtext
    assert page.count("<svg") == 1 and 'aria-label="Sub@1 per method and split"' in page
    table = page[page.index('<table id="leaderboard">'):page.index("</table>")]
    assert '<td class="best">+25.00</td>' in table and "<td>+12.50</td>" in table  # the best Δ in bold, others not
    assert table.index("a$x$") < table.index("&lt;script&gt;alert(1)")  # grouped by layer: the label row heads its row
    out = tmp_path / "lb.html"
    res = CliRunner().invoke(app, ["leaderboard", *map(str, [runs[("base", "application")], evil]), "--no-significance",
                                   "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert "| Qwen3-8B |" in res.output and f"leaderboard page: {out}" in res.output.replace("\n", "")
    title = re.search(r"<title>(.*?)</title>", out.read_text()).group(1)  # type: ignore[union-attr]
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if "chromium" in required_extras() or "all" in required_extras():
            pytest.fail("no chromium binary, but $STUDYBENCH_REQUIRE_EXTRAS says it is installed", pytrace=False)
        pytest.skip("headless Chromium not installed (apt-get install chromium)")
    dom = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", out.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert re.search(r"<title>(.*?)</title>", dom).group(1) == title  # type: ignore[union-attr]  # no script ran
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom and "<script" not in dom


def test_labels_given_on_the_command_line_override_for_this_table_only(runs: dict[tuple[str, str], Path]) -> None:
    run = runs[("ace", "application")] if ("ace", "application") in runs else runs[("ttrl", "application")]
    before = (run / "manifest.json").read_text()
    others = [runs[("base", "application")], runs[("gepa", "application")]]
    res = CliRunner().invoke(app, ["leaderboard", *map(str, [*others, run]), "--no-significance",
                                   "--label", f"{run}:method=Renamed", "--label", f"{run}:layer=Other layer"])
    assert res.exit_code == 0, res.output
    assert "| Renamed |" in res.output and "*Other layer*" in res.output
    assert (run / "manifest.json").read_text() == before  # nothing written
    for bad, words in ((f"{run}method=X", "expected RUN_DIR:KEY=VALUE"), ("/nowhere:method=X", "not one of the run directories"),
                       (f"{run}:method=a\nb", "printable")):
        res = CliRunner().invoke(app, ["leaderboard", str(run), "--no-significance", "--label", bad])
        assert res.exit_code == 2 and words in " ".join(res.output.split()), (bad, res.output)


def test_the_mean_over_seeds_is_the_pooled_share_as_in_the_paper() -> None:
    """Paper identity: GEPA's Application Par@8 34.85 = 92/264, 92 parents solved out of 88 parents x 3
    seeds, pooled; with the same parents in every seed the leaderboard's mean over seeds is that share."""
    from studybench.metrics import mean_std

    for solved in ((30, 31, 31), (28, 32, 32), (46, 46, 0)):
        assert sum(solved) == 92
        stat = mean_std([100 * s / 88 for s in solved])
        assert round(stat.mean, 2) == 34.85 == round(100 * 92 / 264, 2)
