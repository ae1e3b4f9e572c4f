"""Redaction of test items from the book corpus, and the residue audit (paper 2.3, appendix H).

**Redact** (:func:`redact_books`): for every parent of the test set (the Application Set by
default), its problem statement(s) and reference solution(s), parent and sub-problems, are searched
in every ``clean.md`` of the parent's source (book chapters and solution-manual folders alike) with
:func:`studybench.testset.corpus.textmatch.find_copies`, which survives OCR noise and finds every copy, not
only the longest. Its answer-key entries are found in answer sections (a heading naming answers,
solutions or hints, or a whole answer/solution folder): an entry is a line starting with the
parent's problem label (``E1.4`` / ``1.4``, letters ignored) up to the next labelled line, a Markdown
table row or an HTML table row (MinerU's tables) whose first cell is the label, and it is redacted
when it also holds one of the parent's gold answers (normalised). Each found block, extended to whole
lines (or to sentence boundaries inside a long paragraph), is replaced by one line per parent::

    <!-- [TEST-SET REDACTION] source_problem_id=<id> source=<src> -->

with `` year=<year>`` before ``-->`` for parents that have a year, and field values percent-encoded
where they hold whitespace or characters that could close the comment.

The result is written to ``clean.redacted.md`` (every chapter gets one; the eval files are only
read).

**Audit** (:func:`audit_books`): walks every ``clean.redacted.md``; for each parent takes
40-character normalised anchors (stride 20) from its problem and solution texts and reports every
redacted file holding at least ``min_anchors`` (default 2) of them (verbatim residue); reports
answer-key entries still present in the parent's own book; and checks that each parent (with its
year) has at least one marker in its book. :func:`audit_books` returns the findings; the CLI exits non-zero when anything remains.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from studybench.records import Parent
from studybench.testset.corpus.books import CLEAN, REDACTED, Chapter, read_text, scan_books, write_text
from studybench.testset.corpus.textmatch import NormText, find_copies, normalise

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
_MARKER_RE = re.compile(r"<!-- \[TEST-SET REDACTION\] source_problem_id=(\S+) source=(\S+)(?: year=(\S+))? -->")
_SAFE = "._:/+()[]#,'-"


def _enc(value: str) -> str:
    """A marker field: whitespace, ``%``, ``<``, ``>`` and other unsafe characters percent-encoded,
    so the value is one token and can never close the HTML comment."""
    return quote(value, safe=_SAFE)


def marker(parent: Parent) -> str:
    """The single-line redaction marker of ``parent``: ``MARKER`` with the id and source
    (percent-encoded where needed), plus `` year=<year>`` before ``-->`` when the parent has a year
    (olympiad sets reuse ids such as ``Q1`` across years)."""
    text = MARKER.format(id=_enc(parent.source_problem_id), src=_enc(parent.source))
    if parent.year:
        text = text[: -len(" -->")] + f" year={_enc(str(parent.year))} -->"
    return text


def _marker_keys(text: str) -> set[tuple[str, str, str]]:
    """(source, source_problem_id, year) of every marker in ``text`` (decoded)."""
    return {(unquote(m.group(2)), unquote(m.group(1)), unquote(m.group(3) or "")) for m in _MARKER_RE.finditer(text)}


@dataclass
class RedactParams:
    """Matching parameters (normalised characters; see :func:`studybench.testset.corpus.textmatch.find_copies`)."""

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
        golds = [normalise(b) for sub in p.subs() for b in sub.boxes]
        golds = [g for g in golds if g]
        if golds:
            by_label[_label_core(p.source_problem_id)].append((p, golds))
    out: list[tuple[int, int, Parent, str]] = []
    for a, b in regions:
        section = text[a:b]
        # entry starts: lines beginning with a label; a Markdown table row is an entry of its own
        starts: list[tuple[int, str]] = []
        pos = 0
        for line in section.split("\n"):
            if line.lstrip().startswith("|"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                m = _ENTRY.match(cells[0]) if cells else None
                starts.append((pos, _label_core(m.group(1)) if m else ""))
                pos += len(line) + 1
                continue
            m = _ENTRY.match(line)
            if m:
                starts.append((pos, _label_core(m.group(1))))
            elif _HTML_ROW.search(line):
                starts.append((pos, ""))  # an HTML table line ends the entry above it
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


_HTML_ROW = re.compile(r"<tr\b.*?</tr>", re.IGNORECASE | re.DOTALL)
_HTML_CELL = re.compile(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]+>")


def _html_answer_rows(text: str, parents: list[Parent], whole: bool) -> list[tuple[int, int, Parent]]:
    """HTML table rows (MinerU writes tables as HTML) in answer sections whose first cell is a
    parent's label and whose row holds one of its gold answers: (start, end, parent)."""
    regions = _answer_regions(text, whole)
    if not regions:
        return []
    by_label: dict[str, list[tuple[Parent, list[str]]]] = defaultdict(list)
    for p in parents:
        golds = [g for g in (normalise(b) for sub in p.subs() for b in sub.boxes) if g]
        if golds:
            by_label[_label_core(p.source_problem_id)].append((p, golds))
    out: list[tuple[int, int, Parent]] = []
    for a, b in regions:
        for row in _HTML_ROW.finditer(text, a, b):
            cells = _HTML_CELL.findall(row.group(0))
            if not cells:
                continue
            m = _ENTRY.match(_TAGS.sub(" ", cells[0]).strip())
            if not m:
                continue
            norm = normalise(_TAGS.sub(" ", row.group(0)))
            for p, golds in by_label.get(_label_core(m.group(1)), []):
                if any(g in norm for g in golds):
                    out.append((row.start(), row.end(), p))
    return out


def _no_content(line: str) -> bool:
    """A non-blank line without letters or digits (``$$``, ``\\[``, ``}``), part of the block beside it."""
    return bool(line.strip()) and not any(ch.isalnum() for ch in line)


_SENTENCE_END = re.compile(r"[.?!:;][\"')\]]*\s")
_EDGE = 80


def _to_lines(text: str, a: int, b: int) -> tuple[int, int]:
    """``[a, b)`` extended to whole lines (without the final newline) when the rest of the line on
    either side is short (at most 80 characters: a label, "(a)", a closing phrase), else only to the
    sentence boundary on that side, so a copy inside a long paragraph does not take the paragraph
    with it; plus adjacent lines that hold only math delimiters or punctuation."""
    line_start = text.rfind("\n", 0, a) + 1
    if a - line_start <= _EDGE:
        a = line_start
    else:
        cut = None
        for m in _SENTENCE_END.finditer(text, line_start, a):
            cut = m.end()
        a = cut if cut is not None else a
    nl = text.find("\n", max(a, b - 1))
    line_end = len(text) if nl < 0 else nl
    if line_end - b <= _EDGE:
        b = line_end
    else:
        m = _SENTENCE_END.search(text, b, line_end)
        b = m.end() - 1 if m else b
        return a, b
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
    found: list[dict[str, Any]] = []
    rows = _html_answer_rows(text, parents, answer_folder)
    if rows:  # HTML table rows are replaced in place (the table stays valid); line numbers refer to the input
        html_out: list[str] = []
        pos = 0
        for a, b, p in sorted(rows, key=lambda r: r[0]):
            if a < pos:
                continue
            html_out.append(text[pos:a])
            html_out.append(f"<tr><td>{marker(p)}</td></tr>")
            found.append({"parent": p.uid, "source_problem_id": p.source_problem_id, "kind": "answer key",
                          "start_line": text.count("\n", 0, a) + 1, "end_line": text.count("\n", 0, b) + 1,
                          "chars": b - a, "coverage": 1.0})
            pos = b
        html_out.append(text[pos:])
        text = "".join(html_out)
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
        return text, found
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
        block = "\n".join(seen)
        if a > 0 and text[a - 1] != "\n":
            block = "\n" + block  # a copy inside a paragraph: the marker still gets a line of its own
        if b < len(text) and text[b] != "\n":
            block += "\n"
        out.append(block)
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
        studybench.testset.corpus.books.CorpusError: unusable books directory or an unreadable file.
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
            write_text(ch.file(REDACTED), new)
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
    min_anchors: int = 2,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Residue audit of the redacted corpus (see the module docstring).

    Args:
        min_anchors: distinct anchors of one parent a file must hold to count as residue (default
            2, i.e. at least about 60 characters of its text; one 40-character anchor alone is often
            a generic phrase such as "the coefficient of friction between the block and").

    Also reports answer-key entries of a parent still present in its own book's answer sections
    (kind ``answer key``).

    Returns:
        ``{"ok": bool, "files": n, "not_redacted": [labels without clean.redacted.md],
        "residue": [{"parent", "source", "source_problem_id", "file", "kind", "anchors", "example", "line"}],
        "missing_markers": [{"parent", "source", "source_problem_id"}], "parents": n, "anchors": n}``.

    Raises:
        studybench.testset.corpus.books.CorpusError: unusable books directory.
    """
    books = scan_books(root)
    anchor_map: dict[str, set[str]] = defaultdict(set)
    by_uid = {p.uid: p for p in parents}
    for p in parents:
        for _, t in parent_texts(p):
            for a in _anchors(t, anchor_size, stride):
                anchor_map[a].add(p.uid)
    markers: set[tuple[str, str, str]] = set()
    residue: dict[tuple[str, str], dict[str, Any]] = {}
    by_source: dict[str, list[Parent]] = defaultdict(list)
    for p in parents:
        by_source[p.source].append(p)
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
            markers |= _marker_keys(text)
            own = by_source.get(ch.source, [])
            keys = [(a, b, p) for a, b, p, _ in _answer_spans(text, own, ch.answer_folder)]
            keys += _html_answer_rows(text, own, ch.answer_folder)
            for a, b, p in keys:
                residue.setdefault((p.uid, ch.label + "#answer"), {
                    "parent": p.uid, "source": p.source, "source_problem_id": p.source_problem_id,
                    "file": ch.label, "kind": "answer key", "anchors": 0,
                    "line": text.count("\n", 0, a) + 1, "example": text[a:b][:200],
                })
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
                            "kind": "text",
                            "anchors": 1,
                            "line": text.count("\n", 0, a) + 1,
                            "example": text[a:b][:200],
                            "_seen": {s[i : i + anchor_size]},
                        }
                    else:
                        hit["_seen"].add(s[i : i + anchor_size])
                        hit["anchors"] = len(hit["_seen"])
            if progress:
                progress(ch.label)
    missing = [
        {"parent": p.uid, "source": p.source, "source_problem_id": p.source_problem_id, "year": p.year}
        for p in parents
        if (p.source, p.source_problem_id, str(p.year or "")) not in markers
    ]
    res = []
    for r in residue.values():
        r.pop("_seen", None)
        if r["kind"] == "answer key" or r["anchors"] >= min_anchors:
            res.append(r)
    res.sort(key=lambda r: (r["source"], r["source_problem_id"], r["file"], r["kind"]))
    return {
        "ok": not res and not missing and not not_redacted,
        "files": n_files,
        "parents": len(parents),
        "anchors": len(anchor_map),
        "min_anchors": min_anchors,
        "not_redacted": not_redacted,
        "residue": res,
        "missing_markers": missing,
    }


def require_sources(books: dict[str, list[Chapter]], parents: list[Parent]) -> list[str]:
    """Sources of ``parents`` without a folder in the books directory."""
    return sorted({p.source for p in parents} - set(books))
