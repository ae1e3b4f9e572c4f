"""Terminal summaries shared by ``eval``, ``judge`` and ``report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown, TableElement
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from studybench.cli.common import console, out_console, plural

__all__ = [
    "TerminalMarkdown",
    "exit_for_internal_errors",
    "judge_pass_failure",
    "print_llm_pass",
    "print_report",
    "print_truncation",
    "print_unjudgeable_alarm",
]


def _fit_columns(table: Table, console: Console, options: ConsoleOptions) -> None:
    """Give every column at least its longest word when the table is too wide for the terminal.

    Rich narrows the widest columns first, which breaks single-word headers ("unjudgeable") although
    multi-word ones ("accept: FALSE") could wrap instead. Here each column gets its longest word plus
    a share of the remaining width in proportion to how much wrapping it would save.
    """
    cells = [[c.header, *c.cells] for c in table.columns]
    lo = [max((cell_len(w) for x in col for w in str(getattr(x, "plain", x)).split()), default=1) for col in cells]
    hi = [max((cell_len(ln) for x in col for ln in str(getattr(x, "plain", x)).splitlines()), default=1) for col in cells]
    def room() -> int:
        return options.max_width - (Measurement.get(console, options.update_width(10_000), table).maximum - sum(hi))

    if sum(hi) <= room():
        return
    if sum(lo) > room():
        padding = table.padding
        table.padding = (0, 0)  # columns still one blank apart (the box's divider)
        if sum(lo) > room():
            table.padding = padding
            return  # cannot fit: rich wraps, and folds what is still too long
    spare, slack = room() - sum(lo), sum(h - m for h, m in zip(hi, lo, strict=True))
    widths = [m + (h - m) * spare // slack for h, m in zip(hi, lo, strict=True)]
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width


class _FoldingTable(TableElement):
    """A Markdown table whose cells wrap, and fold words too long for their column, instead of cutting
    them short with "…" (judge models, ids and column names stay whole on a narrow terminal)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for table in super().__rich_console__(console, options):
            if isinstance(table, Table):
                for column in table.columns:
                    column.overflow = "fold"
                _fit_columns(table, console, options)
            yield table


class TerminalMarkdown(Markdown):
    """:class:`rich.markdown.Markdown` whose tables never truncate a cell (see :class:`_FoldingTable`)."""

    elements = {**Markdown.elements, "table_open": _FoldingTable}


def print_llm_pass(st: Any, model: str) -> None:
    """One line of LLM pass counts (:class:`studybench.evaluate.LLMStats`)."""
    v = st.verdicts
    console.print(
        f"llm judge {escape(model)}: {st.candidates} candidates ({st.reused} already judged in this run), "
        f"{st.judged} judged now ({st.cache_hits} from the cache, {st.shared} shared with identical inputs, {plural(st.requests, 'request')}): "
        f"TRUE {v.get('TRUE', 0)}, FALSE {v.get('FALSE', 0)}, unjudgeable {v.get('unjudgeable', 0)}, error {v.get('error', 0)} "
        f"in {st.seconds:.1f}s",
        soft_wrap=True,
    )
    if st.no_rule_verdict:
        console.print(f"[yellow]{plural(st.no_rule_verdict, 'turn')} without a current rule verdict were not sent to the judge[/yellow]")


def print_unjudgeable_alarm(st: Any, judge: dict[str, Any], run_dir: Path) -> bool:
    """The warning of an LLM pass whose verdicts are mostly unjudgeable (:class:`studybench.evaluate.LLMStats`).

    Args:
        st: the pass's counts.
        judge: the judge's description (``model``, ``max_tokens``).
        run_dir: the run directory (for the command that judges it again).

    Returns:
        Whether it warned (the command then exits with status 1).
    """
    alarm = st.tally.alarm(str(judge.get("model")), max_tokens=judge.get("max_tokens"))
    if alarm is None:
        return False
    console.print(f"[bold red]warning:[/bold red] {escape(alarm)}", soft_wrap=True)
    console.print(f"[bold yellow]Fix the judge, then run `studybench judge {escape(str(run_dir))} --refresh` to judge "
                  "these turns again (add the judge options that changed, e.g. --judge-max-tokens).[/bold yellow]", soft_wrap=True)
    return True


def judge_pass_failure(st: Any, run_dir: Path) -> str | None:
    """The one line that ends a command whose LLM pass left verdicts missing (the command exits 1), else ``None``.

    A pass that only ran out of budget is not a failure here (its own message and exit status 3).

    Args:
        st: the pass's counts (:class:`studybench.evaluate.LLMStats`).
        run_dir: the run directory (named in the command that judges again).

    Returns:
        Why the pass did not finish, how many verdicts are missing, and what to run.
    """
    errors = st.verdicts.get("error", 0)
    if not (errors or st.stopped):
        return None
    missing = f"{st.missing} of {plural(st.candidates - st.reused, 'LLM verdict')} asked for {'is' if st.missing == 1 else 'are'} missing"
    if st.stopped and st.stopped.startswith("the judge's verdicts are mostly unjudgeable"):
        return (f"the LLM judge pass stopped early: {st.stopped}; {missing}, so the liberal score is not final. Fix the "
                f"judge (see the warning above), then run `studybench judge {run_dir} --refresh`.")
    why = st.stopped or f"{plural(errors, 'judge request')} failed after retries ({st.first_error})"
    return (f"the LLM judge pass did not finish: {why}; {missing}, so the liberal score is not final (report.json: "
            "complete false); run the same command again to ask them once the judge endpoint answers.")


def print_truncation(tr: dict[str, Any]) -> None:
    """Turns cut by the token limit and empty turns, overall and per seed, and the loud warning.

    Args:
        tr: ``report["truncation"]`` (:func:`studybench.report.build_report`).
    """

    def share(g: dict[str, Any], key: str) -> str:
        x = g[f"{key}_share"]
        return f"{g[key]}" if x is None else f"{g[key]} ({100 * x:.1f}%)"

    o = tr["overall"]
    seeds = "; ".join(f"seed {s}: {share(g, 'truncated')} truncated, {share(g, 'empty')} empty" for s, g in tr["per_seed"].items())
    console.print(f"completions: {share(o, 'truncated')} of {plural(o['turns'], 'answered turn')} hit the token limit, "
                  f"{share(o, 'empty')} empty; {o['incorrect_truncated']} of {plural(o['incorrect'], 'incorrect attempt')} truncated"
                  + (f" ({seeds})" if len(tr["per_seed"]) > 1 else ""), soft_wrap=True)
    if tr.get("warning"):
        console.print(f"[bold red]WARNING: {escape(tr['warning'])}[/bold red]", soft_wrap=True)


def _print_tokens(rep: dict[str, Any]) -> None:
    """One line: the run's tokens and, with prices, its cost (or why it has none)."""
    tok, cost = (rep.get("tokens") or {}).get("total"), rep.get("cost")
    if not tok or (not cost and tok["requests"] == tok["unreported"]):
        return
    line = (f"tokens: {tok['total_tokens']:,} in {plural(tok['requests'], 'request')} (prompt {tok['prompt_tokens']:,}, "
            f"{tok['cached_tokens']:,} cached; completion {tok['completion_tokens']:,}, {tok['reasoning_tokens']:,} reasoning)"
            + (f"; {tok['unreported']} reported no usage" if tok["unreported"] else ""))
    if cost:
        line += "; cost " + (f"{cost['total']:,.6f} {cost['currency']}" if cost["total"] is not None else f"unknown: {cost['reason']}")
    console.print(escape(line), soft_wrap=True)


def print_report(rep: dict[str, Any], run_dir: Path, written: bool = True, *, judge_alarm: bool = True) -> None:
    """The report's table, its warnings (failed turns, missing verdicts, truncation, final answers, LLM counts) and where it is.

    Args:
        rep: the report (:func:`studybench.report.build_report`).
        run_dir: its run directory.
        written: whether ``report.json`` / ``report.md`` hold this report (else the last line says they were not rewritten).
        judge_alarm: print the report's unjudgeable alarm and the missing-LLM-verdicts note (``False`` when the
            command has just said so for its own LLM pass).
    """
    from studybench.report import rich_table
    from studybench.report.completeness import scoring_label
    from studybench.report.errata import errata_line
    from studybench.report.render import retries_line

    out_console.print(rich_table(rep))
    if (errata := errata_line(rep.get("errata"))) is not None:
        console.print(escape(errata), soft_wrap=True)
    if (retries := retries_line(rep)) is not None:  # the backend's retries after transient failures (eval, report)
        console.print(escape(retries), soft_wrap=True)
    if rep.get("truncation"):
        print_truncation(rep["truncation"])
    t = rep["turns"]
    if rep.get("not_generated"):
        console.print(f"[bold yellow]incomplete run: {rep['not_generated']} of {plural(t['expected'], 'turn')} not generated; "
                      "the scores are a lower bound until the run is finished (run the `studybench eval` command that made "
                      "it again, without --only-verify).[/bold yellow]",
                      soft_wrap=True)
    fa = rep.get("final_answers") or {}
    if fa.get("answered"):
        console.print(f"final answers: {fa['no_final_answer']} of {plural(fa['answered'], 'answered attempt')} {'has' if fa['no_final_answer'] == 1 else 'have'} none"
                      f" ({100 * (fa['share'] or 0):.1f}%)", soft_wrap=True)
    if fa.get("warning"):
        console.print(f"[bold red]WARNING: {escape(fa['warning'])}[/bold red]", soft_wrap=True)
    if t["failed"] or t["missing_judgements"]:
        console.print(
            f"[yellow]{plural(t['failed'], 'failed turn')} and {plural(t['missing_judgements'], 'turn')} without a current "
            f"verdict (of {t['expected']}) count as incorrect above.[/yellow]"
        )
    if t.get("rule_timeouts"):
        n, timeout = t["rule_timeouts"], (rep.get("verifier") or {}).get("timeout")
        at = f" (timeout {timeout:g} s)" if isinstance(timeout, (int, float)) else ""
        console.print(
            f"[bold yellow]warning: the rule verifier timed out on {plural(n, 'attempt')}{at}; "
            f"{'it counts' if n == 1 else 'they count'} as incorrect above and {'is' if n == 1 else 'are'} not verified again "
            f"with this timeout. Re-run with a larger --verify-timeout (or --retry-timeouts) to verify {'it' if n == 1 else 'them'} again."
            "[/bold yellow]",
            soft_wrap=True,
        )
    if t.get("rule_internal_errors"):
        from studybench.report import INTERNAL_ERROR_ADVICE

        console.print(f"[bold red]ERROR: {plural(t['rule_internal_errors'], 'rule verdict')} of {plural(t['expected'], 'turn')} "
                      f"{'is an internal error' if t['rule_internal_errors'] == 1 else 'are internal errors'}: "
                      f"{escape(INTERNAL_ERROR_ADVICE)}[/bold red]", soft_wrap=True)
    lj = rep.get("llm_judge")
    if lj:
        v = lj["verdicts"]
        rate = "n/a" if lj["unjudgeable_rate"] is None else f"{100 * lj['unjudgeable_rate']:.2f}%"
        console.print(
            f"scoring {escape(scoring_label(rep))}: LLM judge {escape(str(lj['judge'].get('model')))} on {plural(lj['rule_rejections'], 'rule rejection')}: "
            f"TRUE {v['TRUE']}, FALSE {v['FALSE']}, unjudgeable {v['unjudgeable']} ({rate}), error {v['error']}, not judged {v['not judged']}",
            soft_wrap=True,
        )
        if (v["error"] or v["not judged"]) and judge_alarm:
            console.print(f"[yellow]{plural(v['error'] + v['not judged'], 'rule rejection')} {'has' if v['error'] + v['not judged'] == 1 else 'have'} no LLM verdict and {'counts' if v['error'] + v['not judged'] == 1 else 'count'} as incorrect; "
                          f"run `studybench judge {escape(str(run_dir))}` to judge them.[/yellow]", soft_wrap=True)
        if lj.get("alarm") and judge_alarm:
            console.print(f"[bold red]warning:[/bold red] {escape(lj['alarm'])}", soft_wrap=True)
    _print_tokens(rep)
    if written:
        console.print(f"report: {escape(str(run_dir / 'report.json'))}, {escape(str(run_dir / 'report.md'))}", soft_wrap=True)
    else:
        console.print(f"k={rep['k']} of the run's {rep.get('run_k', rep['k'])} attempts: {escape(str(run_dir / 'report.json'))} "
                      "and report.md are not rewritten", soft_wrap=True)


def exit_for_internal_errors(*reports: dict[str, Any] | None) -> None:
    """Exit 1 when a report holds rule verdicts that are internal errors (``turns.rule_internal_errors``).

    Called last by every command that prints a report (``eval``, ``judge``, ``report``), after
    :func:`print_report` said why: such scores are not trustworthy and never exit 0.

    Args:
        reports: the reports printed (``None`` entries are skipped).
    """
    n = sum(int((r.get("turns") or {}).get("rule_internal_errors") or 0) for r in reports if r)
    if n:
        console.print(f"[bold red]error:[/bold red] {plural(n, 'rule verdict')} {'is an internal error' if n == 1 else 'are internal errors'} "
                      "of the rule verifier; the scores are not trustworthy (exit 1)", soft_wrap=True)
        raise typer.Exit(1)
