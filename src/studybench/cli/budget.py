"""``--pricing FILE``, ``--max-cost`` and ``--max-total-tokens`` of the LLM judge and the construction stages.

A command stopped by its budget prints a loud ``stopped:`` line and exits with
:data:`BUDGET_EXIT_CODE` (3): what was done is kept, and the same command with a higher limit (or
none) resumes the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape

from studybench.cli.common import OptionSet, console, fail
from studybench.costs import (
    BUDGET_EXIT_CODE,
    NEEDS_PRICES,
    BudgetError,
    BudgetLimits,
    BudgetTracker,
    Pricing,
    TokenCounts,
    open_budget,
)

__all__ = ["BUDGET_EXIT_CODE", "BUDGET_OPTIONS", "budget_tracker", "cost_text", "exit_budget_stopped", "stop_for_budget"]

_B = "Tokens and cost"
BUDGET_OPTIONS = OptionSet("budget_options", {
    "pricing": (Annotated[Path | None, typer.Option("--pricing", metavar="FILE", rich_help_panel=_B, help="Prices per million input, output and cached-input tokens per model (JSON, or TOML on Python >= 3.11): token counts are turned into cost.")], None),
    "max_cost": (Annotated[float | None, typer.Option("--max-cost", rich_help_panel=_B, help="Stop asking once this much was spent (in the pricing file's currency; needs --pricing). Counts what earlier runs of the same job spent; exit 3, resumable.")], None),
    "max_total_tokens": (Annotated[int | None, typer.Option("--max-total-tokens", rich_help_panel=_B, help="Stop asking once this many prompt + completion tokens were spent. Counts what earlier runs of the same job spent; exit 3, resumable.")], None),
})
"""The budget options (``studybench judge``, ``build decompose|verify|guide``)."""


def budget_tracker(opts: dict[str, Any], spent: Mapping[str, TokenCounts] | None = None) -> BudgetTracker:
    """The tracker of a command's budget options.

    Args:
        opts: the :data:`BUDGET_OPTIONS` values.
        spent: what earlier invocations of the same job spent, per model.

    Returns:
        A :class:`~studybench.costs.BudgetTracker` (no limits without ``--max-*``; it then only counts).
    """
    try:
        limits = BudgetLimits.model_construct(**{k: opts.get(k) for k in ("pricing", "max_cost", "max_total_tokens")})
        return open_budget(limits, spent=spent)
    except BudgetError as e:
        if e.field == "pricing":
            fail(f"--pricing: {e}")
        if str(e) == NEEDS_PRICES:
            fail("--max-cost needs --pricing FILE (the prices per model)")
        fail(f"--{e.field.replace('_', '-')} {e}")


def cost_text(cost: float | None, pricing: Pricing | None) -> str:
    """``"0.0123 USD"``, ``"unpriced"`` (a model the file has no price for) or ``""`` without pricing."""
    if pricing is None:
        return ""
    return "unpriced" if cost is None else f"{cost:.4f} {pricing.currency}"


def stop_for_budget(reason: str, what: str, resume: str) -> NoReturn:
    """Print the loud budget stop and exit with :data:`BUDGET_EXIT_CODE`.

    Args:
        reason: the tracker's sentence (which limit, what was spent).
        what: what was left undone, e.g. ``"12 turns left un-judged"``.
        resume: how to resume, e.g. ``"re-run the same command with a higher limit"``.
    """
    console.print(f"[bold red]stopped:[/bold red] {escape(reason)}; {escape(what)} (what was done is saved). "
                  f"{escape(resume)}", soft_wrap=True)
    raise typer.Exit(BUDGET_EXIT_CODE)


def exit_budget_stopped(error: Exception, note: str = "") -> NoReturn:
    """Print an evaluation's budget stop (:class:`~studybench.evaluate.BudgetStoppedError`) and exit 3.

    Args:
        error: the stop; its message names the limit, what was spent and how to resume.
        note: a few words added after it (e.g. where the work is kept).
    """
    console.print(f"[bold yellow]{escape(str(error))}[/bold yellow]{escape(note)}", soft_wrap=True)
    raise typer.Exit(BUDGET_EXIT_CODE)
