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
    help="Export a run's data: `attempts` (one tidy table of every attempt, CSV / Parquet / JSON Lines). "
    "Export training material from the instruction layers: `verl` (parquet), `trl` (a datasets DatasetDict), "
    "`csv` (the agent-loop CSV, train/val/test per book).",
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


_LAYERS_HELP = "Comma list of instruction layers: single, multi_sub (and without_answer where accepted)."
_TRAIN_DIR_HELP = "The instruction files' directory (default: $STUDYBENCH_DATA/train)."


def _training_layers(train_dir: Path | None, layers: str) -> list:
    from studybench.instructions import InstructionError
    from studybench.methods.exports import ExportError, load_layers

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


@export_app.command("verl")
def verl_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for train.parquet, validation.parquet and export.json.")],
    layers: Annotated[str, typer.Option("--layers", help=_LAYERS_HELP)] = "single,multi_sub",
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help=_TRAIN_DIR_HELP)] = None,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help="Exercises held out for validation, in [0, 1).")] = 0.05,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the train / validation split.")] = 0,
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="File whose text is the system message (default: StudyBench's).")] = None,
    no_system_prompt: Annotated[bool, typer.Option("--no-system-prompt", help="No system message.")] = False,
) -> None:
    """Write the Instructions with Answer as verl RL parquet (train / validation, split by exercise).

    Columns data_source, prompt (system, the record's turns, the answer format appended to the last
    user turn), ability, reward_model (rule; ground_truth answer, answer_type, type_sequence,
    gold_unit), extra_info. Score with reward.custom_reward_function.path = studybench/rewards.py,
    name = compute_score. Records whose gold the verifier cannot use are left out with a warning.
    Needs the train extra (pyarrow)."""
    from studybench.methods.exports import export_verl

    sp = _system_prompt(system_prompt, no_system_prompt)
    loaded = _training_layers(train_dir, layers)
    result = _run_export(export_verl, out, layers=loaded, val_fraction=val_fraction, seed=seed, system_prompt=sp)
    _summary(result, ("train", "validation"), "verl")


@export_app.command("trl")
def trl_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for the DatasetDict (datasets.load_from_disk).")],
    layers: Annotated[str, typer.Option("--layers", help=_LAYERS_HELP)] = "single,multi_sub",
    train_dir: Annotated[Path | None, typer.Option("--train-dir", help=_TRAIN_DIR_HELP)] = None,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help="Exercises held out for validation, in [0, 1).")] = 0.05,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the train / validation split.")] = 0,
    system_prompt: Annotated[Path | None, typer.Option("--system-prompt", help="File whose text is the system message (default: StudyBench's).")] = None,
    no_system_prompt: Annotated[bool, typer.Option("--no-system-prompt", help="No system message.")] = False,
    with_without_answer: Annotated[bool, typer.Option("--with-without-answer", help="Add the Instructions without Answer (empty gold columns; the reward function gives them no reward).")] = False,
) -> None:
    """Save the Instructions with Answer as a Hugging Face DatasetDict for TRL (conversational prompt-only).

    Columns prompt, answer, answer_type, type_sequence, gold_unit (read by
    studybench.rewards.trl_reward), layer, record, source, source_problem_id, source_chapter,
    sub_discipline, sub_index. Split by exercise like `export verl`. Needs the train extra (datasets)."""
    from studybench.methods.exports import export_trl

    if with_without_answer and "without_answer" not in layers:
        layers = f"{layers},without_answer"
    sp = _system_prompt(system_prompt, no_system_prompt)
    loaded = _training_layers(train_dir, layers)
    result = _run_export(export_trl, out, layers=loaded, val_fraction=val_fraction, seed=seed, system_prompt=sp,
                         with_without_answer=with_without_answer)
    _summary(result, ("train", "validation"), "trl")


@export_app.command("csv")
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
    from studybench.methods.exports import export_csv

    try:
        fr = [float(x) for x in fractions.split(",")]
    except ValueError:
        fail(f"--fractions must be three numbers like 0.2,0.1,0.7, got {fractions!r}")
    if out.is_dir():
        fail(f"--out {out} is a directory; give a file")
    loaded = _training_layers(train_dir, layers)
    result = _run_export(export_csv, out, layers=loaded, fractions=fr, seed=seed)
    _summary(result, ("train", "val", "test"), "csv")
