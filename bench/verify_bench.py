"""Verifier accuracy and speed: studybench's rule-based verifier against the peer ``math-verify``.

Measures, in one run on the same machine and the same inputs:

* **Inputs.**

  - ``dev``: the labelled dev pairs (``dev_pairs.jsonl``: gold ``\\boxed{}`` string, model response
    tail, answer_type, type_sequence, label), half correct and half subtly wrong;
  - ``gold-self``: every sub-problem of ``application.json`` and ``transfer.json`` answered with its
    own gold boxes (``Final Answer: \\boxed{b1}, \\boxed{b2}, ...``), label True; every verifier
    should accept all of them;
  - ``gold-sol``: every sub-problem whose reference solution has a ``\\boxed{}`` answered with that
    solution (its final boxes), label True; the exceptions are listed with the verifier's reason.

* **Verifiers.**

  - ``studybench w=1``: ``Verifier(workers=1)``: the in-process fast path plus one sandbox worker
    process, the single-process-fair configuration;
  - ``studybench w=D``: ``Verifier()`` with its default worker count (CPU count, at most 8);
  - ``math-verify``: ``verify(parse(gold), parse(response))``, called one at a time in one
    dedicated process (math-verify's own signal-based timeouts work there); the parent waits at most
    ``--peer-guard`` seconds per call and restarts that process on an overrun, so a hang cannot
    stop the benchmark. Any exception counts as "incorrect".

  Both verifiers start from the same raw strings: the studybench time includes gold-box parsing and
  answer extraction (``gold_boxes`` + ``extract_answers``) as well as ``verify_many``, the
  math-verify time includes both ``parse`` calls and ``verify`` plus one pipe round trip (the pure
  compute time inside the peer process is reported as well).

* **Numbers.** Per verifier and input set: n, accuracy, precision, recall and F1 (positive =
  "correct"), per-answer-type precision/recall on the dev pairs (types with >= 10 pairs),
  verifications per second (wall clock, excluding the one-time warm-up, which is reported separately:
  starting worker processes, imports, a few synthetic verifications not among the inputs) and the
  speed ratio studybench / math-verify.

* **Memoisation caveat.** ``Verifier`` memoises verdicts. Every measurement (each repeat, each
  input set, each worker setting) uses a fresh ``Verifier``, so the memo never carries over between
  measurements; within one measurement duplicate items may be answered from the memo, so the table
  shows how many unique items each set has (and the JSON the memo hit count).

Usage::

    python bench/verify_bench.py                      # full run (both input sets, all verifiers)
    python bench/verify_bench.py --limit 50           # quick run: first 50 items of each set
    python bench/verify_bench.py --out results.json   # also write everything (per item too) as JSON

Paths: ``--dev-pairs`` (default ``<repo>/../shared/data/verifier/dev_pairs.jsonl``) and
``--data-dir`` (default ``$STUDYBENCH_DATA``, else ``<repo>/../shared/data/studybench``).
Needs ``math-verify`` (``pip install "studybench[bench]"`` or ``pip install "math-verify>=0.7"``);
without it use ``--no-peer``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from studybench.answers import extract_answers
from studybench.datasets import load_dataset
from studybench.records import AnswerType, gold_boxes, parse_type_sequence
from studybench.verify import Verifier

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DEV = REPO.parent / "shared" / "data" / "verifier" / "dev_pairs.jsonl"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "studybench"
SPLITS = ("application", "transfer")
MIN_TYPE_N = 10
SLOW_S = 5.0

# Synthetic warm-up pairs (one per answer type family); their symbols carry a "_{w}" subscript so
# they never coincide with a benchmark item (checked at run time anyway).
WARM_PAIRS: list[tuple[str, str, str, str]] = [
    ("\\boxed{3.0\\times10^{8}\\,\\mathrm{m/s}}", "Final Answer: \\boxed{3\\times 10^{8} m/s}", "NV", ""),
    ("\\boxed{\\frac{q_{w}}{4\\pi r_{w}^{2}}}", "Final Answer: \\boxed{\\frac{q_{w}}{4 r_{w}^{2}\\pi}}", "EX", ""),
    ("\\boxed{y_{w}=2x_{w}}", "Final Answer: \\boxed{2x_{w}=y_{w}}", "EQ", ""),
    ("\\boxed{x_{w}>1}", "Final Answer: \\boxed{(1,\\infty)}", "IN", ""),
    ("\\boxed{B}", "Final Answer: \\boxed{(B)}", "MC", ""),
    ("\\boxed{True}", "Final Answer: \\boxed{yes}", "TF", ""),
    ("\\boxed{it increases}", "Final Answer: \\boxed{It increases.}", "QL", ""),
    ("\\boxed{a_{w}=g_{w}}, \\boxed{2.5\\,\\mathrm{s}}", "Final Answer: \\boxed{a_{w}=g_{w}}, \\boxed{2.5 s}", "TUP", "EQ,NV"),
]


@dataclass
class Pair:
    gold: str
    response: str
    answer_type: str
    type_sequence: str
    label: bool
    kind: str = ""
    source: str = ""
    boxes: list[str] | None = None  # gold boxes when the data set already has them
    gold_unit: Any = None  # the dev pairs' unit hint for a unitless gold


@dataclass
class Measurement:
    verifier: str
    input_set: str
    n: int
    unique: int
    verdicts: list[bool]
    reasons: list[str]
    seconds: list[float]  # one per repeat, warm-up excluded
    warmup_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.n / max(statistics.median(self.seconds), 1e-9)


# --------------------------------------------------------------------------- inputs


def load_dev(path: Path, limit: int | None) -> list[Pair]:
    out: list[Pair] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            out.append(Pair(gold=r["gold"], response=r["response"], answer_type=str(r["answer_type"]),
                            type_sequence=str(r.get("type_sequence") or ""), label=bool(r["label"]),
                            kind=str(r.get("kind") or ""), source=str(r.get("gold_id") or ""),
                            gold_unit=r.get("gold_unit")))
            if limit is not None and len(out) >= limit:
                break
    return out


def load_self(data_dir: Path, limit: int | None) -> tuple[list[Pair], dict[str, int]]:
    out: list[Pair] = []
    per_split: dict[str, int] = {}
    for split in SPLITS:
        ds = load_dataset(data_dir / f"{split}.json", name=split)
        n0 = len(out)
        for sl in ds.sub_problem_refs():
            sub = sl.sub
            boxes = list(sub.boxes)
            resp = "Final Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in boxes)
            out.append(Pair(gold=sub.answer, response=resp, answer_type=str(getattr(sub.answer_type, "value", sub.answer_type)),
                            type_sequence=sub.type_sequence_str, label=True, kind="gold-self", source=split, boxes=boxes))
        per_split[split] = len(out) - n0
    if limit is not None:
        out = out[:limit]
        per_split = dict(Counter(p.source for p in out))
    return out, per_split


def load_solution(data_dir: Path, limit: int | None) -> list[Pair]:
    """Gold against the final boxes of its own reference solution (sub-problems whose solution has a box)."""
    out: list[Pair] = []
    for split in SPLITS:
        ds = load_dataset(data_dir / f"{split}.json", name=split)
        for sl in ds.sub_problem_refs():
            sub = sl.sub
            if "\\boxed" not in (sub.solution or "") and "\\fbox" not in (sub.solution or ""):
                continue
            out.append(Pair(gold=sub.answer, response=sub.solution, answer_type=str(getattr(sub.answer_type, "value", sub.answer_type)),
                            type_sequence=sub.type_sequence_str, label=True, kind="gold-sol",
                            source=f"{split}:{sl.parent.source}:{sl.parent.source_problem_id}:{sub.problem_id}", boxes=list(sub.boxes)))
    return out[:limit] if limit is not None else out


def _golds(p: Pair) -> list[str]:
    if p.boxes is not None:
        return list(p.boxes)
    try:
        return gold_boxes(p.gold, AnswerType(p.answer_type.strip().upper()), parse_type_sequence(p.type_sequence))
    except Exception:
        return []


def _item(p: Pair) -> tuple[list[str], list[str], str, str, Any]:
    golds = _golds(p)
    preds = extract_answers(p.response, m=len(golds)) if golds else []
    return golds, preds, p.answer_type, p.type_sequence, p.gold_unit


def _key(item: tuple[list[str], list[str], str, str, Any]) -> tuple[Any, ...]:
    g, pr, at, ts, unit = item
    return tuple(g), tuple(pr), at.strip().upper(), ts.replace(" ", "").upper(), str(unit)


# --------------------------------------------------------------------------- studybench


def run_studybench(pairs: list[Pair], workers: int | None, timeout: float, repeats: int,
                   label: str, set_name: str, season: list[Any] | None = None) -> Measurement:
    keys = {_key(_item(p)) for p in pairs}
    warm = [it for it in (_item(Pair(g, r, at, ts, True)) for g, r, at, ts in WARM_PAIRS) if _key(it) not in keys]
    seconds: list[float] = []
    warmups: list[float] = []
    verdicts: list[Any] = []
    stats: dict[str, int] = {}
    n_workers = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        v = Verifier(workers=workers, timeout=timeout)  # fresh per measurement: no memo carried over
        try:
            v.warm()
            v.verify_many(warm)
            if season:  # a worker that has already judged other answers (ANTLR's prediction cache is warm)
                v.verify_many([it for it in season if _key(it) not in keys])
            warmups.append(time.perf_counter() - t0)
            before = dict(v.stats)
            t1 = time.perf_counter()
            items = [_item(p) for p in pairs]
            verified = v.verify_many([it for it in items if it[0]])
            seconds.append(time.perf_counter() - t1)
            it_j = iter(verified)
            res = [next(it_j) if it[0] else None for it in items]
            if not verdicts:
                verdicts = res
                stats = {k: v.stats[k] - before.get(k, 0) for k in v.stats}
                n_workers = v.pool.max_workers
        finally:
            v.close()
    ok = [bool(x.correct) if x is not None else False for x in verdicts]
    reasons = [x.reason if x is not None else "incorrect: gold has no box" for x in verdicts]
    return Measurement(verifier=label, input_set=set_name, n=len(pairs), unique=len(keys), verdicts=ok, reasons=reasons,
                       seconds=seconds, warmup_s=statistics.median(warmups),
                       extra={"workers": n_workers, "stats": stats,
                              "timeouts": sum(r == "incorrect: timed out" for r in reasons),
                              "timed_out_items": [i for i, r in enumerate(reasons) if r == "incorrect: timed out"],
                              "warmup_all_s": warmups})


# --------------------------------------------------------------------------- math-verify (peer)


def _peer_worker(conn: Any) -> None:
    """Peer process: receive (gold, response), reply (correct, error, compute seconds)."""
    import logging

    from math_verify import parse, verify

    # math-verify logs each of its own timeouts; the parent counts slow calls instead
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        gold, resp = msg
        t = time.perf_counter()
        try:
            ok, err = bool(verify(parse(gold), parse(resp))), None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # every failure counts as "incorrect"
            ok, err = False, f"{type(e).__name__}: {str(e)[:80]}"
        conn.send((ok, err, time.perf_counter() - t))


class PeerGuard:
    """One math-verify process, called sequentially, killed and restarted on a call over ``guard`` s."""

    def __init__(self, guard: float) -> None:
        self.guard = guard
        self.ctx = mp.get_context("spawn")
        self.proc: Any = None
        self.conn: Any = None
        self.restarts = 0

    def start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_peer_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def call(self, gold: str, resp: str) -> tuple[bool, str | None, float]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        try:
            self.conn.send((gold, resp))
            if self.conn.poll(self.guard):
                return self.conn.recv()
            err = f"guard: no answer in {self.guard:g} s"
        except (EOFError, OSError, BrokenPipeError) as e:
            err = f"peer process died ({type(e).__name__})"
        self._kill()
        self.restarts += 1
        return False, err, float("nan")

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except Exception:
                pass
        self._kill()


def run_peer(pairs: list[Pair], guard: float, repeats: int, set_name: str) -> Measurement:
    seconds: list[float] = []
    warmups: list[float] = []
    verdicts: list[bool] = []
    reasons: list[str] = []
    compute: list[float] = []
    walls: list[float] = []
    restarts = 0
    for r in range(repeats):
        t0 = time.perf_counter()
        peer = PeerGuard(guard)
        try:
            peer.start()
            for g, resp, _at, _ts in WARM_PAIRS:
                peer.call(g, resp)
            warmups.append(time.perf_counter() - t0)
            kills0 = peer.restarts
            t1 = time.perf_counter()
            res = []
            for p in pairs:
                tc = time.perf_counter()
                ok, err, dt = peer.call(p.gold, p.response)
                res.append((ok, err, dt, time.perf_counter() - tc))
            seconds.append(time.perf_counter() - t1)
            if r == 0:
                verdicts = [x[0] for x in res]
                reasons = [("correct" if x[0] else "incorrect") + (f" ({x[1]})" if x[1] else "") for x in res]
                compute = [x[2] for x in res]
                walls = [x[3] for x in res]
                restarts = peer.restarts - kills0
        finally:
            peer.close()
    finite = [c for c in compute if c == c]
    return Measurement(verifier="math-verify", input_set=set_name, n=len(pairs), unique=len({(p.gold, p.response) for p in pairs}),
                       verdicts=verdicts, reasons=reasons, seconds=seconds, warmup_s=statistics.median(warmups),
                       extra={"errors": sum("(" in r for r in reasons), "guard_kills": restarts,
                              "slow_calls_over_5s": sum(w > SLOW_S for w in walls),
                              "max_call_s": max(walls, default=0.0),
                              "compute_s": sum(finite), "compute_rate": len(finite) / max(sum(finite), 1e-9),
                              "per_item_wall_s": walls, "warmup_all_s": warmups})


# --------------------------------------------------------------------------- metrics and report


def metrics(pred: list[bool], gold: list[bool]) -> dict[str, Any]:
    tp = sum(p and g for p, g in zip(pred, gold, strict=True))
    fp = sum(p and not g for p, g in zip(pred, gold, strict=True))
    fn = sum((not p) and g for p, g in zip(pred, gold, strict=True))
    tn = sum((not p) and (not g) for p, g in zip(pred, gold, strict=True))
    n = tp + fp + fn + tn
    prec = tp / (tp + fp) if tp + fp else None
    rec = tp / (tp + fn) if tp + fn else None
    f1 = 2 * prec * rec / (prec + rec) if prec is not None and rec is not None and prec + rec else None
    return {"n": n, "tp": tp, "fp": fp, "fn": fn, "tn": tn, "accuracy": (tp + tn) / n if n else None,
            "precision": prec, "recall": rec, "f1": f1}


def _f(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:5.1f}" if pct else f"{x:,.1f}"


def per_type(m: Measurement, pairs: list[Pair]) -> dict[str, dict[str, Any]]:
    counts = Counter(p.answer_type for p in pairs)
    out = {}
    for t in sorted(counts, key=lambda t: (-counts[t], t)):
        idx = [i for i, p in enumerate(pairs) if p.answer_type == t]
        out[t] = metrics([m.verdicts[i] for i in idx], [pairs[i].label for i in idx])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dev-pairs", type=Path, default=DEFAULT_DEV, help="dev pairs JSONL (default: %(default)s)")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help=f"test-set directory (default: $STUDYBENCH_DATA, else {DEFAULT_DATA})")
    ap.add_argument("--limit", type=int, default=None, help="use only the first N items of each input set")
    ap.add_argument("--repeats", type=int, default=1, help="timed repeats per measurement (median reported)")
    ap.add_argument("--timeout", type=float, default=5.0, help="studybench per-verification timeout, seconds")
    ap.add_argument("--peer-guard", type=float, default=30.0,
                    help="wall-clock seconds before a math-verify call is abandoned and its process restarted")
    ap.add_argument("--no-peer", action="store_true", help="skip math-verify")
    ap.add_argument("--out", type=Path, default=None, help="write the full results as JSON here")
    ap.add_argument("--season", type=int, default=0, metavar="N",
                    help="also measure 'studybench w=1 seasoned' on the dev pairs: the worker first judges N mutated "
                         "test-set golds (bench/verify_mutations.py; no dev pair among them, untimed), as a worker "
                         "does after the first minutes of a long run")
    ap.add_argument("--only-dev", action="store_true", help="measure the dev pairs only")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")

    data_dir = args.data_dir or Path(os.environ.get("STUDYBENCH_DATA") or DEFAULT_DATA)
    t_start = time.perf_counter()
    sets: dict[str, list[Pair]] = {"dev": load_dev(args.dev_pairs, args.limit)}
    self_pairs, per_split = load_self(data_dir, args.limit)
    if not args.only_dev:
        sets["gold-self"] = self_pairs
        sets["gold-sol"] = load_solution(data_dir, args.limit)
    season: list[Any] = []
    if args.season:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from verify_mutations import build_items, golds_testsets

        mutated = build_items(golds_testsets(data_dir, None))
        random.Random(0).shuffle(mutated)
        season = [(it["gold"], list(it["pred"]), it["at"], it["ts"], it["unit"]) for it in mutated[: args.season]]

    mv_version = None
    if not args.no_peer:
        try:
            mv_version = metadata.version("math-verify")
        except metadata.PackageNotFoundError:
            print('math-verify is not installed: pip install "math-verify>=0.7" (or run with --no-peer)', file=sys.stderr)
            return 2
    default_workers: str | None = None  # label of the default-workers verifier, known after its first run
    print(f"cores {os.cpu_count()}, Python {platform.python_version()}, studybench {metadata.version('studybench')}, "
          f"math-verify {mv_version or '(skipped)'}")
    print(f"dev pairs: {len(sets['dev'])} from {args.dev_pairs}")
    if "gold-self" in sets:
        print(f"gold-self: {len(self_pairs)} from {data_dir} ({', '.join(f'{k} {v}' for k, v in per_split.items())})")
        print(f"gold-sol: {len(sets['gold-sol'])} sub-problems whose reference solution has a box")
    if season:
        print(f"seasoning: {len(season)} mutated test-set golds judged (untimed) before 'studybench w=1 seasoned'")
    print(f"repeats per measurement: {args.repeats}; studybench timeout {args.timeout:g} s; "
          f"math-verify guard {args.peer_guard:g} s")
    print()

    results: list[Measurement] = []
    for name, pairs in sets.items():
        runs = [(1, "studybench w=1"), (None, "studybench w=D")]
        if season and name == "dev":
            runs.append((1, "studybench w=1 seasoned"))
        for workers, label in runs:
            m = run_studybench(pairs, workers, args.timeout, args.repeats, label, name,
                               season if label.endswith("seasoned") else None)
            if workers is None:
                m.verifier = default_workers = f"studybench w={m.extra['workers']}"
            results.append(m)
            print(f"  done {m.verifier:<16} {name:<9} {m.seconds[0]:7.2f} s", flush=True)
        if not args.no_peer:
            m = run_peer(pairs, args.peer_guard, args.repeats, name)
            results.append(m)
            print(f"  done {m.verifier:<16} {name:<9} {m.seconds[0]:7.2f} s", flush=True)
    print()

    peer_rate = {m.input_set: m.rate for m in results if m.verifier == "math-verify"}
    hdr = (f"{'verifier':<16} {'set':<9} {'n':>5} {'uniq':>5} {'acc%':>6} {'prec%':>6} {'rec%':>6} {'F1%':>6} "
           f"{'verif/s':>9} {'warm-up s':>9} {'vs m-v':>7}")
    print(hdr)
    print("-" * len(hdr))
    summary = []
    for m in results:
        mt = metrics(m.verdicts, [p.label for p in sets[m.input_set]])
        ratio = m.rate / peer_rate[m.input_set] if m.input_set in peer_rate else None
        print(f"{m.verifier:<16} {m.input_set:<9} {m.n:>5} {m.unique:>5} {_f(mt['accuracy']):>6} {_f(mt['precision']):>6} "
              f"{_f(mt['recall']):>6} {_f(mt['f1']):>6} {m.rate:>9,.1f} {m.warmup_s:>9.2f} "
              f"{(f'{ratio:.1f}x' if ratio is not None else '-'):>7}")
        summary.append((m, mt, ratio))

    dev = sets["dev"]
    verifiers = [m for m in results if m.input_set == "dev"]
    types = [t for t, c in Counter(p.answer_type for p in dev).most_common() if c >= MIN_TYPE_N]
    if types:
        print()
        print(f"dev pairs per answer type (types with >= {MIN_TYPE_N} pairs): precision% / recall%")
        cols = "".join(f" {m.verifier:>16}" for m in verifiers)
        print(f"{'type':<5} {'n':>4} {'pos':>4}{cols}")
        pts = {m.verifier: per_type(m, dev) for m in verifiers}
        for t in types:
            n_t = sum(p.answer_type == t for p in dev)
            pos = sum(p.answer_type == t and p.label for p in dev)
            cells = "".join(f" {_f(pts[m.verifier][t]['precision']).strip() + ' / ' + _f(pts[m.verifier][t]['recall']).strip():>16}"
                            for m in verifiers)
            print(f"{t:<5} {n_t:>4} {pos:>4}{cells}")

    print()
    for m in results:
        if m.verifier.startswith("studybench"):
            s = m.extra["stats"]
            print(f"{m.verifier} {m.input_set}: fast path {s.get('fast', 0)}, worker {s.get('worker', 0)}, "
                  f"memo hits {s.get('memo', 0)}, timeouts {m.extra['timeouts']}"
                  + "".join(f"\n    timed out: item {i} ({sets[m.input_set][i].answer_type}, {sets[m.input_set][i].source}, "
                            f"label {sets[m.input_set][i].label})" for i in m.extra["timed_out_items"]))
        else:
            print(f"math-verify {m.input_set}: exceptions/guard errors {m.extra['errors']}, guard kills {m.extra['guard_kills']}, "
                  f"calls > {SLOW_S:g} s: {m.extra['slow_calls_over_5s']}, slowest {m.extra['max_call_s']:.2f} s, "
                  f"in-process compute {m.extra['compute_rate']:,.1f} verif/s")
            slow = [i for i, w in enumerate(m.extra["per_item_wall_s"]) if w > SLOW_S]
            if slow:
                print(f"    calls > {SLOW_S:g} s: items {slow}")
    sol = [m for m in results if m.input_set == "gold-sol" and m.verifier == "studybench w=1"]
    if sol:
        miss = [(p, r) for p, ok, r in zip(sets["gold-sol"], sol[0].verdicts, sol[0].reasons, strict=True) if not ok]
        print(f"gold-sol exceptions (studybench): {len(miss)} of {sol[0].n}")
        for p, r in miss:
            print(f"    {p.source} [{p.answer_type}{',' + p.type_sequence if p.type_sequence else ''}]: {r[:110]}")
    for name in sets:
        a = [m for m in results if m.input_set == name and m.verifier.startswith("studybench")]
        if len(a) == 2:
            diff = sum(x != y for x, y in zip(a[0].verdicts, a[1].verdicts, strict=True))
            print(f"{name}: studybench w=1 vs {a[1].verifier} verdict disagreements: {diff}")
    print("Memo: each measurement used a fresh Verifier (no memo across measurements); within one, duplicate "
          "items (n - uniq) may be served from the memo.")
    print("uniq: studybench = distinct (gold boxes, extracted answers, type, type_sequence) keys, what its memo sees; "
          "math-verify = distinct (gold, response) strings (it has no memo).")
    print("Timed-out verifications count as 'incorrect' for both verifiers.")
    print("verif/s = n / wall-clock seconds of the timed pass (median over repeats), warm-up excluded; studybench "
          "includes gold_boxes + extract_answers + verify_many, math-verify includes parse x2 + verify + pipe round trip.")
    total = time.perf_counter() - t_start
    print(f"total run time: {total:.1f} s")

    if args.out:
        doc = {
            "env": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "studybench": metadata.version("studybench"), "math_verify": mv_version},
            "config": {"dev_pairs": str(args.dev_pairs), "data_dir": str(data_dir), "limit": args.limit,
                       "repeats": args.repeats, "timeout": args.timeout, "peer_guard": args.peer_guard,
                       "default_workers_label": default_workers},
            "inputs": {name: {"n": len(p), "positives": sum(x.label for x in p),
                              "by_type": dict(Counter(x.answer_type for x in p))} for name, p in sets.items()},
            "gold_self_per_split": per_split,
            "results": [
                {"verifier": m.verifier, "set": m.input_set, "n": m.n, "unique": m.unique, "metrics": mt,
                 "per_type": per_type(m, sets[m.input_set]), "verifications_per_s": m.rate, "seconds": m.seconds,
                 "warmup_s": m.warmup_s, "speed_ratio_vs_math_verify": ratio,
                 "extra": {k: v for k, v in m.extra.items() if k != "per_item_wall_s"}}
                for m, mt, ratio in summary
            ],
            "items": {
                name: [
                    {"i": i, "source": p.source, "answer_type": p.answer_type, "type_sequence": p.type_sequence,
                     "kind": p.kind, "label": p.label,
                     **{m.verifier: {"correct": m.verdicts[i], "reason": m.reasons[i],
                                  **({"wall_s": m.extra["per_item_wall_s"][i]} if "per_item_wall_s" in m.extra else {})}
                        for m in results if m.input_set == name}}
                    for i, p in enumerate(pairs)
                ]
                for name, pairs in sets.items()
            },
            "total_run_s": total,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
