r"""Every gold the package has, as one list: the two test sets, the training layers, the UGPhysics golds.

A :class:`Gold` is one scored answer: its ``\boxed{}`` string, answer type, type sequence, box
contents, per-box unit hints (UGPhysics states the unit of a unitless gold) and problem text. Golds
come from

* ``application.json`` and ``transfer.json`` (:func:`studybench.datasets.load_dataset`), one per
  sub-problem;
* the instruction layers with answers (``verifiable_instr*.json``, :mod:`studybench.instructions`),
  one per record with a usable gold;
* the UGPhysics ``<Subject>/en.jsonl`` files, one per problem whose answer types are primitive
  (several types make a TUP).

:func:`load_golds` loads what it finds, deduplicates identical golds (the first id wins) and counts
what it left out and why; it never raises on a bad record.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from studybench.answers import split_top_level
from studybench.datasets import OFFICIAL_SPLITS, load_dataset
from studybench.instructions import find_instruction_files, load_instructions
from studybench.records import SubProblem

__all__ = ["Gold", "GoldSet", "default_ugphysics_dir", "load_golds", "slot_types"]

PRIMITIVE = ("NV", "EX", "EQ", "IN", "MC", "TF", "QL")


@dataclass(frozen=True)
class Gold:
    r"""One gold answer (one scored sub-problem).

    Attributes:
        gold_id: ``<source>:<id>`` (``transfer:APhO/2003/T3:T3(a)``, ``train/single:17``,
            ``ugphysics:Atomic Physics:815``).
        source: ``application``, ``transfer``, ``train/single``, ``train/multi_sub`` or ``ugphysics``.
        answer: the gold string with one ``\boxed{}`` per answer.
        answer_type: one of the nine types.
        type_sequence: comma string (``"EQ,NV"``), empty for atomic types.
        boxes: the box contents, one per slot (:attr:`studybench.records.SubProblem.boxes`).
        units: per box, the unit the source states for a unitless gold, or ``None``.
        gold_unit: the unit hint as the verifier takes it (one string, ``None`` when there is none).
        problem: the problem text (may be empty).
    """

    gold_id: str
    source: str
    answer: str
    answer_type: str
    type_sequence: str
    boxes: tuple[str, ...]
    units: tuple[str | None, ...] = ()
    gold_unit: str | None = None
    problem: str = ""


@dataclass
class GoldSet:
    """The golds :func:`load_golds` found.

    Attributes:
        golds: deduplicated, in source order.
        loaded: golds read per source (before deduplication).
        skipped: golds left out, by ``"<source>: <why>"``.
        duplicates: golds dropped as identical to an earlier one.
    """

    golds: list[Gold]
    loaded: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0


def slot_types(g: Gold) -> list[str]:
    """The primitive type of each box of ``g`` (the type sequence of a TUP / ALT, else the answer type)."""
    ts = [t.strip().upper() for t in g.type_sequence.split(",") if t.strip()]
    if g.answer_type in ("TUP", "ALT") and len(ts) == len(g.boxes):
        return ts
    return [g.answer_type] * len(g.boxes)


def default_ugphysics_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """``ugphysics/`` beside the StudyBench data directory (``$STUDYBENCH_DATA/../ugphysics``), if it exists."""
    base = Path(data_dir) if data_dir else (Path(os.environ["STUDYBENCH_DATA"]) if os.environ.get("STUDYBENCH_DATA") else None)
    if base is None:
        return None
    for p in (base.parent / "ugphysics", base / "ugphysics"):
        if p.is_dir():
            return p
    return None


def _from_sub(gold_id: str, source: str, sub: SubProblem, problem: str) -> Gold:
    return Gold(gold_id=gold_id, source=source, answer=sub.answer, answer_type=sub.answer_type.value,
                type_sequence=sub.type_sequence_str, boxes=tuple(sub.boxes), units=(None,) * len(sub.boxes),
                problem=problem)


def _testsets(data_dir: Path, out: GoldSet) -> list[Gold]:
    golds: list[Gold] = []
    for split in OFFICIAL_SPLITS:
        path = data_dir / f"{split}.json"
        if not path.is_file():
            out.skipped[f"{split}: file not found"] += 1
            continue
        try:
            ds = load_dataset(path, name=split)
        except Exception as e:  # noqa: BLE001 - a broken file is counted, not raised
            out.skipped[f"{split}: {type(e).__name__}"] += 1
            continue
        for ref in ds.sub_problem_refs():
            p = ref.parent
            uid = f"{p.source}/{p.year}/{p.source_problem_id}" if p.year else f"{p.source}/{p.source_problem_id}"
            problem = "\n\n".join(t for t in (p.problem if p.sub_problems else "", ref.sub.problem) if t.strip())
            golds.append(_from_sub(f"{split}:{uid}:{ref.sub.problem_id}", split, ref.sub, problem))
            out.loaded[split] += 1
    return golds


def _train(train_dir: Path, out: GoldSet) -> list[Gold]:
    golds: list[Gold] = []
    try:
        files = find_instruction_files(train_dir)
    except Exception as e:  # noqa: BLE001
        out.skipped[f"train: {type(e).__name__}"] += 1
        return golds
    for kind in ("single", "multi_sub"):
        path = files.get(kind)  # type: ignore[call-overload]
        if path is None:
            continue
        src = f"train/{kind}"
        try:
            layer = load_instructions(path, kind)  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001
            out.skipped[f"{src}: {type(e).__name__}"] += 1
            continue
        for i, rec in enumerate(layer.records):
            if not rec.has_answer:
                continue
            try:
                sub = rec.gold(f"{rec.metadata.source_problem_id}.{rec.sub_index}")
            except ValueError:
                out.skipped[f"{src}: gold the verifier cannot use"] += 1
                continue
            golds.append(_from_sub(f"{src}:{i}", src, sub, rec.question))
            out.loaded[src] += 1
    return golds


def _ug_types(raw: object) -> list[str] | None:
    text = re.split(r"\n\s*\n", str(raw or ""), maxsplit=1)[0]
    types = [t.replace("\\", "").strip().upper() for t in text.split(",")]
    return types if types and all(t in PRIMITIVE for t in types) else None


def _ug_units(raw: object, n: int) -> tuple[str | None, ...]:
    if not isinstance(raw, str) or not raw.strip():
        return (None,) * n
    parts = [u.strip() for u in split_top_level(raw)] if n > 1 else [raw.strip()]
    if len(parts) != n:
        return (None,) * n
    return tuple(None if u in ("", "None", "null") else u for u in parts)


def _ugphysics(root: Path, out: GoldSet) -> list[Gold]:
    golds: list[Gold] = []
    for path in sorted(root.glob("*/en.jsonl")):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                out.skipped["ugphysics: bad JSON line"] += 1
                continue
            if not isinstance(r, dict):
                out.skipped["ugphysics: not an object"] += 1
                continue
            types = _ug_types(r.get("answer_type"))
            if types is None:
                out.skipped["ugphysics: answer type not primitive"] += 1
                continue
            at, ts = (types[0], "") if len(types) == 1 else ("TUP", ",".join(types))
            ident = f"{r.get('subject') or path.parent.name}:{r.get('index', line_no)}"
            try:
                sub = SubProblem(problem_id=ident, problem=str(r.get("problem") or ""),
                                 answer=str(r.get("answers") or ""), answer_type=at, type_sequence=ts)
                boxes = tuple(sub.boxes)
            except Exception:  # noqa: BLE001 - an unusable gold is counted
                out.skipped["ugphysics: gold the verifier cannot use"] += 1
                continue
            units = _ug_units(r.get("unit"), len(boxes))
            hint = r.get("unit") if isinstance(r.get("unit"), str) and any(u is not None for u in units) else None
            golds.append(Gold(gold_id=f"ugphysics:{ident}", source="ugphysics", answer=sub.answer, answer_type=at,
                              type_sequence=ts, boxes=boxes, units=units, gold_unit=hint, problem=sub.problem))
            out.loaded["ugphysics"] += 1
    return golds


def load_golds(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    train_dir: str | os.PathLike[str] | None = None,
    ugphysics_dir: str | os.PathLike[str] | None = None,
    sources: tuple[str, ...] = ("testsets", "train", "ugphysics"),
) -> GoldSet:
    """Load every gold answer the package has, deduplicated.

    Args:
        data_dir: the StudyBench data directory (``application.json``, ``transfer.json``,
            ``train/``); default ``$STUDYBENCH_DATA``.
        train_dir: the instruction layers (default ``<data_dir>/train``).
        ugphysics_dir: the UGPhysics root holding ``<Subject>/en.jsonl`` (default
            :func:`default_ugphysics_dir`).
        sources: which of ``testsets``, ``train``, ``ugphysics`` to read.

    Returns:
        A :class:`GoldSet`. A missing file or directory, or a record that cannot be used, is counted
        in ``skipped``; nothing raises.
    """
    out = GoldSet(golds=[])
    base = Path(data_dir) if data_dir else (Path(os.environ["STUDYBENCH_DATA"]) if os.environ.get("STUDYBENCH_DATA") else None)
    golds: list[Gold] = []
    if "testsets" in sources:
        if base is None:
            out.skipped["testsets: no data directory"] += 1
        else:
            golds += _testsets(base, out)
    if "train" in sources:
        tdir = Path(train_dir) if train_dir else (base / "train" if base is not None else None)
        if tdir is None or not tdir.is_dir():
            out.skipped["train: directory not found"] += 1
        else:
            golds += _train(tdir, out)
    if "ugphysics" in sources:
        udir = Path(ugphysics_dir) if ugphysics_dir else default_ugphysics_dir(base)
        if udir is None or not udir.is_dir():
            out.skipped["ugphysics: directory not found"] += 1
        else:
            golds += _ugphysics(udir, out)
    seen: set[str] = set()
    for g in golds:
        key = json.dumps([g.boxes, g.answer_type, g.type_sequence, g.gold_unit], ensure_ascii=False)
        if key in seen:
            out.duplicates += 1
            continue
        seen.add(key)
        out.golds.append(g)
    return out
