"""The ``studybench`` command: each command group is a thin layer over the library.

=================================  ===========================================  ==============================
command                            module                                       library call
=================================  ===========================================  ==============================
``eval``                           :mod:`studybench.cli.eval`                   :func:`studybench.evaluate.run_plan`
``judge``, ``consistency``,        :mod:`studybench.cli.runs`                   :func:`studybench.evaluate.add_llm_verdicts`,
``report``                                                                      :func:`studybench.analysis.consistency.write_consistency`,
                                                                                :func:`studybench.report.write_report`
``reproduce``                      :mod:`studybench.cli.reproduce`              :func:`studybench.evaluate.reproduce_run`
``data fetch|check|ids|stats``     :mod:`studybench.cli.data`                   :mod:`studybench.fetch`, :mod:`studybench.checks`, :func:`studybench.testset.corpus.stats.data_stats`
``guidance-gap``                   :mod:`studybench.cli.guidance_gap`           :func:`studybench.analysis.guidance_gap.guidance_gap`
``verify``, ``verify-file``        :mod:`studybench.cli.verify`                 :class:`studybench.verify.Verifier`
``corpus ...``                     :mod:`studybench.cli.corpus`                 :mod:`studybench.testset`
``audit contamination``            :mod:`studybench.cli.audit`                  :mod:`studybench.audit`
``cache show|clear``               :mod:`studybench.cli.cache`                  :func:`studybench.llm_judge.cache_summary`,
                                                                                :func:`studybench.llm_judge.clear_cache`
``label``                          :mod:`studybench.cli.label`                  :func:`studybench.store.set_labels`
``export attempts``                :mod:`studybench.cli.export`                 :func:`studybench.analysis.attempts.attempt_rows`
``export chunks``                  :mod:`studybench.cli.export`                 :func:`studybench.testset.corpus.chunks.export_chunks`
``export verl|trl|csv``            :mod:`studybench.cli.export`                 :mod:`studybench.methods.exports`
``artefact evoskill``              :mod:`studybench.cli.artefact`               :func:`studybench.methods.artefacts.evoskill_prompt`
``gepa optimize``                  :mod:`studybench.cli.gepa`                   :func:`studybench.methods.gepa.optimize`
=================================  ===========================================  ==============================

Options several commands share are declared once in :mod:`studybench.cli.common`; every ``--help``
page (``-h`` works too) is laid out by :mod:`studybench.cli.helptext`.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from studybench import __version__
from studybench.cli.artefact import artefact_app
from studybench.cli.audit import audit_app
from studybench.cli.build import build_app
from studybench.cli.cache import cache_app
from studybench.cli.common import fail_os, out_console
from studybench.cli.compare import compare_cmd
from studybench.cli.corpus import corpus_app
from studybench.cli.data import data_app
from studybench.cli.eval import eval_cmd
from studybench.cli.export import export_app
from studybench.cli.gepa import gepa_app
from studybench.cli.guidance_gap import guidance_gap_cmd
from studybench.cli.helptext import ReadableGroup, use_readable_help
from studybench.cli.label import label_cmd
from studybench.cli.leaderboard import leaderboard_cmd
from studybench.cli.plateau import plateau_cmd
from studybench.cli.reproduce import reproduce_cmd
from studybench.cli.runs import consistency_cmd, judge_cmd, report_cmd
from studybench.cli.verify import verify_cmd, verify_file_cmd

__all__ = ["app", "main"]


class _Commands(ReadableGroup):
    """The root command group: an ``OSError`` that no command caught (an ``--out`` name over 255
    characters, a file that vanished) ends the command with one line and the exit status of docs/exit-statuses.md's
    table (2 for an unusable name, else 1), never with a traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # the reader went away (`studybench ... | head`): stop quietly, as other tools do
            _quiet_stdout()
            raise typer.Exit(1) from None
        except OSError as e:
            fail_os(e)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except BrokenPipeError:  # raised while printing help or a usage error
            _quiet_stdout()
            raise SystemExit(1) from None


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


app = typer.Typer(
    cls=_Commands,
    help="StudyBench: evaluate models and self-evolution methods on the Application and Transfer sets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("eval")(eval_cmd)
app.command("report")(report_cmd)
app.command("leaderboard")(leaderboard_cmd)
app.command("plateau")(plateau_cmd)
app.command("judge")(judge_cmd)
app.command("consistency")(consistency_cmd)
app.command("compare")(compare_cmd)
app.command("reproduce")(reproduce_cmd)
app.command("label")(label_cmd)
app.command("guidance-gap")(guidance_gap_cmd)
app.command("verify")(verify_cmd)
app.command("verify-file")(verify_file_cmd)
app.add_typer(data_app, name="data")
app.add_typer(corpus_app, name="corpus")
app.add_typer(audit_app, name="audit")
app.add_typer(cache_app, name="cache")
app.add_typer(export_app, name="export")
app.add_typer(artefact_app, name="artefact")
app.add_typer(gepa_app, name="gepa")
app.add_typer(build_app, name="build")


def _print_version(value: bool) -> None:
    if value:
        out_console.print(__version__, highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version, help="Print the studybench version and exit.")] = False,
) -> None:
    """StudyBench: evaluate models and self-evolution methods on the Application and Transfer sets."""


@app.command("version")
def version_cmd() -> None:
    """Print the studybench version."""
    out_console.print(__version__, highlight=False)


use_readable_help(app)  # after the last command: every --help reads well at 80 columns


def main() -> None:  # pragma: no cover
    """Entry point of ``python -m studybench.cli``."""
    app()
