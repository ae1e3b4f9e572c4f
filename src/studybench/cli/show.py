"""Terminal summaries shared by ``eval``, ``judge`` and ``report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from studybench.cli.common import console, out_console, plural

__all__ = ["print_llm_pass", "print_report"]


def print_llm_pass(st: Any, model: str) -> None:
    """One line of LLM pass counts (:class:`studybench.evaluate.LLMStats`)."""
    v = st.verdicts
    console.print(
        f"llm judge {escape(model)}: {st.candidates} candidates ({st.reused} already judged in this run), "
        f"{st.judged} judged now ({st.cache_hits} from the cache, {st.shared} shared with identical inputs, {st.requests} requests): "
        f"TRUE {v.get('TRUE', 0)}, FALSE {v.get('FALSE', 0)}, unjudgeable {v.get('unjudgeable', 0)}, error {v.get('error', 0)} "
        f"in {st.seconds:.1f}s",
        soft_wrap=True,
    )
    if st.no_rule_verdict:
        console.print(f"[yellow]{plural(st.no_rule_verdict, 'turn')} without a current rule verdict were not sent to the judge[/yellow]")


def print_report(rep: dict[str, Any], run_dir: Path) -> None:
    """The report's table, its warnings (failed turns, missing verdicts, LLM counts) and where it is."""
    from studybench.report import rich_table

    out_console.print(rich_table(rep))
    t = rep["turns"]
    if rep.get("not_generated"):
        console.print(f"[bold yellow]incomplete run: {rep['not_generated']} of {t['expected']} turns not generated; "
                      "the scores are a lower bound until the run is finished (re-run the same command).[/bold yellow]",
                      soft_wrap=True)
    if t["failed"] or t["missing_judgements"]:
        console.print(
            f"[yellow]{plural(t['failed'], 'failed turn')} and {plural(t['missing_judgements'], 'turn')} without a current "
            f"verdict (of {t['expected']}) count as incorrect above.[/yellow]"
        )
    lj = rep.get("llm_judge")
    if lj:
        v = lj["verdicts"]
        rate = "n/a" if lj["unjudgeable_rate"] is None else f"{100 * lj['unjudgeable_rate']:.2f}%"
        console.print(
            f"scoring {rep.get('scoring_used')}: LLM judge {escape(str(lj['judge'].get('model')))} on {lj['rule_rejections']} rule rejections: "
            f"TRUE {v['TRUE']}, FALSE {v['FALSE']}, unjudgeable {v['unjudgeable']} ({rate}), error {v['error']}, not judged {v['not judged']}",
            soft_wrap=True,
        )
        if v["error"] or v["not judged"]:
            console.print(f"[yellow]{v['error'] + v['not judged']} rule rejections have no LLM verdict and count as incorrect; "
                          f"run `studybench judge {escape(str(run_dir))}` to judge them.[/yellow]", soft_wrap=True)
    console.print(f"report: {escape(str(run_dir / 'report.json'))}, {escape(str(run_dir / 'report.md'))}", soft_wrap=True)
