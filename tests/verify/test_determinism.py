r"""A verdict depends only on its inputs (issue 25, item 1).

A verdict and its reason must be a function of (gold, response, answer type, type sequence, problem
text, settings) only: not of machine load, the order of the items, the number of workers, how a
batch is chunked, which worker process happens to verify an item (and what it verified before), the
process's hash seed, or whether the in-process fast path or a worker decides.

The slow test judges a real pairs file (the dev pairs; every gold of both test sets against itself
and against its reference solution, with the problem text, so the definitions path runs; each
sub-problem's gold against the next sub-problem's of the same type and parent, realistic wrong
answers in the same symbols; the two-slot TUP (EQ, EQ) gold with ``(l^2-x^2)^{3/2}`` and generated
twins) in separate processes, in shuffled orders, with 1, 2 and 4 workers, with several chunkings,
one item at a time, through ``studybench verify-file``, in-process without any worker under a
fake clock that runs out every time budget (checking there that the fast path and the full verdict
agree wherever the fast path decides), with CPU-burning processes beside them, with and without the
workers' parser warm-up, and with different ``PYTHONHASHSEED`` values (each worker process also
draws its own: it runs with ``python -I``), and requires byte-identical output. The fast tests pin each
cause found: the wall-clock budget of :func:`studybench.verify.comparison.equation_forms.same_solution_sets`,
hash-named symbols, the parse memo keyed without the fast-parser switch, the definitions shared
between threads, sample points that depended on the caller's symbol order, and clocks or unseeded
randomness anywhere in ``verify/``.
"""

from __future__ import annotations

import ast
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _support import REPO

from studybench.verify.rules import full_verdict

SRC = REPO / "src"
VERIFY = SRC / "studybench" / "verify"

# --------------------------------------------------------------------------------------------------
# the TUP (EQ, EQ) case of the issue: a real Transfer gold with (l^2-x^2)^{3/2} in a denominator

PENCIL_MARK = "(l^2-x^2)^{3/2}"


def _pencil_gold(data_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The Transfer sub-problem whose TUP (EQ, EQ) gold has ``(l^2-x^2)^{3/2}``, and its gold boxes."""
    from studybench.datasets import load_dataset

    ds = load_dataset(data_dir / "transfer.json", name="transfer")
    for ref in ds.sub_problem_refs():
        sub = ref.sub
        if sub.answer_type.value == "TUP" and PENCIL_MARK in sub.answer:
            row = {"gold": sub.answer, "answer_type": "TUP", "type_sequence": sub.type_sequence_str,
                   "problem": "\n\n".join(t for t in (ref.parent.stem, sub.problem) if t and t.strip())}
            return row, list(sub.boxes)
    pytest.fail("the Transfer gold with (l^2-x^2)^{3/2} is gone")


def _pencil_twins(boxes: list[str]) -> list[tuple[list[str], bool]]:
    """Predictions for the pencil gold, labelled by construction: the exponent changed (wrong) or rewritten (right)."""
    first, second = boxes
    assert second.count(PENCIL_MARK) == 1
    head, tail = second.split(PENCIL_MARK)
    out: list[tuple[list[str], bool]] = [([first, second], True)]
    for exp in ("{1/2}", "{5/2}", "{3}", "{1}", "{-3/2}", "{\\frac{1}{2}}"):
        out.append(([first, head + "(l^2-x^2)^" + exp + tail], False))
    for same in ("{\\frac{3}{2}}", "{1.5}"):
        out.append(([first, head + "(l^2-x^2)^" + same + tail], True))
    out.append(([first, head + "\\left(l^{2}-x^{2}\\right)^{3/2}" + tail], True))
    out.append(([first, head.replace("\\dfrac", "\\frac") + "(l^2-x^2)\\sqrt{l^2-x^2}" + tail], True))
    out.append(([first, head.replace("\\dfrac", "\\frac") + "\\sqrt{l^2-x^2}" + tail], False))
    # the first slot wrong, the second right
    out.append(([first.replace("\\sqrt{l^2-x^2}", "(l^2-x^2)"), second], False))
    return out


def _fake_clock(step: float) -> Any:
    state = {"t": 1000.0}
    lock = threading.Lock()

    def clock() -> float:
        with lock:
            state["t"] += step
            return state["t"]

    return clock


@contextmanager
def _clocks_running(step: float) -> Iterator[None]:
    """Every clock in ``time`` advances ``step`` seconds per reading (a machine that is ``step`` s slow per step)."""
    saved = {name: getattr(time, name) for name in ("monotonic", "perf_counter", "time", "process_time")}
    clock = _fake_clock(step)
    try:
        for name in saved:
            setattr(time, name, clock)
        yield
    finally:
        for name, fn in saved.items():
            setattr(time, name, fn)


def test_a_budget_that_runs_out_never_loosens_the_verdict(data_dir: Path) -> None:
    # main: same_solution_sets stopped after 2 s of wall clock and accepted on the symbols decided so
    # far; with each symbol taking 1.5 s (a loaded machine) the (l^2-x^2)^{1/2} twin was accepted
    _, boxes = _pencil_gold(data_dir)
    twins = _pencil_twins(boxes)
    quiet = [full_verdict(boxes, pred, "TUP", "EQ,EQ") for pred, _ in twins]
    assert [v.correct for v in quiet] == [label for _, label in twins], [v.reason for v in quiet]
    for step in (0.3, 1.5, 2.5, 1e6):
        with _clocks_running(step):
            loaded = [full_verdict(boxes, pred, "TUP", "EQ,EQ") for pred, _ in twins]
        assert loaded == quiet, (step, [(a.reason, b.reason) for a, b in zip(quiet, loaded, strict=True) if a != b])


def test_same_solution_sets_tries_every_symbol_whatever_the_clock() -> None:
    import sympy

    from studybench.verify.comparison import equation_forms

    a, b, c = sympy.symbols("a b c", positive=True)
    calls: list[Any] = []
    real = equation_forms._compare_for

    def spy(dg: Any, dp: Any, x: Any, tol: float, *rest: Any) -> Any:
        calls.append(x)
        return real(dg, dp, x, tol, *rest)

    gold = (a, b * c / (b**2 + 1))
    pred = (a**2, (b * c / (b**2 + 1)) ** 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(equation_forms, "_compare_for", spy)
        with _clocks_running(1e6):
            res = equation_forms.same_solution_sets(*gold, *pred, target=a)
    assert res[0] is True
    assert calls == [a, b, c]  # every shared symbol, in a fixed order; the clock decides nothing


# --------------------------------------------------------------------------------------------------
# state and order: hash seeds, memo keys, thread-shared definitions, sample points


def _in_fresh_process(code: str, hashseed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=True)
    return out.stdout


def test_symbol_names_do_not_follow_the_hash_seed() -> None:
    # main named the symbol that replaces f(x) by hash(str(f(x))): another name (and so another sample
    # value order) in every worker process, whose hash seed is random
    code = (
        "import sympy\nfrom studybench.verify.comparison.symbolic import replace_undef, sample_points\n"
        "x, y = sympy.symbols('x y')\ne = replace_undef(sympy.Function('f')(x) * y + sympy.Function('g')(y))\n"
        "syms = sorted(e.free_symbols, key=str)\nprint(sympy.srepr(e), [str(s) for s in syms], sample_points(syms, 2))\n"
    )
    outs = {_in_fresh_process(code, seed) for seed in ("0", "1", "12345")}
    assert len(outs) == 1, outs


def test_sample_points_are_a_function_of_the_symbol_set() -> None:
    import sympy

    from studybench.verify.comparison.symbolic import sample_points

    x, y, z = sympy.symbols("x y z")
    xp = sympy.Symbol("x", positive=True)  # prints as x: only the full structure orders it
    orders = [[x, y, z, xp], [xp, z, y, x], [y, xp, x, z]]
    pts = [sample_points(o, 4) for o in orders]
    assert pts[0] == pts[1] == pts[2]
    from studybench.verify.comparison.symbolic import symbol_sort_key

    assert sorted([x, xp], key=symbol_sort_key) == sorted([xp, x], key=symbol_sort_key)


def test_parse_memo_is_keyed_on_the_fast_parser_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    # main memoised by text alone: a parse made with the fast parser off (the worker's warm-up) answered
    # every later parse of that text, so a worker's verdicts depended on whether it had warmed up
    import sympy

    from studybench.verify.reading import conversion, fastparse

    text = r"\mathrm{v0} + \mathrm{v1} ^ { 2 }"
    sentinel = sympy.Symbol("from_the_fast_parser")
    conversion._l2s_text.cache_clear()
    try:
        monkeypatch.setattr(fastparse, "ENABLED", False)
        slow = conversion._l2s_text(text)
        monkeypatch.setattr(fastparse, "ENABLED", True)
        monkeypatch.setattr(fastparse, "fast_parse", lambda t: sentinel)
        assert conversion._l2s_text(text) is sentinel
        monkeypatch.setattr(fastparse, "ENABLED", False)
        assert conversion._l2s_text(text) == slow
    finally:
        conversion._l2s_text.cache_clear()


def test_definitions_stay_with_their_own_comparison_across_threads() -> None:
    # main kept the active definitions in one module-level list: a second thread's definitions replaced
    # the first one's in the middle of its comparison
    import sympy

    from studybench.verify.physics.definitions import Definitions
    from studybench.verify.physics.identities import reconcile
    from studybench.verify.reading.aliasing import new_aliases

    barrier = threading.Barrier(2, timeout=60)
    got: dict[str, Any] = {}

    def run(name: str, expr: str) -> None:
        al = new_aliases(r"\tau", expr)
        tau = sympy.Symbol(al.alias(r"\tau")[len("\\mathrm{"):-1])
        defs = Definitions([(r"\tau", expr, "problem")])  # made per comparison and handed down
        barrier.wait()  # both threads hold their own definitions
        barrier.wait()
        (g,), _, _ = reconcile([tau], [tau], al, definitions=defs)
        got[name] = (str(g), list(defs.used))

    t1 = threading.Thread(target=run, args=("a", "R C"))
    t2 = threading.Thread(target=run, args=("b", "L / R"))
    t1.start()
    t2.start()
    t1.join()
    t2.join()
    assert got["a"][1] == [r"\tau = R C from the problem"]
    assert got["b"][1] == [r"\tau = L / R from the problem"]
    assert got["a"][0] != got["b"][0]


_CLOCKS = {"monotonic", "perf_counter", "time", "process_time", "monotonic_ns", "perf_counter_ns", "time_ns", "now", "today"}
_ALLOWED_CLOCK_FILES = {"sandbox.py", "verifier.py"}  # the hard timeout and the pool, never a verdict


def test_verify_package_reads_no_clock_and_no_unseeded_randomness() -> None:
    """Static guard: no clock, no hash(), no unseeded or module-level random in the verdict code."""
    bad: list[str] = []
    for path in sorted(VERIFY.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
                if name in _CLOCKS and owner in ("time", "datetime", "date") and path.name not in _ALLOWED_CLOCK_FILES:
                    bad.append(f"{rel}:{node.lineno}: {owner}.{name}()")
                if isinstance(f, ast.Name) and f.id in ("hash", "id"):
                    bad.append(f"{rel}:{node.lineno}: {f.id}() (differs between processes)")
                if owner == "random" and name != "Random":
                    bad.append(f"{rel}:{node.lineno}: random.{name}() (module-level generator)")
                if owner == "random" and name == "Random" and not (node.args and isinstance(node.args[0], (ast.Constant, ast.Name))):
                    bad.append(f"{rel}:{node.lineno}: random.Random() without a fixed seed")
                if owner in ("os", "secrets") and name in ("urandom", "token_bytes", "token_hex", "randbits"):
                    bad.append(f"{rel}:{node.lineno}: {owner}.{name}()")
    assert not bad, bad


# --------------------------------------------------------------------------------------------------
# the pairs file judged every way


def _pairs_rows(data_dir: Path) -> list[dict[str, Any]]:
    """The real pairs file of the slow test (verify-file rows, each with an ``id``)."""
    from test_dev_pairs import PAIRS

    from studybench.datasets import load_dataset

    rows: list[dict[str, Any]] = []
    for i, r in enumerate(PAIRS):
        rows.append({"id": f"dev-{i}", **{k: r.get(k) for k in ("gold", "response", "answer_type", "type_sequence", "gold_unit", "label")}})
    for split in ("application", "transfer"):
        ds = load_dataset(data_dir / f"{split}.json", name=split)
        refs = ds.sub_problem_refs()
        for n, ref in enumerate(refs):
            sub = ref.sub
            problem = "\n\n".join(t for t in (ref.parent.stem, sub.problem) if t and t.strip())
            base = {"answer_type": sub.answer_type.value, "type_sequence": sub.type_sequence_str, "problem": problem}
            rows.append({"id": f"{split}-{n}-self", "gold": sub.answer, **base,
                         "response": "Final Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in sub.boxes), "label": True})
            if "\\boxed" in (sub.solution or ""):
                rows.append({"id": f"{split}-{n}-sol", "gold": sub.answer, **base, "response": sub.solution})
            nxt = refs[n + 1] if n + 1 < len(refs) else None
            if (nxt is not None and nxt.parent is ref.parent and nxt.sub.answer_type is sub.answer_type
                    and nxt.sub.type_sequence_str == sub.type_sequence_str and nxt.sub.answer != sub.answer):
                rows.append({"id": f"{split}-{n}-next", "gold": sub.answer, **base,
                             "response": "Final Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in nxt.sub.boxes)})
    pencil, boxes = _pencil_gold(data_dir)
    for k, (pred, label) in enumerate(_pencil_twins(boxes)):
        for with_problem in (False, True):
            row = {**pencil, "id": f"pencil-{k}-{int(with_problem)}", "label": label,
                   "response": "Final Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in pred)}
            if not with_problem:
                row.pop("problem")
            rows.append(row)
    return rows


_DRIVER = r'''
import json, sys, time
from studybench.verify import Verifier, Verdict, extract_pair
from studybench.verify.physics.definitions import extract_definitions
from studybench.verify.rules import fast_verdict, full_verdict, normalise_types

src, dst, mode, workers, chunk, clock_step = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
rows = [json.loads(line) for line in open(src, encoding="utf-8") if line.strip()]
pairs = [extract_pair(r["gold"], r["response"], r["answer_type"], r.get("type_sequence") or "") for r in rows]
items = [(*p, r["answer_type"], r.get("type_sequence") or "", r.get("gold_unit"), r.get("problem")) for r, p in zip(rows, pairs) if not isinstance(p, Verdict)]
todo = [r for r, p in zip(rows, pairs) if not isinstance(p, Verdict)]
verdicts = []
mismatch = []
if mode == "inproc":
    if clock_step:
        t = [1000.0]
        def clock():
            t[0] += clock_step
            return t[0]
        for name in ("monotonic", "perf_counter", "time", "process_time"):
            setattr(time, name, clock)
    for golds, preds, at, ts, unit, problem in items:
        fast = fast_verdict(golds, preds, at, ts, unit)
        full = full_verdict(golds, preds, at, ts, unit, extract_definitions(problem, golds, str(at)))
        if fast is not None and fast != full:
            mismatch.append([golds, preds, fast.reason, full.reason])
        verdicts.append(fast if fast is not None else full)
else:
    with Verifier(workers=workers, timeout=300.0) as v:
        if mode == "one":
            verdicts = [v.verify(g, p, at, ts, gold_unit=u, problem=pr) for g, p, at, ts, u, pr in items]
        else:
            for s in range(0, len(items), chunk):
                verdicts += v.verify_many(items[s:s + chunk])
out = {r["id"]: [p.correct, p.reason] for r, p in zip(rows, pairs) if isinstance(p, Verdict)}
out.update({r["id"]: [v.correct, v.reason] for r, v in zip(todo, verdicts)})
with open(dst, "w", encoding="utf-8") as f:
    json.dump({"verdicts": out, "mismatch": mismatch}, f)
'''


@contextmanager
def _cpu_burners(n: int) -> Iterator[None]:
    """``n`` processes busy-looping beside the block (killed, by their own handles, on exit)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)


def _canonical(verdicts: dict[str, list[Any]]) -> bytes:
    return "\n".join(json.dumps([k, *verdicts[k]], ensure_ascii=False) for k in sorted(verdicts)).encode("utf-8")


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_real_pairs_give_byte_identical_verdicts_every_way(data_dir: Path, tmp_path: Path) -> None:
    from _support import require_data_file
    from test_dev_pairs import _pairs_path

    require_data_file(_pairs_path() or Path("dev_pairs.jsonl"), "the verifier dev pairs")
    rows = _pairs_rows(data_dir)
    assert len(rows) >= 1000

    def write(name: str, order: list[dict[str, Any]]) -> Path:
        p = tmp_path / name
        p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in order), encoding="utf-8")
        return p

    def shuffled(seed: int) -> list[dict[str, Any]]:
        out = list(rows)
        random.Random(seed).shuffle(out)
        return out

    def run(name: str, order: list[dict[str, Any]], mode: str, workers: int, chunk: int, seed: str,
            burners: int = 0, clock_step: float = 0.0) -> dict[str, Any]:
        src, dst = write(f"{name}.jsonl", order), tmp_path / f"{name}.out.json"
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC), "STUDYBENCH_VERIFY_WARM": "0" if workers % 2 else "1"}
        with _cpu_burners(burners):
            subprocess.run([sys.executable, "-c", _DRIVER, str(src), str(dst), mode, str(workers), str(chunk), str(clock_step)],
                           env=env, check=True, timeout=1200)
        return json.loads(dst.read_text(encoding="utf-8"))

    burn = max(2, os.cpu_count() or 1)  # more busy loops than cores: a heavily loaded machine
    runs = {
        "1 worker, one item at a time": run("w1", rows, "one", 1, 1, "1"),
        f"2 workers, chunks of 7, {burn} CPU burners": run("w2", shuffled(2), "many", 2, 7, "2", burners=burn),
        f"4 workers, one batch, reversed, {burn} CPU burners": run("w4", rows[::-1], "many", 4, 10**6, "3", burners=burn),
        "in-process, no worker, every clock reading 1.5 s later": run("clock", shuffled(4), "inproc", 0, 0, "5", clock_step=1.5),
    }
    # the command line (chunks of 256), on a loaded machine
    cli_in, cli_out = write("cli.jsonl", shuffled(5)), tmp_path / "cli.out.jsonl"
    env = {**os.environ, "PYTHONHASHSEED": "6", "PYTHONPATH": str(SRC)}
    with _cpu_burners(burn):
        subprocess.run([sys.executable, "-m", "studybench", "verify-file", str(cli_in), "-o", str(cli_out), "--workers", "2",
                        "--timeout", "300"], env=env, check=True, timeout=1200, capture_output=True)
    cli = {}
    for line in cli_out.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        cli[r["id"]] = [r["correct"], r["reason"]]
    runs[f"studybench verify-file, 2 workers, {burn} CPU burners"] = {"verdicts": cli, "mismatch": []}

    first_name, first = next(iter(runs.items()))
    assert len(first["verdicts"]) == len(rows)
    assert not any(r[1] == "incorrect: timed out" for r in first["verdicts"].values())
    for name, res in runs.items():
        assert not res["mismatch"], f"{name}: the fast path and the full verdict differ: {res['mismatch'][:3]}"
        diff = sorted(k for k in first["verdicts"] if first["verdicts"][k] != res["verdicts"].get(k))
        assert not diff, f"{name} differs from {first_name} on {len(diff)} items: " + "; ".join(
            f"{k}: {first['verdicts'][k]} vs {res['verdicts'].get(k)}" for k in diff[:5])
        assert _canonical(res["verdicts"]) == _canonical(first["verdicts"])
    # and the verdicts are right where the label is known by construction (precision on these rows)
    labelled = {r["id"]: r["label"] for r in rows if isinstance(r.get("label"), bool)}
    false_accepts = [k for k, lab in labelled.items() if first["verdicts"][k][0] and not lab]
    assert not false_accepts, false_accepts
    pencil_wrong = [k for k, lab in labelled.items() if k.startswith("pencil") and not lab]
    assert pencil_wrong and all(not first["verdicts"][k][0] for k in pencil_wrong)
