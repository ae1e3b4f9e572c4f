"""Render a report (the dict :func:`studybench.report.build_report` returns) as Markdown or a Rich table."""

from __future__ import annotations

from typing import Any

from studybench.escaping import md_cell, plural
from studybench.report.completeness import scoring_label
from studybench.report.errata import errata_line
from studybench.report.tokens import token_table

__all__ = ["INTERNAL_ERROR_ADVICE", "md_cell", "render_markdown", "retries_line", "rich_table"]


INTERNAL_ERROR_ADVICE = ("the rule verifier failed on them instead of deciding (an internal error, e.g. a broken or shadowed "
                         "SymPy install), so they count as incorrect and the scores are not trustworthy. Fix the installation "
                         "(`studybench verify '\\boxed{x^2}' '\\boxed{x \\cdot x}' --type EX` must say correct), then verify "
                         "again (a run: `studybench eval --only-verify` with the run's options); such verdicts are never final.")
"""Why rule verdicts that are internal errors matter and what to do (report.md, the terminal, verify-file)."""


def retries_line(rep: dict[str, Any]) -> str | None:
    """One sentence on the turns whose request was retried (report.md, HTML and the terminal), or ``None`` when none was.

    Args:
        rep: a report (:func:`studybench.report.build_report`); its ``turns.retried``,
            ``turns.extra_requests`` and ``turns.failed_after_retries`` (present when any turn was retried).

    Returns:
        E.g. ``"Retries: 2 of 3 turns were retried after a transient failure (2 more requests); 0 failed
        after the retries."``; ``None`` for a run whose every request was answered at once (or an older report).
    """
    t = rep.get("turns") or {}
    n = t.get("retried")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return None
    extra, failed = t.get("extra_requests", 0), t.get("failed_after_retries", 0)
    return (f"Retries: {n} of {plural(t.get('expected', n), 'turn')} {'was' if n == 1 else 'were'} retried after a "
            f"transient failure ({plural(extra, 'more request')}); {failed} failed after the retries"
            f"{' (they count as failed turns)' if failed else ''}.")


def _incomplete_lines(rep: dict[str, Any]) -> list[str]:
    if rep.get("complete", True):
        return []
    t = rep["turns"]
    internal = [f"**WARNING: {plural(t['rule_internal_errors'], 'rule verdict')} {'is an internal error' if t['rule_internal_errors'] == 1 else 'are internal errors'}: {INTERNAL_ERROR_ADVICE}**", ""] \
        if t.get("rule_internal_errors") else []
    reasons = rep.get("incomplete_reasons")
    if reasons is None:  # a report written before incomplete_reasons existed
        ng, nj = rep.get("not_generated", 0), t["missing_judgements"]
        reasons = [f"of {plural(t['expected'], 'turn')}, {ng} {'was' if ng == 1 else 'were'} not generated, {t['failed']} failed "
                   f"and {nj} {'has' if nj == 1 else 'have'} no verdict"]
    return internal + [f"**Incomplete run: {md_cell('; '.join(reasons))}. What is missing counts as incorrect, so the scores below "
            "are a lower bound.**", ""]


def _warning_lines(rep: dict[str, Any]) -> list[str]:
    """The judge's unjudgeable alarm and the no-final-answer warning, as block quotes under the title."""
    out = []
    alarm = (rep.get("llm_judge") or {}).get("alarm")
    if alarm:
        out += ["", f"> **WARNING (LLM judge): {md_cell(alarm)}**"]
    fa = (rep.get("final_answers") or {}).get("warning")
    if fa:
        out += ["", f"> **WARNING: {md_cell(fa)}**"]
    return out


def _skipped_lines(rep: dict[str, Any]) -> list[str]:
    skipped = rep.get("skipped_parents") or []
    if not skipped:
        return []
    lines = [f"**Skipped parents ({len(skipped)}): their prompt does not fit the context, so they were not asked; "
             "their turns count as failed.**", ""]
    lines += [f"- {md_cell(s['parent'])}: {md_cell(s['reason'])}" for s in skipped[:100]]
    return [*lines, *([f"- ... and {len(skipped) - 100} more"] if len(skipped) > 100 else []), ""]


def _artefacts_section(rep: dict[str, Any]) -> list[str]:
    kept = rep.get("artefacts") or {}
    if not kept:
        return []
    lines = ["## Method artefacts", "", "What the model saw, kept in the run directory:", "",
             "| artefact | file | sha256 |", "|---|---|---|"]
    lines += [f"| {md_cell(name)} | [{md_cell(ref['path'])}]({md_cell(ref['path'])}) | {md_cell(ref['sha256'][:12])} |"
              for name, ref in kept.items()]
    return [*lines, ""]


def render_markdown(rep: dict[str, Any]) -> str:
    """Markdown rendering of :func:`build_report`'s output."""

    def fmt(d: dict[str, Any]) -> str:
        return f"{d['mean']:.2f}" if d["std"] is None else f"{d['mean']:.2f} ± {d['std']:.2f}"

    lines = [
        f"# StudyBench report: {md_cell(rep['split'])} / {md_cell(rep['model'])}",
        "",
        f"k = {rep['k']}{_of_run(rep)}, seeds = {rep['seeds']}, parents = {rep['parents']}, sub-problems = {rep['sub_problems']}, "
        f"verifier = {md_cell((rep.get('verifier') or {}).get('mode', 'rule'))}, scoring = {md_cell(scoring_label(rep))}",
        "",
        *([f"Labels: {md_cell(', '.join(f'{k} = {v}' for k, v in rep['labels'].items()))}", ""] if rep.get("labels") else []),
        *([md_cell(errata_line(rep["errata"])), ""] if rep.get("errata") else []),
        *_incomplete_lines(rep),
        *_skipped_lines(rep),
        "| metric | mean ± std | per seed |",
        "|---|---|---|",
        f"| Par@{rep['k']} | {fmt(rep['par_at_k'])} | {', '.join(f'{x:.2f}' for x in rep['par_at_k']['per_seed'])} |",
        f"| Sub@{rep['k']} | {fmt(rep['sub_at_k'])} | {', '.join(f'{x:.2f}' for x in rep['sub_at_k']['per_seed'])} |",
        "",
        f"Turns expected: {rep['turns']['expected']}, failed: {rep['turns']['failed']}, "
        f"missing judgements: {rep['turns']['missing_judgements']}.",
        "",
        *([md_cell(line), ""] if (line := retries_line(rep)) else []),
        *_final_answer_lines(rep.get("final_answers")),
    ]
    lines[1:1] = _warning_lines(rep)
    if rep.get("truncation"):
        lines[1:1] = _truncation_warning(rep["truncation"])
        lines += _truncation_section(rep["truncation"])
    if rep.get("pass_at_k"):
        lines += _pass_at_k_section(rep["pass_at_k"])
    lines += _tokens_section(rep)
    if rep.get("llm_judge"):
        lj = rep["llm_judge"]
        jd = lj["judge"]
        vc = lj["verdicts"]
        rate = "n/a" if lj["unjudgeable_rate"] is None else f"{100 * lj['unjudgeable_rate']:.2f}%"
        lines += [
            "## LLM judge",
            "",
            f"Judge {md_cell(jd.get('model'))} (template {md_cell(jd.get('template'))}, digest {md_cell(str(jd.get('template_digest'))[:12])}). "
            f"Rule rejections: {lj['rule_rejections']}; LLM verdicts: TRUE {vc['TRUE']}, FALSE {vc['FALSE']}, "
            f"unjudgeable {vc['unjudgeable']} (rate {rate}; counted as incorrect), error {vc['error']}, not judged {vc['not judged']}.",
            "",
        ]
        if vc["error"] or vc["not judged"]:
            lines += ["Errors and unjudged rejections count as incorrect; run `studybench judge RUN_DIR` (or the `studybench eval` "
                      "command again) to judge them.", ""]
        lines += _missing_verdict_lines(lj)
    if rep["turns"].get("rule_timeouts"):
        timeout = (rep.get("verifier") or {}).get("timeout")
        at = f" (timeout {timeout:g} s)" if isinstance(timeout, (int, float)) else ""
        lines += [f"**Rule verifier timeouts: {rep['turns']['rule_timeouts']}** attempts count as incorrect because the rule verifier "
                  f"timed out{at}. They are final for this timeout; re-run with a larger `--verify-timeout` "
                  "(or `--retry-timeouts`) to verify them again.", ""]
    lines += _artefacts_section(rep)
    if rep.get("scoring"):
        kk = rep["k"]
        lines += [
            "## Scoring conventions",
            "",
            "strict = rule verifier only; liberal = rule OR LLM judge. Accuracy is per attempt; a problem attempt is "
            "correct when all its sub-problems are. Judgeable = attempts with no unjudgeable, failed or unjudged LLM verdict.",
            "",
            f"| scoring | Par@{kk} | Sub@{kk} | per sub-problem | per sub-problem, judgeable | per problem | per problem, judgeable |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, d in rep["scoring"].items():
            def cell(g: dict[str, Any], judgeable: bool) -> str:
                if judgeable:
                    acc, n = g["judgeable_accuracy"], g["judgeable_attempts"]
                else:
                    acc, n = g["accuracy"], g["attempts"]
                return "n/a" if acc is None else f"{acc:.2f} (n={n})"

            lines.append(
                f"| {md_cell(name)} | {fmt(d['par_at_k'])} | {fmt(d['sub_at_k'])} | {cell(d['per_sub_problem'], False)} | "
                f"{cell(d['per_sub_problem'], True)} | {cell(d['per_problem'], False)} | {cell(d['per_problem'], True)} |"
            )
        lines.append("")
    for name, title in (("sub_discipline", "Sub-discipline"), ("source", "Source")):
        lines += [f"## By {title.lower()}", "", f"| {title} | parents | Par@{rep['k']} | Sub@{rep['k']} |", "|---|---|---|---|"]
        for g, d in rep["breakdowns"][name].items():
            lines.append(f"| {md_cell(g)} | {d['parents']} | {fmt(d['par_at_k'])} | {fmt(d['sub_at_k'])} |")
        lines.append("")
    lines += ["## By answer type", "", f"| answer type | sub-problems | Sub@{rep['k']} |", "|---|---|---|"]
    for t, d in rep["breakdowns"]["answer_type"].items():
        lines.append(f"| {md_cell(t)} | {d['sub_problems']} | {fmt(d['sub_at_k'])} |")
    lines.append("")
    if rep.get("label_normalisation"):
        lines += ["Sub-discipline labels normalised: " + "; ".join(f"'{md_cell(x['raw'])}' -> '{md_cell(x['normalised'])}'"
                                                                for x in rep["label_normalisation"]), ""]
    if rep.get("incorrect_reasons"):
        lines += ["## Why attempts were judged incorrect", "", "| reason | count |", "|---|---|"]
        for r, c in rep["incorrect_reasons"].items():
            lines.append(f"| {md_cell(r)} | {c} |")
        lines.append("")
    if rep.get("unsolved_sub_problems"):
        lines += [f"## Sub-problems never solved ({len(rep['unsolved_sub_problems'])})", ""]
        for u in rep["unsolved_sub_problems"][:200]:
            lines.append(f"- {md_cell(u['parent'])} / {md_cell(u['sub_id'])} ({md_cell(u['answer_type'])})")
        lines.append("")
    return "\n".join(lines)


def _final_answer_lines(fa: Any) -> list[str]:
    """One line: the answered attempts without a final answer (none for reports without the count)."""
    if not isinstance(fa, dict) or not fa.get("answered"):
        return []
    return [f"Answered attempts without a final answer: {fa['no_final_answer']} of {fa['answered']} "
            f"({100 * (fa['share'] or 0):.1f}%; a warning above {100 * fa['warn_share']:.0f}%).", ""]


def _missing_verdict_lines(lj: dict[str, Any]) -> list[str]:
    """``## Missing LLM verdicts``: the rule rejections without a final verdict (the first 200)."""
    turns = lj.get("missing_turns") or []
    if not turns:
        return []
    lines = [f"## Missing LLM verdicts ({len(turns)})", "", "| parent | sub-problem | seed | attempt | verdict | error |", "|---|---|---|---|---|---|"]
    lines += [f"| {md_cell(m['parent'])} | {md_cell(m['sub_id'])} | {m['seed']} | {m['attempt']} | {md_cell(m['verdict'])} | "
              f"{md_cell((m.get('error') or '')[:200])} |" for m in turns[:200]]
    if len(turns) > 200:
        lines.append(f"| ... {len(turns) - 200} more (report.json lists them all) | | | | | |")
    return [*lines, ""]


def _of_run(rep: dict[str, Any]) -> str:
    """`` (first k of the run's K attempts)`` for a report of a smaller k than its run's, else ``""``."""
    return f" (first {rep['k']} of the run's {rep['run_k']} attempts)" if rep.get("run_k", rep["k"]) != rep["k"] else ""


def _truncation_warning(tr: dict[str, Any]) -> list[str]:
    """The report's truncation warning as a Markdown block quote under the title (none when there is none)."""
    return ["", f"> **WARNING: {md_cell(tr['warning'])}**"] if tr.get("warning") else []


def _truncation_section(tr: dict[str, Any]) -> list[str]:
    """The ``## Truncated and empty completions`` section: overall and per seed."""

    def share(n: int, x: float | None) -> str:
        return f"{n}" if x is None else f"{n} ({100 * x:.2f}%)"

    lines = [
        "## Truncated and empty completions",
        "",
        "Answered turns (generated, not failed) that hit the token limit (`finish_reason: length`) or have no visible "
        f"text once reasoning is removed; a warning above {100 * tr['warn_share']:.0f}% overall or in one seed. "
        "Incorrect attempts are counted by the headline scoring.",
        "",
        "| seed | answered turns | truncated | empty | incorrect | incorrect, truncated | incorrect, empty |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, g in [("overall", tr["overall"]), *tr["per_seed"].items()]:
        lines.append(f"| {md_cell(name)} | {g['turns']} | {share(g['truncated'], g['truncated_share'])} | "
                     f"{share(g['empty'], g['empty_share'])} | {g['incorrect']} | {g['incorrect_truncated']} | {g['incorrect_empty']} |")
    return [*lines, ""]


def _tokens_section(rep: dict[str, Any]) -> list[str]:
    """The ``## Tokens and cost`` section: the run's tokens per run, seed and turn, then the LLM judge's.

    None when no usage was reported nor priced and the run has no LLM verdicts.
    """
    table = token_table(rep)
    judge = _judge_tokens_lines(rep.get("judge_tokens"))
    if table is None:
        return ["## Tokens and cost", "", *judge] if judge else []
    header, rows, notes = table
    lines = ["## Tokens and cost", "", *(x for n in notes for x in (md_cell(n), "")),
             "| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return [*lines, "", *judge]


def _judge_tokens_lines(jt: Any) -> list[str]:
    """One line per LLM-judge model: the tokens its requests spent, the verdict cache's share, the cost."""
    if not isinstance(jt, dict) or not jt.get("models"):
        return []
    cur = jt.get("currency") or ""
    lines = []
    for model, m in jt["models"].items():
        sp, fc = m["spent"], m["from_cache"]
        cost = "" if jt.get("currency") is None else (
            f"; cost {m['cost']:.6f} {cur}" if m["cost"] is not None else f"; no price for model {model}")
        lines.append(md_cell(f"LLM judge {model}: {plural(m['verdicts'], 'verdict', grouped=True)}; {plural(sp['requests'], 'request', grouped=True)} spent "
                             f"{sp['total_tokens']:,} tokens (prompt {sp['prompt_tokens']:,}, cached prompt "
                             f"{sp['cached_tokens']:,}, completion {sp['completion_tokens']:,}){cost}; "
                             f"{plural(fc['requests'], 'verdict', grouped=True)} came from the verdict cache ({fc['total_tokens']:,} tokens "
                             "when first asked, not spent by this run)."))
        lines.append("")
    return lines


def _pass_at_k_section(pk: dict[str, Any]) -> list[str]:
    """The ``## pass@k`` section: the unbiased pass@k for every k, per sub-problem and per parent."""

    def cell(d: dict[str, Any], i: int) -> str:
        sd = d["std"][i]
        return f"{d['mean'][i]:.2f}" if sd is None else f"{d['mean'][i]:.2f} ± {sd:.2f}"

    lines = [
        "## pass@k",
        "",
        "Unbiased estimator (Chen et al., 2021) from the run's attempts, mean ± std over seeds. Sub: per sub-problem; "
        "Par: per parent, counting the attempts that solve every sub-problem. At the run's k they are Sub@k and Par@k.",
        "",
        "| k | pass@k (Sub) | pass@k (Par) |",
        "|---|---|---|",
    ]
    lines += [f"| {kk} | {cell(pk['sub'], i)} | {cell(pk['par'], i)} |" for i, kk in enumerate(pk["k"])]
    return [*lines, ""]


def rich_table(rep: dict[str, Any]) -> Any:
    """A Rich table with Par@k / Sub@k and the sub-discipline breakdown."""
    from rich.markup import escape
    from rich.table import Table

    def fmt(d: dict[str, Any]) -> str:
        return f"{d['mean']:.2f}" if d["std"] is None else f"{d['mean']:.2f} ± {d['std']:.2f}"

    k = rep["k"]
    t = Table(title=f"StudyBench {escape(str(rep['split']))} · {escape(str(rep['model']))} · k={k}{_of_run(rep)} · seeds={len(rep['seeds'])}")
    t.add_column("group")
    t.add_column("parents", justify="right")
    t.add_column(f"Par@{k}", justify="right")
    t.add_column(f"Sub@{k}", justify="right")
    t.add_row("[bold]overall[/bold]", str(rep["parents"]), f"[bold]{fmt(rep['par_at_k'])}[/bold]", f"[bold]{fmt(rep['sub_at_k'])}[/bold]")
    for g, d in rep["breakdowns"]["sub_discipline"].items():
        t.add_row(escape(g), str(d["parents"]), fmt(d["par_at_k"]), fmt(d["sub_at_k"]))
    return t
