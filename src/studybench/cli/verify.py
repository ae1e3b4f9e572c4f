"""``studybench verify`` and ``studybench verify-file``: the rule verifier on pairs, without a run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, out_console, progress_bars

__all__ = ["verify_cmd", "verify_file_cmd"]


def _check_timeout(timeout: float) -> None:
    if not math.isfinite(timeout) or not 1e-3 <= timeout <= 86_400.0:
        fail(f"--timeout must be a finite number in [0.001, 86400], got {timeout}")


def _pair_boxes(gold: str, response: str, answer_type: Any, type_sequence: Any) -> tuple[list[str], list[str]]:
    """Gold boxes and predicted boxes for one pair; a bare gold or response (no box) is one answer."""
    from studybench.answers import extract_answers, find_boxes
    from studybench.records import gold_boxes

    golds = gold_boxes(gold, answer_type, type_sequence) if find_boxes(gold) else [gold.strip()]
    if find_boxes(response):
        preds = extract_answers(response, len(golds))
    else:
        preds = [response.strip()] if response.strip() else []
    return golds, preds


def _parse_types(answer_type: str, type_sequence: str | None) -> tuple[Any, Any]:
    from studybench.records import AnswerType, parse_type_sequence

    try:
        at = AnswerType(answer_type.strip().upper())
    except ValueError:
        raise ValueError(f"unknown answer type {answer_type!r} (allowed: {', '.join(a.value for a in AnswerType)})") from None
    ts = parse_type_sequence(type_sequence or "")
    if at.value in ("TUP", "ALT") and not ts:
        raise ValueError(f"answer type {at.value} needs a type_sequence (e.g. NV,EX)")
    return at, ts


def verify_cmd(
    gold: Annotated[str, typer.Argument(help="Gold answer: a \\boxed{...} string (one box per answer) or a bare answer.")],
    response: Annotated[str, typer.Argument(help="Model response (boxes on the Final Answer line are extracted) or a bare answer.")],
    answer_type: Annotated[str, typer.Option("--type", help="NV | EX | EQ | TUP | IN | MC | TF | QL | ALT.")],
    type_sequence: Annotated[str | None, typer.Option("--type-sequence", help="Slot types for TUP / ALT, e.g. NV,EX.")] = None,
    gold_unit: Annotated[
        str | None,
        typer.Option("--gold-unit", help="Unit of a unitless gold, e.g. '\\mathrm{km}' (one per box, comma-separated, 'None' for none)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Hard wall-clock seconds for the symbolic verification.")] = 5.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Verify one (gold, response) pair with the rule verifier. Exit 0 when correct, 1 when not, 2 on bad input."""
    from studybench.verify import Verifier

    _check_timeout(timeout)
    if not gold.strip():
        fail("the gold answer is empty")
    try:
        at, ts = _parse_types(answer_type, type_sequence)
    except ValueError as e:
        fail(str(e))
    golds, preds = _pair_boxes(gold, response, at, ts)
    with Verifier(workers=1, timeout=timeout) as v:
        verdict = v.verify(golds, preds, at, ts, gold_unit=gold_unit) if preds else None
    correct = bool(verdict and verdict.correct)
    reason = verdict.reason if verdict else "incorrect: no final answer found"
    if as_json:
        out_console.print_json(json.dumps({"correct": correct, "reason": reason, "gold": golds, "extracted": preds}))
    else:
        mark = "[bold green]correct[/bold green]" if correct else "[bold red]incorrect[/bold red]"
        out_console.print(f"{mark}  {escape(reason)}", highlight=False)
    raise typer.Exit(0 if correct else 1)


def verify_file_cmd(
    in_path: Annotated[
        Path,
        typer.Argument(help="JSONL rows with gold, response, answer_type and optional type_sequence and gold_unit (the dev-pair format)."),
    ],
    out_path: Annotated[Path, typer.Option("-o", "--out", help="Output JSONL: the same rows with correct and reason added.")],
    workers: Annotated[int | None, typer.Option("--workers", help="Verifier worker processes (default: CPU count).")] = None,
    timeout: Annotated[float, typer.Option(help="Hard wall-clock seconds per symbolic verification.")] = 5.0,
) -> None:
    """Verify every row of a JSONL file on a process pool; write rows with `correct` and `reason` added."""
    from studybench.files import atomic_write_text
    from studybench.verify import Verifier

    _check_timeout(timeout)
    if workers is not None and not 1 <= workers <= 1024:
        fail(f"--workers must be in [1, 1024], got {workers}")
    try:
        lines = in_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{in_path}: cannot read ({getattr(e, 'strerror', None) or e})")
    rows: list[dict[str, Any]] = []
    items: list[tuple[Any, ...]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as e:
            fail(f"{in_path}: line {n}: not valid JSON ({e})")
        if not isinstance(row, dict):
            fail(f"{in_path}: line {n}: expected a JSON object")
        for fld in ("gold", "response", "answer_type"):
            if not isinstance(row.get(fld), str):
                fail(f"{in_path}: line {n}: field '{fld}': missing or not a string")
        ts_raw = row.get("type_sequence") or ""
        if not isinstance(ts_raw, (str, list)):
            fail(f"{in_path}: line {n}: field 'type_sequence': must be a comma-separated string")
        try:
            at, ts = _parse_types(row["answer_type"], ",".join(ts_raw) if isinstance(ts_raw, list) else ts_raw)
        except ValueError as e:
            fail(f"{in_path}: line {n}: {e}")
        unit = row.get("gold_unit")
        if unit is not None and not isinstance(unit, (str, list)):
            fail(f"{in_path}: line {n}: field 'gold_unit': must be a string, a list or null")
        golds, preds = _pair_boxes(row["gold"], row["response"], at, ts)
        rows.append(row)
        items.append((golds, preds, at, ts, unit))
    if not rows:
        fail(f"{in_path}: no rows")
    verdicts: list[Any] = []
    with Verifier(workers=workers, timeout=timeout) as v, progress_bars() as progress:
        progress("verify", 0, len(items))
        for start in range(0, len(items), 256):
            chunk = items[start : start + 256]
            verdicts.extend(v.verify_many(chunk))
            progress("verify", len(chunk), None)
    out_lines = []
    tp = fp = fn = tn = 0
    for row, item, verdict in zip(rows, items, verdicts, strict=True):
        correct = bool(item[1]) and verdict.correct
        reason = verdict.reason if item[1] else "incorrect: no final answer found"
        out_lines.append(json.dumps({**row, "correct": correct, "reason": reason}, ensure_ascii=False))
        if isinstance(row.get("label"), bool):
            tp += correct and row["label"]
            fp += correct and not row["label"]
            fn += (not correct) and row["label"]
            tn += (not correct) and not row["label"]
    try:
        atomic_write_text(out_path, "\n".join(out_lines) + "\n")
    except OSError as e:
        fail(f"{out_path}: cannot write ({e.strerror or e})")
    n_correct = sum(1 for v_ in verdicts if v_.correct)
    console.print(f"{len(rows)} rows verified, {n_correct} correct -> {out_path}")
    if tp + fp + fn + tn:
        prec = tp / (tp + fp) if tp + fp else float("nan")
        rec = tp / (tp + fn) if tp + fn else float("nan")
        console.print(f"against `label`: accuracy {(tp + tn) / (tp + fp + fn + tn):.4f}, precision {prec:.4f}, recall {rec:.4f} "
                      f"(tp {tp}, fp {fp}, fn {fn}, tn {tn})")
