"""Redaction of test items from the book corpus, and the residue audit (paper 2.3, appendix H).

**Redact** (:func:`redact_books`): for every parent of the test set (the Application Set by
default), its problem statement(s) and reference solution(s), parent and sub-problems, are searched
in every ``clean.md`` of the parent's source (book chapters and solution-manual folders alike) with
:func:`studybench.build.textmatch.find_copies`, which survives OCR noise and finds every copy, not
only the longest. Its answer-key entries are found in answer sections (a heading naming answers,
solutions or hints, or a whole answer/solution folder): an entry is a line starting with the
parent's problem label (``E1.4`` / ``1.4``, letters ignored) up to the next labelled line, and it is
redacted when it also holds one of the parent's gold answers (normalised). Each found block,
extended to whole lines, is replaced by one line per parent::

    <!-- [TEST-SET REDACTION] source_problem_id=<id> source=<src> -->

The result is written to ``clean.redacted.md`` (every chapter gets one; the eval files are only
read).

**Audit** (:func:`audit_books`): walks every ``clean.redacted.md``; for each parent takes
40-character normalised anchors (stride 20) from its problem and solution texts and reports every
redacted file holding one (verbatim residue); and checks that each parent has at least one marker
in its book. :func:`audit_books` returns the findings; the CLI exits non-zero when anything remains.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studybench.build.corpus import CLEAN, REDACTED, Chapter, read_text, scan_books
from studybench.build.textmatch import NormText, find_copies, normalise
from studybench.schema import Parent
from studybench.store import atomic_write_text

__all__ = [
    "MARKER",
    "RedactParams",
    "audit_books",
    "marker",
    "parent_texts",
    "redact_books",
    "redact_text",
]

MARKER = "<!-- [TEST-SET REDACTION] source_problem_id={id} source={src} -->"
_MARKER_RE = re.compile(r"<!-- \[TEST-SET REDACTION\] source_problem_id=(\S+) source=(\S+) -->")


def marker(parent: Parent) -> str:
    """The single-line redaction marker of ``parent``."""
    return MARKER.format(id=parent.source_problem_id, src=parent.source)


@dataclass
class RedactParams:
    """Matching parameters (normalised characters; see :func:`studybench.build.textmatch.find_copies`)."""

    k: int = 24
    gap: int = 120
    min_match: int = 100
    ratio: float = 0.6


def parent_texts(parent: Parent) -> list[tuple[str, str]]:
    """(kind, text) of a parent's problem statements and solutions, parent and sub-problems, non-empty
    and without duplicates. Kinds: ``problem``, ``solution``, ``<sub id> problem``, ``<sub id> solution``."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(kind: str, text: str) -> None:
        t = (text or "").strip()
        if t and t not in seen:
            seen.add(t)
            out.append((kind, t))

    add("problem", parent.problem)
    add("solution", parent.solution)
    for sub in parent.sub_problems:
        add(f"{sub.problem_id} problem", sub.problem)
        add(f"{sub.problem_id} solution", sub.solution)
    return out


def _label_core(label: str) -> str:
    """``E1.4`` / ``P 1.4`` / ``Problem 1-4`` -> ``1.4`` (letters dropped, separators unified)."""
    core = re.sub(r"^[^\d]*", "", label.strip())
    core = re.sub(r"[\s]+", "", core).replace("-", ".").rstrip(".:)")
    return core.lower()


_ENTRY = re.compile(
    r"^\s*(?:[#>*\-]+\s*)*(?:\*\*)?\s*(?:(?:problem|exercise|example|prob\.|ex\.)\s*)?"
    r"([A-Za-z]{0,2}\s?\d+(?:[.\-]\d+)*[a-z]?)(?=[\s.:)*]|$)",
    re.IGNORECASE,
)
_ANSWER_HEADING = re.compile(r"^\s*#{1,6}\s*.*\b(?:answers?|solutions?|hints?)\b", re.IGNORECASE)
_ANY_HEADING = re.compile(r"^\s*#{1,6}\s+\S")


def _answer_regions(text: str, whole: bool) -> list[tuple[int, int]]:
    """Character ranges of answer sections: after an answers/solutions/hints heading until the next
    heading that is neither such a heading nor a problem label; the whole text when ``whole``."""
    if whole:
        return [(0, len(text))]
    regions: list[tuple[int, int]] = []
    start: int | None = None
    pos = 0
    for line in text.split("\n"):
        if _ANSWER_HEADING.match(line):
            if start is None:
                start = pos
        elif _ANY_HEADING.match(line) and start is not None and not _ENTRY.match(line.lstrip("# ")):
            regions.append((start, pos))
            start = None
        pos += len(line) + 1
    if start is not None:
        regions.append((start, len(text)))
    return regions


def _answer_spans(text: str, parents: list[Parent], whole: bool) -> list[tuple[int, int, Parent, str]]:
    """Answer-key entries of ``parents`` in the answer sections of ``text``: (start, end, parent, kind)."""
    regions = _answer_regions(text, whole)
    if not regions:
        return []
    by_label: dict[str, list[tuple[Parent, list[str]]]] = defaultdict(list)
    for p in parents:
        golds = [normalise(b) for sub in p.slots() for b in sub.boxes]
        golds = [g for g in golds if g]
        if golds:
            by_label[_label_core(p.source_problem_id)].append((p, golds))
    out: list[tuple[int, int, Parent, str]] = []
    for a, b in regions:
        section = text[a:b]
        # entry starts: lines beginning with a label
        starts: list[tuple[int, str]] = []
        pos = 0
        for line in section.split("\n"):
            m = _ENTRY.match(line)
            if m:
                starts.append((pos, _label_core(m.group(1))))
            pos += len(line) + 1
        for i, (s, lab) in enumerate(starts):
            if lab not in by_label:
                continue
            e = starts[i + 1][0] if i + 1 < len(starts) else len(section)
            entry = section[s:e]
            # an entry ends at a heading too
            hm = re.search(r"\n\s*#{1,6}\s", entry)
            if hm:
                entry = entry[: hm.start() + 1]
            norm = normalise(entry)
            for p, golds in by_label[lab]:
                if any(g in norm for g in golds):
                    out.append((a + s, a + s + len(entry.rstrip("\n")), p, "answer key"))
    return out


def _no_content(line: str) -> bool:
    """A non-blank line without letters or digits (``$$``, ``\\[``, ``}``), part of the block beside it."""
    return bool(line.strip()) and not any(ch.isalnum() for ch in line)


def _to_lines(text: str, a: int, b: int) -> tuple[int, int]:
    """``[a, b)`` extended to whole lines (without the final newline), plus adjacent lines that hold
    only math delimiters or punctuation."""
    a = text.rfind("\n", 0, a) + 1
    nl = text.find("\n", max(a, b - 1))
    b = len(text) if nl < 0 else nl
    while a > 0:
        prev = text.rfind("\n", 0, a - 1) + 1
        if not _no_content(text[prev : a - 1]):
            break
        a = prev
    while b < len(text):
        nxt = text.find("\n", b + 1)
        end = len(text) if nxt < 0 else nxt
        if not _no_content(text[b + 1 : end]):
            break
        b = end
    return a, b


def redact_text(
    text: str, parents: list[Parent], *, answer_folder: bool = False, params: RedactParams | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """Replace every copy of ``parents``' texts and answer-key entries in ``text`` by markers.

    Returns:
        (redacted text, found blocks: ``{"parent", "kind", "start_line", "end_line", "chars",
        "coverage"}``, lines 1-based in ``text``).
    """
    params = params or RedactParams()
    queries: list[tuple[Parent, str, str]] = []
    for p in parents:
        for kind, t in parent_texts(p):
            queries.append((p, kind, normalise(t)))
    norm = NormText.of(text)
    spans: list[tuple[int, int, Parent, str, float]] = []
    for c in find_copies(norm.text, [q[2] for q in queries], k=params.k, gap=params.gap,
                         min_match=params.min_match, ratio=params.ratio):
        a, b = norm.span(c.start, c.end)
        a, b = _to_lines(text, a, b)
        p, kind, _ = queries[c.query]
        spans.append((a, b, p, kind, round(c.coverage, 4)))
    for a, b, p, kind in _answer_spans(text, parents, answer_folder):
        a, b = _to_lines(text, a, b)
        spans.append((a, b, p, kind, 1.0))
    if not spans:
        return text, []
    spans.sort(key=lambda s: (s[0], s[1]))
    merged: list[list[Any]] = []
    for a, b, p, kind, cov in spans:
        if merged and (a <= merged[-1][1] or (
            not text[merged[-1][1] : a].strip() and any(m[0] is p for m in merged[-1][2])
        )):
            merged[-1][1] = max(merged[-1][1], b)
            merged[-1][2].append((p, kind, cov, a, b))
        else:
            merged.append([a, b, [(p, kind, cov, a, b)]])
    out: list[str] = []
    found: list[dict[str, Any]] = []
    pos = 0
    for a, b, members in merged:
        out.append(text[pos:a])
        seen: list[str] = []
        for p, kind, cov, ma, mb in members:
            mk = marker(p)
            if mk not in seen:
                seen.append(mk)
            found.append(
                {
                    "parent": p.uid,
                    "source_problem_id": p.source_problem_id,
                    "kind": kind,
                    "start_line": text.count("\n", 0, ma) + 1,
                    "end_line": text.count("\n", 0, mb) + 1,
                    "chars": mb - ma,
                    "coverage": cov,
                }
            )
        out.append("\n".join(seen))
        pos = b
    out.append(text[pos:])
    return "".join(out), found


def redact_books(
    root: Path,
    parents: list[Parent],
    *,
    params: RedactParams | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write ``clean.redacted.md`` for every chapter with a ``clean.md`` (see the module docstring).

    Returns:
        ``{"files": {label: n_blocks}, "parents": {uid: {"source", "source_problem_id", "blocks":
        [...]}}, "not_found": [uids with nothing found], "missing_sources": [...], "skipped": [...]}``.

    Raises:
        studybench.build.corpus.CorpusError: unusable books directory or an unreadable file.
    """
    books = scan_books(root)
    by_source: dict[str, list[Parent]] = defaultdict(list)
    for p in parents:
        by_source[p.source].append(p)
    per_parent: dict[str, dict[str, Any]] = {
        p.uid: {"source": p.source, "source_problem_id": p.source_problem_id, "blocks": []} for p in parents
    }
    files: dict[str, int] = {}
    skipped: list[str] = []
    for source, chapters in books.items():
        for ch in chapters:
            if not ch.has(CLEAN):
                skipped.append(ch.label)
                continue
            text = read_text(ch.file(CLEAN))
            new, found = redact_text(text, by_source.get(source, []), answer_folder=ch.answer_folder, params=params)
            atomic_write_text(ch.file(REDACTED), new)
            files[ch.label] = len(found)
            for f in found:
                per_parent[f["parent"]]["blocks"].append({"file": ch.label, **{k: v for k, v in f.items() if k != "parent"}})
            if progress:
                progress(ch.label)
    return {
        "files": files,
        "parents": per_parent,
        "not_found": [uid for uid, d in per_parent.items() if not d["blocks"]],
        "missing_sources": sorted(s for s in by_source if s not in books),
        "skipped": skipped,
    }


def _anchors(text: str, size: int = 40, stride: int = 20) -> list[str]:
    norm = normalise(text)
    if len(norm) < size:
        return []
    out = [norm[i : i + size] for i in range(0, len(norm) - size + 1, stride)]
    last = norm[-size:]
    if out[-1] != last:
        out.append(last)
    return out


def audit_books(
    root: Path,
    parents: list[Parent],
    *,
    anchor_size: int = 40,
    stride: int = 20,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Residue audit of the redacted corpus (see the module docstring).

    Returns:
        ``{"ok": bool, "files": n, "not_redacted": [labels without clean.redacted.md],
        "residue": [{"parent", "source", "source_problem_id", "file", "anchors", "example", "line"}],
        "missing_markers": [{"parent", "source", "source_problem_id"}], "parents": n, "anchors": n}``.

    Raises:
        studybench.build.corpus.CorpusError: unusable books directory.
    """
    books = scan_books(root)
    anchor_map: dict[str, set[str]] = defaultdict(set)
    by_uid = {p.uid: p for p in parents}
    for p in parents:
        for _, t in parent_texts(p):
            for a in _anchors(t, anchor_size, stride):
                anchor_map[a].add(p.uid)
    markers: set[tuple[str, str]] = set()
    residue: dict[tuple[str, str], dict[str, Any]] = {}
    not_redacted: list[str] = []
    n_files = 0
    for chapters in books.values():
        for ch in chapters:
            if not ch.has(REDACTED):
                if ch.has(CLEAN):
                    not_redacted.append(ch.label)
                continue
            n_files += 1
            text = read_text(ch.file(REDACTED))
            for m in _MARKER_RE.finditer(text):
                markers.add((m.group(2), m.group(1)))
            norm = NormText.of(text)
            s = norm.text
            for i in range(0, max(0, len(s) - anchor_size + 1)):
                uids = anchor_map.get(s[i : i + anchor_size])
                if not uids:
                    continue
                for uid in uids:
                    key = (uid, ch.label)
                    hit = residue.get(key)
                    if hit is None:
                        a, b = norm.span(i, i + anchor_size)
                        p = by_uid[uid]
                        residue[key] = {
                            "parent": uid,
                            "source": p.source,
                            "source_problem_id": p.source_problem_id,
                            "file": ch.label,
                            "anchors": 1,
                            "line": text.count("\n", 0, a) + 1,
                            "example": text[a:b][:200],
                        }
                    else:
                        hit["anchors"] += 1
            if progress:
                progress(ch.label)
    missing = [
        {"parent": p.uid, "source": p.source, "source_problem_id": p.source_problem_id}
        for p in parents
        if (p.source, p.source_problem_id) not in markers
    ]
    res = sorted(residue.values(), key=lambda r: (r["source"], r["source_problem_id"], r["file"]))
    return {
        "ok": not res and not missing and not not_redacted,
        "files": n_files,
        "parents": len(parents),
        "anchors": len(anchor_map),
        "not_redacted": not_redacted,
        "residue": res,
        "missing_markers": missing,
    }


def require_sources(books: dict[str, list[Chapter]], parents: list[Parent]) -> list[str]:
    """Sources of ``parents`` without a folder in the books directory."""
    return sorted({p.source for p in parents} - set(books))
