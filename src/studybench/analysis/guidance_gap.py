"""Guidance Gap (paper Table 4): how much a method's accuracy rises when each sub-problem comes with guidance.

For each method one *pair* of runs over the same items: a **solo** run (no guidance artefact) and a
**guided** run (the same method with ``--guidance``). Per method and metric (Par@k, Sub@k, percent,
by each run's report, :func:`studybench.report.build_report`):

* ``solo``, ``guided``: mean ± sample std over seeds;
* ``gap`` = guided - solo (docs/protocol.md: Guidance Gap = Acc_guided - Acc_solo), computed per seed and
  then mean ± std over seeds (its mean is exactly guided mean - solo mean; its std is the paired one).

**Headroom closed.** With a *base* pair (the base model, solo S_b and guided G_b, gap_b = G_b - S_b),
a method with solo accuracy S_m closes

    headroom_closed = 100 * (S_m - S_b) / gap_b      (percent of the base model's guidance gap)

i.e. how much of what guidance gives the base model the method's own, unguided improvement recovers
(0% = no better than the base model alone, 100% = as good as the base model with guidance; negative
when the method is worse than the base model). It uses the means over seeds and is ``None`` when
there is no base pair or gap_b <= 0 (guidance does not help the base model, so there is no headroom
to close). The base row closes 0% by definition. Read this way, the paper's "GEPA closes 7% of the
parent gap and 5% of the sub-problem gap" says GEPA's solo Par@k is S_b + 0.07 gap_b.

**Refusals** (:class:`GuidanceGapError`, one line naming the runs): a guided run whose manifest
records no guidance artefact, a solo run that has one, two runs over different items (test-set
sha256, parents and sub-problems, k, seeds) or of different models or other method artefacts
(system prompt, playbook), and runs scored differently (strict vs liberal) unless a scoring is given.
An incomplete or unreadable run is refused too (:class:`studybench.report.IncompleteRunError`) unless
``allow_incomplete``: then its row is marked in every format (``(incomplete)`` after the method, each
number followed by :data:`~studybench.report.INCOMPLETE_MARK`, a footnote saying why, ``complete``
false). Every format carries each run's health (:func:`studybench.report.run_health`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studybench.escaping import csv_writer, plural
from studybench.metrics import mean_std
from studybench.report import INCOMPLETE_MARK, load_run_report, md_cell, require_complete
from studybench.report.health import health_status, health_table_latex, health_table_markdown
from studybench.store import Manifest, RunStore

__all__ = ["FORMATS", "GuidanceGapError", "guidance_gap", "render_guidance_gap"]

FORMATS = ("md", "csv", "json", "latex")
"""Output formats of :func:`render_guidance_gap`."""

_METRICS = ("par", "sub")

RunPair = tuple[Path | str, Path | str]


class GuidanceGapError(ValueError):
    """A pair of runs that cannot be compared; the message names the runs and what differs."""


def _load(run: Path | str, scoring: str | None, k: int | None,
          allow_incomplete: bool = False) -> tuple[Path, Manifest, dict[str, Any]]:
    path = Path(run)
    rep, health = load_run_report(path, scoring, k)
    require_complete(path, health, allow_incomplete)
    assert rep is not None  # an unreadable run was refused
    return path, RunStore(path).read_manifest(), rep


def _digests(man: Manifest) -> dict[str, Any]:
    d = man.artefacts.get("digests")
    return d if isinstance(d, dict) else {}


def _same_items(a: tuple[Path, Manifest, dict[str, Any]], b: tuple[Path, Manifest, dict[str, Any]], *, check_k: bool) -> None:
    """Refuse two runs over different items, models or non-guidance artefacts, or scored differently."""
    (pa, ma, ra), (pb, mb, rb) = a, b
    what = f"{pa} and {pb}"
    if ma.split.sha256 and mb.split.sha256:
        if ma.split.sha256 != mb.split.sha256:
            raise GuidanceGapError(f"{what} are over different items: test-set sha256 {ma.split.sha256[:12]} vs {mb.split.sha256[:12]}")
    elif ma.split.name != mb.split.name:
        raise GuidanceGapError(f"{what} are over different items: test set {ma.split.name!r} vs {mb.split.name!r}")
    ia = [(p.uid, [s.id for s in p.subs]) for p in ma.parents]
    ib = [(p.uid, [s.id for s in p.subs]) for p in mb.parents]
    if ia != ib:
        diff = next((x for x, y in zip(ia, ib, strict=False) if x != y), None)
        first = diff[0] if diff is not None else (ia if len(ia) > len(ib) else ib)[min(len(ia), len(ib))][0]
        raise GuidanceGapError(f"{what} are over different items: parents differ ({len(ia)} vs {len(ib)}; first difference at {first!r})")
    if check_k and ma.k != mb.k:
        raise GuidanceGapError(f"{what} are over different items: k={ma.k} vs k={mb.k} (compare them at a common k with --k)")
    if sorted(ma.seeds) != sorted(mb.seeds):
        raise GuidanceGapError(f"{what} are over different items: seeds {ma.seeds} vs {mb.seeds}")
    if ma.backend.get("model") != mb.backend.get("model"):
        raise GuidanceGapError(f"{what} are of different models: {ma.backend.get('model')!r} vs {mb.backend.get('model')!r}")
    if ra["scoring_used"] != rb["scoring_used"]:
        raise GuidanceGapError(f"{what} are scored differently: {ra['scoring_used']} vs {rb['scoring_used']} (choose one with --scoring)")


def _pair(solo: Path | str, guided: Path | str, scoring: str | None, k: int | None,
          allow_incomplete: bool = False) -> tuple[Any, Any]:
    s, g = _load(solo, scoring, k, allow_incomplete), _load(guided, scoring, k, allow_incomplete)
    if not _digests(g[1]).get("guidance"):
        raise GuidanceGapError(f"guided run {g[0]} has no guidance artefact (its manifest records no guidance file; made without `eval --guidance`?)")
    if _digests(s[1]).get("guidance"):
        raise GuidanceGapError(f"solo run {s[0]} was made with guidance (its manifest records a guidance file); a solo run has none")
    _same_items(s, g, check_k=k is None)
    for art in ("system_prompt", "playbook"):
        if _digests(s[1]).get(art) != _digests(g[1]).get(art):
            raise GuidanceGapError(f"solo run {s[0]} and guided run {g[0]} use different {art.replace('_', ' ')} artefacts; "
                                   "a guidance gap compares one method with and without guidance")
    return s, g


def _name(s: tuple[Path, Manifest, dict[str, Any]], g: tuple[Path, Manifest, dict[str, Any]]) -> str:
    for _, man, _ in (s, g):
        if man.labels.get("method", "").strip():
            return man.labels["method"].strip()
    return s[0].resolve().name


def _row(name: str, s: Any, g: Any) -> dict[str, Any]:
    (ps, ms, rs), (pg, _, rg) = s, g
    row: dict[str, Any] = {"method": name, "solo_run": str(ps), "guided_run": str(pg), "k": rs["k"], "seeds": sorted(ms.seeds),
                           "scoring": rs["scoring_used"], "base": False,
                           "complete": bool(rs["health"]["complete"] and rg["health"]["complete"]),
                           "solo_health": rs["health"], "guided_health": rg["health"]}
    for m in _METRICS:
        solo = dict(zip(rs["seeds"], rs[f"{m}_at_k"]["per_seed"], strict=True))
        guided = dict(zip(rg["seeds"], rg[f"{m}_at_k"]["per_seed"], strict=True))
        seeds = row["seeds"]
        row[f"{m}_solo"] = mean_std([solo[x] for x in seeds]).to_dict()
        row[f"{m}_guided"] = mean_std([guided[x] for x in seeds]).to_dict()
        row[f"{m}_gap"] = mean_std([guided[x] - solo[x] for x in seeds]).to_dict()
    return row


def guidance_gap(
    pairs: Sequence[RunPair],
    base: RunPair | None = None,
    method_names: Sequence[str | None] | None = None,
    *,
    base_name: str | None = None,
    scoring: str | None = None,
    k: int | None = None,
    allow_incomplete: bool = False,
) -> list[dict[str, Any]]:
    """Table 4: solo, guided and gap for Par@k and Sub@k per method, and the share of the base model's headroom closed.

    Args:
        pairs: ``(solo_run_dir, guided_run_dir)`` per method.
        base: the base model's pair; its row comes first (once, also when it is one of ``pairs``) and
            every row gets ``headroom_closed_par`` / ``headroom_closed_sub`` (module docstring). All
            pairs must then be over the base pair's items.
        method_names: a name per pair (``None`` entries: the runs' manifest label ``method``, else the
            solo run's directory name).
        base_name: the base row's name (default as for the pairs).
        scoring: ``strict`` / ``liberal`` for every run (default: each run's own, which must agree).
        k: compare Par@k / Sub@k at this k (every run's k must be >= it; the runs' own k may differ).
        allow_incomplete: accept incomplete runs (their rows say ``complete: false``); default: refuse them.

    Returns:
        One dict per method: ``method``, ``solo_run``, ``guided_run``, ``k``, ``seeds``, ``scoring``,
        ``base`` (the base row), ``complete`` (both runs complete), ``solo_health`` /
        ``guided_health`` (:func:`studybench.report.run_health`), ``par_solo``, ``par_guided``,
        ``par_gap``, ``sub_solo``, ``sub_guided``, ``sub_gap`` (each ``{"mean", "std", "per_seed"}``,
        percent; gap per seed = guided - solo) and ``headroom_closed_par`` / ``headroom_closed_sub``
        (percent of the base model's gap, or ``None``).

    Raises:
        GuidanceGapError: a refused pair (module docstring); no pairs; ``method_names`` of the wrong length.
        studybench.report.IncompleteRunError: an unreadable run, or an incomplete one without ``allow_incomplete``.
        FileNotFoundError, ValueError: a run directory that cannot be read or reported.
    """
    if not pairs and base is None:
        raise GuidanceGapError("no pairs of runs given")
    names = list(method_names) if method_names is not None else [None] * len(pairs)
    if len(names) != len(pairs):
        raise GuidanceGapError(f"{len(names)} method names for {plural(len(pairs), 'pair')} of runs")
    loaded = [_pair(s, g, scoring, k, allow_incomplete) for s, g in pairs]
    rows = [_row(n or _name(s, g), s, g) for n, (s, g) in zip(names, loaded, strict=True)]
    if base is None:
        for r in rows:
            r["headroom_closed_par"] = r["headroom_closed_sub"] = None
        return rows
    bs, bg = _pair(base[0], base[1], scoring, k, allow_incomplete)
    key = (bs[0].resolve(), bg[0].resolve())
    at = next((i for i, (s, g) in enumerate(loaded) if (s[0].resolve(), g[0].resolve()) == key), None)
    if at is None:
        rows.insert(0, _row(base_name or _name(bs, bg), bs, bg))
    else:
        rows.insert(0, rows.pop(at))
        if base_name:
            rows[0]["method"] = base_name
    rows[0]["base"] = True
    for s, _ in loaded:
        _same_items(bs, s, check_k=k is None)
    b = rows[0]
    for r in rows:
        for m in _METRICS:
            gap = b[f"{m}_gap"]["mean"]
            share = 100.0 * (r[f"{m}_solo"]["mean"] - b[f"{m}_solo"]["mean"]) / gap if gap > 0 else None
            r[f"headroom_closed_{m}"] = None if share is None else round(share, 4)
    return rows


def _fmt(d: dict[str, Any], sign: bool = False, pm: str = "±") -> str:
    mean = f"{d['mean']:+.2f}" if sign else f"{d['mean']:.2f}"
    return mean if d["std"] is None else f"{mean} {pm} {d['std']:.2f}"


def _pct(x: float | None, percent: str = "%") -> str:
    return "n/a" if x is None else f"{x:.1f}{percent}"


def _latex_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "\\":
            out.append("\\textbackslash{}")
        elif ch in "~^":
            out.append("\\" + ("textasciitilde" if ch == "~" else "textasciicircum") + "{}")
        else:
            out.append(ch)
    return "".join(out).replace("\n", " ")


def _healths(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each run of the rows once, with its health (rows built without health count as complete or not by ``complete``)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        for side in ("solo", "guided"):
            run = r.get(f"{side}_run")
            h = r.get(f"{side}_health")
            if run is not None and h is not None:
                out.setdefault(str(run), h)
    return list(out.items())


def _marked(r: dict[str, Any], text: str) -> str:
    return text if r.get("complete", True) else text + INCOMPLETE_MARK


def render_guidance_gap(rows: list[dict[str, Any]], fmt: str = "md") -> str:
    """Render :func:`guidance_gap`'s rows as a Markdown table, CSV, JSON or a LaTeX (booktabs) table.

    Args:
        rows: the rows.
        fmt: one of :data:`FORMATS`.

    Returns:
        The text (ending in a newline). Rows of incomplete runs are marked: ``(incomplete)`` after the
        method and :data:`~studybench.report.INCOMPLETE_MARK` after each number (Markdown, LaTeX), a
        footnote and the runs' health table (Markdown, LaTeX), ``complete`` and ``health`` columns (CSV),
        ``complete`` and the runs' health (JSON).

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "json":
        return json.dumps(rows, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    k = rows[0]["k"] if rows else "k"
    head = any(r.get("base") for r in rows)
    cells = [f"{m}_{w}" for m in _METRICS for w in ("solo", "guided", "gap")]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv_writer(buf, lineterminator="\n")
        w.writerow(["method", *(f"{c}_{x}" for c in cells for x in ("mean", "std")), "headroom_closed_par",
                    "headroom_closed_sub", "base", "complete", "k", "seeds", "scoring", "solo_run", "guided_run", "health"])
        for r in rows:
            bad = [f"{r[f'{x}_run']}: {health_status(r[f'{x}_health'])}" for x in ("solo", "guided")
                   if r.get(f"{x}_health") is not None and not r[f"{x}_health"].get("complete", True)]
            w.writerow([r["method"], *(r[c][x] for c in cells for x in ("mean", "std")), r["headroom_closed_par"],
                        r["headroom_closed_sub"], r["base"], r["complete"], r["k"], " ".join(map(str, r["seeds"])),
                        r["scoring"], r["solo_run"], r["guided_run"],
                        "; ".join(bad) or ("complete" if r["complete"] else "incomplete")])
        return buf.getvalue()
    if fmt == "latex":
        cols = "l" + "r" * (8 if head else 6)
        lines = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule",
                 f"Method & \\multicolumn{{3}}{{c}}{{Par@{k}}} & \\multicolumn{{3}}{{c}}{{Sub@{k}}}"
                 + (" & \\multicolumn{2}{c}{Headroom closed}" if head else "") + " \\\\",
                 "\\cmidrule(lr){2-4} \\cmidrule(lr){5-7}" + (" \\cmidrule(lr){8-9}" if head else ""),
                 " & Solo & Guided & Gap & Solo & Guided & Gap" + (" & Par & Sub" if head else "") + " \\\\", "\\midrule"]
        for r in rows:
            vals = [_marked(r, _fmt(r[c], c.endswith("gap"), "$\\pm$")) for c in cells]
            if head:
                vals += [_marked(r, _pct(r["headroom_closed_par"], "\\%")), _marked(r, _pct(r["headroom_closed_sub"], "\\%"))]
            name = _latex_escape(r["method"]) + (" (base)" if r["base"] else "") + ("" if r["complete"] else " (incomplete)")
            lines.append(" & ".join([name, *vals]) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}"]
        if any(not r["complete"] for r in rows):
            lines.append("\\par\\noindent\\textbf{" + INCOMPLETE_MARK + " (incomplete): a row with an incomplete run; its "
                         "scores count what is missing as incorrect.}")
        health = _healths(rows)
        return "\n".join([*lines, *([""] + health_table_latex(health) if health else []), ""])
    header = ["method", *(f"{m.capitalize()}@{k} {w}" for m in _METRICS for w in ("solo", "guided", "gap"))]
    if head:
        header += ["headroom closed (Par)", "headroom closed (Sub)"]
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        vals = [_marked(r, _fmt(r[c], c.endswith("gap"))) for c in cells]
        if head:
            vals += [_marked(r, _pct(r["headroom_closed_par"])), _marked(r, _pct(r["headroom_closed_sub"]))]
        name = md_cell(r["method"]) + (" (base)" if r["base"] else "") + ("" if r["complete"] else " (incomplete)")
        lines.append("| " + " | ".join([name, *vals]) + " |")
    notes = ["", "Mean ± std over seeds, percent; gap = guided - solo, per seed."]
    if head:
        notes.append("Headroom closed = (method solo - base solo) / (base guided - base solo): the share of the base "
                     "model's guidance gap that the method recovers without guidance.")
    if any(not r["complete"] for r in rows):
        notes.append(f"**{INCOMPLETE_MARK} (incomplete): a row with an incomplete run; its scores count what is missing as "
                     "incorrect (a lower bound).**")
    health = _healths(rows)
    if health:
        notes += ["", "Run health:", "", *health_table_markdown(health)]
    return "\n".join([*lines, *notes, ""])
