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

Significance of every Δ against a base run: a paired bootstrap over parents (seeded, 10,000
resamples, 95% percentile interval; :func:`studybench.analysis.paired.paired_bootstrap_diff`) of
ΔPar@k (per parent: solved, averaged over seeds) and ΔSub@k (per parent: sub-problems solved over
sub-problems, pooled over seeds), and McNemar's exact test on parent-level solved/unsolved pairs per
seed. A ΔSub@k whose interval excludes 0 is marked †; ‡ marks a Δ whose McNemar test is significant
at 5% in every seed.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.report import build_report
from studybench.report.build import parent_outcomes
from studybench.store import RunStore

__all__ = ["LeaderboardError", "LeaderboardRow", "build_leaderboard", "render_leaderboard", "FORMATS", "SPLITS"]

SPLITS = ("application", "transfer")
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
                      seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Collect runs into the Table 2 layout.

    Args:
        run_dirs: run directories, one per (method, split).
        base_run: a run every ΔSub@k of its split is measured against (default: per ``base`` label).
        scoring: ``strict`` or ``liberal`` (default: each run's own, as in its report).
        labels: per run directory (as given), labels that override the run's own for this table only
            (nothing is written).
        significance: test every Δ (needs the ``analysis`` extra; see the module docstring).
        resamples, seed, level: of the paired bootstrap.

    Returns:
        ``{"k", "seeds", "splits", "rows": [LeaderboardRow...]}``: base models' rows first, then by
        layer (in order of first appearance) and method.

    Raises:
        LeaderboardError: no runs; runs of one split over different items, k or seeds; two runs for
            one (method, split); a ``base_run`` that is not among the runs.
        studybench.analysis.paired.AnalysisExtraMissing: ``significance`` without the analysis extra.
        FileNotFoundError, ValueError: a run directory that cannot be read.
    """
    if not run_dirs:
        raise LeaderboardError("no run directories given")
    reports: list[tuple[Path, dict[str, str], dict[str, Any], Any]] = []
    for d in run_dirs:
        path = Path(d)
        store = RunStore(path)
        man = store.read_manifest()
        given = (labels or {}).get(str(d)) or (labels or {}).get(str(path)) or {}
        reports.append((path, {**man.labels, **given}, build_report(store, scoring), man))
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
        row.cells[split] = Cell(str(path), rep["par_at_k"], rep["sub_at_k"])
    for row in rows.values():
        for split, cell in row.cells.items():
            ref = _reference(rows, row, split, base_path)
            if ref is not None and ref is not cell:
                cell.delta_sub = round(cell.sub["mean"] - ref.sub["mean"], 4)
                if significance:
                    cell.significance = delta_significance(ref.run_dir, cell.run_dir, scoring=scoring,
                                                           resamples=resamples, seed=seed, level=level)
    ordered = sorted(rows.values(), key=lambda r: (not r.is_base, _first(rows, r.layer), r.layer, r.method))
    k = reports[0][2]["k"]
    splits = [s for s in SPLITS if any(s in r.cells for r in ordered)]
    splits += sorted({s for r in ordered for s in r.cells} - set(splits))
    return {"k": k, "seeds": reports[0][2]["seeds"], "splits": splits, "rows": ordered,
            "significance": {"resamples": resamples, "seed": seed, "level": level} if significance else None}


def delta_significance(base_run: Path | str, run: Path | str, *, scoring: str | None = None, resamples: int = 10_000,
                       seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Paired tests of ``run`` against ``base_run`` over the same parents (see the module docstring).

    Args:
        base_run, run: run directories over the same parents, k and seeds.
        scoring: as in :func:`studybench.report.build_report`.
        resamples, seed, level: of the paired bootstrap over parents.

    Returns:
        ``{"delta_par": {observed, lo, hi}, "delta_sub": {...}`` (points), ``"mcnemar_p": {seed: p}``,
        ``"sub_significant"``, ``"mcnemar_significant"``}.

    Raises:
        LeaderboardError: the two runs are over different parents or seeds.
        studybench.analysis.paired.AnalysisExtraMissing: numpy, scipy or statsmodels is missing.
    """
    from studybench.analysis.paired import AnalysisExtraMissing, paired_bootstrap_diff, ratio_statistic

    try:
        from statsmodels.stats.contingency_tables import mcnemar
    except ImportError:
        raise AnalysisExtraMissing("significance tests need the 'analysis' extra (statsmodels): "
                                   "pip install 'studybench[analysis]'") from None

    a, b = parent_outcomes(base_run, scoring), parent_outcomes(run, scoring)
    if a["parents"] != b["parents"] or a["seeds"] != b["seeds"]:
        raise LeaderboardError(f"{run} and {base_run} are not over the same parents and seeds; no Δ is reported")
    seeds, n = a["seeds"], len(a["parents"])

    def par(o: dict[str, Any]) -> list[float]:
        return [sum(o["per_seed"][s]["solved"][i] for s in seeds) / len(seeds) for i in range(n)]

    def sub(o: dict[str, Any]) -> list[tuple[int, int]]:
        return [(sum(o["per_seed"][s]["subs_solved"][i] for s in seeds), o["sub_problems"][i] * len(seeds))
                for i in range(n)]

    ci_par = paired_bootstrap_diff(par(a), par(b), resamples=resamples, seed=seed, level=level)
    ci_sub = paired_bootstrap_diff(sub(a), sub(b), ratio_statistic, resamples=resamples, seed=seed, level=level)
    ps: dict[str, float] = {}
    for s in seeds:
        xa, xb = a["per_seed"][s]["solved"], b["per_seed"][s]["solved"]
        table = [[sum(1 for i in range(n) if xa[i] and xb[i]), sum(1 for i in range(n) if xa[i] and not xb[i])],
                 [sum(1 for i in range(n) if not xa[i] and xb[i]), sum(1 for i in range(n) if not xa[i] and not xb[i])]]
        ps[str(s)] = 1.0 if table[0][1] + table[1][0] == 0 else float(mcnemar(table, exact=True).pvalue)

    def pts(ci: Any) -> dict[str, float]:
        return {"observed": round(100 * ci.observed, 4), "lo": round(100 * ci.lo, 4), "hi": round(100 * ci.hi, 4)}

    return {"delta_par": pts(ci_par), "delta_sub": pts(ci_sub), "mcnemar_p": ps,
            "sub_significant": ci_sub.lo > 0 or ci_sub.hi < 0,
            "mcnemar_significant": all(p < 0.05 for p in ps.values())}


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
    """Refuse runs of one split over different items, k or seeds (naming which run differs in what)."""
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
            what = "; ".join(f"{p}: sha256 {man.split.sha256[:12]}, {len(man.parents)} parents" for p, _, man in same)
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
            vals = [_value(c, metric) for r in board["rows"] if (c := r.cells.get(split)) is not None]
            vals = [v for v in vals if v is not None]
            if vals:
                best[(split, metric)] = max(vals)
    return best


def _marks(cell: Cell) -> str:
    sig = cell.significance or {}
    return ("†" if sig.get("sub_significant") else "") + ("‡" if sig.get("mcnemar_significant") else "")


def _footnote(board: dict[str, Any]) -> str:
    sig = board.get("significance")
    if not sig:
        return ""
    return (f"† the {sig['level']:.0%} paired bootstrap CI over parents ({sig['resamples']:,} resamples, seed "
            f"{sig['seed']}) of ΔSub@{board['k']} excludes 0; ‡ McNemar's exact test on parent-level solved/unsolved "
            "pairs is significant at 5% in every seed.")


def _value(cell: Cell, metric: str) -> float | None:
    return {"par": cell.par["mean"], "sub": cell.sub["mean"], "delta": cell.delta_sub}[metric]


def _table(board: dict[str, Any], bold: Any) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Header and (layer, cells) rows, each value passed through ``bold(text, is_best)``."""
    k = board["k"]
    header = ["Method"]
    for split in board["splits"]:
        name = split.capitalize()
        header += [f"{name} Par@{k}", f"{name} Sub@{k}", f"{name} ΔSub@{k}"]
    best = _best(board)
    out: list[tuple[str, list[str]]] = []
    for r in board["rows"]:
        cells = [r.method]
        for split in board["splits"]:
            c = r.cells.get(split)
            if c is None:
                cells += ["–", "–", "–"]
                continue
            for metric, text in (("par", _pm(c.par)), ("sub", _pm(c.sub)), ("delta", _num(c.delta_sub, signed=True) + _marks(c))):
                v = _value(c, metric)
                cells.append(bold(text, v is not None and v == best.get((split, metric)) and len(board["rows"]) > 1))
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
                     "cells": {s: {"run_dir": c.run_dir, "par_at_k": c.par, "sub_at_k": c.sub, "delta_sub_at_k": c.delta_sub,
                                   "significance": c.significance}
                               for s, c in r.cells.items()}})
    return {"k": board["k"], "seeds": board["seeds"], "splits": board["splits"], "rows": rows,
            "significance": board.get("significance")}


def _csv(board: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = ["method", "layer", "base", "is_base"]
    for s in board["splits"]:
        head += [f"{s}_par_mean", f"{s}_par_std", f"{s}_sub_mean", f"{s}_sub_std", f"{s}_delta_sub"]
    w.writerow(head)
    for r in board["rows"]:
        line: list[Any] = [r.method, r.layer, r.base or "", r.is_base]
        for s in board["splits"]:
            c = r.cells.get(s)
            line += ["", "", "", "", ""] if c is None else [c.par["mean"], c.par.get("std"), c.sub["mean"], c.sub.get("std"),
                                                          "" if c.delta_sub is None else c.delta_sub]
        w.writerow(line)
    return buf.getvalue()


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown(board: dict[str, Any]) -> str:
    header, rows = _table(board, lambda t, b: f"**{t}**" if b else t)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    layer = None
    for group, cells in rows:
        if group != layer and group:
            lines.append("| *" + _md_escape(group) + "* |" + " |" * (len(header) - 1))
        layer = group
        lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    seeds = board["seeds"]
    lines += ["", f"Mean ± sample std over {len(seeds)} seeds ({', '.join(map(str, seeds))}); "
              f"ΔSub@{board['k']} against each method's base model run (best per column in bold)."]
    if _footnote(board):
        lines.append(_footnote(board))
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
    methods = [r.method for r in board["rows"]]
    series = [(s.capitalize(), [c.sub["mean"] if (c := r.cells.get(s)) else None for r in board["rows"]],
               [c.sub.get("std") if (c := r.cells.get(s)) else None for r in board["rows"]] if several else None)
              for s in board["splits"]]
    plot = bars_svg(methods, series, title=f"Sub@{k} per method and split" + (" (mean ± 1 std over seeds)" if several else ""),
                    label=f"Sub@{k} per method and split", salt="leaderboard")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("leaderboard.html.j2").render(
        k=k, seeds=board["seeds"], splits=[s.capitalize() for s in board["splits"]],
        rows=[(group, [(c, False) if isinstance(c, str) else c for c in cells]) for group, cells in rows],
        footnote=_footnote(board), plot=jinja2.utils.markupsafe.Markup(plot))
