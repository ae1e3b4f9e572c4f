"""The two filters of paper section 2.1 on the evaluation harness: ``build retry`` and ``build capability``.

Both run :func:`studybench.evaluate.run_eval` (the library behind ``studybench eval``) and read each
parent's attempts from the run's rule verdicts (strict scoring: the filter never asks an LLM judge).

**Solved.** An attempt *solves a parent* when it solves every sub-problem of the parent (the Par@k
criterion of the test sets' headline metric). ``solves`` = the number of the k attempts (of the one
seed) that do.

* Retry (Naive Reachability Filter): a parent is **admitted** when ``solves >= 1`` with the guidance
  injected. ``DIR/admitted.jsonl`` has one line per candidate parent with ``admitted``, ``solves``, and
  per sub-problem the attempts that solved it (so a per-sub-problem reading is possible too).
* Capability Filter: ``failed`` (``solves == 0``), ``solved_once`` (exactly 1) and ``solved`` (2 or
  more). Failed *textbook* parents (``source_kind`` starting ``textbook``) are subsampled per
  sub-discipline (``problem_type``, spellings merged) to at most ``per_discipline``, by a seeded draw
  that depends only on the seed, the label and the parents' ids (not on file order); failed parents of
  other kinds are all kept; for the subjects named in ``admit_solved_once_for``, solved-once parents
  are added (seeded, up to ``per_discipline`` in all when it is given).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.datasets import Dataset
from studybench.escaping import md_cell
from studybench.evaluate import NEW_RUN_HINT, EvalError, EvalSpec, ProgressFn, run_eval
from studybench.files import (
    MAX_DATA_BYTES,
    atomic_write_lines,
    atomic_write_text,
    dumps_json,
    jsonl_lines,
    parse_json,
    read_user_text,
)
from studybench.models import ChatBackend
from studybench.records import Parent, label_map, normalise_label
from studybench.store import RunRows, RunStore, turn_verdicts

__all__ = ["CapabilityResult", "FilterRunIncompleteError", "attempt_solves", "partition", "run_capability", "run_retry",
           "select_parents"]


class FilterRunIncompleteError(RuntimeError):
    """Turns of a filter's run failed after all the backend's retries (HTTP errors, timeouts, dropped
    connections): nothing is admitted or selected from an incomplete run. The run directory keeps the turns
    done; running the same filter again asks the failed turns again.

    Attributes:
        failed: the number of failed turns.
        run_dir: the filter's run directory.
    """

    def __init__(self, failed: int, run_dir: Path, what: str) -> None:
        self.failed, self.run_dir = failed, run_dir
        super().__init__(f"{failed} turn{'' if failed == 1 else 's'} of the filter run in {run_dir} failed after all "
                         f"retries (HTTP errors, timeouts; see the run's report), so {what}. Re-running the same "
                         "command asks them again (the turns done are kept).")


def attempt_solves(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per parent uid: ``solves`` (attempts solving every sub-problem) and ``sub_solves`` (per sub-problem).

    Args:
        run_dir: a finished run directory (one seed is read: the first).

    Returns:
        ``{uid: {"solves": int, "k": int, "sub_solves": {problem_id: int}}}``.
    """
    store = RunStore(run_dir)
    man = store.read_manifest()
    table = turn_verdicts(man, RunRows.read(store, llm=False))
    seed = man.seeds[0]
    per: dict[tuple[str, str, int], bool] = {}
    out: dict[str, dict[str, Any]] = {}
    for t in table:
        if t.key.seed != seed:
            continue
        rec = out.setdefault(t.key.parent, {"solves": 0, "k": man.k, "sub_solves": {}})
        rec["sub_solves"][t.key.sub_id] = rec["sub_solves"].get(t.key.sub_id, 0) + int(t.strict)
        k = (t.key.parent, "", t.key.attempt)
        per[k] = per.get(k, True) and t.strict
    for (uid, _, _), ok in per.items():
        out[uid]["solves"] += int(ok)
    return out


def _spec(dataset: Dataset, model: str, base_url: str | None, k: int, seed: int, guidance: Path | None,
          extra: dict[str, Any]) -> EvalSpec:
    return EvalSpec(dataset=dataset, model=model, base_url=base_url, k=k, seeds=[seed], guidance=guidance,
                    verifier_mode="rule", ignore_unmatched_guidance=True, **extra)


def _run_retry_eval(spec: EvalSpec, run_dir: Path, backend: ChatBackend | None, progress: ProgressFn | None = None) -> Any:
    """:func:`run_eval` into the retry's run directory (``WORK/retry``). A refusal to resume names that
    directory as the way to a new run (``build retry`` has no ``--out``)."""
    try:
        return run_eval(spec, run_dir, backend=backend, progress=progress)
    except EvalError as e:
        if e.field != "out" or NEW_RUN_HINT not in str(e):
            raise
        raise EvalError(str(e).replace(NEW_RUN_HINT, f"move {run_dir} away (or use another --work) for a new run"),
                        "work") from None


def run_retry(work: Path, dataset: Dataset, model: str, *, base_url: str | None = None, k: int = 8, seed: int = 0,
              backend: ChatBackend | None = None, eval_options: dict[str, Any] | None = None,
              progress: ProgressFn | None = None) -> dict[str, Any]:
    """The Naive Reachability Filter: the filter model with ``DIR/guidance.jsonl`` injected, pass@k.

    The candidates are the parents with at least one sub-problem in the guidance file. Writes the run
    to ``DIR/retry/`` (resumable) and ``DIR/admitted.jsonl``.

    Args:
        work: the work directory.
        dataset: the test set the guidance was written for.
        model: the filter model.
        base_url: its endpoint.
        k: attempts per parent.
        seed: the run seed.
        backend: a chat backend to use instead (tests).
        eval_options: further :class:`~studybench.evaluate.EvalSpec` fields (sampling, concurrency).
        progress: the evaluation's progress (:data:`~studybench.evaluate.ProgressFn`: turns per phase).

    Returns:
        ``{"candidates", "admitted", "run_dir"}``.

    Raises:
        ValueError: no guidance file or no candidate (the message says which).
        studybench.evaluate.EvalError: the evaluation cannot run.
        FilterRunIncompleteError: turns failed after all retries (``admitted.jsonl`` is not written).
    """
    gfile = work / "guidance.jsonl"
    if not os.path.lexists(gfile):
        raise ValueError(f"{gfile}: missing; run `studybench build guide` first")
    keys = set()
    for n, line in jsonl_lines(read_user_text(gfile, limit=MAX_DATA_BYTES)):  # InputFileError: a ValueError
        try:
            rec = parse_json(line, gfile, line=n)
            keys.add((str(rec["source"]), str(rec.get("year") or ""), str(rec["source_problem_id"])))
        except (ValueError, KeyError, TypeError):
            continue
    parents = [p for p in dataset.parents if p.key in keys]
    if not parents:
        raise ValueError(f"{gfile}: no guidance entry matches a parent of {dataset.name}")
    cands = Dataset.from_parents(parents, f"{dataset.name}-retry")
    run_dir = work / "retry"
    res = _run_retry_eval(_spec(cands, model, base_url, k, seed, gfile, eval_options or {}), run_dir, backend, progress)
    if res.failed_turns:
        raise FilterRunIncompleteError(res.failed_turns, run_dir, f"{work / 'admitted.jsonl'} was not written")
    solves = attempt_solves(run_dir)
    lines = []
    for p in parents:
        s = solves.get(p.uid, {"solves": 0, "k": k, "sub_solves": {}})
        lines.append(json.dumps({"source": p.source, "year": p.year, "source_problem_id": p.source_problem_id,
                                 "admitted": s["solves"] >= 1, **s}, ensure_ascii=False, allow_nan=False) + "\n")
    atomic_write_lines(work / "admitted.jsonl", lines)
    return {"candidates": len(parents), "admitted": sum(solves.get(p.uid, {}).get("solves", 0) >= 1 for p in parents),
            "run_dir": str(run_dir)}


def partition(solves: int) -> str:
    """``failed`` (0 attempts solve the parent), ``solved_once`` (1) or ``solved`` (2 or more)."""
    return "failed" if solves <= 0 else "solved_once" if solves == 1 else "solved"


def _draw(parents: list[Parent], n: int | None, seed: int, label: str) -> list[Parent]:
    ordered = sorted(parents, key=lambda p: p.uid)
    if n is None or len(ordered) <= n:
        return ordered
    rng = random.Random(f"{seed}:{normalise_label(label)}")
    return sorted(rng.sample(ordered, n), key=lambda p: p.uid)


def select_parents(parents: list[Parent], groups: dict[str, str], *, seed: int, per_discipline: int | None = None,
                   admit_solved_once_for: list[str] | tuple[str, ...] = ()) -> list[Parent]:
    """The seeded selection of the Capability Filter (see the module docstring).

    Args:
        parents: the pool.
        groups: partition of each parent uid (:func:`partition`).
        seed: the draw's seed.
        per_discipline: most failed textbook parents kept per sub-discipline (``None``: all).
        admit_solved_once_for: sub-disciplines whose solved-once parents are admitted too.

    Returns:
        The selected parents, in pool order.
    """
    labels = label_map([p.problem_type for p in parents])
    thin = {normalise_label(s) for s in admit_solved_once_for}
    by_label: dict[str, dict[str, list[Parent]]] = {}
    keep: set[str] = set()
    for p in parents:
        g = groups.get(p.uid, "failed")
        label = labels.get(p.problem_type, p.problem_type)
        if g == "failed" and not p.source_kind.lower().startswith("textbook"):
            keep.add(p.uid)
            continue
        by_label.setdefault(label, {}).setdefault(g, []).append(p)
    for label, gs in by_label.items():
        chosen = _draw(gs.get("failed", []), per_discipline, seed, label)
        keep.update(p.uid for p in chosen)
        if normalise_label(label) in thin:
            room = None if per_discipline is None else max(0, per_discipline - len(chosen))
            keep.update(p.uid for p in _draw(gs.get("solved_once", []), room, seed + 1, label))
    return [p for p in parents if p.uid in keep]


@dataclass
class CapabilityResult:
    """What ``build capability`` wrote."""

    out: Path
    pool: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    selected: int = 0
    selected_sub_problems: int = 0
    table: list[dict[str, Any]] = field(default_factory=list)


def _table(pool: list[Parent], groups: dict[str, str], selected: list[Parent]) -> list[dict[str, Any]]:
    labels = label_map([p.problem_type for p in pool])
    rows: dict[str, dict[str, Any]] = {}
    sel = {p.uid for p in selected}
    for p in pool:
        label = labels.get(p.problem_type, p.problem_type) or "(none)"
        r = rows.setdefault(label, {"sub_discipline": label, "pool": 0, "failed": 0, "solved_once": 0, "solved": 0,
                                    "parents": 0, "sub_problems": 0})
        r["pool"] += 1
        r[groups.get(p.uid, "failed")] += 1
        if p.uid in sel:
            r["parents"] += 1
            r["sub_problems"] += len(p.subs())
    return sorted(rows.values(), key=lambda r: (-r["parents"], r["sub_discipline"]))


def _markdown(table: list[dict[str, Any]]) -> str:
    head = "| Sub-discipline | Pool | Failed | Solved once | Solved | Parents | Sub-problems |\n|---|---:|---:|---:|---:|---:|---:|\n"
    body = "".join(f"| {md_cell(r['sub_discipline'])} | {r['pool']} | {r['failed']} | {r['solved_once']} | {r['solved']} | "
                   f"{r['parents']} | {r['sub_problems']} |\n" for r in table)
    tot = {k: sum(r[k] for r in table) for k in ("pool", "failed", "solved_once", "solved", "parents", "sub_problems")}
    return (head + body + f"| **Total** | {tot['pool']} | {tot['failed']} | {tot['solved_once']} | {tot['solved']} | "
            f"{tot['parents']} | {tot['sub_problems']} |\n")


def run_capability(dataset: Dataset, model: str, out: Path, *, base_url: str | None = None, k: int = 8, seed: int = 0,
                   per_discipline: int | None = None, admit_solved_once_for: list[str] | tuple[str, ...] = (),
                   guidance: Path | None = None, backend: ChatBackend | None = None,
                   eval_options: dict[str, Any] | None = None, progress: ProgressFn | None = None) -> CapabilityResult:
    """The Capability Filter: pass@k of a filter model on a pool, partition, seeded selection, the test set.

    Writes under ``out``: ``run/`` (the evaluation), ``partition.jsonl`` (each parent's solves and
    group), ``test_set.json`` (the selected parents' records as in the pool file: the StudyBench schema,
    loadable by :func:`studybench.datasets.load_dataset`), ``guidance.jsonl`` (the entries of
    ``guidance`` for the selected parents, when given) and ``summary.json`` / ``summary.md`` (a Table 7
    like table per sub-discipline).

    Args:
        dataset: the candidate pool.
        model: the filter model.
        out: the output directory.
        base_url: its endpoint.
        k: attempts per parent.
        seed: the run seed and the draw's seed.
        per_discipline: most failed textbook parents per sub-discipline.
        admit_solved_once_for: sub-disciplines admitting solved-once parents.
        guidance: a guidance file to filter to the selection.
        backend: a chat backend to use instead (tests).
        eval_options: further :class:`~studybench.evaluate.EvalSpec` fields.
        progress: the evaluation's progress (:data:`~studybench.evaluate.ProgressFn`: turns per phase).

    Returns:
        The counts and the table.

    Raises:
        studybench.evaluate.EvalError: the evaluation cannot run.
        FilterRunIncompleteError: turns failed after all retries (nothing is selected or written).
        ValueError: nothing selected.
    """
    run_dir = out / "run"
    res = run_eval(_spec(dataset, model, base_url, k, seed, None, eval_options or {}), run_dir, backend=backend,
                   progress=progress)
    if res.failed_turns:
        raise FilterRunIncompleteError(res.failed_turns, run_dir, "no parent was selected")
    solves = attempt_solves(run_dir)
    groups = {p.uid: partition(solves.get(p.uid, {}).get("solves", 0)) for p in dataset.parents}
    selected = select_parents(dataset.parents, groups, seed=seed, per_discipline=per_discipline,
                              admit_solved_once_for=admit_solved_once_for)
    if not selected:
        raise ValueError(f"{dataset.name}: the filter model left no parent to select")
    atomic_write_lines(out / "partition.jsonl", [
        json.dumps({"source": p.source, "year": p.year, "source_problem_id": p.source_problem_id,
                    "sub_discipline": p.problem_type, "source_kind": p.source_kind,
                    "solves": solves.get(p.uid, {}).get("solves", 0), "k": k, "group": groups[p.uid],
                    "selected": p in selected}, ensure_ascii=False, allow_nan=False) + "\n" for p in dataset.parents])
    raw = dataset.raw if len(dataset.raw) == len(dataset.parents) else [p.model_dump(mode="json") for p in dataset.parents]
    sel = {p.uid for p in selected}
    records = [r for p, r in zip(dataset.parents, raw, strict=True) if p.uid in sel]
    atomic_write_text(out / "test_set.json", json.dumps(records, ensure_ascii=False, indent=1, allow_nan=False) + "\n")
    if guidance is not None:
        keys = {p.key for p in selected}
        kept = []
        for n, line in jsonl_lines(read_user_text(guidance, limit=MAX_DATA_BYTES)):
            try:
                rec = parse_json(line, guidance, line=n)
                if (str(rec["source"]), str(rec.get("year") or ""), str(rec["source_problem_id"])) in keys:
                    kept.append(line + "\n")
            except (ValueError, KeyError, TypeError):
                continue
        atomic_write_lines(out / "guidance.jsonl", kept)
    table = _table(dataset.parents, groups, selected)
    res = CapabilityResult(out, len(dataset.parents), dict(Counter(groups.values())), len(selected),
                           sum(len(p.subs()) for p in selected), table)
    atomic_write_text(out / "summary.json", dumps_json({"pool": res.pool, "counts": res.counts, "selected": res.selected,
                                                        "selected_sub_problems": res.selected_sub_problems,
                                                        "seed": seed, "k": k, "per_discipline": per_discipline,
                                                        "admit_solved_once_for": list(admit_solved_once_for),
                                                        "table": table}) + "\n")
    atomic_write_text(out / "summary.md", _markdown(table))
    return res
