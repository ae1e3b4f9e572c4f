"""Typed records of StudyBench test sets (docs/protocol.md section 1).

A **parent** is one problem of a test set; it is scored through its **sub-problems**: the
``sub_problems`` of a multi-sub parent, or the parent itself for a single-question parent (whose one
sub-problem has the id ``source_problem_id``); :meth:`Parent.subs` gives them in order. Gold answers
are ``\\boxed{...}`` strings, one box per answer; a TUP or ALT answer has one **slot** (box) per
entry of its ``type_sequence``.

Validation here is structural (fields, types, answer types, box counts, balanced braces). Records
that load but look suspicious are reported by :mod:`studybench.checks`, not rejected.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from studybench.answer_types import COMPOUND_TYPES, AnswerType
from studybench.answers import brace_balance_error, find_boxes, split_top_level

__all__ = [
    "AnswerType",
    "COMPOUND_TYPES",
    "Parent",
    "ParentKey",
    "SubProblem",
    "SubProblemRef",
    "gold_boxes",
    "sub_problem_refs",
    "label_map",
    "normalise_label",
    "parse_type_sequence",
]


ParentKey = tuple[str, str, str]
"""(source, year, source_problem_id), all strings."""


def parse_type_sequence(value: Any) -> list[AnswerType]:
    """Parse a ``type_sequence`` (comma string such as ``"EQ,NV"``, or a list) into answer types.

    Raises:
        ValueError: unknown element, or a value that is neither a string nor a list of strings.
    """
    if value is None:
        return []
    if isinstance(value, str):
        items = [t.strip() for t in value.split(",")] if value.strip() else []
    elif isinstance(value, list) and all(isinstance(t, str) for t in value):
        items = [t.strip() for t in value]
    else:
        raise ValueError(f"type_sequence must be a comma-separated string, got {type(value).__name__}")
    out = []
    for t in items:
        try:
            out.append(AnswerType(t.upper()))
        except ValueError:
            raise ValueError(
                f"unknown type {t!r} in type_sequence (allowed: {', '.join(a.value for a in AnswerType)})"
            ) from None
    return out


def gold_boxes(answer: str, answer_type: AnswerType, type_sequence: list[AnswerType]) -> list[str]:
    """The gold answer's box contents, one per answer slot.

    A TUP/ALT gold whose slots are packed into a single box (``\\boxed{a, b, c}``) is split at
    top-level commas when that yields exactly ``len(type_sequence)`` parts.
    """
    boxes = [b.content for b in find_boxes(answer)]
    if (
        answer_type in COMPOUND_TYPES
        and len(boxes) == 1
        and len(type_sequence) > 1
    ):
        parts = split_top_level(boxes[0])
        if len(parts) == len(type_sequence):
            return parts
    return boxes


class _Gold(BaseModel):
    """Fields shared by a sub-problem and a single-question parent."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    answer: str
    answer_type: AnswerType
    type_sequence: list[AnswerType] = Field(default_factory=list)

    @field_validator("answer_type", mode="before")
    @classmethod
    def _norm_type(cls, v: Any) -> Any:
        if isinstance(v, str):
            u = v.strip().upper()
            if u not in AnswerType.__members__:
                raise ValueError(
                    f"unknown answer_type {v!r} (allowed: {', '.join(a.value for a in AnswerType)})"
                )
            return u
        return v

    @field_validator("type_sequence", mode="before")
    @classmethod
    def _parse_ts(cls, v: Any) -> list[AnswerType]:
        return parse_type_sequence(v)

    def check_gold(self) -> None:
        """Validate the gold string against answer_type / type_sequence. Raises ValueError."""
        if not self.answer.strip():
            raise ValueError("answer: empty gold answer")
        err = brace_balance_error(self.answer)
        if err:
            raise ValueError(f"answer: unbalanced braces in gold ({err})")
        raw = find_boxes(self.answer)
        if not raw:
            raise ValueError("answer: gold has no \\boxed{...}")
        ts = self.type_sequence
        if self.answer_type in COMPOUND_TYPES:
            if not ts:
                raise ValueError(f"type_sequence: required for answer_type {self.answer_type.value}")
            n = len(gold_boxes(self.answer, self.answer_type, ts))
            if n != len(ts):
                raise ValueError(
                    f"type_sequence: {len(ts)} types ({','.join(t.value for t in ts)}) "
                    f"but the gold has {len(raw)} boxes"
                )
            if self.answer_type is AnswerType.TUP and AnswerType.ALT in ts:
                raise ValueError("type_sequence: ALT cannot be a TUP slot")
        else:
            if len(ts) > 1 or (ts and ts[0] is not self.answer_type):
                raise ValueError(
                    f"type_sequence: {','.join(t.value for t in ts)!r} given for atomic answer_type "
                    f"{self.answer_type.value}"
                )

    @property
    def boxes(self) -> list[str]:
        """Gold box contents, one per slot (see :func:`gold_boxes`)."""
        return gold_boxes(self.answer, self.answer_type, self.type_sequence)

    @property
    def type_sequence_str(self) -> str:
        return ",".join(t.value for t in self.type_sequence)


class SubProblem(_Gold):
    """One scored sub-problem of a parent (docs/protocol.md section 1)."""

    problem_id: str
    problem: str = ""
    solution: str = ""
    knowledge_points: Any = None

    @field_validator("problem_id", mode="before")
    @classmethod
    def _id_str(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v.strip() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> SubProblem:
        if not self.problem_id.strip():
            raise ValueError("problem_id: empty")
        self.check_gold()
        return self


class Parent(BaseModel):
    """One test-set problem: multi-sub (``sub_problems`` non-empty) or single-question."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    source: str
    source_kind: str = ""
    domain: str = ""
    year: str = ""
    source_problem_id: str
    title: str = ""
    problem_type: str = ""
    problem: str = ""
    solution: str = ""
    answer: str = ""
    answer_type: str = ""
    type_sequence: Any = ""
    sub_problems: list[SubProblem] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and "sub_problems" not in data and "problems" in data:
            data = dict(data)
            data["sub_problems"] = data.pop("problems")
        if isinstance(data, dict) and data.get("sub_problems") is None and "sub_problems" in data:
            data = dict(data)
            data["sub_problems"] = []
        return data

    @field_validator("year", "source_problem_id", "source", mode="before")
    @classmethod
    def _to_str(cls, v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v.strip() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self) -> Parent:
        if not self.source.strip():
            raise ValueError("source: empty")
        if not self.source_problem_id.strip():
            raise ValueError("source_problem_id: empty")
        if self.sub_problems:
            # parent-level gold fields are ignored for scoring but must still be well-formed
            if self.answer_type.strip() and self.answer_type.strip().upper() not in AnswerType.__members__:
                raise ValueError(
                    f"answer_type: unknown answer_type {self.answer_type!r} "
                    f"(allowed: {', '.join(a.value for a in AnswerType)})"
                )
            try:
                parse_type_sequence(self.type_sequence)
            except ValueError as e:
                raise ValueError(f"type_sequence: {e}") from None
            seen: set[str] = set()
            for j, s in enumerate(self.sub_problems):
                if s.problem_id in seen:
                    raise ValueError(f"sub_problems[{j}].problem_id: duplicate problem_id {s.problem_id!r}")
                seen.add(s.problem_id)
                if not (s.problem.strip() or self.problem.strip()):
                    raise ValueError(f"sub_problems[{j}].problem: empty sub-problem and empty stem")
        else:
            if not self.problem.strip():
                raise ValueError("problem: empty single-question problem")
            for name in ("answer", "answer_type"):
                if name not in self.model_fields_set:
                    raise ValueError(f"{name}: missing required field (single-question parent)")
            try:
                self.single_sub()  # validates the parent's own gold fields
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(x) for x in err["loc"])
                msg = str(err["msg"]).removeprefix("Value error, ")
                # model-level messages (empty loc) already start with the field they blame
                raise ValueError(msg if not loc or msg.startswith(loc) else f"{loc}: {msg}") from None
        return self

    def single_sub(self) -> SubProblem:
        """The one sub-problem of a single-question parent, built from the parent's own gold fields."""
        return SubProblem(
            problem_id=self.source_problem_id,
            problem=self.problem,
            solution=self.solution,
            answer=self.answer,
            answer_type=self.answer_type,
            type_sequence=self.type_sequence,
        )

    @property
    def key(self) -> ParentKey:
        """Parent identity (source, year, source_problem_id)."""
        return (self.source, self.year, self.source_problem_id)

    @property
    def is_single(self) -> bool:
        return not self.sub_problems

    @property
    def stem(self) -> str:
        """Shared stem shown before sub-problem 0 (empty for single-question parents)."""
        return "" if self.is_single else self.problem

    def subs(self) -> list[SubProblem]:
        """The scored sub-problems in order: ``sub_problems``, or the parent itself as its one sub-problem."""
        return list(self.sub_problems) if self.sub_problems else [self.single_sub()]

    @property
    def uid(self) -> str:
        """Stable string id of the parent: ``source/year/source_problem_id`` (year may be empty)."""
        return "/".join(self.key)


@dataclass(frozen=True)
class SubProblemRef:
    """One scored sub-problem together with its parent and its position in the parent.

    Attributes:
        parent: the parent it belongs to.
        index: its position among ``parent.subs()`` (0-based; the turn index of an attempt).
        sub: the sub-problem itself.
    """

    parent: Parent
    index: int
    sub: SubProblem

    @property
    def sub_id(self) -> str:
        """The sub-problem's ``problem_id``."""
        return self.sub.problem_id


def sub_problem_refs(parents: Iterable[Parent]) -> list[SubProblemRef]:
    """Every scored sub-problem of ``parents``, in order, with its parent and index."""
    return [SubProblemRef(p, i, s) for p in parents for i, s in enumerate(p.subs())]


# --------------------------------------------------------------------------- sub-discipline labels


def normalise_label(label: str) -> str:
    """Comparison key of a label: NFKC, casefolded, ``&`` read as ``and``, punctuation and spacing folded.

    ``"Thermodynamics & Statistical Physics"`` and ``"thermodynamics and  statistical-physics"``
    both give ``"thermodynamics and statistical physics"``. Never raises on a ``str``.

    Args:
        label: a sub-discipline label (``problem_type``) or any other free-text label.

    Returns:
        The folded key; two labels are one label when their keys are equal.
    """
    s = unicodedata.normalize("NFKC", label).casefold().replace("&", " and ")
    s = re.sub(r"[\W_]+", " ", s)
    return " ".join(s.split())


def label_map(labels: Iterable[str]) -> dict[str, str]:
    """Map every spelling of a label to one display form (data check and reports use this).

    Spellings are grouped by :func:`normalise_label`; the display form of a group is its most
    frequent spelling (ties: the one seen first). Empty or blank labels are left out.

    Args:
        labels: the labels as they occur, one entry per record (frequencies matter).

    Returns:
        ``{spelling: display form}`` for every non-blank spelling seen.
    """
    groups: dict[str, Counter[str]] = {}
    for label in labels:
        if isinstance(label, str) and label.strip():
            groups.setdefault(normalise_label(label), Counter())[label] += 1
    out: dict[str, str] = {}
    for spellings in groups.values():
        canon = max(spellings, key=lambda x: spellings[x])
        for x in spellings:
            out[x] = canon
    return out
