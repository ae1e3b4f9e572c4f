"""OpenStax-style CNXML -> Markdown: safe XML, collections, CNXML -> HTML, pandoc (``corpus ingest-cnxml``).

The conversion half of :mod:`studybench.testset.corpus.ingest` (which writes the books layout and the
exercise pool from what this returns). CNXML is parsed with DTDs and entity declarations refused (no
external entity is fetched and no entity expands, :func:`parse_cnxml`), mapped structurally to HTML with
the MathML kept, and converted by pandoc (its MathML reader is texmath) in one call per chapter
(:func:`convert_chapter`). A collection file lists a volume's chapters and their modules in order
(:func:`read_collection`).
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
import xml.parsers.expat as expat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.files import MAX_DATA_BYTES, InputFileError, read_user_bytes

__all__ = [
    "CONVERTER_VERSION",
    "PANDOC_TO",
    "IngestError",
    "Volume",
    "VolumeChapter",
    "convert_chapter",
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


def convert_chapter(src: Path, vol: Volume, ch: VolumeChapter) -> tuple[str, str, list[dict[str, Any]]]:
    """One chapter of a volume as Markdown: its text, its answers chapter and its items.

    Every module of the chapter is parsed (:func:`parse_cnxml`), mapped to HTML with its exercises
    numbered as the printed book numbers them, and converted by pandoc in one call.

    Args:
        src: the CNXML directory (``modules/<id>/index.cnxml``).
        vol: the chapter's volume (:func:`read_collection`).
        ch: the chapter.

    Returns:
        ``(chapter Markdown, answers Markdown or "", items)``; an item is a dict with ``kind``, ``label``,
        ``spid``, ``title``, ``section``, ``problem_md``, ``solution_md`` and ``answer_md``.

    Raises:
        IngestError: a missing or unsafe module file, or pandoc failed.
    """
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
