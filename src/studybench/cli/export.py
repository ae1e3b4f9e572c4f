"""``studybench export ...``: a run's data and the book corpus in other shapes.

``export attempts RUN_DIR`` writes the run as one tidy table, one row per parent x sub-problem x seed
x attempt, with the verdicts that count (what the report scores) (:mod:`studybench.analysis.attempts`).
``export chunks --books DIR`` cuts the redacted corpus into token chunks (:mod:`studybench.build.chunks`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, fail_write, plural

__all__ = ["export_app"]

export_app = typer.Typer(
    help="Export data: `attempts` (a run as one tidy table of every attempt, CSV / Parquet / JSON Lines), "
    "`chunks` (the redacted book corpus cut into token chunks, JSON Lines, e.g. for Bonito).",
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


@export_app.command("chunks")
def chunks_cmd(
    books: Annotated[Path | None, typer.Option("--books", help="Books directory DIR/<source>/<chapter>/clean.redacted.md (after `studybench corpus redact`; default $STUDYBENCH_BOOKS).")] = None,
    out: Annotated[Path, typer.Option("--out", help="JSON Lines file to write; its manifest goes beside it as STEM.manifest.json.")] = Path("chunks.jsonl"),
    size: Annotated[int, typer.Option("--size", help="Most tokens per chunk (2048: Bonito's input size in the paper).")] = 2048,
    overlap: Annotated[int, typer.Option("--overlap", help="Tokens each chunk repeats from the previous one of its chapter.")] = 0,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", help="builtin (an offline approximation, default), a tokenizer.json, a local folder or a Hugging Face name.")] = None,
    allow_unredacted: Annotated[bool, typer.Option("--allow-unredacted", help="Chunk clean.md (else full.md) where clean.redacted.md is missing; such rows say redacted: false.")] = False,
    include_answers: Annotated[bool, typer.Option("--include-answers", help="Keep answer folders (solution manuals, hints), left out by default.")] = False,
) -> None:
    """Cut every chapter's clean.redacted.md into chunks of at most --size tokens, one JSON object per
    chunk: book, chapter, chunk, file, start, end (character offsets into the file's text), n_tokens,
    redacted, text, and context (the same text: Bonito's input column).

    A chunk ends at a paragraph break when one lies in its last 15% of tokens. Chapters without
    clean.redacted.md are refused unless --allow-unredacted; answer folders are left out unless
    --include-answers. Without --out the file is chunks.jsonl in the current directory."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from studybench.build.chunks import export_chunks, manifest_path
    from studybench.build.corpus import CorpusError
    from studybench.tokens import TokenizerError

    if books is None:
        if not os.environ.get("STUDYBENCH_BOOKS"):
            fail("--books DIR is required (or set $STUDYBENCH_BOOKS)")
        books = Path(os.environ["STUDYBENCH_BOOKS"])
    if size < 1:
        fail(f"--size must be >= 1, got {size}")
    if not 0 <= overlap < size:
        fail(f"--overlap must be >= 0 and smaller than --size ({size}), got {overlap}")
    if out.is_dir():
        fail(f"--out {out} is a directory; give a file")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task: list[int] = []

        def report(label: str, done: int, total: int) -> None:
            if not task:
                task.append(bar.add_task("chunking", total=total))
            bar.update(task[0], completed=done, description=f"chunking {escape(label)}")

        try:
            m = export_chunks(books, out, size=size, overlap=overlap, tokenizer=tokenizer,
                              allow_unredacted=allow_unredacted, include_answers=include_answers, progress=report)
        except (CorpusError, TokenizerError, ValueError) as e:
            fail(str(e))
        except OSError as e:
            fail_write(e, out, resumable=False)
    console.print(
        f"wrote {plural(m['chunks'], 'chunk')} ({m['tokens']:,} tokens, {m['tokenizer']} tokenizer) from "
        f"{plural(m['chapters'], 'chapter')} of {plural(m['books'], 'book')} to {escape(str(out))}; "
        f"manifest {escape(str(manifest_path(out)))}", soft_wrap=True)
    if m["answer_folders_skipped"]:
        console.print(f"left out {plural(m['answer_folders_skipped'], 'answer folder')} (--include-answers keeps them)", soft_wrap=True)
    if m["unredacted_chapters"]:
        console.print(f"[yellow]warning:[/yellow] {plural(len(m['unredacted_chapters']), 'chapter')} not redacted "
                      "(rows marked redacted: false)", soft_wrap=True)
