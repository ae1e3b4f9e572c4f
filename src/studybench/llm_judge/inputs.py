"""The five inputs of one answer judgement (docs/protocol.md section 6), built from a sub-problem and a reply."""

from __future__ import annotations

import re

from studybench.answers import strip_reasoning
from studybench.llm_judge.client import LLMJudgeInputs
from studybench.records import SubProblemRef

__all__ = ["MAX_SOLUTION_CHARS", "llm_judge_inputs"]

MAX_SOLUTION_CHARS = 60_000
"""Longest student solution sent to the judge; a longer one keeps its first 20,000 and last 40,000
characters (the final answer is at the end) around a truncation note."""

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
    kind = f"{sub.answer_type.value} ({sub.answer_type.info.judge_label})"  # the label of the answer type table
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
