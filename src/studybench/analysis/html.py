"""``studybench report RUN_DIR --html``: one self-contained HTML page of a run.

The page holds the summary tables of :func:`studybench.report.build_report`, plots (matplotlib, inlined as
SVG by :mod:`studybench.analysis.svgplot`: the pass@k curve, Par@k / Sub@k per sub-discipline and source,
Sub@k per answer type) and a drill-down per parent: every attempt's
conversation (system message, user turns, model replies with reasoning folded away), the extracted
answers beside the gold, each sub-problem's rule verdict with its reason and the LLM verdict with its
justification. Filters (solved / unsolved per seed, rule-vs-LLM disagreement, sub-discipline,
source, answer type) and a search box run client-side.

Nothing is fetched over the network when the page opens: the styles, the script and the plot are
inline. The drill-down data travels as one JSON blob in ``<script type="application/json">`` with
every ``<``, ``>`` and ``&`` written as a JSON ``\\u`` escape, so model text can never close the
script element; the page's script builds the drill-down with ``textContent`` (never ``innerHTML``),
so model text always renders as text. Conversations are built when a parent is opened, which keeps
a run of thousands of turns quick to load.

Needs the ``analysis`` extra (jinja2, matplotlib).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from studybench.answers import strip_reasoning
from studybench.costs import Pricing
from studybench.datasets import Dataset
from studybench.escaping import plural
from studybench.evaluate import EvalError, errata_parents, run_dataset
from studybench.files import atomic_write_text
from studybench.protocol import DEFAULT_SYSTEM_PROMPT, Artefacts, build_messages, messages_digest, user_turn
from studybench.records import Parent, SubProblemRef
from studybench.report import (
    SCORINGS,
    health_status,
    load_run_report,
    require_complete,
    retries_line,
    scoring_label,
)
from studybench.report.errata import errata_line
from studybench.report.health import HEALTH_HEADER, health_cells
from studybench.report.tokens import token_table
from studybench.store import RunRows, RunStore, TurnKey, TurnVerdict, read_stored_artefacts, turn_verdicts

__all__ = ["HTML_MODULES", "html_report", "write_html_report"]

HTML_MODULES = ("jinja2", "matplotlib")
"""The modules of the ``analysis`` extra the HTML report needs."""

_TEMPLATES = Path(__file__).parent / "templates"


def _require_modules() -> None:
    missing = [m for m in HTML_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(
            f"the HTML report needs the 'analysis' extra (missing {', '.join(missing)}): pip install 'studybench[analysis]'"
        )


def _script_json(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` left raw."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _plots(rep: dict[str, Any]) -> list[str]:
    """The page's plots as inline ``<svg>`` elements: the pass@k curve, Par@k / Sub@k per sub-discipline and
    source, Sub@k per answer type (each only when the report has its data)."""
    from studybench.analysis.svgplot import bars_svg, curve_svg

    k, several = rep["k"], len(rep.get("seeds", [])) > 1
    out: list[str] = []
    pk = rep.get("pass_at_k")
    if pk:
        what = "mean over seeds, ±1 std band" if several else "one seed"
        out.append(curve_svg(pk["k"], [("Sub pass@k", pk["sub"]["mean"], pk["sub"]["std"] if several else None),
                                       ("Par pass@k", pk["par"]["mean"], pk["par"]["std"] if several else None)],
                             title=f"pass@k, k = 1..{k} ({what})", label=f"pass@k curve, k = 1 to {k}", salt="passk",
                             xlabel="k"))
    bd = rep.get("breakdowns", {})
    for key, name in (("sub_discipline", "sub-discipline"), ("source", "source")):
        groups = bd.get(key, {})
        if groups:
            names = list(groups)
            series = [(f"{m}@{k}", [groups[g][f"{m.lower()}_at_k"]["mean"] for g in names],
                       [groups[g][f"{m.lower()}_at_k"]["std"] for g in names] if several else None) for m in ("Par", "Sub")]
            out.append(bars_svg(names, series, title=f"Par@{k}, Sub@{k} per {name}",
                                label=f"Par@{k} and Sub@{k} per {name}", salt=key))
    groups = bd.get("answer_type", {})
    if groups:
        names = list(groups)
        out.append(bars_svg(names, [(f"Sub@{k}", [groups[g]["sub_at_k"]["mean"] for g in names],
                                     [groups[g]["sub_at_k"]["std"] for g in names] if several else None)],
                            title=f"Sub@{k} per answer type", label=f"Sub@{k} per answer type",
                            salt="answer_type"))
    return out


def _turn(t: TurnVerdict, liberal: bool, audit: dict[str, Any] | None) -> dict[str, Any]:
    """One turn of the drill-down: the reply (visible part and folded reasoning) and its verdicts."""
    g, rv = t.rule.generation, t.rule.verdict
    out: dict[str, Any] = {"ok": t.liberal if liberal else t.strict}
    if g is None:
        out["e"] = "not generated"
    else:
        if g.error:
            out["e"] = g.error
        comp = g.completion or ""
        vis = strip_reasoning(comp)
        out["c"] = vis
        head = comp.strip()
        if vis != head:  # reasoning was removed: fold it away (the part before the reply, else the whole completion)
            if vis and head.endswith(vis):
                out["th"] = head[: -len(vis)].rstrip()
            else:
                out["raw"] = comp
        if g.reasoning:
            out["r"] = g.reasoning
        if g.finish_reason:
            out["fr"] = g.finish_reason
    if rv is not None:
        out["rc"] = rv.correct
        out["rr"] = rv.reason
        out["x"] = list(rv.extracted or [])
    elif t.rule.stale:
        out["rr"] = f"no counting rule verdict ({t.rule.stale})"
    llm = t.llm.verdict if t.llm is not None else None
    if llm is not None:
        out.update(lv=llm.verdict, lj=llm.justification or llm.error or "", lc=True)
    elif t.llm is not None:
        out.update(lv="not judged", lj=t.llm.stale or "", lc=True)
    elif audit is not None:  # a verdict on a rule accept (--judge-rule-accepts): shown, does not count
        out.update(lv=audit["verdict"], lj=audit["justification"], lc=False)
    lv = out.get("lv")
    out["dis"] = rv is not None and lv in ("TRUE", "FALSE") and (lv == "TRUE") != rv.correct
    return out


def html_report(
    run_dir: Path | str,
    scoring: str | None = None,
    *,
    split_path: Path | None = None,
    data_dir: Path | None = None,
    artefacts: Artefacts | None = None,
    pricing: Pricing | None = None,
    allow_incomplete: bool = False,
) -> str:
    """The HTML page of a run directory (nothing is written).

    Args:
        run_dir: the run directory.
        scoring: ``"strict"`` / ``"liberal"`` / ``None`` (see :func:`studybench.report.build_report`);
            decides which turns count as correct in the tables and the drill-down.
        split_path: the test-set file when it is no longer where the manifest says.
        data_dir: where the official split files are.
        artefacts: the method artefacts the run used (system prompt, playbook, guidance); ``None``:
            the ones the run directory keeps (:mod:`studybench.store.artefacts`). A run made with
            artefacts it does not keep (made before runs kept them) shows the default system message
            and user turns with a warning.
        pricing: prices for the "Tokens and cost" table (``None``: the run's recorded ones, if any).
        allow_incomplete: write the page of an incomplete run too, with a banner saying why at its top
            and the run's health in its summary; default: refuse it.

    Returns:
        The page (the run's health, :func:`studybench.report.run_health`, in its summary). Without the test set (not found, or not the run's) the page still holds the replies
        and verdicts, with the problem texts and gold answers marked unavailable.

    Raises:
        RuntimeError: the ``analysis`` extra (jinja2, matplotlib) is not installed.
        studybench.report.IncompleteRunError: an unreadable run (no manifest, an invalid one), or an
            incomplete one without ``allow_incomplete``.
        ValueError: an unknown ``scoring``.
    """
    _require_modules()
    if scoring is not None and scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    store = RunStore(Path(run_dir))
    rep, health = load_run_report(store.root, scoring, pricing=pricing)
    require_complete(run_dir, health, allow_incomplete)
    assert rep is not None  # an unreadable run was refused
    man = store.read_manifest()
    judge = man.active_judge
    judge_id = judge["judge_id"] if judge is not None else None
    rows = RunRows.read(store, llm=True)
    table = turn_verdicts(man, rows, judge_id)
    liberal = rep["scoring_used"] == "liberal"

    notes: list[str] = [line for line in (errata_line(rep.get("errata")), retries_line(rep)) if line]
    ds: Dataset | None = None
    try:
        ds = run_dataset(man, store.root / "manifest.json", data_dir=data_dir, split_path=split_path)
    except EvalError as e:
        notes.append(f"Problem texts and gold answers are unavailable: {e}")
    by_uid: dict[str, Parent] = {p.uid: p for p in errata_parents(man, ds.parents)} if ds is not None else {}
    used = {k for k in ("system_prompt", "playbook") if man.artefacts.get(k)}
    if man.artefacts.get("guidance_entries"):
        used.add("guidance")
    if artefacts is None and used:  # the exact texts the run kept (studybench.store.artefacts)
        artefacts, unusable = read_stored_artefacts(store.root, man.artefacts)
        if unusable:
            notes.append(f"The method artefacts kept with the run cannot be used: {unusable}")
    art = artefacts or Artefacts()
    missing_art = sorted(a for a in used if artefacts is None)
    if missing_art:
        notes.append(f"This run used method artefacts ({', '.join(missing_art)}) that the run directory does not keep: "
                     "the system message and user turns shown are the defaults, not exactly what the model saw.")

    cursor = iter(table)
    parents: list[dict[str, Any]] = []
    mismatched = 0
    per_seed: dict[int, list[list[list[dict[str, Any]]]]] = {}
    for seed in man.seeds:
        for pi, p in enumerate(man.parents):
            attempts: list[list[dict[str, Any]]] = [[] for _ in range(man.k)]
            for _s in p.subs:
                for a in range(man.k):
                    t = next(cursor)
                    audit = None
                    if judge_id is not None and t.llm is None and t.rule.verdict is not None and t.rule.completion_digest:
                        row = rows.llm_verdicts.get((t.key, judge_id))
                        if row is not None and row.completion_digest == t.rule.completion_digest and row.verdict:
                            audit = {"verdict": row.verdict, "justification": row.justification or ""}
                    attempts[a].append(_turn(t, liberal, audit))
            src = by_uid.get(p.uid)
            if src is not None:
                for a in range(man.k):
                    prev: list[str | None] = []
                    for si, sub in enumerate(src.subs()):
                        tv = attempts[a][si] if si < len(attempts[a]) else None
                        g = rows.generations.get(TurnKey(man.split.name, p.uid, sub.problem_id, seed, a))
                        if tv is not None and g is not None and g.messages_digest and not g.error:
                            want = messages_digest(build_messages(SubProblemRef(src, si, sub), prev, art))
                            if want != g.messages_digest:
                                tv["mm"] = True
                                mismatched += 1
                        prev.append(g.completion if g is not None and not g.error else None)
            per_seed.setdefault(pi, []).append(attempts)
    for pi, p in enumerate(man.parents):
        src = by_uid.get(p.uid)
        subs = []
        for si, s in enumerate(p.subs):
            d: dict[str, Any] = {"id": s.id, "t": s.answer_type}
            if src is not None and si < len(src.subs()):
                d["q"] = user_turn(src, si, art)
                d["g"] = src.subs()[si].answer
            subs.append(d)
        seeds_att = per_seed[pi]
        solved = [any(all(turn["ok"] for turn in att) for att in atts) for atts in seeds_att]
        parents.append({
            "u": p.uid, "src": p.source, "yr": p.year, "sp": p.source_problem_id, "d": p.problem_type,
            "subs": subs, "solved": solved,
            "subs_solved": [sum(any(att[si]["ok"] for att in atts) for si in range(len(p.subs))) for atts in seeds_att],
            "dis": any(turn["dis"] for atts in seeds_att for att in atts for turn in att),
            "at": seeds_att,
        })
    if mismatched:
        notes.append(f"{plural(mismatched, 'turn')}: the rebuilt conversation differs from the one the model was sent "
                     "(the messages digests do not match); such turns are marked.")

    system = art.system_message() if artefacts is not None or not (used & {"system_prompt", "playbook"}) else DEFAULT_SYSTEM_PROMPT
    data = {
        "k": man.k, "seeds": man.seeds, "scoring": rep["scoring_used"], "judge": judge_id is not None,
        "system": system, "testset": ds is not None, "parents": parents,
    }
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("report.html.j2").render(
        rep=rep,
        title=f"studybench report: {rep.get('model') or 'model'} on {rep['split']}",
        notes=notes,
        plots=[jinja2.utils.markupsafe.Markup(svg) for svg in _plots(rep)],
        data_json=jinja2.utils.markupsafe.Markup(_script_json(data)),
        cost_table=token_table(rep),
        health=health, health_line=health_status(health), health_header=HEALTH_HEADER[1:],
        health_cells=health_cells(str(run_dir), health)[1:],
        scoring_label=scoring_label(rep),
        disciplines=sorted({p.problem_type for p in man.parents}),
        sources=sorted({p.source for p in man.parents}),
        answer_types=sorted({s.answer_type for p in man.parents for s in p.subs}),
    )


def write_html_report(
    run_dir: Path | str,
    out_path: Path | str | None = None,
    scoring: str | None = None,
    *,
    split_path: Path | None = None,
    data_dir: Path | None = None,
    artefacts: Artefacts | None = None,
    pricing: Pricing | None = None,
    allow_incomplete: bool = False,
) -> Path:
    """Write the HTML page of a run (:func:`html_report`) atomically.

    Args:
        run_dir: the run directory.
        out_path: the file to write; ``None``: ``RUN_DIR/report.html``.
        scoring: see :func:`html_report`.
        split_path: see :func:`html_report`.
        data_dir: see :func:`html_report`.
        artefacts: see :func:`html_report`.
        pricing: see :func:`html_report`.
        allow_incomplete: see :func:`html_report`.

    Returns:
        The path written.

    Raises:
        RuntimeError, FileNotFoundError, ValueError: see :func:`html_report`; OSError when the file
            cannot be written.
    """
    page = html_report(run_dir, scoring, split_path=split_path, data_dir=data_dir, artefacts=artefacts, pricing=pricing,
                       allow_incomplete=allow_incomplete)
    out = Path(out_path) if out_path is not None else Path(run_dir) / "report.html"
    atomic_write_text(out, page)
    return out
