"""The offline ``reference`` backend: answers every sub-problem from the data itself.

Mode ``gold`` (default) replies with the sub-problem's reference solution followed by a
``Final Answer:`` line holding the gold's boxes, so a run exercises the whole pipeline and checks
that the verifier accepts every gold against itself (expected: Par@k = Sub@k = 100).

Mode ``solution`` replies with the solution followed by a ``Final Answer:`` line holding the
solution's *own* last boxes where the solution has any (most Transfer solutions do, most
Application ones do not) and the gold's otherwise; ``ChatResult.extra["answer_from"]`` records
which. This checks that the data agrees with itself.

Both replay the golds of the parents they are given: with ``--errata apply`` these are the corrected
golds (:mod:`studybench.errata`), so the gold replay still scores 100. Its description then names the
setting (``errata: apply``), so a run replayed with the official golds is never resumed with the
corrected ones (its stored completions would hold the official answers).
"""

from __future__ import annotations

import time
from typing import Any

from studybench.answers import extract_answers, find_boxes
from studybench.models.base import ChatRequest, ChatResult

__all__ = ["REFERENCE_MODES", "ReferenceBackend"]

REFERENCE_MODES = ("gold", "solution")


class ReferenceBackend:
    """Replay the data's own answers (see module docstring). Never fails, needs no network."""

    name = "reference"

    def __init__(self, mode: str = "gold", errata: str = "official") -> None:
        if mode not in REFERENCE_MODES:
            raise ValueError(f"reference mode must be one of {', '.join(REFERENCE_MODES)}, got {mode!r}")
        self.mode = mode
        self.errata = errata

    async def complete(self, request: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        sub = request.ref.sub
        gold = sub.boxes
        answers = gold
        source = "gold"
        if self.mode == "solution" and find_boxes(sub.solution):
            answers = extract_answers(sub.solution, len(gold), strip_think=False)
            source = "solution"
        final = "Final Answer: " + ", ".join(f"\\boxed{{{a}}}" for a in answers)
        body = sub.solution.strip()
        completion = f"{body}\n\n{final}" if body else final
        return ChatResult(
            completion=completion,
            finish_reason="stop",
            usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            latency_s=time.perf_counter() - t0,
            extra={"answer_from": source},
        )

    async def aclose(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        desc: dict[str, Any] = {"backend": "reference", "model": "reference", "mode": self.mode}
        if self.errata == "apply":  # the replayed golds are the corrected ones (older runs: no key)
            desc["errata"] = "apply"
        return desc
