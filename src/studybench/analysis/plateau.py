"""The Compute Plateau (paper Figure 2, Appendix I): Sub@k or Par@k of a method's snapshots against
the GPU-hours spent, and where the gains stop.

Input is a CSV with one row per evaluated snapshot run (columns ``method``, ``seed``, ``gpu_hours``,
``run_dir``; others are ignored)::

    method,seed,gpu_hours,run_dir
    base,0,,runs/qwen3-8b
    GEPA,0,2.5,runs/gepa-s0-step100
    GEPA,0,5.0,runs/gepa-s0-step200
    GEPA,1,2.6,runs/gepa-s1-step100
    ...

- ``seed`` is the method's (training) seed: each seed is one series of snapshots. The ``n``-th
  snapshot of a method is the ``n``-th run of each of its seeds in order of ``gpu_hours`` (every seed
  needs the same number), plotted at the mean of their ``gpu_hours`` (cumulative).
- ``run_dir`` is a run directory (``studybench eval``), relative to the CSV's folder. Its value is the
  report's mean over the run's own (evaluation) seeds (computed, unrounded, from the verdicts
  :func:`studybench.report.build_report` uses); the snapshot's value is the mean and sample std of
  that over the method's seeds.
- Rows whose method is ``base`` are the base model's runs (``gpu_hours`` may be empty): their mean
  is the reference level. All runs must be over the same parents and k.

The detector (:func:`detect_plateau`) compares each snapshot with the best earlier one by a paired
bootstrap over parents: each parent's outcome (Sub@k: sub-problems solved within k attempts; Par@k:
whether one attempt solves them all; :func:`studybench.report.build.parent_outcomes`) is averaged
over the method's seeds and the runs' evaluation seeds, parents are resampled with replacement, and
the metric of both snapshots is recomputed on each resample (Sub@k as solved over total
sub-problems). A gain is significant when the lower bound of its 95% percentile interval is above
zero. The plateau is the last snapshot with a significant gain (the first snapshot when there is
none).

An incomplete run (:func:`studybench.report.run_health`) is refused unless ``allow_incomplete``; then
the snapshots it enters say ``complete: false`` and the figure marks them with a red cross.

Detection needs numpy and the figure matplotlib (the ``analysis`` extra); both are imported lazily.
"""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.escaping import plural
from studybench.files import atomic_write_text, read_user_text
from studybench.report import load_run_report, require_complete
from studybench.report.build import parent_outcomes

__all__ = ["COLUMNS", "METRICS", "MethodSeries", "PlateauError", "Snapshot", "SnapshotRow", "detect_plateau",
           "plot_plateau", "read_snapshots", "snapshot_scores"]

COLUMNS = ("method", "seed", "gpu_hours", "run_dir")
METRICS = {"sub": "sub_at_k", "par": "par_at_k"}
BASE = "base"
"""The method name of the base model's rows."""


class PlateauError(ValueError):
    """A snapshots file or a set of runs that cannot be one plateau analysis (the message says where)."""


@dataclass(frozen=True)
class SnapshotRow:
    """One row of the snapshots CSV: a run of ``method`` (seed ``seed``) after ``gpu_hours``."""

    method: str
    seed: str
    gpu_hours: float | None
    run_dir: Path
    line: int


@dataclass
class Snapshot:
    """One snapshot of a method: its value per seed, mean, std and per-parent outcomes pooled over seeds.

    ``numer[p] / denom[p]`` is parent p's outcome (``denom`` is its sub-problem count for Sub@k, 1 for
    Par@k); ``100 * sum(numer) / sum(denom)`` is ``mean``. ``complete``: every run of the snapshot is
    complete (else its value is a lower bound).
    """

    index: int
    gpu_hours: float
    per_seed: dict[str, float]
    mean: float
    std: float | None
    runs: list[str]
    numer: list[float]
    denom: list[float]
    complete: bool = True


@dataclass
class MethodSeries:
    """A method's snapshots in order of GPU-hours."""

    method: str
    seeds: list[str]
    snapshots: list[Snapshot] = field(default_factory=list)


def _err(path: Path, line: int, column: str | None, msg: str) -> PlateauError:
    where = f"{path}, line {line}" + (f", column {column}" if column else "")
    return PlateauError(f"{where}: {msg}")


def read_snapshots(path: Path | str) -> list[SnapshotRow]:
    """Read a snapshots CSV (columns :data:`COLUMNS`; ``run_dir`` relative to the CSV's folder).

    Args:
        path: the CSV file.

    Returns:
        Its rows, in file order (blank lines skipped).

    Raises:
        studybench.files.InputFileError: the file cannot be read or is not UTF-8.
        PlateauError: a missing column, an empty method or seed, a ``gpu_hours`` that is not a finite
            number >= 0 (empty is allowed for ``base`` rows only), a ``run_dir`` that is not a run
            directory, two rows for one (method, seed, gpu_hours), or no method rows; the message
            names the file, line and column.
    """
    path = Path(path)
    text = read_user_text(path)
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[SnapshotRow] = []
    seen: dict[tuple[str, str, float | None], int] = {}
    for record in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in record):
            continue
        if header is None:
            header = [c.strip().lower() for c in record]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise _err(path, line, None, f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                           f"(the header needs {', '.join(COLUMNS)})")
            continue
        cells = {name: (record[i].strip() if i < len(record) else "") for i, name in enumerate(header)}
        method, seed = cells["method"], cells["seed"]
        for col in ("method", "seed", "run_dir"):
            if not cells[col]:
                raise _err(path, line, col, "empty")
        hours: float | None
        raw = cells["gpu_hours"]
        if raw == "" and method == BASE:
            hours = None
        else:
            try:
                hours = float(raw)
            except ValueError:
                raise _err(path, line, "gpu_hours", f"not a number: {raw!r}") from None
            if not math.isfinite(hours) or hours < 0:
                raise _err(path, line, "gpu_hours", f"must be a finite number >= 0, got {raw!r}")
        run_dir = Path(cells["run_dir"])
        if not run_dir.is_absolute():
            run_dir = path.parent / run_dir
        if not (run_dir / "manifest.json").is_file():
            raise _err(path, line, "run_dir", f"{run_dir} is not a run directory (no manifest.json)")
        key = (method, seed, hours)
        if key in seen:
            raise _err(path, line, None, f"a second run for method {method!r}, seed {seed}, gpu_hours {raw} "
                       f"(the first is on line {seen[key]})")
        seen[key] = line
        rows.append(SnapshotRow(method, seed, hours, run_dir, line))
    if header is None:
        raise PlateauError(f"{path}: empty (the header needs {', '.join(COLUMNS)})")
    if not any(r.method != BASE for r in rows):
        raise PlateauError(f"{path}: no snapshot rows (only the base model's, or none)")
    return rows


def _check_same_items(infos: list[tuple[Path, dict[str, Any]]]) -> None:
    first, ref = infos[0]
    for run, info in infos[1:]:
        if info["k"] != ref["k"]:
            raise PlateauError(f"{run} uses k={info['k']} but {first} k={ref['k']}: all runs need the same k")
        if info["parents"] != ref["parents"]:
            raise PlateauError(f"{run} is not over the same parents as {first} ({len(info['parents'])} vs "
                               f"{plural(len(ref['parents']), 'parent')}, or others): all runs need the same items")


def snapshot_scores(rows: list[SnapshotRow], metric: str = "sub", *, base: Path | str | None = None,
                    scoring: str | None = None, allow_incomplete: bool = False) -> dict[str, Any]:
    """Each method's snapshots with their value (mean ± std over seeds) and per-parent outcomes.

    Args:
        rows: from :func:`read_snapshots`.
        metric: ``"sub"`` (Sub@k) or ``"par"`` (Par@k).
        base: a base model run; its level replaces that of the ``base`` rows.
        scoring: ``strict`` or ``liberal`` (default: each run's own, as in its report).
        allow_incomplete: accept incomplete runs (marked); default: refuse them.

    Returns:
        ``{"metric", "k", "methods": {name: MethodSeries}, "base": {"mean", "std", "runs", "complete"} or
        None, "incomplete": [run...], "health": {run: health}}`` (``incomplete``: runs whose report is
        not complete, so their scores are a lower bound; ``health``: :func:`studybench.report.run_health`
        of every run).

    Raises:
        PlateauError: an unknown metric; runs over different items or k; seeds of a method with
            different numbers of snapshots.
        studybench.report.IncompleteRunError: an unreadable run, or an incomplete one without ``allow_incomplete``.
    """
    if metric not in METRICS:
        raise PlateauError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    base_runs = [Path(base)] if base is not None else [r.run_dir for r in rows if r.method == BASE]
    runs = list(dict.fromkeys([*base_runs, *(r.run_dir for r in rows if r.method != BASE)]))
    health: dict[str, dict[str, Any]] = {}
    for run in runs:
        health[str(run)] = load_run_report(run, scoring)[1]
        require_complete(run, health[str(run)], allow_incomplete)
    infos = {run: parent_outcomes(run, scoring) for run in runs}
    _check_same_items([(run, infos[run]) for run in runs])
    k = infos[runs[0]]["k"]
    denom = [float(n) for n in infos[runs[0]]["sub_problems"]] if metric == "sub" else [1.0] * len(infos[runs[0]]["parents"])
    outcomes = {run: _outcomes(infos[run], metric) for run in runs}
    base_level = None
    if base_runs:
        vals = [_value(outcomes[r], denom) for r in base_runs]
        base_level = {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1 else None,
                      "runs": [str(r) for r in base_runs], "complete": all(health[str(r)]["complete"] for r in base_runs)}
    methods: dict[str, MethodSeries] = {}
    by_method: dict[str, dict[str, list[SnapshotRow]]] = {}
    for r in rows:
        if r.method != BASE:
            by_method.setdefault(r.method, {}).setdefault(r.seed, []).append(r)
    for name, seeds in by_method.items():
        counts = {s: len(v) for s, v in seeds.items()}
        if len(set(counts.values())) > 1:
            what = ", ".join(f"seed {s}: {n}" for s, n in counts.items())
            raise PlateauError(f"method {name!r}: its seeds have different numbers of snapshots ({what}); "
                               "every seed needs one run per snapshot")
        for v in seeds.values():
            v.sort(key=lambda r: (r.gpu_hours, r.line))
        series = MethodSeries(name, list(seeds))
        for i in range(next(iter(counts.values()))):
            snap_rows = [v[i] for v in seeds.values()]
            per_seed = {r.seed: _value(outcomes[r.run_dir], denom) for r in snap_rows}
            numer = [statistics.fmean(outcomes[r.run_dir][p] for r in snap_rows) for p in range(len(denom))]
            vals = list(per_seed.values())
            series.snapshots.append(Snapshot(
                index=i, gpu_hours=statistics.fmean(float(r.gpu_hours or 0.0) for r in snap_rows), per_seed=per_seed,
                mean=statistics.fmean(vals), std=statistics.stdev(vals) if len(vals) > 1 else None,
                runs=[str(r.run_dir) for r in snap_rows], numer=numer, denom=denom,
                complete=all(health[str(r.run_dir)]["complete"] for r in snap_rows)))
        methods[name] = series
    incomplete = [str(r) for r in runs if not health[str(r)]["complete"]]
    return {"metric": metric, "k": k, "methods": methods, "base": base_level, "incomplete": incomplete, "health": health}


def _outcomes(info: dict[str, Any], metric: str) -> list[float]:
    """Each parent's outcome in one run, the mean over the run's own seeds (sub-problems solved, or 0/1 solved)."""
    key = "subs_solved" if metric == "sub" else "solved"
    seeds = list(info["per_seed"].values())
    return [statistics.fmean(float(s[key][p]) for s in seeds) for p in range(len(info["parents"]))]


def _value(numer: list[float], denom: list[float]) -> float:
    return 100.0 * sum(numer) / sum(denom)


def _bootstrap_gain(new: Snapshot, old: Snapshot, resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """The percentile interval of ``new - old`` (metric in percent) over parents resampled with replacement."""
    try:
        import numpy as np
    except ImportError:
        raise PlateauError("the plateau detector needs numpy: pip install 'studybench[analysis]'") from None
    rng = np.random.default_rng(seed)
    a, b, d = np.asarray(new.numer), np.asarray(old.numer), np.asarray(new.denom)
    n = len(d)
    out = np.empty(resamples)
    chunk = max(1, min(resamples, 2_000_000 // max(n, 1)))
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=m).astype(float)  # how often each parent is drawn
        out[start:start + m] = 100.0 * (w @ a - w @ b) / (w @ d)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(out, [tail, 1.0 - tail])
    return float(lo), float(hi)


def detect_plateau(scores: dict[str, Any], *, resamples: int = 10_000, seed: int = 0,
                   confidence: float = 0.95) -> dict[str, dict[str, Any]]:
    """Per method: the last snapshot whose gain over the best earlier snapshot is significant.

    Each snapshot after the first is compared with the best earlier one (the earliest of equal
    bests) by a paired bootstrap over parents (the same resamples, from ``seed``, for every
    comparison); the gain is significant when the interval's lower bound is above 0.

    Args:
        scores: from :func:`snapshot_scores`.
        resamples: bootstrap resamples per comparison.
        seed: the bootstrap's random seed.
        confidence: of the percentile interval.

    Returns:
        ``{method: {"snapshots": [{"index", "gpu_hours", "mean", "std", "compared_to", "gain",
        "ci_low", "ci_high", "significant", "complete"}...], "plateau", "plateau_gpu_hours", "total_gpu_hours",
        "share_after" (of the total budget spent after the plateau; None when the total is 0),
        "best", "best_value", "final_value", "best_to_final" (final - best, <= 0)}}``; values in
        percent, rounded to 4 places.

    Raises:
        PlateauError: ``resamples`` < 1 or ``confidence`` not in (0, 1).
    """
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise PlateauError(f"resamples must be an integer >= 1, got {resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise PlateauError(f"confidence must be between 0 and 1, got {confidence!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, series in scores["methods"].items():
        snaps = series.snapshots
        rows: list[dict[str, Any]] = []
        plateau = 0
        for i, s in enumerate(snaps):
            row: dict[str, Any] = {"index": i, "gpu_hours": round(s.gpu_hours, 4), "mean": round(s.mean, 4),
                                   "std": None if s.std is None else round(s.std, 4), "compared_to": None,
                                   "gain": None, "ci_low": None, "ci_high": None, "significant": False,
                                   "complete": s.complete}
            if i > 0:
                best = max(range(i), key=lambda j: (snaps[j].mean, -j))
                lo, hi = _bootstrap_gain(s, snaps[best], resamples, seed, confidence)
                row.update(compared_to=best, gain=round(s.mean - snaps[best].mean, 4), ci_low=round(lo, 4),
                           ci_high=round(hi, 4), significant=lo > 0)
                if lo > 0:
                    plateau = i
            rows.append(row)
        best_i = max(range(len(snaps)), key=lambda j: (snaps[j].mean, -j))
        total = snaps[-1].gpu_hours
        at = snaps[plateau].gpu_hours
        out[name] = {
            "snapshots": rows, "plateau": plateau, "plateau_gpu_hours": round(at, 4), "total_gpu_hours": round(total, 4),
            "share_after": round((total - at) / total, 4) if total > 0 else None,
            "best": best_i, "best_value": round(snaps[best_i].mean, 4), "final_value": round(snaps[-1].mean, 4),
            "best_to_final": round(snaps[-1].mean - snaps[best_i].mean, 4),
        }
    return out


def _figure(scores: dict[str, Any], detection: dict[str, dict[str, Any]] | None) -> Any:
    from matplotlib.figure import Figure

    methods = list(scores["methods"].values())
    ncols = min(len(methods), 3)
    nrows = math.ceil(len(methods) / ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.4 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    label = f"{'Sub' if scores['metric'] == 'sub' else 'Par'}@{scores['k']} (%)"
    base = scores.get("base")
    handles: dict[str, Any] = {}
    for ax, series in zip(axes.flat, methods, strict=False):
        xs = [s.gpu_hours for s in series.snapshots]
        ys = [s.mean for s in series.snapshots]
        if len(series.seeds) > 1:
            sd = [s.std or 0.0 for s in series.snapshots]
            handles["±1 std over seeds"] = ax.fill_between(
                xs, [y - e for y, e in zip(ys, sd, strict=True)], [y + e for y, e in zip(ys, sd, strict=True)],
                color="C0", alpha=0.2, linewidth=0)
        (handles["mean over seeds"],) = ax.plot(xs, ys, color="C0", marker="o", markersize=4)
        bad = [(x, y) for x, y, s in zip(xs, ys, series.snapshots, strict=True) if not s.complete]
        if bad:
            (handles["incomplete run (a lower bound)"],) = ax.plot([x for x, _ in bad], [y for _, y in bad], marker="x",
                                                                    markersize=10, color="red", linestyle="none")
        if base is not None:
            handles[f"base model ({base['mean']:.1f})"] = ax.axhline(base["mean"], color="0.35", linestyle="--",
                                                                     linewidth=1.2)
        if detection is not None and series.method in detection:
            p = detection[series.method]["plateau"]
            ax.axvline(xs[p], color="C3", linestyle=":", linewidth=1.2)
            (handles["plateau (last significant gain)"],) = ax.plot([xs[p]], [ys[p]], marker="*", markersize=13,
                                                                     color="C3", linestyle="none")
            right = xs[p] > (xs[0] + xs[-1]) / 2  # keep the label inside the panel
            ax.annotate(f"{xs[p]:g} GPU-h", (xs[p], ys[p]), xytext=(-8 if right else 8, -14 if right else 6),
                        textcoords="offset points", ha="right" if right else "left", fontsize=8, color="C3")
        n = len(series.seeds)
        ax.set_title(f"{series.method} ({n} seed{'s' if n > 1 else ''})")
        ax.set_xlabel("cumulative GPU-hours")
        ax.grid(True, alpha=0.3)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=len(handles), fontsize=8,
               frameon=False)
    for ax in axes[:, 0]:
        ax.set_ylabel(label)
    for ax in list(axes.flat)[len(methods):]:
        ax.set_visible(False)
    return fig


def plot_plateau(scores: dict[str, Any], out_prefix: Path | str,
                 detection: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    """Write the plateau figure as ``PREFIX.png`` and ``PREFIX.svg`` (one panel per method).

    Each panel: the mean over seeds against cumulative GPU-hours, a ±1 std band, the base model's
    level as a dashed line and, given ``detection``, the plateau snapshot (a star and a dotted line).
    The SVG is byte-for-byte the same for the same input.

    Args:
        scores: from :func:`snapshot_scores`.
        out_prefix: the path of both files without their suffix.
        detection: from :func:`detect_plateau` (optional).

    Returns:
        The PNG and SVG paths.

    Raises:
        PlateauError: matplotlib is not installed.
        OSError: a file cannot be written.
    """
    try:
        import matplotlib
    except ImportError:
        raise PlateauError("the plateau figure needs matplotlib: pip install 'studybench[analysis]'") from None
    prefix = Path(out_prefix)
    png, svg = prefix.with_name(prefix.name + ".png"), prefix.with_name(prefix.name + ".svg")
    with matplotlib.rc_context({"svg.hashsalt": "studybench-plateau", "svg.fonttype": "path"}):
        fig = _figure(scores, detection)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=150, metadata={"Software": None})
        text = io.StringIO()
        fig.savefig(text, format="svg", metadata={"Date": None, "Creator": None})
    _write_bytes(png, buf.getvalue())
    atomic_write_text(svg, text.getvalue())
    return [png, svg]


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
