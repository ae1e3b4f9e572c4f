"""Reading the records of a contamination audit: one id and one text per record (paper 2.3, appendix H).

Accepted files (UTF-8): a JSON list of objects, an object ``{"data": [...]}``, or JSONL (one object
per line; blank lines are skipped). Files named ``*.jsonl`` are always read as JSONL; other files are
read as one JSON document first and as JSONL when that fails and the file starts with ``{``.

Three record shapes are read (``text_field`` and ``id_field`` never apply to StudyBench test sets,
so a custom training field can be audited against them; ``text_field`` overrides the instruction
layers' native text):

- **StudyBench test-set parents** (a ``sub_problems`` list and a ``problem``): one record per parent,
  id ``source/year/source_problem_id`` (the parent uid), text = the stem (``problem``) followed by
  every sub-problem's ``problem``, separated by blank lines. A train record that copies one
  sub-problem therefore shares only part of the parent's text (see the Jaccard note in
  :mod:`.contamination`).
- **StudyBench instruction layers** (a ``messages`` chat list): text = the ``user`` contents joined
  by blank lines; id ``metadata.source/metadata.source_problem_id`` (else the generic id).
- **Anything else**: the text is the first of ``problem``, ``question``, ``text``, ``prompt``,
  ``content`` that the record has (or ``text_field``; dotted paths such as ``metadata.question``
  reach into nested objects); the id is ``id_field`` (default ``id``, then ``index``), else the
  record's 0-based position in the file.

Ids are made unique: a repeated id within a file gets ``#2``, ``#3``, ... appended, and when several
files are read for one side of the audit every id is prefixed with its file's stem and ``:``
(``verifiable_instr:Blundell_ThermalPhysics/E1.4``); with a single file ids are left as they are.
A text may be empty (such records are never matched). Errors name the file, the record (``line N``
for JSONL, ``record I`` for JSON) and the field; they are :class:`RecordError`, never tracebacks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.files import (
    MAX_DATA_BYTES,
    InputFileError,
    decode_utf8,
    jsonl_lines,
    parse_json,
    read_user_bytes,
)

__all__ = ["DEFAULT_ID_FIELDS", "DEFAULT_TEXT_FIELDS", "AuditRecord", "RecordError", "read_files", "read_records"]

DEFAULT_TEXT_FIELDS = ("problem", "question", "text", "prompt", "content")
"""Fields tried in order for the text of a generic record."""

DEFAULT_ID_FIELDS = ("id", "index")
"""Fields tried in order for the id of a generic record (else its 0-based position)."""


class RecordError(ValueError):
    """An input file of the audit cannot be read; the message names file, record and field."""


@dataclass(frozen=True)
class AuditRecord:
    """One record of one side of the audit.

    Attributes:
        id: unique id on its side of the audit (see the module docstring).
        text: the text compared (possibly empty).
        file: the file it came from, as given.
        index: 0-based position of the record in its file.
        kind: ``"testset"``, ``"instruction"`` or ``"generic"``.
        raw: the record as parsed from the file (written back unchanged by ``--clean-train``).
    """

    id: str
    text: str
    file: str
    index: int
    kind: str
    raw: Any = field(repr=False, compare=False, default=None)


def _get_path(rec: dict[str, Any], path: str) -> tuple[bool, Any]:
    """``(found, value)`` for a dotted ``path`` in nested objects."""
    cur: Any = rec
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def _where(path: Path, index: int, line: int | None) -> str:
    return f"{path}: line {line}" if line is not None else f"{path}: record {index}"


def _as_text(value: Any, where: str, name: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise RecordError(f"{where}: field '{name}': expected a string, got {type(value).__name__}")


def _testset_text(rec: dict[str, Any], where: str) -> str:
    parts = [_as_text(rec.get("problem"), where, "problem")]
    subs = rec.get("sub_problems") or []
    if not isinstance(subs, list):
        raise RecordError(f"{where}: field 'sub_problems': expected a list, got {type(subs).__name__}")
    for j, sub in enumerate(subs):
        if not isinstance(sub, dict):
            raise RecordError(f"{where}: field 'sub_problems[{j}]': expected an object, got {type(sub).__name__}")
        parts.append(_as_text(sub.get("problem"), where, f"sub_problems[{j}].problem"))
    return "\n\n".join(p for p in parts if p)


def _instruction_text(rec: dict[str, Any], where: str) -> str:
    parts = []
    for j, msg in enumerate(rec["messages"]):
        if not isinstance(msg, dict):
            raise RecordError(f"{where}: field 'messages[{j}]': expected an object, got {type(msg).__name__}")
        if msg.get("role") == "user":
            parts.append(_as_text(msg.get("content"), where, f"messages[{j}].content"))
    return "\n\n".join(p for p in parts if p)


def _generic_id(rec: dict[str, Any], index: int, id_field: str | None, where: str = "") -> str:
    names = (id_field,) if id_field else DEFAULT_ID_FIELDS
    for name in names:
        found, value = _get_path(rec, name)
        if found and value is not None and not isinstance(value, (dict, list)):
            return str(value)
    if id_field:
        raise RecordError(f"{where}: field '{id_field}' (--id-field) is missing or not a scalar")
    return str(index)


def _record(
    rec: Any, path: Path, index: int, line: int | None, text_field: str | None, id_field: str | None
) -> AuditRecord:
    where = _where(path, index, line)
    if not isinstance(rec, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if isinstance(rec.get("sub_problems"), list) and "problem" in rec and "source_problem_id" in rec:
        uid = "/".join(str(rec.get(k) or "") for k in ("source", "year", "source_problem_id"))
        return AuditRecord(uid, _testset_text(rec, where), str(path), index, "testset", rec)
    if isinstance(rec.get("messages"), list) and not text_field:
        meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
        if not id_field and meta.get("source_problem_id") is not None:
            rid = f"{meta.get('source') or ''}/{meta['source_problem_id']}"
        else:
            rid = _generic_id(rec, index, id_field, where)
        return AuditRecord(rid, _instruction_text(rec, where), str(path), index, "instruction", rec)
    if text_field:
        found, value = _get_path(rec, text_field)
        if not found:
            raise RecordError(f"{where}: field '{text_field}' (--text-field) is missing")
        return AuditRecord(
            _generic_id(rec, index, id_field, where), _as_text(value, where, text_field), str(path), index, "generic", rec
        )
    for name in DEFAULT_TEXT_FIELDS:
        if name in rec:
            return AuditRecord(
                _generic_id(rec, index, id_field, where), _as_text(rec[name], where, name), str(path), index, "generic", rec
            )
    raise RecordError(
        f"{where}: no text field: none of {', '.join(repr(n) for n in DEFAULT_TEXT_FIELDS)} is present "
        f"(keys: {', '.join(sorted(map(str, rec))[:10])}); name one with --text-field"
    )


def _decode(path: Path) -> str:
    try:
        return decode_utf8(read_user_bytes(path, limit=MAX_DATA_BYTES), path)
    except InputFileError as e:
        raise RecordError(str(e)) from None


def _jsonl(path: Path, text: str) -> list[tuple[Any, int]]:
    out: list[tuple[Any, int]] = []
    for n, line in jsonl_lines(text):  # split on "\n" only, never at U+2028 or U+0085 inside a string
        try:  # strict JSON (files.parse_json): NaN, 1e999999, a 400-digit integer are refused, naming the field
            out.append((parse_json(line, path, line=n), n))
        except InputFileError as e:
            raise RecordError(str(e)) from None
    return out


def read_records(
    path: str | os.PathLike[str], *, text_field: str | None = None, id_field: str | None = None
) -> list[AuditRecord]:
    """Read one file of records (see the module docstring for the formats and shapes).

    Args:
        path: the file (JSON list, ``{"data": [...]}`` or JSONL; UTF-8).
        text_field: field (dotted path allowed) holding the text of every record; ``None`` reads
            test sets and instruction layers natively and tries :data:`DEFAULT_TEXT_FIELDS` otherwise.
        id_field: field holding the id; ``None`` tries :data:`DEFAULT_ID_FIELDS`, else the position.

    Returns:
        The records in file order; repeated ids get ``#2``, ``#3``, ... appended.

    Raises:
        RecordError: unreadable file, invalid UTF-8 or JSON (with the line), wrong shape, a record
            without its text field or with a non-string text (naming file, line or record, field).
    """
    p = Path(path)
    text = _decode(p)
    if not text.strip():
        raise RecordError(f"{p}: empty file (expected a JSON list, {{\"data\": [...]}} or JSONL)")
    items: list[tuple[Any, int | None]]
    if p.suffix.lower() == ".jsonl":
        items = list(_jsonl(p, text))
    else:
        try:
            obj = parse_json(text, p)
        except InputFileError as e:
            if e.syntax and text.lstrip().startswith("{"):
                items = list(_jsonl(p, text))  # JSONL under another name
                obj = None
            else:
                raise RecordError(str(e)) from None
        else:
            if isinstance(obj, dict) and isinstance(obj.get("data"), list):
                obj = obj["data"]
            elif isinstance(obj, dict):
                obj = [obj]  # a one-record JSONL file
            if not isinstance(obj, list):
                raise RecordError(f"{p}: wrong JSON shape: expected a list of records, got {type(obj).__name__}")
            items = [(rec, None) for rec in obj]
    records: list[AuditRecord] = []
    seen: dict[str, int] = {}
    for index, (rec, line) in enumerate(items):
        r = _record(rec, p, index, line, text_field, id_field)
        count = seen.get(r.id, 0) + 1
        seen[r.id] = count
        if count > 1:
            r = AuditRecord(f"{r.id}#{count}", r.text, r.file, r.index, r.kind, r.raw)
        records.append(r)
    return records


def read_files(
    paths: Sequence[str | os.PathLike[str]], *, text_field: str | None = None, id_field: str | None = None
) -> list[AuditRecord]:
    """Read the files of one side of the audit, in order, with ids unique across them.

    With several files every id becomes ``STEM:ID`` (``STEM`` the file name without its extension;
    two files with the same stem get their parent folder's name too: ``Folder/STEM:ID``).

    Raises:
        RecordError: as :func:`read_records`; also when ``paths`` is empty.
    """
    if not paths:
        raise RecordError("no input files")
    per_file = [read_records(p, text_field=text_field, id_field=id_field) for p in paths]
    if len(paths) == 1:
        return per_file[0]
    stems = [Path(p).stem for p in paths]
    if len(set(stems)) < len(stems):
        stems = [f"{Path(p).parent.name}/{Path(p).stem}" for p in paths]
    out: list[AuditRecord] = []
    seen: set[str] = set()
    for stem, recs in zip(stems, per_file, strict=True):
        for r in recs:
            rid = f"{stem}:{r.id}"
            k = 2
            while rid in seen:  # same file given twice
                rid = f"{stem}:{r.id}#{k}"
                k += 1
            seen.add(rid)
            out.append(AuditRecord(rid, r.text, r.file, r.index, r.kind, r.raw))
    return out
