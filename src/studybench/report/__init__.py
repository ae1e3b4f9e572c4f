"""Reports of one run: ``report.json`` / ``report.md`` and a terminal table (paper 2.2 metrics).

- :func:`build_report` / :func:`write_report` (:mod:`studybench.report.build`): the numbers;
- :func:`render_markdown` / :func:`rich_table` (:mod:`studybench.report.render`): their renderings;
- :func:`incomplete_reasons` / :func:`scoring_label` (:mod:`studybench.report.completeness`): whether the
  numbers are final (missing LLM verdicts, the unjudgeable alarm, attempts without a final answer).
"""

from studybench.report.build import SCORINGS, TRUNCATION_WARN_SHARE, build_report, write_report
from studybench.report.completeness import incomplete_reasons, scoring_label
from studybench.report.render import md_cell, render_markdown, rich_table

__all__ = ["SCORINGS", "TRUNCATION_WARN_SHARE", "build_report", "incomplete_reasons", "md_cell", "render_markdown",
           "rich_table", "scoring_label", "write_report"]
