"""Errata of the official test sets: golds checked by hand and found wrong, with their evidence.

The package ships ``studybench/data/errata.json``; :func:`load_errata` reads it. Each
:class:`Erratum` names one sub-problem (split, source, year, source_problem_id, problem_id), the field
(``answer``), the official value as the test-set file has it, the corrected value (or ``None``: the
sub-problem cannot be answered as stated), its kind (``wrong``: the gold answers something else or
miscomputes; ``rounded``: the gold is rounded so far that a careful answer fails the 1% check;
``unanswerable``), the cause and a short evidence note. ``tests/core/test_errata.py`` re-derives every
corrected value from the problem's own numbers.

Scoring keeps the official golds by default (the paper's numbers). An erratum applies to a
sub-problem only while the test set still holds its official value (a file fixed upstream is left
alone). :func:`plan_errata` says what an errata setting (:data:`ERRATA_MODES`) does to a selection:
``official`` scores the golds as they are and counts the errata items; ``apply`` scores with the
corrected golds (a parent holding an unanswerable sub-problem is left out: Par@k needs every
sub-problem scored); ``exclude`` leaves out every parent holding an erratum.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from studybench.answers import brace_balance_error, find_boxes
from studybench.records import Parent, SubProblem

__all__ = [
    "ERRATA_KINDS",
    "ERRATA_MODES",
    "ErrataError",
    "ErrataPlan",
    "Erratum",
    "errata_digest",
    "errata_tag",
    "load_errata",
    "parse_errata",
    "plan_errata",
]

ERRATA_MODES = ("official", "apply", "exclude")
"""``official``: the golds as published (default; comparable with the paper); ``apply``: the corrected
golds (unanswerable sub-problems' parents left out); ``exclude``: parents holding an erratum left out."""

ERRATA_KINDS = ("wrong", "rounded", "unanswerable")
"""What is wrong with a gold (see the module docstring)."""

_FIELDS = ("id", "split", "source", "year", "source_problem_id", "problem_id", "field", "official", "corrected",
           "kind", "cause", "evidence")


class ErrataError(ValueError):
    """An errata file that cannot be used; the message names file, record and field."""


@dataclass(frozen=True)
class Erratum:
    """One gold found wrong (see the module docstring).

    Attributes:
        id: a short stable name (``ipho-1972-q3``).
        split: the official test set holding it (``application`` or ``transfer``).
        source, year, source_problem_id: the parent's key.
        problem_id: the sub-problem's id (a single-question parent's ``source_problem_id``).
        field: the corrected field (``answer``).
        official: the value the test-set file has.
        corrected: the corrected gold, or ``None`` when the sub-problem cannot be answered as stated.
        kind: one of :data:`ERRATA_KINDS`.
        cause: why the official value is wrong, in a line.
        evidence: the recomputation, in words.
        answer_type: the corrected answer type, when the correction changes it (else ``None``).
        type_sequence: the corrected type sequence (with ``answer_type``).
    """

    id: str
    split: str
    source: str
    year: str
    source_problem_id: str
    problem_id: str
    field: str
    official: str
    corrected: str | None
    kind: str
    cause: str
    evidence: str
    answer_type: str | None = None
    type_sequence: str | None = None

    @property
    def parent_uid(self) -> str:
        """The parent's :attr:`~studybench.records.Parent.uid` (``source/year/source_problem_id``)."""
        return f"{self.source}/{self.year}/{self.source_problem_id}"

    @property
    def unanswerable(self) -> bool:
        """Whether the sub-problem cannot be answered as stated (no corrected value)."""
        return self.corrected is None

    def to_dict(self) -> dict[str, Any]:
        """The erratum as its JSON record."""
        out = {k: getattr(self, k) for k in _FIELDS}
        if self.answer_type is not None:
            out.update(answer_type=self.answer_type, type_sequence=self.type_sequence)
        return out


def _record(obj: Any, where: str) -> Erratum:
    if not isinstance(obj, dict):
        raise ErrataError(f"{where}: expected an object")
    for name in _FIELDS:
        if name not in obj:
            raise ErrataError(f"{where}: field {name!r} is missing")
        value = obj[name]
        if name == "corrected":
            if value is not None and not (isinstance(value, str) and value.strip()):
                raise ErrataError(f"{where}: field 'corrected' must be a gold string or null")
        elif not isinstance(value, str) or (name not in ("year",) and not value.strip()):
            raise ErrataError(f"{where}: field {name!r} must be a non-empty string")
    if obj["kind"] not in ERRATA_KINDS:
        raise ErrataError(f"{where}: field 'kind' must be one of {', '.join(ERRATA_KINDS)}, got {obj['kind']!r}")
    if (obj["kind"] == "unanswerable") != (obj["corrected"] is None):
        raise ErrataError(f"{where}: field 'corrected' is null exactly when kind is 'unanswerable'")
    if obj["field"] != "answer":
        raise ErrataError(f"{where}: field 'field': only 'answer' can be corrected, got {obj['field']!r}")
    atype, ts = obj.get("answer_type"), obj.get("type_sequence")
    if (atype is None) != (ts is None) or not all(x is None or isinstance(x, str) for x in (atype, ts)):
        raise ErrataError(f"{where}: fields 'answer_type' and 'type_sequence' are strings, given together")
    e = Erratum(**{k: obj[k] for k in _FIELDS}, answer_type=atype, type_sequence=ts)
    if e.corrected is not None:
        problem = brace_balance_error(e.corrected) or ("" if find_boxes(e.corrected) else "no \\boxed{...}")
        if not problem and atype is not None:
            try:
                SubProblem(problem_id=e.problem_id, answer=e.corrected, answer_type=atype, type_sequence=ts or "")
            except ValueError as err:
                problem = str(err)
        if problem:
            raise ErrataError(f"{where}: field 'corrected': {problem}")
    return e


def parse_errata(obj: Any, source: str = "errata.json") -> list[Erratum]:
    """Validate an errata document (``{"errata": [...]}``).

    Args:
        obj: the decoded JSON.
        source: the file, for messages.

    Returns:
        The errata in file order.

    Raises:
        ErrataError: a malformed record (file, record index and field named), or an id or key listed twice.
    """
    items = obj.get("errata") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        raise ErrataError(f"{source}: expected an object with an 'errata' list")
    out = [_record(x, f"{source}: errata[{i}]") for i, x in enumerate(items)]
    ids = [e.id for e in out]
    keys = [(e.split, e.parent_uid, e.problem_id) for e in out]
    for i, e in enumerate(out):
        if ids.index(e.id) != i:
            raise ErrataError(f"{source}: errata[{i}]: id {e.id!r} is listed twice")
        if keys.index(keys[i]) != i:
            raise ErrataError(f"{source}: errata[{i}]: {e.parent_uid} / {e.problem_id} is listed twice")
    return out


@functools.lru_cache(maxsize=1)
def _packaged() -> tuple[Erratum, ...]:
    text = resources.files("studybench").joinpath("data/errata.json").read_text(encoding="utf-8")
    return tuple(parse_errata(json.loads(text), "studybench/data/errata.json"))


def load_errata(path: Path | str | None = None) -> list[Erratum]:
    """The errata shipped with the package (``studybench/data/errata.json``), or those of ``path``.

    Args:
        path: another errata file in the same format (``None``: the package's).

    Returns:
        The errata in file order.

    Raises:
        ErrataError: the file is malformed (named with record and field).
    """
    if path is None:
        return list(_packaged())
    from studybench.files import read_user_text

    try:
        return parse_errata(json.loads(read_user_text(path)), str(path))
    except (OSError, ValueError) as e:
        if isinstance(e, ErrataError):
            raise
        raise ErrataError(f"{path}: {e}") from None


def errata_digest(errata: list[Erratum]) -> str:
    """sha256 of the errata's records (what changes when an erratum is added or corrected)."""
    blob = json.dumps([e.to_dict() for e in errata], ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def errata_tag(parent_uid: str, sub_id: str, answer: str) -> str | None:
    """The erratum behind a sub-problem's gold, when it is a packaged erratum's corrected value, else ``None``.

    A rule verdict made on a corrected gold stores this tag with its verifier settings, so a verdict
    made on the official gold (or on an older correction) is out of date and verified again.

    Args:
        parent_uid: the parent's uid.
        sub_id: the sub-problem's id.
        answer: the gold the sub-problem holds now.

    Returns:
        ``"<erratum id>:<12 hex digits of the correction's digest>"`` or ``None``.
    """
    e = _corrections().get((parent_uid, sub_id))
    if e is None or e.corrected != answer:
        return None
    digest = hashlib.sha256(f"{e.corrected}|{e.answer_type}|{e.type_sequence}".encode()).hexdigest()
    return f"{e.id}:{digest[:12]}"


@functools.lru_cache(maxsize=1)
def _corrections() -> dict[tuple[str, str], Erratum]:
    return {(e.parent_uid, e.problem_id): e for e in _packaged() if e.corrected is not None}


@dataclass
class ErrataPlan:
    """What an errata setting does to a selection of parents (:func:`plan_errata`).

    Attributes:
        mode: one of :data:`ERRATA_MODES`.
        matched: the errata whose sub-problem the parents hold with its official value.
        stale: errata whose sub-problem holds another value than the erratum's official one (the test
            set changed; these are not applied).
        drop: parent uids the setting leaves out, each with why.
        digest: :func:`errata_digest` of the errata list used.
    """

    mode: str
    matched: list[Erratum] = field(default_factory=list)
    stale: list[Erratum] = field(default_factory=list)
    drop: dict[str, str] = field(default_factory=dict)
    digest: str = ""

    def apply(self, parents: list[Parent]) -> list[Parent]:
        """The parents with the corrected golds (``apply``), without the dropped ones.

        Args:
            parents: parents (of the selection).

        Returns:
            New parent objects where a gold changes (the originals are left as they were); a
            corrected sub-problem's solution ends with a note naming the erratum (no box), so the LLM
            judge and the reference replay read the correction beside the official working.
        """
        by_uid: dict[str, list[Erratum]] = {}
        if self.mode == "apply":
            for e in self.matched:
                if not e.unanswerable:
                    by_uid.setdefault(e.parent_uid, []).append(e)
        out = []
        for p in parents:
            if p.uid in self.drop:
                continue
            out.append(_corrected(p, by_uid[p.uid]) if p.uid in by_uid else p)
        return out

    def describe(self, parents: list[Parent]) -> dict[str, Any]:
        """The manifest's record of the setting for the selected ``parents`` (after :meth:`apply`).

        Returns:
            ``{"mode", "digest", "items": [{"id", "parent", "sub_id", "kind"}...], "dropped": {uid: why}}``:
            the errata items the selection holds (scored officially, or corrected with ``apply``).
        """
        uids = {p.uid for p in parents}
        items = [{"id": e.id, "parent": e.parent_uid, "sub_id": e.problem_id, "kind": e.kind}
                 for e in self.matched if e.parent_uid in uids]
        return {"mode": self.mode, "digest": self.digest, "items": items, "dropped": dict(self.drop)}


def _note(e: Erratum) -> str:
    return (f"\n\n[Erratum {e.id} (studybench): the official answer above is wrong ({e.cause}); "
            "this sub-problem is scored with the corrected gold.]")


def _corrected(parent: Parent, errata: list[Erratum]) -> Parent:
    by_sub = {e.problem_id: e for e in errata}
    if parent.is_single:
        e = by_sub[parent.source_problem_id]
        update: dict[str, Any] = {"answer": e.corrected, "solution": parent.solution + _note(e)}
        if e.answer_type is not None:
            update.update(answer_type=e.answer_type, type_sequence=e.type_sequence)
        return Parent.model_validate({**parent.model_dump(), **update})
    subs = []
    for s in parent.sub_problems:
        e = by_sub.get(s.problem_id)
        if e is None:
            subs.append(s)
            continue
        data = {**s.model_dump(), "answer": e.corrected, "solution": s.solution + _note(e)}
        if e.answer_type is not None:
            data.update(answer_type=e.answer_type, type_sequence=e.type_sequence)
        subs.append(SubProblem.model_validate(data))
    return parent.model_copy(update={"sub_problems": subs})


def plan_errata(parents: list[Parent], mode: str = "official", errata: list[Erratum] | None = None) -> ErrataPlan:
    """What errata setting ``mode`` does to ``parents``.

    Args:
        parents: the parents (a whole test set, or a selection).
        mode: one of :data:`ERRATA_MODES`.
        errata: the errata (default: the package's, :func:`load_errata`).

    Returns:
        An :class:`ErrataPlan`: the matching errata, those no longer matching, and the parents to leave out.

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in ERRATA_MODES:
        raise ValueError(f"errata must be one of {', '.join(ERRATA_MODES)}, got {mode!r}")
    errata = load_errata() if errata is None else errata
    plan = ErrataPlan(mode, digest=errata_digest(errata))
    by_uid = {p.uid: p for p in parents}
    for e in errata:
        p = by_uid.get(e.parent_uid)
        if p is None:
            continue
        sub = next((s for s in p.subs() if s.problem_id == e.problem_id), None)
        if sub is None:
            continue
        if sub.answer != e.official:
            plan.stale.append(e)
            continue
        plan.matched.append(e)
        if mode == "exclude":
            plan.drop.setdefault(e.parent_uid, f"erratum {e.id} ({e.kind})")
        elif mode == "apply" and e.unanswerable:
            plan.drop.setdefault(e.parent_uid, f"erratum {e.id}: unanswerable ({e.cause})")
    return plan
