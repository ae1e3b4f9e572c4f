"""Whether a report's numbers are final: missing LLM verdicts, the unjudgeable alarm, answers without a final answer.

A report is *complete* (``report["complete"]``) when ``report["incomplete_reasons"]`` is empty; each
reason is one short line that says what is missing and how to get it:

- turns never generated, failed, or without a rule verdict (an interrupted or stopped run);
- with the liberal headline (rule OR LLM judge), rule rejections without a final LLM verdict of the
  active judge (TRUE, FALSE or unjudgeable): a transport ``error`` (a judge that dropped connections,
  was killed mid-pass or stopped answering) or no verdict at all (a pass stopped early). The liberal
  score then counts them as incorrect: it is a lower bound, and often the strict score itself.

The ``llm_judge`` block (:func:`llm_judge_block`) says which verdicts are missing
(``missing_turns``), whether the judge pass ``finished``, and carries the unjudgeable ``alarm``
(:class:`studybench.llm_judge.UnjudgeableTally`) computed from the run's counting verdicts, so that
``report.md`` and the HTML report show it too. :func:`final_answer_block` counts the answered
attempts from which no final answer could be extracted, with a warning when they are most of them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from studybench.escaping import plural
from studybench.llm_judge import LLMVerdict, UnjudgeableTally
from studybench.store import FINAL_LLM_VERDICTS, TurnVerdict

__all__ = [
    "NO_FINAL_ANSWER_REASON",
    "NO_FINAL_ANSWER_WARN_SHARE",
    "final_answer_block",
    "incomplete_reasons",
    "llm_judge_block",
    "scoring_label",
]

NO_FINAL_ANSWER_REASON = "incorrect: no final answer found"
"""The rule verifier's reason when no answer could be extracted from a reply (docs/protocol.md section 4)."""

NO_FINAL_ANSWER_WARN_SHARE = 0.5
"""Reports warn when more than this share of the answered attempts has no final answer."""


def llm_judge_block(table: list[TurnVerdict], judge: dict[str, Any]) -> dict[str, Any]:
    """The report's ``llm_judge`` block for the active judge.

    Args:
        table: the run's verdict table (:func:`studybench.store.turn_verdicts` with the judge's id).
        judge: the active judge's description (the manifest's).

    Returns:
        ``judge``, ``rule_rejections``, ``verdicts`` (TRUE, FALSE, unjudgeable, error, not judged),
        ``unjudgeable_rate`` (of the final verdicts), ``missing`` (rule rejections without a final
        verdict), ``missing_turns`` (each: parent, sub_id, seed, attempt, ``verdict`` ``"error"`` or
        ``"not judged"`` and the ``error``), ``finished`` (nothing missing) and ``alarm`` (the
        unjudgeable warning, else ``None``).
    """
    counts: Counter[str] = Counter()
    tally = UnjudgeableTally()
    missing: list[dict[str, Any]] = []
    rejections = 0
    for t in table:
        if t.llm is None:
            continue
        rejections += 1
        value = t.llm.value
        counts[value if value is not None else "not judged"] += 1
        row = t.llm.verdict
        if value in FINAL_LLM_VERDICTS and row is not None:
            tally.add(LLMVerdict(value, reply=row.reply or "", error=row.error))
        else:
            missing.append({**{k: getattr(t.key, k) for k in ("parent", "sub_id", "seed", "attempt")},
                            "verdict": value or "not judged", "error": None if row is None else row.error})
    judged = sum(counts[v] for v in FINAL_LLM_VERDICTS)
    return {
        "judge": judge,
        "rule_rejections": rejections,
        "verdicts": {v: counts.get(v, 0) for v in ("TRUE", "FALSE", "unjudgeable", "error", "not judged")},
        "unjudgeable_rate": round(counts["unjudgeable"] / judged, 6) if judged else None,
        "missing": len(missing),
        "finished": not missing,
        "missing_turns": missing,
        "alarm": tally.alarm(str(judge.get("model")), max_tokens=judge.get("max_tokens")),
    }


def final_answer_block(table: list[TurnVerdict]) -> dict[str, Any]:
    """Answered attempts without a final answer (``report["final_answers"]``).

    Args:
        table: the run's verdict table.

    Returns:
        ``answered`` (attempts with a usable completion and a counting rule verdict),
        ``no_final_answer`` (of those, the ones the rule verifier found no final answer in),
        ``share``, ``warn_share`` (:data:`NO_FINAL_ANSWER_WARN_SHARE`) and ``warning`` (a sentence
        when the share is above it, else ``None``).
    """
    answered = none = 0
    for t in table:
        if not t.rule.judgeable or t.rule.verdict is None:
            continue
        answered += 1
        none += t.rule.verdict.reason.startswith(NO_FINAL_ANSWER_REASON)
    share = none / answered if answered else None
    warning = None
    if share is not None and share > NO_FINAL_ANSWER_WARN_SHARE:
        warning = (f"{none} of {plural(answered, 'answered attempt')} ({100 * share:.0f}%) {'has' if none == 1 else 'have'} no final answer (nothing could be "
                   "extracted: no \\boxed{} answer after 'Final Answer:'), so they count as incorrect: the scores measure "
                   "the answer format more than the physics. Read a few replies (`report --html`, or `export attempts`); check the model's chat "
                   "template and system prompt, and whether replies are cut by the token limit.")
    return {"answered": answered, "no_final_answer": none, "share": None if share is None else round(share, 6),
            "warn_share": NO_FINAL_ANSWER_WARN_SHARE, "warning": warning}


def incomplete_reasons(rep: dict[str, Any]) -> list[str]:
    """Why a report's numbers are not final, one short line each (empty: complete).

    Args:
        rep: the report, with ``turns``, ``not_generated``, ``scoring_used`` and (for a run with an
            active judge) ``llm_judge`` from :func:`llm_judge_block`.

    Returns:
        The reasons, in the order: not generated, failed, without a rule verdict, rule verdicts that
        are internal errors of the rule verifier, LLM verdicts missing (only when the headline is liberal: a strict score does not depend on them).
    """
    t, n = rep["turns"], rep["turns"]["expected"]
    out = []
    if rep.get("not_generated"):
        out.append(f"{rep['not_generated']} of {plural(n, 'turn')} not generated; run the `studybench eval` command that made the "
                   "run again (without --only-verify) to generate them")
    if t.get("failed"):
        out.append(f"{t['failed']} of {plural(n, 'turn')} failed; run the `studybench eval` command again to retry them")
    verified_missing = t.get("missing_judgements", 0) - rep.get("not_generated", 0)  # generated, no counting rule verdict
    if verified_missing > 0:
        out.append(f"{verified_missing} of {plural(n, 'generated turn')} {'has' if verified_missing == 1 else 'have'} no current rule verdict; run `studybench eval` "
                   "again (or `studybench judge RUN_DIR`) to verify them")
    if t.get("rule_internal_errors"):
        out.append(f"{plural(t['rule_internal_errors'], 'rule verdict')} {'is an internal error' if t['rule_internal_errors'] == 1 else 'are internal errors'} of the rule verifier (not decided); "
                   "fix the installation and verify again (`studybench eval --only-verify`)")
    lj = rep.get("llm_judge")
    if lj and rep.get("scoring_used") == "liberal" and lj.get("missing"):
        v = lj["verdicts"]
        why = ", ".join(x for x in (f"{v['error']} judge errors" if v["error"] else "",
                                    f"{v['not judged']} not judged" if v["not judged"] else "") if x)
        out.append(f"{lj['missing']} of {plural(lj['rule_rejections'], 'LLM verdict')} missing ({why}); re-run the same command "
                   "to ask them")
    return out


def scoring_label(rep: dict[str, Any]) -> str:
    """The headline scoring in words, with what makes a liberal score not what it seems.

    Args:
        rep: a report (:func:`studybench.report.build_report`).

    Returns:
        ``"strict (rule verifier only)"``; ``"liberal (rule OR LLM judge)"`` when the judge pass
        finished and the judge answered in its format; otherwise the liberal label says that the
        score is not final (LLM verdicts missing) or that the judge's verdicts are mostly unjudgeable.
    """
    if rep.get("scoring_used") != "liberal":
        return "strict (rule verifier only)"
    lj = rep.get("llm_judge") or {}
    notes = []
    if lj.get("missing"):
        notes.append(f"NOT FINAL: {lj['missing']} of {plural(lj['rule_rejections'], 'LLM verdict')} missing, counted as incorrect, "
                     "so the score is a lower bound")
    if lj.get("alarm"):
        rate = lj.get("unjudgeable_rate") or 0.0
        notes.append(f"UNRELIABLE: {100 * rate:.0f}% of the judge's verdicts are unjudgeable (counted as incorrect)")
    return "liberal (rule OR LLM judge)" + (f"; {'; '.join(notes)}" if notes else "")
