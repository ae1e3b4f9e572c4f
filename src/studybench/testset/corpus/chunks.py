"""The redacted book corpus cut into fixed-size token chunks (``studybench export chunks``).

Each chapter's training file ``DIR/<source>/<chapter>/clean.redacted.md`` (written by ``corpus
redact``) is tokenized and cut into windows of at most ``size`` tokens (default 2,048, the chunk size
the StudyBench paper gave Bonito; Bonito itself sets no chunk length). A window ends at a paragraph boundary (a blank line) when one lies in
its last :data:`PARAGRAPH_WINDOW` share, else at the token boundary; consecutive windows may share
``overlap`` tokens. Whitespace-only windows are dropped.

One JSON object per chunk (JSON Lines):

==============  =====================================================================
``book``        the source folder (the test set's ``source``, e.g. ``Purcell_EM``)
``chapter``     the chapter folder
``chunk``       0-based index of the chunk within its chapter
``file``        the chapter file, relative to ``--books`` (``<source>/<chapter>/clean.redacted.md``)
``start``       character offset of the chunk in that file's text (UTF-8, a leading BOM dropped,
                newlines as stored): ``text == file_text[start:end]``
``end``         character offset one past the chunk's end
``n_tokens``    tokens of the chunk, by the chapter's tokenization (never more than ``size``)
``redacted``    false only for chapters taken unredacted under ``allow_unredacted``
``text``        the chunk
``context``     the same text again, for ``Bonito.generate_tasks(dataset, context_col="context", ...)``
                (Bonito takes the column's name as an argument and calls it ``context`` in its output)
==============  =====================================================================

A sidecar ``<out stem>.manifest.json`` records the tokenizer, size, overlap and each file's sha256.
Answer folders (solution manuals, see :attr:`Chapter.answer_folder`) are left out unless
``include_answers``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studybench.files import (
    InputFileError,
    atomic_write_lines,
    atomic_write_text,
    decode_utf8,
    dumps_json,
    read_user_bytes,
)
from studybench.testset.corpus.books import CLEAN, FULL, REDACTED, Chapter, CorpusError, scan_books
from studybench.tokens import Tokenizer, load_tokenizer

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "PARAGRAPH_WINDOW",
    "Chunk",
    "chunk_text",
    "export_chunks",
    "manifest_path",
    "plan_chapters",
    "read_chapter",
]

DEFAULT_CHUNK_TOKENS = 2048
PARAGRAPH_WINDOW = 0.15
"""A window ends at the last paragraph boundary within its final 15 % of tokens, if there is one."""

_MAX_CHAPTER_BYTES = 64 * 1024 * 1024
_BLANK_AHEAD = re.compile(r"[^\S\n]*\n[^\S\n]*\n")


@dataclass(frozen=True)
class Chunk:
    """One window of a text: characters ``[start, end)`` holding ``n_tokens`` tokens."""

    start: int
    end: int
    n_tokens: int


def _after_blank_line(text: str, pos: int) -> bool:
    """``text[:pos]`` ends with a blank line (two newlines, only spaces or tabs around them)."""
    newlines = 0
    while pos > 0 and newlines < 2:
        c = text[pos - 1]
        if c == "\n":
            newlines += 1
        elif c not in " \t\r":
            return False
        pos -= 1
    return newlines == 2


def _paragraph_boundary(text: str, pos: int) -> bool:
    return _after_blank_line(text, pos) or _BLANK_AHEAD.match(text, pos) is not None


def chunk_text(text: str, spans: Sequence[tuple[int, int]], size: int = DEFAULT_CHUNK_TOKENS, overlap: int = 0) -> list[Chunk]:
    """Cut a tokenized text into windows of at most ``size`` tokens.

    Args:
        text: the text.
        spans: its token spans, covering it in order (:func:`studybench.tokens.token_spans`).
        size: the most tokens a window holds.
        overlap: tokens each window repeats from the end of the previous one.

    Returns:
        The windows in order; whitespace-only ones dropped.

    Raises:
        ValueError: ``size`` < 1, or ``overlap`` not in ``[0, size)``.
    """
    if size < 1:
        raise ValueError(f"chunk size must be >= 1 token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be >= 0 and smaller than the chunk size ({size}), got {overlap}")
    out: list[Chunk] = []
    n, i = len(spans), 0
    reach = max(1, int(size * PARAGRAPH_WINDOW))
    while i < n:
        j = min(i + size, n)
        if j < n:
            for k in range(j, max(i, j - reach), -1):
                if _paragraph_boundary(text, spans[k - 1][1]):
                    j = k
                    break
        start, end = spans[i][0], spans[j - 1][1]
        if text[start:end].strip():
            out.append(Chunk(start, end, j - i))
        if j >= n:
            break
        i = max(j - overlap, i + 1)
    return out


def manifest_path(out: Path) -> Path:
    """The sidecar of ``out``: ``chunks.jsonl`` -> ``chunks.manifest.json``."""
    return out.with_name(f"{out.stem}.manifest.json")


def _chapter_file(ch: Chapter, allow_unredacted: bool) -> str | None:
    if ch.has(REDACTED):
        return REDACTED
    if allow_unredacted:
        for name in (CLEAN, FULL):
            if ch.has(name):
                return name
    return None


def _listing(labels: list[str], shown: int = 8) -> str:
    more = f" and {len(labels) - shown} more" if len(labels) > shown else ""
    return ", ".join(labels[:shown]) + more


def plan_chapters(books: Path, allow_unredacted: bool, include_answers: bool) -> tuple[list[tuple[Chapter, str]], int]:
    """The chapters under ``books`` and the file to read in each: the redaction rule of every corpus consumer.

    Args:
        books: the ``--books`` directory.
        allow_unredacted: take ``clean.md`` (else ``full.md``) where ``clean.redacted.md`` is missing.
        include_answers: keep answer folders (solution manuals).

    Returns:
        ``([(chapter, file name), ...], answer folders skipped)``.

    Raises:
        CorpusError: no chapters; chapters not redacted (without ``allow_unredacted``) or with no text.
    """
    chapters = [ch for chs in scan_books(books).values() for ch in chs]
    skipped = sum(ch.answer_folder for ch in chapters) if not include_answers else 0
    chapters = [ch for ch in chapters if include_answers or not ch.answer_folder]
    if not chapters:
        raise CorpusError(f"--books {books}: no chapters (expected DIR/<source>/<chapter>/{REDACTED})")
    plan, unredacted, empty = [], [], []
    for ch in chapters:
        name = _chapter_file(ch, allow_unredacted)
        if name is not None:
            plan.append((ch, name))
        elif not allow_unredacted and (ch.has(CLEAN) or ch.has(FULL)):
            unredacted.append(ch.label)
        else:
            empty.append(ch.label)
    if unredacted:
        raise CorpusError(
            f"not redacted: {_listing(unredacted)} (no {REDACTED}); run `studybench corpus redact` first, "
            "or pass --allow-unredacted to use text that may hold the test set's problems"
        )
    if empty:
        allowed = f"{REDACTED}, {CLEAN} or {FULL}" if allow_unredacted else REDACTED
        raise CorpusError(f"no text to chunk in {_listing(empty)} (no {allowed}); run `studybench corpus check`")
    return plan, skipped


def read_chapter(path: Path) -> tuple[str, str]:
    """A chapter file's text (UTF-8, a leading BOM dropped) and the sha256 of its bytes.

    Raises:
        CorpusError: the file cannot be read, is too large or is not UTF-8.
    """
    try:
        data = read_user_bytes(path, limit=_MAX_CHAPTER_BYTES)
        text = decode_utf8(data, path)
    except InputFileError as e:
        raise CorpusError(str(e)) from None
    return text, hashlib.sha256(data).hexdigest()


def export_chunks(
    books: Path,
    out: Path,
    *,
    size: int = DEFAULT_CHUNK_TOKENS,
    overlap: int = 0,
    tokenizer: Tokenizer | str | None = None,
    allow_unredacted: bool = False,
    include_answers: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Write the corpus under ``books`` as JSON Lines of token chunks, and its manifest beside it.

    Args:
        books: the ``--books`` directory (``DIR/<source>/<chapter>/clean.redacted.md``).
        out: the JSONL file to write (replaced atomically); the manifest goes to :func:`manifest_path`.
        size: the most tokens per chunk.
        overlap: tokens each chunk repeats from the previous one of its chapter.
        tokenizer: a tokenizer or a name for :func:`studybench.tokens.load_tokenizer` (default built-in).
        allow_unredacted: chunk ``clean.md`` (else ``full.md``) where ``clean.redacted.md`` is missing,
            marking those rows ``redacted: false``.
        include_answers: keep answer folders (solution manuals), left out by default.
        progress: called as ``progress(chapter_label, done, total)`` after each chapter.

    Returns:
        The manifest: tokenizer, size, overlap, counts (books, chapters, chunks, tokens), answer
        folders skipped, unredacted chapters, and the sha256 of every file read.

    Raises:
        CorpusError: no chapters, chapters not redacted (without ``allow_unredacted``) or with no
            text, a file that cannot be read or is not UTF-8.
        ValueError: a bad size or overlap.
        studybench.tokens.TokenizerError: the tokenizer cannot be loaded.
        OSError: ``out`` cannot be written.
    """
    if size < 1:
        raise ValueError(f"--size must be >= 1 token, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"--overlap must be >= 0 and smaller than --size ({size}), got {overlap}")
    books = Path(books)
    plan, skipped = plan_chapters(books, allow_unredacted, include_answers)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
    files: dict[str, str] = {}
    totals = {"chunks": 0, "tokens": 0}
    unredacted = [ch.label for ch, name in plan if name != REDACTED]

    def rows() -> Iterator[dict[str, Any]]:
        for done, (ch, name) in enumerate(plan, start=1):
            rel = f"{ch.source}/{ch.name}/{name}"
            text, files[rel] = read_chapter(ch.file(name))
            for idx, c in enumerate(chunk_text(text, tok.spans(text), size, overlap)):
                piece = text[c.start:c.end]
                totals["chunks"] += 1
                totals["tokens"] += c.n_tokens
                yield {"book": ch.source, "chapter": ch.name, "chunk": idx, "file": rel, "start": c.start,
                       "end": c.end, "n_tokens": c.n_tokens, "redacted": name == REDACTED, "text": piece,
                       "context": piece}
            if progress:
                progress(ch.label, done, len(plan))

    atomic_write_lines(out, (dumps_json(row, indent=None) + "\n" for row in rows()))
    manifest = {
        "tokenizer": tok.name,
        "size": size,
        "overlap": overlap,
        "paragraph_window": PARAGRAPH_WINDOW,
        "books": len({ch.source for ch, _ in plan}),
        "chapters": len(plan),
        "chunks": totals["chunks"],
        "tokens": totals["tokens"],
        "answer_folders_skipped": skipped,
        "unredacted_chapters": unredacted,
        "files": files,
    }
    atomic_write_text(manifest_path(out), dumps_json(manifest) + "\n")
    return manifest
