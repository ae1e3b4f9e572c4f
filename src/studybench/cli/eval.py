"""``studybench eval``: options -> :class:`~studybench.evaluate.EvalSpec` -> :func:`~studybench.evaluate.run_plan`.

The options of each part of the spec are declared once in :mod:`studybench.cli.spec_options`.
"""

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
    OptionSet,
    console,
    deprecated,
    fail,
    fail_for,
    fail_write,
    interruptible,
    plural,
    progress_bars,
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
from studybench.cli.spec_options import (
    ARTEFACT_OPTIONS,
    DATA_OPTIONS,
    EVAL_BUDGET_OPTIONS,
    EVAL_ORDER,
    GENERATION_OPTIONS,
    VERIFICATION_OPTIONS,
    artefact_part,
    budget_part,
    data_part,
    generation_part,
    verification_part,
)
from studybench.cli.verify import RAY_ADDRESS_HELP, RAY_HELP, ray_verifier

__all__ = ["eval_cmd"]


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



@OptionSet.ordered(EVAL_ORDER)
@JUDGE_OPTIONS
@VERIFY_OPTIONS
@SELECTION_OPTIONS
@EVAL_BUDGET_OPTIONS
@VERIFICATION_OPTIONS
@ARTEFACT_OPTIONS
@GENERATION_OPTIONS
@DATA_OPTIONS
def eval_cmd(
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default runs/<model>-<split>, runs/reference-<mode>-<split> for the reference backend). Re-running the same command resumes.")] = None,
    only_generate: Annotated[bool, typer.Option("--only-generate", help="Generate turns, do not verify or report.")] = False,
    only_verify: Annotated[bool, typer.Option("--only-verify", help="Verify existing turns and report; generate nothing (needs no endpoint).")] = False,
    only_judge: Annotated[bool, typer.Option("--only-judge", hidden=True, help="Deprecated: --only-verify.")] = False,
    use_ray: Annotated[bool, typer.Option("--ray", rich_help_panel="Rule verifier", help=RAY_HELP + " --verify-workers: the actors.")] = False,
    ray_address: Annotated[str | None, typer.Option("--ray-address", metavar="ADDRESS", rich_help_panel="Rule verifier", help=RAY_ADDRESS_HELP)] = None,
    label: Annotated[list[str] | None, typer.Option("--label", metavar="KEY=VALUE", help="KEY=VALUE stored in the manifest and the report (repeatable), e.g. --label method=GEPA; a resumed run merges them (later wins). Change later: `studybench label`.")] = None,
    *,
    data_options: dict[str, Any],
    generation_options: dict[str, Any],
    artefact_options: dict[str, Any],
    verification_options: dict[str, Any],
    budget_options: dict[str, Any],
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
    data = data_part(data_options, selection_options)
    generation = generation_part(generation_options)
    verification = verification_part(verification_options, judge_options, verify_timeout, verify_workers)
    try:
        spec = EvalSpec(
            data=data, generation=generation,
            budgets=budget_part(budget_options), verification=verification, artefacts=artefact_part(artefact_options),
            only_generate=only_generate, only_verify=only_verify or only_judge, labels=parse_labels(label),
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
            console.print(f"[yellow]note:[/yellow] the run directory last covered {plural(op, 'parent')}, k={ok}, seeds={os_}; "
                          f"this invocation (and the report it writes) covers {plural(np_, 'parent')}, k={nk}, seeds={ns}. "
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
            what = f"{plural(done.get('verify', 0), 'turn')} verified in this session and saved"
        else:
            what = f"{done.get('generate', 0) - len(errors)} of {plural(plan.scope.n_turns, 'turn')} generated and saved"
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
        retried = f", {g.retried} retried" if g.retried else ""
        console.print(f"generated {plural(g.generated, 'turn')} ({g.reused} reused{retried}, {g.failed} failed) in {g.seconds:.1f}s{rate}")
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
        judge_failed = (f"{lj['missing']} of {plural(lj['rule_rejections'], 'rule rejection')} {'has' if lj['missing'] == 1 else 'have'} no verdict of the run's LLM judge, "
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
