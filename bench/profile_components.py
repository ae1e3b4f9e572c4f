"""Where a harness pass spends its CPU: a cProfile of one pass, grouped into components.

Used by ``bench/harness_bench.py --profile``. The profile is taken with the thread CPU clock
(:func:`time.thread_time`), so time the event loop spends waiting for the endpoints is not counted;
each function's own time (``tottime``) goes to the component of its file. Standard-library and
builtin functions (``json``, ``hashlib``, ``str.encode`` ...) have no component of their own: their
time goes to their callers, split as the profile recorded the calls, up to the first caller that has
one (so ``json.dumps`` called by the conversation digest counts as the digest, called by the log as
the log). What remains unattributed after a few levels is "other".

cProfile adds a fixed cost to every Python call, so many small calls weigh more in the profile than
they do unprofiled: read the shares as where to look, and the measured CPU per turn (unprofiled) as
the total.
"""

from __future__ import annotations

import cProfile
import pstats
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# (component, test on the function's file path and name), first match wins
COMPONENTS: list[tuple[str, Callable[[str, str], bool]]] = [
    ("conversation digest (sha256 of the canonical JSON)", lambda f, n: "studybench/protocol.py" in f and "digest" in n.lower()),
    ("build_messages (protocol)", lambda f, n: "studybench/protocol.py" in f or "studybench/answers.py" in f),
    ("secret redaction", lambda f, n: "studybench/secrets.py" in f),
    ("JSONL log, rows, store", lambda f, n: "studybench/files/" in f or "studybench/store/" in f),
    ("row models (pydantic)", lambda f, n: "pydantic" in f),
    ("openai SDK", lambda f, n: "/openai/" in f),
    ("httpx", lambda f, n: "/httpx" in f),
    ("httpcore + h11", lambda f, n: "/httpcore" in f or "/h11/" in f),
    ("anyio + sniffio", lambda f, n: "/anyio/" in f or "/sniffio/" in f),
    ("tenacity (retry wrapper)", lambda f, n: "/tenacity/" in f),
    ("lean HTTP client (studybench.models.http11)", lambda f, n: "studybench/models/http11.py" in f or "studybench/models/http_messages.py" in f),
    ("budgets, token accounting", lambda f, n: "studybench/costs.py" in f),
    ("backend: payload, budget, parse, liveness", lambda f, n: "studybench/models/" in f),
    ("LLM judge client, cache, parse", lambda f, n: "studybench/llm_judge/" in f),
    ("pass loop (evaluate/)", lambda f, n: "studybench/evaluate/" in f),
    ("progress (Rich)", lambda f, n: "/rich/" in f or "studybench/cli/" in f),
    ("JSON encode/decode (orjson)", lambda f, n: "orjson" in n),
    ("asyncio event loop, selectors, sockets", lambda f, n: "/asyncio/" in f or "selectors.py" in f
        or "socket" in n or "select" in n or "_asyncio" in n or "ssl" in f),
]


Rules = list[tuple[str, Callable[[str, str], bool]]]


def component(func: tuple[str, int, str], rules: Rules | None = None) -> str | None:
    """The component of a pstats function key ``(file, line, name)`` under ``rules`` (default
    :data:`COMPONENTS`), or ``None`` (stdlib/builtin: the caller's)."""
    file, _, name = func
    for comp, test in COMPONENTS if rules is None else rules:
        if test(file, name):
            return comp
    return None


def profile_call(fn: Callable[[], Any], clock: Callable[[], float]) -> tuple[Any, pstats.Stats]:
    """Run ``fn()`` under cProfile with ``clock`` as its timer; returns (result, stats)."""
    prof = cProfile.Profile(clock)
    prof.enable()
    try:
        out = fn()
    finally:
        prof.disable()
    return out, pstats.Stats(prof)


def components(stats: pstats.Stats, depth: int = 8, rules: Rules | None = None) -> dict[str, float]:
    """Seconds of own time per component (see the module docstring); ``rules`` as for :func:`component`."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = defaultdict(float)

    def give(func: Any, seconds: float, level: int) -> None:
        comp = component(func, rules)
        if comp is not None:
            out[comp] += seconds
            return
        callers = raw.get(func, (0, 0, 0.0, 0.0, {}))[4]
        total = sum(edge[2] for edge in callers.values())
        if level >= depth or not callers or total <= 0:
            name = func[2]
            out["JSON encode/decode" if "json" in func[0] or "json" in name else "other (stdlib, gc, builtins)"] += seconds
            return
        for caller, edge in callers.items():
            give(caller, seconds * edge[2] / total, level + 1)

    for func, (_cc, _nc, tt, _ct, _callers) in raw.items():
        if tt > 0:
            give(func, tt, 0)
    return dict(out)


def table(parts: dict[str, float], us_per_unit: float, unit: str, extra: dict[str, float] | None = None) -> str:
    """A Markdown table: component, µs per ``unit`` (the profile's shares of ``us_per_unit``), share.

    ``extra``: components measured outside the profile (µs per unit, e.g. other threads), listed as given.
    """
    extra = extra or {}
    profiled = us_per_unit - sum(extra.values())
    total = sum(parts.values()) or 1.0
    rows = [(k, profiled * v / total) for k, v in parts.items()] + list(extra.items())
    rows.sort(key=lambda r: -r[1])
    lines = [f"| component | µs/{unit} | share |", "|---|---:|---:|"]
    lines += [f"| {k} | {v:,.0f} | {100 * v / us_per_unit:.1f}% |" for k, v in rows if v >= 0.5]
    lines.append(f"| **total** (measured without the profiler) | {us_per_unit:,.0f} | 100% |")
    return "\n".join(lines)
