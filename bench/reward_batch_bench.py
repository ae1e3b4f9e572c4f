"""Batch reward latency: 1,024 RL rollouts judged by :func:`studybench.rewards.compute_score_batch`.

The rollouts are built from the labelled dev pairs (``dev_pairs.jsonl``: a gold ``\\boxed{}``
string, a model response, answer_type, type_sequence, gold_unit; about half correct, half subtly
wrong), as verl's batch reward manager would hand them over (``solution_strs``, ``ground_truths``
as the verl export writes them, ``extra_infos``). Two mixes, both seeded:

* ``dup``: ``--n`` rollouts drawn from the pairs with replacement (436 pairs, so a batch of 1,024
  repeats answers, as RL batches do: GRPO samples several rollouts per prompt and they often agree).
  Repeated (gold, prediction, type) items are judged once inside the batch (``verify_many``
  deduplicates them, and the verifier's memo answers them afterwards); the table shows how many
  distinct items the batch has.
* ``distinct``: ``--n`` rollouts with pairwise distinct verification items: every dev pair once,
  then responses moved onto the gold of another pair of the same answer_type, type_sequence and
  box count (almost always a wrong answer, sometimes a right one where two golds agree), keeping
  only combinations whose (gold boxes, predicted boxes, type) item is new. Nothing repeats, so
  every item not decided in-process costs one sandbox verification.

For each mix: the batch path's latency (median of ``--reps``; each repetition uses a fresh reward
verifier whose worker pool is started and warmed before the clock starts: the pool start-up is
timed separately and reported as ``startup``), the same batch once more on the same, now warm
verifier (every item a memo hit: a repeated batch), and the per-rollout path
(:func:`studybench.rewards.compute_score` called once per rollout, one at a time, on a fresh warmed
verifier, ``--per-rollout-reps`` times) for the ratio. The batch and per-rollout rewards are
compared: they must be equal (a timed-out verification could differ; it is counted).

Usage::

    python bench/reward_batch_bench.py                  # 1,024 rollouts, 2 workers, both mixes
    python bench/reward_batch_bench.py --dense          # the dense reward
    python bench/reward_batch_bench.py --workers 4 --json out.json

``--workers`` sets ``STUDYBENCH_REWARD_WORKERS`` (default 2: the target is under 10 s for 1,024
rollouts on 2 cores); ``--timeout`` sets ``STUDYBENCH_REWARD_TIMEOUT``. ``--dev-pairs`` defaults to
``<repo>/../shared/data/verifier/dev_pairs.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def load_pairs(path: Path) -> list[dict[str, Any]]:
    """The dev pairs, one dict per line."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _gt(p: dict[str, Any]) -> dict[str, Any]:
    return {"answer": p["gold"], "answer_type": p["answer_type"], "type_sequence": p.get("type_sequence") or "",
            "gold_unit": p.get("gold_unit")}


def _item_key(gold: str, response: str, at: str, ts: str) -> tuple[Any, ...] | None:
    from studybench.verify import extract_pair

    pair = extract_pair(gold, response, at, ts)
    if not isinstance(pair, tuple):
        return None
    return (tuple(pair[0]), tuple(pair[1]), at, ts)


def dup_mix(pairs: list[dict[str, Any]], n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """``n`` rollouts drawn with replacement."""
    rng = random.Random(seed)
    return [(p["response"], _gt(p)) for p in rng.choices(pairs, k=n)]


def distinct_mix(pairs: list[dict[str, Any]], n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """``n`` rollouts whose verification items are pairwise distinct (see the module docstring)."""
    from studybench.records import gold_boxes, parse_type_sequence

    rng = random.Random(seed)
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[Any] = set()

    def add(response: str, p: dict[str, Any]) -> None:
        key = _item_key(p["gold"], response, p["answer_type"], p.get("type_sequence") or "")
        k = key if key is not None else ("no item", p["gold"], response)
        if k not in seen:
            seen.add(k)
            out.append((response, _gt(p)))

    for p in pairs:
        add(p["response"], p)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for p in pairs:
        ts = p.get("type_sequence") or ""
        nbox = len(gold_boxes(p["gold"], p["answer_type"], parse_type_sequence(ts)))
        groups.setdefault((p["answer_type"], ts, nbox), []).append(p)
    pool = [g for g in groups.values() if len({q["gold"] for q in g}) > 1]
    tries = 0
    while len(out) < n and tries < 200 * n:
        tries += 1
        g = rng.choice(pool)
        a, b = rng.choice(g), rng.choice(g)
        if a["gold"] != b["gold"]:
            add(a["response"], b)
    return out[:n]


def _children_cpu() -> float | None:
    """CPU seconds (user + system) of this process's live child processes (the verifier's workers).

    Linux only (``/proc``); None elsewhere. On a shared, loaded machine wall time says little, CPU time
    says what the batch costs: about ``parent + workers / cores`` is its latency on idle cores.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    me, tick, total = os.getpid(), os.sysconf("SC_CLK_TCK"), 0
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        f = stat[stat.rindex(")") + 2:].split()
        if int(f[1]) == me:
            total += int(f[11]) + int(f[12])
    return total / tick


def _fresh(workers: int) -> float:
    """Close the shared reward verifier, start a new one and warm its pool; the start-up seconds."""
    from studybench.rewards import close_reward_verifier, reward_verifier

    close_reward_verifier()
    t = time.perf_counter()
    reward_verifier().warm()
    return time.perf_counter() - t


def measure(name: str, rollouts: list[tuple[str, dict[str, Any]]], args: argparse.Namespace) -> dict[str, Any]:
    """Time the batch and per-rollout paths on one mix."""
    from studybench.rewards import compute_score, compute_score_batch, reward_verifier

    sols = [r for r, _ in rollouts]
    gts = [g for _, g in rollouts]
    infos = [{"reward": "dense"} if args.dense else {} for _ in rollouts]
    keys = {_item_key(g["answer"], r, g["answer_type"], g["type_sequence"]) or ("no item", g["answer"], r)
            for r, g in rollouts}
    res: dict[str, Any] = {"mix": name, "n": len(rollouts), "distinct_items": len(keys), "startup_s": [],
                           "batch_s": [], "per_rollout_s": []}
    batch_scores: list[Any] = []
    for _ in range(args.reps):
        res["startup_s"].append(_fresh(args.workers))
        c0, p0, t = _children_cpu(), time.process_time(), time.perf_counter()
        batch_scores = compute_score_batch(data_sources=["studybench"] * len(sols), solution_strs=sols,
                                           ground_truths=gts, extra_infos=infos)
        res["batch_s"].append(time.perf_counter() - t)
        c1 = _children_cpu()
        res.setdefault("batch_parent_cpu_s", []).append(time.process_time() - p0)
        res.setdefault("batch_worker_cpu_s", []).append(None if c0 is None or c1 is None else c1 - c0)
        res["stats"] = dict(reward_verifier().stats)
    t = time.perf_counter()
    compute_score_batch(data_sources=None, solution_strs=sols, ground_truths=gts, extra_infos=infos)
    res["batch_warm_memo_s"] = time.perf_counter() - t
    single: list[Any] = []
    for _ in range(args.per_rollout_reps):
        res["startup_s"].append(_fresh(args.workers))
        c0, p0, t = _children_cpu(), time.process_time(), time.perf_counter()
        single = [compute_score("studybench", s, g, i) for s, g, i in zip(sols, gts, infos, strict=True)]
        res["per_rollout_s"].append(time.perf_counter() - t)
        c1 = _children_cpu()
        res["per_rollout_cpu_s"] = time.process_time() - p0 + (c1 - c0 if c0 is not None and c1 is not None else 0.0)
    res["mismatches"] = sum(a != b for a, b in zip(batch_scores, single, strict=True))
    res["mean_reward"] = sum(batch_scores) / max(1, len(batch_scores))
    res["timeouts"] = res["stats"].get("timeouts", 0)
    res["batch_median_s"] = statistics.median(res["batch_s"])
    res["batch_parent_cpu_median_s"] = statistics.median(res["batch_parent_cpu_s"])
    wc = [x for x in res["batch_worker_cpu_s"] if x is not None]
    res["batch_worker_cpu_median_s"] = statistics.median(wc) if wc else None
    res["per_rollout_median_s"] = statistics.median(res["per_rollout_s"])
    res["speedup"] = res["per_rollout_median_s"] / res["batch_median_s"] if res["batch_median_s"] else None
    return res


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (and write JSON with ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dev-pairs", type=Path, default=ROOT.parent / "shared" / "data" / "verifier" / "dev_pairs.jsonl")
    ap.add_argument("--n", type=int, default=1024, help="rollouts per batch (default 1024)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2, help="STUDYBENCH_REWARD_WORKERS (default 2)")
    ap.add_argument("--timeout", type=float, default=5.0, help="STUDYBENCH_REWARD_TIMEOUT seconds (default 5)")
    ap.add_argument("--reps", type=int, default=3, help="batch repetitions, each on a fresh warmed verifier")
    ap.add_argument("--per-rollout-reps", type=int, default=1)
    ap.add_argument("--mix", choices=("dup", "distinct", "both"), default="both")
    ap.add_argument("--dense", action="store_true", help="the dense reward instead of the binary one")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    if args.n < 1 or args.reps < 1 or args.per_rollout_reps < 1 or args.workers < 1:
        ap.error("--n, --reps, --per-rollout-reps and --workers must be at least 1")
    if not args.dev_pairs.is_file():
        ap.error(f"dev pairs not found: {args.dev_pairs}")
    os.environ["STUDYBENCH_REWARD_WORKERS"] = str(args.workers)
    os.environ["STUDYBENCH_REWARD_TIMEOUT"] = str(args.timeout)
    os.environ.pop("STUDYBENCH_REWARD_DICT", None)
    os.environ.pop("STUDYBENCH_REWARD", None)
    pairs = load_pairs(args.dev_pairs)
    mixes = {"dup": dup_mix, "distinct": distinct_mix}
    names = list(mixes) if args.mix == "both" else [args.mix]
    results = [measure(m, mixes[m](pairs, args.n, args.seed), args) for m in names]
    from studybench.rewards import close_reward_verifier

    close_reward_verifier()
    print(f"reward batch bench: {len(pairs)} dev pairs, n={args.n}, seed={args.seed}, workers={args.workers}, "
          f"timeout={args.timeout}s, reward={'dense' if args.dense else 'binary'}, reps={args.reps}, "
          f"cpus={os.cpu_count()}, python {platform.python_version()}")
    print(f"{'mix':9} {'rollouts':>8} {'distinct':>8} {'startup':>8} {'batch med':>9} {'batch runs':>20} "
          f"{'memo rerun':>10} {'per-rollout':>11} {'ratio':>6} {'worker':>6} {'fast':>5} {'memo':>5} {'t/o':>4} {'diff':>4}")
    for r in results:
        runs = "/".join(f"{x:.2f}" for x in r["batch_s"])
        s = r["stats"]
        print(f"{r['mix']:9} {r['n']:>8} {r['distinct_items']:>8} {statistics.median(r['startup_s']):>7.2f}s "
              f"{r['batch_median_s']:>8.2f}s {runs:>20} {r['batch_warm_memo_s']:>9.3f}s "
              f"{r['per_rollout_median_s']:>10.2f}s {r['speedup']:>5.2f}x {s['worker']:>6} {s['fast']:>5} "
              f"{s['memo']:>5} {r['timeouts']:>4} {r['mismatches']:>4}")
    for r in results:
        w = r["batch_worker_cpu_median_s"]
        if w is not None:
            print(f"{r['mix']}: batch CPU (median) parent {r['batch_parent_cpu_median_s']:.2f}s + workers {w:.2f}s; "
                  f"estimate on {args.workers} idle cores: parent + workers / {args.workers} = "
                  f"{r['batch_parent_cpu_median_s'] + w / args.workers:.2f}s (balanced workers; "
                  f"the busier one adds at most the longest item); per-rollout CPU {r['per_rollout_cpu_s']:.2f}s; "
                  f"load average now {os.getloadavg()[0]:.1f}")
    print("startup: pool start + warm-up of a fresh verifier (median), not in the batch time; batch: one "
          "compute_score_batch call on a fresh warmed verifier; memo rerun: the same batch again on the same "
          "verifier; per-rollout: compute_score once per rollout; worker/fast/memo: the last batch run's "
          "verifier counters (sandbox verifications, decided in-process, memo hits); diff: rollouts whose "
          "batch and per-rollout rewards differ")
    if args.json:
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=2))
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
