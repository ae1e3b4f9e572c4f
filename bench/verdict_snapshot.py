"""Snapshot every rule verdict on the real inputs, and compare two snapshots.

A refactoring of the verifier must not change what it decides. This script verifies three input sets
with the rule verifier and writes one JSON line per item (set, index, the compared gold boxes and
extracted boxes, correct, reason):

* ``dev``: the labelled dev pairs (``dev_pairs.jsonl``);
* ``gold-self``: every sub-problem of both test sets answered with its own gold boxes;
* ``gold-sol``: every sub-problem whose reference solution has a box, answered with that solution;
* ``ug-self``: every UGPhysics problem (``--ugphysics``, default ``<repo>/../shared/data/ugphysics``;
  skipped when absent) answered with its own gold boxes, with its stated unit as ``gold_unit``.

Usage::

    python bench/verdict_snapshot.py --out before.jsonl             # snapshot
    python bench/verdict_snapshot.py --out after.jsonl --compare before.jsonl
                                                                    # snapshot, then list every item
                                                                    # whose verdict or reason differs

Exit status 1 when ``--compare`` finds a difference. The timeout is generous (``--timeout``, default
60 s) so that a loaded machine does not turn a verdict into "timed out".

Paths: ``--dev-pairs`` (default ``<repo>/../shared/data/verifier/dev_pairs.jsonl``) and
``--data-dir`` (default ``$STUDYBENCH_DATA``, else ``<repo>/../shared/data/studybench``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from studybench.datasets import load_dataset
from studybench.verify import Verdict, Verifier, extract_pair

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DEV = REPO.parent / "shared" / "data" / "verifier" / "dev_pairs.jsonl"
DEFAULT_DATA = Path(os.environ.get("STUDYBENCH_DATA") or REPO.parent / "shared" / "data" / "studybench")


def inputs(dev_path: Path, data_dir: Path) -> list[dict[str, Any]]:
    """Every item of the three sets: set name, gold string, response, answer_type, type_sequence, gold_unit."""
    items: list[dict[str, Any]] = []
    with dev_path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                items.append({"set": "dev", "gold": r["gold"], "response": r["response"], "answer_type": str(r["answer_type"]),
                              "type_sequence": str(r.get("type_sequence") or ""), "gold_unit": r.get("gold_unit")})
    for split in ("application", "transfer"):
        ds = load_dataset(data_dir / f"{split}.json", name=split)
        for sl in ds.sub_problem_refs():
            sub = sl.sub
            at, ts = sub.answer_type.value, sub.type_sequence_str
            boxes = list(sub.boxes)
            items.append({"set": "gold-self", "gold": sub.answer, "answer_type": at, "type_sequence": ts, "gold_unit": None,
                          "response": "Final Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in boxes)})
            if "\\boxed" in (sub.solution or "") or "\\fbox" in (sub.solution or ""):
                items.append({"set": "gold-sol", "gold": sub.answer, "answer_type": at, "type_sequence": ts, "gold_unit": None,
                              "response": sub.solution})
    return items


PRIMITIVE = {"NV", "EX", "EQ", "IN", "MC", "TF", "QL"}


def ugphysics_items(root: Path) -> list[dict[str, Any]]:
    """UGPhysics golds answered with themselves (one item per problem whose answer types are all primitive)."""
    items: list[dict[str, Any]] = []
    for path in sorted(root.glob("*/en.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                types = [t.strip().upper() for t in str(r.get("answer_type") or "").split(",")]
                if not types or any(t not in PRIMITIVE for t in types):
                    continue
                at, ts = (types[0], "") if len(types) == 1 else ("TUP", ",".join(types))
                boxes = re.findall(r"\\boxed\{", str(r.get("answers") or ""))
                if not boxes:
                    continue
                unit = r.get("unit")
                items.append({"set": "ug-self", "gold": r["answers"], "answer_type": at, "type_sequence": ts,
                              "gold_unit": unit if isinstance(unit, str) else None,
                              "response": "Final Answer: " + str(r["answers"])})
    return items


def snapshot(items: list[dict[str, Any]], workers: int | None, timeout: float) -> list[dict[str, Any]]:
    """Verify every item (gold boxes and final answers by :func:`studybench.verify.extract_pair`); one row per item."""
    pairs = [extract_pair(it["gold"], it["response"], it["answer_type"], it["type_sequence"]) for it in items]
    todo = [(*p, it["answer_type"], it["type_sequence"], it["gold_unit"]) for it, p in zip(items, pairs, strict=True)
            if not isinstance(p, Verdict)]
    with Verifier(workers=workers, timeout=timeout) as v:
        verdicts = iter(v.verify_many(todo))
    rows = []
    counters: dict[str, int] = {}
    for it, p in zip(items, pairs, strict=True):
        i = counters.get(it["set"], 0)
        counters[it["set"]] = i + 1
        golds, preds, verdict = ([], [], p) if isinstance(p, Verdict) else (*p, next(verdicts))
        rows.append({"set": it["set"], "i": i, "gold": golds, "extracted": preds,
                     "correct": bool(verdict.correct), "reason": verdict.reason})
    return rows


def compare(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """One line per item whose boxes, verdict or reason differ (and per item present on one side only)."""
    o = {(r["set"], r["i"]): r for r in old}
    n = {(r["set"], r["i"]): r for r in new}
    out = []
    for key in sorted(set(o) | set(n)):
        a, b = o.get(key), n.get(key)
        if a is None or b is None:
            out.append(f"{key}: only in {'new' if a is None else 'old'}")
            continue
        for fld in ("gold", "extracted", "correct", "reason"):
            if a[fld] != b[fld]:
                out.append(f"{key} {fld}: {a[fld]!r} -> {b[fld]!r}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--dev-pairs", type=Path, default=DEFAULT_DEV)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--ugphysics", type=Path, default=REPO.parent / "shared" / "data" / "ugphysics")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    items = inputs(args.dev_pairs, args.data_dir)
    if args.ugphysics.is_dir():
        items += ugphysics_items(args.ugphysics)
    rows = snapshot(items, args.workers, args.timeout)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    sets: dict[str, list[int]] = {}
    for r in rows:
        sets.setdefault(r["set"], []).append(r["correct"])
    for name, vals in sets.items():
        print(f"{name}: {len(vals)} items, {sum(vals)} verified correct")
    if args.compare is None:
        return 0
    old = [json.loads(line) for line in args.compare.read_text(encoding="utf-8").splitlines() if line.strip()]
    diff = compare(old, rows)
    print(f"compared with {args.compare}: {len(diff)} differences")
    for line in diff:
        print("  " + line)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
