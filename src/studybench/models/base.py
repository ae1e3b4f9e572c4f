"""The chat-backend seam: one request in, one completion out (DESIGN.md ``models/``).

A backend turns a :class:`ChatRequest` (the conversation for one turn of an attempt, built by
:mod:`studybench.protocol`) into a :class:`ChatResult`. Backends never raise for a failed turn:
they return a result with ``error`` set, which the runner records as a failed turn (docs/protocol.md
section 2, "Errors").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from studybench.records import SubProblemRef

__all__ = [
    "MIN_COMPLETION_TOKENS",
    "PROMPT_ESTIMATE",
    "PRESETS",
    "ChatBackend",
    "ChatRequest",
    "ChatResult",
    "SamplingParams",
    "estimate_prompt_tokens",
]

MIN_COMPLETION_TOKENS = 256
"""The default floor on the completion budget of a turn: a request that would leave the model fewer
tokens than this is never sent (see :attr:`SamplingParams.context_budget`)."""

#: Human-readable form of :func:`estimate_prompt_tokens`, recorded in :meth:`~studybench.models.openai_backend.OpenAIBackend.describe`.
PROMPT_ESTIMATE = "ceil(chars/3) + 4 per message"



def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Estimate the prompt's token count: ``ceil(total_chars / 3) + 4 * len(messages)``.

    ``total_chars`` counts the text of every message's ``content`` (string or list of text parts);
    the 4 per message stand for the chat template's role markers. Deliberately pessimistic (common
    BPE tokenizers average about 3.5-4 characters per token on English prose with LaTeX), so that
    ``prompt + completion`` stays within the budget. Returns a non-negative int.
    """
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    return math.ceil(chars / 3) + 4 * len(messages)


@dataclass
class SamplingParams:
    """Sampling parameters of docs/protocol.md section 2, sent the way vLLM accepts them.

    Two token budgets, each ``None`` when not limited:

    - ``max_tokens`` is always the **completion** budget (the tokens the model may write);
    - ``context_budget`` caps **prompt + completion**, as the reference scripts do (the paper preset:
      32768), so the completion limit sent is ``context_budget`` minus the prompt's token count
      (estimated by the backend), and at most ``max_tokens`` when both are set.

    ``None`` means "do not send" (the server's default applies when neither budget is set).
    """

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int | None = None
    context_budget: int | None = None
    enable_thinking: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def merged(self, **overrides: Any) -> SamplingParams:
        """A copy with every non-``None`` override applied."""
        d = self.to_dict()
        d.update({k: v for k, v in overrides.items() if v is not None})
        return SamplingParams(**d)


PRESETS: dict[str, SamplingParams] = {
    # The paper's preset for open-weight models (docs/protocol.md section 2).
    "paper": SamplingParams(
        temperature=1.0,
        top_p=0.95,
        top_k=20,
        min_p=0.0,
        presence_penalty=1.5,
        repetition_penalty=1.0,
        context_budget=32768,
        enable_thinking=True,
    ),
    # Deterministic-ish decoding for debugging and closed API models.
    "greedy": SamplingParams(temperature=0.0, max_tokens=8192),
    # Send nothing: the endpoint's defaults apply.
    "none": SamplingParams(),
}


@dataclass
class ChatRequest:
    """One turn to generate.

    Attributes:
        messages: OpenAI chat messages (``role``/``content`` dicts), system message first.
        seed: per-request sampling seed (derived from run seed, attempt and sub-problem), or ``None``.
        ref: the sub-problem being asked (offline backends such as ``reference`` answer from it);
            ``None`` for requests that are not a protocol turn (the LLM judge's).
        turn_index: index of the sub-problem within its parent.
        sampling: per-request overrides: every non-``None`` field replaces the backend's own for this
            request only (the test-set construction stages ask one teacher at several temperatures).
    """

    messages: list[dict[str, str]]
    seed: int | None
    ref: SubProblemRef | None
    turn_index: int
    sampling: SamplingParams | None = None


@dataclass
class ChatResult:
    """The outcome of one turn.

    ``completion`` is the assistant text (reasoning returned separately by the server, such as
    vLLM's ``reasoning_content``, goes to ``reasoning``). ``error`` is set, and ``completion`` is
    empty, when the turn failed after all retries. ``latency_s`` is wall-clock seconds including
    retries; ``usage`` holds token counts as reported by the server.
    """

    completion: str
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    latency_s: float = 0.0
    error: str | None = None
    reasoning: str | None = None
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ChatBackend(Protocol):
    """What the runner needs from a model backend."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Generate one turn. Must not raise for model/transport failures (set ``error``)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description for the run manifest (no secrets)."""
        ...
