"""``--allow-incomplete``: what the comparison commands do with incomplete and unreadable runs.

Without the option an incomplete or unreadable run is refused with one line naming it and why (exit
status 2). With it the command shows such runs, marked in every format, prints one warning line per
run on stderr and exits with status 1: numbers built on missing inputs never exit 0
(:mod:`studybench.report.health`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape

from studybench.cli.common import console, fail

__all__ = ["AllowIncomplete", "INCOMPLETE_EXIT", "exit_if_incomplete", "refuse"]

INCOMPLETE_EXIT = 1
"""The exit status of a command that showed incomplete runs because ``--allow-incomplete`` asked it to."""

AllowIncomplete = Annotated[bool, typer.Option(
    "--allow-incomplete",
    help="Show incomplete runs (turns not generated, failed or without a verdict, missing LLM verdicts) instead of "
    "refusing them: each is marked in every format and the command exits 1.")]


def refuse(e: Exception) -> NoReturn:
    """The one-line refusal of an incomplete or unreadable run (exit status 2)."""
    fail(str(e))


def exit_if_incomplete(runs: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """One warning line per incomplete or unreadable run, then exit 1 when there was any.

    Args:
        runs: ``(run, health)`` pairs (:func:`studybench.report.run_health`).

    Raises:
        typer.Exit: with :data:`INCOMPLETE_EXIT` when some run is incomplete or unreadable.
    """
    from studybench.report import health_status

    bad = [(run, h) for run, h in dict(runs).items() if not h.get("complete", True)]
    for run, h in bad:
        console.print(f"[bold yellow]warning:[/bold yellow] {escape(run)}: {escape(health_status(h))} "
                      "(shown marked because of --allow-incomplete)", soft_wrap=True)
    if bad:
        raise typer.Exit(INCOMPLETE_EXIT)
