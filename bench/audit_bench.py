"""Benchmark of the contamination audit (paper 2.3, appendix H) on a 6,432 x 500 workload from the real data.

Train side (6,432 records): the StudyBench instruction layers (``train/*.json``), the UGPhysics problems
(``ugphysics/*/en.jsonl``) and perturbed copies of them (word drops, adjacent swaps, changed numbers).
Eval side (500 records): the sub-problems of the Application and Transfer sets plus perturbed copies of
training records at several strengths (so that pairs fall on both sides of the Jaccard threshold).

Each stage runs twice in the same process, *before* and *after* (issue 27), and the ratio is printed:

- stage 1 (MinHash + LSH + exact Jaccard): before, datasketch ``MinHash`` objects one set at a time
  and a ``MinHashLSH`` index (:func:`studybench.audit.minhash.reference_candidates`); after,
  :func:`studybench.audit.ngrams.stage1_jaccard` (signatures of all sets at once, banding in numpy).
  The shingles (shared) and stage 1b (containment, unchanged) are timed once and added to both;
- stage 2 (embedding + cosine; model loading reported separately): before, every text embedded
  (:func:`studybench.audit.embeddings.embed_non_empty`, as ``run_audit`` did); after, through the
  embedding cache (:func:`studybench.audit.embeddings.embed_corpus`) in a fresh directory, twice: the
  *first* audit (empty cache) and the *second* (the same corpus again: nothing to embed).

The findings must be identical: stage-1 scores, containment pairs, stage-2 scores (bit for bit) and
sweep counts of every "after" run equal those of "before"; the exit status is 1 otherwise. A naive
all-pairs exact Jaccard on the same shingle sets checks stage 1's recall (``--skip-naive`` skips it).

    python bench/audit_bench.py [--data-root ../shared/data] [--no-embeddings] [--skip-naive]
        [--torch-threads N] [--cache-dir DIR] [--out bench.json] [--train-records N --eval-records M]
        [--compare-dtype int8 | --compare-max-seq-length N | --compare-threads N | --compare-backend onnx]
        [--skip-cache-runs] [--profile]

``--torch-threads N`` sets torch's intra-op threads (default: torch's own, one per core); the report
records the count used and the load average at the start and the end. Each stage-2 figure also gives the
process CPU seconds, which a loaded machine inflates far less than the wall-clock ones.

``--compare-dtype int8`` (or ``--compare-max-seq-length N``, or ``--compare-threads N``: the same model with
N torch threads, or ``--compare-char-order``: the texts batched in order of characters, as before the
padding fix, or ``--compare-backend onnx``: the same model, float32, exported to ONNX and run by onnxruntime
through the package's own path, ``load_embedding_model(backend="onnx")``; the export, done once and cached,
is part of the model load, not counted) also runs a *first* audit (empty cache) with a
second model, the same as the first but with that precision (or truncation, or runtime), in the same run: its time, the
ratio to the first model's first audit, and what it changes: the cosine of each text's vector to the first
model's and the agreement of the flagged pairs (stage-2 pairs at the threshold, and all flagged pairs:
stages 1, 1b and 2). ``--skip-cache-runs`` leaves out the cached runs (first and second audit through
the cache), which only repeat stage 2 before. ``--profile`` prints the top functions of stage 2 before
(cProfile: the torch operators show as the built-ins that call them).
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from studybench.audit.embedcache import EmbeddingCache
from studybench.audit.embeddings import (
    embed_corpus,
    embed_non_empty,
    embed_texts,
    load_embedding_model,
    stage2_cosine,
)
from studybench.audit.minhash import reference_candidates
from studybench.audit.ngrams import (
    JACCARD_SWEEP,
    default_lsh_threshold,
    exact_jaccard,
    naive_jaccard_pairs,
    shingle_sets,
    stage1_jaccard,
    stage_containment,
)
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


def build_workload(root: Path, seed: int = 0, n_train: int = N_TRAIN, n_eval: int = N_EVAL) -> tuple[list[str], list[str]]:
    """``(train texts, eval texts)`` of sizes 6,432 and 500 (or the first ``n_train`` and ``n_eval`` of them)."""
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
    if n_train < N_TRAIN or n_eval < N_EVAL:  # a seeded sample of the full workload (its own mix of each kind)
        sub = random.Random(seed + 1)
        train = [train[k] for k in sorted(sub.sample(range(N_TRAIN), n_train))]
        evals = [evals[k] for k in sorted(sub.sample(range(N_EVAL), n_eval))]
    return train, evals


def load_avg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def timed(fn: Any, *args: Any, **kw: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def stage1_before(ts: list[frozenset[int]], es: list[frozenset[int]], threshold: float) -> dict[tuple[int, int], float]:
    """Stage 1 as it was: datasketch MinHash objects and a MinHashLSH index, then the exact Jaccard."""
    cands = reference_candidates(ts, es, default_lsh_threshold(threshold), 128, 1)
    keep = min(threshold, JACCARD_SWEEP[0])
    out = {}
    for j, found in enumerate(cands):
        for i in found:
            jac = exact_jaccard(ts[i], es[j])
            if jac >= keep:
                out[(i, j)] = jac
    return out


def print_profile(prof: Any, wall: float, top: int = 12) -> None:
    """The functions of stage 2 with the most own time (cProfile), as shares of its wall-clock time."""
    import pstats

    st = pstats.Stats(prof)
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    print(f"profile of stage 2 before ({wall:.1f} s): own time by function")
    for (fname, line, func), (_cc, nc, tt, _ct, _callers) in rows:
        where = func if fname == "~" else f"{Path(fname).name}:{line}({func})"
        print(f"  {tt:8.2f} s {100 * tt / wall:5.1f}%  {nc:7d} calls  {where}")


def batch_tokens(model: Any, texts: list[str], batch_size: int) -> dict[str, int]:
    """Word pieces the model computes for the texts, real and padded, when they are sent in order of word pieces
    (stage 2 now) and of characters (before): chunks of 8 batches, each sorted by characters inside
    ``encode`` (as sentence-transformers does), each batch padded to its longest text."""
    from studybench.audit.embeddings import token_lengths

    present = [t for t in texts if t.strip()]
    n = token_lengths(model, present)
    chunk = max(batch_size * 8, 256)

    def padded(order: list[int]) -> int:
        total = 0
        for start in range(0, len(order), chunk):
            part = sorted(order[start : start + chunk], key=lambda k: -len(present[k]))
            total += sum(len(part[b : b + batch_size]) * max(n[k] for k in part[b : b + batch_size])
                         for b in range(0, len(part), batch_size))
        return total

    by_pieces = sorted(range(len(present)), key=lambda k: (n[k], len(present[k])))
    by_chars = sorted(range(len(present)), key=lambda k: len(present[k]))
    return {"tokens_real": sum(n), "tokens_padded_word_piece_order": padded(by_pieces),
            "tokens_padded_char_order": padded(by_chars)}


def embed_char_order(model: Any, texts: list[str], batch_size: int, _progress: Any = None) -> Any:
    """Stage 2's embedding as it batched before issue 27: texts in order of characters, chunks of 8 batches."""
    import numpy as np

    idx = sorted((k for k, t in enumerate(texts) if t.strip()), key=lambda k: len(texts[k]))
    out = np.zeros((len(texts), embed_texts(model, []).shape[1]), dtype=np.float32)
    chunk = max(batch_size * 8, 256)
    for start in range(0, len(idx), chunk):
        part = idx[start : start + chunk]
        out[part] = embed_texts(model, [texts[k] for k in part], batch_size=batch_size)
    return out


def compare_variant(args: Any, texts: list[str], n_train: int, emb_ref: Any, ref: tuple[Any, Any],
                    s1_scores: dict[tuple[int, int], float], contained: dict[tuple[int, int], float], res: dict[str, Any]) -> dict[str, Any]:
    """A first audit with a second model (another --dtype or truncation) in the same run: time and agreement."""
    import numpy as np

    backend = args.compare_backend or "torch"
    dtype = args.compare_dtype or (args.dtype if backend == "torch" else "float32")
    msl = args.compare_max_seq_length or args.max_seq_length
    model, load_s = timed(load_embedding_model, device=args.device, max_seq_length=msl, dtype=dtype, backend=backend)
    variant = ", ".join(x for x in (f"{backend} backend (float32)" if args.compare_backend else "",
                                    f"dtype {dtype}" if args.compare_dtype else "",
                                    f"max_seq_length {msl}" if args.compare_max_seq_length else "",
                                    f"{args.compare_threads} torch threads" if args.compare_threads else "",
                                    "texts in order of characters" if args.compare_char_order else "") if x)
    import torch

    threads = torch.get_num_threads()
    if args.compare_threads:
        torch.set_num_threads(args.compare_threads)
    t0, c0 = time.perf_counter(), time.process_time()
    emb = (embed_char_order if args.compare_char_order else embed_non_empty)(model, texts, args.batch_size, None)
    got = stage2_cosine(emb[:n_train], emb[n_train:], args.cosine_threshold)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    torch.set_num_threads(threads)
    present = np.array([bool(t.strip()) for t in texts])
    cos = (emb * emb_ref).sum(axis=1)[present]
    a, b = set(ref[0]), set(got[0])
    stage1 = {k for k, v in s1_scores.items() if v >= args.threshold}
    stage1b = set(contained)  # {(train index, eval index): containment}
    fa, fb = stage1 | stage1b | a, stage1 | stage1b | b
    return {
        "variant": variant, "model_load_s": load_s, "exported": getattr(model, "exported", None),
        "stage2_s": wall, "stage2_cpu_s": cpu,
        "ratio": res["stage2_before_s"] / wall, "cpu_ratio": res["stage2_before_cpu_s"] / cpu,
        "cos_min": float(cos.min()), "cos_p1": float(np.percentile(cos, 1)), "cos_median": float(np.median(cos)),
        "stage2_pairs": len(b), "ref_stage2_pairs": len(a), "stage2_common": len(a & b),
        "stage2_recall": len(a & b) / max(len(a), 1), "stage2_precision": len(a & b) / max(len(b), 1),
        "flagged": len(fb), "ref_flagged": len(fa), "flagged_recall": len(fa & fb) / max(len(fa), 1),
        "flagged_precision": len(fa & fb) / max(len(fb), 1), "sweep": got[1],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--cosine-threshold", type=float, default=0.85)
    ap.add_argument("--no-embeddings", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-seq-length", type=int, default=None, help="embedding truncation in word pieces (default: the model's, 256)")
    ap.add_argument("--dtype", default="auto", help="embedding precision: auto | float32 | bfloat16 (as the CLI)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--torch-threads", type=int, help="torch intra-op threads (default: torch's own)")
    ap.add_argument("--cache-dir", type=Path, help="embedding cache directory; must not exist (default: a temporary one)")
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--train-records", type=int, default=N_TRAIN, help="a seeded sample of this many training records "
                    "(default: all 6,432); stage-2 time is about proportional to the texts")
    ap.add_argument("--eval-records", type=int, default=N_EVAL, help="likewise for the evaluation records (default 500)")
    ap.add_argument("--compare-dtype", help="also a first audit with this --dtype (e.g. int8): time and agreement")
    ap.add_argument("--compare-max-seq-length", type=int, help="also a first audit with this truncation")
    ap.add_argument("--compare-threads", type=int, help="also a first audit with this many torch threads")
    ap.add_argument("--compare-backend", choices=["onnx"], help="also a first audit with the model run by onnxruntime "
                    "(the package's --embedding-backend onnx): time and agreement")
    ap.add_argument("--compare-char-order", action="store_true", help="also a first audit with the texts batched "
                    "in order of characters (as before issue 27's padding fix) instead of word pieces")
    ap.add_argument("--skip-cache-runs", action="store_true", help="leave out the first and second audit through the cache")
    ap.add_argument("--count-tokens-only", action="store_true", help="stage 2: only count the batches' word pieces "
                    "(real, padded in order of word pieces and of characters), embed nothing")
    ap.add_argument("--profile", action="store_true", help="print the top functions of stage 2 before (cProfile)")
    ap.add_argument("--out", type=Path, default=None, help="write the numbers as JSON")
    args = ap.parse_args(argv)
    if not (args.data_root / "studybench" / "application.json").is_file():
        print(f"real data not found under {args.data_root}", file=sys.stderr)
        return 2
    if args.torch_threads is not None and args.torch_threads < 1:
        ap.error("--torch-threads must be >= 1")
    if args.cache_dir is not None and args.cache_dir.exists():
        ap.error(f"--cache-dir {args.cache_dir} exists: the first audit must start from an empty cache")

    import datasketch  # noqa: F401  imported before anything is timed, for both sides
    import numpy  # noqa: F401

    if not (1 <= args.train_records <= N_TRAIN and 1 <= args.eval_records <= N_EVAL):
        ap.error(f"--train-records must be in [1, {N_TRAIN}] and --eval-records in [1, {N_EVAL}]")
    train, evals = build_workload(args.data_root, n_train=args.train_records, n_eval=args.eval_records)
    res: dict[str, Any] = {"train": len(train), "eval": len(evals), "cpus": os.cpu_count(), "threshold": args.threshold,
                           "load_avg_start": load_avg()}
    (ts, es), t_sh = timed(shingle_sets, train, evals, 5)
    s1_before, t1_before = timed(stage1_before, ts, es, args.threshold)
    s1, t1_after = timed(stage1_jaccard, ts, es, args.threshold, seed=1)
    contained, t_c = timed(stage_containment, ts, list(enumerate(es)), 0.8)
    lsh_pairs = {k for k, v in s1.scores.items() if v >= args.threshold}
    same1 = s1.scores == s1_before
    res.update(
        shingle_s=t_sh, stage1_before_s=t_sh + t1_before, stage1_after_s=t_sh + t1_after,
        stage1_ratio=(t_sh + t1_before) / (t_sh + t1_after), lsh_candidates=s1.lsh_candidates,
        stage1_pairs=len(lsh_pairs), stage1_same=same1, containment_s=t_c, containment_pairs=len(contained),
    )

    if not args.skip_naive:
        naive, naive_s = timed(naive_jaccard_pairs, ts, es, args.threshold)
        res.update(naive_s=naive_s + t_sh, naive_pairs=len(naive), naive_same=set(naive) == lsh_pairs,
                   missed_by_lsh=len(set(naive) - lsh_pairs))

    same2 = True
    if not args.no_embeddings:
        import torch

        if args.torch_threads:
            torch.set_num_threads(args.torch_threads)
        res["torch_threads"] = torch.get_num_threads()
        model, res["model_load_s"] = timed(
            load_embedding_model, device=args.device, max_seq_length=args.max_seq_length, dtype=args.dtype
        )
        res["max_seq_length"] = model.max_seq_length
        res.update(batch_tokens(model, train + evals, args.batch_size))
        if args.count_tokens_only:
            print(dumps_json({k: v for k, v in res.items() if k.startswith("tokens_")}))
            return 0
        res["dtype"] = str(next(model.parameters()).dtype).replace("torch.", "")
        texts = train + evals

        def stage2(emb: Any) -> tuple[Any, Any]:
            return stage2_cosine(emb[: len(train)], emb[len(train) :], args.cosine_threshold)

        prof = None
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        emb_before = embed_non_empty(model, texts, args.batch_size, None)
        before = stage2(emb_before)
        if prof is not None:
            prof.disable()
        res["stage2_before_s"] = time.perf_counter() - t0
        res["stage2_before_cpu_s"] = time.process_time() - c0
        if prof is not None:
            print_profile(prof, res["stage2_before_s"])
        if (args.compare_dtype or args.compare_max_seq_length or args.compare_threads or args.compare_char_order
                or args.compare_backend):
            res["compare"] = compare_variant(args, texts, len(train), emb_before, before, s1.scores, contained, res)
        tmp = None
        if args.cache_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="audit-bench-cache-")
        cache_dir = args.cache_dir or Path(tmp.name)  # type: ignore[union-attr]
        for run in () if args.skip_cache_runs else ("first", "second"):
            t0 = time.perf_counter()
            emb, counts = embed_corpus(model, texts, batch_size=args.batch_size, cache=EmbeddingCache(cache_dir))
            after = stage2(emb)
            res[f"stage2_{run}_s"] = time.perf_counter() - t0
            res[f"stage2_{run}_embedded"] = counts.embedded
            res[f"stage2_{run}_cached"] = counts.cached
            res[f"stage2_{run}_same"] = after == before
            same2 = same2 and after == before
        if tmp is not None:
            tmp.cleanup()
        res.update(stage2_pairs=len(before[0]), cosine_sweep=before[1], distinct_texts=len({t for t in texts if t.strip()}))
        base = t_sh + t_c
        res["total_before_s"] = base + t1_before + res["stage2_before_s"]
        for run in () if args.skip_cache_runs else ("first", "second"):
            res[f"total_{run}_s"] = base + t1_after + res[f"stage2_{run}_s"]
            res[f"ratio_{run}"] = res["total_before_s"] / res[f"total_{run}_s"]
            res[f"stage2_ratio_{run}"] = res["stage2_before_s"] / res[f"stage2_{run}_s"]
    res["load_avg_end"] = load_avg()

    rows = [
        ("workload", f"{len(train)} x {len(evals)}; load average {res['load_avg_start']} -> {res['load_avg_end']}"),
        ("shingles (both)", f"{t_sh:.2f} s"),
        ("stage 1 before (datasketch objects)", f"{res['stage1_before_s']:.2f} s"),
        ("stage 1 after (vectorised)", f"{res['stage1_after_s']:.2f} s, {len(lsh_pairs)} pairs >= {args.threshold}, "
         f"ratio {res['stage1_ratio']:.1f}x, same scores: {same1}"),
        ("stage 1b (containment >= 0.8)", f"{t_c:.2f} s, {len(contained)} pairs"),
    ]
    if "naive_s" in res:
        rows.append(("naive all-pairs exact Jaccard", f"{res['naive_s']:.2f} s, {res['naive_pairs']} pairs, "
                     f"same pairs as LSH: {res['naive_same']}"))
    if "stage2_before_s" in res:
        rows += [
            ("model load (not counted)", f"{res['model_load_s']:.2f} s, max_seq_length {res['max_seq_length']}, "
             f"{res['dtype']}, {res['torch_threads']} torch threads"),
            ("batch word pieces (real / padded)", f"{res['tokens_real']} / {res['tokens_padded_word_piece_order']} in "
             f"order of word pieces (now), {res['tokens_padded_char_order']} in order of characters (before): "
             f"{res['tokens_padded_char_order'] / res['tokens_padded_word_piece_order']:.2f}x"),
            ("stage 2 before (embed all)", f"{res['stage2_before_s']:.2f} s ({res['stage2_before_cpu_s']:.1f} CPU s, "
             f"{len(texts) / res['stage2_before_s']:.1f} texts/s), {res['stage2_pairs']} pairs >= {args.cosine_threshold}"),
        ]
        if "compare" in res:
            c = res["compare"]
            rows += [
                (f"stage 2, first audit, {c['variant']}", f"{c['stage2_s']:.2f} s ({c['stage2_cpu_s']:.1f} CPU s), ratio "
                 f"{c['ratio']:.2f}x wall, {c['cpu_ratio']:.2f}x CPU (model load {c['model_load_s']:.1f} s"
                 + (", ONNX export included" if c["exported"] else "") + ", not counted)"),
                (f"  {c['variant']}: cosine to the reference vector", f"min {c['cos_min']:.4f}, 1st pct {c['cos_p1']:.4f}, "
                 f"median {c['cos_median']:.4f}"),
                (f"  {c['variant']}: stage-2 pairs", f"{c['stage2_pairs']} (reference {c['ref_stage2_pairs']}), "
                 f"{c['stage2_common']} in common: recall {c['stage2_recall']:.3f}, precision {c['stage2_precision']:.3f}"),
                (f"  {c['variant']}: flagged pairs (1+1b+2)", f"{c['flagged']} (reference {c['ref_flagged']}), recall "
                 f"{c['flagged_recall']:.3f}, precision {c['flagged_precision']:.3f}"),
            ]
        for run in () if args.skip_cache_runs else ("first", "second"):
            rows.append((f"stage 2 after, {run} audit", f"{res[f'stage2_{run}_s']:.2f} s ({res[f'stage2_{run}_embedded']} embedded, "
                         f"{res[f'stage2_{run}_cached']} cached), ratio {res[f'stage2_ratio_{run}']:.2f}x, "
                         f"same scores: {res[f'stage2_{run}_same']}"))
        rows.append(("stages 1+1b+2 before", f"{res['total_before_s']:.2f} s"))
        for run in () if args.skip_cache_runs else ("first", "second"):
            rows.append((f"stages 1+1b+2 after, {run} audit", f"{res[f'total_{run}_s']:.2f} s, ratio {res[f'ratio_{run}']:.2f}x"))
    width = max(len(a) for a, _ in rows)
    for a, b in rows:
        print(f"{a:<{width}}  {b}")
    if args.out:
        atomic_write_text(args.out, dumps_json(res) + "\n")
    return 0 if same1 and same2 and res.get("naive_same", True) else 1


if __name__ == "__main__":
    sys.exit(main())
