"""What :class:`~studybench.models.openai_backend.OpenAIBackend` sends: the sampling, the completion budget, the JSON body.

The completion limit sent is ``min(max_tokens, cap - estimate)``, where the cap on prompt +
completion is ``context_budget`` and the server's context length, the smaller (the backend's module
docstring, "Budget" and "Context length"), and the estimate is :func:`estimate_prompt_tokens`; a
turn whose limit falls below ``min_completion_tokens`` is not sent (:meth:`RequestBuilder.budget_problem`).
"""

from __future__ import annotations

from typing import Any

from studybench.models.base import PROMPT_ESTIMATE, ChatRequest, SamplingParams, estimate_prompt_tokens

__all__ = ["RequestBuilder"]


class RequestBuilder:
    """The request side of :class:`~studybench.models.openai_backend.OpenAIBackend` (a mixin).

    It reads the backend's ``model``, ``sampling``, ``server_context`` and ``min_completion_tokens``.
    """

    model: str
    sampling: SamplingParams
    server_context: int | None
    min_completion_tokens: int

    # -- request ---------------------------------------------------------------------------------------

    def sampling_for(self, request: ChatRequest | None) -> SamplingParams:
        """The backend's sampling with the request's overrides (:attr:`ChatRequest.sampling`) applied."""
        if request is None or request.sampling is None:
            return self.sampling
        return self.sampling.merged(**request.sampling.to_dict())

    def completion_budget(self, messages: list[dict[str, Any]], sampling: SamplingParams | None = None) -> int | None:
        """The completion limit (``max_tokens``) to send for ``messages``.

        Args:
            messages: the conversation of the turn.
            sampling: the request's sampling (default: the backend's).

        Returns:
            ``None`` when neither budget is set (nothing sent); else ``max_tokens``, or
            ``context_budget - estimate_prompt_tokens(messages)``, or the smaller of the two. It may be
            below :attr:`min_completion_tokens` (even negative): :meth:`budget_problem` says so.
        """
        s = self.sampling if sampling is None else sampling
        limits = [s.max_tokens] if s.max_tokens is not None else []
        cap = self.context_cap(s)
        if cap is not None:
            limits.append(cap - estimate_prompt_tokens(messages))
        return min(limits) if limits else None

    def context_cap(self, sampling: SamplingParams | None = None) -> int | None:
        """The cap on prompt + completion: ``context_budget`` and :attr:`server_context`, the smaller.

        The server's context caps a turn only when a budget is sent at all (with neither
        ``max_tokens`` nor ``context_budget`` the server decides within its own context).

        Args:
            sampling: the request's sampling (default: the backend's).

        Returns:
            The cap in tokens, or ``None`` when there is none.
        """
        s = self.sampling if sampling is None else sampling
        cap = s.context_budget
        if self.server_context is not None and (cap is not None or s.max_tokens is not None):
            cap = self.server_context if cap is None else min(cap, self.server_context)
        return cap

    def budget_problem(self, messages: list[dict[str, Any]], sampling: SamplingParams | None = None) -> str | None:
        """Why a turn with ``messages`` must not be sent (its completion limit is below the floor), or ``None``.

        Args:
            messages: the conversation of the turn.
            sampling: the request's sampling (default: the backend's).

        Returns:
            A one-line reason naming the numbers (completion limit, estimated prompt, context budget,
            floor), or ``None`` when the limit is at least :attr:`min_completion_tokens` or unset.
        """
        budget = self.completion_budget(messages, sampling)
        if budget is None or budget >= self.min_completion_tokens:
            return None
        s = self.sampling if sampling is None else sampling
        cap = self.context_cap(s)
        server = s.context_budget is None or (self.server_context is not None and cap == self.server_context < s.context_budget)
        what = f"the server's context length {cap}" if server else f"the context budget {cap}"
        if cap is not None and budget <= 0:
            fix = ("serve the model with a longer context (vllm serve --max-model-len)" if server
                   else "raise --context-budget if the server's context allows it")
            return (f"the prompt alone (~{estimate_prompt_tokens(messages)} tokens estimated, {PROMPT_ESTIMATE}) does "
                    f"not fit {what}: {fix}, or leave this problem out (--slice / --limit)")
        if cap is not None and (s.max_tokens is None or budget < s.max_tokens):
            fix = "serve the model with a longer context" if server else "raise --context-budget"
            return (f"completion budget {budget} tokens is below the floor of {self.min_completion_tokens}: the prompt "
                    f"(~{estimate_prompt_tokens(messages)} tokens estimated, {PROMPT_ESTIMATE}) leaves only {budget} of "
                    f"{what}; {fix} (or lower --min-completion-tokens)")
        return (f"completion budget {budget} tokens (--max-tokens) is below the floor of {self.min_completion_tokens}; "
                "raise --max-tokens (or lower --min-completion-tokens)")

    def build_payload(self, request: ChatRequest) -> dict[str, Any]:
        """The exact JSON body sent for ``request`` (only non-``None`` parameters; the request's sampling overrides applied)."""
        s = self.sampling_for(request)
        return self._payload(request, s, self.completion_budget(request.messages, s))

    def _payload(self, request: ChatRequest, s: SamplingParams, max_tokens: int | None) -> dict[str, Any]:
        """:meth:`build_payload` with the sampling and completion limit already worked out."""
        body: dict[str, Any] = {"model": self.model, "messages": request.messages}
        for key, value in (
            ("temperature", s.temperature),
            ("top_p", s.top_p),
            ("presence_penalty", s.presence_penalty),
            ("max_tokens", max_tokens),
            ("seed", request.seed),
            # vLLM extensions (the SDK's extra_body):
            ("top_k", s.top_k),
            ("min_p", s.min_p),
            ("repetition_penalty", s.repetition_penalty),
        ):
            if value is not None:
                body[key] = value
        if s.enable_thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": bool(s.enable_thinking)}
        return body
