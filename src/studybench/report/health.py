"""A run's health: whether its numbers may be compared with other runs' (``report["health"]``).

Every surface that puts runs side by side (``leaderboard``, ``compare``, ``guidance-gap``,
``plateau``, ``export attempts``, the HTML report) reads each run through :func:`load_run_report`
and shows :func:`run_health` per run: complete or not and why, the turns missing, the truncation
rate, the unjudgeable rate, the rule verdicts that timed out and the rule verifier's internal errors.

**Complete.** A run is complete when its report lists no ``incomplete_reasons``. Reports that do
not carry that list yet get reasons derived from their counts: turns not generated
(``not_generated``), failed turns (``turns.failed``), turns without a counting rule verdict
(``turns.missing_judgements``), rule rejections without an LLM verdict of the active judge (an error
or never judged: ``llm_judge.verdicts``), and rule verdicts that are internal errors of the rule
verifier (``turns.rule_internal_errors``). Scores of an incomplete run count what is missing as
incorrect: they are a lower bound, not the model's.

**Readable.** A run whose manifest is missing or cannot be read has no numbers at all
(:func:`unreadable_health`).

**Refusal.** :func:`require_complete` raises :class:`IncompleteRunError` (one line naming the run
and why) for an incomplete or unreadable run unless the caller allows incomplete runs; the commands
then mark such runs in every format (:data:`INCOMPLETE_MARK`, :func:`health_footnote`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from studybench.escaping import plural

__all__ = [
    "HEALTH_HEADER",
    "INCOMPLETE_MARK",
    "IncompleteRunError",
    "health_cells",
    "health_footnote",
    "health_status",
    "health_table_latex",
    "health_table_markdown",
    "load_run_report",
    "require_complete",
    "run_health",
    "unreadable_health",
]

INCOMPLETE_MARK = "!"
"""Appended to every number of an incomplete run in a table (with ``(incomplete)`` after its name)."""

HEALTH_HEADER = ("run", "status", "turns missing", "truncated", "unjudgeable", "rule timeouts", "rule internal errors")
"""The columns of the per-run health table every comparison surface prints (:func:`health_cells`)."""


class IncompleteRunError(ValueError):
    """A run that is incomplete or unreadable, given where complete runs are required.

    Attributes:
        run: the run directory, as given.
        health: its :func:`run_health` (or :func:`unreadable_health`).
    """

    def __init__(self, run: Path | str, health: Mapping[str, Any], hint: str = "") -> None:
        self.run = str(run)
        self.health = dict(health)
        what = "unreadable run" if not health.get("readable", True) else "incomplete run"
        why = "; ".join(health.get("reasons") or []) or "no reason recorded"
        tail = "" if not health.get("readable", True) else ": its scores are a lower bound, not the model's"
        super().__init__(f"{run}: {what} ({why}){tail}{hint}")


def _int(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def _derived_reasons(rep: Mapping[str, Any]) -> list[str]:
    """Why a report without ``incomplete_reasons`` is incomplete, from its counts."""
    turns = rep.get("turns") or {}
    expected = _int(turns.get("expected"))
    not_generated = _int(rep.get("not_generated"))
    failed = _int(turns.get("failed"))
    unverified = max(0, _int(turns.get("missing_judgements")) - not_generated)
    out: list[str] = []
    if not_generated:
        out.append(f"{not_generated} of {plural(expected, 'turn')} not generated")
    if failed:
        out.append(f"{failed} of {plural(expected, 'turn')} failed")
    if unverified:
        out.append(f"{unverified} of {plural(expected, 'turn')} {'has' if unverified == 1 else 'have'} no rule verdict")
    lj = rep.get("llm_judge")
    if isinstance(lj, Mapping):
        v = lj.get("verdicts") or {}
        err, never = _int(v.get("error")), _int(v.get("not judged"))
        if err or never:
            out.append(f"{err + never} of {plural(_int(lj.get('rule_rejections')), 'rule rejection')} {'has' if err + never == 1 else 'have'} no LLM verdict "
                       f"({plural(err, 'error')}, {never} not judged)")
    return out


def run_health(report: Mapping[str, Any]) -> dict[str, Any]:
    """Summarise a run's health from its report (see the module docstring).

    Args:
        report: the run's report (:func:`studybench.report.build_report`, or a ``report.json``).

    Returns:
        ``{"readable": True, "complete", "reasons": [str...], "turns_expected", "turns_missing" (not
        generated, failed, or without a counting rule verdict), "llm_verdicts_missing" (rule rejections
        without an LLM verdict; ``None`` without an active judge), "truncation_rate" (share of the
        answered turns cut by the token limit; ``None`` when none was answered), "unjudgeable_rate"
        (``llm_judge.unjudgeable_rate``; ``None`` without a judge), "rule_timeouts",
        "rule_internal_errors"}``. ``complete`` is ``not reasons``; the reasons are the report's
        ``incomplete_reasons`` when it has them, else derived from its counts, plus the rule
        verifier's internal errors when there are any.
    """
    turns = report.get("turns") or {}
    given = report.get("incomplete_reasons")
    reasons = [str(r) for r in given] if isinstance(given, (list, tuple)) else _derived_reasons(report)
    internal = _int(turns.get("rule_internal_errors"))
    if internal and not any("internal error" in r for r in reasons):
        reasons.append(f"{plural(internal, 'rule verdict')} {'is an internal error' if internal == 1 else 'are internal errors'} of the rule verifier")
    lj = report.get("llm_judge")
    llm_missing = None
    unjudgeable = None
    if isinstance(lj, Mapping):
        v = lj.get("verdicts") or {}
        llm_missing = _int(v.get("error")) + _int(v.get("not judged"))
        unjudgeable = lj.get("unjudgeable_rate")
    overall = (report.get("truncation") or {}).get("overall") or {}
    return {
        "readable": True,
        "complete": not reasons,
        "reasons": reasons,
        "turns_expected": _int(turns.get("expected")),
        "turns_missing": _int(turns.get("failed")) + _int(turns.get("missing_judgements")),
        "llm_verdicts_missing": llm_missing,
        "truncation_rate": overall.get("truncated_share"),
        "unjudgeable_rate": unjudgeable,
        "rule_timeouts": _int(turns.get("rule_timeouts")),
        "rule_internal_errors": internal,
    }


def unreadable_health(problem: str) -> dict[str, Any]:
    """The health of a run directory that could not be read at all (no numbers).

    Args:
        problem: why, one line (e.g. ``"not a run directory (no manifest.json)"``).

    Returns:
        :func:`run_health`'s keys with ``readable`` and ``complete`` false, ``reasons`` ``[problem]``
        and every count ``None``.
    """
    return {"readable": False, "complete": False, "reasons": [problem], "turns_expected": None, "turns_missing": None,
            "llm_verdicts_missing": None, "truncation_rate": None, "unjudgeable_rate": None, "rule_timeouts": None,
            "rule_internal_errors": None}


def _file_reasons(root: Path, health: dict[str, Any]) -> None:
    """Name a missing or empty log in the reasons (a run directory damaged or never run, not just stopped)."""
    from studybench.store import RunStore

    for name, what in ((RunStore.GENERATIONS, "no turn was generated"), (RunStore.RULE_VERDICTS, "no rule verdict")):
        path = root / name
        try:
            size = path.stat().st_size if path.is_file() else None
        except OSError:
            size = None
        if size is None or size == 0:
            state = "missing" if size is None else "empty"
            health["reasons"].insert(0, f"{name} is {state} ({what})")
            health["complete"] = False
            if name == RunStore.GENERATIONS:
                return


def _problem(run: Path | str, e: Exception) -> str:
    """The error's message without a leading ``RUN: `` (the run is named once, by whoever shows it)."""
    text = str(e).replace("\n", " ")
    for prefix in (f"{run}: ", f"{Path(run)}: ", f"{Path(run).resolve()}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def load_run_report(run: Path | str, scoring: str | None = None, k: int | None = None,
                    pricing: Any = None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Build a run's report and its health, or say why the run cannot be read.

    Args:
        run: the run directory.
        scoring: as in :func:`studybench.report.build_report`.
        k: as in :func:`studybench.report.build_report`.
        pricing: as in :func:`studybench.report.build_report`.

    Returns:
        ``(report, health)``; ``(None, unreadable_health(...))`` when the run directory cannot be read
        (no manifest, an invalid one). A missing or empty ``generations.jsonl`` or ``judgements.jsonl``
        is named among the reasons of an incomplete run.

    Raises:
        ValueError: an unknown ``scoring`` or a ``k`` the run does not have (the caller's mistake, not
            the run's).
    """
    from studybench.report.build import SCORINGS, build_report
    from studybench.store import RunStore

    if scoring is not None and scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    store = RunStore(Path(run))
    try:
        man = store.read_manifest()
    except (OSError, ValueError) as e:
        return None, unreadable_health(_problem(run, e))
    if k is not None and not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= man.k):
        raise ValueError(f"k must be between 1 and the run's k={man.k} (in {run}), got {k!r}")
    try:
        rep = build_report(store, scoring, k, pricing)
    except (OSError, ValueError) as e:
        return None, unreadable_health(_problem(run, e))
    health = run_health(rep)
    _file_reasons(store.root, health)
    rep["health"] = health
    return rep, health


def require_complete(run: Path | str, health: Mapping[str, Any], allow_incomplete: bool = False,
                     *, allow_unreadable: bool = False) -> None:
    """Refuse an incomplete or unreadable run unless allowed.

    Args:
        run: the run directory (named in the message).
        health: its health (:func:`run_health` / :func:`load_run_report`).
        allow_incomplete: admit an incomplete (but readable) run; the caller then marks it.
        allow_unreadable: admit an unreadable run too (only where a surface can list a run without
            numbers, e.g. the leaderboard's health table).

    Raises:
        IncompleteRunError: the run is incomplete (and ``allow_incomplete`` is false) or unreadable
            (and ``allow_unreadable`` is false); one line naming the run and why.
    """
    if not health.get("readable", True):
        if not allow_unreadable:
            hint = "; it has no numbers to show" + (" even with --allow-incomplete" if allow_incomplete else "")
            raise IncompleteRunError(run, health, hint)
        return
    if not health.get("complete", True) and not allow_incomplete:
        raise IncompleteRunError(run, health, " (finish it, or --allow-incomplete / allow_incomplete=True to show it marked)")


def health_status(health: Mapping[str, Any]) -> str:
    """``"complete"``, ``"INCOMPLETE: reason; reason"`` or ``"UNREADABLE: problem"`` (one line)."""
    if not health.get("readable", True):
        return "UNREADABLE: " + "; ".join(health.get("reasons") or [])
    if health.get("complete", True):
        return "complete"
    return "INCOMPLETE: " + "; ".join(health.get("reasons") or [])


def _rate(x: Any) -> str:
    return "–" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100 * x:.1f}%"


def _count(x: Any) -> str:
    return "–" if not isinstance(x, int) or isinstance(x, bool) else str(x)


def health_cells(run: str, health: Mapping[str, Any]) -> list[str]:
    """One row of the health table (:data:`HEALTH_HEADER`) as text."""
    status = "complete" if health.get("complete", True) else ("UNREADABLE" if not health.get("readable", True) else "INCOMPLETE")
    missing = health.get("turns_missing")
    expected = health.get("turns_expected")
    miss = "–" if missing is None else f"{missing} of {expected}"
    return [run, status, miss, _rate(health.get("truncation_rate")), _rate(health.get("unjudgeable_rate")),
            _count(health.get("rule_timeouts")), _count(health.get("rule_internal_errors"))]


def health_footnote(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """One line per incomplete or unreadable run: what the marks mean and why (empty when all are complete)."""
    out = []
    for run, h in runs:
        if not h.get("readable", True):
            out.append(f"UNREADABLE {run}: {'; '.join(h.get('reasons') or [])} (left out: no numbers)")
        elif not h.get("complete", True):
            out.append(f"{INCOMPLETE_MARK} INCOMPLETE {run}: {'; '.join(h.get('reasons') or [])}; "
                       "its scores count what is missing as incorrect (a lower bound, not the model's)")
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def health_table_markdown(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """The per-run health table as Markdown lines, then the footnote lines (:func:`health_footnote`)."""
    lines = ["| " + " | ".join(HEALTH_HEADER) + " |", "|" + "|".join(["---", "---"] + ["---:"] * (len(HEALTH_HEADER) - 2)) + "|"]
    lines += ["| " + " | ".join(_md(c) for c in health_cells(r, h)) + " |" for r, h in runs]
    notes = health_footnote(runs)
    return [*lines, *(["", *(f"**{_md(n)}**" for n in notes)] if notes else [])]


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text).replace("\n", " ").replace("–", "--")


def health_table_latex(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """The per-run health table as a LaTeX (booktabs) tabular, then the footnote lines as visible text."""
    lines = [r"\begin{tabular}{ll" + "r" * (len(HEALTH_HEADER) - 2) + "}", r"\toprule",
             " & ".join(_tex(h) for h in HEALTH_HEADER) + r" \\", r"\midrule"]
    lines += [" & ".join(_tex(c) for c in health_cells(r, h)) + r" \\" for r, h in runs]
    lines += [r"\bottomrule", r"\end{tabular}"]
    for n in health_footnote(runs):
        lines.append(r"\par\noindent\textbf{" + _tex(n) + "}")
    return lines
