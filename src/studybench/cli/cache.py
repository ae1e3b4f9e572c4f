"""``studybench cache show|clear``: the LLM judge's verdict cache (:mod:`studybench.llm_judge.cache`).

The cache lives in ``--judge-cache DIR``, else ``$STUDYBENCH_JUDGE_CACHE``, else the user cache
directory (``studybench/judge`` under it, e.g. ``~/.cache/studybench/judge`` on Linux). Every command
that judges (``eval --judge-model``, ``judge``, ``audit contamination --judge-model``) shares it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from studybench.cli.common import console, fail, out_console, plural
from studybench.files import dumps_json

__all__ = ["cache_app"]

cache_app = typer.Typer(
    help="The LLM judge's verdict cache: where it is, what it holds, clearing it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_DIR_HELP = "Verdict cache directory (default $STUDYBENCH_JUDGE_CACHE, then the user cache)."
_KINDS = ("answer-equivalence", "duplicate", "unknown")


def _known_templates() -> dict[str, str]:
    """Task name per builtin template digest (rows of older versions do not name their task)."""
    from studybench.audit.duplicates import DUPLICATE_TASK
    from studybench.llm_judge import ANSWER_EQUIVALENCE_TASK

    return {t.builtin_template().digest: t.name for t in (ANSWER_EQUIVALENCE_TASK, DUPLICATE_TASK)}


def _root(judge_cache: Path | None) -> tuple[Path, str]:
    """The cache directory and where it comes from."""
    from studybench.llm_judge import default_cache_root

    if judge_cache is not None:
        if judge_cache.exists() and not judge_cache.is_dir():
            fail(f"--judge-cache {judge_cache} exists and is not a directory")
        return judge_cache, "--judge-cache"
    source = "$STUDYBENCH_JUDGE_CACHE" if os.environ.get("STUDYBENCH_JUDGE_CACHE") else "the user cache directory"
    return default_cache_root(), source


def _summary(root: Path) -> dict[str, Any]:
    from studybench.llm_judge import cache_summary

    try:
        return cache_summary(root, known_templates=_known_templates())
    except OSError as e:
        fail(f"{root}: cannot read the verdict cache ({e.strerror or e})", code=1)
    except ValueError as e:  # InputFileError: not a regular file, too large
        fail(f"cannot read the verdict cache: {e}", code=1)


@cache_app.command("show")
def cache_show(
    judge_cache: Annotated[Path | None, typer.Option("--judge-cache", help=_DIR_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON to stdout.")] = False,
) -> None:
    """Where the verdict cache is and what it holds: entries per judge model, task and verdict.

    Tasks: answer-equivalence (`eval`, `judge`), duplicate (`audit contamination`). Verdicts: TRUE
    (correct; duplicate) and FALSE. Unjudgeable rows left by older versions are never served and are
    counted apart."""
    root, source = _root(judge_cache)
    rep = _summary(root)
    rep["source"] = source
    if as_json:
        out_console.print_json(dumps_json(rep))
        return
    out_console.print(f"verdict cache: {escape(rep['file'])} (from {source})", soft_wrap=True)
    if not rep["exists"]:
        out_console.print("empty: no verdict has been cached here yet")
        return
    n = rep["entries"]
    out_console.print(f"{n} {'entry' if n == 1 else 'entries'} in {plural(rep['rows'], 'row')} ({rep['bytes']:,} bytes)")
    if rep["ignored_unjudgeable"] or rep["invalid_rows"]:
        out_console.print(f"ignored: {rep['ignored_unjudgeable']} unjudgeable (written by an older version, never served), "
                          f"{plural(rep['invalid_rows'], 'row')} not well formed")
    if rep["by_model"]:
        table = Table()
        for col in ("judge model", "task", "TRUE", "FALSE", "entries"):
            table.add_column(col, justify="left" if col in ("judge model", "task") else "right")
        for model, tasks in rep["by_model"].items():
            for task, counts in tasks.items():
                table.add_row(escape(model), escape(task), str(counts["TRUE"]), str(counts["FALSE"]),
                              str(counts["TRUE"] + counts["FALSE"]))
        out_console.print(table)


@cache_app.command("clear")
def cache_clear(
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="Only the verdicts of this judge model.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Only the verdicts of this task: answer-equivalence | duplicate (| unknown: rows of older versions with a user template).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    judge_cache: Annotated[Path | None, typer.Option("--judge-cache", help=_DIR_HELP)] = None,
) -> None:
    """Remove cached verdicts: all of them, or those of one judge model and/or task.

    The next judge run asks the endpoint again for what was removed. Run it while no judge is writing
    to the same cache."""
    from studybench.llm_judge import clear_cache

    if kind is not None and kind not in _KINDS:
        fail(f"--kind: unknown task {kind!r}; one of {', '.join(_KINDS)}")
    root, _ = _root(judge_cache)
    rep = _summary(root)
    n = 0
    for model, tasks in rep["by_model"].items():
        if judge_model is not None and model != judge_model:
            continue
        n += sum(c["TRUE"] + c["FALSE"] for t, c in tasks.items() if kind is None or t == kind)
    what = " and ".join(x for x in (f"judge model {judge_model!r}" if judge_model is not None else "",
                                    f"task {kind!r}" if kind is not None else "") if x)
    filtered = judge_model is not None or kind is not None
    if n == 0 and (not rep["exists"] or filtered):
        console.print(f"no cached verdicts{' of ' + escape(what) if what else ''} in {escape(rep['file'])}; nothing removed",
                      soft_wrap=True)
        return
    scope = f"the {plural(n, 'cached verdict')} of {what}" if filtered else f"all {plural(n, 'cached verdict')}"
    if not yes and not typer.confirm(f"Remove {scope} from {rep['file']}?", default=False, err=True):
        console.print("nothing removed")
        raise typer.Exit(1)
    try:
        removed = clear_cache(root, judge_model=judge_model, task=kind, known_templates=_known_templates())
    except OSError as e:
        fail(f"{rep['file']}: cannot rewrite the verdict cache ({e.strerror or e})", code=1)
    console.print(f"removed {plural(removed, 'cached judgement')} from {escape(rep['file'])}", soft_wrap=True)
