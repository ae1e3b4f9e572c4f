"""Turn a run directory into report.json / report.md and a terminal table (paper 2.2 metrics).

``report.json`` carries at its top level ``k``, ``seeds``, ``par_at_k`` and ``sub_at_k`` (each
``{"mean", "std", "per_seed"}`` in percent), ``breakdowns`` (by sub-discipline, source and answer
type) and run bookkeeping (model, split, turn/judgement counts, failed turns, missing judgements).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from studybench.files import atomic_write_text, dumps_json, text_digest
from studybench.metrics import breakdown, mean_std, par_at_k, sub_at_k, sub_at_k_by
from studybench.records import label_map
from studybench.store import RunStore, TurnKey

__all__ = ["SCORINGS", "active_judge", "build_report", "parents_index", "render_markdown", "rich_table", "write_report"]


def parents_index(parents: list[Any]) -> list[dict[str, Any]]:
    """Compact description of the selected parents for the manifest, with sub-discipline labels
    normalised (two spellings of one label, e.g. ``&`` vs ``and``, map to the most frequent one)."""
    canon = label_map(p.problem_type for p in parents)
    out = []
    for p in parents:
        out.append(
            {
                "uid": p.uid,
                "source": p.source,
                "year": p.year,
                "source_problem_id": p.source_problem_id,
                "problem_type": canon.get(p.problem_type, "(none)"),
                "problem_type_raw": p.problem_type,
                "subs": [
                    {"id": s.problem_id, "answer_type": s.answer_type.value, "type_sequence": s.type_sequence_str}
                    for s in p.subs()
                ],
            }
        )
    return out


class _SubIndex(BaseModel):
    id: str
    answer_type: str


class _ParentIndex(BaseModel):
    uid: str
    source: str = ""
    problem_type: str = "(none)"
    problem_type_raw: str = ""
    subs: list[_SubIndex] = Field(min_length=1)


class _ManifestView(BaseModel):
    """The part of manifest.json a report needs, validated."""

    k: int = Field(ge=1, le=100_000)
    seeds: list[int] = Field(min_length=1, max_length=10_000)
    split: dict[str, Any]
    parents: list[_ParentIndex] = Field(min_length=1)
    backend: dict[str, Any] = Field(default_factory=dict)
    verifier: dict[str, Any] | None = None

    @field_validator("split")
    @classmethod
    def _split_name(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(v.get("name"), str):
            raise ValueError("split.name must be a string")
        return v


_MAX_CELLS = 50_000_000


def load_manifest_view(store: RunStore) -> _ManifestView:
    """Read and validate the manifest fields a report uses.

    Raises:
        FileNotFoundError: not a run directory.
        ValueError: unreadable or malformed manifest (the message names the file and field).
    """
    man = store.read_manifest()
    try:
        view = _ManifestView.model_validate(man)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ())) or "<manifest>"
        raise ValueError(f"{store.manifest_path}: field '{loc}': {err.get('msg')}") from None
    cells = view.k * len(view.seeds) * sum(len(p.subs) for p in view.parents)
    if cells > _MAX_CELLS:
        raise ValueError(f"{store.manifest_path}: k x seeds x sub-problems = {cells:,} is implausibly large")
    return view


def _completion(row: dict[str, Any] | None) -> str | None:
    """The stored completion of a generation row, or ``None`` when the row is unusable."""
    if row is None:
        return None
    c = row.get("completion")
    return c if isinstance(c, str) else None


SCORINGS = ("strict", "liberal")
"""Physics-R1's conventions: strict = rule verifier only; liberal = rule OR LLM judge (the cascade)."""


def active_judge(verifier: dict[str, Any] | None) -> dict[str, Any] | None:
    """The judge configuration a ``rule+llm`` manifest names, or ``None``."""
    if not verifier or verifier.get("mode") != "rule+llm":
        return None
    judge = verifier.get("judge")
    if isinstance(judge, dict) and isinstance(judge.get("judge_id"), str):
        return judge
    return None


def build_report(store: RunStore, scoring: str | None = None) -> dict[str, Any]:
    """Compute the report of a run directory from its manifest and logs.

    A turn without a current judgement (not generated, not yet judged, or judged on an older
    completion) counts as incorrect and is counted in ``missing_judgements``.

    Args:
        scoring: ``"strict"`` (rule verdicts only), ``"liberal"`` (rule OR LLM verdict of the
            manifest's judge, paper 2.2 leaderboard) or ``None``: liberal when the manifest's
            verifier mode is ``rule+llm``, else strict. The report always carries both under
            ``scoring`` when LLM verdicts exist.

    Raises:
        FileNotFoundError / ValueError: no or unreadable manifest, or an unknown ``scoring``.
    """
    if scoring is not None and scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    man = load_manifest_view(store)
    k = man.k
    seeds = man.seeds
    split = man.split["name"]
    index = [p.model_dump() for p in man.parents]
    judge = active_judge(man.verifier)
    headline = scoring or ("liberal" if judge is not None else "strict")
    gens = store.latest_generations()
    judg = store.latest_judgements()
    llm = store.latest_llm_judgements() if judge is not None else {}
    jid = judge["judge_id"] if judge is not None else None
    per_seed: dict[str, dict[int, list[list[list[bool]]]]] = {"strict": {}, "liberal": {}}
    judgeable: dict[int, list[list[list[bool]]]] = {}
    missing = failed = total = 0
    reasons: Counter[str] = Counter()
    llm_counts: Counter[str] = Counter()
    rule_rejections = 0
    unsolved: list[dict[str, Any]] = []
    solved_count: dict[tuple[str, str], int] = {}
    for seed in seeds:
        strict_v: list[list[list[bool]]] = []
        liberal_v: list[list[list[bool]]] = []
        judgeable_v: list[list[list[bool]]] = []
        for p in index:
            ps: list[list[bool]] = []
            pl: list[list[bool]] = []
            pj: list[list[bool]] = []
            for s in p["subs"]:
                rs: list[bool] = []
                rl: list[bool] = []
                rj: list[bool] = []
                for a in range(k):
                    total += 1
                    key = TurnKey(split, p["uid"], s["id"], seed, a)
                    g = gens.get(key)
                    j = judg.get(key)
                    ok = False
                    ok_llm = False
                    is_judgeable = True
                    completion = _completion(g)
                    if g is not None and g.get("error"):
                        failed += 1
                    if completion is None or j is None or j.get("completion_digest") != (cd := text_digest(completion)):
                        missing += 1
                    else:
                        ok = j.get("correct") is True
                        if not ok and jid is not None and not g.get("error"):
                            rule_rejections += 1
                            lr = llm.get((key, jid))
                            verdict = lr.get("verdict") if lr is not None and lr.get("completion_digest") == cd else None
                            llm_counts[str(verdict) if verdict is not None else "not judged"] += 1
                            ok_llm = verdict == "TRUE"
                            is_judgeable = verdict in ("TRUE", "FALSE")
                        if not (ok or ok_llm):
                            reasons[_reason_kind(j)] += 1
                    final = (ok or ok_llm) if headline == "liberal" else ok
                    rs.append(ok)
                    rl.append(ok or ok_llm)
                    rj.append(is_judgeable)
                    if final:
                        solved_count[(p["uid"], s["id"])] = solved_count.get((p["uid"], s["id"]), 0) + 1
                ps.append(rs)
                pl.append(rl)
                pj.append(rj)
            strict_v.append(ps)
            liberal_v.append(pl)
            judgeable_v.append(pj)
        per_seed["strict"][seed] = strict_v
        per_seed["liberal"][seed] = liberal_v
        judgeable[seed] = judgeable_v
    main = per_seed[headline]
    for p in index:
        for s in p["subs"]:
            if solved_count.get((p["uid"], s["id"]), 0) == 0:
                unsolved.append({"parent": p["uid"], "sub_id": s["id"], "answer_type": s["answer_type"]})
    par = mean_std([par_at_k(main[s], k) for s in seeds])
    sub = mean_std([sub_at_k(main[s], k) for s in seeds])
    disc = [p["problem_type"] for p in index]
    src = [p["source"] for p in index]
    types = [[s["answer_type"] for s in p["subs"]] for p in index]
    by_type_seed = [sub_at_k_by(main[s], types) for s in seeds]
    by_type = {t: mean_std([d[t] for d in by_type_seed]).to_dict() for t in sorted(by_type_seed[0])}
    type_counts = Counter(t for ts in types for t in ts)
    raw_labels = sorted({(p["problem_type_raw"], p["problem_type"]) for p in index if p["problem_type_raw"] != p["problem_type"]})

    def bd(groups: list[str]) -> dict[str, Any]:
        par_g = breakdown(main, groups, lambda v: par_at_k(v, k))
        sub_g = breakdown(main, groups, lambda v: sub_at_k(v, k))
        n = Counter(groups)
        return {g: {"parents": n[g], "par_at_k": par_g[g].to_dict(), "sub_at_k": sub_g[g].to_dict()} for g in sorted(par_g)}

    gen_rows = [g for g in gens.values() if g.get("split") == split]
    usage: Counter[str] = Counter()
    for g in gen_rows:
        u = g.get("usage")
        if not isinstance(u, dict):
            continue
        for kk, vv in u.items():
            if isinstance(vv, int) and not isinstance(vv, bool):
                usage[str(kk)] += vv
    rep: dict[str, Any] = {
        "k": k,
        "seeds": seeds,
        "scoring_used": headline,
        "par_at_k": par.to_dict(),
        "sub_at_k": sub.to_dict(),
        "breakdowns": {
            "sub_discipline": bd(disc),
            "source": bd(src),
            "answer_type": {t: {"sub_problems": type_counts[t], "sub_at_k": by_type[t]} for t in by_type},
        },
        "split": split,
        "model": man.backend.get("model"),
        "backend": man.backend,
        "verifier": man.verifier,
        "parents": len(index),
        "sub_problems": sum(len(p["subs"]) for p in index),
        "turns": {"expected": total, "failed": failed, "missing_judgements": missing},
        "incorrect_reasons": dict(reasons.most_common()),
        "label_normalisation": [{"raw": r, "normalised": n} for r, n in raw_labels],
        "unsolved_sub_problems": unsolved,
        "usage": dict(usage),
    }
    if judge is not None:
        judged = sum(llm_counts[v] for v in ("TRUE", "FALSE", "unjudgeable"))
        rep["llm_judge"] = {
            "judge": judge,
            "rule_rejections": rule_rejections,
            "verdicts": {v: llm_counts.get(v, 0) for v in ("TRUE", "FALSE", "unjudgeable", "error", "not judged")},
            "unjudgeable_rate": round(llm_counts["unjudgeable"] / judged, 6) if judged else None,
        }
        rep["scoring"] = _conventions(per_seed, judgeable, seeds, k)
    return rep


def _conventions(
    per_seed: dict[str, dict[int, list[list[list[bool]]]]],
    judgeable: dict[int, list[list[list[bool]]]],
    seeds: list[int],
    k: int,
) -> dict[str, Any]:
    """Physics-R1 reporting conventions: strict vs liberal, per sub-problem vs per problem, each
    with the full denominator and with unjudgeable (or not yet judged) attempts left out."""
    out: dict[str, Any] = {}
    for name in SCORINGS:
        v = per_seed[name]
        sub_ok = sub_n = sub_jok = sub_jn = prob_ok = prob_n = prob_jok = prob_jn = 0
        for seed in seeds:
            for parent, pj in zip(v[seed], judgeable[seed], strict=True):
                for a in range(k):
                    all_ok = all(sub[a] for sub in parent)
                    all_j = name == "strict" or all(sj[a] for sj in pj)
                    prob_n += 1
                    prob_ok += all_ok
                    if all_j:
                        prob_jn += 1
                        prob_jok += all_ok
                    for sub, sj in zip(parent, pj, strict=True):
                        sub_n += 1
                        sub_ok += sub[a]
                        if name == "strict" or sj[a]:
                            sub_jn += 1
                            sub_jok += sub[a]

        def pct(a: int, b: int) -> float | None:
            return round(100.0 * a / b, 4) if b else None

        out[name] = {
            "par_at_k": mean_std([par_at_k(v[s], k) for s in seeds]).to_dict(),
            "sub_at_k": mean_std([sub_at_k(v[s], k) for s in seeds]).to_dict(),
            "per_sub_problem": {
                "correct": sub_ok, "attempts": sub_n, "accuracy": pct(sub_ok, sub_n),
                "judgeable_attempts": sub_jn, "judgeable_accuracy": pct(sub_jok, sub_jn),
            },
            "per_problem": {
                "correct": prob_ok, "attempts": prob_n, "accuracy": pct(prob_ok, prob_n),
                "judgeable_attempts": prob_jn, "judgeable_accuracy": pct(prob_jok, prob_jn),
            },
        }
    return out


def _reason_kind(j: dict[str, Any]) -> str:
    """A verdict reason with its specific values folded, so reasons can be counted by kind."""
    r = str(j.get("reason", "")) or "incorrect: unspecified"
    r = re.sub(r"'[^']*'", "'…'", r)
    r = re.sub(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", "N", r)
    return r[:100]


def _md(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(rep: dict[str, Any]) -> str:
    """Markdown rendering of :func:`build_report`'s output."""

    def fmt(d: dict[str, Any]) -> str:
        return f"{d['mean']:.2f}" if d["std"] is None else f"{d['mean']:.2f} ± {d['std']:.2f}"

    lines = [
        f"# StudyBench report: {_md(rep['split'])} / {_md(rep['model'])}",
        "",
        f"k = {rep['k']}, seeds = {rep['seeds']}, parents = {rep['parents']}, sub-problems = {rep['sub_problems']}, "
        f"verifier = {(rep.get('verifier') or {}).get('mode', 'rule')}, scoring = {rep.get('scoring_used', 'strict')} "
        f"({'rule OR LLM judge' if rep.get('scoring_used') == 'liberal' else 'rule verifier only'})",
        "",
        "| metric | mean ± std | per seed |",
        "|---|---|---|",
        f"| Par@{rep['k']} | {fmt(rep['par_at_k'])} | {', '.join(f'{x:.2f}' for x in rep['par_at_k']['per_seed'])} |",
        f"| Sub@{rep['k']} | {fmt(rep['sub_at_k'])} | {', '.join(f'{x:.2f}' for x in rep['sub_at_k']['per_seed'])} |",
        "",
        f"Turns expected: {rep['turns']['expected']}, failed: {rep['turns']['failed']}, "
        f"missing judgements: {rep['turns']['missing_judgements']}.",
        "",
    ]
    if rep.get("llm_judge"):
        lj = rep["llm_judge"]
        jd = lj["judge"]
        vc = lj["verdicts"]
        rate = "n/a" if lj["unjudgeable_rate"] is None else f"{100 * lj['unjudgeable_rate']:.2f}%"
        lines += [
            "## LLM judge",
            "",
            f"Judge {_md(jd.get('model'))} (template {_md(jd.get('template'))}, digest {str(jd.get('template_digest'))[:12]}). "
            f"Rule rejections: {lj['rule_rejections']}; LLM verdicts: TRUE {vc['TRUE']}, FALSE {vc['FALSE']}, "
            f"unjudgeable {vc['unjudgeable']} (rate {rate}; counted as incorrect), error {vc['error']}, not judged {vc['not judged']}.",
            "",
        ]
        if vc["error"] or vc["not judged"]:
            lines += ["Errors and unjudged rejections count as incorrect; run `studybench judge RUN_DIR` to judge them.", ""]
    if rep.get("scoring"):
        kk = rep["k"]
        lines += [
            "## Scoring conventions",
            "",
            "strict = rule verifier only; liberal = rule OR LLM judge. Accuracy is per attempt; a problem attempt is "
            "correct when all its sub-problems are. Judgeable = attempts with no unjudgeable, failed or unjudged LLM verdict.",
            "",
            f"| scoring | Par@{kk} | Sub@{kk} | per sub-problem | per sub-problem, judgeable | per problem | per problem, judgeable |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, d in rep["scoring"].items():
            def cell(g: dict[str, Any], judgeable: bool) -> str:
                if judgeable:
                    acc, n = g["judgeable_accuracy"], g["judgeable_attempts"]
                else:
                    acc, n = g["accuracy"], g["attempts"]
                return "n/a" if acc is None else f"{acc:.2f} (n={n})"

            lines.append(
                f"| {name} | {fmt(d['par_at_k'])} | {fmt(d['sub_at_k'])} | {cell(d['per_sub_problem'], False)} | "
                f"{cell(d['per_sub_problem'], True)} | {cell(d['per_problem'], False)} | {cell(d['per_problem'], True)} |"
            )
        lines.append("")
    for name, title in (("sub_discipline", "Sub-discipline"), ("source", "Source")):
        lines += [f"## By {title.lower()}", "", f"| {title} | parents | Par@{rep['k']} | Sub@{rep['k']} |", "|---|---|---|---|"]
        for g, d in rep["breakdowns"][name].items():
            lines.append(f"| {_md(g)} | {d['parents']} | {fmt(d['par_at_k'])} | {fmt(d['sub_at_k'])} |")
        lines.append("")
    lines += ["## By answer type", "", f"| answer type | sub-problems | Sub@{rep['k']} |", "|---|---|---|"]
    for t, d in rep["breakdowns"]["answer_type"].items():
        lines.append(f"| {t} | {d['sub_problems']} | {fmt(d['sub_at_k'])} |")
    lines.append("")
    if rep.get("label_normalisation"):
        lines += ["Sub-discipline labels normalised: " + "; ".join(f"'{x['raw']}' -> '{x['normalised']}'" for x in rep["label_normalisation"]), ""]
    if rep.get("incorrect_reasons"):
        lines += ["## Why attempts were judged incorrect", "", "| reason | count |", "|---|---|"]
        for r, c in rep["incorrect_reasons"].items():
            lines.append(f"| {_md(r)} | {c} |")
        lines.append("")
    if rep.get("unsolved_sub_problems"):
        lines += [f"## Sub-problems never solved ({len(rep['unsolved_sub_problems'])})", ""]
        for u in rep["unsolved_sub_problems"][:200]:
            lines.append(f"- {u['parent']} / {u['sub_id']} ({u['answer_type']})")
        lines.append("")
    return "\n".join(lines)


def write_report(store: RunStore, scoring: str | None = None) -> dict[str, Any]:
    """Build the report (:func:`build_report`) and write ``report.json`` and ``report.md`` atomically; return it."""
    rep = build_report(store, scoring)
    atomic_write_text(store.root / "report.json", dumps_json(rep) + "\n")
    atomic_write_text(store.root / "report.md", render_markdown(rep))
    return rep


def rich_table(rep: dict[str, Any]) -> Any:
    """A Rich table with Par@k / Sub@k and the sub-discipline breakdown."""
    from rich.table import Table

    def fmt(d: dict[str, Any]) -> str:
        return f"{d['mean']:.2f}" if d["std"] is None else f"{d['mean']:.2f} ± {d['std']:.2f}"

    k = rep["k"]
    t = Table(title=f"StudyBench {rep['split']} · {rep['model']} · k={k} · seeds={len(rep['seeds'])}")
    t.add_column("group")
    t.add_column("parents", justify="right")
    t.add_column(f"Par@{k}", justify="right")
    t.add_column(f"Sub@{k}", justify="right")
    t.add_row("[bold]overall[/bold]", str(rep["parents"]), f"[bold]{fmt(rep['par_at_k'])}[/bold]", f"[bold]{fmt(rep['sub_at_k'])}[/bold]")
    for g, d in rep["breakdowns"]["sub_discipline"].items():
        t.add_row(g, str(d["parents"]), fmt(d["par_at_k"]), fmt(d["sub_at_k"]))
    return t
