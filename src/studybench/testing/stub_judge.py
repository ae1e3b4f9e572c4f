"""A scripted LLM judge for the local stub server (tests, demos; never an evaluation run).

:func:`judge_reply_fn` turns a decision function into a stub-server reply function. The decision
function receives the five judge inputs read back from a prompt built with a shipped template
(:data:`studybench.llm_judge.JUDGE_TEMPLATES`: ``default`` or ``paper``) and returns ``True`` /
``False`` (answered in the two-section format the prompt asks for: ``## Verdict`` after the
justification, or the paper's ``## Equivalence Judgement`` first), a string (sent verbatim, e.g. a
malformed reply) or a :class:`~studybench.testing.stub_server.Reply`. Re-asks after a malformed
reply carry a format reminder as the last user message; ``on_reminder`` answers those (default:
the same decision).

Example::

    decide = lambda x: x["student_answers"] == x["reference_answers"].split("\\n", 1)[1]
    with start_stub_server(judge_reply_fn(decide)) as srv:
        judge = LLMJudge("stub-judge", srv.base_url)

:func:`duplicate_reply_fn` does the same for the contamination audit's stage 3
(:data:`studybench.audit.duplicates.DUPLICATE_TASK`): the decision function receives the training
and the evaluation text read back from the prompt (as clipped for the judge) and returns ``True`` /
``False`` (answered ``DUPLICATE: YES`` / ``NO`` after a one-line explanation), a string or a
:class:`~studybench.testing.stub_server.Reply`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from studybench.llm_judge.prompt import FORMAT_REMINDER
from studybench.llm_judge.templates import PAPER_FORMAT_REMINDER
from studybench.testing.stub_server import Reply

__all__ = [
    "SECTION_TITLES",
    "answers_of",
    "duplicate_reply_fn",
    "format_verdict",
    "judge_reply_fn",
    "read_duplicate_texts",
    "read_inputs",
]

SECTION_TITLES = {
    "problem": "### Problem",
    "reference_solution": "### Reference solution",
    "reference_answers": "### Reference final answer(s)",
    "student_solution": "### Student's full solution",
    "student_answers": "### Student's extracted final answer(s)",
}
_ENDS = ("Reply with exactly these two sections", "Now reply with the two sections")
_REMINDERS = (FORMAT_REMINDER, PAPER_FORMAT_REMINDER)
_PAPER_HEADING = "## Equivalence Judgement"


def read_inputs(prompt: str) -> dict[str, str]:
    """The five inputs of a prompt rendered from a shipped template (missing ones are ``""``)."""
    order = list(SECTION_TITLES.items())
    out: dict[str, str] = {}
    for i, (name, title) in enumerate(order):
        start = prompt.find(title + "\n")
        if start < 0:
            out[name] = ""
            continue
        start += len(title) + 1
        nxt = [prompt.find("\n\n" + t + "\n", start) for _, t in order[i + 1 :]] + [prompt.find("\n\n" + e, start) for e in _ENDS]
        ends = [e for e in nxt if e >= 0]
        text = prompt[start : min(ends) if ends else len(prompt)]
        tag = f"<{name}>\n"
        if text.startswith(tag) and text.endswith(f"\n</{name}>"):
            text = text[len(tag) : -len(f"\n</{name}>")]
        out[name] = text
    return out


def format_verdict(correct: bool, justification: str = "Scripted verdict.", *, paper: bool = False) -> str:
    """A well-formed two-section reply: ours, or with ``paper`` the paper's (``## Equivalence Judgement`` first)."""
    word = "TRUE" if correct else "FALSE"
    if paper:
        return f"## Equivalence Judgement\n{word}\n\n## Justification\n{justification}\n"
    return f"## Justification\n{justification}\n## Verdict\n{word}\n"


def judge_reply_fn(
    decide: Callable[[dict[str, str]], bool | str | Reply],
    on_reminder: Callable[[dict[str, str], int], bool | str | Reply] | None = None,
) -> Callable[[dict[str, Any]], Reply]:
    """A stub-server reply function acting as an LLM judge (see the module docstring).

    ``on_reminder(inputs, n)`` answers the n-th re-ask (1-based) after malformed replies.
    """

    def reply(body: dict[str, Any]) -> Reply:
        msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        users = [m for m in msgs if m.get("role") == "user"]
        first = str(users[0].get("content", "")) if users else ""
        inputs = read_inputs(first)
        reminders = sum(1 for m in users if str(m.get("content", "")) in _REMINDERS)
        out = on_reminder(inputs, reminders) if reminders and on_reminder is not None else decide(inputs)
        if isinstance(out, Reply):
            return out
        if isinstance(out, bool):
            return Reply(format_verdict(out, paper=_PAPER_HEADING in first))
        return Reply(str(out))

    return reply


def answers_of(section: str) -> list[str]:
    """Numbered answers ``(1) a`` ... of an answers section (one unnumbered answer stays whole)."""
    lines = [ln for ln in section.splitlines() if not ln.startswith("Answer type:")]
    text = "\n".join(lines).strip()
    parts = re.split(r"(?m)^\(\d+\) ", text)
    return [p.strip() for p in parts if p.strip()] if len(parts) > 1 else [text]


_TRAIN_MARK = "TRAINING TEXT:\n<<<\n"
_EVAL_MARK = "\n>>>\n\nEVALUATION TEXT:\n<<<\n"
_END_MARK = "\n>>>\n\nExplain briefly"


def read_duplicate_texts(prompt: str) -> tuple[str, str]:
    """The training and evaluation texts of a prompt rendered from the audit's builtin stage-3 template.

    Returns:
        ``(train, eval)`` as sent (clipped); ``("", "")`` when the prompt is not of that shape.
    """
    a = prompt.find(_TRAIN_MARK)
    b = prompt.rfind(_EVAL_MARK)
    c = prompt.rfind(_END_MARK)
    if a < 0 or b < a or c < b:
        return "", ""
    return prompt[a + len(_TRAIN_MARK) : b], prompt[b + len(_EVAL_MARK) : c]


def duplicate_reply_fn(
    decide: Callable[[str, str], bool | str | Reply],
    on_reminder: Callable[[str, str, int], bool | str | Reply] | None = None,
) -> Callable[[dict[str, Any]], Reply]:
    """A stub-server reply function acting as the audit's stage-3 judge (see the module docstring).

    ``on_reminder(train, eval, n)`` answers the n-th re-ask (1-based) after malformed replies.
    """
    from studybench.audit.duplicates import DUPLICATE_REMINDER

    def reply(body: dict[str, Any]) -> Reply:
        msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        users = [m for m in msgs if m.get("role") == "user"]
        train, evl = read_duplicate_texts(str(users[0].get("content", "")) if users else "")
        reminders = sum(1 for m in users if str(m.get("content", "")) == DUPLICATE_REMINDER)
        out = on_reminder(train, evl, reminders) if reminders and on_reminder is not None else decide(train, evl)
        if isinstance(out, Reply):
            return out
        if isinstance(out, bool):
            return Reply(f"Scripted comparison.\nDUPLICATE: {'YES' if out else 'NO'}")
        return Reply(str(out))

    return reply
