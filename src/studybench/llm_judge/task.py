"""What an LLM judge is asked and how its reply is read: :class:`LLMJudgeTask`.

:class:`studybench.llm_judge.LLMJudge` is one client for any yes/no question put to an LLM: the
transport (retries, ``Retry-After``, configuration errors), strict parsing with format re-asks,
sharing of identical requests in flight and the on-disk verdict cache do not depend on the
question. A task supplies the rest:

- the builtin prompt template and the names of its placeholders (their order fixes the inputs
  digest, hence the cache key);
- a strict reply parser, ``str -> ParsedVerdict`` (a boolean verdict and a justification), raising
  :class:`~studybench.llm_judge.parse.MalformedReply` for any reply outside the format;
- the format reminder sent after a malformed reply.

Two tasks exist: :data:`ANSWER_EQUIVALENCE_TASK` (the default; docs/protocol.md section 6) here, and the
contamination audit's duplicate question (:data:`studybench.audit.duplicates.DUPLICATE_TASK`).
Verdicts of different tasks never share a cache key: the key holds the template digest, and the
inputs digest is taken over a list as long as the task's placeholders.

Example::

    YES_NO = LLMJudgeTask(
        name="same-unit",
        template="Do {a} and {b} measure the same quantity? End with YES or NO.",
        placeholders=("a", "b"),
        parse=parse_yes_no,            # your strict parser: str -> ParsedVerdict, or MalformedReply
        format_reminder="End your reply with one line: YES or NO.",
    )
    judge = LLMJudge("Qwen/Qwen3-32B", "http://127.0.0.1:8001/v1", task=YES_NO)
    verdict = await judge.judge({"a": "N m", "b": "J"})
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from studybench.llm_judge.parse import ParsedVerdict, parse_verdict
from studybench.llm_judge.prompt import DEFAULT_TEMPLATE, FORMAT_REMINDER, PLACEHOLDERS, LLMJudgeTemplate

__all__ = ["ANSWER_EQUIVALENCE_TASK", "LLMJudgeTask"]


@dataclass(frozen=True)
class LLMJudgeTask:
    """One kind of question put to an LLM judge (see the module docstring).

    Attributes:
        name: a short identifier, e.g. ``"answer-equivalence"`` (for messages).
        template: the builtin prompt template text.
        placeholders: the template's placeholder names, without braces; their order fixes the
            inputs digest.
        parse: the strict reply parser: returns a :class:`ParsedVerdict`, raises
            :class:`~studybench.llm_judge.parse.MalformedReply`.
        format_reminder: the user message sent after a malformed reply.

    Raises:
        ValueError: an empty name or reminder, invalid placeholder names, or a parser that is not
            callable.
        LLMJudgeTemplateError: the builtin template lacks one of the placeholders.
    """

    name: str
    template: str
    placeholders: tuple[str, ...]
    parse: Callable[[str], ParsedVerdict]
    format_reminder: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a judge task needs a name")
        if not isinstance(self.format_reminder, str) or not self.format_reminder.strip():
            raise ValueError(f"judge task {self.name}: the format reminder is empty")
        if not callable(self.parse):
            raise ValueError(f"judge task {self.name}: parse must be callable")
        if not isinstance(self.placeholders, tuple):
            object.__setattr__(self, "placeholders", tuple(self.placeholders))
        self.builtin_template()  # validates the names and the template

    def builtin_template(self) -> LLMJudgeTemplate:
        """The task's own template.

        Returns:
            :class:`LLMJudgeTemplate` with source ``"builtin"``.
        """
        return LLMJudgeTemplate(self.template, "builtin", self.placeholders)

    def template_from_file(self, path: str | Path) -> LLMJudgeTemplate:
        """A user template for this task, read from a UTF-8 file.

        Args:
            path: the file; it must contain every placeholder of the task.

        Returns:
            The validated template.

        Raises:
            LLMJudgeTemplateError: unreadable, too large, not UTF-8, empty, or missing a placeholder.
        """
        return LLMJudgeTemplate.from_file(path, self.placeholders)

    def values(self, inputs: Mapping[str, str]) -> dict[str, str]:
        """The inputs of one judgement, checked against the task's placeholders.

        Args:
            inputs: one text per placeholder.

        Returns:
            A plain dict of them.

        Raises:
            ValueError: a placeholder without a value, an unknown name, or a value that is not a string.
        """
        values = dict(inputs)
        missing = [p for p in self.placeholders if p not in values]
        extra = sorted(k for k in values if k not in self.placeholders)
        if missing or extra:
            raise ValueError(
                f"judge task {self.name} takes inputs {list(self.placeholders)}; missing {missing}, unknown {extra}"
            )
        bad = [k for k, v in values.items() if not isinstance(v, str)]
        if bad:
            raise ValueError(f"judge task {self.name}: inputs {bad} are not strings")
        return values

    def inputs_digest(self, values: Mapping[str, str]) -> str:
        """sha256 hex of the inputs: JSON (ASCII) of the list of values in placeholder order.

        Args:
            values: one text per placeholder.

        Returns:
            The digest (part of the verdict cache key).

        Raises:
            KeyError: a placeholder without a value.
        """
        blob = json.dumps([values[p] for p in self.placeholders], ensure_ascii=True, allow_nan=False)
        return hashlib.sha256(blob.encode("ascii")).hexdigest()


ANSWER_EQUIVALENCE_TASK = LLMJudgeTask(
    name="answer-equivalence",
    template=DEFAULT_TEMPLATE,
    placeholders=PLACEHOLDERS,
    parse=parse_verdict,
    format_reminder=FORMAT_REMINDER,
)
"""The default task (docs/protocol.md section 6): is the student's final answer equivalent to the
reference? Five placeholders (:data:`~studybench.llm_judge.prompt.PLACEHOLDERS`), the strict
two-section TRUE/FALSE format (:func:`~studybench.llm_judge.parse.parse_verdict`) and
:data:`~studybench.llm_judge.prompt.FORMAT_REMINDER`."""
