"""What to evaluate: :class:`EvalSpec`, validated once, for the CLI and for Python code alike.

An :class:`EvalSpec` names the test set (a split name, a file, or an in-memory
:class:`~studybench.datasets.Dataset`), the selection, the model and how to reach it, the sampling,
the method artefacts, k and the seeds, and the verifier (rule settings; the LLM judge of
``rule+llm``). :func:`studybench.evaluate.run_eval` runs it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from studybench.datasets import Dataset
from studybench.llm_judge import LLMJudgeSpec
from studybench.models import (
    DEFAULT_LIVENESS_TIMEOUT,
    MIN_COMPLETION_TOKENS,
    PRESETS,
    REFERENCE_MODES,
    ChatBackend,
    ReferenceBackend,
    SamplingParams,
)
from studybench.secrets import env_name_problem
from studybench.store import check_labels

__all__ = ["EvalError", "EvalSpec", "parse_parent_slice"]


class EvalError(ValueError):
    """An evaluation that cannot run as specified (bad setting, input file or run directory).

    Attributes:
        field: the :class:`EvalSpec` field at fault, when one is (the CLI names its flag).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class EvalSpec(BaseModel):
    """One evaluation (docs/protocol.md sections 2-3), as ``studybench eval`` takes it.

    Attributes:
        split: ``"application"``, ``"transfer"`` or a path to a test-set JSON file.
        dataset: an already loaded test set (overrides ``split``; e.g. made with
            :meth:`~studybench.datasets.Dataset.from_parents`).
        data_dir: directory holding the official files (default ``$STUDYBENCH_DATA``, then the fetch cache).
        parent_slice: parents ``"START:STOP"`` of the file order (a Python slice; also accepted as ``slice``,
            the CLI's ``--slice``).
        limit: only the first ``limit`` parents (after every other selection step).
        parent_ids: only these parents (``source/year/source_problem_id``; the CLI's ``--parent`` /
            ``--parents FILE``).
        exclude_ids: never these parents (``--exclude`` / ``--exclude-file``).
        sample: a seeded random sample of this many parents (``--sample``), drawn with ``sample_seed``,
            stratified by ``stratify`` (``"source"`` or ``"problem_type"``) when given. The order of
            the steps: :mod:`studybench.evaluate.selection`.
        errata: ``"official"`` (the golds as published: the paper's numbers; the report counts the
            attempts on errata items), ``"apply"`` (score with the corrected golds of
            :mod:`studybench.errata`; a parent holding an unanswerable sub-problem is left out) or
            ``"exclude"`` (leave out every parent holding an erratum).
        model: model name at the endpoint, or ``"reference"`` for the offline gold replay.
        backend: ``"auto"`` (reference when ``model == "reference"``), ``"openai"`` or ``"reference"``.
        base_url: OpenAI-compatible endpoint (default ``$OPENAI_BASE_URL``), e.g. ``vllm serve``'s.
        api_key_env: environment variable holding the API key (never stored).
        reference_mode: ``"gold"`` or ``"solution"`` (the reference backend only).
        preset: sampling preset (``"paper"``, ``"greedy"``, ``"none"``); the fields below override it.
        temperature, top_p, top_k, min_p, presence_penalty, repetition_penalty: sampling.
        max_tokens: the completion budget of a turn (tokens the model may write), always.
        context_budget: the cap on prompt + completion of a turn (the paper preset: 32768; ``0``: no cap,
            overriding the preset's). The completion limit sent is ``min(max_tokens, context_budget -
            estimated prompt)``.
        min_completion_tokens: the floor on that limit: a ``max_tokens`` or ``context_budget`` below it
            is refused here, a selection whose prompts leave less is refused by
            :func:`~studybench.evaluate.prepare_eval`, and a later turn whose grown conversation leaves
            less is not sent (it fails, naming the numbers).
        thinking: send ``chat_template_kwargs.enable_thinking`` (Qwen3).
        concurrency: requests in flight.
        request_timeout: seconds per HTTP request before it is retried.
        max_retries: retries per turn on 429, 5xx, timeouts and dropped connections.
        max_consecutive_failures: stop the run (saving what is done) after this many turns in a row
            failed because the endpoint could not be reached; 0: never stop.
        liveness_timeout: while requests are in flight and unanswered, the endpoint's model list is
            probed; when the probes too get no answer for this many seconds the endpoint counts as
            hung and the run stops as for a dead endpoint (a slow server that answers the probe is
            never cut); 0: never probe. Applies to the LLM judge's endpoint too.
        system_prompt, playbook, guidance: method artefact files (GEPA/EvoSkill, ACE, hints).
        playbook_max_tokens: the most built-in tokens the (cleaned) playbook may hold; 0: no cap.
        ignore_unmatched_guidance: run even when guidance entries match no sub-problem of the test
            set (by default such entries are an error naming each with its nearest real keys).
        k: attempts per parent and seed (Par@k, Sub@k).
        seeds: the run seeds, each a full set of k attempts (the paper uses three).
        verifier_mode: ``"rule"`` (reward-safe, never calls an LLM), ``"rule+llm"`` (needs ``judge``),
            or ``None``: rule+llm with a judge, else the run's previous mode, else rule.
        verify_timeout: hard wall-clock seconds per symbolic verification.
        verify_workers: rule verifier worker processes (``None``: one per CPU, at most 8).
        retry_timeouts: verify again turns whose rule verdict timed out with the same settings (by
            default such a verdict is final until the settings change, e.g. a larger ``verify_timeout``).
        judge: the LLM judge for rule rejections (leaderboard mode).
        only_generate: generate turns; do not verify or report.
        only_verify: verify stored turns and report; generate nothing (needs no endpoint).
        pricing: a pricing file (JSON or TOML; :mod:`studybench.costs`): the report gets a ``cost`` block
            and the run directory records the prices (``pricing.json``) for its later reports.
        max_cost: stop the run cleanly once its requests cost this much (needs prices); resumable.
        max_total_tokens: stop the run cleanly once its requests spent this many prompt + completion
            tokens (every request stored in the run directory counts); resumable. Neither limit is
            part of the run's identity: raise it and run again to continue
            (:mod:`studybench.evaluate.stopping`).
        labels: free ``key: value`` strings stored in the manifest (method, layer, base model, ...;
            see :func:`studybench.store.check_labels`); a resumed run merges them into its own (later wins).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, populate_by_name=True)

    split: str = "transfer"
    dataset: Dataset | None = None
    data_dir: Path | None = None
    parent_slice: str | None = Field(None, validation_alias=AliasChoices("parent_slice", "slice"))
    limit: int | None = Field(None, ge=1)
    parent_ids: list[str] | None = Field(None, max_length=100_000)
    exclude_ids: list[str] = Field(default_factory=list, max_length=100_000)
    sample: int | None = Field(None, ge=1)
    sample_seed: int = Field(0, ge=0, le=2**63 - 1)
    stratify: Literal["source", "problem_type"] | None = None
    errata: Literal["official", "apply", "exclude"] = "official"
    model: str = "reference"
    backend: Literal["auto", "openai", "reference"] = "auto"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    reference_mode: str = "gold"
    preset: str = "none"
    temperature: float | None = Field(None, ge=0.0, le=100.0, allow_inf_nan=False)
    top_p: float | None = Field(None, ge=1e-9, le=1.0, allow_inf_nan=False)
    top_k: int | None = Field(None, ge=-1, le=1_000_000)
    min_p: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0, allow_inf_nan=False)
    repetition_penalty: float | None = Field(None, ge=1e-9, le=100.0, allow_inf_nan=False)
    max_tokens: int | None = Field(None, ge=1, le=10_000_000)
    context_budget: int | None = Field(None, ge=0, le=10_000_000)
    min_completion_tokens: int = Field(MIN_COMPLETION_TOKENS, ge=1, le=10_000_000)
    thinking: bool | None = None
    concurrency: int = Field(64, ge=1, le=100_000)
    request_timeout: float = Field(600.0, ge=1e-3, le=86_400.0, allow_inf_nan=False)
    max_retries: int = Field(6, ge=0, le=1000)
    max_consecutive_failures: int = Field(8, ge=0, le=1_000_000)
    liveness_timeout: float = Field(DEFAULT_LIVENESS_TIMEOUT, ge=0.0, le=86_400.0, allow_inf_nan=False)
    system_prompt: Path | None = None
    playbook: Path | None = None
    playbook_max_tokens: int = Field(12_000, ge=0, le=10_000_000)
    guidance: Path | None = None
    ignore_unmatched_guidance: bool = False
    k: int = Field(8, ge=1, le=100_000)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1, max_length=10_000)
    verifier_mode: Literal["rule", "rule+llm"] | None = None
    verify_timeout: float = Field(5.0, ge=1e-3, le=86_400.0, allow_inf_nan=False)
    verify_workers: int | None = Field(None, ge=1, le=1024)
    retry_timeouts: bool = False
    judge: LLMJudgeSpec | None = None
    only_generate: bool = False
    only_verify: bool = False
    pricing: Path | None = None
    max_cost: float | None = Field(None, ge=0.0, allow_inf_nan=False)
    max_total_tokens: int | None = Field(None, ge=0)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> dict[str, str]:
        return check_labels(v)

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("seeds must be distinct")
        return v

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"must be one of {', '.join(PRESETS)}")
        return v

    @field_validator("reference_mode")
    @classmethod
    def _reference_mode(cls, v: str) -> str:
        if v not in REFERENCE_MODES:
            raise ValueError(f"must be one of {', '.join(REFERENCE_MODES)}")
        return v

    @field_validator("parent_slice")
    @classmethod
    def _slice(cls, v: str | None) -> str | None:
        parse_parent_slice(v)
        return v

    @field_validator("parent_ids", "exclude_ids")
    @classmethod
    def _ids(cls, v: list[str] | None) -> list[str] | None:
        for x in v or []:
            if not x.strip() or not x.isprintable() or len(x) > 1000:
                raise ValueError(f"a parent id is a printable source/year/source_problem_id, got {x[:80]!r}")
        return None if v is None else list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _consistent(self) -> EvalSpec:
        if self.only_generate and self.only_verify:
            raise ValueError("only_generate and only_verify exclude each other (--only-generate, --only-verify)")
        if self.stratify is not None and self.sample is None:
            raise EvalError("stratify: a stratified sample needs its size (sample, --sample N)", "stratify")
        return self

    @model_validator(mode="after")
    def _key_env(self) -> EvalSpec:
        problem = env_name_problem(self.api_key_env)
        if problem is not None:
            raise EvalError(f"api_key_env: {problem}", "api_key_env")
        return self

    @model_validator(mode="after")
    def _budgets(self) -> EvalSpec:
        s, floor = self.sampling(), self.min_completion_tokens
        if self.uses_reference:
            return self
        if s.max_tokens is not None and s.max_tokens < floor:
            raise EvalError(f"max_tokens: the completion budget {s.max_tokens} is below the floor of {floor} tokens "
                            "(--min-completion-tokens); completions would be cut off: raise --max-tokens, or lower "
                            "--min-completion-tokens if such short answers are what you want", "max_tokens")
        if s.context_budget is not None and s.context_budget < floor:
            raise EvalError(f"context_budget: the prompt + completion cap {s.context_budget} is below the floor of "
                            f"{floor} completion tokens (--min-completion-tokens)", "context_budget")
        return self

    def __init__(self, **values: Any) -> None:
        """Validate the settings (see the class docstring for each).

        Raises:
            EvalError: the first invalid setting, with ``field`` naming it (``EvalError`` is a ``ValueError``).
        """
        try:
            super().__init__(**values)
        except ValidationError as e:
            err = e.errors()[0]
            original = (err.get("ctx") or {}).get("error")
            if isinstance(original, EvalError):  # raised by a model validator, which names its own field
                raise EvalError(str(original), original.field) from None
            loc = [str(x) for x in err.get("loc", ())]
            field = loc[0] if loc else None
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            shown = (f", got {err['input']!r}" if loc and "input" in err and not isinstance(err["input"], dict)
                     and "got " not in msg else "")
            raise EvalError(f"{'.'.join(loc)}: {msg}{shown}" if loc else msg, field) from None

    @classmethod
    def create(cls, **values: Any) -> EvalSpec:
        """Validate settings into a spec (the same as ``EvalSpec(**values)``).

        Raises:
            EvalError: the first invalid setting, with ``field`` naming it.
        """
        return cls(**values)

    @property
    def uses_reference(self) -> bool:
        """Whether the offline reference backend answers (``backend="reference"``, or ``"auto"`` with model reference)."""
        return self.backend == "reference" or (self.backend == "auto" and self.model == "reference")

    def sampling(self) -> SamplingParams:
        """The preset with every non-``None`` sampling field applied (``context_budget=0`` removes the cap)."""
        params = PRESETS[self.preset].merged(
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, min_p=self.min_p,
            presence_penalty=self.presence_penalty, repetition_penalty=self.repetition_penalty,
            max_tokens=self.max_tokens, enable_thinking=self.thinking,
        )
        if self.context_budget is not None:  # 0: no cap, even under a preset that has one
            params.context_budget = self.context_budget or None
        return params

    def make_backend(self) -> ChatBackend:
        """The chat backend this spec describes (no request is made).

        Raises:
            EvalError: the openai backend without an endpoint (``base_url`` nor ``$OPENAI_BASE_URL``).
        """
        if self.uses_reference:
            return ReferenceBackend(self.reference_mode, errata=self.errata)
        from studybench.models.openai_backend import OpenAIBackend

        url = self.base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise EvalError("base_url is required for the openai backend (--base-url or $OPENAI_BASE_URL), "
                            "e.g. http://127.0.0.1:8000/v1 from `vllm serve`", "base_url")
        return OpenAIBackend(self.model, url, self.sampling(), concurrency=self.concurrency,
                             request_timeout=self.request_timeout, max_retries=self.max_retries,
                             api_key_env=self.api_key_env, min_completion_tokens=self.min_completion_tokens,
                             liveness_timeout=self.liveness_timeout)


_SLICE = re.compile(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*")


def parse_parent_slice(text: str | None) -> tuple[int, int | None]:
    """``"START:STOP"`` as a (start, stop) pair; ``None`` or ``""`` is the whole file.

    Raises:
        ValueError: not of the form ``START:STOP`` (either part may be empty or negative).
    """
    if not text:
        return 0, None
    m = _SLICE.fullmatch(text)
    if not m:
        raise ValueError(f"must look like START:STOP (e.g. 10:20), got {text!r}")
    a, b = m.group(1), m.group(2)
    return (int(a) if a else 0), (int(b) if b else None)
