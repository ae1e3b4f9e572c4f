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
MathML reader is texmath) in one call per chapter (:mod:`studybench.testset.corpus.cnxml`). Chapters are written then renamed, and a chapter
whose inputs did not change since its last ingest is skipped, so a stopped run resumes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studybench.files import MAX_DATA_BYTES, InputFileError, atomic_write_text, read_json, read_user_bytes
from studybench.records import Parent
from studybench.testset.corpus.answer_forms import classify_answer, split_labelled_parts
from studybench.testset.corpus.cnxml import (
    CONVERTER_VERSION,
    PANDOC_TO,
    IngestError,
    Volume,
    VolumeChapter,
    convert_chapter,
    parse_cnxml,
    read_collection,
)
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
                text, answers, items = convert_chapter(src, vol, ch)
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
