"""``studybench export ...``: a run's data and the book corpus in other shapes.

``export attempts RUN_DIR`` writes the run as one tidy table, one row per parent x sub-problem x seed
x attempt, with the verdicts that count (what the report scores) (:mod:`studybench.analysis.attempts`).
``export chunks --books DIR`` cuts the redacted corpus into token chunks (:mod:`studybench.testset.corpus.chunks`).
``export verl|trl|csv`` write the instruction layers as training material (:mod:`studybench.methods.exports`).
Every command finds its writer in the one registry of formats, :mod:`studybench.exports`, and is
registered in the registry's order (:data:`EXPORT_COMMANDS`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, fail_write, plural
from studybench.cli.health import AllowIncomplete, exit_if_incomplete, refuse
from studybench.exports import FORMATS, export_format

__all__ = ["EXPORT_COMMANDS", "export_app"]

export_app = typer.Typer(
    help="Export data. A run: `attempts` (one tidy table of every attempt, CSV / Parquet / JSON Lines). "
    "Training material from the instruction layers: `verl` (parquet), `trl` (a datasets DatasetDict), "
    "`csv` (the agent-loop CSV, train/val/test per book). The corpus: `chunks` (the redacted books cut "
    "into token chunks, JSON Lines, e.g. for Bonito).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _registered(name: str) -> tuple[Callable[..., Any] | None, Callable[..., Any]]:
    """The format's (rows gatherer or None, writer) from the one registry, :mod:`studybench.exports`."""
    fmt = export_format(name)
    return fmt.load_rows(), fmt.load_writer()


_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def attempts_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `studybench eval`.")],
    fmt: Annotated[str | None, typer.Option("--format", help="csv | parquet | jsonl (default: from --out's suffix, else csv). Parquet needs the analysis extra (pyarrow).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="File to write (default RUN_DIR/attempts.FORMAT).")] = None,
    scoring: Annotated[str | None, typer.Option("--scoring", help="What final_correct is: strict (rule verifier only) | liberal (rule OR LLM judge). Default: as the report scores.")] = None,
    allow_incomplete: AllowIncomplete = False,
) -> None:
    """Write one row per parent x sub-problem x seed x attempt with the verdicts that count (rule, LLM, final),
    reasons, finish reason, token counts and the run's labels (label_KEY columns).

    final_correct is what the report scores: grouping the rows by seed gives the report's Par@k and Sub@k.
    rule_status says whether the turn's rule verdict is current, stale (made on an older completion)
    or missing. run_complete / run_health say whether the run is complete; an incomplete or unreadable
    run is refused unless --allow-incomplete (then exported with those columns saying why, exit 1)."""
    from studybench.analysis.attempts import EXPORT_FORMATS
    from studybench.report import SCORINGS, IncompleteRunError

    attempt_rows, write_attempts = _registered("attempts")

    if fmt is None:
        fmt = _SUFFIXES.get(out.suffix.lower(), "csv") if out is not None else "csv"
    if fmt not in EXPORT_FORMATS:
        fail(f"--format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    if scoring is not None and scoring not in SCORINGS:
        fail(f"--scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if out is not None and out.is_dir():
        fail(f"--out {out} is a directory; give a file")
    try:
        rows = attempt_rows(run_dir, scoring, allow_incomplete=allow_incomplete)
    except IncompleteRunError as e:
        refuse(e)
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
    if rows and not rows[0]["run_complete"]:
        exit_if_incomplete([(str(run_dir), {"complete": False, "reasons": [rows[0]["run_health"].removeprefix("INCOMPLETE: ")]})])


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

    from studybench.testset.corpus.books import CorpusError
    from studybench.testset.corpus.chunks import manifest_path
    from studybench.tokens import TokenizerError

    _, export_chunks = _registered("chunks")

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


_LAYERS_HELP = "Comma list of instruction layers: single, multi_sub (and without_answer where accepted)."
_TRAIN_DIR_HELP = "The instruction files' directory (default: train/ in $STUDYBENCH_DATA or the `data fetch --train` cache)."


def _training_layers(name: str, train_dir: Path | None, layers: str) -> list:
    from studybench.instructions import InstructionError
    from studybench.methods.exports import ExportError

    load_layers, _ = _registered(name)

    try:
        return load_layers(train_dir, [x.strip() for x in layers.split(",") if x.strip()])
    except ExportError as e:
        fail(str(e))
    except InstructionError as e:
        fail(str(e), 1)


def _system_prompt(path: Path | None, none: bool) -> str | None:
    from studybench.files import InputFileError, read_user_text
    from studybench.protocol import DEFAULT_SYSTEM_PROMPT

    if path is not None and none:
        fail("give --system-prompt FILE or --no-system-prompt, not both")
    if none:
        return None
    if path is None:
        return DEFAULT_SYSTEM_PROMPT
    try:
        text = read_user_text(path).strip()
    except InputFileError as e:
        fail(f"--system-prompt {path}: {e.problem}")
    if not text:
        fail(f"--system-prompt {path}: the file is empty")
    return text


def _summary(result, splits: tuple[str, ...], what: str) -> None:  # noqa: ANN001
    from rich.table import Table

    from studybench.cli.common import out_console

    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True)
    kinds = list(result.layers)
    table = Table(title=f"{what}: rows per split and layer")
    table.add_column("layer")
    for s in splits:
        table.add_column(s, justify="right")
    table.add_column("total", justify="right")
    table.add_column("left out", justify="right")
    for k in kinds:
        row = [result.counts.get((s, k), 0) for s in splits]
        table.add_row(k, *map(str, row), str(sum(row)), str(result.left_out.get(k, 0)))
    table.add_row("all", *(str(result.split_total(s)) for s in splits), str(result.total),
                  str(sum(result.left_out.values())))
    out_console.print(table)
    ex = ", ".join(f"{s} {result.exercises.get(s, 0)}" for s in splits)
    console.print(f"wrote {plural(result.total, 'row')} to {escape(str(result.out))} (exercises: {ex})", soft_wrap=True)


def _run_export(fn, out: Path, **kw) -> object:  # noqa: ANN001, ANN003
    from studybench.methods.exports import ExportError

    try:
        return fn(out, **kw)
    except ExportError as e:
        fail(str(e))
    except ImportError as e:
        fail(str(e), 1)
    except OSError as e:
        fail_write(e, out, resumable=False)


_ValFraction = Annotated[float, typer.Option("--val-fraction", help="Exercises held out for validation, in [0, 1).")]
_Seed = Annotated[int, typer.Option("--seed", help="Seed of the train / validation split.")]
_SystemPrompt = Annotated[Path | None, typer.Option("--system-prompt", help="File whose text is the system message (default: StudyBench's).")]
_NoSystemPrompt = Annotated[bool, typer.Option("--no-system-prompt", help="No system message.")]


def verl_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for train.parquet, validation.parquet and export.json.")],
    layers: Annotated[str, typer.Option("--layers", help=_LAYERS_HELP)] = "single,multi_sub",
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help=_TRAIN_DIR_HELP)] = None,
    val_fraction: _ValFraction = 0.05,
    seed: _Seed = 0,
    system_prompt: _SystemPrompt = None,
    no_system_prompt: _NoSystemPrompt = False,
) -> None:
    """Write the Instructions with Answer as verl RL parquet (train / validation, split by exercise).

    Columns data_source, prompt (system, the record's turns, the answer format appended to the last
    user turn), ability, reward_model (rule; ground_truth answer, answer_type, type_sequence,
    gold_unit), extra_info. Score with reward.custom_reward_function.path = studybench/rewards.py,
    name = compute_score. Records whose gold the verifier cannot use are left out with a warning.
    Needs the train extra (pyarrow)."""
    _, export_verl = _registered("verl")
    sp = _system_prompt(system_prompt, no_system_prompt)
    loaded = _training_layers("verl", train_dir, layers)
    result = _run_export(export_verl, out, layers=loaded, val_fraction=val_fraction, seed=seed, system_prompt=sp)
    _summary(result, ("train", "validation"), "verl")


def trl_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for the DatasetDict (datasets.load_from_disk).")],
    layers: Annotated[str, typer.Option("--layers", help=_LAYERS_HELP)] = "single,multi_sub",
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help=_TRAIN_DIR_HELP)] = None,
    val_fraction: _ValFraction = 0.05,
    seed: _Seed = 0,
    system_prompt: _SystemPrompt = None,
    no_system_prompt: _NoSystemPrompt = False,
    with_without_answer: Annotated[bool, typer.Option("--with-without-answer", help="Add the Instructions without Answer (empty gold columns; the reward function gives them no reward).")] = False,
) -> None:
    """Save the Instructions with Answer as a Hugging Face DatasetDict for TRL (conversational prompt-only).

    Columns prompt, answer, answer_type, type_sequence, gold_unit (read by
    studybench.rewards.trl_reward), layer, record, source, source_problem_id, source_chapter,
    sub_discipline, sub_index. Split by exercise like `export verl`. Needs the train extra (datasets)."""
    _, export_trl = _registered("trl")
    if with_without_answer and "without_answer" not in layers:
        layers = f"{layers},without_answer"
    sp = _system_prompt(system_prompt, no_system_prompt)
    loaded = _training_layers("trl", train_dir, layers)
    result = _run_export(export_trl, out, layers=loaded, val_fraction=val_fraction, seed=seed, system_prompt=sp,
                         with_without_answer=with_without_answer)
    _summary(result, ("train", "validation"), "trl")


def csv_cmd(
    out: Annotated[Path, typer.Option("--out", help="The CSV file (a FILE.json sidecar is written beside it).")],
    layers: Annotated[str, typer.Option("--layers", help=_LAYERS_HELP)] = "single,multi_sub",
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help=_TRAIN_DIR_HELP)] = None,
    fractions: Annotated[str, typer.Option("--fractions", help="train,val,test fractions, split per source (book) by exercise.")] = "0.2,0.1,0.7",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split.")] = 0,
) -> None:
    """Write the agent-loop CSV (EvoSkill's layout): question, answer, answer_type, type_sequence, split
    (train / val / test) and source, source_problem_id, source_chapter, layer, sub_index.

    A multi-sub record's question is its conversation as text (Part 1, Answer to part 1, ..., then
    the part to answer). Each source with at least 3 exercises gets at least one exercise in each split."""
    _, export_csv = _registered("csv")
    try:
        fr = [float(x) for x in fractions.split(",")]
    except ValueError:
        fail(f"--fractions must be three numbers like 0.2,0.1,0.7, got {fractions!r}")
    if out.is_dir():
        fail(f"--out {out} is a directory; give a file")
    loaded = _training_layers("csv", train_dir, layers)
    result = _run_export(export_csv, out, layers=loaded, fractions=fr, seed=seed)
    _summary(result, ("train", "val", "test"), "csv")


EXPORT_COMMANDS: dict[str, Callable[..., Any]] = {
    "attempts": attempts_cmd,
    "chunks": chunks_cmd,
    "verl": verl_cmd,
    "trl": trl_cmd,
    "csv": csv_cmd,
}
"""The command of every format of :data:`studybench.exports.FORMATS`; registered in the registry's order."""

for _name in FORMATS:
    export_app.command(_name)(EXPORT_COMMANDS[_name])
