"""``studybench gepa optimize``: evolve the system prompt with GEPA (:func:`studybench.methods.gepa.optimize`).

The best prompt lands in ``RUN_DIR/best_system_prompt.md``, the file ``studybench eval --system-prompt``
takes. Running the same command again with the same ``--run-dir`` resumes (raise
``--max-metric-calls`` to continue a finished run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.common import (
    JUDGE_OPTIONS,
    VERIFY_OPTIONS,
    console,
    fail,
    fail_write,
    judge_spec,
    verify_settings,
)

__all__ = ["gepa_app"]

gepa_app = typer.Typer(
    help="GEPA prompt optimisation with the StudyBench protocol: `optimize` evolves the system prompt.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_T = "Task model"
_R = "Reflection model"


@gepa_app.command("optimize")
@JUDGE_OPTIONS
@VERIFY_OPTIONS
def optimize_cmd(
    model: Annotated[str, typer.Option("--model", rich_help_panel=_T, help="Task model at an OpenAI-compatible endpoint.")],
    reflection_model: Annotated[str, typer.Option("--reflection-model", rich_help_panel=_R, help="Model that reads the failures and proposes new prompts.")],
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Run directory (GEPA state, best prompt, snapshots); an existing one is resumed.")],
    max_metric_calls: Annotated[int, typer.Option("--max-metric-calls", help="Rollout budget of the run directory (one parent evaluated once = one rollout); raise it to continue a finished run.")],
    base_url: Annotated[str | None, typer.Option("--base-url", rich_help_panel=_T, help="Task endpoint, e.g. http://127.0.0.1:8000/v1 (default $OPENAI_BASE_URL).")] = None,
    reflection_base_url: Annotated[str | None, typer.Option("--reflection-base-url", rich_help_panel=_R, help="Reflection endpoint (default: --base-url).")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", rich_help_panel=_T, help="Environment variable holding the task endpoint's API key (never stored).")] = "OPENAI_API_KEY",
    reflection_api_key_env: Annotated[str, typer.Option("--reflection-api-key-env", rich_help_panel=_R, help="Environment variable holding the reflection endpoint's API key.")] = "OPENAI_API_KEY",
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help="The instruction layers (default: train/ in $STUDYBENCH_DATA or the `data fetch --train` cache).")] = None,
    val_size: Annotated[int, typer.Option("--val-size", help="Validation parents (split by exercise).")] = 32,
    limit: Annotated[int | None, typer.Option("--limit", help="Use at most this many parents in all (quick runs).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seeds the split, GEPA and sampling.")] = 0,
    seed_prompt: Annotated[Path | None, typer.Option("--seed-prompt", metavar="FILE", help="System prompt to start from (default: the protocol's).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", rich_help_panel=_T, help="Turns in flight.")] = 16,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", rich_help_panel=_T, help="Completion tokens per turn (default: the server's).")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", rich_help_panel=_T, help="Task model temperature (default: the server's).")] = None,
    reflection_max_tokens: Annotated[int | None, typer.Option("--reflection-max-tokens", rich_help_panel=_R, help="Tokens per reflection reply.")] = None,
    reflection_temperature: Annotated[float | None, typer.Option("--reflection-temperature", rich_help_panel=_R, help="Reflection temperature.")] = None,
    request_timeout: Annotated[float, typer.Option("--request-timeout", help="Seconds per HTTP request.")] = 600.0,
    max_retries: Annotated[int, typer.Option("--max-retries", help="Retries per request on 429/5xx/timeouts.")] = 6,
    minibatch_size: Annotated[int, typer.Option("--minibatch-size", help="Parents per reflection minibatch.")] = 3,
    candidate_selection: Annotated[str, typer.Option("--candidate-selection", help="pareto | current_best | epsilon_greedy | top_k_pareto.")] = "pareto",
    snapshot_every: Annotated[int, typer.Option("--snapshot-every", help="Write snapshots/best_at_N.md every N rollouts (0: never).")] = 100,
    *,
    judge_options: dict[str, Any],
    verify_options: dict[str, Any],
) -> None:
    """Evolve the system prompt with GEPA on the Instructions with Answer; write RUN_DIR/best_system_prompt.md
    (for `studybench eval --system-prompt`). Needs the gepa extra: pip install "studybench[gepa]"."""
    from studybench.methods.gepa import GepaError, optimize, require_gepa
    from studybench.protocol import ArtefactError, load_artefacts
    from studybench.secrets import env_name_problem

    try:
        require_gepa()
    except GepaError as e:
        fail(str(e), 1)
    for flag, name in (("--api-key-env", api_key_env), ("--reflection-api-key-env", reflection_api_key_env)):
        problem = env_name_problem(name)
        if problem is not None:
            fail(f"{flag}: {problem}")
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not url:
        fail("--base-url is required (or set $OPENAI_BASE_URL), e.g. http://127.0.0.1:8000/v1 from `vllm serve`")
    for flag, value, low in (("--max-metric-calls", max_metric_calls, 1), ("--val-size", val_size, 1),
                             ("--concurrency", concurrency, 1), ("--minibatch-size", minibatch_size, 1),
                             ("--snapshot-every", snapshot_every, 0)):
        if value < low:
            fail(f"{flag} must be >= {low}, got {value}")
    if train_dir is not None and not train_dir.is_dir():
        fail(f"--train-dir {train_dir}: not a directory (expected the folder of the instruction layers, train/ beside the test sets)")
    prompt = None
    if seed_prompt is not None:
        try:
            prompt = load_artefacts(system_prompt=seed_prompt).system_prompt
        except ArtefactError as e:
            fail(str(e))
    verify_timeout, verify_workers = verify_settings(verify_options)
    spec = judge_spec(judge_options)
    judge = spec.build() if spec is not None else None

    def log(line: str) -> None:
        console.print(escape(line), soft_wrap=True, highlight=False)

    try:
        res = optimize(
            model=model, base_url=url, reflection_model=reflection_model, reflection_base_url=reflection_base_url,
            run_dir=run_dir, max_metric_calls=max_metric_calls, train_dir=train_dir, val_size=val_size, seed=seed,
            limit=limit, seed_prompt=prompt, api_key_env=api_key_env, reflection_api_key_env=reflection_api_key_env,
            concurrency=concurrency, max_tokens=max_tokens, temperature=temperature,
            reflection_max_tokens=reflection_max_tokens, reflection_temperature=reflection_temperature,
            request_timeout=request_timeout, max_retries=max_retries, minibatch_size=minibatch_size,
            candidate_selection=candidate_selection, snapshot_every=snapshot_every, judge=judge,
            verify_workers=verify_workers, verify_timeout=verify_timeout if verify_timeout is not None else 5.0,
            log=log,
        )
    except GepaError as e:
        fail(str(e), 1)
    except ValueError as e:
        fail(str(e))
    except OSError as e:
        fail_write(e, run_dir)
    console.print(f"seed prompt: validation score {res.seed_score:.3f}", highlight=False)
    console.print(f"best prompt: validation score {res.best_score:.3f} ({res.candidates} candidates)", highlight=False)
    console.print(f"rollouts used: {res.rollouts} of {max_metric_calls}", highlight=False)
    console.print(f"wrote {escape(str(res.best_path))} (use: studybench eval --system-prompt {escape(str(res.best_path))})",
                  soft_wrap=True, highlight=False)
    if res.stopped:
        fail(res.stopped, 1)
