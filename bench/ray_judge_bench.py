"""Rule judging: the local process pool against a local Ray cluster (issue 16 item 2), and what a node adds.

Workload: every dev pair (``verifier/dev_pairs.jsonl``, 436 rows) with its answers extracted as the rule
pass does, repeated ``--repeat`` times. Each repetition pads every predicted answer with trailing spaces
(``r`` spaces in repetition ``r``), so the verifier's memo never serves a repeat (its key is the raw
answer) while the work is the same (every rule strips whitespace).

Measured, on this machine:

* **local**: ``Verifier(workers=W).verify_many(items)`` (W = ``--workers``, default 2); the worker start
  (``warm()``) is reported apart and not counted in the rate.

Setups run interleaved for ``--rounds`` rounds (each round pads with new widths, so nothing is memoised)
and the best time of each counts: on a shared machine the other load varies from minute to minute.
* **ray, A actors**: :class:`studybench.evaluate.ray_judge.RayVerifier` on a local ``ray.init(num_cpus=2)``
  cluster, for each A in ``--actors`` (default 1 and 2). Its time includes the pipeline's fixed cost (the
  actors start afresh for every pipeline: a Python process, the studybench import, one sandbox worker),
  which is measured on its own with a two-item pipeline and subtracted for the steady rate.
* **per-batch overhead**: fast-path items (decided in-process in microseconds) in batches of 1 against
  one batch: the difference per batch is Ray Data's scheduling and transfer cost of a batch.
* **driver cost per item**: what the driver does per item outside Ray (pickle the item, decode the
  verdict's JSON), timed alone.

Per-node estimate: a node with C cores runs C actors (each actor asks for one CPU; its sandbox worker
does the work), so it adds about C x (steady rate of one actor) judgements/s, until the single driver's
per-item cost (plus Ray Data's per-batch cost at the batch size used) caps the whole cluster.

    python bench/ray_judge_bench.py [--pairs ../shared/data/verifier/dev_pairs.jsonl] [--repeat 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

from studybench.evaluate.ray_judge import RayVerifier
from studybench.files import atomic_write_text, dumps_json
from studybench.verify import Verifier, extract_pair


def load_items(path: Path) -> list[tuple[Any, ...]]:
    """Boxes-mode items (gold boxes, extracted answers, type, type sequence, gold unit) of the dev pairs."""
    items: list[tuple[Any, ...]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        pair = extract_pair(r["gold"], r["response"], r["answer_type"], r.get("type_sequence") or "")
        if isinstance(pair, tuple):
            items.append((pair[0], pair[1], r["answer_type"], r.get("type_sequence") or "", r.get("gold_unit")))
    return items


def repeated(items: list[tuple[Any, ...]], n: int, offset: int = 0) -> list[tuple[Any, ...]]:
    """``n`` copies of ``items``, copy ``r`` with ``offset + r`` trailing spaces on every answer (no memo hits)."""
    return [(g, [p + " " * (offset + r) for p in preds], at, ts, unit)
            for r in range(n) for g, preds, at, ts, unit in items]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table.

    Args:
        argv: command-line arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    here = Path(__file__).resolve()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=here.parents[2] / "shared" / "data" / "verifier" / "dev_pairs.jsonl")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="local verifier worker processes")
    ap.add_argument("--actors", default="1,2", help="Ray actor pool sizes, comma-separated")
    ap.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best time of each setup counts")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    base = load_items(a.pairs)
    n = len(base) * a.repeat
    res: dict[str, Any] = {"pairs": len(base), "repeat": a.repeat, "items": n, "cpus": os.cpu_count()}

    import ray

    actor_counts = [int(x) for x in a.actors.split(",")]
    t0 = time.perf_counter()
    ray.init(num_cpus=a.num_cpus, include_dashboard=False, logging_level="warning", log_to_driver=False)
    res["ray_init_s"] = time.perf_counter() - t0
    best: dict[str, float] = {}
    local: list[Any] = []
    try:
        with Verifier(workers=a.workers, timeout=a.timeout) as v:
            t0 = time.perf_counter()
            v.warm()
            res["local_start_s"] = time.perf_counter() - t0
            fast = [(["2.5"], ["2.5" + " " * i], "NV", "") for i in range(2)]
            for rnd in range(a.rounds):  # interleaved, best of each: the machine's other load varies
                items = repeated(base, a.repeat, rnd * a.repeat)
                t0 = time.perf_counter()
                local = v.verify_many(items)
                best["local"] = min(best.get("local", 1e9), time.perf_counter() - t0)
                t0 = time.perf_counter()
                RayVerifier(actors=1, batch_size=1, timeout=a.timeout).verify_many(fast)
                best["fixed"] = min(best.get("fixed", 1e9), time.perf_counter() - t0)
                for k in actor_counts:
                    t0 = time.perf_counter()
                    got = RayVerifier(actors=k, timeout=a.timeout).verify_many(items)
                    best[f"ray{k}"] = min(best.get(f"ray{k}", 1e9), time.perf_counter() - t0)
                    if got != local:
                        print(f"MISMATCH: ray with {k} actors differs from local judging", file=sys.stderr)
                        return 1
        m = 200
        many = [(["2.5"], ["2.5" + " " * i], "NV", "") for i in range(m)]
        t0 = time.perf_counter()
        RayVerifier(actors=1, batch_size=m, timeout=a.timeout).verify_many(many)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        RayVerifier(actors=1, batch_size=1, timeout=a.timeout).verify_many(many)
        per = time.perf_counter() - t0
        res["per_batch_overhead_ms"] = 1000 * max(per - one, 0.0) / (m - 1)
    finally:
        ray.shutdown()
    fixed = res["pipeline_fixed_s"] = best["fixed"]
    res["local"] = {"workers": a.workers, "start_s": res["local_start_s"], "seconds": best["local"], "per_s": n / best["local"]}
    res["ray"] = [{"actors": k, "seconds": best[f"ray{k}"], "per_s": n / best[f"ray{k}"],
                   "steady_per_s": n / max(best[f"ray{k}"] - fixed, 1e-9)} for k in actor_counts]
    items = repeated(base, a.repeat)

    t0 = time.perf_counter()
    blobs = [pickle.dumps(it, protocol=pickle.HIGHEST_PROTOCOL) for it in items]
    outs = [json.dumps(x.to_dict()) for x in local]
    t1 = time.perf_counter()
    for b, o in zip(blobs, outs, strict=True):
        pickle.loads(b)
        json.loads(o)
    t2 = time.perf_counter()
    # the driver pickles and decodes; the loads/dumps pair stands for the actor side (done in parallel there)
    res["driver_us_per_item"] = 1e6 * ((t1 - t0) / 2 + (t2 - t1) / 2) / n

    one_actor = next((r for r in res["ray"] if r["actors"] == 1), res["ray"][0])
    per_actor = one_actor["steady_per_s"] / one_actor["actors"]
    batch = max(1, min(256, -(-n // (4 * one_actor["actors"]))))
    driver_cap = 1e6 / (res["driver_us_per_item"] + 1000 * res["per_batch_overhead_ms"] / batch)
    res["estimate"] = {"per_actor_per_s": per_actor, "per_node_per_s": {c: c * per_actor for c in (8, 16, 32, 64)},
                       "driver_cap_per_s": driver_cap}

    print(f"{n} judgements ({len(base)} dev pairs x {a.repeat}), {os.cpu_count()} CPUs, timeout {a.timeout:g} s, "
          f"best of {a.rounds} interleaved rounds")
    print(f"{'setup':<26}{'seconds':>9}{'judgements/s':>14}{'steady/s':>10}")
    loc = res["local"]
    print(f"{'local pool, ' + str(a.workers) + ' workers':<26}{loc['seconds']:>9.2f}{loc['per_s']:>14.1f}{loc['per_s']:>10.1f}"
          f"   (worker start {loc['start_s']:.1f} s, not counted)")
    for r in res["ray"]:
        print(f"{'ray, ' + str(r['actors']) + ' actor(s)':<26}{r['seconds']:>9.2f}{r['per_s']:>14.1f}{r['steady_per_s']:>10.1f}")
    two = next((r for r in res["ray"] if r["actors"] == 2), res["ray"][-1])
    print(f"ratio ray ({two['actors']} actors) / local: {two['per_s'] / loc['per_s']:.2f} end to end, "
          f"{two['steady_per_s'] / loc['per_s']:.2f} steady")
    print(f"ray.init {res['ray_init_s']:.1f} s; pipeline fixed cost {fixed:.1f} s (actor start); "
          f"per-batch overhead {res['per_batch_overhead_ms']:.1f} ms; driver {res['driver_us_per_item']:.0f} us/item")
    print(f"estimate: {per_actor:.1f} judgements/s per actor (1-actor steady rate) -> a node of C cores adds ~C x "
          f"{per_actor:.1f}/s (8 cores: {8 * per_actor:.0f}/s, 32: {32 * per_actor:.0f}/s), up to the driver's "
          f"cap of ~{driver_cap:.0f}/s at batch {batch}")
    if a.json:
        atomic_write_text(a.json, dumps_json(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
