"""The rows of a run directory's three logs, one pydantic model each, shared by writers and readers.

=====================  ==========================  ==================================================
file                   model                       one row per
=====================  ==========================  ==================================================
``generations.jsonl``  :class:`GenerationRow`      generated turn (a retried turn appends a new row)
``judgements.jsonl``   :class:`RuleVerdictRow`     rule verdict on one completion of a turn
``llm_judgements.jsonl`` :class:`LLMVerdictRow`    LLM verdict on one completion, per judge configuration
=====================  ==========================  ==================================================

Every row starts with its :class:`TurnKey` fields (``split``, ``parent``, ``sub_id``, ``seed``,
``attempt``); the last row per key (per key and ``judge_id`` for LLM verdicts) is the one readers
see. Which of those rows still *count* is decided in one place, :mod:`studybench.store.currency`.

Rows written by older versions load unchanged: unknown fields are kept, fields a row lacks take
their defaults. A row whose key or essential field (a generation's ``completion``, a verdict's
``completion_digest``, an LLM verdict's ``judge_id``) has the wrong type is unusable and readers
treat its key as having no row; descriptive fields of the wrong type (``usage``, ``extracted``, ...)
read as ``None``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidatorFunctionWrapHandler, field_validator

__all__ = [
    "FINAL_LLM_VERDICTS",
    "LLM_VERDICTS",
    "SKIPPED_PARENT",
    "GenerationRow",
    "LLMVerdictRow",
    "RuleVerdictRow",
    "TurnKey",
]

LLM_VERDICTS = ("TRUE", "FALSE", "unjudgeable", "error")
"""Every value an LLM verdict row's ``verdict`` takes."""

SKIPPED_PARENT = "parent skipped: "
"""How a generation row's ``error`` begins for a turn of a parent skipped because its prompt does not
fit the context (:mod:`studybench.evaluate.fit`); reports list such parents."""

FINAL_LLM_VERDICTS = ("TRUE", "FALSE", "unjudgeable")
"""LLM verdicts that are final: reused by later passes and cached. ``"error"`` (a transport failure)
is judged again."""


@dataclass(frozen=True, order=True)
class TurnKey:
    """Identity of one turn: (split, parent uid, sub-problem id, seed, attempt).

    ``parent`` is :attr:`studybench.records.Parent.uid` (``source/year/source_problem_id``),
    ``sub_id`` the sub-problem's ``problem_id`` (a single-question parent's ``source_problem_id``).
    """

    split: str
    parent: str
    sub_id: str
    seed: int
    attempt: int

    def as_str(self) -> str:
        """The key as one JSON array string (stable, for display and hashing)."""
        return json.dumps([self.split, self.parent, self.sub_id, self.seed, self.attempt], ensure_ascii=False, allow_nan=False)

    def to_dict(self) -> dict[str, Any]:
        """The five key fields as a dict (the head of every row)."""
        return {"split": self.split, "parent": self.parent, "sub_id": self.sub_id, "seed": self.seed, "attempt": self.attempt}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TurnKey:
        """The key of a raw row.

        Raises:
            KeyError, TypeError, ValueError: a key field is missing or not convertible.
        """
        return cls(str(row["split"]), str(row["parent"]), str(row["sub_id"]), int(row["seed"]), int(row["attempt"]))


class _Row(BaseModel):
    """The key fields every row starts with."""

    model_config = ConfigDict(extra="allow")

    split: str
    parent: str
    sub_id: str
    seed: int
    attempt: int

    @property
    def key(self) -> TurnKey:
        """This row's turn key."""
        return TurnKey(self.split, self.parent, self.sub_id, self.seed, self.attempt)

    def to_json(self) -> dict[str, Any]:
        """The row as written to its log (JSON-ready; unknown fields of old rows kept)."""
        return self.model_dump(mode="json")


def _lenient(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A descriptive field of the wrong type reads as ``None`` instead of making the row unusable."""
    try:
        return handler(value)
    except ValidationError:
        return None


class GenerationRow(_Row):
    """One generated turn (``generations.jsonl``).

    Attributes:
        turn: index of the sub-problem within its parent (the turn of the attempt).
        messages_digest: sha256 of the conversation sent (:func:`studybench.protocol.messages_digest`);
            a stored turn is reused only while the protocol still builds this conversation.
        request_seed: the per-request sampling seed.
        completion: the model's reply (``""`` for a failed turn); ``None`` makes the row unusable.
        reasoning: reasoning returned separately by the server (vLLM ``reasoning_content``).
        finish_reason, usage, latency_s, attempts: as reported by the backend.
        error: why the turn failed after all retries; ``None`` when it did not.
        time: Unix time of writing.
        extra: backend-specific details (response id, budget, queueing time, ...).
    """

    turn: int | None = None
    messages_digest: str | None = None
    request_seed: int | None = None
    completion: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    latency_s: float | None = None
    attempts: int | None = None
    error: str | None = None
    time: float | None = None
    extra: dict[str, Any] | None = None

    _lenient = field_validator(
        "turn", "request_seed", "reasoning", "finish_reason", "usage", "latency_s", "attempts", "time", "extra",
        mode="wrap",
    )(_lenient)


class RuleVerdictRow(_Row):
    """One rule verdict (``judgements.jsonl``).

    Attributes:
        completion_digest: sha256 of the completion judged (:func:`studybench.files.text_digest`).
        generation_error: the judged generation row's ``error`` (a failed turn's verdict is "incorrect:
            generation failed (...)").
        answer_type, type_sequence: of the sub-problem.
        extracted: the answers extracted from the completion.
        correct: the verdict; anything but JSON ``true`` reads as incorrect.
        reason: a short reason starting with ``correct`` or ``incorrect``.
        verifier: the rule verifier's settings when it judged (mode, version, timeout); a verdict made
            with other settings is judged again.
        time: Unix time of writing.
    """

    completion_digest: str | None = None
    generation_error: str | None = None
    answer_type: str | None = None
    type_sequence: str | None = None
    extracted: list[str] | None = None
    correct: bool = False
    reason: str = ""
    verifier: dict[str, Any] | None = None
    time: float | None = None

    @field_validator("correct", mode="before")
    @classmethod
    def _only_true_is_correct(cls, v: Any) -> bool:
        return v is True

    @field_validator("reason", mode="before")
    @classmethod
    def _reason_text(cls, v: Any) -> str:
        return v if isinstance(v, str) else ""

    _lenient = field_validator("generation_error", "answer_type", "type_sequence", "extracted", "verifier", "time",
                               mode="wrap")(_lenient)


class LLMVerdictRow(_Row):
    """One LLM verdict on one completion, by one judge configuration (``llm_judgements.jsonl``).

    Attributes:
        judge_id: the judge configuration (:func:`studybench.llm_judge.judge_id`: model + template digest).
        judge_model, template_digest: what ``judge_id`` hashes.
        completion_digest: sha256 of the completion judged.
        inputs_digest: sha256 of the five judge inputs (:attr:`studybench.llm_judge.LLMJudgeInputs.digest`).
        answer_type, extracted: of the judged turn.
        rule_correct: the rule verdict of the same completion.
        verdict: one of :data:`LLM_VERDICTS`.
        justification: the judge's sentence; ``error`` why a verdict is unjudgeable or an error.
        reply: for an unjudgeable verdict, the judge's last reply (reasoning removed, at most 4,000
            characters), to see what went wrong; ``None`` otherwise.
        cached, shared, requests: how the verdict was obtained.
        usage: token counts of the judge's replies that made the verdict
            (:data:`studybench.costs.USAGE_FIELDS`); for a ``cached`` or ``shared`` verdict the
            original replies' counts, not spent by this row (:func:`studybench.llm_judge.judge_usage`).
        time: Unix time of writing.
    """

    judge_id: str
    judge_model: str | None = None
    template_digest: str | None = None
    completion_digest: str | None = None
    inputs_digest: str | None = None
    answer_type: str | None = None
    extracted: list[str] | None = None
    rule_correct: bool | None = None
    verdict: str | None = None
    justification: str | None = None
    error: str | None = None
    reply: str | None = None
    cached: bool | None = None
    shared: bool | None = None
    requests: int | None = None
    usage: dict[str, int] | None = None
    time: float | None = None

    @field_validator("verdict", mode="before")
    @classmethod
    def _verdict_text(cls, v: Any) -> str | None:
        return None if v is None else str(v)

    _lenient = field_validator("judge_model", "template_digest", "inputs_digest", "answer_type", "extracted",
                               "rule_correct", "justification", "error", "cached", "shared", "requests", "usage",
                               "time", mode="wrap")(_lenient)
