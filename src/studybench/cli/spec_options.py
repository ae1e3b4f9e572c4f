"""The command-line options of each :class:`~studybench.evaluate.EvalSpec` part, declared once.

Each part's options are an :class:`~studybench.cli.common.OptionSet`, and each set has a function
that turns its values into the part's fields: :data:`DATA_OPTIONS` (with
:data:`~studybench.cli.common.SELECTION_OPTIONS`) -> :func:`data_part`, :data:`GENERATION_OPTIONS` ->
:func:`generation_part`, :data:`ARTEFACT_OPTIONS` -> :func:`artefact_part`, :data:`EVAL_BUDGET_OPTIONS`
-> :func:`budget_part`, :data:`VERIFICATION_OPTIONS` (with :data:`~studybench.cli.common.VERIFY_OPTIONS`
and :data:`~studybench.cli.common.JUDGE_OPTIONS`) -> :func:`verification_part`. ``studybench eval``
takes them all; the rule verifier's and the judge's sets are shared with ``studybench gepa optimize``
and ``studybench judge``, the budgets of the other jobs with ``build retry``
(:data:`~studybench.cli.budget.BUDGET_OPTIONS`).
:data:`EVAL_ORDER` keeps ``studybench eval --help`` in the order it always had.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from studybench.cli.common import OptionSet, fail, judge_spec, selection_spec

__all__ = [
    "ARTEFACT_OPTIONS",
    "DATA_OPTIONS",
    "EVAL_BUDGET_OPTIONS",
    "EVAL_ORDER",
    "GENERATION_OPTIONS",
    "VERIFICATION_OPTIONS",
    "artefact_part",
    "budget_part",
    "data_part",
    "generation_part",
    "parse_seeds",
    "verification_part",
]

DATA_OPTIONS = OptionSet("data_options", {
    "split": (Annotated[str, typer.Option("--split", help="application | transfer | PATH to a test-set JSON file.")], "transfer"),
    "k": (Annotated[int, typer.Option("-k", "--k", help="Attempts per parent (Par@k, Sub@k).")], 8),
    "seeds": (Annotated[int, typer.Option("--seeds", help="Number of seeds (each a full set of k attempts; the paper uses 3).")], 3),
    "seed": (Annotated[int, typer.Option("--seed", help="First seed; seeds are SEED..SEED+N-1.")], 0),
    "seed_list": (Annotated[str | None, typer.Option("--seed-list", help="Explicit comma-separated seeds (overrides --seeds/--seed).")], None),
    "data_dir": (Annotated[Path | None, typer.Option("--data-dir", help="Directory holding application.json / transfer.json (default $STUDYBENCH_DATA, then the fetch cache).")], None),
    "limit": (Annotated[int | None, typer.Option("--limit", help="Only the first N parents (after every other selection option).")], None),
    "slice_": (Annotated[str | None, typer.Option("--slice", help="Parents START:STOP (Python slice of the file order).")], None),
})
"""``EvalSpec.data``: the test set, k and the seeds, the slice and limit (with :data:`~studybench.cli.common.SELECTION_OPTIONS`)."""


GENERATION_OPTIONS = OptionSet("generation_options", {
    "model": (Annotated[str, typer.Option("--model", help="Model name at the endpoint, or 'reference' for the offline gold replay.")], "reference"),
    "base_url": (Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vllm serve). Default: $OPENAI_BASE_URL.")], None),
    "backend": (Annotated[str, typer.Option("--backend", help="auto | openai | reference (auto: reference when --model reference).")], "auto"),
    "preset": (Annotated[str, typer.Option("--preset", help="Sampling preset: paper | greedy | none.")], "none"),
    "temperature": (Annotated[float | None, typer.Option(help="Sampling temperature.")], None),
    "top_p": (Annotated[float | None, typer.Option(help="Nucleus sampling p.")], None),
    "top_k": (Annotated[int | None, typer.Option(help="Top-k sampling (vLLM extra_body).")], None),
    "min_p": (Annotated[float | None, typer.Option(help="Min-p sampling (vLLM extra_body).")], None),
    "presence_penalty": (Annotated[float | None, typer.Option(help="Presence penalty.")], None),
    "repetition_penalty": (Annotated[float | None, typer.Option(help="Repetition penalty (vLLM extra_body).")], None),
    "max_tokens": (Annotated[int | None, typer.Option(help="Completion budget per turn: the tokens the model may write (never includes the prompt).")], None),
    "context_budget": (Annotated[int | None, typer.Option("--context-budget", help="Cap on prompt + completion per turn (--preset paper: 32768; 0: no cap). The completion limit sent is min(--max-tokens, cap - estimated prompt).")], None),
    "min_completion_tokens": (Annotated[int | None, typer.Option("--min-completion-tokens", help="Refuse budgets that leave a turn fewer completion tokens than this (default 256); such a turn is never sent.")], None),
    "thinking": (Annotated[bool | None, typer.Option("--thinking/--no-thinking", help="Send chat_template_kwargs.enable_thinking (Qwen3).")], None),
    "concurrency": (Annotated[int, typer.Option(help="Maximum requests in flight.")], 64),
    "request_timeout": (Annotated[float, typer.Option(help="Seconds per HTTP request before it is retried.")], 600.0),
    "max_retries": (Annotated[int, typer.Option(help="Retries per turn on 429/5xx/timeouts/dropped connections.")], 6),
    "max_consecutive_failures": (Annotated[int, typer.Option("--max-consecutive-failures", help="Stop the run (saving what is done; re-run to resume) after this many request attempts in a row got no answer from the endpoint and none for 10 s; 0: never stop.")], 8),
    "liveness_timeout": (Annotated[float, typer.Option("--liveness-timeout", help="While requests are in flight and unanswered, probe the endpoint's model list (GET /models); when the probes too get no answer for this many seconds, the endpoint is hung: stop as for a dead one (saving what is done). A slow server that answers the probe is never cut; 0: never probe. The judge's endpoint too.")], 20.0),
    "api_key_env": (Annotated[str, typer.Option(help="Environment variable holding the API key (never stored).")], "OPENAI_API_KEY"),
    "reference_mode": (Annotated[str, typer.Option("--reference-mode", help="reference backend: gold | solution.")], "gold"),
})
"""``EvalSpec.generation``: the model, its endpoint and the sampling."""


ARTEFACT_OPTIONS = OptionSet("artefact_options", {
    "system_prompt": (Annotated[Path | None, typer.Option("--system-prompt", help="File replacing the system message (GEPA, EvoSkill).")], None),
    "playbook": (Annotated[Path | None, typer.Option("--playbook", help="File appended to the default system message (ACE; its bullet ids and helpful/harmful counters are removed).")], None),
    "playbook_max_tokens": (Annotated[int, typer.Option("--playbook-max-tokens", help="Refuse a playbook over this many tokens (built-in count; 0: no cap).")], 12_000),
    "guidance": (Annotated[Path | None, typer.Option("--guidance", help="JSON/JSONL hints joined on (source, year, source_problem_id, problem_id).")], None),
    "ignore_unmatched_guidance": (Annotated[bool, typer.Option("--ignore-unmatched-guidance", help="Run even when --guidance entries match no sub-problem (default: an error naming them; list the keys with `studybench data ids`).")], False),
})
"""``EvalSpec.artefacts``: the method artefact files."""


EVAL_BUDGET_OPTIONS = OptionSet("budget_options", {
    "pricing": (Annotated[Path | None, typer.Option("--pricing", rich_help_panel="Cost", help="Pricing file (JSON or TOML: currency, and per model or glob pattern the input, output and cached_input prices per million tokens): the report gets the run's cost per run, seed and turn; the run directory records the prices for its later reports.")], None),
    "max_cost": (Annotated[float | None, typer.Option("--max-cost", rich_help_panel="Cost", help="Stop the run cleanly (exit 3) once its requests cost this much, in the pricing file's currency (needs --pricing, or prices the run recorded). Requests in flight finish and are kept; re-run with a higher limit to resume.")], None),
    "max_total_tokens": (Annotated[int | None, typer.Option("--max-total-tokens", rich_help_panel="Cost", help="Stop the run cleanly (exit 3) once its requests spent this many prompt + completion tokens (every request stored in the run directory counts). Re-run with a higher limit (or none) to resume.")], None),
})
"""``EvalSpec.budgets`` as ``studybench eval`` words them (the "Cost" panel; other jobs: :data:`~studybench.cli.budget.BUDGET_OPTIONS`)."""


VERIFICATION_OPTIONS = OptionSet("verification_options", {
    "verifier_mode": (Annotated[str | None, typer.Option("--verifier-mode", rich_help_panel="LLM judge", help="rule (reward-safe, never calls an LLM) | rule+llm (leaderboard). Default: rule+llm with --judge-model, else the run's previous mode, else rule."),], None),
    "retry_timeouts": (Annotated[bool, typer.Option("--retry-timeouts", help="Verify again attempts whose rule verdict timed out (by default final until --verify-timeout changes), e.g. after a run on a loaded machine.")], False),
})
"""``EvalSpec.verification`` beyond :data:`~studybench.cli.common.VERIFY_OPTIONS` and :data:`~studybench.cli.common.JUDGE_OPTIONS`."""

EVAL_ORDER = (
    "split", "model", "base_url", "backend", "k", "seeds", "seed", "seed_list", "out", "data_dir", "preset", "temperature",
    "top_p", "top_k", "min_p", "presence_penalty", "repetition_penalty", "max_tokens", "context_budget",
    "min_completion_tokens", "thinking", "concurrency", "request_timeout", "max_retries", "max_consecutive_failures",
    "liveness_timeout", "api_key_env", "system_prompt", "playbook", "playbook_max_tokens", "guidance",
    "ignore_unmatched_guidance", "reference_mode", "only_generate", "only_verify", "only_judge", "retry_timeouts", "limit",
    "slice_", "verifier_mode", "pricing", "max_cost", "max_total_tokens", "use_ray", "ray_address", "label",
)
"""The order in which ``studybench eval --help`` lists its options (then selection, rule verifier, judge)."""


def parse_seeds(n: int, base: int, seed_list: str | None) -> list[int]:
    """The run seeds of ``--seeds N --seed BASE`` or ``--seed-list A,B,...``; fails (exit 2) naming the flag."""
    if seed_list:
        try:
            vals = [int(x) for x in seed_list.split(",") if x.strip()]
        except ValueError:
            fail(f"--seed-list must be comma-separated integers, got {seed_list!r}")
        if len(set(vals)) != len(vals) or not vals:
            fail("--seed-list must hold distinct integers")
        return vals
    if n < 1:
        fail("--seeds must be >= 1")
    return [base + i for i in range(n)]


def data_part(opts: dict[str, Any], selection: dict[str, Any]) -> dict[str, Any]:
    """:class:`~studybench.evaluate.DataSpec` fields of :data:`DATA_OPTIONS` and ``SELECTION_OPTIONS`` values.

    Fails (exit 2) naming the flag on bad seeds or an unreadable id file.
    """
    return {"split": opts["split"], "data_dir": opts["data_dir"], "parent_slice": opts["slice_"], "limit": opts["limit"],
            "k": opts["k"], "seeds": parse_seeds(opts["seeds"], opts["seed"], opts["seed_list"]),
            **selection_spec(selection)}


def generation_part(opts: dict[str, Any]) -> dict[str, Any]:
    """:class:`~studybench.evaluate.GenerationSpec` fields of :data:`GENERATION_OPTIONS` values (exit 2 on a bad --backend)."""
    if opts["backend"] not in ("auto", "openai", "reference"):
        fail(f"--backend must be auto, openai or reference, got {opts['backend']!r}")
    return {k: v for k, v in opts.items() if v is not None or k != "min_completion_tokens"}


def artefact_part(opts: dict[str, Any]) -> dict[str, Any]:
    """:class:`~studybench.evaluate.ArtefactSpec` fields of :data:`ARTEFACT_OPTIONS` values."""
    return dict(opts)


def budget_part(opts: dict[str, Any]) -> dict[str, Any]:
    """:class:`~studybench.costs.BudgetLimits` fields of :data:`EVAL_BUDGET_OPTIONS` (or ``BUDGET_OPTIONS``) values."""
    return {k: opts.get(k) for k in ("pricing", "max_cost", "max_total_tokens")}


def verification_part(opts: dict[str, Any], judge: dict[str, Any], timeout: float | None,
                      workers: int | None) -> dict[str, Any]:
    """:class:`~studybench.evaluate.VerificationSpec` fields of the verification and judge options.

    Args:
        opts: :data:`VERIFICATION_OPTIONS` values.
        judge: :data:`~studybench.cli.common.JUDGE_OPTIONS` values.
        timeout: ``--verify-timeout`` (``None``: not given) and ...
        workers: ... ``--verify-workers``, as :func:`~studybench.cli.common.verify_settings` read them.

    Fails (exit 2) naming the flag on a bad --verifier-mode or a bad judge setting.
    """
    if opts["verifier_mode"] is not None and opts["verifier_mode"] not in ("rule", "rule+llm"):
        fail(f"--verifier-mode must be one of rule, rule+llm, got {opts['verifier_mode']!r}")
    return {"verifier_mode": opts["verifier_mode"], "verify_timeout": 5.0 if timeout is None else timeout,
            "verify_workers": workers, "retry_timeouts": opts["retry_timeouts"], "judge": judge_spec(judge)}
