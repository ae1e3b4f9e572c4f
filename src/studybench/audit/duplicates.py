"""Stage 3 of the contamination audit: the LLM duplicate judge (optional).

**Stage 3, LLM judge** (:func:`judge_pairs`, optional): every candidate of stage 1 or 2 is shown to
an OpenAI-compatible model with :data:`JUDGE_PROMPT`. *Duplicate* means the same underlying problem:
the same physical situation asking for the same quantities, even when reworded, reordered,
translated or with different numerical values, or the training text posing one part of a multi-part
evaluation problem. The reply must end with ``DUPLICATE: YES`` or ``DUPLICATE: NO``
(:func:`parse_duplicate_verdict`); a malformed reply is re-asked up to 2 times, then the verdict is
``None`` (status ``unjudgeable``). The client is the LLM judge's (:class:`studybench.llm_judge.LLMJudge`
with :data:`DUPLICATE_TASK`), so stage 3 has its transport (retries with backoff and
``Retry-After``; HTTP 401/403/404 stop the audit with :class:`studybench.llm_judge.LLMJudgeConfigError`;
HTTP 400/413/422 make the pair ``unjudgeable``), its sharing of identical requests in flight and its
on-disk verdict cache (same directory as the answer judge; the template digest keeps the keys apart;
``unjudgeable`` is never cached), and its unjudgeable alarm (:class:`studybench.llm_judge.UnjudgeableTally`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from studybench.audit.common import ProgressFn
from studybench.llm_judge import (
    LLMJudge,
    LLMJudgeTask,
    LLMVerdict,
    LLMVerdictCache,
    MalformedReply,
    ParsedVerdict,
    UnjudgeableTally,
    strip_judge_reasoning,
)

__all__ = [
    "DUPLICATE_REMINDER",
    "DUPLICATE_TASK",
    "JUDGE_PROMPT",
    "JudgeVerdict",
    "duplicate_judge",
    "judge_pairs",
    "parse_duplicate_reply",
    "parse_duplicate_verdict",
]

JUDGE_PROMPT = """You are auditing a training set for contamination with an evaluation set.
Decide whether the TRAINING TEXT and the EVALUATION TEXT pose the same problem.

Answer YES when they describe the same physical situation and ask for the same quantities, even if
the wording, the order, the language, the notation or the numerical values differ, or when the
training text poses one part of a multi-part evaluation problem.
Answer NO when they only share a topic, a method or a formula, or ask different questions about a
similar setup.

TRAINING TEXT:
<<<
{train}
>>>

EVALUATION TEXT:
<<<
{eval}
>>>

Explain briefly, then end your reply with exactly one final line:
DUPLICATE: YES
or
DUPLICATE: NO"""

DUPLICATE_REMINDER = (
    "Your reply did not end with the required final line. Reply again and end with exactly one line "
    "'DUPLICATE: YES' or 'DUPLICATE: NO'."
)
"""The format reminder sent after a reply without a verdict line."""

_JUDGE_TEXT_LIMIT = 6000
_JUSTIFICATION_LIMIT = 2000
_VERDICT_LINE = re.compile(r"^\**\s*DUPLICATE\s*:\s*\**\s*(YES|NO)\s*\**\.?$", re.IGNORECASE)


def parse_duplicate_verdict(reply: str) -> ParsedVerdict:
    """Parse a stage-3 reply strictly: the parser of :data:`DUPLICATE_TASK`.

    Judge reasoning is removed first (:func:`studybench.llm_judge.strip_judge_reasoning`: closed
    ``<think>`` blocks, everything up to a stray ``</think>``). The last non-empty line must then be
    the verdict line ``DUPLICATE: YES`` or ``DUPLICATE: NO`` (case-insensitive; Markdown bold and a
    final period tolerated).

    Args:
        reply: the judge's message content.

    Returns:
        :class:`~studybench.llm_judge.ParsedVerdict`: ``correct`` is True for YES; the justification
        is the text before the verdict line (whitespace collapsed, at most 2,000 characters).

    Raises:
        MalformedReply: an empty reply, an unclosed ``<think>``, no verdict line at the end, or a
            contradicting verdict line before it.
    """
    if not isinstance(reply, str):
        raise MalformedReply("empty reply")
    text = strip_judge_reasoning(reply)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise MalformedReply("empty reply")
    m = _VERDICT_LINE.match(lines[-1])
    if not m:
        raise MalformedReply("the last line is not 'DUPLICATE: YES' or 'DUPLICATE: NO'")
    verdict = m.group(1).upper() == "YES"
    for ln in lines[:-1]:
        other = _VERDICT_LINE.match(ln)
        if other and (other.group(1).upper() == "YES") != verdict:
            raise MalformedReply("contradicting DUPLICATE lines")
    return ParsedVerdict(verdict, " ".join(" ".join(lines[:-1]).split())[:_JUSTIFICATION_LIMIT])


def parse_duplicate_reply(reply: str) -> bool | None:
    """The verdict of a stage-3 reply: True (``DUPLICATE: YES``), False (``NO``) or None (malformed).

    Args:
        reply: the judge's message content.

    Returns:
        The verdict of :func:`parse_duplicate_verdict`, or ``None`` where it raises.
    """
    try:
        return parse_duplicate_verdict(reply).correct
    except MalformedReply:
        return None


DUPLICATE_TASK = LLMJudgeTask(
    name="duplicate",
    template=JUDGE_PROMPT,
    placeholders=("train", "eval"),
    parse=parse_duplicate_verdict,
    format_reminder=DUPLICATE_REMINDER,
)
"""Stage 3 as an LLM judge task: :data:`JUDGE_PROMPT` with placeholders ``{train}`` and ``{eval}``
(each text clipped to 6,000 characters), :func:`parse_duplicate_verdict`, :data:`DUPLICATE_REMINDER`."""


def _clip(text: str, limit: int = _JUDGE_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with a note (the judge client cleans surrogates)."""
    return text if len(text) <= limit else text[:limit] + "\n[... truncated]"


@dataclass
class JudgeVerdict:
    """One stage-3 verdict.

    Attributes:
        verdict: True (duplicate), False, or None (no verdict).
        status: ``yes``, ``no``, ``unjudgeable`` (malformed after the re-asks, or inputs refused by
            the endpoint) or ``error`` (transport failure after the retries; not cached).
        requests: HTTP requests made for it, retries included (0 from the cache or shared).
        detail: why there is no verdict.
        cached: served from the verdict cache.
        shared: answered by a concurrent request for identical texts.
    """

    verdict: bool | None
    status: str
    requests: int
    detail: str | None = None
    cached: bool = False
    shared: bool = False


def _audit_verdict(v: LLMVerdict) -> JudgeVerdict:
    if v.verdict in ("TRUE", "FALSE"):
        yes = v.verdict == "TRUE"
        return JudgeVerdict(yes, "yes" if yes else "no", v.requests, None, v.cached, v.shared)
    return JudgeVerdict(None, v.verdict, v.requests, v.error, v.cached, v.shared)


def duplicate_judge(
    *,
    model: str,
    base_url: str | None,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int = 8,
    request_timeout: float = 300.0,
    max_retries: int = 3,
    parse_retries: int = 2,
    max_tokens: int | None = None,
    cache: LLMVerdictCache | None = None,
    read_cache: bool = True,
    backoff_initial: float = 1.0,
    backoff_max: float = 60.0,
) -> LLMJudge:
    """The stage-3 client: :class:`studybench.llm_judge.LLMJudge` with :data:`DUPLICATE_TASK`.

    Args:
        model, base_url, api_key_env, concurrency, request_timeout, max_retries, parse_retries, max_tokens, cache, read_cache, backoff_initial, backoff_max: as for :class:`LLMJudge`
            (``cache=None`` turns the verdict cache off).

    Returns:
        The client (close it with ``await judge.aclose()``).

    Raises:
        ValueError: invalid transport settings.
    """
    return LLMJudge(
        model,
        base_url,
        task=DUPLICATE_TASK,
        cache=cache,
        parse_retries=parse_retries,
        concurrency=concurrency,
        request_timeout=request_timeout,
        max_retries=max_retries,
        max_tokens=max_tokens,
        api_key_env=api_key_env,
        backoff_initial=backoff_initial,
        backoff_max=backoff_max,
        read_cache=read_cache,
    )


def judge_pairs(
    pairs: Sequence[tuple[str, str]],
    *,
    progress: ProgressFn | None = None,
    tally: UnjudgeableTally | None = None,
    **client: Any,
) -> list[JudgeVerdict]:
    """Stage 3 (paper 2.3): ask an LLM whether each ``(train text, eval text)`` is the same problem.

    The client is :func:`duplicate_judge` (the LLM judge's, with :data:`DUPLICATE_TASK`): temperature
    0, ``concurrency`` requests in flight, retries with backoff and ``Retry-After`` on transient
    failures, the key read from the environment variable ``api_key_env``, a malformed reply re-asked
    up to ``parse_retries`` times, identical pairs in flight sharing one request, and final verdicts
    read from and written to ``cache``. Each text is clipped to 6,000 characters.

    Args:
        pairs: ``(training text, evaluation text)`` per candidate.
        progress: optional ``(label, done, total)`` callback.
        tally: counts the verdicts' unjudgeable ones (for the alarm when the judge is not answering
            in its format).
        **client: the keyword arguments of :func:`duplicate_judge` (``model``, ``base_url``,
            ``api_key_env``, ``concurrency``, ``request_timeout``, ``max_retries``, ``parse_retries``,
            ``max_tokens``, ``cache``, ``read_cache``, ``backoff_initial``, ``backoff_max``).

    Returns:
        One :class:`JudgeVerdict` per pair, in order; model and transport failures are verdicts
        (status ``unjudgeable`` or ``error``), not exceptions.

    Raises:
        LLMJudgeConfigError: the endpoint answered HTTP 401, 403 or 404 (wrong key, URL or model);
            verdicts obtained before are in the cache.
        ValueError: invalid transport settings.
        TypeError: an unknown keyword argument.
    """
    judge = duplicate_judge(**client)

    async def main() -> list[JudgeVerdict]:
        done = 0

        async def one(tt: str, et: str) -> JudgeVerdict:
            nonlocal done
            v = await judge.judge({"train": _clip(tt), "eval": _clip(et)})
            if tally is not None:
                tally.add(v)
            done += 1
            if progress:
                progress("stage 3: LLM judge", done, len(pairs))
            return _audit_verdict(v)

        tasks = [asyncio.ensure_future(one(tt, et)) for tt, et in pairs]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:  # e.g. LLMJudgeConfigError: no other request can succeed
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            await judge.aclose()

    if progress:
        progress("stage 3: LLM judge", 0, len(pairs))
    return asyncio.run(main())
