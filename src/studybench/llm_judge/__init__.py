"""The LLM judge fallback (paper 2.2, appendices F-G; docs/protocol.md section 6).

Leaderboard mode (``rule+llm``) sends every answer the rule verifier rejects to an LLM judge and
counts it correct when the judge says TRUE; reward mode (``rule``) never calls an LLM.

- :mod:`studybench.llm_judge.prompt`: our prompt template and user templates (five placeholders);
- :mod:`studybench.llm_judge.templates`: the shipped templates by name (``default``, ours; ``paper``,
  the paper's reply format) and :func:`judge_template` (a ``--judge-prompt`` name or file);
- :mod:`studybench.llm_judge.parse`: strict two-section verdict parsing, and the strict removal of
  judge reasoning shared by every task (:func:`strip_judge_reasoning`);
- :mod:`studybench.llm_judge.task`: :class:`LLMJudgeTask` (template and placeholder names, strict
  parser, format reminder); :data:`ANSWER_EQUIVALENCE_TASK` is the default;
- :mod:`studybench.llm_judge.cache`: the on-disk verdict cache (TRUE / FALSE only), with
  :func:`cache_summary` and :func:`clear_cache` (``studybench cache show|clear``);
- :mod:`studybench.llm_judge.health`: :class:`UnjudgeableTally`, the alarm when a batch's verdicts
  are mostly unjudgeable (a judge answering in the wrong format);
- :mod:`studybench.llm_judge.client`: :class:`LLMJudge`, the OpenAI-compatible client for any task;
- :mod:`studybench.llm_judge.spec`: :class:`LLMJudgeSpec`, a judge's settings validated once
  (``LLMJudgeSpec(model=..., base_url=...).build()``);
- :mod:`studybench.llm_judge.usage`: :func:`judge_usage`, the judge tokens (and cost) of a run
  directory, from the usage stored with its LLM verdicts;
- :mod:`studybench.llm_judge.inputs`: :func:`llm_judge_inputs` builds the five inputs of one
  sub-problem's judgement; the evaluation never needs to know what they are. The contamination audit's stage 3 is the same client with another task
(:data:`studybench.audit.duplicates.DUPLICATE_TASK`).
"""

from __future__ import annotations

from studybench.llm_judge.cache import (
    CACHED_VERDICTS,
    LLMVerdictCache,
    cache_key,
    cache_summary,
    clear_cache,
    default_cache_root,
)
from studybench.llm_judge.client import (
    FINAL_VERDICTS,
    JudgeBudgetExceeded,
    LLMJudge,
    LLMJudgeConfigError,
    LLMJudgeInputs,
    LLMJudgeStats,
    LLMVerdict,
    judge_id,
)
from studybench.llm_judge.health import (
    SAMPLE_REPLY_CHARS,
    UNJUDGEABLE_ALARM_MIN,
    UNJUDGEABLE_ALARM_SHARE,
    UNJUDGEABLE_STOP_MIN,
    UNJUDGEABLE_STOP_Z,
    UnjudgeableTally,
    wilson_lower_bound,
)
from studybench.llm_judge.inputs import MAX_SOLUTION_CHARS, llm_judge_inputs
from studybench.llm_judge.parse import MalformedReply, ParsedVerdict, parse_verdict, strip_judge_reasoning
from studybench.llm_judge.prompt import (
    DEFAULT_TEMPLATE,
    FORMAT_REMINDER,
    PLACEHOLDERS,
    LLMJudgeTemplate,
    LLMJudgeTemplateError,
)
from studybench.llm_judge.spec import JUDGE_BASE_URL_ENV, LLMJudgeSpec, LLMJudgeSpecError
from studybench.llm_judge.task import ANSWER_EQUIVALENCE_TASK, LLMJudgeTask
from studybench.llm_judge.templates import (
    DEFAULT_TEMPLATE_NAME,
    JUDGE_TEMPLATES,
    PAPER_FORMAT_REMINDER,
    PAPER_TEMPLATE,
    ShippedTemplate,
    judge_template,
)
from studybench.llm_judge.usage import JudgeUsage, judge_usage, judge_usage_summary

__all__ = [
    "ANSWER_EQUIVALENCE_TASK",
    "DEFAULT_TEMPLATE_NAME",
    "JUDGE_TEMPLATES",
    "PAPER_FORMAT_REMINDER",
    "PAPER_TEMPLATE",
    "ShippedTemplate",
    "judge_template",
    "CACHED_VERDICTS",
    "SAMPLE_REPLY_CHARS",
    "UNJUDGEABLE_ALARM_MIN",
    "UNJUDGEABLE_ALARM_SHARE",
    "UNJUDGEABLE_STOP_MIN",
    "UNJUDGEABLE_STOP_Z",
    "UnjudgeableTally",
    "wilson_lower_bound",
    "cache_summary",
    "clear_cache",
    "JUDGE_BASE_URL_ENV",
    "LLMJudgeSpec",
    "LLMJudgeSpecError",
    "DEFAULT_TEMPLATE",
    "FINAL_VERDICTS",
    "JudgeBudgetExceeded",
    "JudgeUsage",
    "judge_usage",
    "judge_usage_summary",
    "FORMAT_REMINDER",
    "LLMJudgeConfigError",
    "MAX_SOLUTION_CHARS",
    "PLACEHOLDERS",
    "LLMJudgeInputs",
    "LLMJudgeStats",
    "LLMJudgeTask",
    "LLMJudgeTemplate",
    "LLMJudge",
    "LLMVerdict",
    "MalformedReply",
    "ParsedVerdict",
    "LLMJudgeTemplateError",
    "LLMVerdictCache",
    "cache_key",
    "default_cache_root",
    "llm_judge_inputs",
    "judge_id",
    "parse_verdict",
    "strip_judge_reasoning",
]
