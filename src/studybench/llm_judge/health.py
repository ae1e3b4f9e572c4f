"""Is the judge answering in its format? The unjudgeable alarm (docs/protocol.md section 6).

A judge that does not answer in its task's format makes every verdict ``unjudgeable``: a server
started without the reasoning parser its model needs (the verdict stays inside the reasoning), the
wrong chat template, or a token budget that cuts every reply. Such verdicts count as incorrect and
are never cached (:mod:`studybench.llm_judge.cache`), but a run full of them is not a result.

:class:`UnjudgeableTally` counts the verdicts of one batch (an LLM pass of ``studybench judge`` or
``studybench eval``, stage 3 of the contamination audit). When more than
:data:`UNJUDGEABLE_ALARM_SHARE` of them are unjudgeable, and at least
:data:`UNJUDGEABLE_ALARM_MIN`, :meth:`UnjudgeableTally.alarm` gives the warning those commands print
before they exit with status 1: the count, the likely causes (with the specific one where the
replies show it: ``finish_reason`` ``length``, an unclosed ``<think>``, empty replies, inputs refused
by the endpoint) and one sample reply.

A pass need not ask every candidate to know that: :attr:`UnjudgeableTally.clearly_alarming` holds
once at least :data:`UNJUDGEABLE_STOP_MIN` verdicts are in and the lower end of the Wilson score
interval for the unjudgeable share (:data:`UNJUDGEABLE_STOP_Z`, one-sided 99.5%) is above
:data:`UNJUDGEABLE_ALARM_SHARE`: the alarm is then all but certain whatever the remaining
candidates give, and the LLM pass stops asking (:func:`studybench.evaluate.add_llm_verdicts_to_scope`).
A judge that never answers in its format is stopped after 10 verdicts (lower bound 60%); one at 50%
unjudgeable after about 12; one at 30% after about 100; one near the threshold only after thousands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from studybench.llm_judge.client import LLMVerdict

__all__ = [
    "SAMPLE_REPLY_CHARS",
    "UNJUDGEABLE_ALARM_MIN",
    "UNJUDGEABLE_ALARM_SHARE",
    "UNJUDGEABLE_STOP_MIN",
    "UNJUDGEABLE_STOP_Z",
    "UnjudgeableTally",
    "wilson_lower_bound",
]

UNJUDGEABLE_ALARM_SHARE = 0.2
"""The alarm sounds when more than this share of a batch's verdicts are unjudgeable ..."""
UNJUDGEABLE_ALARM_MIN = 5
"""... and at least this many (a handful of odd inputs in a small batch is not a broken judge)."""
SAMPLE_REPLY_CHARS = 200
"""The sample reply shown in the alarm is cut to this many characters."""
UNJUDGEABLE_STOP_MIN = 10
"""A pass may stop asking for being clearly over the alarm only after this many verdicts ..."""
UNJUDGEABLE_STOP_Z = 2.576
"""... and when the Wilson lower bound at this z (one-sided 99.5%) of the unjudgeable share is above the alarm."""


def wilson_lower_bound(k: int, n: int, z: float = UNJUDGEABLE_STOP_Z) -> float | None:
    """The lower end of the Wilson score interval for a share of ``k`` in ``n``.

    Args:
        k: the successes (here: unjudgeable verdicts).
        n: the trials (final verdicts).
        z: the normal quantile (2.576: one-sided 99.5%).

    Returns:
        The bound in [0, 1]; ``None`` when ``n`` is 0.
    """
    if n <= 0:
        return None
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))

_REFUSED = "the endpoint refused"


@dataclass
class UnjudgeableTally:
    """Unjudgeable verdicts among the final verdicts of one batch.

    Attributes:
        verdicts: final verdicts (TRUE, FALSE, unjudgeable; cached and shared ones included;
            transport errors are not counted).
        unjudgeable: of those, ``unjudgeable``.
        refused: unjudgeable because the endpoint refused the inputs (HTTP 400/413/422).
        truncated: unjudgeable whose last reply stopped at the token budget (``finish_reason`` ``length``).
        unclosed_think: unjudgeable whose last reply ended inside an unclosed ``<think>`` block.
        empty: unjudgeable whose last reply had no content.
        sample: the first malformed reply (cut to :data:`SAMPLE_REPLY_CHARS`), else ``None``.
        sample_error: why that reply is malformed (else why the first refused request was refused).
    """

    verdicts: int = 0
    unjudgeable: int = 0
    refused: int = 0
    truncated: int = 0
    unclosed_think: int = 0
    empty: int = 0
    sample: str | None = None
    sample_error: str | None = None

    def add(self, v: LLMVerdict) -> None:
        """Count one verdict.

        Args:
            v: a verdict of :meth:`studybench.llm_judge.LLMJudge.judge`.
        """
        if v.verdict not in ("TRUE", "FALSE", "unjudgeable"):
            return  # a transport error says nothing about the format
        self.verdicts += 1
        if v.verdict != "unjudgeable":
            return
        self.unjudgeable += 1
        err = v.error or ""
        if err.startswith(_REFUSED):
            self.refused += 1
            if self.sample is None and self.sample_error is None:
                self.sample_error = err
            return
        self.truncated += v.finish_reason == "length"
        self.unclosed_think += "unclosed <think>" in err
        self.empty += not v.reply.strip()
        if self.sample is None:
            reply = v.reply
            self.sample = reply if len(reply) <= SAMPLE_REPLY_CHARS else reply[:SAMPLE_REPLY_CHARS] + "..."
            self.sample_error = err or None

    @property
    def share(self) -> float | None:
        """Unjudgeable share of the verdicts (``None`` without verdicts)."""
        return self.unjudgeable / self.verdicts if self.verdicts else None

    @property
    def alarming(self) -> bool:
        """More than :data:`UNJUDGEABLE_ALARM_SHARE` unjudgeable and at least :data:`UNJUDGEABLE_ALARM_MIN`; or
        every verdict of the batch unjudgeable, at least two (a small run judged by a broken judge)."""
        share = self.share
        if share is None:
            return False
        everything = self.unjudgeable >= 2 and self.unjudgeable == self.verdicts
        return everything or (share > UNJUDGEABLE_ALARM_SHARE and self.unjudgeable >= UNJUDGEABLE_ALARM_MIN)

    @property
    def clearly_alarming(self) -> bool:
        """At least :data:`UNJUDGEABLE_STOP_MIN` verdicts and :data:`UNJUDGEABLE_ALARM_MIN` unjudgeable, and the
        unjudgeable share's Wilson lower bound (:func:`wilson_lower_bound`) above :data:`UNJUDGEABLE_ALARM_SHARE`:
        asking the remaining candidates would not lift the alarm."""
        if self.verdicts < UNJUDGEABLE_STOP_MIN or self.unjudgeable < UNJUDGEABLE_ALARM_MIN:
            return False
        low = wilson_lower_bound(self.unjudgeable, self.verdicts)
        return low is not None and low > UNJUDGEABLE_ALARM_SHARE

    def stop_reason(self) -> str:
        """Why a pass stopped asking (for :attr:`clearly_alarming`): the counts and the bound, one sentence.

        Returns:
            e.g. ``"10 of the first 10 verdicts are unjudgeable (100%; with 99.5% confidence more than 60%, above
            the alarm at 20%)"``.
        """
        low = wilson_lower_bound(self.unjudgeable, self.verdicts) or 0.0
        return (f"{self.unjudgeable} of the first {self.verdicts} verdicts are unjudgeable ({(self.share or 0.0):.0%}; "
                f"with 99.5% confidence more than {low:.0%}, above the alarm at {UNJUDGEABLE_ALARM_SHARE:.0%})")

    def alarm(self, judge_model: str, *, max_tokens: int | None = None) -> str | None:
        """The warning for an alarming batch (one paragraph), else ``None``.

        Args:
            judge_model: the judge model, named in the message.
            max_tokens: the judge's token budget per reply (``None``: the server's default).

        Returns:
            The count and share, the likely causes (the specific ones the replies show first) and a
            sample reply; ``None`` when :attr:`alarming` is false.
        """
        if not self.alarming:
            return None
        share = self.share or 0.0
        parts = [f"{self.unjudgeable} of {self.verdicts} judge verdicts ({share:.0%}) are unjudgeable "
                 f"(the alarm is at more than {UNJUDGEABLE_ALARM_SHARE:.0%}): the judge {judge_model} is not answering "
                 "in the format its prompt asks for, so these verdicts count as incorrect; they were not cached."]
        budget = f"--judge-max-tokens, now {max_tokens}" if max_tokens is not None else "--judge-max-tokens; now the server's default"
        if self.truncated:
            parts.append(f"{self.truncated} of the replies stopped at the token budget (finish_reason=length): "
                         f"raise the judge's max tokens ({budget}).")
        if self.unclosed_think:
            parts.append(f"{self.unclosed_think} replies end inside an unclosed <think> block: the reply was cut, or the "
                         "server leaves the model's reasoning in the content (start it with a reasoning parser, "
                         "e.g. vLLM --reasoning-parser).")
        if self.empty:
            parts.append(f"{self.empty} replies had no content: the verdict may be left inside the reasoning "
                         "(reasoning_content), or the reply was cut before it.")
        if self.refused:
            parts.append(f"{self.refused} requests were refused by the endpoint (HTTP 400/413/422), e.g. inputs longer "
                         "than the judge's context (the server's --max-model-len).")
        if self.refused < self.unjudgeable:
            parts.append("Likely causes: the server needs a reasoning parser so that the verdict is not inside the "
                         "reasoning; the wrong chat template for the model; a token budget per reply too small, so "
                         f"replies are cut ({budget}).")
        if self.sample is not None:
            parts.append(f"Sample reply: {self.sample!r}" + (f" ({self.sample_error})" if self.sample_error else ""))
        elif self.sample_error:
            parts.append(f"Sample: {self.sample_error}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The counts as a JSON-ready dict.

        Returns:
            The attributes, plus ``share`` and ``alarming``.
        """
        return {
            "verdicts": self.verdicts, "unjudgeable": self.unjudgeable, "share": self.share, "alarming": self.alarming,
            "refused": self.refused, "truncated": self.truncated, "unclosed_think": self.unclosed_think,
            "empty": self.empty, "sample": self.sample, "sample_error": self.sample_error,
        }
