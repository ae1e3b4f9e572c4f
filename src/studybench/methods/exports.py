"""Training material out: the instruction layers as verl parquet, a TRL dataset and an agent-loop CSV.

Paper appendix J. Three shapes of the same records (:mod:`studybench.instructions`):

* :func:`export_verl` - ``train.parquet`` / ``validation.parquet`` in verl's RL schema
  (``data_source``, ``prompt``, ``ability``, ``reward_model``, ``extra_info``), scored by
  :func:`studybench.rewards.compute_score`.
* :func:`export_trl` - a Hugging Face ``DatasetDict`` (``train`` / ``validation``) in TRL's
  conversational prompt-only format with the gold columns :func:`studybench.rewards.trl_reward` reads.
* :func:`export_csv` - an agent-loop CSV: ``question``, ``answer``, ``answer_type``,
  ``type_sequence``, ``split`` (train / val / test, split per source), ``source``, ... EvoSkill reads
  the columns its ``.evoskill/config.toml`` names (``question_column``, ``ground_truth_column``:
  here ``answer``, ``category_column``: e.g. ``source``) and makes its own split per category
  (``train_ratio`` / ``val_ratio``); it does not read ``split``.

**Prompts** (verl, TRL). The system message is :data:`studybench.protocol.DEFAULT_SYSTEM_PROMPT`
(or a given text, or none); then the record's conversation as the file holds it - for a multi-sub
record the earlier sub-problems' user turns, each followed by an assistant turn holding that
sub-problem's **gold** answer, then the current user turn. The last user turn gets ``"\\n\\n"`` +
:data:`studybench.protocol.ANSWER_FORMAT` appended (reason step by step, ``Final Answer: \\boxed{}``).

**Splits are by exercise.** All records of one exercise - the same ``(source, source_chapter,
source_problem_id)``, so every record of a multi-sub chain, across layers too - land on the same
side, so no exercise is trained on and validated on. Exercises are ranked by
``sha256(f"{seed}|{source}|{chapter}|{problem_id}")``: the split depends on the seed and the
exercise set, not on file order. With a validation fraction ``f`` and ``n`` exercises,
``round(f * n)`` exercises are held out (at least 1 and at most ``n - 1`` when ``f > 0`` and
``n >= 2``). The CSV's three-way split is made per source (book): see :func:`split_counts`.

**Left out.** A record whose gold answer the verifier cannot use
(:attr:`studybench.instructions.Instruction.gold_problem`) is left out with a warning naming file,
record and problem, and counted. Instructions without Answer have no gold to reward: verl and the
CSV refuse them; the TRL export takes them with ``with_without_answer=True`` as rows with empty
gold columns (the reward function gives no reward for them).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from studybench import __version__
from studybench.datasets import DatasetError, resolve_train_dir
from studybench.escaping import csv_writer
from studybench.files import atomic_write_text, dumps_json
from studybench.instructions import (
    LAYER_FILES,
    LAYER_KINDS,
    Instruction,
    InstructionLayer,
    LayerKind,
    find_instruction_files,
    load_instructions,
)
from studybench.protocol import ANSWER_FORMAT, DEFAULT_SYSTEM_PROMPT

__all__ = [
    "ABILITY",
    "CSV_COLUMNS",
    "CSV_SPLITS",
    "DEFAULT_CSV_FRACTIONS",
    "DEFAULT_LAYERS",
    "ExportError",
    "ExportResult",
    "exercise_key",
    "export_csv",
    "export_trl",
    "export_verl",
    "load_layers",
    "prompt_messages",
    "render_question",
    "split_counts",
    "verl_schema",
]

ABILITY = "physics"
DEFAULT_LAYERS: tuple[LayerKind, ...] = ("single", "multi_sub")
CSV_SPLITS = ("train", "val", "test")
DEFAULT_CSV_FRACTIONS = (0.2, 0.1, 0.7)
CSV_COLUMNS = ("question", "answer", "answer_type", "type_sequence", "split", "source", "source_problem_id",
               "source_chapter", "layer", "sub_index")
_GOLD = ("answer", "answer_type", "type_sequence", "gold_unit")
_META = ("source", "source_problem_id", "source_chapter", "sub_discipline")


class ExportError(ValueError):
    """An export that cannot be made (missing train directory or layer file, a layer without
    answers where answers are needed, bad fractions); the message says what to change."""


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        out: the directory or file written.
        counts: rows per ``(split, layer)``.
        left_out: records left out per layer (gold answers the verifier cannot use).
        warnings: one line per left-out record, naming file, record and problem.
        layers: the layer files used, ``{kind: path}``.
        sha256: the layer files' sha256, ``{kind: hex}``.
        exercises: exercises per split.
    """

    out: Path
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    exercises: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All rows written."""
        return sum(self.counts.values())

    def split_total(self, split: str) -> int:
        """Rows written to one split."""
        return sum(n for (s, _), n in self.counts.items() if s == split)


def load_layers(train_dir: str | os.PathLike[str] | None, layers: Sequence[str]) -> list[InstructionLayer]:
    """Load the named instruction layers from a ``train/`` directory (paper appendix J).

    Args:
        train_dir: the directory (``None``: :func:`studybench.datasets.resolve_train_dir`'s search).
        layers: layer kinds (``single``, ``multi_sub``, ``without_answer``), in output order.

    Returns:
        The layers, in the order asked.

    Raises:
        ExportError: an unknown or repeated layer, a missing directory or layer file.
        InstructionError: a layer file that cannot be used (names file, record, field).
    """
    if train_dir is None:
        try:
            d = resolve_train_dir()
        except DatasetError as e:
            raise ExportError(str(e)) from None
    else:
        d = Path(train_dir)
    if not d.is_dir():
        raise ExportError(f"--train-dir {d}: no such directory (expected the folder of the instruction layers, "
                          "train/ beside the test sets, holding verifiable_instr.json)")
    if not layers:
        raise ExportError(f"no layers asked; choose from {', '.join(LAYER_KINDS)}")
    unknown = [x for x in layers if x not in LAYER_KINDS]
    if unknown:
        raise ExportError(f"unknown layer {unknown[0]!r}; choose from {', '.join(LAYER_KINDS)}")
    if len(set(layers)) != len(layers):
        raise ExportError(f"layer listed twice: {', '.join(layers)}")
    found = find_instruction_files(d)
    out: list[InstructionLayer] = []
    for name in layers:
        kind = cast(LayerKind, name)
        path = found.get(kind)
        if path is None:
            raise ExportError(f"{d}: no {LAYER_FILES[kind]} (nor its .head.json copy) for layer {kind}")
        out.append(load_instructions(path, kind))
    return out


def exercise_key(rec: Instruction) -> tuple[str, str, str]:
    """The exercise a record belongs to: ``(source, source_chapter, source_problem_id)``."""
    m = rec.metadata
    return (m.source, m.source_chapter, m.source_problem_id)


def _rank(keys: Iterable[tuple[str, str, str]], seed: int) -> list[tuple[str, str, str]]:
    return sorted(set(keys), key=lambda k: (hashlib.sha256("|".join((str(seed), *k)).encode("utf-8")).hexdigest(), k))


def _val_count(n: int, fraction: float) -> int:
    if n < 2 or fraction <= 0:
        return 0 if fraction < 1 or n == 0 else n
    return min(max(round(fraction * n), 1), n - 1)


def split_counts(n: int, fractions: Sequence[float]) -> list[int]:
    """How many of ``n`` exercises each split gets (the CSV's per-source split).

    Largest remainder: each split gets ``floor(f * n)``, the exercises left over go one each to the
    splits with the largest remainders (ties: the earlier split). Then, when ``n >= 3``, a split
    with a positive fraction and no exercise takes one from the largest split, so every source with
    at least 3 exercises has one of each. Example, 0.2 / 0.1 / 0.7: 10 -> 2 / 1 / 7, 4 -> 1 / 1 / 2,
    3 -> 1 / 1 / 1, 2 -> 1 / 0 / 1.

    Args:
        n: exercises.
        fractions: non-negative, summing to 1.

    Returns:
        One count per fraction, summing to ``n``.
    """
    exact = [f * n for f in fractions]
    counts = [int(x) for x in exact]
    order = sorted(range(len(fractions)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    if n >= len(fractions):
        for i, f in enumerate(fractions):
            if f > 0 and counts[i] == 0:
                j = max(range(len(counts)), key=lambda k: (counts[k], -k))
                counts[j] -= 1
                counts[i] += 1
    return counts


def _usable(layers: Sequence[InstructionLayer], result: ExportResult, *, need_answer: bool,
            what: str) -> list[tuple[InstructionLayer, int, Instruction]]:
    rows: list[tuple[InstructionLayer, int, Instruction]] = []
    for layer in layers:
        if layer.kind == "without_answer" and need_answer:
            raise ExportError(f"{layer.path}: Instructions without Answer have no gold answer to reward; "
                              f"the {what} export needs answers (use layers single,multi_sub)")
        result.layers[layer.kind] = str(layer.path)
        result.sha256[layer.kind] = layer.sha256
        bad = dict(layer.gold_problems())
        result.left_out[layer.kind] = len(bad)
        for i, problem in sorted(bad.items()):
            result.warnings.append(f"left out: {layer.describe_problem(i, problem)}")
        rows.extend((layer, i, r) for i, r in enumerate(layer.records) if i not in bad)
    return rows


def prompt_messages(rec: Instruction, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The chat prompt of a record for RL training (verl, TRL).

    Args:
        rec: the record.
        system_prompt: the system message (``None`` or empty: none; the record's own system turns are
            then kept, otherwise replaced).

    Returns:
        ``[{"role", "content"}, ...]``: the system message, the record's turns (a multi-sub record's
        earlier gold answers as assistant turns), the last user turn with ``"\\n\\n"`` +
        :data:`~studybench.protocol.ANSWER_FORMAT` appended.
    """
    turns = [{"role": m.role, "content": m.content} for m in rec.messages if not (system_prompt and m.role == "system")]
    turns[-1]["content"] = f"{turns[-1]['content']}\n\n{ANSWER_FORMAT}"
    return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + turns


def render_question(rec: Instruction) -> str:
    """A record's conversation as one text (the CSV's ``question``).

    A single-turn record: its user turn as it is. A multi-sub record: each earlier part, then the
    current one, separated by blank lines::

        Part 1:
        <user turn 1>

        Answer to part 1:
        <gold answer of part 1>

        Part 2 (answer this part):
        <current user turn>

    Args:
        rec: the record.

    Returns:
        The text.
    """
    turns = [m for m in rec.messages if m.role != "system"]
    if len(turns) == 1:
        return turns[0].content
    parts: list[str] = []
    for j, m in enumerate(turns[:-1]):
        n = j // 2 + 1
        parts.append(f"Part {n}:\n{m.content}" if m.role == "user" else f"Answer to part {n}:\n{m.content}")
    parts.append(f"Part {len(turns) // 2 + 1} (answer this part):\n{turns[-1].content}")
    return "\n\n".join(parts)


def _gold_unit(rec: Instruction) -> str:
    extra = rec.model_extra or {}
    v = extra.get("gold_unit")
    return v.strip() if isinstance(v, str) else ""


def _gold(rec: Instruction) -> dict[str, str]:
    return {"answer": rec.answer, "answer_type": rec.answer_type.strip().upper(),
            "type_sequence": rec.type_sequence_str, "gold_unit": _gold_unit(rec)}


def _problem(rec: Instruction) -> str:
    """The problem text the model sees (its user turns), which the reward hands to the verifier for definitions."""
    return "\n\n".join(m["content"] for m in prompt_messages(rec, None) if m.get("role") == "user")


def _meta(rec: Instruction) -> dict[str, str]:
    m = rec.metadata
    return {"source": m.source, "source_problem_id": m.source_problem_id, "source_chapter": m.source_chapter,
            "sub_discipline": m.sub_discipline}


def _two_way(items: list[tuple[InstructionLayer, int, Instruction]], val_fraction: float, seed: int,
             result: ExportResult) -> dict[str, list[tuple[InstructionLayer, int, Instruction]]]:
    if not 0 <= val_fraction < 1:
        raise ExportError(f"val fraction must be in [0, 1), got {val_fraction}")
    ranked = _rank((exercise_key(r) for _, _, r in items), seed)
    val = set(ranked[: _val_count(len(ranked), val_fraction)])
    result.exercises = {"train": len(ranked) - len(val), "validation": len(val)}
    out: dict[str, list[tuple[InstructionLayer, int, Instruction]]] = {"train": [], "validation": []}
    for it in items:
        split = "validation" if exercise_key(it[2]) in val else "train"
        out[split].append(it)
        result.counts[(split, it[0].kind)] = result.counts.get((split, it[0].kind), 0) + 1
    return out


def _sidecar(result: ExportResult, fmt: str, seed: int, fractions: dict[str, float], extra: dict[str, Any]) -> str:
    return dumps_json({
        "format": fmt,
        "studybench_version": __version__,
        "layers": result.layers,
        "sha256": result.sha256,
        "seed": seed,
        "fractions": fractions,
        "split_by": "exercise (source, source_chapter, source_problem_id)",
        "rows": {s: {k: n for (s2, k), n in sorted(result.counts.items()) if s2 == s}
                 for s in dict.fromkeys(s for s, _ in sorted(result.counts))},
        "exercises": result.exercises,
        "left_out": result.left_out,
        **extra,
    }) + "\n"


def _need(extra_modules: Sequence[str], what: str) -> None:
    import importlib.util

    missing = [m for m in extra_modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"the {what} export needs {', '.join(missing)}: pip install 'studybench[train]'")


def verl_schema() -> Any:
    """The pyarrow schema of a verl export (one schema for every row).

    Returns:
        A ``pyarrow.Schema``.

    Raises:
        ImportError: pyarrow is missing (the ``train`` extra).
    """
    _need(["pyarrow"], "verl")
    import pyarrow as pa

    s = pa.string()
    return pa.schema([
        ("data_source", s),
        ("prompt", pa.list_(pa.struct([("role", s), ("content", s)]))),
        ("ability", s),
        ("reward_model", pa.struct([("style", s), ("ground_truth", pa.struct([(g, s) for g in _GOLD]))])),
        ("extra_info", pa.struct([("split", s), ("index", pa.int64()), ("layer", s), ("record", pa.int64()),
                                  *((k, s) for k in _META), ("sub_index", pa.int64()), ("problem", s)])),
    ])


def export_verl(out_dir: str | os.PathLike[str], layers: Sequence[InstructionLayer], *, val_fraction: float = 0.05,
                seed: int = 0, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT) -> ExportResult:
    """Write ``train.parquet``, ``validation.parquet`` and ``export.json`` for verl (paper appendix J).

    Each row: ``data_source`` (``studybench/<layer>``), ``prompt`` (:func:`prompt_messages`),
    ``ability`` (``physics``), ``reward_model`` ``{"style": "rule", "ground_truth": {answer,
    answer_type, type_sequence, gold_unit}}`` (all strings) and ``extra_info`` ``{split, index (row in
    its split), layer, record (index in its file), source, source_problem_id, source_chapter,
    sub_discipline, sub_index, problem}`` (``problem``: the user turns' text, which the reward hands to
    the verifier so that definitions the problem states count). Each file is written to a temporary name and renamed.

    Args:
        out_dir: the directory (created).
        layers: Instructions with Answer layers (:func:`load_layers`).
        val_fraction: exercises held out for validation, in [0, 1).
        seed: the split's seed.
        system_prompt: the system message (``None``: none).

    Returns:
        Rows per split and layer, records left out, warnings.

    Raises:
        ExportError: a without-answer layer, a bad fraction, an ``out_dir`` that is a file, or a
            non-empty directory that is not a previous export (no ``export.json``).
        ImportError: pyarrow is missing (the ``train`` extra).
        OSError: a file cannot be written.
    """
    schema = verl_schema()
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory; give a directory for the parquet files")
    if out.is_dir() and not (out / "export.json").is_file() and any(out.iterdir()):
        raise ExportError(f"{out} is not empty and is not a previous verl export (no export.json); give a new directory")
    result = ExportResult(out=out)
    splits = _two_way(_usable(layers, result, need_answer=True, what="verl"), val_fraction, seed, result)
    out.mkdir(parents=True, exist_ok=True)
    for split, items in splits.items():
        rows = [{
            "data_source": f"studybench/{layer.kind}",
            "prompt": prompt_messages(rec, system_prompt),
            "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": _gold(rec)},
            "extra_info": {"split": split, "index": n, "layer": layer.kind, "record": i, **_meta(rec),
                           "sub_index": rec.sub_index, "problem": _problem(rec)},
        } for n, (layer, i, rec) in enumerate(items)]
        path = out / f"{split}.parquet"
        tmp = out / f".{split}.parquet.tmp-{os.getpid()}"
        try:
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    atomic_write_text(out / "export.json", _sidecar(result, "verl", seed, {"train": 1 - val_fraction, "validation": val_fraction},
                                                    {"system_prompt": system_prompt or "", "answer_format": ANSWER_FORMAT}))
    return result


def _trl_features() -> Any:
    import datasets

    s = datasets.Value("string")
    i = datasets.Value("int64")
    return datasets.Features({
        "prompt": [{"role": s, "content": s}],
        **{g: s for g in _GOLD},
        "layer": s, "record": i, **{k: s for k in _META}, "sub_index": i, "problem": s,
    })


def export_trl(out_dir: str | os.PathLike[str], layers: Sequence[InstructionLayer], *, val_fraction: float = 0.05,
               seed: int = 0, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
               with_without_answer: bool = False) -> ExportResult:
    """Save a ``datasets.DatasetDict`` (``train``, ``validation``) for TRL's GRPOTrainer (paper appendix J).

    Conversational prompt-only format: ``prompt`` (:func:`prompt_messages`), the gold columns
    :func:`studybench.rewards.trl_reward` reads (``answer``, ``answer_type``, ``type_sequence``,
    ``gold_unit``, and ``problem``, the user turns' text, from which the verifier reads stated definitions;
    TRL passes every column to the reward function), and ``layer``, ``record``,
    ``source``, ``source_problem_id``, ``source_chapter``, ``sub_discipline``, ``sub_index``. The
    dataset is saved to a temporary directory beside ``out_dir`` and renamed into place; an existing
    ``out_dir`` is replaced only when it holds a previous dataset (``dataset_dict.json``).

    Args:
        out_dir: the dataset directory (``datasets.load_from_disk(out_dir)``).
        layers: the layers (:func:`load_layers`).
        val_fraction: exercises held out for validation, in [0, 1).
        seed: the split's seed.
        system_prompt: the system message (``None``: none).
        with_without_answer: accept a ``without_answer`` layer; its rows have empty gold columns
            (no reward to give: the reward function returns ``None`` for them).

    Returns:
        Rows per split and layer, records left out, warnings.

    Raises:
        ExportError: a without-answer layer without ``with_without_answer``, a bad fraction, an
            ``out_dir`` that exists and is not a previous dataset.
        ImportError: ``datasets`` is missing (the ``train`` extra).
        OSError: the dataset cannot be written.
    """
    _need(["datasets", "pyarrow"], "TRL")
    import datasets

    out = Path(out_dir)
    if out.exists() and not (out / "dataset_dict.json").is_file() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not a previous TRL export (no dataset_dict.json); give a new directory")
    result = ExportResult(out=out)
    splits = _two_way(_usable(layers, result, need_answer=not with_without_answer, what="TRL"), val_fraction, seed, result)
    features = _trl_features()
    dd = datasets.DatasetDict({split: datasets.Dataset.from_list([
        {"prompt": prompt_messages(rec, system_prompt), **_gold(rec), "layer": layer.kind, "record": i, **_meta(rec),
         "sub_index": rec.sub_index, "problem": _problem(rec)} for layer, i, rec in items], features=features) if items
        # from_list([]) loses the columns and save_to_disk then fails: an empty split needs them spelled out
        else datasets.Dataset.from_dict({k: [] for k in features}, features=features) for split, items in splits.items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        # an empty split saved with datasets' default (0 shards) cannot be loaded back: one shard each
        dd.save_to_disk(str(tmp), num_shards={split: 1 for split, ds in dd.items() if len(ds) == 0} or None)
        atomic_write_text(tmp / "export.json", _sidecar(result, "trl", seed, {"train": 1 - val_fraction, "validation": val_fraction},
                                                        {"system_prompt": system_prompt or "", "answer_format": ANSWER_FORMAT,
                                                         "with_without_answer": with_without_answer}))
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    finally:
        if bars:
            datasets.enable_progress_bars()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return result


def export_csv(out_file: str | os.PathLike[str], layers: Sequence[InstructionLayer], *,
               fractions: Sequence[float] = DEFAULT_CSV_FRACTIONS, seed: int = 0) -> ExportResult:
    """Write the agent-loop CSV (paper appendix J; EvoSkill reads it with ``ground_truth_column = "answer"``).

    Columns :data:`CSV_COLUMNS`: ``question`` (:func:`render_question`), ``answer`` (the gold
    ``\\boxed{}`` string), ``answer_type``, ``type_sequence`` (comma string), ``split`` (``train``,
    ``val``, ``test``), ``source``, ``source_problem_id``, ``source_chapter``, ``layer``,
    ``sub_index``. The split is made per source (book), by exercise, with :func:`split_counts`;
    within a source the exercises are ranked as in the module docstring. Written with the csv
    module (every field quoted; LaTeX commas, quotes and newlines round-trip), UTF-8, to a
    temporary file then renamed.

    Args:
        out_file: the CSV file.
        layers: Instructions with Answer layers (:func:`load_layers`).
        fractions: train, val, test fractions (non-negative, summing to 1).
        seed: the split's seed.

    Returns:
        Rows per split and layer, records left out, warnings.

    Raises:
        ExportError: a without-answer layer, bad fractions.
        OSError: the file cannot be written.
    """
    fr = tuple(float(f) for f in fractions)
    if len(fr) != 3 or not all(math.isfinite(f) and f >= 0 for f in fr) or abs(sum(fr) - 1) > 1e-6:
        raise ExportError(f"fractions must be three non-negative numbers (train, val, test) summing to 1, got {','.join(map(str, fractions))}")
    out = Path(out_file)
    result = ExportResult(out=out)
    items = _usable(layers, result, need_answer=True, what="CSV")
    by_source: dict[str, list[tuple[str, str, str]]] = {}
    for _, _, rec in items:
        by_source.setdefault(rec.metadata.source, []).append(exercise_key(rec))
    split_of: dict[tuple[str, str, str], str] = {}
    for keys in by_source.values():
        ranked = _rank(keys, seed)
        start = 0
        for split, n in zip(CSV_SPLITS, split_counts(len(ranked), fr), strict=True):
            split_of.update((k, split) for k in ranked[start:start + n])
            start += n
    result.exercises = dict(Counter(split_of.values()))
    buf = io.StringIO(newline="")
    w = csv_writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for layer, _i, rec in items:
        split = split_of[exercise_key(rec)]
        result.counts[(split, layer.kind)] = result.counts.get((split, layer.kind), 0) + 1
        g = _gold(rec)
        m = _meta(rec)
        w.writerow([render_question(rec), g["answer"], g["answer_type"], g["type_sequence"], split, m["source"],
                    m["source_problem_id"], m["source_chapter"], layer.kind, rec.sub_index])
    atomic_write_text(out, buf.getvalue())
    atomic_write_text(out.with_name(out.name + ".json"),
                      _sidecar(result, "csv", seed, dict(zip(CSV_SPLITS, fr, strict=True)), {"split_per": "source"}))
    return result
