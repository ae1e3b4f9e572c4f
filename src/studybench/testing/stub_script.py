"""Scripts for the stub server: replies, reply scripts and injectable faults (see :mod:`studybench.testing.stub_server`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_REPLY", "FAULT_KINDS", "Fault", "Reply", "ReplyFn", "Script", "conversation_turn", "message_text"]

#: Default reply template: turn ``i`` (0-based) of a conversation answers ``\\boxed{i}``.
DEFAULT_REPLY = "Stub reasoning for turn {turn}.\nFinal Answer: \\boxed{{turn}}"

# --------------------------------------------------------------------------------------------------
# Replies and scripts
# --------------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """One assistant reply.

    Attributes:
        content: ``choices[0].message.content``.
        reasoning: sent as ``choices[0].message.reasoning_content`` (vLLM's reasoning parser) when
            not ``None``.
        finish_reason: ``choices[0].finish_reason``.
        usage: the reply's ``usage`` object: ``"auto"`` (the default) counts about four characters a
            token, with cached-prompt and reasoning details; anything else is sent as it is (``None``
            sends ``"usage": null``, as a server that reports none), to test what clients make of it.
    """

    content: str
    reasoning: str | None = None
    finish_reason: str = "stop"
    usage: Any = "auto"

    @classmethod
    def coerce(cls, value: Reply | str | dict[str, Any]) -> Reply:
        """Build a reply from a string (the content), a dict of the fields, or a reply.

        Raises:
            TypeError: for any other type.
        """
        if isinstance(value, Reply):
            return value
        if isinstance(value, str):
            return cls(content=value)
        if isinstance(value, dict):
            return cls(
                content=str(value.get("content", "")),
                reasoning=value.get("reasoning"),
                finish_reason=str(value.get("finish_reason", "stop")),
                usage=value.get("usage", "auto"),
            )
        raise TypeError(f"cannot make a Reply from {type(value).__name__}")


#: A reply function: the parsed request body in, the reply (or just its content) out.
ReplyFn = Callable[[dict[str, Any]], "Reply | str"]


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def conversation_turn(body: dict[str, Any]) -> tuple[int, str]:
    """``(turn, last_user_text)`` of a chat request: turn = number of user messages - 1 (>= 0)."""
    messages = body.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = message_text(users[-1].get("content")) if users else ""
    return max(len(users) - 1, 0), last


def _fill(text: str | None, ctx: dict[str, str]) -> str | None:
    """Replace the placeholders ``{turn}``, ``{turn1}``, ``{seed}``, ``{model}`` (plain text, not format)."""
    if text is None or "{" not in text:
        return text
    for key, val in ctx.items():
        text = text.replace("{" + key + "}", val)
    return text


@dataclass
class Script:
    """A declarative reply function (JSON-serialisable, so it also drives a subprocess server).

    The reply to a request is chosen as follows, with ``turn`` = number of user messages - 1:

    1. the first of ``rules`` whose ``match`` regex is found in the last user message;
    2. else ``turns[turn]`` (the last entry repeats for later turns) when ``turns`` is non-empty;
    3. else ``default``.

    A chosen reply is a string (the content) or a dict with ``content``, ``reasoning``,
    ``finish_reason``. Placeholders ``{turn}`` (0-based), ``{turn1}`` (1-based), ``{seed}`` and
    ``{model}`` are replaced by plain substitution, so LaTeX braces need no escaping:
    ``"Final Answer: \\\\boxed{{turn1}}"`` answers ``\\boxed{1}`` on the first turn. When ``think`` is set,
    the content is prefixed with ``<think>THINK</think>\\n``; when ``reasoning`` is set and the reply
    has none, it is sent as ``reasoning_content``.

    ``faults`` are installed when a server starts with this script: each a :class:`Fault` dict plus
    one of ``"at": N`` (request number N, 0-based), ``"match": REGEX`` (requests whose last user
    message matches; optional ``"times"``), or neither (a queue for the next requests; optional
    ``"times"``).
    """

    turns: list[str | dict[str, Any]] = field(default_factory=list)
    rules: list[dict[str, Any]] = field(default_factory=list)
    default: str = DEFAULT_REPLY
    think: str | None = None
    reasoning: str | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._compiled = [(re.compile(str(r["match"])), r["reply"]) for r in self.rules]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Script:
        """Build a script from its JSON form (the dataclass fields).

        Raises:
            ValueError: unknown keys or a non-object.
        """
        if not isinstance(data, dict):
            raise ValueError("a stub script must be a JSON object")
        known = {"turns", "rules", "default", "think", "reasoning", "faults"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown stub script keys: {sorted(unknown)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (inverse of :meth:`from_dict`)."""
        return {
            "turns": self.turns,
            "rules": self.rules,
            "default": self.default,
            "think": self.think,
            "reasoning": self.reasoning,
            "faults": self.faults,
        }

    def __call__(self, body: dict[str, Any]) -> Reply:
        turn, last = conversation_turn(body)
        chosen: Any = None
        for pattern, reply in self._compiled:
            if pattern.search(last):
                chosen = reply
                break
        if chosen is None:
            chosen = self.turns[min(turn, len(self.turns) - 1)] if self.turns else self.default
        reply = Reply.coerce(chosen)
        ctx = {
            "turn": str(turn),
            "turn1": str(turn + 1),
            "seed": str(body.get("seed")),
            "model": str(body.get("model")),
        }
        content = _fill(reply.content, ctx) or ""
        reasoning = _fill(reply.reasoning, ctx)
        if self.think is not None:
            content = f"<think>{_fill(self.think, ctx)}</think>\n{content}"
        if reasoning is None and self.reasoning is not None:
            reasoning = _fill(self.reasoning, ctx)
        return Reply(content=content, reasoning=reasoning, finish_reason=reply.finish_reason)


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------

FAULT_KINDS = ("status", "slow", "drop", "malformed", "hang")


@dataclass
class Fault:
    """A fault to inject into one request.

    Attributes:
        kind: ``"status"`` (answer HTTP ``status`` with an OpenAI-style error body, with a
            ``Retry-After: retry_after`` header when set), ``"slow"`` (answer normally after
            ``delay`` seconds), ``"drop"`` (close the connection without a response, after
            ``delay`` seconds), ``"malformed"`` (HTTP 200 with a truncated JSON body), ``"hang"`` (never
            answer: the connection stays open, as a server that accepts connections and is stuck).
        status: HTTP status for ``"status"``.
        retry_after: seconds for the ``Retry-After`` header (``"status"`` only); may be fractional.
        delay: seconds to wait before acting (all kinds; the point of ``"slow"``).
        message: error message for ``"status"``.

    Raises:
        ValueError: an unknown kind or a negative delay.
    """

    kind: str
    status: int = 500
    retry_after: float | None = None
    delay: float = 0.0
    message: str = "injected fault"

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")
        if self.delay < 0:
            raise ValueError("fault delay must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "retry_after": self.retry_after,
            "delay": self.delay,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fault:
        keys = ("kind", "status", "retry_after", "delay", "message")
        return cls(**{k: data[k] for k in keys if k in data})
