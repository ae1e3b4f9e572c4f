"""``studybench reproduce RUN_DIR --out NEW``: re-run a run's recorded configuration (:func:`~studybench.evaluate.reproduce_run`).

Also the two helpers other commands share: :func:`differences_table` (the manifest fields in which two
runs differ: ``compare`` and ``reproduce`` print it) and :func:`warn_installed_versions` (``report`` and
``leaderboard`` warn when the installed packages are not the ones a run recorded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from studybench.cli.budget import exit_budget_stopped
from studybench.cli.common import console, fail, fail_for, fail_write, interruptible, plural, progress_bars
from studybench.cli.show import print_report

__all__ = ["differences_table", "reproduce_cmd", "warn_installed_versions"]


def _short(value: Any, limit: int = 48) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def differences_table(diffs: list[tuple[str, Any, Any]], a: str, b: str) -> Table:
    """A table of the manifest fields in which two runs differ (:func:`studybench.store.manifest_differences`).

    Args:
        diffs: ``(field, value in A, value in B)``.
        a: the name of side A (shown in its column's header).
        b: the name of side B.

    Returns:
        A Rich table with one row per field.
    """
    t = Table(title="manifest differences (configuration and environment)", title_justify="left")
    t.add_column("field")
    t.add_column(f"A ({escape(_short(a, 40))})")
    t.add_column(f"B ({escape(_short(b, 40))})")
    for name, va, vb in diffs:
        t.add_row(escape(name), escape(_short(va)), escape(_short(vb)))
    return t


def warn_installed_versions(run_dir: Path, manifest: Any = None, *, prefix: str = "") -> int:
    """Print one warning line (stderr) when installed package versions differ from those a run recorded.

    Args:
        run_dir: the run directory.
        manifest: its manifest when already read (``None``: read here; an unreadable one warns of nothing).
        prefix: text before the message (e.g. the run's name when several runs are shown).

    Returns:
        How many packages differ.
    """
    from studybench.store import RunStore, version_mismatches

    if manifest is None:
        try:
            manifest = RunStore(run_dir).read_manifest()
        except (OSError, ValueError):
            return 0
    diffs = version_mismatches(manifest)
    if diffs:
        listed = "; ".join(f"{name} {_short(old)} (run) vs {_short(new)} (installed)" for name, old, new in diffs)
        console.print(f"[yellow]warning:[/yellow] {escape(prefix)}installed package versions differ from the run's, "
                      f"so verdicts or requests may differ: {escape(listed)}", soft_wrap=True)
    return len(diffs)


def reproduce_cmd(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to re-run (made by `studybench eval`).")],
    out: Annotated[Path, typer.Option("--out", help="The new run directory (re-running the same command resumes it).")],
    split: Annotated[Path | None, typer.Option("--split", help="The test-set file, when it is no longer where the run's manifest says (checked by sha256).")] = None,
    allow_data_change: Annotated[bool, typer.Option("--allow-data-change", help="Re-run on the test-set file as it is now even though its sha256 differs from the run's.")] = False,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Another endpoint for the model (e.g. a new server); recorded as an override.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Another model name at the endpoint; recorded as an override.")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Another endpoint for the LLM judge of a rule+llm run.")] = None,
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="The run's system-prompt file, when it moved (checked by sha256).")] = None,
    playbook: Annotated[Path | None, typer.Option("--playbook", help="The run's playbook file, when it moved (checked by sha256).")] = None,
    guidance: Annotated[Path | None, typer.Option("--guidance", help="The run's guidance file, when it moved (checked by sha256).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Requests in flight (default: the run's).")] = None,
    verify_workers: Annotated[int | None, typer.Option("--verify-workers", help="Rule verifier worker processes.")] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", rich_help_panel="Tokens and cost", help="Stop cleanly (exit 3) once the reproduction cost this much, at the run's recorded prices; re-run with a higher limit to resume.")] = None,
    max_total_tokens: Annotated[int | None, typer.Option("--max-total-tokens", rich_help_panel="Tokens and cost", help="Stop cleanly (exit 3) once the reproduction spent this many prompt + completion tokens; re-run with a higher limit (or none) to resume.")] = None,
) -> None:
    """Re-run a run with the configuration its manifest records, into a new run directory.

    The same test-set file (refused when its sha256 changed, unless --allow-data-change), selection,
    k, seeds, model and endpoint, sampling, artefact files (each checked by sha256) and verifier (mode,
    timeout, LLM judge) and prices. API keys come from the environment variables the run named. Then `studybench
    compare RUN_DIR NEW` shows the paired difference and how the two manifests differ."""
    from studybench.evaluate import (
        BudgetStoppedError,
        EndpointStoppedError,
        EvalError,
        prepare_reproduction,
        run_plan,
    )
    from studybench.llm_judge import LLMJudgeConfigError
    from studybench.store import RunDirInUseError, RunStore, manifest_differences

    try:
        plan, rep = prepare_reproduction(
            run_dir, out, split_path=split, allow_data_change=allow_data_change, base_url=base_url, model=model,
            judge_base_url=judge_base_url, system_prompt=system_prompt, playbook=playbook, guidance=guidance,
            concurrency=concurrency, verify_workers=verify_workers, max_cost=max_cost,
            max_total_tokens=max_total_tokens)
    except EvalError as e:
        fail_for(e, e.field)
    except RunDirInUseError as e:
        fail(str(e), 1)
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    sc, bd = plan.scope, plan.manifest.backend
    over = ", ".join(f"{k}={v}" for k, v in rep.overrides.items())
    console.print(f"reproducing {escape(str(run_dir))} -> {escape(str(plan.run_dir))}"
                  f"{'' if not over else f' (overrides: {escape(over)})'}", soft_wrap=True)
    console.print(f"[bold]{escape(sc.split)}[/bold]: {plural(len(sc.parents), 'parent')}, k={sc.k}, seeds={sc.seeds} -> "
                  f"{plural(sc.n_turns, 'turn')}; backend {escape(str(bd.get('backend')))} ({escape(str(bd.get('model')))}); "
                  f"verifier {escape(str(plan.manifest.verifier.mode if plan.manifest.verifier else 'rule'))}", soft_wrap=True)
    errors: list[str] = []

    def on_error(key: Any, err: str) -> None:
        errors.append(err)
        if len(errors) <= 3:
            console.print(f"[yellow]turn failed[/yellow] {escape(key.parent)} / {escape(key.sub_id)} seed {key.seed} "
                          f"attempt {key.attempt}: {escape(err)}", soft_wrap=True)

    try:
        with interruptible() as term, progress_bars() as progress:
            result = run_plan(plan, progress=progress, on_turn_error=on_error)
    except KeyboardInterrupt:
        console.print("[bold yellow]interrupted:[/bold yellow] what was done is saved; re-run the same command to resume",
                      soft_wrap=True)
        raise typer.Exit(143 if term else 130) from None
    except EndpointStoppedError as e:
        fail(str(e), 1)
    except BudgetStoppedError as e:
        exit_budget_stopped(e)
    except RunDirInUseError as e:
        fail(str(e), 1)
    except EvalError as e:
        fail_for(e, e.field)
    except LLMJudgeConfigError as e:
        fail(str(e), 1)
    except OSError as e:
        fail_write(e, plan.run_dir)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True)
    if result.report is not None:
        print_report(result.report, plan.run_dir)
    try:
        diffs = manifest_differences(rep.original, RunStore(plan.run_dir).read_manifest())
    except (OSError, ValueError):
        diffs = []
    if diffs:
        console.print(differences_table(diffs, str(run_dir), str(plan.run_dir)))
    else:
        console.print("manifests: the same configuration and environment")
    console.print(f"compare the two runs: studybench compare {escape(str(run_dir))} {escape(str(plan.run_dir))}",
                  soft_wrap=True)
    if result.failed_turns:
        console.print(f"[bold yellow]{plural(result.failed_turns, 'turn')} failed and count as incorrect; "
                      "re-run the same command to retry them.[/bold yellow]")
        raise typer.Exit(1)
