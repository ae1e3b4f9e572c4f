"""The paper's Table 2 from run directories: Par@k, Sub@k and ΔSub@k per method, grouped by layer.

Each run directory is one (method, split) cell. Runs are told apart by their labels (``studybench
eval --label method=GEPA --label layer="Instructions with Answer" --label base=Qwen3-8B``, or
``studybench label RUN key=value`` afterwards):

- ``method``: the row (default: the run directory's name);
- ``layer``: the training-material layer the method uses, the group of rows (default: none);
- ``base``: the base model the method starts from. A run whose ``method`` equals its ``base`` is
  that base model's own run: it heads the table, and ΔSub@k of every run with the same ``base`` on
  the same split is measured against it (``base_run`` overrides this for all rows).

Every run of a split must be over the same items (test-set file hash and parents), the same ``k``
and the same seeds: a set that is not is refused with a message that says which run differs in what,
because a Δ over different item sets means nothing. Cells are the mean ± sample std over seeds, as
in ``report.json``.

Significance of every Δ against a base run, with the parent as the unit (a parent's seeds and
sub-problems are one paired observation, never independent items): per parent, each run's solved
count summed over seeds (Par@k: seeds where one attempt solves every sub-problem; Sub@k: sub-problems
solved within k attempts), and

- the exact paired sign-flip test over parents of ΔPar@k and of ΔSub@k
  (:func:`studybench.analysis.signflip.sign_flip_test`: under "the two runs do the same on every
  parent" each parent's difference is as likely negated; exact for any number of parents, McNemar's
  exact test when there is one seed and one sub-problem per parent);
- a paired bootstrap percentile CI over parents (seeded, 10,000 resamples, 95%;
  :func:`studybench.analysis.paired.paired_bootstrap_diff`), whole parents resampled.

The marks follow the tests at ``1 - level`` (5%), two-sided: † ΔSub@k, ‡ ΔPar@k. With very few parents
that differ the percentile CI can exclude 0 while the exact test does not reach 5%; the marks never
rest on the CI.

Every run's health (:func:`studybench.report.health.run_health`: complete or not and why, turns
missing, truncation rate, unjudgeable rate, timed-out rule verdicts, rule internal errors) is part of
the board, in every format. An incomplete or unreadable run is refused
(:class:`studybench.report.IncompleteRunError`) unless ``allow_incomplete``; then each number of an
incomplete run (and each Δ measured against one) carries :data:`~studybench.report.INCOMPLETE_MARK`,
its method ``(incomplete)``, it is never bold as a column's best, and a footnote names it and why; an
unreadable run has only its line in the health table.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.datasets import OFFICIAL_SPLITS, split_title
from studybench.escaping import csv_writer, md_cell, plural
from studybench.report import INCOMPLETE_MARK, load_run_report, require_complete
from studybench.report.build import parent_outcomes
from studybench.report.health import (
    HEALTH_HEADER,
    health_cells,
    health_footnote,
    health_status,
    health_table_latex,
    health_table_markdown,
)
from studybench.store import RunStore

__all__ = ["LeaderboardError", "LeaderboardRow", "build_leaderboard", "render_leaderboard", "FORMATS", "SPLITS"]

SPLITS = OFFICIAL_SPLITS
"""Column groups, in the paper's order; runs on other splits get columns of their own after these."""

FORMATS = ("markdown", "latex", "csv", "json", "html")


class LeaderboardError(ValueError):
    """A run set that cannot be one table (different items, k or seeds; two runs for one cell)."""


@dataclass
class Cell:
    """One (method, split) cell: Par@k and Sub@k (mean, std over seeds, per seed) and ΔSub@k."""

    run_dir: str
    par: dict[str, Any]
    sub: dict[str, Any]
    delta_sub: float | None = None
    significance: dict[str, Any] | None = None
    health: dict[str, Any] = field(default_factory=lambda: {"readable": True, "complete": True, "reasons": []})
    ref_complete: bool = True
    """Whether the run ΔSub@k is measured against is complete."""

    @property
    def complete(self) -> bool:
        """The run is complete (its health)."""
        return bool(self.health.get("complete", True))


@dataclass
class LeaderboardRow:
    """One method: its labels and one :class:`Cell` per split it was run on."""

    method: str
    layer: str
    base: str | None
    is_base: bool
    cells: dict[str, Cell] = field(default_factory=dict)


def build_leaderboard(run_dirs: list[Path | str], *, base_run: Path | str | None = None,
                      scoring: str | None = None, labels: Mapping[str, Mapping[str, str]] | None = None,
                      significance: bool = True, resamples: int = 10_000,
                      seed: int = 0, level: float = 0.95, allow_incomplete: bool = False) -> dict[str, Any]:
    """Collect runs into the Table 2 layout.

    Args:
        run_dirs: run directories, one per (method, split).
        base_run: a run every ΔSub@k of its split is measured against (default: per ``base`` label).
        scoring: ``strict`` or ``liberal`` (default: each run's own, as in its report).
        labels: per run directory (as given), labels that override the run's own for this table only
            (nothing is written).
        significance: test every Δ (needs the ``analysis`` extra; see the module docstring and
            :func:`delta_significance`).
        resamples, seed, level: of the paired bootstrap over parents; ``1 - level`` is the marks' level.
        allow_incomplete: rank incomplete runs too, marked (module docstring), and list unreadable
            ones in the health table; default: refuse them.

    Returns:
        ``{"k", "seeds", "splits", "rows": [LeaderboardRow...], "health": [(run_dir, health)...]}``:
        base models' rows first, then by layer (in order of first appearance) and method; ``health``
        per run given, in order (unreadable ones included).

    Raises:
        LeaderboardError: no runs; runs of one split over different items, k or seeds; two runs for
            one (method, split); a ``base_run`` that is not among the runs.
        studybench.analysis.paired.AnalysisExtraMissing: ``significance`` without the analysis extra.
        studybench.report.IncompleteRunError: an incomplete run without ``allow_incomplete``, or an
            unreadable run (no readable manifest) without it; the message names the run and why.
    """
    if not run_dirs:
        raise LeaderboardError("no run directories given")
    reports: list[tuple[Path, dict[str, str], dict[str, Any], Any]] = []
    healths: list[tuple[str, dict[str, Any]]] = []
    for d in run_dirs:
        path = Path(d)
        report, health = load_run_report(path, scoring)
        require_complete(path, health, allow_incomplete, allow_unreadable=allow_incomplete)
        healths.append((str(path), health))
        if report is None:
            continue
        man = RunStore(path).read_manifest()
        given = (labels or {}).get(str(d)) or (labels or {}).get(str(path)) or {}
        reports.append((path, {**man.labels, **given}, report, man))
    if not reports:
        raise LeaderboardError("no readable run directories given: " + "; ".join(h["reasons"][0] for _, h in healths))
    _check_comparable(reports)
    base_path = Path(base_run).resolve() if base_run is not None else None
    if base_path is not None and base_path not in {p.resolve() for p, *_ in reports}:
        raise LeaderboardError(f"--base {base_run} is not one of the runs given")
    rows: dict[str, LeaderboardRow] = {}
    for path, labels, rep, _ in reports:
        method = labels.get("method") or path.name
        base = labels.get("base")
        row = rows.setdefault(method, LeaderboardRow(method, labels.get("layer", ""), base,
                                                     is_base=base is not None and method == base))
        split = str(rep.get("split"))
        if split in row.cells:
            raise LeaderboardError(f"two runs for method {method!r} on {split}: {row.cells[split].run_dir} and {path}; "
                                   "label them apart (studybench label RUN method=...)")
        row.cells[split] = Cell(str(path), rep["par_at_k"], rep["sub_at_k"], health=rep["health"])
    for row in rows.values():
        for split, cell in row.cells.items():
            ref = _reference(rows, row, split, base_path)
            if ref is not None and ref is not cell:
                cell.delta_sub = round(cell.sub["mean"] - ref.sub["mean"], 4)
                cell.ref_complete = ref.complete
                if significance:
                    cell.significance = delta_significance(ref.run_dir, cell.run_dir, scoring=scoring,
                                                           resamples=resamples, seed=seed, level=level)
    ordered = sorted(rows.values(), key=lambda r: (not r.is_base, _first(rows, r.layer), r.layer, r.method))
    k = reports[0][2]["k"]
    splits = [s for s in SPLITS if any(s in r.cells for r in ordered)]
    splits += sorted({s for r in ordered for s in r.cells} - set(splits))
    return {"k": k, "seeds": reports[0][2]["seeds"], "splits": splits, "rows": ordered,
            "significance": {"resamples": resamples, "seed": seed, "level": level, "unit": "parent",
                             "test": "exact paired sign-flip test over parents"} if significance else None,
            "health": healths}


def delta_significance(base_run: Path | str, run: Path | str, *, scoring: str | None = None, resamples: int = 10_000,
                       seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Paired tests of ``run`` against ``base_run`` with the parent as the unit (see the module docstring).

    Args:
        base_run, run: run directories over the same parents, k and seeds.
        scoring: as in :func:`studybench.report.build_report`.
        resamples, seed, level: of the paired bootstrap over parents; ``1 - level`` is the tests'
            significance level.

    Returns:
        ``{"unit": "parent", "parents": n, "test", "alpha", "delta_par": {...}, "delta_sub": {...},
        "par_significant", "sub_significant"}``; each delta: ``observed``, ``lo``, ``hi`` (points),
        ``p`` (two-sided sign-flip test), ``p_base_better``, ``p_run_better`` (one-sided), and
        ``parents_better``, ``parents_worse``, ``parents_tied`` (the run against the base, per parent).
        Changed in issue 24: ``mcnemar_p`` (per seed) and ``mcnemar_significant`` are gone, and
        ``sub_significant`` now follows the sign-flip test (it was the CI excluding 0).

    Raises:
        LeaderboardError: the two runs are over different parents or seeds.
        studybench.analysis.paired.AnalysisExtraMissing: numpy or scipy is missing.
    """
    from studybench.analysis.paired import paired_bootstrap_diff, ratio_statistic
    from studybench.analysis.signflip import sign_flip_test, unit_directions

    a, b = parent_outcomes(base_run, scoring), parent_outcomes(run, scoring)
    if a["parents"] != b["parents"] or a["seeds"] != b["seeds"]:
        raise LeaderboardError(f"{run} and {base_run} are not over the same parents and seeds; no Δ is reported")
    seeds, n = a["seeds"], len(a["parents"])
    alpha = 1.0 - level

    def counts(o: dict[str, Any], key: str) -> list[tuple[int, int]]:
        """Per parent: (solved, items) summed over seeds; items = seeds (Par@k) or sub-problems x seeds (Sub@k)."""
        return [(sum(int(o["per_seed"][s][key][i]) for s in seeds),
                 len(seeds) * (1 if key == "solved" else o["sub_problems"][i])) for i in range(n)]

    out: dict[str, Any] = {"unit": "parent", "parents": n, "test": "exact paired sign-flip test over parents",
                           "alpha": round(alpha, 6)}
    for name, key in (("delta_par", "solved"), ("delta_sub", "subs_solved")):
        ca, cb = counts(a, key), counts(b, key)
        ci = paired_bootstrap_diff(ca, cb, ratio_statistic, resamples=resamples, seed=seed, level=level)
        diffs = [y[0] - x[0] for x, y in zip(ca, cb, strict=True)]
        test, way = sign_flip_test(diffs), unit_directions(diffs)
        out[name] = {"observed": round(100 * ci.observed, 4), "lo": round(100 * ci.lo, 4), "hi": round(100 * ci.hi, 4),
                     "p": test.p_value, "p_base_better": test.p_a_better, "p_run_better": test.p_b_better,
                     "parents_better": way.b_better, "parents_worse": way.a_better, "parents_tied": way.tied}
    out["par_significant"] = out["delta_par"]["p"] < alpha
    out["sub_significant"] = out["delta_sub"]["p"] < alpha
    return out


def _first(rows: dict[str, LeaderboardRow], layer: str) -> int:
    return next(i for i, r in enumerate(rows.values()) if r.layer == layer)


def _reference(rows: dict[str, LeaderboardRow], row: LeaderboardRow, split: str, base_path: Path | None) -> Cell | None:
    if base_path is not None:
        for r in rows.values():
            c = r.cells.get(split)
            if c is not None and Path(c.run_dir).resolve() == base_path:
                return c
        return None
    if row.base is None:
        return None
    for r in rows.values():
        if r.is_base and r.base == row.base and split in r.cells:
            return r.cells[split]
    return None


def _check_comparable(reports: list[tuple[Path, dict[str, str], dict[str, Any], Any]]) -> None:
    """Refuse runs whose k or seeds differ anywhere in the table, or runs of one split over different items (naming which run differs in what)."""
    ks = {rep["k"] for _, _, rep, _ in reports}
    if len(ks) > 1:
        raise LeaderboardError("the runs use different k: " + _who(reports, lambda rep, man: f"k={rep['k']}"))
    seeds = {tuple(rep["seeds"]) for _, _, rep, _ in reports}
    if len(seeds) > 1:
        raise LeaderboardError("the runs use different seeds: " + _who(reports, lambda rep, man: f"seeds={rep['seeds']}"))
    by_split: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
    for _, _, rep, man in reports:
        by_split.setdefault(str(rep["split"]), set()).add((man.split.sha256, tuple(p.uid for p in man.parents)))
    for split, keys in by_split.items():
        if len(keys) > 1:
            same = [(p, rep, man) for p, _, rep, man in reports if str(rep["split"]) == split]
            what = "; ".join(f"{p}: sha256 {man.split.sha256[:12]}, {plural(len(man.parents), 'parent')}" for p, _, man in same)
            raise LeaderboardError(f"the {split} runs are not over the same items (test-set file or selection): {what}")


def _who(reports: list[tuple[Path, dict[str, str], dict[str, Any], Any]], fmt: Any) -> str:
    return "; ".join(f"{p}: {fmt(rep, man)}" for p, _, rep, man in reports)


# ------------------------------------------------------------------------------------------ render


def _num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _pm(stat: dict[str, Any]) -> str:
    std = stat.get("std")
    return _num(stat["mean"]) + ("" if std is None else f" ± {std:.2f}")


def _best(board: dict[str, Any]) -> dict[tuple[str, str], float]:
    """The best value of each column (split, metric), for bold."""
    best: dict[tuple[str, str], float] = {}
    for split in board["splits"]:
        for metric in ("par", "sub", "delta"):
            vals = [_value(c, metric) for r in board["rows"] if (c := r.cells.get(split)) is not None and _sound(c, metric)]
            vals = [v for v in vals if v is not None]
            if vals:
                best[(split, metric)] = max(vals)
    return best


def _marks(cell: Cell) -> str:
    sig = cell.significance or {}
    return ("†" if sig.get("sub_significant") else "") + ("‡" if sig.get("par_significant") else "")


def _footnote(board: dict[str, Any]) -> str:
    sig = board.get("significance")
    if not sig:
        return ""
    k, alpha = board["k"], 1.0 - sig["level"]
    return (f"† ΔSub@{k}, ‡ ΔPar@{k} significant at {alpha:.0%} (two-sided exact paired sign-flip test over parents: "
            f"each parent one observation, its seeds and sub-problems summed); {sig['level']:.0%} paired bootstrap CIs "
            f"over parents ({plural(sig['resamples'], 'resample', grouped=True)}, seed {sig['seed']}) in the JSON output.")


def _sound(cell: Cell, metric: str) -> bool:
    """The value is built on complete runs only (an incomplete one is marked and never the column's best)."""
    return cell.complete and (metric != "delta" or cell.ref_complete)


def _flag(text: str, cell: Cell, metric: str) -> str:
    return text if _sound(cell, metric) else text + INCOMPLETE_MARK


def _name(row: LeaderboardRow) -> str:
    return row.method + (" (incomplete)" if any(not c.complete for c in row.cells.values()) else "")


def _health_notes(board: dict[str, Any]) -> list[str]:
    """The footnote lines of incomplete and unreadable runs (empty when every run is complete)."""
    return health_footnote(board.get("health") or [])


def _value(cell: Cell, metric: str) -> float | None:
    return {"par": cell.par["mean"], "sub": cell.sub["mean"], "delta": cell.delta_sub}[metric]


def _table(board: dict[str, Any], bold: Any) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Header and (layer, cells) rows, each value passed through ``bold(text, is_best)``."""
    k = board["k"]
    header = ["Method"]
    for split in board["splits"]:
        name = split_title(split)
        header += [f"{name} Par@{k}", f"{name} Sub@{k}", f"{name} ΔSub@{k}"]
    best = _best(board)
    out: list[tuple[str, list[str]]] = []
    for r in board["rows"]:
        cells = [_name(r)]
        for split in board["splits"]:
            c = r.cells.get(split)
            if c is None:
                cells += ["–", "–", "–"]
                continue
            for metric, text in (("par", _pm(c.par)), ("sub", _pm(c.sub)), ("delta", _num(c.delta_sub, signed=True) + _marks(c))):
                v = _value(c, metric)
                cells.append(bold(text if v is None else _flag(text, c, metric), v is not None and v == best.get((split, metric)) and _sound(c, metric)
                                  and len(board["rows"]) > 1))
        out.append(("base models" if r.is_base else r.layer, cells))
    return header, out


def render_leaderboard(board: dict[str, Any], fmt: str = "markdown") -> str:
    """The leaderboard as Markdown, LaTeX (booktabs), CSV, JSON or one self-contained HTML page.

    Args:
        board: from :func:`build_leaderboard`.
        fmt: one of :data:`FORMATS`.

    Returns:
        The text (best value per column in bold in Markdown, LaTeX and HTML).

    Raises:
        ValueError: an unknown format.
        studybench.analysis.paired.AnalysisExtraMissing: ``html`` without jinja2 or matplotlib.
    """
    if fmt == "json":
        return json.dumps(_as_json(board), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        return _csv(board)
    if fmt == "markdown":
        return _markdown(board)
    if fmt == "latex":
        return _latex(board)
    if fmt == "html":
        return _html(board)
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def _as_json(board: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for r in board["rows"]:
        rows.append({"method": r.method, "layer": r.layer, "base": r.base, "is_base": r.is_base,
                     "complete": all(c.complete for c in r.cells.values()),
                     "cells": {s: {"run_dir": c.run_dir, "par_at_k": c.par, "sub_at_k": c.sub, "delta_sub_at_k": c.delta_sub,
                                   "significance": c.significance, "complete": c.complete,
                                   "delta_against_complete_run": c.ref_complete, "health": c.health}
                               for s, c in r.cells.items()}})
    return {"k": board["k"], "seeds": board["seeds"], "splits": board["splits"], "rows": rows,
            "significance": board.get("significance"),
            "runs": [{"run_dir": run, **h} for run, h in board.get("health") or []]}


def _csv(board: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    head = ["method", "layer", "base", "is_base"]
    for s in board["splits"]:
        head += [f"{s}_par_mean", f"{s}_par_std", f"{s}_sub_mean", f"{s}_sub_std", f"{s}_delta_sub"]
    head += [f"{s}_{x}" for s in board["splits"] for x in ("complete", "delta_against_complete_run")] + ["health"]
    w.writerow(head)
    for r in board["rows"]:
        line: list[Any] = [r.method, r.layer, r.base or "", r.is_base]
        for s in board["splits"]:
            c = r.cells.get(s)
            line += ["", "", "", "", ""] if c is None else [c.par["mean"], c.par.get("std"), c.sub["mean"], c.sub.get("std"),
                                                          "" if c.delta_sub is None else c.delta_sub]
        for s in board["splits"]:
            c = r.cells.get(s)
            line += ["", ""] if c is None else [c.complete, "" if c.delta_sub is None else c.ref_complete]
        line.append("; ".join(f"{c.run_dir}: {health_status(c.health)}" for c in r.cells.values() if not c.complete) or "complete")
        w.writerow(line)
    for run, h in board.get("health") or []:  # unreadable runs: a row with no numbers
        if not h.get("readable", True):
            w.writerow([run, "", "", ""] + [""] * (7 * len(board["splits"])) + [f"{run}: {health_status(h)}"])
    return buf.getvalue()


def _markdown(board: dict[str, Any]) -> str:
    header, rows = _table(board, lambda t, b: f"**{t}**" if b else t)
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    layer = None
    for group, cells in rows:
        if group != layer and group:
            lines.append("| *" + md_cell(group) + "* |" + " |" * (len(header) - 1))
        layer = group
        lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    seeds = board["seeds"]
    lines += ["", f"Mean ± sample std over {plural(len(seeds), 'seed')} ({', '.join(map(str, seeds))}); "
              f"ΔSub@{board['k']} against each method's base model run (best per column in bold)."]
    if _footnote(board):
        lines.append(_footnote(board))
    lines += ["", "Run health:", "", *health_table_markdown(board.get("health") or [])]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(text: str) -> str:
    return ("".join(_LATEX_SPECIAL.get(ch, ch) for ch in text).replace("±", r"$\pm$").replace("Δ", r"$\Delta$")
            .replace("†", r"$^{\dagger}$").replace("‡", r"$^{\ddagger}$"))


def _latex(board: dict[str, Any]) -> str:
    header, rows = _table(board, lambda t, b: ("\x00B" + t + "\x00E") if b else t)
    n = len(header)
    out = [r"\begin{tabular}{l" + "r" * (n - 1) + "}", r"\toprule"]
    out.append(" & ".join(_tex(h) for h in header) + r" \\")
    out.append(r"\midrule")
    layer = None
    for group, cells in rows:
        if group != layer and group:
            if layer is not None:
                out.append(r"\midrule")
            out.append(r"\multicolumn{" + str(n) + r"}{l}{\textit{" + _tex(group) + r"}} \\")
        layer = group
        out.append(" & ".join(_tex(c).replace("\x00B", r"\textbf{").replace("\x00E", "}") for c in cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    if _footnote(board):
        out.append("% " + _footnote(board))
    out += ["", *health_table_latex(board.get("health") or [])]
    return "\n".join(out) + "\n"


def _html(board: dict[str, Any]) -> str:
    """The page: the table (escaped by Jinja2's autoescape) and a grouped bar chart of Sub@k (inline SVG)."""
    import importlib.util

    from studybench.analysis.paired import AnalysisExtraMissing

    missing = [m for m in ("jinja2", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        raise AnalysisExtraMissing(f"the HTML leaderboard needs the 'analysis' extra (missing {', '.join(missing)}): "
                                   "pip install 'studybench[analysis]'")
    import jinja2

    from studybench.analysis.svgplot import bars_svg

    _, rows = _table(board, lambda t, b: (t, b))
    k, several = board["k"], len(board["seeds"]) > 1
    methods = [_name(r) for r in board["rows"]]
    series = [(split_title(s), [c.sub["mean"] if (c := r.cells.get(s)) else None for r in board["rows"]],
               [c.sub.get("std") if (c := r.cells.get(s)) else None for r in board["rows"]] if several else None)
              for s in board["splits"]]
    plot = bars_svg(methods, series, title=f"Sub@{k} per method and split" + (" (mean ± 1 std over seeds)" if several else ""),
                    label=f"Sub@{k} per method and split", salt="leaderboard")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("leaderboard.html.j2").render(
        k=k, seeds=board["seeds"], splits=[split_title(s) for s in board["splits"]],
        rows=[(group, [(c, False) if isinstance(c, str) else c for c in cells]) for group, cells in rows],
        footnote=_footnote(board), plot=jinja2.utils.markupsafe.Markup(plot),
        health=[health_cells(run, h) for run, h in board.get("health") or []], health_header=HEALTH_HEADER,
        health_notes=_health_notes(board))
