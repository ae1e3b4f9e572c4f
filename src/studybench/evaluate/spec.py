"""What to evaluate: :class:`EvalSpec`, validated once, for the CLI and for Python code alike.

An :class:`EvalSpec` is composed of typed parts, each with a docstring per field and a ``merge()``:

- :class:`DataSpec` (``spec.data``): data and selection: the test set (a split name, a file, or an
  in-memory :class:`~studybench.datasets.Dataset`), the parents, the errata setting, k and the seeds;
- :class:`GenerationSpec` (``spec.generation``): backend and sampling: the model, how to reach it, how
  it samples;
- :class:`~studybench.costs.BudgetLimits` (``spec.budgets``): the prices and the token and cost limits;
- :class:`VerificationSpec` (``spec.verification``): the rule verifier's settings and the LLM judge of
  ``rule+llm``;
- :class:`ArtefactSpec` (``spec.artefacts``): the method artefacts (system prompt, playbook, guidance);

plus three flags of the whole run (``only_generate``, ``only_verify``, ``labels``).
:func:`studybench.evaluate.run_eval` runs it.

**Merging.** ``a.merge(b)`` (a spec or a part) keeps ``a`` and lays over it every field that was
*set* in ``b``: given to its constructor or as a key of a mapping, even when given the default value.
Fields ``b`` left at their defaults never override. The result is validated again.

**The flat form.** Before the parts, every setting was a keyword of ``EvalSpec`` itself. That form
still works: ``EvalSpec(split="transfer", model="reference", k=1)`` routes each keyword to its part
(:data:`FLAT_FIELDS`, :func:`route_flat`; :meth:`EvalSpec.from_flat` says so by name), flat names read
through (``spec.k``), and :meth:`EvalSpec.merge` takes them. Errors name the flat setting (``k: ...``),
as before (``model_copy(update=...)`` takes them too: it merges them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
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

from studybench.costs import BudgetLimits
from studybench.datasets import Dataset, DatasetError, load_split
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
from studybench.protocol import ArtefactError, Artefacts, load_artefacts
from studybench.secrets import env_name_problem
from studybench.store import check_labels

__all__ = [
    "FLAT_FIELDS",
    "PARTS",
    "ArtefactSpec",
    "BudgetLimits",
    "DataSpec",
    "EvalError",
    "EvalSpec",
    "GenerationSpec",
    "VerificationSpec",
    "parse_parent_slice",
    "route_flat",
]


class EvalError(ValueError):
    """An evaluation that cannot run as specified (bad setting, input file or run directory).

    Attributes:
        field: the :class:`EvalSpec` field at fault, when one is (the CLI names its flag).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class _Part(BaseModel):
    """A part of :class:`EvalSpec`: validated on its own; :meth:`merge` lays another over it."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, populate_by_name=True,
                              use_attribute_docstrings=True)

    def __init__(self, **values: Any) -> None:
        """Validate the part's fields (see each field's docstring).

        Raises:
            EvalError: the first invalid field, with ``field`` naming it.
        """
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise _eval_error(e) from None

    def merge(self, other: Any) -> Any:
        """This part with every field *set* in ``other`` taking ``other``'s value.

        A field is set when it was given (to the constructor, or as a key of a mapping), even when
        given its default; fields left at their defaults in ``other`` never override. The result is
        validated again.

        Args:
            other: a part of the same kind, or a mapping of its fields.

        Raises:
            EvalError: the merged part is invalid.
        """
        given = dict(other) if isinstance(other, Mapping) else {n: getattr(other, n) for n in other.model_fields_set}
        return type(self)(**{**{n: getattr(self, n) for n in self.model_fields_set}, **given})


class DataSpec(_Part):
    """Data and selection: the test set, which parents, their golds, and the attempts (k, seeds)."""

    split: str = "transfer"
    """``"application"``, ``"transfer"`` or a path to a test-set JSON file."""
    dataset: Dataset | None = None
    """An already loaded test set (overrides ``split``; e.g. made with
    :meth:`~studybench.datasets.Dataset.from_parents`)."""
    data_dir: Path | None = None
    """The directory holding the official files (default ``$STUDYBENCH_DATA``, then the fetch cache)."""
    parent_slice: str | None = Field(None, validation_alias=AliasChoices("parent_slice", "slice"))
    """Parents ``"START:STOP"`` of the file order (a Python slice; also accepted as ``slice``, the CLI's
    ``--slice``)."""
    limit: int | None = Field(None, ge=1)
    """Only the first ``limit`` parents (after every other selection step)."""
    parent_ids: list[str] | None = Field(None, max_length=100_000)
    """Only these parents (``source/year/source_problem_id``; the CLI's ``--parent`` / ``--parents FILE``)."""
    exclude_ids: list[str] = Field(default_factory=list, max_length=100_000)
    """Never these parents (``--exclude`` / ``--exclude-file``)."""
    sample: int | None = Field(None, ge=1)
    """A seeded random sample of this many parents (``--sample``). The order of the steps:
    :mod:`studybench.evaluate.selection`."""
    sample_seed: int = Field(0, ge=0, le=2**63 - 1)
    """The seed the sample is drawn with."""
    stratify: Literal["source", "problem_type"] | None = None
    """Stratify the sample by ``"source"`` or ``"problem_type"`` (needs ``sample``)."""
    errata: Literal["official", "apply", "exclude"] = "official"
    """``"official"`` (the golds as published: the paper's numbers; the report counts the attempts on
    errata items), ``"apply"`` (score with the corrected golds of :mod:`studybench.errata`; a parent
    holding an unanswerable sub-problem is left out) or ``"exclude"`` (leave out every parent holding an
    erratum)."""
    k: int = Field(8, ge=1, le=100_000)
    """Attempts per parent and seed (Par@k, Sub@k)."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1, max_length=10_000)
    """The run seeds, each a full set of k attempts (the paper uses three)."""

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("seeds must be distinct")
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
    def _stratified(self) -> DataSpec:
        if self.stratify is not None and self.sample is None:
            raise EvalError("stratify: a stratified sample needs its size (sample, --sample N)", "stratify")
        return self

    def load(self) -> Dataset:
        """The test set: ``dataset`` when given, else ``split`` found and loaded.

        Raises:
            EvalError: ``data_dir`` is not a directory, or the test set cannot be found or loaded.
        """
        if self.dataset is not None:
            return self.dataset
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            # an explicit directory is never replaced by $STUDYBENCH_DATA or the cache
            raise EvalError(f"data_dir: {self.data_dir} is not a directory", "data_dir")
        try:
            return load_split(self.split, self.data_dir)
        except DatasetError as e:
            raise EvalError(str(e), "split") from None


class GenerationSpec(_Part):
    """Backend and sampling: which model answers, how it is reached, and how it samples."""

    model: str = "reference"
    """The model name at the endpoint, or ``"reference"`` for the offline gold replay."""
    backend: Literal["auto", "openai", "reference"] = "auto"
    """``"auto"`` (reference when ``model == "reference"``), ``"openai"`` or ``"reference"``."""
    base_url: str | None = None
    """The OpenAI-compatible endpoint (default ``$OPENAI_BASE_URL``), e.g. ``vllm serve``'s."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the API key (never stored)."""
    reference_mode: str = "gold"
    """``"gold"`` or ``"solution"`` (the reference backend only)."""
    preset: str = "none"
    """The sampling preset (``"paper"``, ``"greedy"``, ``"none"``); the sampling fields below override it."""
    temperature: float | None = Field(None, ge=0.0, le=100.0, allow_inf_nan=False)
    """Sampling temperature."""
    top_p: float | None = Field(None, ge=1e-9, le=1.0, allow_inf_nan=False)
    """Nucleus sampling p."""
    top_k: int | None = Field(None, ge=-1, le=1_000_000)
    """Top-k sampling (vLLM ``extra_body``)."""
    min_p: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    """Min-p sampling (vLLM ``extra_body``)."""
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0, allow_inf_nan=False)
    """Presence penalty."""
    repetition_penalty: float | None = Field(None, ge=1e-9, le=100.0, allow_inf_nan=False)
    """Repetition penalty (vLLM ``extra_body``)."""
    max_tokens: int | None = Field(None, ge=1, le=10_000_000)
    """The completion budget of a turn (tokens the model may write), always."""
    context_budget: int | None = Field(None, ge=0, le=10_000_000)
    """The cap on prompt + completion of a turn (the paper preset: 32768; ``0``: no cap, overriding the
    preset's). The completion limit sent is ``min(max_tokens, context_budget - estimated prompt)``."""
    min_completion_tokens: int = Field(MIN_COMPLETION_TOKENS, ge=1, le=10_000_000)
    """The floor on that limit: a ``max_tokens`` or ``context_budget`` below it is refused here, a
    selection whose prompts leave less is refused by :func:`~studybench.evaluate.prepare_eval`, and a later
    turn whose grown conversation leaves less is not sent (it fails, naming the numbers)."""
    thinking: bool | None = None
    """Send ``chat_template_kwargs.enable_thinking`` (Qwen3)."""
    concurrency: int = Field(64, ge=1, le=100_000)
    """Requests in flight."""
    request_timeout: float = Field(600.0, ge=1e-3, le=86_400.0, allow_inf_nan=False)
    """Seconds per HTTP request before it is retried."""
    max_retries: int = Field(6, ge=0, le=1000)
    """Retries per turn on 429, 5xx, timeouts and dropped connections."""
    max_consecutive_failures: int = Field(8, ge=0, le=1_000_000)
    """Stop the run (saving what is done) after this many turns in a row failed because the endpoint
    could not be reached; 0: never stop."""
    liveness_timeout: float = Field(DEFAULT_LIVENESS_TIMEOUT, ge=0.0, le=86_400.0, allow_inf_nan=False)
    """While requests are in flight and unanswered, the endpoint's model list is probed; when the probes
    too get no answer for this many seconds the endpoint counts as hung and the run stops as for a dead
    endpoint (a slow server that answers the probe is never cut); 0: never probe. Applies to the LLM
    judge's endpoint too."""

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

    @model_validator(mode="after")
    def _key_env(self) -> GenerationSpec:
        problem = env_name_problem(self.api_key_env)
        if problem is not None:
            raise EvalError(f"api_key_env: {problem}", "api_key_env")
        return self

    @model_validator(mode="after")
    def _budgets(self) -> GenerationSpec:
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

    def make_backend(self, errata: str = "official") -> ChatBackend:
        """The chat backend this part describes (no request is made).

        Args:
            errata: the golds the reference backend replays (:attr:`DataSpec.errata`).

        Raises:
            EvalError: the openai backend without an endpoint (``base_url`` nor ``$OPENAI_BASE_URL``).
        """
        if self.uses_reference:
            return ReferenceBackend(self.reference_mode, errata=errata)
        from studybench.models.openai_backend import OpenAIBackend

        url = self.base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise EvalError("base_url is required for the openai backend (--base-url or $OPENAI_BASE_URL), "
                            "e.g. http://127.0.0.1:8000/v1 from `vllm serve`", "base_url")
        return OpenAIBackend(self.model, url, self.sampling(), concurrency=self.concurrency,
                             request_timeout=self.request_timeout, max_retries=self.max_retries,
                             api_key_env=self.api_key_env, min_completion_tokens=self.min_completion_tokens,
                             liveness_timeout=self.liveness_timeout)


class VerificationSpec(_Part):
    """Verification and judging: the rule verifier's settings and the LLM judge of ``rule+llm``."""

    verifier_mode: Literal["rule", "rule+llm"] | None = None
    """``"rule"`` (reward-safe, never calls an LLM), ``"rule+llm"`` (needs ``judge``), or ``None``: rule+llm
    with a judge, else the run's previous mode, else rule."""
    verify_timeout: float = Field(5.0, ge=1e-3, le=86_400.0, allow_inf_nan=False)
    """Hard wall-clock seconds per symbolic verification."""
    verify_workers: int | None = Field(None, ge=1, le=1024)
    """Rule verifier worker processes (``None``: one per CPU, at most 8)."""
    retry_timeouts: bool = False
    """Verify again turns whose rule verdict timed out with the same settings (by default such a verdict
    is final until the settings change, e.g. a larger ``verify_timeout``)."""
    judge: LLMJudgeSpec | None = None
    """The LLM judge for rule rejections (leaderboard mode)."""


class ArtefactSpec(_Part):
    """Method artefacts: the files that change what the model is told (GEPA/EvoSkill, ACE, hints)."""

    system_prompt: Path | None = None
    """A file replacing the system message (GEPA, EvoSkill)."""
    playbook: Path | None = None
    """A file appended to the default system message (ACE; cleaned of bullet ids and counters)."""
    playbook_max_tokens: int = Field(12_000, ge=0, le=10_000_000)
    """The most built-in tokens the (cleaned) playbook may hold; 0: no cap."""
    guidance: Path | None = None
    """JSON/JSONL hints joined on (source, year, source_problem_id, problem_id)."""
    ignore_unmatched_guidance: bool = False
    """Run even when guidance entries match no sub-problem of the test set (by default such entries are an
    error naming each with its nearest real keys)."""

    def load(self) -> Artefacts:
        """The artefacts read, checked and cleaned (:func:`studybench.protocol.load_artefacts`).

        Raises:
            EvalError: an unreadable or invalid artefact file.
        """
        try:
            return load_artefacts(self.system_prompt, self.playbook, self.guidance, self.playbook_max_tokens)
        except ArtefactError as e:
            raise EvalError(str(e), "artefacts") from None


PARTS: dict[str, type[BaseModel]] = {"data": DataSpec, "generation": GenerationSpec, "budgets": BudgetLimits,
                                     "verification": VerificationSpec, "artefacts": ArtefactSpec}
"""The parts of an :class:`EvalSpec`, by attribute name."""

FLAT_FIELDS: dict[str, str] = {
    **{name: part for part, cls in PARTS.items() for name in cls.model_fields},
    "slice": "data",
}
"""The flat keyword of each setting (as ``EvalSpec`` took them before it had parts) -> its part."""


class EvalSpec(BaseModel):
    """One evaluation (docs/protocol.md sections 2-3), as ``studybench eval`` takes it: five parts and three flags.

    Compose it of parts, or give every setting as a flat keyword (``EvalSpec(split="transfer",
    model="reference", k=1)``, the form from before the parts, which keeps working): each keyword is
    routed to its part (:data:`FLAT_FIELDS`). Flat names also read (``spec.k`` is ``spec.data.k``), and
    :meth:`merge` takes them (``spec.merge({"max_tokens": 4096})``).

    Attributes:
        data: data and selection (:class:`DataSpec`): test set, parents, errata setting, k and seeds.
        generation: backend and sampling (:class:`GenerationSpec`).
        budgets: token and cost limits and the prices (:class:`~studybench.costs.BudgetLimits`; see
            :mod:`studybench.evaluate.stopping`).
        verification: verification and judging (:class:`VerificationSpec`).
        artefacts: method artefacts (:class:`ArtefactSpec`).
        only_generate: generate turns; do not verify or report.
        only_verify: verify stored turns and report; generate nothing (needs no endpoint).
        labels: free ``key: value`` strings stored in the manifest (method, layer, base model, ...;
            see :func:`studybench.store.check_labels`); a resumed run merges them into its own (later wins).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True)

    data: DataSpec = Field(default_factory=DataSpec)
    """Data and selection: the test set, the parents, the errata setting, k and the seeds."""
    generation: GenerationSpec = Field(default_factory=GenerationSpec)
    """Backend and sampling: the model, how it is reached, how it samples."""
    budgets: BudgetLimits = Field(default_factory=BudgetLimits)
    """Budgets: the prices and the token and cost limits (resumable stops)."""
    verification: VerificationSpec = Field(default_factory=VerificationSpec)
    """Verification and judging: the rule verifier's settings and the LLM judge."""
    artefacts: ArtefactSpec = Field(default_factory=ArtefactSpec)
    """Method artefacts: system prompt, playbook and guidance files."""
    only_generate: bool = False
    """Generate turns; do not verify or report."""
    only_verify: bool = False
    """Verify stored turns and report; generate nothing (needs no endpoint)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free ``key: value`` strings stored in the manifest."""

    @model_validator(mode="before")
    @classmethod
    def _route_flat(cls, values: Any) -> Any:
        return route_flat(values) if isinstance(values, Mapping) else values

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> dict[str, str]:
        return check_labels(v)

    @model_validator(mode="after")
    def _consistent(self) -> EvalSpec:
        if self.only_generate and self.only_verify:
            raise ValueError("only_generate and only_verify exclude each other (--only-generate, --only-verify)")
        return self

    def __init__(self, **values: Any) -> None:
        """Validate the settings (see the class docstring and each part's fields).

        Raises:
            EvalError: the first invalid setting, with ``field`` naming it (``EvalError`` is a ``ValueError``).
        """
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise _eval_error(e) from None

    def __getattr__(self, name: str) -> Any:
        part = FLAT_FIELDS.get(name)
        if part is not None and name != "slice":
            return getattr(getattr(self, part), name)
        return super().__getattr__(name)  # type: ignore[misc]

    @classmethod
    def create(cls, **values: Any) -> EvalSpec:
        """Validate settings into a spec (the same as ``EvalSpec(**values)``; flat keywords or parts).

        Raises:
            EvalError: the first invalid setting, with ``field`` naming it.
        """
        return cls(**values)

    @classmethod
    def from_flat(cls, values: Mapping[str, Any] | None = None, /, **settings: Any) -> EvalSpec:
        """A spec from the flat settings of the form before the parts.

        Args:
            values: flat settings as a mapping (``{"split": ..., "k": ...}``).
            **settings: flat settings as keywords (``from_flat(split="transfer", k=1)``); they override
                ``values``.

        Raises:
            EvalError: an unknown or invalid setting.
        """
        return cls(**{**(values or {}), **settings})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> EvalSpec:
        """A copy; flat settings in ``update`` go through :meth:`merge` (pydantic's would split ``spec.k`` from ``spec.data.k``).

        Raises:
            EvalError: a flat setting in ``update`` is unknown or invalid.
        """
        if update and any(name not in type(self).model_fields for name in update):
            return self.merge(update)
        return super().model_copy(update=update, deep=deep)

    def merge(self, other: EvalSpec | Mapping[str, Any]) -> EvalSpec:
        """This spec with every setting *set* in ``other`` taking ``other``'s value, part by part.

        A setting is set when it was given (to a constructor, or as a key of a mapping; flat keywords
        count), even when given its default; settings left at their defaults never override. The result is
        validated again.

        Args:
            other: a spec, or a mapping of parts, flags and flat settings.

        Raises:
            EvalError: the merged spec is invalid.
        """
        if isinstance(other, EvalSpec):
            given: dict[str, Any] = {n: getattr(other, n) for n in other.model_fields_set}
        else:
            given = dict(route_flat(other))
        values: dict[str, Any] = {n: getattr(self, n) for n in self.model_fields_set if n not in PARTS}
        try:
            for name in PARTS:
                part = getattr(self, name)
                values[name] = part.merge(given.pop(name)) if name in given else part
        except ValidationError as e:  # the budgets part is pydantic's own
            raise _eval_error(e) from None
        return EvalSpec(**{**values, **given})

    @property
    def uses_reference(self) -> bool:
        """Whether the offline reference backend answers (:attr:`GenerationSpec.uses_reference`)."""
        return self.generation.uses_reference

    def sampling(self) -> SamplingParams:
        """The sampling sent (:meth:`GenerationSpec.sampling`)."""
        return self.generation.sampling()

    def make_backend(self) -> ChatBackend:
        """The chat backend this spec describes (:meth:`GenerationSpec.make_backend`; no request is made).

        Raises:
            EvalError: the openai backend without an endpoint (``base_url`` nor ``$OPENAI_BASE_URL``).
        """
        return self.generation.make_backend(self.data.errata)

    def to_record(self) -> dict[str, Any]:
        """The spec as JSON values, part by part (the manifest's ``config``).

        Paths are text; a test set given in memory is named, not held (the manifest's ``split``
        identifies it); the judge is its settings (no key is held: only the variable's name).
        """
        out = self.model_dump(mode="json", exclude={"data": {"dataset"}})
        out["data"]["dataset"] = None if self.data.dataset is None else self.data.dataset.name
        return out


def route_flat(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings with each flat keyword (:data:`FLAT_FIELDS`) moved into its part.

    A part given as well (an object or a mapping) keeps its own fields; the flat keywords are laid
    over it. Other keys (the flags, unknown names) are left where they are.
    """
    out: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        part = FLAT_FIELDS.get(key) if key not in PARTS else None
        if part is None:
            out[key] = value
        else:
            parts.setdefault(part, {})[key] = value
    for name, flat in parts.items():
        given = out.get(name)
        if isinstance(given, BaseModel):
            given = {n: getattr(given, n) for n in given.model_fields_set}
        out[name] = {**(given or {}), **flat}
    return out


def _eval_error(e: ValidationError) -> EvalError:
    """The first error of a validation, named by its flat setting (as before the parts)."""
    err = e.errors()[0]
    original = (err.get("ctx") or {}).get("error")
    if isinstance(original, EvalError):  # raised by a model validator, which names its own field
        return EvalError(str(original), original.field)
    loc = [str(x) for x in err.get("loc", ())]
    if len(loc) > 1 and loc[0] in PARTS:
        loc = loc[1:]
    field = loc[0] if loc else None
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    shown = (f", got {err['input']!r}" if loc and "input" in err and not isinstance(err["input"], dict)
             and "got " not in msg else "")
    return EvalError(f"{'.'.join(loc)}: {msg}{shown}" if loc else msg, field)


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
