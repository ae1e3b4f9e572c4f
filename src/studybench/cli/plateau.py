"""``studybench plateau``: score against GPU-hours per method and where gains stop (:mod:`studybench.analysis.plateau`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from studybench.cli.common import fail, fail_write, out_console
from studybench.cli.health import AllowIncomplete, exit_if_incomplete, refuse

__all__ = ["plateau_cmd"]


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _tables(scores: dict[str, Any], det: dict[str, dict[str, Any]]) -> tuple[Table, Table]:
    from studybench.report import INCOMPLETE_MARK

    name = f"{'Sub' if scores['metric'] == 'sub' else 'Par'}@{scores['k']}"
    summary = Table(title=f"Compute plateau ({name}, %)")
    for col in ("method", "snapshots", "plateau", "GPU-h at plateau", "budget after", "best", "final", "best→final"):
        summary.add_column(col, justify="left" if col == "method" else "right")
    detail = Table(title="Gains over the best earlier snapshot (paired bootstrap over parents, 95% CI)")
    for col in ("method", "#", "GPU-h", f"{name} mean ± std", "vs #", "gain", "95% CI", "significant"):
        detail.add_column(col, justify="left" if col == "method" else "right")
    for method, d in det.items():
        share = "–" if d["share_after"] is None else f"{100 * d['share_after']:.0f}%"
        incomplete = any(not s.get("complete", True) for s in d["snapshots"])
        summary.add_row(method + (" (incomplete)" if incomplete else ""), str(len(d["snapshots"])), f"#{d['plateau']}", f"{d['plateau_gpu_hours']:g}", share,
                        f"{_pct(d['best_value'])} (#{d['best']})", _pct(d["final_value"]), _pct(d["best_to_final"], True))
        for s in d["snapshots"]:
            ci = "–" if s["ci_low"] is None else f"[{s['ci_low']:+.2f}, {s['ci_high']:+.2f}]"
            mean = _pct(s["mean"]) + ("" if s["std"] is None else f" ± {s['std']:.2f}")
            mean += "" if s.get("complete", True) else f"{INCOMPLETE_MARK} (incomplete)"
            detail.add_row(method, str(s["index"]), f"{s['gpu_hours']:g}", mean,
                           "–" if s["compared_to"] is None else f"#{s['compared_to']}", _pct(s["gain"], True), ci,
                           ("yes" if s["significant"] else "no") if s["compared_to"] is not None else "–")
    return summary, detail


def _health_table(health: dict[str, dict[str, Any]]) -> Table:
    """Each run's health: complete or not, turns missing, truncation, unjudgeable, rule timeouts."""
    from rich.markup import escape

    from studybench.report.health import HEALTH_HEADER, health_cells, health_footnote

    t = Table(title="Run health", caption="\n".join(escape(n) for n in health_footnote(list(health.items()))) or None)
    for col in HEALTH_HEADER:
        t.add_column(col, justify="left" if col in ("run", "status") else "right")
    for run, h in health.items():
        cells = [escape(c) for c in health_cells(run, h)]
        if not h.get("complete", True):
            cells[1] = f"[bold red]{cells[1]}[/bold red]"
        t.add_row(*cells)
    return t


def plateau_cmd(
    snapshots: Annotated[Path, typer.Argument(help="CSV with columns method, seed, gpu_hours, run_dir (run_dir relative to the CSV; method 'base' rows: the base model).")],
    metric: Annotated[str, typer.Option("--metric", help="sub (Sub@k) | par (Par@k).")] = "sub",
    out: Annotated[Path | None, typer.Option("--out", help="Write the figure to PREFIX.png and PREFIX.svg (default: next to the CSV, <name>-plateau).")] = None,
    base: Annotated[Path | None, typer.Option("--base", help="The base model's run (its level is the reference line), instead of the CSV's 'base' rows.")] = None,
    resamples: Annotated[int, typer.Option("--resamples", help="Bootstrap resamples per comparison.")] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="The bootstrap's random seed.")] = 0,
    scoring: Annotated[str | None, typer.Option(help="strict (rule verifier only) | liberal (rule OR LLM judge); default: each run's own.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores and the detector's findings as JSON.")] = False,
    allow_incomplete: AllowIncomplete = False,
) -> None:
    """Sub@k (or Par@k) of each method's snapshots against cumulative GPU-hours, and the compute plateau.

    One panel per method (mean over seeds, ±1 std band, the base model's level dashed). Each snapshot is
    compared with the best earlier one by a paired bootstrap over parents; the plateau is the last snapshot
    whose gain is significant (95% CI above 0). The table gives the share of the budget spent after it and
    the change from the best snapshot to the final one. Each run's health is shown; an incomplete or
    unreadable run is refused unless --allow-incomplete (then marked, and the command exits 1)."""
    from studybench.analysis.plateau import (
        METRICS,
        PlateauError,
        detect_plateau,
        plot_plateau,
        read_snapshots,
        snapshot_scores,
    )
    from studybench.files import InputFileError, dumps_json
    from studybench.report import IncompleteRunError

    if metric not in METRICS:
        fail(f"--metric: one of {', '.join(METRICS)}, not {metric!r}")
    if resamples < 1:
        fail(f"--resamples: must be >= 1, got {resamples}")
    try:
        rows = read_snapshots(snapshots)
        scores = snapshot_scores(rows, metric, base=base, scoring=scoring, allow_incomplete=allow_incomplete)
        det = detect_plateau(scores, resamples=resamples, seed=seed)
    except IncompleteRunError as e:
        refuse(e)
    except (PlateauError, InputFileError, FileNotFoundError, ValueError) as e:
        fail(str(e))
    prefix = out if out is not None else snapshots.with_name(snapshots.stem + "-plateau")
    try:
        figures = plot_plateau(scores, prefix, det)
    except PlateauError as e:
        fail(str(e), 1)
    except OSError as e:
        fail_write(e, prefix, resumable=False)
    if as_json:
        methods = {name: {"seeds": s.seeds, **det[name], "runs": [snap.runs for snap in s.snapshots],
                          "per_seed": [snap.per_seed for snap in s.snapshots]}
                   for name, s in scores["methods"].items()}
        doc = {"metric": metric, "k": scores["k"], "base": scores["base"], "resamples": resamples, "seed": seed,
               "methods": methods, "incomplete": scores["incomplete"], "health": scores["health"],
               "figures": [str(p) for p in figures]}
        out_console.print(dumps_json(json.loads(json.dumps(doc, allow_nan=False))), markup=False, highlight=False, soft_wrap=True)
        exit_if_incomplete(scores["health"].items())
        return
    summary, detail = _tables(scores, det)
    out_console.print(summary)
    out_console.print(detail)
    if scores["base"] is not None:
        incomplete = "" if scores["base"].get("complete", True) else "! (incomplete: a lower bound)"
        out_console.print(f"base model: {scores['base']['mean']:.2f}{incomplete}", highlight=False)
    out_console.print(_health_table(scores["health"]))
    out_console.print(f"figure: {figures[0]}  {figures[1]}", highlight=False, soft_wrap=True)
    exit_if_incomplete(scores["health"].items())
