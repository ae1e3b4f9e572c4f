"""``studybench export ...``: a run's data in other shapes (:mod:`studybench.analysis.attempts`).

``export attempts RUN_DIR`` writes the run as one tidy table, one row per parent x sub-problem x seed
x attempt, with the verdicts that count (what the report scores).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, fail_write, plural

__all__ = ["export_app"]

export_app = typer.Typer(
    help="Export a run's data: `attempts` (one tidy table of every attempt, CSV / Parquet / JSON Lines).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@export_app.command("attempts")
def attempts_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    fmt: Annotated[str | None, typer.Option("--format", help="csv | parquet | jsonl (default: from --out's suffix, else csv). Parquet needs the analysis extra (pyarrow).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="File to write (default RUN_DIR/attempts.FORMAT).")] = None,
    scoring: Annotated[str | None, typer.Option("--scoring", help="What final_correct is: strict (rule verifier only) | liberal (rule OR LLM judge). Default: as the report scores.")] = None,
) -> None:
    """Write one row per parent x sub-problem x seed x attempt with the verdicts that count (rule, LLM, final),
    reasons, finish reason, token counts and the run's labels (label_KEY columns).

    final_correct is what the report scores: grouping the rows by seed gives the report's Par@k and Sub@k.
    rule_status says whether the turn's rule verdict is current, stale (made on an older completion)
    or missing."""
    from studybench.analysis.attempts import EXPORT_FORMATS, attempt_rows, write_attempts
    from studybench.report import SCORINGS

    if fmt is None:
        fmt = _SUFFIXES.get(out.suffix.lower(), "csv") if out is not None else "csv"
    if fmt not in EXPORT_FORMATS:
        fail(f"--format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    if scoring is not None and scoring not in SCORINGS:
        fail(f"--scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if out is not None and out.is_dir():
        fail(f"--out {out} is a directory; give a file")
    try:
        rows = attempt_rows(run_dir, scoring)
    except (OSError, ValueError) as e:
        fail(str(e), 1)
    path = out if out is not None else run_dir / f"attempts.{fmt}"
    try:
        write_attempts(rows, path, fmt)
    except ImportError as e:
        fail(str(e), 1)
    except OSError as e:
        fail_write(e, path, resumable=False)
    console.print(f"wrote {plural(len(rows), 'row')} ({len(rows[0]) if rows else 0} columns) to {escape(str(path))}", soft_wrap=True)
