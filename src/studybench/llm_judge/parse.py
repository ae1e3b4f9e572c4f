"""Strict parsing of a judge reply (docs/protocol.md section 6).

The reply must consist of exactly two sections, in either order, and nothing but whitespace
outside them::

    ## Justification
    One sentence.
    ## Verdict
    TRUE

The verdict section may also be named ``Equivalence Judgement`` (or ``Judgment``), as the paper's
judge prompt asks (appendix F; our template ``paper``)::

    ## Equivalence Judgement
    TRUE

    ## Justification
    One or two sentences.

A section starts with a header line: optional ``#`` marks, optional ``**`` emphasis, the section
name (case-insensitive), an optional colon; the header line may carry the section's text after the
name (``Verdict: FALSE``). The verdict section must hold the single word TRUE or FALSE
(case-insensitive; surrounding ``*``, backticks and a final full stop are tolerated) and nothing
else; the justification must be non-empty. Anything else is malformed: a missing or repeated
section, text outside the sections, a verdict of ``TRUE or FALSE``, both words, or any other
word. There is deliberately no "first TRUE anywhere" fallback.

Judge reasoning is removed first (:func:`strip_judge_reasoning`, which is
:func:`studybench.answers.strip_reasoning` made strict): closed ``<think>...</think>`` blocks, and
everything up to a stray ``</think>``. A reply that ends inside an unclosed ``<think>`` is
malformed: a verdict could hide in the text that would be dropped.

The parser of another task (e.g. the contamination audit's ``DUPLICATE: YES|NO``) is any function
``str -> ParsedVerdict`` that raises :class:`MalformedReply`; see :class:`studybench.llm_judge.LLMJudgeTask`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from studybench.answers import strip_reasoning

__all__ = ["MalformedReply", "ParsedVerdict", "parse_verdict", "strip_judge_reasoning"]

_HEADER = re.compile(
    r"^\s*(?P<hash>#{1,6}\s*)?(?:\*\*|__)?\s*(?P<name>justification|verdict|equivalence[ \t]+judge?ment)\s*(?P<emph>\*\*|__)?\s*"
    r"(?P<colon>:)?\s*(?:\*\*|__)?[ \t]*(?P<rest>.*?)\s*$",
    re.IGNORECASE,
)
_VERDICT_WORD = re.compile(r"^[\s*_`]*(true|false)[\s*_`]*\.?[\s*_`]*$", re.IGNORECASE)
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_SENTINEL = "\x00|end"
_MAX_REPLY = 200_000


class MalformedReply(ValueError):
    """A judge reply that does not follow its task's format (the message says why)."""


@dataclass(frozen=True)
class ParsedVerdict:
    """A well-formed judge reply.

    Attributes:
        correct: the boolean verdict (TRUE for the answer judge; YES for the duplicate task).
        justification: the judge's stated reason (whitespace collapsed).
    """

    correct: bool
    justification: str


def strip_judge_reasoning(reply: str) -> str:
    """``reply`` without ``<think>`` reasoning, strictly.

    The removal is :func:`studybench.answers.strip_reasoning` (closed blocks; everything up to a
    stray ``</think>``), with the tags matched case-insensitively; what it would drop after an
    unclosed ``<think>`` is refused instead of dropped, since a verdict could hide there.

    Args:
        reply: a judge reply (message content).

    Returns:
        The visible text, stripped of surrounding whitespace.

    Raises:
        MalformedReply: the reply ends inside an unclosed ``<think>`` block.
    """
    text = _THINK_TAG.sub(lambda m: f"<{m.group(1)}think>", reply)
    visible = strip_reasoning(text)
    # strip_reasoning drops everything after an unclosed <think>, so a sentinel appended to the reply
    # survives unless that happened (the sentinel holds no tag and no whitespace)
    if strip_reasoning(text + _SENTINEL) == visible:
        raise MalformedReply("the reply ends inside an unclosed <think> block")
    return visible


def parse_verdict(reply: str) -> ParsedVerdict:
    """Parse a judge reply strictly (see the module docstring).

    Args:
        reply: the judge's message content (reasoning returned separately by the server is not
            part of it).

    Returns:
        :class:`ParsedVerdict`.

    Raises:
        MalformedReply: with a short reason, for any reply outside the format.
    """
    if not isinstance(reply, str) or not reply.strip():
        raise MalformedReply("empty reply")
    if len(reply) > _MAX_REPLY:
        raise MalformedReply(f"reply of {len(reply):,} characters is too long")
    text = strip_judge_reasoning(reply)
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m and (m.group("hash") or m.group("emph") or m.group("colon") or not m.group("rest")):
            name = "justification" if m.group("name").lower() == "justification" else "verdict"
            if name in sections:
                raise MalformedReply(f"the {name} section appears more than once")
            sections[name] = [m.group("rest")] if m.group("rest") else []
            current = name
            continue
        if current is None:
            if line.strip():
                raise MalformedReply("text before the first section")
            continue
        sections[current].append(line)
    for name in ("justification", "verdict"):
        if name not in sections:
            raise MalformedReply(f"no {name} section")
    verdict_text = "\n".join(sections["verdict"]).strip()
    m = _VERDICT_WORD.match(verdict_text)
    if not m:
        shown = verdict_text if len(verdict_text) <= 40 else verdict_text[:37] + "..."
        raise MalformedReply(f"the verdict section must hold only TRUE or FALSE, got {shown!r}")
    justification = " ".join("\n".join(sections["justification"]).split())
    if not justification:
        raise MalformedReply("the justification section is empty")
    return ParsedVerdict(m.group(1).lower() == "true", justification)
