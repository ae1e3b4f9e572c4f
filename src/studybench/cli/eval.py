"""``studybench eval``: options -> :class:`~studybench.evaluate.EvalSpec` -> :func:`~studybench.evaluate.run_plan`."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.budget import exit_budget_stopped
from studybench.cli.common import (
    JUDGE_OPTIONS,
    SELECTION_OPTIONS,
    VERIFY_OPTIONS,
    console,
    deprecated,
    fail,
    fail_for,
    fail_write,
    interruptible,
    judge_spec,
    plural,
    progress_bars,
    selection_spec,
    verify_settings,
)
from studybench.cli.label import parse_labels
from studybench.cli.show import (
    exit_for_internal_errors,
    judge_pass_failure,
    print_llm_pass,
    print_report,
    print_unjudgeable_alarm,
)
from studybench.cli.verify import RAY_ADDRESS_HELP, RAY_HELP, ray_verifier

__all__ = ["eval_cmd"]


def _seeds(n: int, base: int, seed_list: str | None) -> list[int]:
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


def _failure_advice(errors: list[str]) -> None:
    """Say whether running again can help: transient failures (retried next time) vs errors a re-run repeats."""
    from studybench.evaluate import is_permanent_error

    permanent = [e for e in errors if is_permanent_error(e)]
    if len(permanent) < len(errors):
        console.print(f"[yellow]{plural(len(errors) - len(permanent), 'failure')} looked transient (connection, "
                      "timeout, 5xx, 429): run the same command again to retry them.[/yellow]", soft_wrap=True)
    if permanent:
        first = permanent[0]
        hint = ""
        if "context" in first.lower() and "length" in first.lower():
            hint = (" The server's context is smaller than the conversation: set --context-budget to the server's "
                    "context length (vllm serve --max-model-len) so that turns are sized to it, or leave such "
                    "problems out (--slice / --limit).")
        console.print(f"[bold yellow]{plural(len(permanent), 'turn')} failed with an error a re-run will repeat "
                      f"(e.g. {escape(first[:300])}); change the settings first.{escape(hint)}[/bold yellow]", soft_wrap=True)



@JUDGE_OPTIONS
@VERIFY_OPTIONS
@SELECTION_OPTIONS
def eval_cmd(
    split: Annotated[str, typer.Option("--split", help="application | transfer | PATH to a test-set JSON file.")] = "transfer",
    model: Annotated[str, typer.Option("--model", help="Model name at the endpoint, or 'reference' for the offline gold replay.")] = "reference",
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vllm serve). Default: $OPENAI_BASE_URL.")] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto | openai | reference (auto: reference when --model reference).")] = "auto",
    k: Annotated[int, typer.Option("-k", "--k", help="Attempts per parent (Par@k, Sub@k).")] = 8,
    seeds: Annotated[int, typer.Option("--seeds", help="Number of seeds (each a full set of k attempts; the paper uses 3).")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="First seed; seeds are SEED..SEED+N-1.")] = 0,
    seed_list: Annotated[str | None, typer.Option("--seed-list", help="Explicit comma-separated seeds (overrides --seeds/--seed).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default runs/<model>-<split>, runs/reference-<mode>-<split> for the reference backend). Re-running the same command resumes.")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding application.json / transfer.json (default $STUDYBENCH_DATA, then the fetch cache).")] = None,
    preset: Annotated[str, typer.Option("--preset", help="Sampling preset: paper | greedy | none.")] = "none",
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling p.")] = None,
    top_k: Annotated[int | None, typer.Option(help="Top-k sampling (vLLM extra_body).")] = None,
    min_p: Annotated[float | None, typer.Option(help="Min-p sampling (vLLM extra_body).")] = None,
    presence_penalty: Annotated[float | None, typer.Option(help="Presence penalty.")] = None,
    repetition_penalty: Annotated[float | None, typer.Option(help="Repetition penalty (vLLM extra_body).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Completion budget per turn: the tokens the model may write (never includes the prompt).")] = None,
    context_budget: Annotated[int | None, typer.Option("--context-budget", help="Cap on prompt + completion per turn (--preset paper: 32768; 0: no cap). The completion limit sent is min(--max-tokens, cap - estimated prompt).")] = None,
    min_completion_tokens: Annotated[int | None, typer.Option("--min-completion-tokens", help="Refuse budgets that leave a turn fewer completion tokens than this (default 256); such a turn is never sent.")] = None,
    thinking: Annotated[bool | None, typer.Option("--thinking/--no-thinking", help="Send chat_template_kwargs.enable_thinking (Qwen3).")] = None,
    concurrency: Annotated[int, typer.Option(help="Maximum requests in flight.")] = 64,
    request_timeout: Annotated[float, typer.Option(help="Seconds per HTTP request before it is retried.")] = 600.0,
    max_retries: Annotated[int, typer.Option(help="Retries per turn on 429/5xx/timeouts/dropped connections.")] = 6,
    max_consecutive_failures: Annotated[int, typer.Option("--max-consecutive-failures", help="Stop the run (saving what is done; re-run to resume) after this many request attempts in a row got no answer from the endpoint and none for 10 s; 0: never stop.")] = 8,
    liveness_timeout: Annotated[float, typer.Option("--liveness-timeout", help="While requests are in flight and unanswered, probe the endpoint's model list (GET /models); when the probes too get no answer for this many seconds, the endpoint is hung: stop as for a dead one (saving what is done). A slow server that answers the probe is never cut; 0: never probe. The judge's endpoint too.")] = 20.0,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key (never stored).")] = "OPENAI_API_KEY",
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="File replacing the system message (GEPA, EvoSkill).")] = None,
    playbook: Annotated[Path | None, typer.Option("--playbook", help="File appended to the default system message (ACE; its bullet ids and helpful/harmful counters are removed).")] = None,
    playbook_max_tokens: Annotated[int, typer.Option("--playbook-max-tokens", help="Refuse a playbook over this many tokens (built-in count; 0: no cap).")] = 12_000,
    guidance: Annotated[Path | None, typer.Option("--guidance", help="JSON/JSONL hints joined on (source, year, source_problem_id, problem_id).")] = None,
    ignore_unmatched_guidance: Annotated[
        bool, typer.Option("--ignore-unmatched-guidance", help="Run even when --guidance entries match no sub-problem (default: an error naming them; list the keys with `studybench data ids`).")
    ] = False,
    reference_mode: Annotated[str, typer.Option("--reference-mode", help="reference backend: gold | solution.")] = "gold",
    only_generate: Annotated[bool, typer.Option("--only-generate", help="Generate turns, do not verify or report.")] = False,
    only_verify: Annotated[bool, typer.Option("--only-verify", help="Verify existing turns and report; generate nothing (needs no endpoint).")] = False,
    only_judge: Annotated[bool, typer.Option("--only-judge", hidden=True, help="Deprecated: --only-verify.")] = False,
    retry_timeouts: Annotated[bool, typer.Option("--retry-timeouts", help="Verify again attempts whose rule verdict timed out (by default final until --verify-timeout changes), e.g. after a run on a loaded machine.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N parents (after every other selection option).")] = None,
    slice_: Annotated[str | None, typer.Option("--slice", help="Parents START:STOP (Python slice of the file order).")] = None,
    verifier_mode: Annotated[
        str | None,
        typer.Option("--verifier-mode", rich_help_panel="LLM judge", help="rule (reward-safe, never calls an LLM) | rule+llm (leaderboard). Default: rule+llm with --judge-model, else the run's previous mode, else rule."),
    ] = None,
    pricing: Annotated[Path | None, typer.Option("--pricing", rich_help_panel="Cost", help="Pricing file (JSON or TOML: currency, and per model or glob pattern the input, output and cached_input prices per million tokens): the report gets the run's cost per run, seed and turn; the run directory records the prices for its later reports.")] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", rich_help_panel="Cost", help="Stop the run cleanly (exit 3) once its requests cost this much, in the pricing file's currency (needs --pricing, or prices the run recorded). Requests in flight finish and are kept; re-run with a higher limit to resume.")] = None,
    max_total_tokens: Annotated[int | None, typer.Option("--max-total-tokens", rich_help_panel="Cost", help="Stop the run cleanly (exit 3) once its requests spent this many prompt + completion tokens (every request stored in the run directory counts). Re-run with a higher limit (or none) to resume.")] = None,
    use_ray: Annotated[bool, typer.Option("--ray", rich_help_panel="Rule verifier", help=RAY_HELP + " --verify-workers: the actors.")] = False,
    ray_address: Annotated[str | None, typer.Option("--ray-address", metavar="ADDRESS", rich_help_panel="Rule verifier", help=RAY_ADDRESS_HELP)] = None,
    label: Annotated[list[str] | None, typer.Option("--label", metavar="KEY=VALUE", help="KEY=VALUE stored in the manifest and the report (repeatable), e.g. --label method=GEPA; a resumed run merges them (later wins). Change later: `studybench label`.")] = None,
    *,
    judge_options: dict[str, Any],
    verify_options: dict[str, Any],
    selection_options: dict[str, Any],
) -> None:
    """Run the StudyBench protocol (generate, verify, report). Resumable: re-run the same command.

    With --judge-model every answer the rule verifier rejects is also sent to an LLM judge and the
    report scores rule OR LLM (paper 2.2 leaderboard numbers). Exit 1 when turns failed, when the run
    measured nothing (every completion cut by the token limit or empty), when the judge pass did not
    finish (judge errors, or a judge that stopped answering: LLM verdicts missing; re-run to ask them),
    or when more than 20% of the judge's verdicts (at least 5), or all of them, are unjudgeable: the
    judge is not answering in its format (the pass stops asking once that is clear).
    Exit 3 when --max-total-tokens or --max-cost stopped the run (resumable with a higher limit).

    One command at a time may write a run directory. If the endpoint stops answering, Ctrl-C, SIGTERM
    or a full disk stop the run, what is done is kept: re-run the same command to resume."""
    from studybench.evaluate import (
        BudgetStoppedError,
        EndpointStoppedError,
        EvalError,
        EvalSpec,
        check_endpoints,
        prepare_eval,
        run_plan,
    )
    from studybench.store import RunDirInUseError

    verify_timeout, verify_workers = verify_settings(verify_options)
    rule_verifier = (ray_verifier(ray_address, verify_workers, 5.0 if verify_timeout is None else verify_timeout)
                     if use_ray or ray_address else None)  # exit 2 now, before any work, when the extra is missing
    if only_judge:
        deprecated("--only-judge", "--only-verify")
    seed_vals = _seeds(seeds, seed, seed_list)
    if backend not in ("auto", "openai", "reference"):
        fail(f"--backend must be auto, openai or reference, got {backend!r}")
    if verifier_mode is not None and verifier_mode not in ("rule", "rule+llm"):
        fail(f"--verifier-mode must be one of rule, rule+llm, got {verifier_mode!r}")
    spec_judge = judge_spec(judge_options)
    try:
        spec = EvalSpec.create(
            split=split, data_dir=data_dir, parent_slice=slice_, limit=limit, model=model, backend=backend,
            base_url=base_url, api_key_env=api_key_env, reference_mode=reference_mode, preset=preset,
            temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, presence_penalty=presence_penalty,
            repetition_penalty=repetition_penalty, max_tokens=max_tokens, context_budget=context_budget,
            **({} if min_completion_tokens is None else {"min_completion_tokens": min_completion_tokens}), thinking=thinking, concurrency=concurrency,
            request_timeout=request_timeout, max_retries=max_retries, max_consecutive_failures=max_consecutive_failures,
            liveness_timeout=liveness_timeout,
            system_prompt=system_prompt, playbook=playbook, playbook_max_tokens=playbook_max_tokens,
            guidance=guidance, ignore_unmatched_guidance=ignore_unmatched_guidance, k=k, seeds=seed_vals, verifier_mode=verifier_mode, verify_timeout=5.0 if verify_timeout is None else verify_timeout,
            verify_workers=verify_workers, judge=spec_judge, only_generate=only_generate, only_verify=only_verify or only_judge,
            retry_timeouts=retry_timeouts, labels=parse_labels(label), pricing=pricing, max_cost=max_cost,
            max_total_tokens=max_total_tokens, **selection_spec(selection_options),
        )
        plan = prepare_eval(spec, out)
    except EvalError as e:
        fail_for(e, e.field)
    except RunDirInUseError as e:
        fail(str(e), 1)
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    if plan.previous is not None:
        console.print(f"[cyan]resuming[/cyan] {escape(str(plan.run_dir))}")
        if plan.scope_changed:
            (op, ok, os_), (np_, nk, ns) = plan.previous.scope(), plan.manifest.scope()
            console.print(f"[yellow]note:[/yellow] the run directory last covered {op} parents, k={ok}, seeds={os_}; "
                          f"this invocation (and the report it writes) covers {np_} parents, k={nk}, seeds={ns}. "
                          "Rows outside it are kept.")
    if plan.guidance is not None:
        matched, unmatched = plan.guidance
        console.print(f"guidance: {plural(matched, 'selected sub-problem')} with hints; "
                      f"{plural(len(unmatched), 'guidance key')} matching no sub-problem of {plan.dataset.name}")
        if unmatched:  # only with --ignore-unmatched-guidance: otherwise prepare_eval refused them
            from studybench.protocol import unmatched_guidance_message

            console.print(f"[yellow]note:[/yellow] ignored: {escape(unmatched_guidance_message(unmatched, plan.artefacts, plan.dataset))}",
                          soft_wrap=True)
    sc, bd = plan.scope, plan.manifest.backend
    console.print(f"[bold]{escape(sc.split)}[/bold]: {plural(len(sc.parents), 'parent')}, {plural(sc.n_sub_problems, 'sub-problem')}, k={sc.k}, "
                  f"seeds={sc.seeds} -> {plural(sc.n_turns, 'turn')}; backend {escape(str(bd.get('backend')))} ({escape(str(bd.get('model')))})")
    sampling = bd.get("sampling") if isinstance(bd.get("sampling"), dict) else {}
    if sampling and plan.backend is not None and not spec.uses_reference:
        mt, cb = sampling.get("max_tokens"), sampling.get("context_budget")
        limits = ([] if mt is None else [f"completion <= {mt}"]) + ([] if cb is None else [f"prompt + completion <= {cb}"])
        console.print(f"token budgets: {' and '.join(limits) or 'none sent (the server decides)'}"
                      + (f"; a turn left fewer than {bd.get('min_completion_tokens')} completion tokens is not sent" if limits else ""))
    console.print(f"run directory: {escape(str(plan.run_dir))}", soft_wrap=True)
    try:
        for w in check_endpoints(plan):
            console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    except EvalError as e:
        fail(str(e))
    errors: list[str] = []

    def on_error(key: Any, err: str) -> None:
        errors.append(err)
        if len(errors) <= 3:
            console.print(f"[yellow]turn failed[/yellow] {escape(key.parent)} / {escape(key.sub_id)} seed {key.seed} attempt {key.attempt}: {escape(err)}")
        elif len(errors) == 4:
            console.print("[yellow]more turns failed; counting them silently[/yellow]")

    from studybench.evaluate.ray_judge import RayJudgeError
    from studybench.files import InputFileError
    from studybench.llm_judge import LLMJudgeConfigError

    done: dict[str, int] = {}

    def track(progress: Any) -> Any:
        def update(phase: str, advance: int, total: int | None) -> None:
            done[phase] = done.get(phase, 0) + advance
            progress(phase, advance, total)
        return update

    try:
        with interruptible() as term, progress_bars() as progress, rule_verifier or nullcontext():
            result = run_plan(plan, progress=track(progress), on_turn_error=on_error, preflight=False,
                              rule_verifier=rule_verifier)
    except RayJudgeError as e:
        fail(f"{e}; what was generated is saved, and running again without --ray verifies it", 1)
    except KeyboardInterrupt:
        if spec.only_verify:
            what = f"{done.get('verify', 0)} turns verified in this session and saved"
        else:
            what = f"{done.get('generate', 0) - len(errors)} of {plan.scope.n_turns} turns generated and saved"
        console.print(f"[bold yellow]interrupted:[/bold yellow] {what}; re-run the same command to resume", soft_wrap=True)
        raise typer.Exit(143 if term else 130) from None
    except EndpointStoppedError as e:
        if e.result.report is not None:
            print_report(e.result.report, plan.run_dir)
        fail(str(e), 1)
    except BudgetStoppedError as e:
        if e.result.report is not None:
            print_report(e.result.report, plan.run_dir)
        exit_budget_stopped(e)
    except RunDirInUseError as e:
        fail(str(e), 1)
    except EvalError as e:
        fail_for(e, e.field)
    except LLMJudgeConfigError as e:
        fail(f"{e}. Verdicts obtained so far are kept; the run keeps the judge it had.")
    except InputFileError as e:  # a file of the run directory became unreadable during the run
        fail(str(e))
    except OSError as e:
        fail_write(e, plan.run_dir)
    g = result.generation
    if g is not None:
        rate = f" ({g.turns_per_s:.1f} turns/s)" if g.generated else ""
        console.print(f"generated {plural(g.generated, 'turn')} ({g.reused} reused, {g.failed} failed) in {g.seconds:.1f}s{rate}")
        if g.skipped_parents:
            first = next(iter(g.skipped_parents.values()))
            console.print(f"[bold yellow]skipped {plural(len(g.skipped_parents), 'parent')} whose prompt does not fit the "
                          f"context ({plural(g.skipped, 'turn')} recorded as failed; the report lists them): e.g. "
                          f"{escape(first)}[/bold yellow]", soft_wrap=True)
    if result.rule is not None:
        timed_out = f", {result.rule.timed_out} timed out" if result.rule.timed_out else ""
        timed_out += f", {result.rule.internal_errors} internal errors" if result.rule.internal_errors else ""
        console.print(f"verified {plural(result.rule.verified, 'turn')} ({result.rule.reused} reused{timed_out}) in {result.rule.seconds:.1f}s")
    if result.llm is not None and plan.judge is not None:
        print_llm_pass(result.llm, plan.judge.model)
    judge_failed = judge_pass_failure(result.llm, plan.run_dir) if result.llm is not None and plan.judge is not None else None
    lj = ((result.report or {}).get("llm_judge") or {}) if (result.report or {}).get("scoring_used") == "liberal" else {}
    if judge_failed is None and lj.get("missing"):  # the run's judge, not given (so not asked) now
        judge_failed = (f"{lj['missing']} of {lj['rule_rejections']} rule rejections have no verdict of the run's LLM judge, "
                        f"so the liberal score is not final; run `studybench judge {plan.run_dir}` to ask them")
    if result.report is not None:
        print_report(result.report, plan.run_dir, judge_alarm=judge_failed is None and not (result.llm and result.llm.tally.alarming))
    alarmed = result.llm is not None and plan.judge is not None and print_unjudgeable_alarm(
        result.llm, plan.judge.describe(), plan.run_dir)
    exit_for_internal_errors(result.report)  # print_report said why
    if result.failed_turns:
        n = result.failed_turns
        console.print(f"[bold yellow]{plural(n, 'turn')} failed and {'counts' if n == 1 else 'count'} as incorrect.[/bold yellow]")
        _failure_advice(errors)
        raise typer.Exit(1)
    if judge_failed:
        fail(judge_failed, 1)  # one line: verdicts missing, the liberal score is not final; re-running asks them
    if alarmed or ((result.report or {}).get("llm_judge") or {}).get("alarm"):
        raise typer.Exit(1)
    if result.report is not None and (result.report.get("truncation") or {}).get("measured_nothing"):
        raise typer.Exit(1)  # the WARNING above says why: every completion was cut or empty
