"""Reports of one run: ``report.json`` / ``report.md`` and a terminal table (paper 2.2 metrics).

- :func:`build_report` / :func:`write_report` (:mod:`studybench.report.build`): the numbers;
- :func:`render_markdown` / :func:`rich_table` (:mod:`studybench.report.render`): their renderings
  (:func:`retries_line`: the turns whose request was retried);
- :func:`run_health` / :func:`load_run_report` / :func:`require_complete` (:mod:`studybench.report.health`):
  whether a run may be compared with others (complete, readable, turns missing, truncation, unjudgeable);
- :func:`incomplete_reasons` / :func:`scoring_label` (:mod:`studybench.report.completeness`): whether the
  numbers are final (missing LLM verdicts, the unjudgeable alarm, attempts without a final answer).
"""

from studybench.report.build import SCORINGS, TRUNCATION_WARN_SHARE, build_report, write_report
from studybench.report.completeness import incomplete_reasons, scoring_label
from studybench.report.health import (
    INCOMPLETE_MARK,
    IncompleteRunError,
    health_status,
    load_run_report,
    require_complete,
    run_health,
    unreadable_health,
)
from studybench.report.render import INTERNAL_ERROR_ADVICE, md_cell, render_markdown, retries_line, rich_table

__all__ = ["INCOMPLETE_MARK", "INTERNAL_ERROR_ADVICE", "SCORINGS", "TRUNCATION_WARN_SHARE", "IncompleteRunError",
           "build_report", "health_status", "incomplete_reasons", "load_run_report", "md_cell", "render_markdown",
           "require_complete", "retries_line", "rich_table", "run_health", "scoring_label", "unreadable_health", "write_report"]
