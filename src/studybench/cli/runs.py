"""Commands over an existing run directory: ``judge`` (LLM verdicts), ``consistency``, ``report``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.budget import BUDGET_OPTIONS, budget_tracker, cost_text, stop_for_budget
from studybench.cli.common import (
    JUDGE_OPTIONS,
    VERIFY_OPTIONS,
    console,
    deprecated,
    fail,
    fail_for,
    fail_os,
    fail_write,
    interruptible,
    judge_overrides,
    judge_spec,
    out_console,
    plural,
    progress_bars,
    verify_settings,
)
from studybench.cli.health import exit_if_incomplete
from studybench.cli.reproduce import warn_installed_versions
from studybench.cli.show import (
    TerminalMarkdown,
    exit_for_internal_errors,
    judge_pass_failure,
    print_llm_pass,
    print_report,
    print_unjudgeable_alarm,
)

__all__ = ["consistency_cmd", "judge_cmd", "report_cmd"]


@JUDGE_OPTIONS
@VERIFY_OPTIONS
@BUDGET_OPTIONS
def judge_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    judge_rule_accepts: Annotated[bool, typer.Option("--judge-rule-accepts", help="Also send rule accepts to the judge (makes the rule verifier's false accepts visible in `studybench consistency`; scores are unchanged).")] = False,
    audit_rule_accepts: Annotated[bool, typer.Option("--audit-rule-accepts", hidden=True, help="Deprecated: --judge-rule-accepts.")] = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="Judge again turns that already hold a verdict of this judge, asking the judge afresh: the verdict cache is not read, and the new verdicts replace the cached ones (--no-judge-cache: not written either).")] = False,
    activate: Annotated[bool, typer.Option("--activate/--no-activate", help="Make this judge the run's leaderboard judge (mode rule+llm). --no-activate only adds verdicts, e.g. a second judge for Cohen's kappa.")] = True,
    split_path: Annotated[Path | None, typer.Option("--split", help="The test-set file, when it is no longer where the manifest says.")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Directory holding application.json / transfer.json.")] = None,
    retry_timeouts: Annotated[bool, typer.Option("--retry-timeouts", help="Verify again attempts whose rule verdict timed out (by default final until --verify-timeout changes).")] = False,
    *,
    judge_options: dict[str, Any],
    verify_options: dict[str, Any],
    budget_options: dict[str, Any],
) -> None:
    """Add or refresh LLM judge verdicts on an existing run, without generating anything.

    Rule verdicts still missing are computed first; then every rule rejection (and with
    --judge-rule-accepts every accept) gets an LLM verdict tied to the digest of the completion it
    judged. Verdicts come from the cache when the same inputs were judged before. Writes report.json /
    report.md. Exit 1 when the pass did not finish (judge errors, or a judge that stopped answering:
    re-run to ask only the missing verdicts), or when more than 20% of the verdicts (at least 5), or
    all of them, are unjudgeable: the judge is not answering in its format (the pass stops asking once
    that is clear).

    Judge tokens (and cost with --pricing) are printed; --max-cost / --max-total-tokens count every
    judge token this run directory already spent, stop asking once reached (verdicts obtained are
    kept, rule verdicts stand, the rest stays un-judged) and exit 3; re-run with a higher limit to resume."""
    from studybench.evaluate import EvalError, add_llm_verdicts, judge_spec_from_run
    from studybench.llm_judge import LLMJudgeConfigError
    from studybench.store import RunDirInUseError, RunStore

    if audit_rule_accepts:
        deprecated("--audit-rule-accepts", "--judge-rule-accepts")
    from studybench.llm_judge import judge_usage

    verify_timeout, verify_workers = verify_settings(verify_options)
    spec = judge_spec(judge_options)
    try:
        spent = {m: u.spent for m, u in judge_usage(run_dir).items()}
    except OSError as e:
        fail(f"{run_dir}: cannot read its LLM verdicts ({e.strerror or e})")
    except ValueError as e:  # InputFileError: not a regular file, too large, a corrupt row (named)
        fail(str(e))
    budget = budget_tracker(budget_options, spent)
    try:
        if spec is None:
            try:
                manifest = RunStore(run_dir).read_manifest()
            except (OSError, ValueError) as e:
                fail(str(e))
            spec = judge_spec_from_run(manifest, **judge_overrides(judge_options))
        with interruptible() as term, progress_bars() as progress:
            res = add_llm_verdicts(run_dir, spec, judge_rule_accepts=judge_rule_accepts or audit_rule_accepts,
                                   refresh=refresh, activate=activate, split_path=split_path, data_dir=data_dir,
                                   verify_timeout=verify_timeout, verify_workers=verify_workers,
                                   retry_timeouts=retry_timeouts, progress=progress, budget=budget)
    except EvalError as e:
        fail_for(e, e.field)
    except LLMJudgeConfigError as e:
        fail(f"{e}. Verdicts obtained so far are kept; nothing else changed.")
    except RunDirInUseError as e:
        fail(str(e), 1)
    except KeyboardInterrupt:
        console.print("[bold yellow]interrupted:[/bold yellow] the verdicts obtained so far are saved; "
                      "re-run the same command to resume", soft_wrap=True)
        raise typer.Exit(143 if term else 130) from None
    except OSError as e:
        fail_write(e, run_dir)
    for note in res.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    for w in res.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    if res.rule.verified:
        internal = f" ({res.rule.internal_errors} internal errors)" if res.rule.internal_errors else ""
        console.print(f"rule verifier: verified {plural(res.rule.verified, 'turn')} that had no current rule verdict{internal}")
    print_llm_pass(res.llm, str(res.judge.get("model")))
    _print_judge_tokens(res.llm, budget, str(res.judge.get("model")))
    judge_failed = judge_pass_failure(res.llm, run_dir)
    print_report(res.report, run_dir, judge_alarm=judge_failed is None and not res.llm.tally.alarming)
    if res.llm.budget_stop:
        stop_for_budget(res.llm.budget_stop, f"{plural(res.llm.skipped, 'turn')} left un-judged (their rule verdicts stand)",
                        "Re-run the same command with a higher limit, or without one, to judge them.")
    alarmed = print_unjudgeable_alarm(res.llm, res.judge, run_dir)
    if judge_failed:
        fail(judge_failed, 1)  # one line: verdicts missing; re-running the same command asks only them
    if alarmed or (activate and (res.report.get("llm_judge") or {}).get("alarm")):
        raise typer.Exit(1)
    exit_for_internal_errors(res.report)  # print_report said why


def _print_judge_tokens(st: Any, budget: Any, model: str) -> None:
    """The judge's tokens: spent now, served from the cache, and the run's total (with cost when priced)."""
    t, c = st.tokens, st.tokens_from_cache
    pricing = budget.pricing
    now = cost_text(pricing.cost(model, t), pricing) if pricing else ""
    total = cost_text(budget.cost, pricing) if pricing else ""
    extra = "".join(f", {n:,} {what}" for n, what in ((t.cached_tokens, "cached-prompt"), (t.reasoning_tokens, "reasoning")) if n)
    console.print(
        f"judge tokens now: {t.prompt_tokens:,} prompt + {t.completion_tokens:,} completion{extra}"
        f"{f' = {now}' if now else ''}; from the verdict cache (not spent now): {plural(c.requests, 'verdict')}, "
        f"{c.total_tokens:,} tokens when asked; this run's judging so far: {budget.total_tokens:,} tokens"
        f"{f' = {total}' if total else ''}",
        soft_wrap=True,
    )


def consistency_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory with LLM verdicts (`studybench judge`).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print consistency.json to stdout instead of tables.")] = False,
) -> None:
    """Rule verifier vs LLM judge: 2x2 tables overall and per answer type, the rule verifier's precision and
    recall w.r.t. the cascade (paper Table 11), Cohen's kappa between judge configurations.

    Writes consistency.json and consistency.md into the run directory."""
    from studybench.analysis.consistency import render_consistency_markdown, write_consistency

    try:
        rep = write_consistency(run_dir)
    except OSError as e:
        fail_os(e, run_dir)  # a missing run: 2; a full disk: 1
    except ValueError as e:
        fail(str(e))
    if as_json:
        out_console.print_json(json.dumps(rep, allow_nan=False))
    else:
        out_console.print(TerminalMarkdown(render_consistency_markdown(rep)))
        console.print(f"written: {run_dir / 'consistency.json'}, {run_dir / 'consistency.md'}", soft_wrap=True)
    if not rep["judges"]:
        raise typer.Exit(1)


def _ks(values: list[str] | None) -> list[int]:
    """``-k 1 -k 4`` / ``-k 1,2,4`` as distinct ints, in the order given."""
    out: list[int] = []
    for v in values or []:
        for part in v.split(","):
            try:
                n = int(part.strip())
            except ValueError:
                fail(f"-k takes integers (e.g. -k 1 -k 4 or -k 1,2,4), got {v!r}", code=2)
            if n not in out:
                out.append(n)
    return out


def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print report.json to stdout instead of a table (with several -k: a JSON array of reports).")] = False,
    scoring: Annotated[
        str | None,
        typer.Option("--scoring", help="strict (rule verifier only) | liberal (rule OR LLM judge). Default: liberal for rule+llm runs, else strict."),
    ] = None,
    k: Annotated[
        list[str] | None,
        typer.Option("-k", "--k", help="Report Par@k / Sub@k for these k <= the run's k, from the first k attempts (-k 1 -k 4 or -k 1,2,4). Prints only: report.json / report.md keep the run's k."),
    ] = None,
    html: Annotated[bool, typer.Option("--html", help="Also write one self-contained HTML page (tables, plot, a drill-down per parent with filters); needs the analysis extra.")] = False,
    html_out: Annotated[Path | None, typer.Option("--html-out", help="Where --html writes the page (default RUN_DIR/report.html).")] = None,
    pricing: Annotated[Path | None, typer.Option("--pricing", help="Pricing file (JSON or TOML, prices per million tokens per model): the report's cost per run, seed and turn from these prices, which the run directory records for its later reports. Default: the prices the run recorded (eval --pricing), if any.")] = None,
    allow_incomplete: Annotated[bool, typer.Option("--allow-incomplete", help="With --html: write the page of an incomplete run too (a banner at its top says why) and exit 1; without it such a page is refused.")] = False,
) -> None:
    """Recompute report.json / report.md of a run directory and print the summary; with -k, print reports for smaller k.

    Exit status 1 when the run is incomplete (turns not generated, failed or without a verdict, LLM
    verdicts missing, rule verdicts that are internal errors): the report is written and says why,
    but its scores are a lower bound."""
    from studybench.costs import PricingError, load_pricing
    from studybench.report import SCORINGS, build_report, write_report

    if scoring is not None and scoring not in SCORINGS:
        fail(f"--scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    ks = _ks(k)
    try:
        prices = load_pricing(pricing) if pricing is not None else None
    except PricingError as e:
        fail(str(e))
    try:
        reps = [build_report(run_dir, scoring, kk, prices) for kk in ks] if ks else [write_report(run_dir, scoring, prices)]
    except OSError as e:
        fail_os(e, run_dir)  # a missing run: 2; a full disk: 1
    except ValueError as e:
        fail(str(e))
    page = _html_page(run_dir, html_out, scoring, prices, allow_incomplete) if html or html_out is not None else None
    warn_installed_versions(run_dir)
    if as_json:
        out_console.print_json(json.dumps(reps if len(reps) > 1 else reps[0], allow_nan=False))
    else:
        for rep in reps:
            print_report(rep, run_dir, written=not ks)
    if page is not None:
        if not as_json:
            console.print(f"HTML report: {escape(str(page))}")
        exit_if_incomplete([(str(run_dir), reps[-1]["health"])])  # the page of an incomplete run: --allow-incomplete
    exit_for_internal_errors(*reps)  # print_report said why
    incomplete = [r for r in reps if not r.get("complete", True)]
    if incomplete:  # the numbers count what is missing as incorrect: never exit 0 (docs/exit-statuses.md)
        reasons = incomplete[-1].get("incomplete_reasons") or ["turns not generated, failed or without a verdict"]
        fail(f"{run_dir}: incomplete run ({'; '.join(reasons)}): its scores are a lower bound", 1)


def _html_page(run_dir: Path, out: Path | None, scoring: str | None, pricing: Any = None, allow_incomplete: bool = False) -> Path:
    """Write the HTML page of ``studybench report --html`` (a clean message when the analysis extra is missing;
    an incomplete run's page only with ``--allow-incomplete``)."""
    from studybench.report import IncompleteRunError

    try:
        from studybench.analysis.html import write_html_report

        return write_html_report(run_dir, out, scoring, pricing=pricing, allow_incomplete=allow_incomplete)
    except IncompleteRunError as e:
        fail(str(e))
    except ImportError as e:
        fail(f"--html needs the 'analysis' extra ({e}): pip install 'studybench[analysis]'", 1)
    except (OSError, ValueError, RuntimeError) as e:
        fail(str(e), 1)
