"""``studybench compare A B``: paired A/B statistics of two runs, or of two files of per-item outcomes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from studybench.cli.common import console, fail, out_console
from studybench.cli.health import AllowIncomplete, exit_if_incomplete
from studybench.cli.reproduce import differences_table
from studybench.escaping import plural

__all__ = ["compare_cmd"]

_LEVELS = ("sub-problem", "parent", "both")


def _side(path: Path, levels: list[str], scoring: str | None, id_column: str, outcome_column: str,
          cluster_column: str | None = None, allow_incomplete: bool = False) -> dict[str, Any]:
    """``{level or "file": ItemOutcomes}`` of one side: a run directory at each level, or one outcome file."""
    from studybench.analysis.paired import read_outcome_file, run_outcomes

    if path.is_dir():
        return {lv: run_outcomes(path, lv, scoring, allow_incomplete=allow_incomplete) for lv in levels}
    return {"file": read_outcome_file(path, id_column=id_column, outcome_column=outcome_column, cluster_column=cluster_column)}


def _clusters(oa: Any, ob: Any) -> dict[str, str] | None:
    """The items' clusters, the same on both sides (for the items both have); ``None`` when neither has any."""
    if oa.clusters is None and ob.clusters is None:
        return None
    ca, cb = oa.clusters or {}, ob.clusters or {}
    for item in sorted(set(oa.outcomes) & set(ob.outcomes)):
        if item in ca and item in cb and ca[item] != cb[item]:
            raise ValueError(f"item {item!r} is in {ca[item]!r} in A ({oa.source}) but in {cb[item]!r} in B ({ob.source})")
    return {**cb, **ca}


def _manifest_diffs(a: Path, b: Path) -> list[tuple[str, Any, Any]] | None:
    """The manifest fields in which two run directories differ (``None`` for outcome files)."""
    if not a.is_dir():
        return None
    from studybench.store import RunStore, manifest_differences

    return manifest_differences(RunStore(a).read_manifest(), RunStore(b).read_manifest())


def _table(res: Any, a: str, b: str, title: str) -> Table:
    """The 2x2 table over items (descriptive: with units other than items its cells are not independent)."""
    t = Table(title=title, title_justify="left", show_header=True)
    t.add_column("items" if res.unit == "item" else f"items (descriptive; the tests count {res.unit}s)")
    t.add_column(f"B correct ({escape(b)})", justify="right")
    t.add_column("B wrong", justify="right")
    t.add_column("total", justify="right")
    tb = res.table
    t.add_row(f"A correct ({escape(a)})", str(tb.both), str(tb.a_only), str(tb.both + tb.a_only))
    t.add_row("A wrong", str(tb.b_only), str(tb.neither), str(tb.b_only + tb.neither))
    t.add_row("total", str(tb.both + tb.b_only), str(tb.a_only + tb.neither), str(tb.n))
    return t


def _health(sides: list[tuple[str, str, dict[str, Any]]]) -> Table:
    """Each run's health: complete or not, turns missing, truncation, unjudgeable, rule timeouts."""
    from studybench.report.health import HEALTH_HEADER, health_cells

    t = Table(title="run health", title_justify="left", show_header=True)
    for h in HEALTH_HEADER:
        t.add_column(h, justify="left" if h in ("run", "status") else "right")
    for name, run, h in sides:
        cells = [escape(c) for c in health_cells(f"{name}: {run}", h)]
        if not h.get("complete", True):
            cells[1] = f"[bold red]{cells[1]}[/bold red]"
        t.add_row(*cells)
    return t


def _stats(res: Any) -> Table:
    def p(x: float) -> str:
        return f"{x:.2g}" if x < 0.001 else f"{x:.4f}"

    t = Table(show_header=True)
    t.add_column("statistic")
    t.add_column("value", justify="right")
    level = f"{100 * res.ci.level:g}%"
    u, ut = res.unit, res.unit_table
    rows = [
        ("items", str(res.n)),
        (f"units of the tests and the CI: {u}s", str(res.units)),
        ("accuracy A", f"{100 * res.acc_a:.1f}% ({res.table.both + res.table.a_only}/{res.n})"),
        ("accuracy B", f"{100 * res.acc_b:.1f}% ({res.table.both + res.table.b_only}/{res.n})"),
        ("difference B - A", f"{100 * res.diff:+.1f} points"),
        (f"{level} CI (paired bootstrap over {u}s, {plural(res.ci.resamples, 'resample', grouped=True)}, seed {res.ci.seed})",
         f"{100 * res.diff_ci[0]:+.1f} to {100 * res.diff_ci[1]:+.1f}"),
        (f"{u}s: A better / B better / tied", f"{ut.a_better} / {ut.b_better} / {ut.tied}"),
        (f"exact sign-flip test over {u}s, two-sided", p(res.p_value)),
        ("sign-flip test, one-sided: A better", p(res.p_a_better)),
        ("sign-flip test, one-sided: B better", p(res.p_b_better)),
        (f"sign test on the {ut.a_better + ut.b_better} {u}s that differ, two-sided", p(ut.sign_p)),
        ("Cohen's kappa (items)", "undefined" if res.kappa is None else f"{res.kappa:.3f}"),
    ]
    for r in rows:
        t.add_row(*r)
    return t


def compare_cmd(
    a: Annotated[Path, typer.Argument(help="Side A: a run directory, or a CSV/TSV/JSONL file of per-item 0/1 outcomes.")],
    b: Annotated[Path, typer.Argument(help="Side B: the same kind as A, over the same items.")],
    level: Annotated[str, typer.Option("--level", help="For run directories: sub-problem (items per seed and sub-problem, solved within k attempts: Sub@k) | parent (items per seed and parent, one attempt solves every sub-problem: Par@k) | both. At both levels the tests and the CI count parents.")] = "both",
    scoring: Annotated[str | None, typer.Option("--scoring", help="For run directories: strict (rule verifier only) | liberal (rule OR LLM judge). Default: liberal for rule+llm runs, else strict.")] = None,
    resamples: Annotated[int, typer.Option("--resamples", help="Paired bootstrap resamples for the CI of the difference.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap (the same seed gives the same CI).")] = 0,
    id_column: Annotated[str, typer.Option("--id-column", help="For outcome files: the item id's column / JSON key.")] = "id",
    outcome_column: Annotated[str, typer.Option("--outcome-column", help="For outcome files: the 0/1 outcome's column / JSON key.")] = "correct",
    cluster_column: Annotated[str | None, typer.Option("--cluster-column", help="For outcome files: a column / JSON key grouping items into units (e.g. the parent of per-seed or per-sub-problem rows); the tests and the CI then count units. Default: every item is a unit.")] = None,
    intersect: Annotated[bool, typer.Option("--intersect", help="Compare only the items both sides have (default: different item sets are an error).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON instead of tables.")] = False,
    allow_incomplete: AllowIncomplete = False,
) -> None:
    """Paired A/B comparison (Physics-R1): each side's accuracy, the difference B - A with a paired
    bootstrap CI, the exact sign-flip test and the sign test, with the parent as the unit.

    A and B are two run directories over the same items (compared per sub-problem and per parent), or
    two files with an item id and a 0/1 column (e.g. original vs translated prompts scored elsewhere).
    For runs every parent is one paired observation (its seeds and sub-problems summed): the tests and
    the CI's resamples count parents, never seeds or sub-problems as independent items; for files each
    item is one (--cluster-column groups items into units). The 2x2 table over items and Cohen's kappa
    are descriptive. For run directories, a table first lists the manifest fields
    that differ (test set, selection, k, seeds, backend and sampling, artefacts, verifier, and the
    package versions and platform each run was made with), and each run's health. An incomplete or
    unreadable run is refused unless --allow-incomplete (then it is marked and the command exits 1).
    Needs the analysis extra: pip install "studybench[analysis]"."""
    from studybench.analysis.paired import AnalysisExtraMissing, compare_outcomes

    if level not in _LEVELS:
        fail(f"--level must be one of {', '.join(_LEVELS)}, got {level!r}")
    if scoring is not None and scoring not in ("strict", "liberal"):
        fail(f"--scoring must be strict or liberal, got {scoring!r}")
    if resamples < 1:
        fail(f"--resamples must be at least 1, got {resamples}")
    for path, name in ((a, "A"), (b, "B")):
        if not path.exists():
            fail(f"{name}: {path} does not exist (give a run directory or an outcome file)")
    if a.is_dir() != b.is_dir():
        fail(f"A ({a}) and B ({b}) must both be run directories or both be outcome files")
    levels = ["sub-problem", "parent"] if level == "both" else [level]
    try:
        sa = _side(a, levels, scoring, id_column, outcome_column, cluster_column, allow_incomplete)
        sb = _side(b, levels, scoring, id_column, outcome_column, cluster_column, allow_incomplete)
    except (OSError, ValueError) as e:
        fail(str(e))
    first = next(iter(sa))
    if sa[first].scoring != sb[first].scoring:
        console.print(f"[yellow]warning:[/yellow] A is scored {sa[first].scoring} and B {sb[first].scoring} "
                      "(their default scorings differ); give --scoring to compare like with like", soft_wrap=True)
    out: list[dict[str, Any]] = []
    try:
        for key in sa:
            oa, ob = sa[key], sb[key]
            res = compare_outcomes(oa.outcomes, ob.outcomes, resamples=resamples, seed=seed, intersect=intersect,
                                   clusters=_clusters(oa, ob), cluster_name="parent" if a.is_dir() else str(cluster_column),
                                   names=(f"A ({a})", f"B ({b})"))
            out.append({"level": key, "result": res, "notes": [*oa.notes, *ob.notes]})
    except AnalysisExtraMissing as e:
        fail(str(e), 1)
    except ValueError as e:
        fail(str(e))
    try:
        diffs = _manifest_diffs(a, b)
    except (OSError, ValueError) as e:
        fail(str(e))
    health = [(name, str(p), side[first].health) for name, p, side in (("A", a, sa), ("B", b, sb))
              if side[first].health is not None]
    if as_json:
        extra = {} if diffs is None else {"manifest_differences": [{"field": f, "a": va, "b": vb} for f, va, vb in diffs]}
        if health:
            extra["health"] = {name.lower(): {"run_dir": run, **h} for name, run, h in health}
        out_console.print_json(json.dumps({"a": str(a), "b": str(b), **extra, "comparisons": [
            {"level": c["level"], **c["result"].to_dict(), "conclusion": c["result"].conclusion(), "notes": c["notes"]}
            for c in out]}, allow_nan=False))
        exit_if_incomplete((run, h) for _, run, h in health)
        return
    if diffs:
        out_console.print(differences_table(diffs, str(a), str(b)))
    elif diffs is not None:
        out_console.print("manifests: the same configuration and environment")
    if health:
        out_console.print(_health(health))
        for name, run, h in health:
            if not h.get("complete", True):
                out_console.print(f"[bold red]{name} ({escape(run)}) is INCOMPLETE: {escape('; '.join(h['reasons']))}; its "
                                  "outcomes count what is missing as incorrect[/bold red]", soft_wrap=True)
    for note in dict.fromkeys(n for c in out for n in c["notes"]):
        console.print(f"[dim]note: {escape(note)}[/dim]", soft_wrap=True)
    mark = {name: "" if h.get("complete", True) else " INCOMPLETE" for name, _, h in health}
    for c in out:
        res = c["result"]
        title = "outcome files" if c["level"] == "file" else f"level: {c['level']}"
        out_console.print(_table(res, str(a) + mark.get("A", ""), str(b) + mark.get("B", ""), title))
        out_console.print(_stats(res))
        out_console.print(f"[bold]{escape(res.conclusion())}[/bold]", soft_wrap=True)
        out_console.print()
    exit_if_incomplete((run, h) for _, run, h in health)
