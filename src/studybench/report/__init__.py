"""Reports of one run: ``report.json`` / ``report.md`` and a terminal table (paper 2.2 metrics).

- :func:`build_report` / :func:`write_report` (:mod:`studybench.report.build`): the numbers;
- :func:`render_markdown` / :func:`rich_table` (:mod:`studybench.report.render`): their renderings.
"""

from studybench.report.build import SCORINGS, TRUNCATION_WARN_SHARE, build_report, write_report
from studybench.report.render import INTERNAL_ERROR_ADVICE, md_cell, render_markdown, rich_table

__all__ = [
    "INTERNAL_ERROR_ADVICE",
    "SCORINGS",
    "TRUNCATION_WARN_SHARE",
    "build_report",
    "md_cell",
    "render_markdown",
    "rich_table",
    "write_report",
]
