"""Mutation sweep: real golds, mutated into predictions that must be WRONG; how many does the verifier accept?

Each gold (the test sets' sub-problems, the UGPhysics problems, the dev pairs' golds; deduplicated) is
mutated in one box at a time, each mutation meant to change the answer's meaning:

* ``num*2``, ``num*10``, ``num*1.1``: the first number of the box (not a subscript, not the base of
  ``10^{..}``) multiplied by 2, 10 or 1.1 (1.1 is well beyond any tolerance the verifier allows);
* ``sign``: the right-hand side (or the whole box) negated;
* ``swap-sym``: two distinct single-letter symbols exchanged everywhere in the box;
* ``unit-dim``: an upright unit replaced by one of another dimension (``m`` -> ``s``, ``J`` -> ``W``);
* ``unit-prefix``: an upright unit given a wrong prefix (``m`` -> ``km``, ``kg`` -> ``g``);
* ``swap-slots``: the first two differing boxes of a TUP gold exchanged;
* ``exponent``: the first integer exponent changed (``^{2}`` -> ``^{3}``, ``^{-1}`` -> ``^{-2}``).

Every mutated prediction is verified with the rule verifier against its gold. An accepted one is a
*false accept* unless the mutation happened to keep the meaning (a swap of symmetric symbols ``a + b``,
a sign flip of zero, slots of an unordered list): the script lists each accept (gold, mutated
prediction, reason) so that a human can judge, and prints the count per mutation kind and per answer
type. Timed-out verifications are counted separately (they are rejections for a reason that says
nothing).

Usage::

    python bench/verify_mutations.py                    # everything (a few minutes on 2 cores)
    python bench/verify_mutations.py --limit 100        # the first 100 golds of each source
    python bench/verify_mutations.py --cache /tmp/m.jsonl   # resumable: verdicts already in the
                                                            # file are reused, new ones appended

Paths: ``--data-dir`` (default ``$STUDYBENCH_DATA``), ``--ugphysics`` (default
``<repo>/../shared/data/ugphysics``), ``--dev-pairs`` (default
``<repo>/../shared/data/verifier/dev_pairs.jsonl``); a missing source is skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from studybench.datasets import load_dataset
from studybench.records import gold_boxes
from studybench.verify import Verifier

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("STUDYBENCH_DATA") or REPO.parent / "shared" / "data" / "studybench")
DEFAULT_UG = REPO.parent / "shared" / "data" / "ugphysics"
DEFAULT_DEV = REPO.parent / "shared" / "data" / "verifier" / "dev_pairs.jsonl"
PRIMITIVE = ("NV", "EX", "EQ", "IN", "MC", "TF", "QL")
MUTABLE = ("NV", "EX", "EQ", "IN")  # slot types whose content the mutations below can change

# -------------------------------------------------------------------------------- golds


def golds_testsets(data_dir: Path, limit: int | None) -> list[dict[str, Any]]:
    """Every sub-problem of application.json and transfer.json: boxes, answer type, type sequence."""
    out: list[dict[str, Any]] = []
    for split in ("application", "transfer"):
        path = data_dir / f"{split}.json"
        if not path.is_file():
            continue
        ds = load_dataset(path, name=split)
        for sl in ds.sub_problem_refs():
            sub = sl.sub
            out.append({"src": split, "boxes": list(sub.boxes), "at": sub.answer_type.value,
                        "ts": sub.type_sequence_str, "unit": None})
    return out[:limit] if limit else out


def golds_ugphysics(root: Path, limit: int | None) -> list[dict[str, Any]]:
    """Every UGPhysics problem whose answer types are all primitive, with its stated unit."""
    out: list[dict[str, Any]] = []
    for path in sorted(root.glob("*/en.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            r = json.loads(line)
            types = [t.strip().upper() for t in str(r.get("answer_type") or "").split(",")]
            if not types or any(t not in PRIMITIVE for t in types):
                continue
            at, ts = (types[0], "") if len(types) == 1 else ("TUP", ",".join(types))
            try:
                boxes = gold_boxes(str(r.get("answers") or ""), at, ts)
            except Exception:  # noqa: BLE001 - an unusable gold is skipped
                continue
            if boxes:
                unit = r.get("unit")
                out.append({"src": "ugphysics", "boxes": boxes, "at": at, "ts": ts,
                            "unit": unit if isinstance(unit, str) else None})
    return out[:limit] if limit else out


def golds_dev(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The dev pairs' golds (each once)."""
    out: list[dict[str, Any]] = []
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        r = json.loads(line)
        at, ts = str(r["answer_type"]), str(r.get("type_sequence") or "")
        try:
            boxes = gold_boxes(r["gold"], at, ts)
        except Exception:  # noqa: BLE001
            continue
        if boxes:
            out.append({"src": "dev", "boxes": boxes, "at": at, "ts": ts, "unit": r.get("gold_unit")})
    return out[:limit] if limit else out


# -------------------------------------------------------------------------------- mutations

_NUM = re.compile(r"(?<![_A-Za-z0-9.])(\d+(?:\.\d+)?)(?![\d.])")
_SKIP_GROUPS = re.compile(r"\\\\\[[^\]]*\]|\\[dt]?frac\s*\d\d?|\\(?:mathrm|text|operatorname|mathbf|hat|vec|textrm|rm|mbox)\s*\{(?:[^{}]|\{[^{}]*\})*\}|\\[A-Za-z]+|_\{[^{}]*\}|_.")


def _masked(s: str) -> str:
    """``s`` with commands, upright/text groups and subscripts blanked (same length), so that regexes
    for numbers and symbols only see the mathematical letters and digits."""
    return _SKIP_GROUPS.sub(lambda m: " " * len(m.group(0)), s)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def mut_number(factor: float) -> Callable[[str], str | None]:
    """The first number of the box (not in a subscript, not the base 10 of a power) times ``factor``."""

    def mutate(box: str) -> str | None:
        masked = _masked(box)
        for m in _NUM.finditer(masked):
            text = m.group(1)
            if float(text) == 0:
                continue
            after = masked[m.end():].lstrip()
            if text == "10" and after.startswith("^"):
                continue
            if re.search(r"\^\s*\{?\s*-?\s*$", masked[: m.start()]):
                continue  # an exponent: the exponent mutation's job
            return box[: m.start()] + _fmt(float(text) * factor) + box[m.end():]
        return None

    return mutate


def _top_eq(box: str) -> int | None:
    depth = 0
    for i, c in enumerate(box):
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == "=" and depth == 0 and box[i - 1: i] not in ("<", ">", "!", "\\"):
            return i
    return None


def mut_sign(box: str) -> str | None:
    """The right-hand side (after the last top-level ``=``) or the whole box, negated."""
    if re.fullmatch(r"\s*[-+]?\s*0*(?:\.0*)?\s*", box) or "," in box.replace("\\,", " ") or "<" in box or ">" in box or "\\le" in box or "\\ge" in box:
        return None
    i = _top_eq(box)
    while i is not None:
        j = _top_eq(box[i + 1:])
        if j is None:
            break
        i = i + 1 + j
    if i is None:
        return f"-\\left({box}\\right)"
    if re.fullmatch(r"\s*[-+]?\s*0*(?:\.0*)?\s*", box[i + 1:]):
        return None  # a zero right-hand side
    return f"{box[: i + 1]} -\\left({box[i + 1:].strip()}\\right)"


def mut_swap_symbols(box: str) -> str | None:
    """Two distinct single-letter symbols of the box exchanged everywhere (outside commands and text)."""
    masked = _masked(box)
    seen: list[str] = []
    for m in re.finditer(r"(?<![A-Za-z\\])([A-Za-z])(?![A-Za-z])", masked):
        c = m.group(1)
        if c not in seen and c not in "ed":  # e (Euler), d (differentials)
            seen.append(c)
    if len(seen) < 2:
        return None
    a, b = seen[0], seen[1]
    out = list(box)
    for m in re.finditer(r"(?<![A-Za-z\\])([A-Za-z])(?![A-Za-z])", masked):
        if m.group(1) == a:
            out[m.start()] = b
        elif m.group(1) == b:
            out[m.start()] = a
    return "".join(out)


_OTHER_DIM = {"m": "s", "s": "m", "kg": "m", "g": "s", "J": "W", "W": "J", "N": "J", "V": "A", "A": "V", "Pa": "N",
              "K": "s", "Hz": "m", "eV": "m", "C": "V", "T": "V", "mol": "K", "F": "H", "H": "F", "km": "s", "cm": "s",
              "mm": "s", "nm": "s", "MeV": "m", "keV": "m", "GeV": "m", "L": "s"}
_UNIT_RE = re.compile(r"(\\mathrm\s*\{\s*)(" + "|".join(sorted(map(re.escape, _OTHER_DIM), key=len, reverse=True))
                      + r")(?![A-Za-z])")


def _unit_match(box: str) -> re.Match[str] | None:
    """The first upright unit that is not a subscript (``E_{\\mathrm{F}}`` is a symbol, not farad)."""
    for m in _UNIT_RE.finditer(box):
        if not re.search(r"_\s*\{?\s*$", box[: m.start()]):
            return m
    return None


def mut_unit_dim(box: str) -> str | None:
    """The first upright unit replaced by one of another dimension."""
    m = _unit_match(box)
    if not m:
        return None
    return box[: m.start(2)] + _OTHER_DIM[m.group(2)] + box[m.end(2):]


def mut_unit_prefix(box: str) -> str | None:
    """The first upright unit given a wrong prefix (``k`` added, or a ``k``/``c``/``m`` prefix dropped)."""
    m = _unit_match(box)
    if not m:
        return None
    u = m.group(2)
    if len(u) > 1 and u[0] in "kcmnMG" and u not in ("mol",):
        new = u[1:]
    else:
        new = "k" + u
    return box[: m.start(2)] + new + box[m.end(2):]


def mut_exponent(box: str) -> str | None:
    """The first integer exponent changed by one away from zero (``^{2}`` -> ``^{3}``, ``^{-1}`` -> ``^{-2}``)."""
    m = re.search(r"\^\s*(\{\s*(-?\d+)\s*\}|(\d))", box)
    if not m:
        return None
    k = int(m.group(2) if m.group(2) is not None else m.group(3))
    new = k - 1 if k < 0 else k + 1
    return box[: m.start()] + "^{" + str(new) + "}" + box[m.end():]


BOX_MUTATIONS: dict[str, Callable[[str], str | None]] = {
    "num*2": mut_number(2.0),
    "num*10": mut_number(10.0),
    "num*1.1": mut_number(1.1),
    "sign": mut_sign,
    "swap-sym": mut_swap_symbols,
    "unit-dim": mut_unit_dim,
    "unit-prefix": mut_unit_prefix,
    "exponent": mut_exponent,
}
"""Mutations of one box; ``None`` when a mutation does not apply to it."""


def _slot_types(g: dict[str, Any]) -> list[str]:
    ts = [t.strip().upper() for t in str(g["ts"] or "").split(",") if t.strip()]
    if g["at"] in ("TUP", "ALT") and len(ts) == len(g["boxes"]):
        return ts
    return [g["at"]] * len(g["boxes"])


def mutants(g: dict[str, Any]) -> Iterator[tuple[str, list[str], str]]:
    """``(kind, predicted boxes, slot type)`` for every mutation that applies to gold ``g`` (one box changed)."""
    boxes, types = g["boxes"], _slot_types(g)
    for kind, fn in BOX_MUTATIONS.items():
        for i, (box, t) in enumerate(zip(boxes, types, strict=True)):
            if t not in MUTABLE:
                continue
            new = fn(box)
            if new is not None and new.strip() != box.strip():
                yield kind, [*boxes[:i], new, *boxes[i + 1:]], t
                break  # one mutated box per kind and gold
    if g["at"] == "TUP" and len(boxes) >= 2:
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                if boxes[i].strip() != boxes[j].strip():
                    swapped = list(boxes)
                    swapped[i], swapped[j] = swapped[j], swapped[i]
                    yield "swap-slots", swapped, "TUP"
                    return


# -------------------------------------------------------------------------------- run


def _key(item: dict[str, Any]) -> str:
    raw = json.dumps([item["gold"], item["pred"], item["at"], item["ts"], item["unit"]], ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


def build_items(golds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One item per (gold, mutation), deduplicated."""
    items: dict[str, dict[str, Any]] = {}
    for g in golds:
        for kind, pred, slot_type in mutants(g):
            it = {"src": g["src"], "kind": kind, "at": g["at"], "ts": g["ts"], "slot_type": slot_type,
                  "unit": g["unit"], "gold": list(g["boxes"]), "pred": pred}
            items.setdefault(_key(it), it)
    return list(items.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--ugphysics", type=Path, default=DEFAULT_UG)
    ap.add_argument("--dev-pairs", type=Path, default=DEFAULT_DEV)
    ap.add_argument("--limit", type=int, default=None, help="first N golds of each source")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--cache", type=Path, default=None, help="JSONL of verdicts: reused and appended (resumable)")
    ap.add_argument("--chunk", type=int, default=200, help="items verified (and appended to --cache) per batch")
    ap.add_argument("--quiet", action="store_true", help="counts only, no list of accepts")
    args = ap.parse_args()

    golds = (golds_testsets(args.data_dir, args.limit) + golds_ugphysics(args.ugphysics, args.limit)
             + golds_dev(args.dev_pairs, args.limit))
    seen_golds: set[str] = set()
    uniq = []
    for g in golds:
        k = json.dumps([g["boxes"], g["at"], g["ts"], g["unit"]], ensure_ascii=False)
        if k not in seen_golds:
            seen_golds.add(k)
            uniq.append(g)
    items = build_items(uniq)
    done: dict[str, dict[str, Any]] = {}
    if args.cache is not None and args.cache.is_file():
        for line in args.cache.read_text(encoding="utf-8").split("\n"):
            try:
                r = json.loads(line)
                done[r["key"]] = r
            except (json.JSONDecodeError, KeyError):
                continue  # a line cut by an interrupted run
    todo = [it for it in items if _key(it) not in done]
    print(f"{len(uniq)} golds, {len(items)} mutated predictions ({len(items) - len(todo)} from the cache)", flush=True)
    t0 = time.monotonic()
    with Verifier(workers=args.workers, timeout=args.timeout) as v:
        for start in range(0, len(todo), args.chunk):
            batch = todo[start: start + args.chunk]
            verdicts = v.verify_many([(it["gold"], it["pred"], it["at"], it["ts"], it["unit"]) for it in batch])
            lines = []
            for it, vd in zip(batch, verdicts, strict=True):
                r = {"key": _key(it), "correct": bool(vd.correct), "reason": vd.reason}
                done[r["key"]] = r
                lines.append(json.dumps(r, ensure_ascii=False) + "\n")
            if args.cache is not None:
                with args.cache.open("a", encoding="utf-8") as f:
                    f.writelines(lines)
            print(f"  {start + len(batch)}/{len(todo)} verified, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)

    by_kind: Counter[str] = Counter()
    acc_kind: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    acc_type: Counter[str] = Counter()
    timeouts: Counter[str] = Counter()
    accepts = []
    for it in items:
        r = done[_key(it)]
        t = it["slot_type"] if it["at"] != "TUP" or it["kind"] == "swap-slots" else f"TUP/{it['slot_type']}"
        by_kind[it["kind"]] += 1
        by_type[t] += 1
        if r["reason"].startswith("incorrect: timed out"):
            timeouts[it["kind"]] += 1
        if r["correct"]:
            acc_kind[it["kind"]] += 1
            acc_type[t] += 1
            accepts.append((it, r))
    print(f"\n{'mutation':<12} {'n':>6} {'accepted':>9} {'timed out':>10}")
    for k in [*BOX_MUTATIONS, "swap-slots"]:
        if by_kind[k]:
            print(f"{k:<12} {by_kind[k]:>6} {acc_kind[k]:>9} {timeouts[k]:>10}")
    print(f"{'total':<12} {sum(by_kind.values()):>6} {sum(acc_kind.values()):>9} {sum(timeouts.values()):>10}")
    print(f"\n{'answer type':<12} {'n':>6} {'accepted':>9}")
    for t, n in sorted(by_type.items()):
        print(f"{t:<12} {n:>6} {acc_type[t]:>9}")
    if not args.quiet and accepts:
        print(f"\naccepted mutations ({len(accepts)}): judge whether each is truly equal to its gold")
        for it, r in accepts:
            print(f"- [{it['kind']}] {it['src']} {it['at']}{'(' + it['ts'] + ')' if it['ts'] else ''}"
                  f"{' unit=' + str(it['unit']) if it['unit'] else ''}")
            print(f"    gold: {' | '.join(it['gold'])}")
            print(f"    pred: {' | '.join(it['pred'])}")
            print(f"    why:  {r['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
