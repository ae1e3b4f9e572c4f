"""Benchmark of the contamination audit (paper 2.3, appendix H) on a 6,432 x 500 workload from the real data.

Train side (6,432 records): the StudyBench instruction layers (``train/*.json``), the UGPhysics problems
(``ugphysics/*/en.jsonl``) and perturbed copies of them (word drops, adjacent swaps, changed numbers).
Eval side (500 records): the sub-problems of the Application and Transfer sets plus perturbed copies of
training records at several strengths (so that pairs fall on both sides of the Jaccard threshold).

Reports stage-1 wall time (shingles + MinHash + LSH + exact Jaccard), a naive all-pairs exact Jaccard on
the same shingle sets (ratio, and a check that both find the same pairs above the threshold), and
stage-2 wall time (embedding + blocked cosine; model loading reported separately). Target: stages 1 + 2
within 60 s on 2 CPU cores.

    python bench/audit_bench.py [--data-root ../shared/data] [--no-embeddings] [--out bench.json]
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import sys
import time
from pathlib import Path

from studybench.audit.embeddings import embed_texts, load_embedding_model, stage2_cosine
from studybench.audit.ngrams import naive_jaccard_pairs, shingle_sets, stage1_jaccard, stage_containment
from studybench.audit.records import read_files
from studybench.files import atomic_write_text, dumps_json

N_TRAIN = 6432
N_EVAL = 500
_NUM = re.compile(r"\d+(?:\.\d+)?")


def perturb(text: str, rng: random.Random, strength: float) -> str:
    """A paraphrase-like copy: drop, swap adjacent and renumber about ``strength`` of the words."""
    text = _NUM.sub(lambda m: str(rng.randint(2, 99)) if rng.random() < strength else m.group(0), text)
    words = [w for w in text.split() if rng.random() >= strength / 2]
    for k in range(len(words) - 1):
        if rng.random() < strength / 2:
            words[k], words[k + 1] = words[k + 1], words[k]
    return " ".join(words)


def build_workload(root: Path, seed: int = 0) -> tuple[list[str], list[str]]:
    """``(train texts, eval texts)`` of sizes 6,432 and 500."""
    rng = random.Random(seed)
    sb = root / "studybench"
    base = [r.text for r in read_files(sorted(glob.glob(str(sb / "train" / "*.json"))))]
    base += [r.text for r in read_files(sorted(glob.glob(str(root / "ugphysics" / "*" / "en.jsonl"))))]
    base = [t for t in base if t.strip()]
    train = list(base)
    while len(train) < N_TRAIN:
        train.append(perturb(rng.choice(base), rng, rng.uniform(0.05, 0.4)))
    train = train[:N_TRAIN]
    evals: list[str] = []
    for name in ("application.json", "transfer.json"):
        for rec in read_files([sb / name]):
            subs = rec.raw.get("sub_problems") or []
            evals += [s.get("problem") or "" for s in subs] if subs else [rec.text]
    evals = [t for t in evals if t.strip()][: N_EVAL - 111]
    while len(evals) < N_EVAL:
        evals.append(perturb(rng.choice(base), rng, rng.choice([0.02, 0.05, 0.1, 0.2, 0.3, 0.5])))
    return train, evals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--cosine-threshold", type=float, default=0.85)
    ap.add_argument("--no-embeddings", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-seq-length", type=int, default=None, help="embedding truncation in word pieces (default: the model's, 256)")
    ap.add_argument("--dtype", default="auto", help="embedding precision: auto | float32 | bfloat16 (as the CLI)")
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write the numbers as JSON")
    args = ap.parse_args(argv)
    if not (args.data_root / "studybench" / "application.json").is_file():
        print(f"real data not found under {args.data_root}", file=sys.stderr)
        return 2

    train, evals = build_workload(args.data_root)
    res: dict[str, object] = {"train": len(train), "eval": len(evals), "cpus": os.cpu_count(), "threshold": args.threshold}

    t0 = time.perf_counter()
    ts, es = shingle_sets(train, evals, 5)
    t_sh = time.perf_counter() - t0
    s1 = stage1_jaccard(ts, es, args.threshold, seed=1)
    stage1_s = t_sh + s1.seconds
    lsh_pairs = {k for k, v in s1.scores.items() if v >= args.threshold}
    res.update(stage1_s=stage1_s, shingle_s=t_sh, lsh_candidates=s1.lsh_candidates, stage1_pairs=len(lsh_pairs))
    t0 = time.perf_counter()
    contained = stage_containment(ts, list(enumerate(es)), 0.8)
    res.update(containment_s=time.perf_counter() - t0, containment_pairs=len(contained))

    if not args.skip_naive:
        t0 = time.perf_counter()
        naive = naive_jaccard_pairs(ts, es, args.threshold)
        naive_s = time.perf_counter() - t0 + t_sh
        res.update(
            naive_s=naive_s,
            naive_pairs=len(naive),
            speedup=naive_s / stage1_s,
            same_pairs=set(naive) == lsh_pairs,
            missed_by_lsh=len(set(naive) - lsh_pairs),
        )
        t0 = time.perf_counter()
        unpruned = naive_jaccard_pairs(ts, es, args.threshold, prune=False)
        res.update(naive_unpruned_s=time.perf_counter() - t0 + t_sh, unpruned_same=set(unpruned) == lsh_pairs)
        res["speedup_unpruned"] = float(res["naive_unpruned_s"]) / stage1_s  # type: ignore[arg-type]

    if not args.no_embeddings:
        t0 = time.perf_counter()
        model = load_embedding_model(device=args.device, max_seq_length=args.max_seq_length, dtype=args.dtype)
        res["max_seq_length"] = model.max_seq_length
        res["dtype"] = str(next(model.parameters()).dtype).replace("torch.", "")
        res["model_load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        emb_t = embed_texts(model, train)
        emb_e = embed_texts(model, evals)
        embed_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        scores, sweep = stage2_cosine(emb_t, emb_e, args.cosine_threshold)
        res.update(
            stage2_s=time.perf_counter() - t0,
            embed_s=embed_s,
            cosine_s=time.perf_counter() - t1,
            stage2_pairs=len(scores),
            cosine_sweep=sweep,
            texts_per_s=(len(train) + len(evals)) / embed_s,
        )
        res["stage1_plus_2_s"] = stage1_s + float(res["containment_s"]) + float(res["stage2_s"])  # type: ignore[arg-type]

    rows = [
        ("workload", f"{len(train)} x {len(evals)}"),
        ("stage 1 (shingles+MinHash+LSH+exact)", f"{stage1_s:.2f} s, {len(lsh_pairs)} pairs >= {args.threshold}"),
        ("stage 1b (containment >= 0.8)", f"{res['containment_s']:.2f} s, {res['containment_pairs']} pairs"),
    ]
    if "naive_s" in res:
        rows.append(("naive all-pairs exact Jaccard", f"{res['naive_s']:.2f} s, {res['naive_pairs']} pairs"))
        rows.append(("naive, no size pruning", f"{res['naive_unpruned_s']:.2f} s"))
        rows.append(
            ("speedup (pruned / unpruned) / same pairs",
             f"{res['speedup']:.1f}x / {res['speedup_unpruned']:.1f}x / {res['same_pairs'] and res['unpruned_same']}")
        )
    if "stage2_s" in res:
        rows.append(("model load (not counted)", f"{res['model_load_s']:.2f} s, max_seq_length {res['max_seq_length']}, {res['dtype']}"))
        rows.append(
            ("stage 2 (embed+cosine)", f"{res['stage2_s']:.2f} s ({res['texts_per_s']:.0f} texts/s), "
             f"{res['stage2_pairs']} pairs >= {args.cosine_threshold}")
        )
        rows.append(("stages 1+1b+2", f"{res['stage1_plus_2_s']:.2f} s (target <= 60 s)"))
    width = max(len(a) for a, _ in rows)
    for a, b in rows:
        print(f"{a:<{width}}  {b}")
    if args.out:
        atomic_write_text(args.out, dumps_json(res) + "\n")
    return 0 if res.get("same_pairs", True) and res.get("unpruned_same", True) else 1


if __name__ == "__main__":
    sys.exit(main())
