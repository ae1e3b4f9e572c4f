"""``studybench leaderboard``: the paper's Table 2 from run directories (:mod:`studybench.analysis.leaderboard`)."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Annotated

import typer

from studybench.cli.common import console, fail, fail_write, out_console
from studybench.cli.health import AllowIncomplete, exit_if_incomplete, refuse
from studybench.cli.reproduce import warn_installed_versions
from studybench.escaping import plural

__all__ = ["leaderboard_cmd"]


_RUN_FILES = ("manifest.json", "generations.jsonl", "judgements.jsonl", "llm_judgements.jsonl", "report.json")


def _expand(patterns: list[str], allow_incomplete: bool = False) -> list[Path]:
    """Run directories from arguments that may be (quoted) globs; each directory once, in order.

    A glob skips directories that hold no run file; one that holds some but no manifest (a damaged
    run) is kept, so that it is refused (or, with ``--allow-incomplete``, listed as unreadable)."""
    out: list[Path] = []
    for pat in patterns:
        hits = sorted(glob.glob(pat)) if any(ch in pat for ch in "*?[") else [pat]
        if not hits:
            fail(f"{pat}: matches no run directory")
        for h in hits:
            p = Path(h)
            # a run file that is there but not a regular file is read (and refused, named) later
            if p.is_dir() and any(os.path.lexists(p / f) for f in _RUN_FILES):
                if p not in out:
                    out.append(p)
            elif not any(ch in pat for ch in "*?["):
                if not allow_incomplete:
                    fail(f"{h}: not a run directory (no manifest.json)")
                out.append(p)
    return out


def _label_overrides(items: list[str], dirs: list[Path]) -> dict[str, dict[str, str]]:
    """``RUN_DIR:KEY=VALUE`` options -> ``{run dir: {key: value}}`` (run dirs among those given)."""
    from studybench.store import check_labels

    out: dict[str, dict[str, str]] = {}
    known = {str(d) for d in dirs} | {str(d.resolve()) for d in dirs}
    for item in items:
        head, eq, value = item.partition("=")
        run, colon, key = head.rpartition(":")
        if not (eq and colon and run and key):
            fail(f"--label {item!r}: expected RUN_DIR:KEY=VALUE, e.g. runs/gepa-app:method=GEPA")
        if run not in known and str(Path(run).resolve()) not in known:
            fail(f"--label {item!r}: {run} is not one of the run directories given")
        match = next(d for d in dirs if str(d) == run or str(d.resolve()) == str(Path(run).resolve()))
        out.setdefault(str(match), {})[key] = value
    for run, labels in out.items():
        try:
            check_labels(labels)
        except ValueError as e:
            fail(f"--label for {run}: {e}")
    return out


def leaderboard_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run directories (or quoted globs such as 'runs/*'), one per method and split.")],
    base: Annotated[Path | None, typer.Option("--base", help="Measure every ΔSub@k against this run (default: the run labelled as each method's base model).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="markdown | latex | csv | json | html.")] = "markdown",
    out: Annotated[Path | None, typer.Option("--out", help="Write the table to this file instead of printing it.")] = None,
    scoring: Annotated[str | None, typer.Option(help="strict (rule verifier only) | liberal (rule OR LLM judge); default: each run's own.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="RUN_DIR:KEY=VALUE: a label for this table only (overrides the run's own; nothing is written). Repeatable.")] = None,
    significance: Annotated[bool, typer.Option("--significance/--no-significance", help="Test every Δ with the parent as the unit: exact paired sign-flip test and paired bootstrap CI over parents (the analysis extra).")] = True,
    resamples: Annotated[int, typer.Option(help="Paired bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the paired bootstrap.")] = 0,
    html: Annotated[Path | None, typer.Option("--html", help="Also write one self-contained HTML page (the table and a bar chart of Sub@k per method and split) to this file.")] = None,
    allow_incomplete: AllowIncomplete = False,
) -> None:
    """The paper's Table 2: Par@k, Sub@k and ΔSub@k per method on each split, grouped by layer.

    Rows come from the runs' labels (studybench eval --label method=GEPA --label layer=... --label
    base=Qwen3-8B, or studybench label RUN key=value): a run whose method equals its base is that base
    model's own run and heads the table; ΔSub@k is measured against it. Runs of one split must be over
    the same items, k and seeds (else refused, saying which run differs). Every Δ is tested with the
    parent as the unit (its seeds and sub-problems summed into one paired observation): † marks a
    ΔSub@k, ‡ a ΔPar@k that the exact paired sign-flip test over parents finds significant at 5%
    (two-sided); the JSON output also has the 95% paired bootstrap CIs over parents.

    Every format ends with each run's health (complete, turns missing, truncation, unjudgeable,
    rule timeouts). An incomplete or unreadable run is refused unless --allow-incomplete: then its
    numbers are marked (! and "(incomplete)", a footnote saying why) and the command exits 1."""
    from studybench.analysis.leaderboard import (
        FORMATS,
        LeaderboardError,
        build_leaderboard,
        render_leaderboard,
    )
    from studybench.analysis.paired import AnalysisExtraMissing
    from studybench.files import atomic_write_text
    from studybench.report import IncompleteRunError

    if fmt not in FORMATS:
        fail(f"--format: one of {', '.join(FORMATS)}, not {fmt!r}")
    dirs = _expand(runs, allow_incomplete)
    overrides = _label_overrides(label or [], dirs)
    try:
        board = build_leaderboard(dirs, base_run=base, scoring=scoring, labels=overrides, significance=significance,
                                  resamples=resamples, seed=seed, allow_incomplete=allow_incomplete)
    except IncompleteRunError as e:
        refuse(e)
    except LeaderboardError as e:
        fail(str(e))
    except AnalysisExtraMissing as e:
        fail(f"{e} (or --no-significance)", 1)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    for d in dirs:  # one line per run made with other package versions than the installed ones
        warn_installed_versions(Path(d), prefix=f"{d}: ")
    try:
        text = render_leaderboard(board, fmt)
        page = render_leaderboard(board, "html") if html is not None else None
    except AnalysisExtraMissing as e:
        fail(str(e), 1)
    if html is not None and page is not None:
        try:
            atomic_write_text(html, page)
        except OSError as e:
            fail_write(e, html, resumable=False)
        console.print(f"leaderboard page: {html}")
    if out is not None:
        try:
            atomic_write_text(out, text)
        except OSError as e:
            fail_write(e, out, resumable=False)
        console.print(f"leaderboard of {plural(len(dirs), 'run')}: {out}")
    else:
        out_console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
    exit_if_incomplete(board["health"])
