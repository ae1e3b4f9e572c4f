"""OpenStax-style CNXML collections -> the books layout and an exercise pool (issue 15 item 1).

Input: a directory holding ``collections/*.collection.xml`` (one per volume; the modules of each
chapter in order) and ``modules/<id>/index.cnxml`` (CNXML with MathML). Output:

    BOOKS/<source>/chNN-<slug>/clean.md           the chapter's text (Markdown, math as LaTeX)
    BOOKS/<source>/chNN-<slug>-answers/clean.md   the book's answers to its exercises (an answer
                                                  folder for the corpus commands)
    BOOKS/_ingest/<source>/<chapter>.json         per chapter: its exercise items (for resume)
    POOL (default BOOKS/pool.json)                worked examples and exercises with a usable final
                                                  answer, in the StudyBench record schema

CNXML is parsed with DTDs and entity declarations refused (no external entity is fetched and no
entity expands), mapped structurally to HTML with the MathML kept, and converted by pandoc (its
MathML reader is texmath) in one call per chapter. Chapters are written then renamed, and a chapter
whose inputs did not change since its last ingest is skipped, so a stopped run resumes.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import time
import xml.etree.ElementTree as ET
import xml.parsers.expat as expat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studybench.files import MAX_DATA_BYTES, InputFileError, atomic_write_text, read_json, read_user_bytes
from studybench.records import Parent
from studybench.testset.corpus.answer_forms import classify_answer, split_labelled_parts
from studybench.verify import Verifier

__all__ = [
    "IngestError",
    "IngestReport",
    "Volume",
    "VolumeChapter",
    "ingest_cnxml",
    "parse_cnxml",
    "read_collection",
]

CONVERTER_VERSION = "1"
PANDOC_TO = ("markdown-raw_html-native_divs-native_spans-fenced_divs-bracketed_spans-header_attributes"
             "-link_attributes-superscript-subscript-simple_tables-multiline_tables-raw_attribute")
_MARK = "SBMARK"
_MARK_RE = re.compile(rf"^{_MARK}(\d+)\s*$", re.MULTILINE)
_REVIEW = {  # end-of-chapter section classes, in the order the printed book numbers them
    "review-conceptual-questions": "conceptual question",
    "review-problems": "problem",
    "review-additional-problems": "additional problem",
    "review-challenge": "challenge problem",
}
_TOPICS = {
    "mechanics": "Mechanics",
    "waves and acoustics": "Oscillations and Waves",
    "thermodynamics": "Thermodynamics & Statistical Physics",
    "electricity and magnetism": "Electromagnetic Fields",
    "optics": "Optics",
    "relativity": "Relativity",
    "nuclear physics": "Nuclear and Particle Physics",
    "particle physics and cosmology": "Nuclear and Particle Physics",
    "modern physics": "Quantum Physics",
}


class IngestError(ValueError):
    """A collection or module that cannot be ingested; the message names the file."""


# --------------------------------------------------------------------------------------------------
# safe XML
# --------------------------------------------------------------------------------------------------


def _refuse(what: str) -> Callable[..., None]:
    def handler(*_args: Any) -> None:
        raise ValueError(f"{what} not allowed")
    return handler


def parse_cnxml(path: Path) -> ET.Element:
    """Parse one CNXML or collection XML file without DTDs, entity declarations or external entities.

    Args:
        path: the file.

    Returns:
        The root element.

    Raises:
        IngestError: unreadable, malformed, or holding a DTD or entity declaration (named with the file
            and, where expat says, the line).
    """
    try:  # a regular file only (never a named pipe or a device)
        data = read_user_bytes(path, limit=MAX_DATA_BYTES)
    except InputFileError as e:
        raise IngestError(str(e)) from None
    parser = expat.ParserCreate(namespace_separator="}")
    builder = ET.TreeBuilder()

    def qname(name: str) -> str:
        return "{" + name if "}" in name else name

    parser.buffer_text = True
    parser.StartElementHandler = lambda name, attrs: builder.start(qname(name), {qname(k): v for k, v in attrs.items()})
    parser.EndElementHandler = lambda name: builder.end(qname(name))
    parser.CharacterDataHandler = builder.data
    parser.StartDoctypeDeclHandler = _refuse("a DOCTYPE declaration is")
    parser.EntityDeclHandler = _refuse("an entity declaration is")
    parser.UnparsedEntityDeclHandler = _refuse("an unparsed entity declaration is")
    parser.ExternalEntityRefHandler = _refuse("an external entity is")
    try:
        parser.Parse(data, True)
        return builder.close()
    except expat.ExpatError as e:
        raise IngestError(f"{path}: malformed XML ({e})") from None
    except ValueError as e:
        raise IngestError(f"{path}: {e} (line {parser.CurrentLineNumber})") from None


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _kids(el: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in el if _local(c.tag) == name]


def _first(el: ET.Element, name: str) -> ET.Element | None:
    for c in el:
        if _local(c.tag) == name:
            return c
    return None


def _text(el: ET.Element | None) -> str:
    return " ".join("".join(el.itertext()).split()) if el is not None else ""


# --------------------------------------------------------------------------------------------------
# collections
# --------------------------------------------------------------------------------------------------


@dataclass
class VolumeChapter:
    """One chapter of a volume: its number, title, unit (part) title and module ids in order."""

    number: int
    title: str
    unit: str
    modules: list[str]

    @property
    def folder(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")[:48].rstrip("-")
        return f"ch{self.number:02d}-{slug or 'chapter'}"


@dataclass
class Volume:
    """One collection: its source name (``OpenStax_<Title>``), title and chapters."""

    source: str
    title: str
    path: Path
    chapters: list[VolumeChapter]
    appendices: list[str] = field(default_factory=list)
    front: list[str] = field(default_factory=list)


def _source_name(title: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", title)
    words = [w for w in words if w.lower() != "volume"]
    return "OpenStax_" + "".join(w[:1].upper() + w[1:] for w in words) if words else "OpenStax_Book"


def read_collection(path: Path) -> Volume:
    """Read a ``*.collection.xml``: chapters are the subcollections that hold modules directly.

    Args:
        path: the collection file.

    Returns:
        The volume; modules outside any chapter go to ``front`` (before the first chapter) or
        ``appendices`` (after it).

    Raises:
        IngestError: unreadable or malformed file, or no title.
    """
    root = parse_cnxml(path)
    meta = _first(root, "metadata")
    title = _text(_first(meta, "title")) if meta is not None else ""
    if not title:
        raise IngestError(f"{path}: the collection has no <md:title>")
    vol = Volume(_source_name(title), title, Path(path), [])

    def walk(content: ET.Element, unit: str) -> None:
        for c in content:
            name = _local(c.tag)
            if name == "module":
                (vol.appendices if vol.chapters else vol.front).append(c.get("document", ""))
            elif name == "subcollection":
                sub_title = _text(_first(c, "title"))
                inner = _first(c, "content")
                if inner is None:
                    continue
                mods = [m.get("document", "") for m in _kids(inner, "module")]
                if mods and not _kids(inner, "subcollection"):
                    vol.chapters.append(VolumeChapter(len(vol.chapters) + 1, sub_title, unit or sub_title, mods))
                else:
                    walk(inner, sub_title if not unit else unit)

    top = _first(root, "content")
    if top is not None:
        walk(top, "")
    return vol


# --------------------------------------------------------------------------------------------------
# CNXML -> HTML
# --------------------------------------------------------------------------------------------------


def _mathml(el: ET.Element, display: bool = False) -> str:
    name = _local(el.tag)
    attrs = "".join(f' {_local(k)}="{html.escape(v)}"' for k, v in el.attrib.items() if _local(k) in
                    ("mathvariant", "stretchy", "accent", "width", "fence", "separator", "linethickness"))
    if name == "math":
        attrs = ' display="block"' if display or el.get("display") == "block" else ""
    inner = html.escape(el.text or "", quote=False) + "".join(
        _mathml(c) + html.escape(c.tail or "", quote=False) for c in el)
    return f"<{name}{attrs}>{inner}</{name}>"


@dataclass
class _Item:
    kind: str  # example | check | problem | conceptual question | additional problem | challenge problem
    label: str  # printed label, e.g. "Example 1.1", "15", "Check Your Understanding 1.1"
    spid: str
    title: str
    section: str
    problem: str  # HTML
    solution: str = ""  # HTML (worked solution of an example; the book's answer of an exercise)
    final: str = ""  # HTML: an example's last displayed equation of its Solution part
    parts: int = 0


@dataclass
class _Ctx:
    chapter: VolumeChapter
    module_title: str = ""
    numbers: dict[int, str] = field(default_factory=dict)  # id(exercise) -> printed number
    items: list[_Item] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # HTML of the answers chapter
    examples: int = 0
    checks: int = 0


def _children(el: ET.Element, ctx: _Ctx, depth: int) -> str:
    out = [html.escape(el.text or "", quote=False)]
    for c in el:
        out.append(_html(c, ctx, depth))
        out.append(html.escape(c.tail or "", quote=False))
    return "".join(out)


def _titled(el: ET.Element, ctx: _Ctx, depth: int) -> str:
    """A para's children with its <title> rendered as a bold lead."""
    out = [html.escape(el.text or "", quote=False)]
    for c in el:
        if _local(c.tag) == "title":
            out.append(f"<strong>{html.escape(_text(c))}.</strong> ")
        else:
            out.append(_html(c, ctx, depth))
        out.append(html.escape(c.tail or "", quote=False))
    return "".join(out)


def _html(el: ET.Element, ctx: _Ctx, depth: int) -> str:  # noqa: C901 - one branch per CNXML element
    name = _local(el.tag)
    if name == "math":
        return _mathml(el)
    if name in ("metadata", "media", "image", "iframe", "label", "glossary", "colspec", "title"):
        return ""
    if name == "para":
        return f"<p>{_titled(el, ctx, depth)}</p>\n"
    if name == "section":
        title = _first(el, "title")
        h = min(depth + 1, 6)
        head = f"<h{h}>{html.escape(_text(title))}</h{h}>\n" if title is not None else ""
        return head + _children(el, ctx, depth + 1)
    if name == "equation":
        maths = [c for c in el.iter() if _local(c.tag) == "math"]
        return "".join(f"<p>{_mathml(m, display=True)}</p>\n" for m in maths)
    if name == "emphasis":
        tag = "strong" if el.get("effect") == "bold" else "em"
        return f"<{tag}>{_children(el, ctx, depth)}</{tag}>"
    if name == "term":
        return f"<strong>{_children(el, ctx, depth)}</strong>"
    if name in ("sup", "sub"):
        return f"<{name}>{_children(el, ctx, depth)}</{name}>"
    if name == "link":
        inner = _children(el, ctx, depth)
        return inner if inner.strip() else ("[reference]" if el.get("target-id") else "")
    if name == "newline":
        return "<br/>"
    if name == "list":
        tag = "ol" if el.get("list-type") == "enumerated" else "ul"
        return f"<{tag}>" + "".join(f"<li>{_children(i, ctx, depth)}</li>" for i in _kids(el, "item")) + f"</{tag}>\n"
    if name == "figure":
        cap = _first(el, "caption")
        return f"<p><em>Figure: {_children(cap, ctx, depth)}</em></p>\n" if cap is not None else ""
    if name == "caption":
        return ""
    if name == "table":
        return _table(el, ctx, depth)
    if name == "note":
        title = _first(el, "title")
        head = f"<p><strong>{html.escape(_text(title))}</strong></p>\n" if title is not None else ""
        return head + _children(el, ctx, depth)
    if name == "example":
        return _example(el, ctx, depth)
    if name == "exercise":
        return _exercise(el, ctx, depth)
    return _children(el, ctx, depth)


def _table(el: ET.Element, ctx: _Ctx, depth: int) -> str:
    rows = []
    for tg in el.iter():
        if _local(tg.tag) in ("thead", "tbody", "tfoot"):
            for r in _kids(tg, "row"):
                cells = "".join(f"<td>{_children(e, ctx, depth)}</td>" for e in _kids(r, "entry"))
                rows.append((_local(tg.tag) == "thead", f"<tr>{cells}</tr>"))
    head = "".join(r for h, r in rows if h)
    body = "".join(r for h, r in rows if not h)
    title = _first(el, "title")
    cap = f"<p><em>Table: {html.escape(_text(title))}</em></p>\n" if title is not None else ""
    return cap + f"<table>{f'<thead>{head}</thead>' if head else ''}<tbody>{body}</tbody></table>\n"


_EXAMPLE_PARTS = ("strategy", "solution", "significance")


def _example(el: ET.Element, ctx: _Ctx, depth: int) -> str:
    ctx.examples += 1
    label = f"Example {ctx.chapter.number}.{ctx.examples}"
    paras = list(el)
    title = ""
    part = "problem"
    problem: list[str] = []
    solution: list[str] = []
    finals: list[ET.Element] = []
    for c in paras:
        t = _first(c, "title") if _local(c.tag) == "para" else None
        head = _text(t).lower() if t is not None else ""
        if not title and t is not None and part == "problem" and not head.startswith(_EXAMPLE_PARTS):
            title = _text(t)
        if head.startswith("strategy"):
            part = "strategy"
        elif head.startswith("solution"):
            part = "solution"
        elif head.startswith("significance"):
            part = "significance"
        if part == "problem":
            problem.append(_html(c, ctx, depth) if t is None or head != title.lower() else
                           f"<p>{_children_without_title(c, ctx, depth)}</p>\n")
        elif part == "solution":
            solution.append(_html(c, ctx, depth))
            if _local(c.tag) == "equation":
                finals.append(c)
    final = ""
    if finals:
        maths = [m for m in finals[-1].iter() if _local(m.tag) == "math"]
        final = _mathml(maths[-1], display=True) if maths else ""
    ctx.items.append(_Item("example", label, f"E{ctx.chapter.number}.{ctx.examples}", title, ctx.module_title,
                           "".join(problem), "".join(solution), final))
    h = min(depth + 1, 6)
    heading = f"<h{h}>{label}{': ' + html.escape(title) if title else ''}</h{h}>\n"
    body = "".join(_html(c, ctx, depth) if not (_first(c, "title") is not None and _text(_first(c, "title")) == title)
                   else f"<p>{_children_without_title(c, ctx, depth)}</p>\n" for c in paras)
    return heading + body


def _children_without_title(el: ET.Element, ctx: _Ctx, depth: int) -> str:
    out = [html.escape(el.text or "", quote=False)]
    for c in el:
        if _local(c.tag) != "title":
            out.append(_html(c, ctx, depth))
        out.append(html.escape(c.tail or "", quote=False))
    return "".join(out)


def _exercise(el: ET.Element, ctx: _Ctx, depth: int) -> str:
    problem = _first(el, "problem")
    solutions = _kids(el, "solution")
    number = ctx.numbers.get(id(el))
    if number is None:  # check your understanding (inside a note)
        ctx.checks += 1
        label = f"Check Your Understanding {ctx.chapter.number}.{ctx.checks}"
        spid = f"C{ctx.chapter.number}.{ctx.checks}"
        kind = "check"
    else:
        kind, n = number.split(":", 1)
        label = n
        spid = f"{ctx.chapter.number}.{n}"
    ptext = _children(problem, ctx, depth) if problem is not None else ""
    stext = "".join(_children(s, ctx, depth) for s in solutions)
    ctx.items.append(_Item(kind, label, spid, "", ctx.module_title, ptext, stext))
    if stext.strip():
        ctx.answers.append(f"<p><strong>{html.escape(label)}.</strong></p>\n{stext}\n")
    lead = f"<p><strong>{html.escape(label)}.</strong></p>\n"
    return lead + ptext + "\n"


def _number_exercises(roots: list[ET.Element], ctx: _Ctx) -> None:
    """Number the end-of-chapter exercises as the printed book does: by section class, then in order."""
    groups: dict[str, list[ET.Element]] = {k: [] for k in _REVIEW}
    for root in roots:
        for sec in root.iter():
            cls = sec.get("class", "") if _local(sec.tag) == "section" else ""
            if cls in groups:
                groups[cls].extend(e for e in sec.iter() if _local(e.tag) == "exercise")
    n = 0
    for cls, exs in groups.items():
        for e in exs:
            n += 1
            ctx.numbers[id(e)] = f"{_REVIEW[cls]}:{n}"


# --------------------------------------------------------------------------------------------------
# pandoc
# --------------------------------------------------------------------------------------------------


def _pandoc(pieces: list[str], label: str) -> list[str]:
    """Convert HTML pieces to Markdown in one pandoc call; returns one Markdown string per piece."""
    import pypandoc

    doc = "".join(f"<p>{_MARK}{i}</p>\n{p}\n" for i, p in enumerate(pieces))
    try:
        md = pypandoc.convert_text(doc, to=PANDOC_TO, format="html", extra_args=["--wrap=none"])
    except (RuntimeError, OSError) as e:
        raise IngestError(f"{label}: pandoc failed ({str(e).strip()[:300]})") from None
    out = [""] * len(pieces)
    marks = list(_MARK_RE.finditer(md))
    for j, m in enumerate(marks):
        end = marks[j + 1].start() if j + 1 < len(marks) else len(md)
        i = int(m.group(1))
        if 0 <= i < len(out):
            out[i] = md[m.end():end].strip()
    return out


# --------------------------------------------------------------------------------------------------
# records
# --------------------------------------------------------------------------------------------------

_KIND = {"example": "textbook_example"}
_POOL_KINDS = ("example", "check", "problem", "additional problem", "challenge problem")


def _topic(vol: Volume, ch: VolumeChapter) -> str:
    return _TOPICS.get(ch.title.lower()) or _TOPICS.get(ch.unit.lower()) or ch.unit


def _records(item: dict[str, Any], base: dict[str, Any], skipped: Counter[str]) -> dict[str, Any] | None:
    """One pool record for an item, or ``None`` (the reason counted in ``skipped``)."""
    kind = item["kind"]
    if kind not in _POOL_KINDS:
        skipped[f"{kind}: qualitative (not in the pool)"] += 1
        return None
    problem, answer = item["problem_md"].strip(), item["answer_md"].strip()
    if not problem:
        skipped[f"{kind}: empty problem"] += 1
        return None
    if not answer:
        skipped[f"{kind}: no answer in the book"] += 1
        return None
    rec = dict(base, source_problem_id=item["spid"], title=item["title"], problem=problem,
               solution=item["solution_md"].strip(), source_kind=_KIND.get(kind, "textbook_problem"),
               item_kind=kind, label=item["label"], section=item["section"])
    if kind == "example":
        rec["answer_origin"] = "last displayed equation of the worked solution"
        if split_labelled_parts(problem)[1]:
            skipped["example: several parts"] += 1
            return None
        got = classify_answer(answer, allow_expression=False, allow_lhs=True)
    else:
        rec["answer_origin"] = "the book's answer"
        stem, parts = split_labelled_parts(problem)
        answer_stem, answer_parts = split_labelled_parts(answer)
        if parts or answer_parts:
            if answer_stem or [k for k, _ in parts] != [k for k, _ in answer_parts]:
                skipped[f"{kind}: parts of the problem and the answer do not match"] += 1
                return None
            subs = []
            reasons = []
            for (k, text), (_, ans) in zip(parts, answer_parts, strict=True):
                g = classify_answer(ans)
                if isinstance(g, str):
                    reasons.append(g)
                    continue
                subs.append({"problem_id": f"{item['spid']}({k})", "problem": f"({k}) {text}",
                             "answer": f"\\boxed{{{g[1]}}}", "answer_type": g[0]})
            if reasons:
                skipped[f"{kind}: sub-answer {reasons[0]}"] += len(reasons)
            if not subs:
                return None
            rec.update(problem=stem or problem, sub_problems=subs, book_answer=answer)
            return rec
        got = classify_answer(answer)
    if isinstance(got, str):
        skipped[f"{kind}: answer {got}"] += 1
        return None
    rec.update(answer=f"\\boxed{{{got[1]}}}", answer_type=got[0], book_answer=answer)
    return rec


_RETRY_TIMEOUT = 60.0  # seconds for a gold check that timed out once


def _box(answer: str) -> str:
    """The content of a ``\\boxed{...}`` gold written by :func:`_records`."""
    return answer[len("\\boxed{"):-1] if answer.startswith("\\boxed{") and answer.endswith("}") else answer


def _readable_golds(found: list[tuple[str, dict[str, Any]]], verifier: Verifier,
                    skipped: Counter[str]) -> list[tuple[str, dict[str, Any]]]:
    """The records whose golds the verifier reads and accepts against themselves (a bad part is dropped).

    Args:
        found: ``(item kind, record)`` pairs of one chapter.
        verifier: the sandboxed verifier.
        skipped: skip reasons, counted per refused gold.

    Returns:
        The pairs to keep, in order; a record whose every part was refused is dropped.
    """
    slots = [(i, j, sub) for i, (_, rec) in enumerate(found)
             for j, sub in enumerate(rec.get("sub_problems") or [rec])]
    verdicts = verifier.verify_many([([_box(sub["answer"])], [_box(sub["answer"])], sub["answer_type"], "")
                                     for _, _, sub in slots])
    bad: dict[int, set[int]] = {}
    for (i, j, sub), v in zip(slots, verdicts, strict=True):
        kind, rec = found[i]
        what = "sub-answer" if rec.get("sub_problems") else "answer"
        box, at = _box(sub["answer"]), sub["answer_type"]
        why = verifier.check_gold_parsable(box, at)
        if why == "timed out":  # a loaded machine, not the box: once more with a long limit
            why = verifier.check_gold_parsable(box, at, timeout=_RETRY_TIMEOUT)
        if v.reason == "incorrect: timed out":
            v = verifier.verify([box], [box], at, timeout=_RETRY_TIMEOUT)
        if why == "timed out" or v.reason == "incorrect: timed out":
            skipped[f"{kind}: {what} check timed out"] += 1
        elif why is not None:
            skipped[f"{kind}: {what} the verifier cannot read"] += 1
        elif not v.correct:
            skipped[f"{kind}: {what} not accepted against itself"] += 1
        else:
            continue
        bad.setdefault(i, set()).add(j)
    out = []
    for i, (kind, rec) in enumerate(found):
        if i not in bad:
            out.append((kind, rec))
        elif rec.get("sub_problems") and len(bad[i]) < len(rec["sub_problems"]):
            rec["sub_problems"] = [sub for j, sub in enumerate(rec["sub_problems"]) if j not in bad[i]]
            out.append((kind, rec))
    return out


# --------------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------------


@dataclass
class IngestReport:
    """What an ingest did: per volume its chapters, characters, items and records; skip reasons."""

    volumes: dict[str, dict[str, Any]] = field(default_factory=dict)
    kept: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    converted: int = 0
    reused: int = 0
    pool: Path | None = None
    records: int = 0
    sub_problems: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {"volumes": self.volumes, "kept": dict(self.kept), "skipped": dict(self.skipped),
                "chapters_converted": self.converted, "chapters_reused": self.reused,
                "pool": str(self.pool) if self.pool else None, "records": self.records,
                "sub_problems": self.sub_problems, "seconds": round(self.seconds, 2)}


def _chapter_digest(src: Path, ch: VolumeChapter) -> str:
    h = hashlib.sha256(f"{CONVERTER_VERSION}\0{PANDOC_TO}\0{ch.number}\0{ch.title}".encode())
    for m in ch.modules:
        h.update(m.encode() + b"\0")
        p = src / "modules" / m / "index.cnxml"
        try:
            h.update(read_user_bytes(p, limit=MAX_DATA_BYTES) if p.is_file() else b"<missing>")
        except InputFileError as e:
            raise IngestError(str(e)) from None
    return h.hexdigest()


def _convert_chapter(src: Path, vol: Volume, ch: VolumeChapter) -> tuple[str, str, list[dict[str, Any]]]:
    roots = []
    for m in ch.modules:
        p = src / "modules" / m / "index.cnxml"
        if not p.is_file():
            raise IngestError(f"{vol.path}: module {m} of chapter {ch.number} ({ch.title}) has no file {p}")
        roots.append(parse_cnxml(p))
    ctx = _Ctx(ch)
    _number_exercises(roots, ctx)
    body = [f"<h1>Chapter {ch.number} {html.escape(ch.title)}</h1>\n"]
    for k, root in enumerate(roots):
        ctx.module_title = _text(_first(root, "title"))
        num = f"{ch.number}.{k} " if k and root.get("class") != "introduction" else ""
        body.append(f"<h2>{html.escape(num + ctx.module_title)}</h2>\n")
        content = _first(root, "content")
        if content is not None:
            body.append(_html(content, ctx, 2))
        glossary = _first(root, "glossary")
        if glossary is not None:
            defs = "".join(f"<li><strong>{html.escape(_text(_first(d, 'term')))}</strong>: "
                           f"{_children(_first(d, 'meaning') or d, ctx, 3)}</li>" for d in _kids(glossary, "definition"))
            body.append(f"<h3>Glossary</h3>\n<ul>{defs}</ul>\n")
    answers = f"<h1>Chapter {ch.number} {html.escape(ch.title)}: Answers</h1>\n" + "".join(ctx.answers)
    pieces = ["".join(body), answers]
    for it in ctx.items:
        pieces += [it.problem, it.solution, it.final or it.solution]
    md = _pandoc(pieces, f"{vol.source}/{ch.folder}")
    items = []
    for j, it in enumerate(ctx.items):
        p, s, f = md[2 + 3 * j: 5 + 3 * j]
        items.append({"kind": it.kind, "label": it.label, "spid": it.spid, "title": it.title, "section": it.section,
                      "problem_md": p, "solution_md": s if it.kind == "example" else "",
                      "answer_md": (f if it.final else "") if it.kind == "example" else s})
    return md[0] + "\n", (md[1] + "\n") if ctx.answers else "", items


def _ingest_volumes(src: Path, books: Path, cols: list[Path], rep: IngestReport, records: list[dict[str, Any]],
                    verifier: Verifier | None, force: bool, progress: Callable[[str, str], None] | None) -> None:
    """Convert (or reuse) every chapter of every collection; append its pool records to ``records``."""
    for col in cols:
        vol = read_collection(col)
        stats = rep.volumes.setdefault(vol.source, {"title": vol.title, "chapters": 0, "characters": 0,
                                                     "answer_characters": 0, "items": Counter(),
                                                     "items_with_answer": Counter(), "records": 0})
        rep.skipped["modules outside chapters (front matter, appendices)"] += len(vol.front) + len(vol.appendices)
        for ch in vol.chapters:
            label = f"{vol.source}/{ch.folder}"
            cache = books / "_ingest" / vol.source / f"{ch.folder}.json"
            text_path = books / vol.source / ch.folder / "clean.md"
            ans_path = books / vol.source / f"{ch.folder}-answers" / "clean.md"
            digest = _chapter_digest(src, ch)
            saved = None
            if not force and cache.is_file() and text_path.is_file():
                try:
                    saved = read_json(cache)
                except InputFileError:  # unreadable: converted again
                    saved = None
                if not isinstance(saved, dict) or saved.get("digest") != digest:
                    saved = None
            if saved is None:
                text, answers, items = _convert_chapter(src, vol, ch)
                atomic_write_text(text_path, text)
                if answers:
                    atomic_write_text(ans_path, answers)
                saved = {"digest": digest, "chapter": ch.number, "title": ch.title, "characters": len(text),
                         "answer_characters": len(answers), "items": items}
                atomic_write_text(cache, json.dumps(saved, ensure_ascii=False, allow_nan=False) + "\n")
                rep.converted += 1
                status = "done"
            else:
                rep.reused += 1
                status = "skip"
            stats["chapters"] += 1
            stats["characters"] += int(saved["characters"])
            stats["answer_characters"] += int(saved["answer_characters"])
            found: list[tuple[str, dict[str, Any]]] = []
            base = {"source": vol.source, "domain": "Textbook Physics", "year": "", "problem_type": _topic(vol, ch),
                    "book_title": vol.title, "chapter": f"{ch.number} {ch.title}"}
            for item in saved["items"]:
                stats["items"][item["kind"]] += 1
                if item["answer_md"].strip():
                    stats["items_with_answer"][item["kind"]] += 1
                rec = _records(item, base, rep.skipped)
                if rec is None:
                    continue
                try:
                    Parent.model_validate(rec)
                except ValidationError as e:
                    rep.skipped[f"{item['kind']}: record fails validation ({e.errors()[0]['msg'][:60]})"] += 1
                    continue
                found.append((item["kind"], rec))
            for kind, rec in _readable_golds(found, verifier, rep.skipped) if verifier else found:
                records.append(rec)
                stats["records"] += 1
                rep.kept[kind] += 1
            if progress:
                progress(label, status)


def ingest_cnxml(src: Path, books: Path, pool: Path | None = None, *, force: bool = False,
                 progress: Callable[[str, str], None] | None = None, check_golds: bool = True) -> IngestReport:
    """Ingest every ``collections/*.collection.xml`` under ``src`` into ``books`` and write the pool.

    Args:
        src: the collection directory (``collections/`` and ``modules/``).
        books: the books directory to write (created if missing).
        pool: the exercise-pool JSON to write (default ``books/pool.json``).
        force: convert chapters again even when their inputs did not change.
        progress: called with (``source/chapter``, status) for each chapter.
        check_golds: keep only golds the verifier reads and accepts against themselves (in its sandbox
            workers); a refused gold is a counted skip ("answer the verifier cannot read", "answer not
            accepted against itself", "answer check timed out" (also with 60 s); "sub-answer ..." for
            one part).

    Returns:
        The :class:`IngestReport`.

    Raises:
        IngestError: no collections, a malformed file (named), a missing module, or pandoc failing.
    """
    t0 = time.perf_counter()
    src, books = Path(src), Path(books)
    cols = sorted((src / "collections").glob("*.collection.xml")) if (src / "collections").is_dir() else []
    if not cols:
        raise IngestError(f"{src}: no collections/*.collection.xml (expected an OpenStax-style CNXML directory)")
    rep = IngestReport(pool=pool or books / "pool.json")
    records: list[dict[str, Any]] = []
    verifier = Verifier() if check_golds else None
    try:
        _ingest_volumes(src, books, cols, rep, records, verifier, force, progress)
    finally:
        if verifier is not None:
            verifier.close()
    rep.records = len(records)
    rep.sub_problems = sum(len(r.get("sub_problems") or []) or 1 for r in records)
    assert rep.pool is not None
    atomic_write_text(rep.pool, json.dumps(records, ensure_ascii=False, indent=1, allow_nan=False) + "\n")
    rep.seconds = time.perf_counter() - t0
    summary = rep.as_dict()
    atomic_write_text(books / "_reports" / "ingest-cnxml.json", json.dumps(summary, ensure_ascii=False, indent=1, allow_nan=False) + "\n")
    return rep
