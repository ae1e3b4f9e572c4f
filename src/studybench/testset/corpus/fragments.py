"""Textbook fragments for retrieval (``studybench build fragments``; paper 2.1, the reference's size rules).

Each chapter's training file ``DIR/<source>/<chapter>/clean.redacted.md`` (the redaction rule is the one of
:func:`studybench.testset.corpus.chunks.plan_chapters`: unredacted chapters are refused unless ``allow_unredacted``) is
cut into fragments:

1. **At headings.** A fragment starts at every ATX heading (``#`` .. ``######``, outside fenced code) of the
   chapter's top level (the smallest level that occurs more than once, so that a lone chapter title such as
   the ``# Chapter 11 Angular Momentum`` of ``corpus ingest-cnxml`` is not the level its sections are cut
   at; the smallest level when none repeats), at every heading of any level whose title names a
   worked example or a solution (:data:`EXAMPLE_HEADING`, e.g. "Example 5.3", "Worked example", "Solution")
   unless it lies inside such an example (a deeper heading: "Solution" within "Example 5.3" stays in it),
   and at the first heading after such an example of the same or a higher level (back to exposition).
   The kind is ``example`` for a fragment opened by an example heading, else ``exposition``.
2. **Merge.** A fragment under ``min_chars`` (200) characters, stripped, is merged into the previous one of
   its chapter (the first of a chapter into the next one); the merged fragment keeps the earlier kind.
3. **Split.** A fragment over ``max_chars`` (6,000) is cut into pieces of about ``chunk_chars`` (2,000)
   characters that repeat the last ``overlap`` (400) characters of the previous piece; a piece ends at a
   paragraph boundary (a blank line) between half and 1.25 times ``chunk_chars`` when there is one, else at
   a space, and a next piece starts at a word boundary.

One JSON object per fragment (JSON Lines, ``DIR/fragments.jsonl``):

===================  ================================================================================
``id``               ``<source>/<chapter>/<index, 4 digits>``: stable for the same chapter file and settings
``book``             the source folder
``chapter``          the chapter folder
``index``            0-based position in the chapter
``kind``             ``exposition`` or ``example``
``section``          heading titles from the chapter's top level down to the fragment's first heading
``part``             0-based piece of a split fragment (0 when not split), ``parts`` the number of pieces
``solution_manual``  the chapter or source folder is named like a solution manual / answer section
``file``             ``<source>/<chapter>/<file read>``
``start``, ``end``   character offsets in that file's text: ``text == file_text[start:end]``
``redacted``         false only for chapters taken unredacted under ``allow_unredacted``
``text``             the fragment
===================  ================================================================================

A sidecar ``DIR/fragments.meta.json`` records the settings, the counts and each chapter file's sha256.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.files import atomic_write_lines, atomic_write_text, dumps_json
from studybench.testset.corpus.books import REDACTED, is_answer_name
from studybench.testset.corpus.chunks import plan_chapters, read_chapter

__all__ = [
    "EXAMPLE_HEADING",
    "FRAGMENTS",
    "Fragment",
    "FragmentSettings",
    "build_fragments",
    "fragment_text",
    "heading_kind",
    "split_long",
]

FRAGMENTS = "fragments.jsonl"

EXAMPLE_HEADING = re.compile(
    r"^(?:\W*\d+(?:\.\d+)*\W*)?(?:worked\s+examples?|examples?|solutions?|sample\s+problems?|illustrative\s+examples?)"
    r"(?![a-z])",
    re.IGNORECASE,
)
"""A heading title (after an optional number) that opens a worked example or a solution."""

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_BLANK = re.compile(r"\n[^\S\n]*\n")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # a backslash-escaped ASCII punctuation character


def heading_kind(title: str) -> str:
    """``example`` for a heading that opens a worked example or solution, else ``exposition``."""
    t = re.sub(r"[*_`]", "", title).strip()
    return "example" if EXAMPLE_HEADING.match(t) else "exposition"


@dataclass(frozen=True)
class FragmentSettings:
    """The size rules (characters)."""

    min_chars: int = 200
    max_chars: int = 6000
    chunk_chars: int = 2000
    overlap: int = 400

    def check(self) -> None:
        """Raises ValueError when the rules are inconsistent (the message names the option)."""
        if self.chunk_chars < 1:
            raise ValueError(f"--chunk-chars must be >= 1, got {self.chunk_chars}")
        if not 0 <= self.overlap < self.chunk_chars // 2:
            raise ValueError(f"--overlap must be >= 0 and under half of --chunk-chars ({self.chunk_chars}), got {self.overlap}")
        if self.max_chars < self.chunk_chars:
            raise ValueError(f"--max-chars ({self.max_chars}) must be >= --chunk-chars ({self.chunk_chars})")
        if self.min_chars < 0:
            raise ValueError(f"--min-chars must be >= 0, got {self.min_chars}")


@dataclass
class Fragment:
    """Characters ``[start, end)`` of a chapter text."""

    start: int
    end: int
    kind: str = "exposition"
    section: list[str] = field(default_factory=list)
    part: int = 0
    parts: int = 1


def _headings(text: str) -> Iterator[tuple[int, int, str]]:
    """``(offset, level, title)`` of every ATX heading outside fenced code blocks."""
    pos, fence = 0, None
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
        elif fence is None:
            h = _HEADING.match(line.rstrip("\r\n"))
            if h:  # Markdown escapes dropped from the title (pandoc writes "Newton\'s")
                yield pos, len(h.group(1)), _ESCAPE.sub(r"\1", h.group(2)).strip()
        pos += len(line)


def _sections(text: str) -> list[Fragment]:
    heads = list(_headings(text))
    levels = Counter(lvl for _, lvl, _ in heads)
    top = min((lvl for lvl, n in levels.items() if n > 1), default=min(levels, default=1))
    out = [Fragment(0, 0)]
    stack: list[tuple[int, str]] = []
    example_level: int | None = None
    for pos, lvl, title in heads:
        while stack and stack[-1][0] >= lvl:
            stack.pop()
        stack.append((lvl, title))
        kind = heading_kind(title)
        inside = example_level is not None and lvl > example_level  # a "Solution" heading within an example
        cut = lvl == top or (kind == "example" and not inside) or (example_level is not None and not inside)
        if not cut:
            if lvl < top and not out[-1].section:  # a chapter title above the top level names what follows
                out[-1].section = [t for _, t in stack]
            continue
        example_level = lvl if kind == "example" and not inside else None
        out[-1].end = pos
        out.append(Fragment(pos, pos, kind, [t for _, t in stack]))
    out[-1].end = len(text)
    return [f for f in out if f.end > f.start]


def _merge(text: str, frags: list[Fragment], min_chars: int) -> list[Fragment]:
    out: list[Fragment] = []
    for f in frags:
        if out and len(text[f.start:f.end].strip()) < min_chars:
            out[-1].end = f.end
        elif out and len(text[out[-1].start:out[-1].end].strip()) < min_chars and len(out) == 1:
            # the chapter's first fragment is short: it has no previous one, so it takes the next one in
            out[-1] = Fragment(out[-1].start, f.end, out[-1].kind, out[-1].section)
        else:
            out.append(f)
    return out


def _word_start(text: str, pos: int, limit: int) -> int:
    """The first word start at or after ``pos`` (not beyond ``limit``)."""
    while pos < limit and pos > 0 and not text[pos - 1].isspace():
        pos += 1
    while pos < limit and text[pos].isspace():
        pos += 1
    return pos


def split_long(text: str, start: int, end: int, chunk_chars: int, overlap: int) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` into pieces of about ``chunk_chars`` that overlap by about ``overlap``.

    Args:
        text: the chapter text.
        start, end: the span to cut.
        chunk_chars: the target piece length.
        overlap: characters each piece repeats from the end of the previous one (moved forward to a word start).

    Returns:
        ``[(start, end), ...]`` covering ``[start, end)`` in order.
    """
    pieces: list[tuple[int, int]] = []
    s = start
    while True:
        if end - s <= chunk_chars + chunk_chars // 4:
            pieces.append((s, end))
            return pieces
        lo, target, hi = s + chunk_chars // 2, s + chunk_chars, min(end, s + chunk_chars + chunk_chars // 4)
        cut = None
        for m in _BLANK.finditer(text, lo, hi):  # the paragraph boundary nearest the target
            if cut is None or abs(m.end() - target) < abs(cut - target):
                cut = m.end()
        if cut is None:
            space = text.rfind(" ", lo, target)
            cut = space + 1 if space > lo else target
        pieces.append((s, cut))
        nxt = _word_start(text, max(cut - overlap, s + 1), cut)
        s = nxt if nxt < cut else cut


def fragment_text(text: str, settings: FragmentSettings | None = None) -> list[Fragment]:
    """The fragments of one chapter text (headings, then merge, then split; see the module docstring).

    Args:
        text: the chapter's Markdown.
        settings: the size rules (default :class:`FragmentSettings`).

    Returns:
        Fragments in order; whitespace-only ones dropped.

    Raises:
        ValueError: inconsistent settings.
    """
    st = settings or FragmentSettings()
    st.check()
    out: list[Fragment] = []
    for f in _merge(text, _sections(text), st.min_chars):
        if f.end - f.start > st.max_chars:
            spans = split_long(text, f.start, f.end, st.chunk_chars, st.overlap)
            out.extend(Fragment(a, b, f.kind, f.section, k, len(spans)) for k, (a, b) in enumerate(spans))
        elif text[f.start:f.end].strip():
            out.append(f)
    return out


def build_fragments(
    books: Path,
    work: Path,
    *,
    settings: FragmentSettings | None = None,
    allow_unredacted: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Write ``work/fragments.jsonl`` (replaced atomically) and ``work/fragments.meta.json``.

    Args:
        books: the ``--books`` directory (``DIR/<source>/<chapter>/clean.redacted.md``).
        work: the construction's work directory (created if missing).
        settings: the size rules.
        allow_unredacted: read ``clean.md`` (else ``full.md``) where ``clean.redacted.md`` is missing,
            marking those fragments ``redacted: false``.
        progress: called as ``progress(chapter_label, done, total)`` after each chapter.

    Returns:
        The meta record: settings, counts (books, chapters, fragments by kind, solution-manual
        fragments), unredacted chapters and each file's sha256.

    Raises:
        CorpusError: no chapters, unredacted chapters (without ``allow_unredacted``), unreadable files.
        ValueError: inconsistent settings.
        OSError: the work directory cannot be written.
    """
    st = settings or FragmentSettings()
    st.check()
    books, work = Path(books), Path(work)
    plan, _ = plan_chapters(books, allow_unredacted, include_answers=True)
    files: dict[str, str] = {}
    counts = {"exposition": 0, "example": 0, "solution_manual": 0, "split": 0}

    def rows() -> Iterator[dict[str, Any]]:
        for done, (ch, name) in enumerate(plan, start=1):
            rel = f"{ch.source}/{ch.name}/{name}"
            text, files[rel] = read_chapter(ch.file(name))
            manual = ch.answer_folder or is_answer_name(ch.source)
            for idx, f in enumerate(fragment_text(text, st)):
                counts[f.kind] += 1
                counts["solution_manual"] += manual
                counts["split"] += f.parts > 1
                yield {"id": f"{ch.source}/{ch.name}/{idx:04d}", "book": ch.source, "chapter": ch.name, "index": idx,
                       "kind": f.kind, "section": f.section, "part": f.part, "parts": f.parts,
                       "solution_manual": manual, "file": rel, "start": f.start, "end": f.end,
                       "redacted": name == REDACTED, "text": text[f.start:f.end]}
            if progress:
                progress(ch.label, done, len(plan))

    work.mkdir(parents=True, exist_ok=True)
    atomic_write_lines(work / FRAGMENTS, (dumps_json(r, indent=None) + "\n" for r in rows()))
    meta = {
        "settings": {"min_chars": st.min_chars, "max_chars": st.max_chars, "chunk_chars": st.chunk_chars,
                     "overlap": st.overlap},
        "books": len({ch.source for ch, _ in plan}),
        "chapters": len(plan),
        "fragments": counts["exposition"] + counts["example"],
        "by_kind": {"exposition": counts["exposition"], "example": counts["example"]},
        "solution_manual_fragments": counts["solution_manual"],
        "split_pieces": counts["split"],
        "unredacted_chapters": [ch.label for ch, name in plan if name != REDACTED],
        "files": files,
    }
    atomic_write_text(work / "fragments.meta.json", dumps_json(meta) + "\n")
    return meta
