"""Which parents an evaluation covers, and with which golds: the selection and the errata setting.

The selection, in this order (every step deterministic, each recorded in the manifest's ``selection``):

1. the file order, cut by ``parent_slice`` (``START:STOP``);
2. ``parent_ids``: only these parents (ids as reports write them, ``source/year/source_problem_id``);
3. ``exclude_ids`` and the parents the errata setting leaves out (:func:`studybench.errata.plan_errata`);
4. ``sample``: N parents drawn with ``sample_seed`` (each parent ranked by sha256 of seed and id, so a
   draw does not depend on the order or the size of the rest of the test set), optionally
   ``stratify``-ed by ``source`` or ``problem_type`` (each group gets its share of N by the largest
   remainder, at least one parent where N allows);
5. ``limit``: the first N of what is left.

The selected parents keep the file order. Unknown ids are an error naming the nearest real ids.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from studybench.datasets import Dataset
from studybench.errata import ErrataPlan, plan_errata
from studybench.evaluate.spec import DataSpec, EvalError, parse_parent_slice
from studybench.files import InputFileError, read_user_text
from studybench.records import Parent, label_map
from studybench.store import Manifest, SelectionInfo

__all__ = [
    "MAX_PARENT_IDS",
    "STRATA",
    "errata_parents",
    "plan_selection",
    "read_parent_ids",
    "sample_parents",
    "select_parents",
    "selection_info",
    "selection_values",
]

STRATA = ("source", "problem_type")
"""What a stratified sample groups parents by: their source (book or olympiad) or sub-discipline."""

MAX_PARENT_IDS = 100_000
"""The most parent ids an id list may hold."""


def read_parent_ids(path: Path | str) -> list[str]:
    """The parent ids listed in a file: one per line.

    A line holds an id as reports write it (``source/year/source_problem_id``), or the tab-separated
    key that ``studybench data ids`` prints (its first three fields name the parent; the sub-problem
    field is ignored, so that output filtered with grep is a valid list). Blank lines and lines
    starting with ``#`` are skipped; an id listed twice counts once.

    Args:
        path: the file (a regular UTF-8 file of at most 10 MB).

    Returns:
        The ids in file order.

    Raises:
        EvalError: the file cannot be read, or holds no id or too many.
    """
    try:
        text = read_user_text(path)
    except InputFileError as e:
        raise EvalError(str(e), "parent_ids") from None
    out: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        fields = line.split("\t")
        uid = "/".join(f.strip() for f in fields[:3]) if len(fields) >= 3 else s
        if uid not in out:
            out.append(uid)
        if len(out) > MAX_PARENT_IDS:
            raise EvalError(f"{path}: more than {MAX_PARENT_IDS:,} parent ids", "parent_ids")
    if not out:
        raise EvalError(f"{path}: no parent id (one per line, e.g. IPhO/1972/Q3)", "parent_ids")
    return out


def _rank(seed: int, uid: str) -> bytes:
    return hashlib.sha256(f"{seed}\x1f{uid}".encode("utf-8", "surrogatepass")).digest()


def sample_parents(parents: list[Parent], n: int, seed: int = 0, stratify: str | None = None) -> list[Parent]:
    """``n`` of ``parents`` drawn with ``seed``, in their given order (all of them when ``n`` is larger).

    Args:
        parents: the pool.
        n: how many to draw (>= 1).
        seed: the sample's seed: the same seed and pool give the same sample on every machine.
        stratify: ``None``, ``"source"`` or ``"problem_type"`` (labels normalised as reports do):
            each group gets its share of ``n`` by the largest remainder, at least one parent per group
            while ``n`` allows.

    Returns:
        The drawn parents in pool order.

    Raises:
        ValueError: ``n`` < 1 or an unknown ``stratify``.
    """
    if n < 1:
        raise ValueError(f"sample must be >= 1, got {n}")
    if stratify is not None and stratify not in STRATA:
        raise ValueError(f"stratify must be one of {', '.join(STRATA)}, got {stratify!r}")
    if n >= len(parents):
        return list(parents)
    if stratify is None:
        chosen = set(sorted(range(len(parents)), key=lambda i: _rank(seed, parents[i].uid))[:n])
        return [p for i, p in enumerate(parents) if i in chosen]
    canon = label_map(getattr(p, stratify) for p in parents)
    groups: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(parents):
        groups[canon.get(getattr(p, stratify), "(none)")].append(i)
    names = sorted(groups)
    quota = {g: n * len(groups[g]) / len(parents) for g in names}
    take = {g: min(len(groups[g]), int(quota[g])) for g in names}
    for g in sorted(names, key=lambda x: (-(quota[x] - int(quota[x])), x)) + names:  # largest remainders first
        if sum(take.values()) >= n:
            break
        if take[g] < len(groups[g]):
            take[g] += 1
    if n >= len(names):  # every group represented while n allows: one moves from the largest share
        for g in names:
            if take[g] == 0:
                donor = max(names, key=lambda x: (take[x], x))
                take[donor] -= 1
                take[g] = 1
    chosen: set[int] = set()
    for g in names:
        chosen |= set(sorted(groups[g], key=lambda i: _rank(seed, parents[i].uid))[: take[g]])
    return [p for i, p in enumerate(parents) if i in chosen]


def _unknown(ids: list[str], known: list[str], what: str, field: str) -> None:
    have = set(known)
    missing = [x for x in ids if x not in have]
    if not missing:
        return
    first = missing[0]
    near = difflib.get_close_matches(first, known, n=3, cutoff=0.5)
    hint = f" (nearest: {', '.join(near)})" if near else ""
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    raise EvalError(f"{field}: {what} {first!r}{more} is not a parent of the test set{hint}; "
                    "parent ids read source/year/source_problem_id as reports write them "
                    "(list them with `studybench data ids`)", field)


def select_parents(ds: Dataset, limit: int | None = None, parent_slice: str | None = None, *,
                   parent_ids: list[str] | None = None, exclude_ids: list[str] | None = None,
                   sample: int | None = None, sample_seed: int = 0, stratify: str | None = None,
                   drop: dict[str, str] | None = None) -> list[Parent]:
    """The selected parents of ``ds`` (see the module docstring for the order of the steps).

    Args:
        ds: the test set.
        limit: at most the first ``limit`` parents of the selection.
        parent_slice: ``"START:STOP"`` of the file order.
        parent_ids: only these parents.
        exclude_ids: never these parents.
        sample: draw this many parents (:func:`sample_parents`).
        sample_seed: the sample's seed.
        stratify: ``"source"`` or ``"problem_type"``: a stratified sample.
        drop: more parents to leave out, by uid (the errata setting's), before the sample is drawn.

    Returns:
        The parents, in file order.

    Raises:
        EvalError: a malformed slice, a limit or sample below 1, an unknown id, an id outside the
            slice, or an empty selection (the message says which step emptied it).
    """
    try:
        start, stop = parse_parent_slice(parent_slice)
    except ValueError as e:
        raise EvalError(f"parent_slice: {e}", "parent_slice") from None
    if limit is not None and limit < 1:
        raise EvalError(f"limit: must be >= 1, got {limit}", "limit")
    if sample is not None and sample < 1:
        raise EvalError(f"sample: must be >= 1, got {sample}", "sample")
    if stratify is not None and (stratify not in STRATA or sample is None):
        raise EvalError(f"stratify: one of {', '.join(STRATA)}, with a sample (--sample N)", "stratify")
    uids = [p.uid for p in ds.parents]
    sel = ds.parents[start:stop]
    steps = [f"the slice [{start}:{stop}]" if parent_slice else "the test set"]
    if parent_ids:
        _unknown(parent_ids, uids, "parent", "parent_ids")
        inside = {p.uid for p in sel}
        outside = [x for x in parent_ids if x not in inside]
        if outside:
            raise EvalError(f"parent_ids: {outside[0]!r} is outside the slice [{start}:{stop}]", "parent_ids")
        wanted = set(parent_ids)
        sel = [p for p in sel if p.uid in wanted]
        steps.append(f"{len(wanted)} parent ids")
    if exclude_ids:
        _unknown(exclude_ids, uids, "excluded parent", "exclude_ids")
        out = set(exclude_ids)
        sel = [p for p in sel if p.uid not in out]
        steps.append(f"{len(out)} exclusions")
    if drop:
        sel = [p for p in sel if p.uid not in drop]
        steps.append("the errata setting's exclusions")
    if sample is not None and sel:
        sel = sample_parents(sel, sample, sample_seed, stratify)
    if limit is not None:
        sel = sel[:limit]
    if not sel:
        raise EvalError(f"the selection holds no parents of {ds.name} (after {', '.join(steps)})", "parent_slice")
    return sel


def plan_selection(spec: DataSpec, ds: Dataset) -> tuple[list[Parent], ErrataPlan]:
    """The parents ``spec`` selects from ``ds``, with the golds its errata setting scores.

    Args:
        spec: the data part of the evaluation (``EvalSpec.data``: ``parent_slice``, ``parent_ids``, ``exclude_ids``, ``sample``,
            ``sample_seed``, ``stratify``, ``limit``, ``errata``).
        ds: the test set.

    Returns:
        The selected parents (corrected golds with ``errata="apply"``) and the errata plan.

    Raises:
        EvalError: as :func:`select_parents`.
    """
    plan = plan_errata(ds.parents, spec.errata)
    if plan.drop:  # name only the parents the setting takes out of this selection
        pool = {p.uid for p in select_parents(ds, None, spec.parent_slice, parent_ids=spec.parent_ids,
                                              exclude_ids=spec.exclude_ids)}
        plan.drop = {u: why for u, why in plan.drop.items() if u in pool}
    parents = select_parents(ds, spec.limit, spec.parent_slice, parent_ids=spec.parent_ids, exclude_ids=spec.exclude_ids,
                             sample=spec.sample, sample_seed=spec.sample_seed, stratify=spec.stratify, drop=plan.drop)
    return plan.apply(parents), plan


def selection_info(spec: DataSpec, parents: list[Parent]) -> SelectionInfo:
    """The manifest's ``selection`` (the new keys only when used: older manifests read the same)."""
    extra: dict[str, Any] = {}
    if spec.parent_ids:
        extra["parent_ids"] = list(spec.parent_ids)
    if spec.exclude_ids:
        extra["exclude_ids"] = list(spec.exclude_ids)
    if spec.sample is not None:
        extra.update(sample=spec.sample, sample_seed=spec.sample_seed, stratify=spec.stratify)
    return SelectionInfo(slice=spec.parent_slice, limit=spec.limit, parents=len(parents), **extra)


def selection_values(manifest: Manifest) -> dict[str, Any]:
    """The :class:`~studybench.evaluate.spec.DataSpec` selection fields and errata setting a run recorded (for ``reproduce``)."""
    sel = manifest.selection
    extra = sel.model_extra or {} if sel is not None else {}
    errata = (manifest.errata or {}).get("mode") if isinstance(manifest.errata, dict) else None
    return {
        "parent_slice": sel.slice if sel is not None else None,
        "limit": sel.limit if sel is not None else None,
        "parent_ids": extra.get("parent_ids"),
        "exclude_ids": extra.get("exclude_ids") or [],
        "sample": extra.get("sample"),
        "sample_seed": extra.get("sample_seed") or 0,
        "stratify": extra.get("stratify"),
        "errata": errata if errata in ("official", "apply", "exclude") else "official",
    }


def errata_parents(manifest: Manifest, parents: list[Parent]) -> list[Parent]:
    """``parents`` with the golds a run scored: corrected when its manifest records ``errata: apply``.

    Args:
        manifest: the run's manifest.
        parents: parents of its test set (e.g. those of its selection).

    Returns:
        The parents as the run scored them (none left out: the manifest's selection already is).
    """
    mode = manifest.errata.get("mode") if isinstance(manifest.errata, dict) else None
    if mode != "apply":
        return parents
    plan = plan_errata(parents, "apply")
    plan.drop = {}
    return plan.apply(parents)
