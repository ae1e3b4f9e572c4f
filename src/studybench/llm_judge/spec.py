"""What configures an LLM judge, validated once: :class:`LLMJudgeSpec` -> :class:`LLMJudge`.

``studybench eval --judge-model ...`` and ``studybench judge RUN_DIR`` build their judge from the
same spec, and so does Python code::

    judge = LLMJudgeSpec(model="Qwen/Qwen3-32B", base_url="http://127.0.0.1:8001/v1").build()
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from studybench.llm_judge.cache import LLMVerdictCache
from studybench.llm_judge.client import LLMJudge
from studybench.llm_judge.prompt import LLMJudgeTemplateError
from studybench.llm_judge.templates import judge_template

__all__ = ["JUDGE_BASE_URL_ENV", "LLMJudgeSpec", "LLMJudgeSpecError"]

JUDGE_BASE_URL_ENV = "STUDYBENCH_JUDGE_BASE_URL"
"""Environment variable that stands in for a missing judge ``base_url``."""


class LLMJudgeSpecError(ValueError):
    """An LLM judge configuration that cannot be used; ``field`` names the setting at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class LLMJudgeSpec(BaseModel):
    """The settings of an LLM judge (paper 2.2; docs/protocol.md section 6).

    Attributes:
        model: judge model name at the endpoint.
        base_url: OpenAI-compatible endpoint (``None``: ``$STUDYBENCH_JUDGE_BASE_URL``).
        prompt: a shipped template's name (a string: ``"default"``, ``"paper"``; see
            :data:`studybench.llm_judge.templates.JUDGE_TEMPLATES`) or a template file with the five
            placeholders (``None``: ``default``, ours).
        api_key_env: environment variable holding the API key (never stored).
        concurrency: judge requests in flight.
        request_timeout: seconds per HTTP request.
        max_retries: transport retries per request (429, 5xx, timeouts, dropped connections).
        parse_retries: re-asks after a malformed reply before the verdict is unjudgeable.
        max_tokens: token budget per reply (``None``: the server's default).
        cache_dir: verdict cache directory (``None``: ``$STUDYBENCH_JUDGE_CACHE``, then the user cache).
        use_cache: read and write the verdict cache (``False``: neither).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    base_url: str | None = None
    prompt: str | Path | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = Field(16, ge=1, le=100_000)
    request_timeout: float = Field(300.0, ge=1e-3, le=86_400.0, allow_inf_nan=False)
    max_retries: int = Field(6, ge=0, le=1000)
    parse_retries: int = Field(2, ge=0, le=100)
    max_tokens: int | None = Field(None, ge=1, le=10_000_000)
    cache_dir: Path | None = None
    use_cache: bool = True

    @classmethod
    def create(cls, **values: object) -> LLMJudgeSpec:
        """Validate settings into a spec.

        Raises:
            LLMJudgeSpecError: the first invalid setting (``field`` names it).
        """
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err.get("loc", ())) or "judge"
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            raise LLMJudgeSpecError(field, f"judge {field}: {msg}, got {err.get('input')!r}") from None

    def resolved_base_url(self) -> str | None:
        """``base_url``, else ``$STUDYBENCH_JUDGE_BASE_URL``, else ``None``."""
        return self.base_url or os.environ.get(JUDGE_BASE_URL_ENV) or None

    def build(self, *, read_cache: bool = True) -> LLMJudge:
        """The judge these settings describe (template read, cache directory checked).

        Args:
            read_cache: serve verdicts from the cache; ``False`` asks afresh and writes the new
                verdicts through to the cache (``studybench judge --refresh``). Without
                ``use_cache`` the cache is neither read nor written.

        Raises:
            LLMJudgeSpecError: blank model, no endpoint, an unusable template file (not a
                shipped template's name, and: missing
                placeholder, empty, not UTF-8, too large) or an unusable cache directory.
        """
        if not self.model.strip():
            raise LLMJudgeSpecError("model", "the judge model must not be empty")
        url = self.resolved_base_url()
        if not url:
            raise LLMJudgeSpecError(
                "base_url",
                f"a judge endpoint is required (--judge-base-url or ${JUDGE_BASE_URL_ENV}), e.g. "
                "http://127.0.0.1:8001/v1 from `vllm serve`, or https://api.openai.com/v1",
            )
        try:
            template = judge_template(self.prompt)
        except LLMJudgeTemplateError as e:
            raise LLMJudgeSpecError("prompt", str(e)) from None
        cache = None
        if self.use_cache:
            if self.cache_dir is not None and self.cache_dir.exists() and not self.cache_dir.is_dir():
                raise LLMJudgeSpecError("cache_dir", f"the judge cache {self.cache_dir} exists and is not a directory")
            cache = LLMVerdictCache(self.cache_dir)
            try:
                cache.check_writable()
            except (OSError, ValueError) as e:  # ValueError: InputFileError (a named pipe in its place, ...)
                why = (e.strerror if isinstance(e, OSError) else None) or e
                raise LLMJudgeSpecError(
                    "cache_dir",
                    f"cannot use the verdict cache {cache.root} ({why}); pass --judge-cache DIR or --no-judge-cache",
                ) from None
        return LLMJudge(
            self.model, url, template=template, cache=cache, parse_retries=self.parse_retries,
            concurrency=self.concurrency, request_timeout=self.request_timeout, max_retries=self.max_retries,
            max_tokens=self.max_tokens, api_key_env=self.api_key_env, read_cache=read_cache,
        )
