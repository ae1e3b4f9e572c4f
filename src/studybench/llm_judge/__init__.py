"""The LLM judge fallback (paper 2.2, appendices F-G; PROTOCOL.md section 6).

Leaderboard mode (``rule+llm``) sends every answer the rule verifier rejects to an LLM judge and
counts it correct when the judge says TRUE; reward mode (``rule``) never calls an LLM.

- :mod:`studybench.llm_judge.prompt`: our prompt template and user templates (five placeholders);
- :mod:`studybench.llm_judge.parse`: strict two-section verdict parsing, and the strict removal of
  judge reasoning shared by every task (:func:`strip_judge_reasoning`);
- :mod:`studybench.llm_judge.task`: :class:`LLMJudgeTask` (template and placeholder names, strict
  parser, format reminder); :data:`ANSWER_EQUIVALENCE_TASK` is the default;
- :mod:`studybench.llm_judge.cache`: the on-disk verdict cache;
- :mod:`studybench.llm_judge.client`: :class:`LLMJudge`, the OpenAI-compatible client for any task.

:func:`llm_judge_inputs` builds the five inputs of one sub-problem's judgement; the runner never needs to
know what they are. The contamination audit's stage 3 is the same client with another task
(:data:`studybench.audit.contamination.DUPLICATE_TASK`).
"""

from __future__ import annotations

import re

from studybench.answers import strip_reasoning
from studybench.llm_judge.cache import LLMVerdictCache, cache_key, default_cache_root
from studybench.llm_judge.client import (
    FINAL_VERDICTS,
    LLMJudge,
    LLMJudgeConfigError,
    LLMJudgeInputs,
    LLMJudgeStats,
    LLMVerdict,
    judge_id,
)
from studybench.llm_judge.parse import MalformedReply, ParsedVerdict, parse_verdict, strip_judge_reasoning
from studybench.llm_judge.prompt import (
    DEFAULT_TEMPLATE,
    FORMAT_REMINDER,
    PLACEHOLDERS,
    LLMJudgeTemplate,
    LLMJudgeTemplateError,
)
from studybench.llm_judge.task import ANSWER_EQUIVALENCE_TASK, LLMJudgeTask
from studybench.records import SubProblemRef

__all__ = [
    "ANSWER_EQUIVALENCE_TASK",
    "DEFAULT_TEMPLATE",
    "FINAL_VERDICTS",
    "FORMAT_REMINDER",
    "LLMJudgeConfigError",
    "MAX_SOLUTION_CHARS",
    "PLACEHOLDERS",
    "LLMJudgeInputs",
    "LLMJudgeStats",
    "LLMJudgeTask",
    "LLMJudgeTemplate",
    "LLMJudge",
    "LLMVerdict",
    "MalformedReply",
    "ParsedVerdict",
    "LLMJudgeTemplateError",
    "LLMVerdictCache",
    "cache_key",
    "default_cache_root",
    "llm_judge_inputs",
    "judge_id",
    "parse_verdict",
    "strip_judge_reasoning",
]

MAX_SOLUTION_CHARS = 60_000
"""Longest student solution sent to the judge; a longer one keeps its first 20,000 and last 40,000
characters (the final answer is at the end) around a truncation note."""

_TYPE_NAMES = {
    "NV": "numerical value",
    "EX": "expression",
    "EQ": "equation",
    "TUP": "tuple of answers",
    "IN": "interval",
    "MC": "multiple choice",
    "TF": "true/false",
    "QL": "answer in words",
    "ALT": "alternatives, any one suffices",
}


def _numbered(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return "\n".join(f"({i}) {x}" for i, x in enumerate(items, 1))


def _truncate(text: str) -> str:
    if len(text) <= MAX_SOLUTION_CHARS:
        return text
    head, tail = 20_000, 40_000
    cut = len(text) - head - tail
    return f"{text[:head]}\n\n[... {cut:,} characters omitted ...]\n\n{text[-tail:]}"


_FENCE = re.compile(r"<(/?)(student_solution|student_answers)", re.IGNORECASE)


def _defang(text: str) -> str:
    """Student text that cannot close or open the template's ``<student_...>`` fences."""
    return _FENCE.sub(lambda m: f"<{m.group(1)}\u200b{m.group(2)}", text)


def llm_judge_inputs(ref: SubProblemRef, completion: str, extracted: list[str]) -> LLMJudgeInputs:
    """The judge inputs for sub-problem ``ref`` answered by ``completion``.

    Args:
        ref: the sub-problem (its parent's stem and its own text make ``problem``).
        completion: the student's reply for this turn; ``<think>`` reasoning is removed, a reply
            over :data:`MAX_SOLUTION_CHARS` is shortened in the middle, and ``<student_solution>`` /
            ``<student_answers>`` tags inside it get a zero-width space so they cannot close the
            template's fences.
        extracted: the answers extracted from the reply's ``Final Answer:`` line (may be empty).

    Returns:
        :class:`LLMJudgeInputs` (the reference answers carry the answer type and, for TUP/ALT, the
        type sequence; several answers are numbered (1), (2), ...).
    """
    parent, sub = ref.parent, ref.sub
    stem = parent.stem.strip()
    text = sub.problem.strip()
    problem = "\n\n".join(x for x in (stem, text if text != stem else "") if x) or "(no problem text)"
    at = sub.answer_type.value
    kind = f"{at} ({_TYPE_NAMES.get(at, at)})"
    if sub.type_sequence:
        kind += f"; slots: {sub.type_sequence_str}"
    reference_answers = f"Answer type: {kind}\n{_numbered(list(sub.boxes))}"
    solution = strip_reasoning(completion or "")
    student_answers = _numbered(list(extracted)) if extracted else "(no final answer was extracted)"
    return LLMJudgeInputs(
        problem=problem,
        reference_solution=sub.solution.strip() or "(no reference solution)",
        reference_answers=reference_answers,
        student_solution=_defang(_truncate(solution)) if solution.strip() else "(empty reply)",
        student_answers=_defang(student_answers),
    )
