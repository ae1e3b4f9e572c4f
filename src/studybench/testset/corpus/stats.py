"""The benchmark's size tables: Table 1 (what each layer and test set holds) and Table 7 (sub-disciplines).

Paper Table 1 counts the three training layers (Corpus; Instructions with Answer, single-turn and
multi-sub; Instructions without Answer) and the two test sets; Table 7 gives the sub-discipline mix
of the Application and Transfer Sets. :func:`data_stats` computes both for the files present, beside
the paper's counts (:data:`studybench.instructions.PAPER_COUNTS`), so a partial download or a rebuilt
set shows where it differs.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from studybench.datasets import Dataset
from studybench.files import MAX_DATA_BYTES, InputFileError, read_user_bytes
from studybench.instructions import PAPER_COUNTS, InstructionLayer
from studybench.records import label_map
from studybench.testset.corpus.books import CLEAN, FULL, REDACTED, CorpusError, scan_books

__all__ = ["CorpusStats", "DataStats", "LayerStats", "SetStats", "corpus_stats", "data_stats", "layer_stats"]


@dataclass
class LayerStats:
    """One instruction layer (a Table 1 row).

    Attributes:
        kind: ``single``, ``multi_sub`` or ``without_answer``.
        path: the file.
        records: records in the file (for multi-sub: one per sub-problem).
        exercises: distinct textbook exercises (source, chapter, source_problem_id).
        paper: the paper's record count for the full layer.
        head: whether the file is a partial copy (``*.head.json``).
        unusable_golds: records whose gold answer the verifier cannot use.
        answer_types: records per answer type.
        sub_disciplines: records per sub-discipline.
        sources: records per book.
    """

    kind: str
    path: str
    records: int
    exercises: int
    paper: int
    head: bool
    unusable_golds: int = 0
    answer_types: dict[str, int] = field(default_factory=dict)
    sub_disciplines: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)


@dataclass
class SetStats:
    """One test set: its size against the paper's, and its sub-discipline mix (Table 7).

    Attributes:
        name: ``application`` or ``transfer`` (or the file's name).
        path: the file.
        parents: parents in the file.
        sub_problems: scored sub-problems.
        paper_parents: the paper's parent count (0 when unknown).
        paper_sub_problems: the paper's sub-problem count (0 when unknown).
        sub_disciplines: ``{sub-discipline: [parents, sub-problems]}``, spellings of one label merged.
    """

    name: str
    path: str
    parents: int
    sub_problems: int
    paper_parents: int
    paper_sub_problems: int
    sub_disciplines: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class CorpusStats:
    """The Corpus layer of a books directory (Table 1's first row).

    Attributes:
        root: the books directory.
        books: sources with at least one chapter file.
        chapters: chapter files counted (answer folders, i.e. solution manuals, left out).
        answer_chapters: answer folders left out.
        bytes: size of the chapter files.
        tokens: estimated tokens (the builtin tokenizer of :mod:`studybench.tokens`).
        stages: chapter files per stage (``redacted``, ``clean``, ``full``): the latest file of each chapter.
        per_book: ``{source: [chapters, bytes, tokens]}``.
    """

    root: str
    books: int = 0
    chapters: int = 0
    answer_chapters: int = 0
    bytes: int = 0
    tokens: int = 0
    stages: dict[str, int] = field(default_factory=dict)
    per_book: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class DataStats:
    """Table 1 and Table 7 for the files present (see :func:`data_stats`)."""

    layers: list[LayerStats] = field(default_factory=list)
    sets: list[SetStats] = field(default_factory=list)
    corpus: CorpusStats | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def layer_stats(layer: InstructionLayer) -> LayerStats:
    """Counts of one instruction layer (paper Table 1).

    Args:
        layer: a loaded layer (:func:`studybench.instructions.load_instructions`).

    Returns:
        Its records, exercises, answer-type / sub-discipline / book counts and the paper's count.
    """
    recs = layer.records
    exercises = {(r.metadata.source, r.metadata.source_chapter, r.metadata.source_problem_id) for r in recs}
    types = Counter(r.answer_type.strip().upper() for r in recs if r.has_answer)
    disc = Counter(r.metadata.sub_discipline or "(none)" for r in recs)
    books = Counter(r.metadata.source for r in recs)
    return LayerStats(kind=layer.kind, path=str(layer.path), records=len(recs), exercises=len(exercises),
                      paper=PAPER_COUNTS.get(layer.kind, 0), head=layer.head,
                      unusable_golds=len(layer.gold_problems()), answer_types=dict(types.most_common()),
                      sub_disciplines=dict(disc.most_common()), sources=dict(books.most_common()))


def _set_stats(ds: Dataset, labels: dict[str, str]) -> SetStats:
    mix: dict[str, list[int]] = {}
    for p in ds.parents:
        label = labels.get(p.problem_type, p.problem_type.strip() or "(none)")
        row = mix.setdefault(label, [0, 0])
        row[0] += 1
        row[1] += len(p.subs())
    mix = dict(sorted(mix.items(), key=lambda kv: (-kv[1][0], kv[0])))
    return SetStats(name=ds.name, path=str(ds.path), parents=len(ds), sub_problems=ds.n_sub_problems,
                    paper_parents=PAPER_COUNTS.get(f"{ds.name}_parents", 0),
                    paper_sub_problems=PAPER_COUNTS.get(f"{ds.name}_sub_problems", 0), sub_disciplines=mix)


def corpus_stats(root: str | os.PathLike[str], count_tokens: Any = None) -> CorpusStats:
    """Chapter files, megabytes and estimated tokens of a books directory (paper Table 1, Corpus).

    Each chapter counts its latest file: ``clean.redacted.md``, else ``clean.md``, else ``full.md``.
    Answer folders (solution manuals, :attr:`studybench.testset.corpus.books.Chapter.answer_folder`) are left
    out of the counts and counted apart.

    Args:
        root: the books directory (``DIR/<source>/<chapter>/``).
        count_tokens: ``text -> int`` (default: :func:`studybench.tokens.count_tokens`, the builtin estimate).

    Returns:
        The counts.

    Raises:
        studybench.testset.corpus.books.CorpusError: ``root`` is not a directory, or a chapter file cannot be
            read (not a regular file, too large).
    """
    if count_tokens is None:
        from studybench.tokens import count_tokens
    out = CorpusStats(root=str(root))
    for source, chapters in scan_books(Path(root)).items():
        n = b = t = 0
        for ch in chapters:
            path = next((ch.file(name) for name in (REDACTED, CLEAN, FULL) if ch.has(name)), None)
            if path is None:
                continue
            if ch.answer_folder:
                out.answer_chapters += 1
                continue
            try:  # a regular file only (never a named pipe or a device)
                data = read_user_bytes(path, limit=MAX_DATA_BYTES)
            except InputFileError as e:
                raise CorpusError(str(e)) from None
            stage = {REDACTED: "redacted", CLEAN: "clean", FULL: "full"}[path.name]
            out.stages[stage] = out.stages.get(stage, 0) + 1
            n += 1
            b += len(data)
            t += int(count_tokens(data.decode("utf-8", errors="replace")))
        if n:
            out.per_book[source] = [n, b, t]
            out.books += 1
            out.chapters += n
            out.bytes += b
            out.tokens += t
    return out


def data_stats(layers: list[InstructionLayer], sets: list[Dataset], books: str | os.PathLike[str] | None = None,
               count_tokens: Any = None) -> DataStats:
    """Paper Table 1 (layers and test sets, beside the paper's counts) and Table 7 (sub-discipline mix).

    Args:
        layers: the instruction layers present.
        sets: the test sets present (named ``application`` / ``transfer`` to be compared with the paper).
        books: a books directory, for the Corpus row (optional).
        count_tokens: the token counter for the Corpus row (default: the builtin estimate).

    Returns:
        The tables; sub-discipline spellings that differ only in case, ``&`` / ``and`` or
        punctuation are one label across both test sets.

    Raises:
        studybench.testset.corpus.books.CorpusError: ``books`` is not a directory.
        OSError: a chapter file cannot be read.
    """
    labels = label_map(p.problem_type for ds in sets for p in ds.parents)
    return DataStats(layers=[layer_stats(x) for x in layers], sets=[_set_stats(ds, labels) for ds in sets],
                     corpus=corpus_stats(books, count_tokens) if books is not None else None)
