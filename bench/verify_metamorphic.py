"""Metamorphic pairs from every gold, judged by the rule verifier: precision and recall per transformation.

Every gold the package has (both test sets, the training layers, the UGPhysics golds) is turned into
labelled pairs by :mod:`studybench.testing.pairgen` (equivalent forms computed with SymPy, written
variation, pint unit conversions, words, TF/MC sentences, and near misses whose label is checked
numerically), each judged by ``Verifier.verify_responses``. Prints:

* the gold counts per source and what the generator left out (unreadable boxes, failures);
* the table per transformation: pairs, precision, recall, false accepts (near misses), unparsable
  verdicts, timeouts; then per family and overall;
* the most frequent failure kinds (transformation x normalised reason), with examples;
* the unparsable rate (verdicts whose reason says the answer could not be read) and the time taken.

Writes to ``--out`` (default ``$TMPDIR/studybench-metamorphic``; never the repository):
``pairs.jsonl`` (every pair with ``correct`` and ``reason``), ``failures.jsonl`` (the wrong verdicts)
and ``summary.json`` (the table and counts). The pairs file is in the dev-pair format, so
``studybench verify-file OUT/pairs.jsonl`` re-judges it.

Usage::

    python bench/verify_metamorphic.py                         # everything (several minutes on 2 cores)
    python bench/verify_metamorphic.py --golds 200 --workers 2 # a deterministic sample of 200 golds
    python bench/verify_metamorphic.py --only eq:solve,miss:sign --cap 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from studybench.files import atomic_write_text, dumps_json
from studybench.testing.pairgen import (
    UNPARSABLE,
    GenStats,
    failure_kinds,
    format_table,
    generate_pairs,
    judge_pairs,
    load_golds,
    reason_kind,
    score,
    subsample,
)
from studybench.verify import Verifier


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=None, help="StudyBench data (default $STUDYBENCH_DATA)")
    ap.add_argument("--ugphysics", type=Path, default=None, help="UGPhysics root (default beside the data dir)")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "studybench-metamorphic")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=1, help="pairs per gold and transformation (default %(default)s)")
    ap.add_argument("--golds", type=int, default=None, help="a deterministic sample of N golds (default: all)")
    ap.add_argument("--only", default="", help="comma list of transformations (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0, help="verifier timeout per pair, seconds")
    ap.add_argument("--examples", type=int, default=3, help="examples per failure kind (default %(default)s)")
    ap.add_argument("--kinds", type=int, default=25, help="failure kinds listed (default %(default)s)")
    args = ap.parse_args()

    t_start = time.monotonic()
    gs = load_golds(args.data_dir, ugphysics_dir=args.ugphysics)
    golds = subsample(gs.golds, args.golds, args.seed) if args.golds else gs.golds
    print(f"golds: {len(gs.golds)} unique ({dict(gs.loaded)} read, {gs.duplicates} duplicates); "
          f"left out: {dict(gs.skipped) or 'none'}; using {len(golds)}", flush=True)
    if not golds:
        print("no golds found (set STUDYBENCH_DATA)", file=sys.stderr)
        return 1

    st = GenStats()
    t0 = time.monotonic()
    pairs = generate_pairs(golds, seed=args.seed, cap=args.cap,
                           transformations=[s for s in args.only.split(",") if s] or None, stats=st)
    gen_s = time.monotonic() - t0
    print(f"generated {len(pairs)} pairs in {gen_s:.0f} s ({sum(p.label for p in pairs)} equivalent, "
          f"{sum(not p.label for p in pairs)} near misses); boxes {dict(st.slots)}; unreadable math boxes "
          f"{dict(st.unreadable)}; failures {sum(st.failed.values())} {dict(st.failed.most_common(5))}; "
          f"rejected {dict(st.rejected)}", flush=True)

    t0 = time.monotonic()
    with Verifier(workers=args.workers, timeout=args.timeout) as v:
        verdicts = judge_pairs(pairs, v)
        judge_s = time.monotonic() - t0
        # for the helpers working from failures.jsonl: can the verifier read the gold box at all?
        gold_problem: dict[tuple[str, str], str | None] = {}
        for p, vd in zip(pairs, verdicts, strict=True):
            if bool(vd.correct) != p.label and (p.gold_box, p.slot_type) not in gold_problem:
                gold_problem[(p.gold_box, p.slot_type)] = v.check_gold_parsable(p.gold_box, p.slot_type)
    rows = score(pairs, verdicts)
    print()
    print(format_table(rows))

    fk = failure_kinds(pairs, verdicts)
    examples: dict[tuple[str, str], list[int]] = {}
    for i, (p, vd) in enumerate(zip(pairs, verdicts, strict=True)):
        if bool(vd.correct) != p.label:
            examples.setdefault((p.transformation, reason_kind(vd.reason)), []).append(i)
    bad_gold = sum(1 for p, vd in zip(pairs, verdicts, strict=True)
                   if bool(vd.correct) != p.label and gold_problem.get((p.gold_box, p.slot_type)))
    print(f"\ntop failure kinds ({sum(fk.values())} wrong verdicts, {len(fk)} kinds; {bad_gold} of them on a gold box "
          f"the verifier's gold check cannot read):")
    for (t, why), n in fk.most_common(args.kinds):
        print(f"  {n:>5}  {t:<20} {why}")
        for i in examples[(t, why)][: args.examples]:
            p = pairs[i]
            print(f"           gold: {p.gold_box}\n           pred: {p.pred_box}   [{p.gold_id}, {p.answer_type}"
                  f"{'/' + p.type_sequence if p.type_sequence else ''}]")

    unpars = sum(1 for vd in verdicts if UNPARSABLE.search(vd.reason or ""))
    unpars_pos = sum(1 for p, vd in zip(pairs, verdicts, strict=True) if p.label and UNPARSABLE.search(vd.reason or ""))
    total_s = time.monotonic() - t_start
    print(f"\nunparsable verdicts: {unpars}/{len(pairs)} = {unpars / max(len(pairs), 1):.3f} of all pairs; "
          f"{unpars_pos}/{sum(p.label for p in pairs)} of the equivalent ones")
    print(f"time: {total_s:.0f} s in all (golds + generation {gen_s:.0f} s, verifier {judge_s:.0f} s, "
          f"{len(pairs) / max(judge_s, 1e-9):.1f} pairs/s with {args.workers} workers)")

    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    fails = []
    for p, vd in zip(pairs, verdicts, strict=True):
        row = p.to_json() | {"correct": bool(vd.correct), "reason": vd.reason}
        lines.append(json.dumps(row, ensure_ascii=False))
        if bool(vd.correct) != p.label:
            fails.append(json.dumps(row | {"gold_unreadable": gold_problem.get((p.gold_box, p.slot_type))}, ensure_ascii=False))
    atomic_write_text(args.out / "pairs.jsonl", "\n".join(lines) + "\n")
    atomic_write_text(args.out / "failures.jsonl", "\n".join(fails) + ("\n" if fails else ""))
    summary = {
        "golds": len(golds), "golds_loaded": dict(gs.loaded), "pairs": len(pairs), "seed": args.seed, "cap": args.cap,
        "unreadable_boxes": dict(st.unreadable), "generator_failures": {f"{a}/{b}": n for (a, b), n in st.failed.items()},
        "rows": [{"transformation": r.name, "family": r.family, "pairs": r.pairs, "precision": r.precision,
                  "recall": r.recall, "false_accepts": r.false_accepts, "unparsable": r.unparsable,
                  "timeouts": r.timeouts} for r in rows],
        "failure_kinds": [{"transformation": t, "reason": why, "n": n} for (t, why), n in fk.most_common()],
        "unparsable": unpars, "seconds": {"total": total_s, "generation": gen_s, "verifier": judge_s},
        "workers": args.workers, "cpu_count": os.cpu_count(),
    }
    atomic_write_text(args.out / "summary.json", dumps_json(summary))
    print(f"wrote {args.out}/pairs.jsonl ({len(lines)}), failures.jsonl ({len(fails)}), summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
