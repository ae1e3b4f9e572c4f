"""Large fuzz run of the rule verifier (issue 3, safety): hypothesis-generated random and
adversarial LaTeX with canary payloads in every field (:mod:`studybench.testing.fuzz`).

Reports: examples verified, exceptions escaped (must be 0), calls over timeout + 0.5 s (must be 0),
verdicts by kind (timed out / worker died / other), canary executions (must be 0), the slowest
call, and the parent's peak memory. Exit status 1 when any check fails.

Usage::

    python bench/verify_fuzz.py                    # 5,000 examples, 2 workers, 1 s timeout
    python bench/verify_fuzz.py --examples 20000 --threads 8

Needs hypothesis (``pip install -e ".[dev]"``).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from studybench.testing.fuzz import CANARY_NAME, fuzz_item
from studybench.verify import Verdict, Verifier


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=5000, help="hypothesis examples (default %(default)s)")
    ap.add_argument("--workers", type=int, default=2, help="verifier worker processes (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=1.0, help="per-verification timeout, seconds (default %(default)s)")
    ap.add_argument("--threads", type=int, default=4, help="caller threads sharing the workers (default %(default)s)")
    ap.add_argument("--depth", type=int, default=6, help="maximum expression depth (default %(default)s)")
    args = ap.parse_args()

    canary = Path(tempfile.mkdtemp(prefix="studybench-fuzz-")) / CANARY_NAME
    items: list[tuple] = []

    @settings(max_examples=args.examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(fuzz_item(str(canary), max_depth=args.depth))
    def collect(item: tuple) -> None:
        items.append(item)

    t0 = time.perf_counter()
    collect()
    gen_s = time.perf_counter() - t0
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    kinds: Counter[str] = Counter()
    errors: list[str] = []
    times: list[float] = []
    lock = threading.Lock()
    with Verifier(workers=args.workers, timeout=args.timeout) as v:
        v.warm()

        def one(item: tuple) -> None:
            gold, pred, at, ts, unit = item
            t = time.perf_counter()
            try:
                res = v.verify(gold, pred, at, ts, gold_unit=unit)
                kind = "verdict" if isinstance(res, Verdict) else "not a verdict"
                if isinstance(res, Verdict):
                    if res.reason == "incorrect: timed out":
                        kind = "timed out"
                    elif res.reason.startswith("incorrect: worker died"):
                        kind = "worker died"
                    elif res.reason.startswith("incorrect: internal error"):
                        kind = "internal error"
                    elif res.correct:
                        kind = "correct"
                    else:
                        kind = "incorrect"
            except BaseException as e:  # counted: nothing may escape
                kind = "EXCEPTION"
                with lock:
                    errors.append(f"{type(e).__name__}: {e}"[:200])
            dt = time.perf_counter() - t
            with lock:
                kinds[kind] += 1
                times.append(dt)

        t1 = time.perf_counter()
        with ThreadPoolExecutor(args.threads) as ex:
            list(ex.map(one, items))
        run_s = time.perf_counter() - t1
        kills = v.pool.kills
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    over = sum(t > args.timeout + 0.5 for t in times)
    print(f"examples: {len(items)} (generated in {gen_s:.1f} s), verified in {run_s:.1f} s on {args.workers} workers "
          f"from {args.threads} threads, timeout {args.timeout:g} s")
    print("verdicts: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print(f"slowest call: {max(times):.3f} s; calls over timeout + 0.5 s: {over}; workers killed: {kills}")
    print(f"exceptions escaped: {len(errors)}" + "".join(f"\n    {e}" for e in errors[:5]))
    print(f"canary executed: {canary.exists()}")
    print(f"parent peak RSS: {rss0 / 1024:.0f} MiB before verifying, {rss1 / 1024:.0f} MiB after")
    ok = not errors and not over and not canary.exists() and len(items) > 0
    print("RESULT:", "pass" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
