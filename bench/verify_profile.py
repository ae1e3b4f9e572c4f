"""Where the rule verifier spends its time: a cProfile of the worker side on the dev pairs, grouped by stage.

``bench/verify_bench.py`` measures judgements per second through :class:`studybench.verify.Verifier`
(memo, fast path, worker processes). This script profiles what a worker does for each item, the call
:func:`studybench.verify.rules.full_verdict` on the extracted boxes, in one process, and groups the
own time of every function into the verifier's stages: reading LaTeX (ours, latex2sympy2_extended and
its ANTLR parser), units (ours and pint), the comparisons (ours), SymPy itself, the rules, and the
rest. It prints the wall time per verification without the profiler (the total) and each stage's share.
The inputs are the project's dev pairs, verified in this process; each item runs under a 60 s alarm.

    python bench/verify_profile.py [--dev-pairs FILE] [--limit N] [--top 15]
"""

from __future__ import annotations

import argparse
import pstats
import signal
import sys
import time
from pathlib import Path
from typing import Any

from profile_components import components, profile_call, table
from verify_bench import _item, _key, load_dev

from studybench.verify.rules import full_verdict

ROOT = Path(__file__).resolve().parent.parent

STAGES = [
    ("reading: latex2sympy2_extended + ANTLR", lambda f, n: "latex2sympy" in f or "/antlr4/" in f),
    ("reading: studybench (LaTeX, numbers, aliasing)", lambda f, n: "studybench/verify/reading/" in f),
    ("physics: studybench units, constants, definitions", lambda f, n: "studybench/verify/physics/" in f),
    ("pint", lambda f, n: "/pint/" in f),
    ("comparison: studybench (symbolic, numeric, equations)", lambda f, n: "studybench/verify/comparison/" in f),
    ("rules (one per answer type)", lambda f, n: "studybench/verify/rules/" in f),
    ("SymPy: parsing helpers (sympify, printing)", lambda f, n: "/sympy/parsing/" in f or "/sympy/printing/" in f
        or "/sympy/core/sympify" in f),
    ("SymPy: simplify, solve, polys", lambda f, n: "/sympy/simplify/" in f or "/sympy/solvers/" in f or "/sympy/polys/" in f),
    ("SymPy: evaluation (evalf, lambdify, mpmath)", lambda f, n: "/sympy/core/evalf" in f or "lambdify" in f or "/mpmath/" in f),
    ("SymPy: core (expressions, assumptions, caches)", lambda f, n: "/sympy/" in f),
    ("regular expressions", lambda f, n: f.endswith(("re/__init__.py", "re/_parser.py", "re/_compiler.py", "sre_parse.py"))
        or n.startswith("<method 'sub'") or n.startswith("<method 'match'") or n.startswith("<method 'search'")
        or n.startswith("<method 'finditer'") or n.startswith("<method 'findall'") or n.startswith("<method 'fullmatch'")),
]


class _Alarm(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Alarm


def run(items: list[tuple[Any, ...]]) -> tuple[int, int]:
    """Verify every item once (``full_verdict``); returns (correct, timed out)."""
    correct = timed_out = 0
    for golds, preds, at, ts, unit in items:
        signal.setitimer(signal.ITIMER_REAL, 60)
        try:
            correct += full_verdict(golds, preds, at, ts, unit).correct
        except _Alarm:
            timed_out += 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return correct, timed_out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev-pairs", type=Path, default=ROOT.parent / "shared" / "data" / "verifier" / "dev_pairs.jsonl")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--top", type=int, default=15, help="also list the N functions with the most own time")
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, _on_alarm)
    pairs = load_dev(args.dev_pairs, args.limit)
    seen: set[Any] = set()
    items = []
    for p in pairs:  # what the workers see: distinct items with gold boxes (the memo serves repeats)
        it = _item(p)
        if it[0] and _key(it) not in seen:
            seen.add(_key(it))
            items.append(it)
    run(items[:20])  # imports, pint's registry, caches of the parser: not counted
    t0 = time.perf_counter()
    correct, timed_out = run(items)
    wall = time.perf_counter() - t0
    (_, _), stats = profile_call(lambda: run(items), time.perf_counter)
    per = 1e6 * wall / len(items)
    print(f"{len(pairs)} dev pairs, {len(items)} distinct items with gold boxes; {correct} verified correct, "
          f"{timed_out} over 60 s; {wall:.2f} s without the profiler: {per / 1000:.1f} ms per verification (one process)")
    print()
    print(table(components(stats, rules=STAGES), per, "verification"))
    if args.top:
        print()
        print(f"the {args.top} functions with the most own time (profiled):")
        stats.sort_stats(pstats.SortKey.TIME).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
