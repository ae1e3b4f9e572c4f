"""Compute a run's report from its directory (paper 2.2 metrics; Physics-R1 scoring conventions).

``report.json`` carries at its top level ``k``, ``seeds``, ``par_at_k`` and ``sub_at_k`` (each
``{"mean", "std", "per_seed"}`` in percent), ``breakdowns`` (by sub-discipline, source and answer
type), run bookkeeping (model, split, turn/judgement counts, failed turns, missing judgements;
``turns.rule_timeouts``, present when there are any, counts the rule verdicts that timed out;
``turns.retried``, ``turns.extra_requests`` and ``turns.failed_after_retries``, present when any turn's
request was retried (its generation row's ``attempts`` above 1: the backend's retries after a transient
failure), count those turns, the requests beyond the first and the retried turns that failed all the same;
``turns.rule_internal_errors``, present when there are any, the rule verdicts that are internal errors
of the verifier, which make the report incomplete) and
``truncation`` (completions cut by the token limit and empty ones, overall and per seed, with a
warning above :data:`TRUNCATION_WARN_SHARE`), ``pass_at_k`` (the unbiased pass@k for k = 1..K, per
sub-problem and per parent, by the headline scoring: :func:`studybench.metrics.pass_at_k_table`);
``errata`` (:mod:`studybench.report.errata`) says which golds were scored (``official``, ``apply``,
``exclude``) and how many attempts touch errata items;
``skipped_parents``, present when there are any, lists the parents skipped because their prompt does
not fit the context (``{"parent", "reason"}``; their turns count as failed and the run is incomplete);
``artefacts``, present when the run keeps its method artefacts, gives each kept file's path in the run
directory and sha256 (:mod:`studybench.store.artefacts`);
``labels``, present when the run has any, are the manifest's labels
(:attr:`studybench.store.Manifest.labels`); ``tokens`` (per run, seed and turn) and, with a pricing file,
``cost``: :mod:`studybench.report.tokens` (``usage``, the older sum over the current rows, is kept); ``health``: whether
the run may be compared with others (:func:`studybench.report.health.run_health`). What each turn scores comes from
:func:`studybench.store.turn_verdicts` (the one currency rule). ``complete`` is ``not incomplete_reasons``
(one line per reason), ``llm_judge`` (missing verdicts, the unjudgeable alarm) and ``final_answers``
(attempts without a final answer): :mod:`studybench.report.completeness`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from studybench.answers import strip_reasoning
from studybench.costs import Pricing
from studybench.escaping import plural
from studybench.files import atomic_write_text, dumps_json
from studybench.llm_judge import judge_usage_summary
from studybench.metrics import breakdown, mean_std, par_at_k, pass_at_k_table, sub_at_k, sub_at_k_by
from studybench.report.completeness import final_answer_block, incomplete_reasons, llm_judge_block
from studybench.report.errata import errata_block
from studybench.report.health import run_health
from studybench.report.render import render_markdown
from studybench.report.tokens import cost_block, record_pricing, recorded_pricing, token_block
from studybench.store import (
    ARTEFACT_FILES,
    ARTEFACTS_DIR,
    SKIPPED_PARENT,
    Manifest,
    RunRows,
    RunStore,
    TurnVerdict,
    turn_verdicts,
)

__all__ = ["SCORINGS", "TRUNCATION_WARN_SHARE", "build_report", "parent_outcomes", "write_report"]

SCORINGS = ("strict", "liberal")
"""Physics-R1's conventions: strict = rule verifier only; liberal = rule OR LLM judge (the cascade)."""

TRUNCATION_WARN_SHARE = 0.10
"""Reports warn when more than this share of the answered turns (overall or in one seed) was cut by
the token limit (``finish_reason: length``) or has no visible text: the scores then measure the
budget more than the model."""

Grid = list[list[list[bool]]]
"""Verdicts of one seed: ``grid[parent][sub_problem][attempt]``."""


def _store(run: RunStore | Path | str) -> RunStore:
    return run if isinstance(run, RunStore) else RunStore(Path(run))


def _grid(manifest: Manifest, values: list[bool], seed_index: int) -> Grid:
    """Cut the flat per-turn list (seeds, parents, sub-problems, attempts order) into one seed's grid."""
    k = manifest.k
    per_seed = sum(len(p.subs) for p in manifest.parents) * k
    flat = values[seed_index * per_seed : (seed_index + 1) * per_seed]
    out: Grid = []
    i = 0
    for p in manifest.parents:
        parent: list[list[bool]] = []
        for _ in p.subs:
            parent.append(flat[i : i + k])
            i += k
        out.append(parent)
    return out


def build_report(run: RunStore | Path | str, scoring: str | None = None, k: int | None = None,
                 pricing: Pricing | None = None) -> dict[str, Any]:
    """Compute the report of a run directory from its manifest and logs (nothing is written).

    A turn without a counting rule verdict (not generated, not yet judged, or judged on an older
    completion) counts as incorrect and is counted in ``turns.missing_judgements``; turns never
    generated are also counted in ``not_generated``. ``complete`` is ``False`` when any turn
    was not generated, failed, or has no verdict (e.g. a run stopped or interrupted mid-way), or,
    with the liberal headline, when a rule rejection has no final LLM verdict (a judge error, or
    not judged): its scores are then a lower bound, not the model's. ``incomplete_reasons`` says
    why, one line each (:func:`studybench.report.completeness.incomplete_reasons`).

    Args:
        run: the run directory (or its :class:`RunStore`).
        scoring: ``"strict"`` (rule verdicts only), ``"liberal"`` (rule OR LLM verdict of the
            manifest's active judge, the paper's leaderboard) or ``None``: liberal when the
            manifest's verifier mode is ``rule+llm``, else strict. The report carries both under
            ``scoring`` whenever the run has an active judge.
        k: report Par@k / Sub@k for ``k`` <= the run's k from the first ``k`` attempts of every
            parent and seed (attempts ``0..k-1``: exactly the turns a run made with this ``k`` would
            hold); the report then carries ``run_k``, the run's own k. ``None``: the run's k.
        pricing: prices for the ``cost`` block (``None``: the run directory's recorded ones, if any;
            :mod:`studybench.report.tokens`).

    Returns:
        The report as a JSON-ready dict.

    Raises:
        FileNotFoundError: not a run directory.
        ValueError: an unreadable or invalid manifest or recorded pricing (the message names the
            file and field), an unknown ``scoring``, or a ``k`` that is not between 1 and the run's k.
    """
    if scoring is not None and scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    store = _store(run)
    man = store.read_manifest()
    run_k = man.k
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= run_k:
            raise ValueError(f"k must be between 1 and the run's k={run_k} (in {store.root}), got {k!r}")
        man = man.model_copy(update={"k": k})
    k, seeds, split = man.k, man.seeds, man.split.name
    judge = man.active_judge
    headline = scoring or ("liberal" if judge is not None else "strict")
    rows = RunRows.read(store, llm=judge is not None)
    table = turn_verdicts(man, rows, judge["judge_id"] if judge is not None else None)

    strict = [t.strict for t in table]
    liberal = [t.liberal for t in table]
    judgeable = [t.judgeable for t in table]
    per_seed = {
        "strict": {s: _grid(man, strict, i) for i, s in enumerate(seeds)},
        "liberal": {s: _grid(man, liberal, i) for i, s in enumerate(seeds)},
    }
    judgeable_grid = {s: _grid(man, judgeable, i) for i, s in enumerate(seeds)}
    main = per_seed[headline]

    reasons: Counter[str] = Counter()
    solved: Counter[tuple[str, str]] = Counter()
    for t in table:
        if t.rule.verdict is not None and not t.liberal:
            reasons[_reason_kind(t.rule.verdict.reason)] += 1
        if t.liberal if headline == "liberal" else t.strict:
            solved[(t.key.parent, t.key.sub_id)] += 1
    unsolved = [
        {"parent": p.uid, "sub_id": s.id, "answer_type": s.answer_type}
        for p in man.parents
        for s in p.subs
        if solved[(p.uid, s.id)] == 0
    ]

    par = mean_std([par_at_k(main[s], k) for s in seeds])
    sub = mean_std([sub_at_k(main[s], k) for s in seeds])
    disc = [p.problem_type for p in man.parents]
    src = [p.source for p in man.parents]
    types = [[s.answer_type for s in p.subs] for p in man.parents]
    by_type_seed = [sub_at_k_by(main[s], types) for s in seeds]
    by_type = {t: mean_std([d[t] for d in by_type_seed]).to_dict() for t in sorted(by_type_seed[0])}
    type_counts = Counter(t for ts in types for t in ts)
    raw_labels = sorted({(p.problem_type_raw, p.problem_type) for p in man.parents if p.problem_type_raw != p.problem_type})

    def bd(groups: list[str]) -> dict[str, Any]:
        par_g = breakdown(main, groups, lambda v: par_at_k(v, k))
        sub_g = breakdown(main, groups, lambda v: sub_at_k(v, k))
        n = Counter(groups)
        return {g: {"parents": n[g], "par_at_k": par_g[g].to_dict(), "sub_at_k": sub_g[g].to_dict()} for g in sorted(par_g)}

    usage: Counter[str] = Counter()
    reported = {t.key for t in table} if k != run_k else None  # a smaller k: the usage of its attempts only
    for key, g in rows.generations.items():
        if g.split != split or not isinstance(g.usage, dict) or (reported is not None and key not in reported):
            continue
        for kk, vv in g.usage.items():
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
        "verifier": None if man.verifier is None else man.verifier.model_dump(mode="json", exclude_unset=True),
        "parents": len(man.parents),
        "sub_problems": sum(len(p.subs) for p in man.parents),
        "turns": {
            "expected": len(table),
            "failed": sum(1 for t in table if t.rule.failed),
            "missing_judgements": sum(1 for t in table if t.missing),
        },
        "incorrect_reasons": dict(reasons.most_common()),
        "label_normalisation": [{"raw": r, "normalised": n} for r, n in raw_labels],
        "unsolved_sub_problems": unsolved,
        "usage": dict(usage),
        "tokens": token_block(store, man, (t.key for t in table)),
        "truncation": _truncation(table, seeds, headline),
        "pass_at_k": pass_at_k_table(main, k),  # k = 1..K from the same verdicts (metrics module docstring)
    }
    pricing = pricing if pricing is not None else recorded_pricing(store)
    if pricing is not None:
        rep["cost"] = cost_block(rep["tokens"], pricing)
    judge_tokens = judge_usage_summary(store, pricing)
    if judge_tokens["spent"]["total_tokens"] or judge_tokens["from_cache"]["total_tokens"]:
        # only when LLM verdicts recorded usage: reports of rule-only runs and of older runs stay as they were
        rep["judge_tokens"] = judge_tokens
    if man.labels:  # only when set: reports of unlabelled runs stay as they were
        rep["labels"] = dict(man.labels)
    if (errata := errata_block(man)) is not None:  # which golds were scored; attempts on errata items
        rep["errata"] = errata
    timeouts = sum(1 for t in table if t.rule.timed_out)
    if timeouts:  # only when there are any: reports of runs without timeouts stay as they were
        rep["turns"]["rule_timeouts"] = timeouts
    retried = [g for t in table if (g := t.rule.generation) is not None and (g.attempts or 0) > 1]
    if retried:  # only when any: reports of runs whose every request was answered at once stay as they were
        rep["turns"]["retried"] = len(retried)
        rep["turns"]["extra_requests"] = sum((g.attempts or 1) - 1 for g in retried)
        rep["turns"]["failed_after_retries"] = sum(1 for g in retried if g.error)
    internal = sum(1 for t in table if t.rule.internal_error)
    if internal:  # the verifier failed on these turns (e.g. a broken install): the scores are not trustworthy
        rep["turns"]["rule_internal_errors"] = internal
    if k != run_k:
        rep["run_k"] = run_k
    # incomplete (report/completeness.py): turns never generated, failed, or without a verdict (an interrupted or
    # stopped run); with the liberal headline, rule rejections without a final LLM verdict (a judge pass that failed)
    rep["not_generated"] = sum(1 for t in table if t.rule.generation is None)
    skipped = _skipped_parents(table)
    if skipped:  # only when there are any: reports of other runs stay as they were
        rep["skipped_parents"] = skipped
    kept = _kept_artefacts(man)
    if kept:  # the method artefacts the run keeps (studybench.store.artefacts); absent for other runs
        rep["artefacts"] = kept
    rep["final_answers"] = final_answer_block(table)
    if judge is not None:
        rep["llm_judge"] = llm_judge_block(table, judge)
        rep["scoring"] = _conventions(per_seed, judgeable_grid, seeds, k)
    rep["incomplete_reasons"] = incomplete_reasons(rep)
    rep["complete"] = not rep["incomplete_reasons"]
    rep["health"] = run_health(rep)  # complete or not and why, turns missing, truncation, unjudgeable, timeouts
    return rep


def parent_outcomes(run: RunStore | Path | str, scoring: str | None = None) -> dict[str, Any]:
    """Each parent's outcome per seed, from the same verdicts as :func:`build_report` (for paired statistics).

    Args:
        run: the run directory (or its :class:`RunStore`).
        scoring: as in :func:`build_report` (``None``: the run's headline scoring).

    Returns:
        ``{"k", "seeds", "scoring_used", "parents": [uid...], "sub_problems": [n_p...], "per_seed":
        {seed: {"subs_solved": [int per parent], "solved": [bool per parent]}}}``: the sub-problems of
        each parent solved within k attempts (Sub@k's numerator) and whether one attempt solves them all
        (Par@k's). Summed over parents they give the report's per-seed Sub@k and Par@k.

    Raises:
        FileNotFoundError, ValueError: as :func:`build_report`.
    """
    if scoring is not None and scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    store = _store(run)
    man = store.read_manifest()
    judge = man.active_judge
    used = scoring or ("liberal" if judge is not None else "strict")
    table = turn_verdicts(man, RunRows.read(store, llm=judge is not None), judge["judge_id"] if judge is not None else None)
    values = [t.liberal if used == "liberal" else t.strict for t in table]
    per_seed: dict[int, dict[str, list[Any]]] = {}
    for i, seed in enumerate(man.seeds):
        grid = _grid(man, values, i)
        per_seed[seed] = {"subs_solved": [round(sub_at_k([p], man.k) * len(p) / 100) for p in grid],
                          "solved": [par_at_k([p], man.k) > 0 for p in grid]}
    return {"k": man.k, "seeds": list(man.seeds), "scoring_used": used, "parents": [p.uid for p in man.parents],
            "sub_problems": [len(p.subs) for p in man.parents], "per_seed": per_seed}


def _conventions(per_seed: dict[str, dict[int, Grid]], judgeable: dict[int, Grid], seeds: list[int], k: int) -> dict[str, Any]:
    """Physics-R1 reporting conventions: strict vs liberal, per sub-problem vs per problem.

    Each accuracy comes with the full denominator and with unjudgeable (or not yet judged) attempts
    left out.
    """
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


def _truncation(table: list[TurnVerdict], seeds: list[int], headline: str) -> dict[str, Any]:
    """Turns cut by the token limit and turns with no visible text, overall and per seed (``report["truncation"]``).

    Counted over the *answered* turns (a generation that did not fail): ``truncated`` has
    ``finish_reason`` ``"length"``, ``empty`` has no text once reasoning is removed
    (:func:`studybench.answers.strip_reasoning`; a reply cut inside ``<think>`` is both). Among the
    incorrect answered attempts (by the headline scoring), how many were truncated or empty. A
    warning when a share exceeds :data:`TRUNCATION_WARN_SHARE` overall or in one seed, and
    ``measured_nothing`` when no turn of the selection has a complete, non-empty completion.
    """
    keys = ("turns", "truncated", "empty", "incorrect", "incorrect_truncated", "incorrect_empty")
    counts: dict[int, Counter[str]] = {s: Counter(dict.fromkeys(keys, 0)) for s in seeds}
    unanswered: Counter[str] = Counter()
    for t in table:
        g = t.rule.generation
        if g is None or g.error or g.completion is None:
            unanswered["not_generated" if g is None else "failed"] += 1
            continue
        c = counts[t.key.seed]
        truncated, empty = g.finish_reason == "length", not strip_reasoning(g.completion)
        incorrect = not (t.liberal if headline == "liberal" else t.strict)
        c.update({"turns": 1, "truncated": truncated, "empty": empty, "incorrect": incorrect,
                  "incorrect_truncated": incorrect and truncated, "incorrect_empty": incorrect and empty})
        c["complete"] += not truncated and not empty

    def group(c: Counter[str]) -> dict[str, Any]:
        n = c["turns"]
        out: dict[str, Any] = {"turns": n}
        for kk in ("truncated", "empty"):
            out[kk] = c[kk]
            out[f"{kk}_share"] = round(c[kk] / n, 6) if n else None
        out.update({kk: c[kk] for kk in ("incorrect", "incorrect_truncated", "incorrect_empty")})
        return out

    total: Counter[str] = Counter()
    for c in counts.values():
        total.update(c)
    overall = group(total)
    per_seed = {str(s): group(counts[s]) for s in seeds}
    over = [(name, g) for name, g in [("overall", overall), *((f"seed {s}", g) for s, g in per_seed.items())]
            if any((g[f"{kk}_share"] or 0) > TRUNCATION_WARN_SHARE for kk in ("truncated", "empty"))]
    measured_nothing = bool(table) and total["complete"] == 0

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    advice = ("Raise --max-tokens (the completion budget) or --context-budget (prompt + completion)."
              if overall["truncated"] or overall["empty"] else "See the failed turns above."
              if unanswered["failed"] else "Run the same command again to generate them.")
    warning = None
    if measured_nothing:
        warning = (f"this run measured nothing: none of its {plural(len(table), 'turn')} has a complete, non-empty completion "
                   f"({overall['truncated']} hit the token limit, {overall['empty']} have no visible text, "
                   f"{unanswered['failed']} failed, {unanswered['not_generated']} not generated); "
                   f"its scores say nothing about the model. {advice}")
    elif over:
        name, g = over[0]
        warning = (f"{pct(g['truncated_share'])} of the answered turns ({g['truncated']} of {g['turns']}, {name}) hit the "
                   f"token limit (finish_reason length) and {pct(g['empty_share'])} ({g['empty']}) have no visible text; "
                   f"{overall['incorrect_truncated']} of {plural(overall['incorrect'], 'incorrect attempt')} {'was' if overall['incorrect_truncated'] == 1 else 'were'} truncated. {advice}")
    return {"warn_share": TRUNCATION_WARN_SHARE, "warning": warning, "measured_nothing": measured_nothing,
            "overall": overall, "per_seed": per_seed}


def _kept_artefacts(man: Manifest) -> dict[str, dict[str, str]]:
    """``{name: {"path", "sha256"}}`` of the artefact files the run directory keeps (known names only)."""
    stored = man.artefacts.get("stored")
    if not isinstance(stored, dict):
        return {}
    return {name: {"path": f"{ARTEFACTS_DIR}/{ARTEFACT_FILES[name]}", "sha256": str(ref.get("sha256"))[:64]}
            for name, ref in stored.items() if name in ARTEFACT_FILES and isinstance(ref, dict)}


def _skipped_parents(table: list[TurnVerdict]) -> list[dict[str, str]]:
    """The parents skipped because their prompt does not fit the context, with why (in selection order)."""
    out: dict[str, str] = {}
    for t in table:
        g = t.rule.generation
        if g is not None and g.error and g.error.startswith(SKIPPED_PARENT) and t.key.parent not in out:
            out[t.key.parent] = g.error[len(SKIPPED_PARENT):]
    return [{"parent": p, "reason": r} for p, r in out.items()]


def _reason_kind(reason: str) -> str:
    """A verdict reason with its specific values folded, so reasons can be counted by kind."""
    r = reason or "incorrect: unspecified"
    r = re.sub(r"'[^']*'", "'…'", r)
    r = re.sub(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", "N", r)
    return r[:100]


def write_report(run: RunStore | Path | str, scoring: str | None = None, pricing: Pricing | None = None) -> dict[str, Any]:
    """Build the report (:func:`build_report`) and write ``report.json`` and ``report.md`` atomically.

    Args:
        run: the run directory (or its :class:`RunStore`).
        scoring: see :func:`build_report`.
        pricing: prices for the report's cost; recorded in the run directory (``pricing.json``), so
            later reports of the run use them too. ``None``: the recorded ones, if any.

    Returns:
        The report.

    Raises:
        FileNotFoundError, ValueError: see :func:`build_report`; OSError when a file cannot be written.
    """
    store = _store(run)
    rep = build_report(store, scoring, pricing=pricing)
    if pricing is not None:
        record_pricing(store, pricing)
    atomic_write_text(store.root / "report.json", dumps_json(rep) + "\n")
    atomic_write_text(store.root / "report.md", render_markdown(rep))
    return rep

