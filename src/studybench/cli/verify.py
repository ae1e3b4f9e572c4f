"""``studybench verify`` and ``studybench verify-file``: the rule verifier on pairs, without a run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from studybench.cli.common import console, fail, fail_write, out_console, progress_bars
from studybench.escaping import plural

__all__ = ["RAY_ADDRESS_HELP", "RAY_HELP", "ray_verifier", "verify_cmd", "verify_file_cmd"]

RAY_HELP = ("Judge on Ray: a Ray Data pipeline over an actor pool, one verifier per actor (the cluster at --ray-address, "
            "else $RAY_ADDRESS, else a local one started for this command). Needs pip install 'studybench[ray]'.")
RAY_ADDRESS_HELP = "Ray cluster to judge on (implies --ray): auto, HOST:6379 (`ray start --head`) or ray://HOST:10001."


def _check_timeout(timeout: float) -> None:
    if not math.isfinite(timeout) or not 1e-3 <= timeout <= 86_400.0:
        fail(f"--verify-timeout must be a finite number in [0.001, 86400], got {timeout}")


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


def _type_name(v: Any) -> str:
    return {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(v), type(v).__name__)


def _pair_item(row: dict[str, Any]) -> tuple[Any, ...]:
    """``(golds, preds, answer_type, type_sequence, gold_unit, problem)`` of one verify-file row, every field type-checked.

    Raises:
        ValueError: ``field 'F': what is wrong`` for the first bad field.
    """
    for fld in ("gold", "response", "answer_type"):
        if not isinstance(row.get(fld), str):
            got = "missing" if fld not in row else f"must be a string, got {_type_name(row[fld])}"
            raise ValueError(f"field '{fld}': {got}")
    if not row["gold"].strip():
        raise ValueError("field 'gold': empty")
    ts_raw = row.get("type_sequence")
    if ts_raw is not None and not isinstance(ts_raw, str):
        if not isinstance(ts_raw, list):
            raise ValueError(f"field 'type_sequence': must be a comma-separated string or a list of strings, got {_type_name(ts_raw)}")
        for i, t in enumerate(ts_raw):
            if not isinstance(t, str):
                raise ValueError(f"field 'type_sequence[{i}]': must be a string such as \"NV\", got {_type_name(t)}")
        ts_raw = ",".join(ts_raw)
    try:
        at, ts = _parse_types(row["answer_type"], ts_raw)
    except ValueError as e:
        fld = "type_sequence" if "type_sequence" in str(e) else "answer_type"
        raise ValueError(f"field '{fld}': {e}") from None
    unit = row.get("gold_unit")
    if isinstance(unit, list):
        for i, u in enumerate(unit):
            if u is not None and not isinstance(u, str):
                raise ValueError(f"field 'gold_unit[{i}]': must be a string or null, got {_type_name(u)}")
    elif unit is not None and not isinstance(unit, str):
        raise ValueError(f"field 'gold_unit': must be a string, a list or null, got {_type_name(unit)}")
    problem = row.get("problem")
    if problem is not None and not isinstance(problem, str):
        raise ValueError(f"field 'problem': must be a string or null, got {_type_name(problem)}")
    label = row.get("label")
    if label is not None and not isinstance(label, bool):
        raise ValueError(f"field 'label': must be true, false or null, got {_type_name(label)}")
    golds, preds = _pair_boxes(row["gold"], row["response"], at, ts)
    return golds, preds, at, ts, unit, problem


def ray_verifier(address: str | None, actors: int | None, timeout: float, progress: Any = None) -> Any:
    """A :class:`~studybench.evaluate.ray_judge.RayVerifier` for ``--ray`` / ``--ray-address``, or a clean exit 2.

    Args:
        address: ``--ray-address`` (``None``: ``$RAY_ADDRESS``, else a local cluster).
        actors: the actor pool's size (``None``: the cluster's CPUs); also the CPUs of a local cluster.
        timeout: seconds per judgement.
        progress: called with the number of items judged as batches come back.

    Returns:
        The verifier (use it in a ``with`` block: it shuts down what it started).
    """
    from studybench.evaluate.ray_judge import RAY_INSTALL_HINT, RayVerifier, ray_available

    if not ray_available():
        fail(f"--ray needs the 'ray' extra: {RAY_INSTALL_HINT}")
    return RayVerifier(address, num_cpus=None if address else actors, actors=actors, timeout=timeout, progress=progress)


def verify_cmd(
    gold: Annotated[str, typer.Argument(help="Gold answer: a \\boxed{...} string (one box per answer) or a bare answer.")],
    response: Annotated[str, typer.Argument(help="Model response (boxes on the Final Answer line are extracted) or a bare answer.")],
    answer_type: Annotated[str, typer.Option("--type", help="NV | EX | EQ | TUP | IN | MC | TF | QL | ALT.")],
    type_sequence: Annotated[str | None, typer.Option("--type-sequence", help="Slot types for TUP / ALT, e.g. NV,EX.")] = None,
    gold_unit: Annotated[
        str | None,
        typer.Option("--gold-unit", help="Unit of a unitless gold, e.g. '\\mathrm{km}' (one per box, comma-separated, 'None' for none)."),
    ] = None,
    verify_timeout: Annotated[float, typer.Option("--verify-timeout", help="Hard wall-clock seconds for the symbolic verification.")] = 5.0,
    old_timeout: Annotated[float | None, typer.Option("--timeout", hidden=True, help="The old name of --verify-timeout.")] = None,
    problem: Annotated[
        str | None,
        typer.Option("--problem", help="The problem text: definitions it states ('where \\omega_0 = \\sqrt{k/m}') are used."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Verify one (gold, response) pair with the rule verifier. Exit 0 when correct, 1 when not (and when the
    verifier failed: an internal error, said on stderr), 2 on bad input."""
    from studybench.verify import Verifier, is_internal_error

    timeout = verify_timeout if old_timeout is None else old_timeout  # the old name kept working (hidden, silent)
    _check_timeout(timeout)
    if not gold.strip():
        fail("the gold answer is empty")
    try:
        at, ts = _parse_types(answer_type, type_sequence)
    except ValueError as e:
        fail(str(e))
    golds, preds = _pair_boxes(gold, response, at, ts)
    with Verifier(workers=1, timeout=timeout) as v:
        verdict = v.verify(golds, preds, at, ts, gold_unit=gold_unit, problem=problem) if preds else None
    correct = bool(verdict and verdict.correct)
    reason = verdict.reason if verdict else "incorrect: no final answer found"
    internal = is_internal_error(reason)
    if as_json:
        out_console.print_json(json.dumps({"correct": correct, "reason": reason, "gold": golds, "extracted": preds,
                                           **({"internal_error": True} if internal else {})}, allow_nan=False))
    else:
        mark = "[bold green]correct[/bold green]" if correct else "[bold red]incorrect[/bold red]"
        out_console.print(f"{mark}  {escape(reason)}", highlight=False)
    if internal:
        fail(f"the rule verifier failed instead of deciding ({reason.removeprefix('incorrect: ')}); "
             "check the installation (SymPy, pint, latex2sympy2_extended)", 1)
    raise typer.Exit(0 if correct else 1)


def verify_file_cmd(
    in_path: Annotated[
        Path,
        typer.Argument(help="JSONL rows with gold, response, answer_type and optional type_sequence, gold_unit and problem "
                            "(the problem text, whose definitions are used; the dev-pair format)."),
    ],
    out_path: Annotated[Path, typer.Option("-o", "--out", help="Output JSONL: the same rows with correct and reason added.")],
    workers: Annotated[int | None, typer.Option("--verify-workers", help="Verifier worker processes (default: CPU count).")] = None,
    verify_timeout: Annotated[float, typer.Option("--verify-timeout", help="Hard wall-clock seconds per symbolic verification.")] = 5.0,
    use_ray: Annotated[bool, typer.Option("--ray", help=RAY_HELP + " --verify-workers: the actors.")] = False,
    ray_address: Annotated[str | None, typer.Option("--ray-address", metavar="ADDRESS", help=RAY_ADDRESS_HELP)] = None,
    old_workers: Annotated[int | None, typer.Option("--workers", hidden=True, help="The old name of --verify-workers.")] = None,
    old_timeout: Annotated[float | None, typer.Option("--timeout", hidden=True, help="The old name of --verify-timeout.")] = None,
) -> None:
    """Verify every row of a JSONL file on a process pool (or on Ray); write rows with `correct` and `reason` added.

    Exit 1 when a verdict is an internal error of the verifier (e.g. a broken SymPy install): the
    summary counts them and the output is not trustworthy."""
    from studybench.files import (
        MAX_DATA_BYTES,
        InputFileError,
        atomic_write_text,
        jsonl_lines,
        parse_json,
        read_user_text,
    )
    from studybench.report import INTERNAL_ERROR_ADVICE
    from studybench.verify import Verifier, is_internal_error

    if old_workers is not None:
        workers = old_workers
    timeout = verify_timeout if old_timeout is None else old_timeout  # the old name kept working (hidden, silent)
    _check_timeout(timeout)
    if workers is not None and not 1 <= workers <= 1024:
        fail(f"--verify-workers must be in [1, 1024], got {workers}")
    try:
        text = read_user_text(in_path, limit=MAX_DATA_BYTES)
    except InputFileError as e:
        fail(str(e))
    rows: list[dict[str, Any]] = []
    items: list[tuple[Any, ...]] = []
    for n, line in jsonl_lines(text):  # "\n" only: U+2028 or U+0085 inside a string is not a line end
        try:  # strict: NaN, Infinity, 1e999999 or a 400-digit integer anywhere in a row is refused, so that
            # the rows written back (every input field kept) are valid JSON equal to what was read
            row = parse_json(line, in_path, line=n)
        except InputFileError as e:
            fail(str(e))
        if not isinstance(row, dict):
            fail(f"{in_path}: line {n}: expected a JSON object, got {_type_name(row)}")
        try:
            items.append(_pair_item(row))
        except ValueError as e:
            fail(f"{in_path}: line {n}: {e}")
        rows.append(row)
    if not rows:
        fail(f"{in_path}: no rows")
    verdicts: list[Any] = []
    if use_ray or ray_address:
        from studybench.evaluate.ray_judge import RayJudgeError

        with progress_bars() as progress:
            progress("verify", 0, len(items))
            try:
                with ray_verifier(ray_address, workers, timeout, lambda n: progress("verify", n, None)) as rv:
                    verdicts = rv.verify_many(items)
            except RayJudgeError as e:
                fail(str(e), 1)
    else:
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
        out_lines.append(json.dumps({**row, "correct": correct, "reason": reason}, ensure_ascii=False, allow_nan=False))
        if isinstance(row.get("label"), bool):
            tp += correct and row["label"]
            fp += correct and not row["label"]
            fn += (not correct) and row["label"]
            tn += (not correct) and not row["label"]
    try:
        atomic_write_text(out_path, "\n".join(out_lines) + "\n")
    except OSError as e:
        fail_write(e, out_path, resumable=False)
    n_correct = sum(1 for v_ in verdicts if v_.correct)
    internal = sum(1 for v_ in verdicts if is_internal_error(v_.reason))
    console.print(f"{plural(len(rows), 'row')} verified, {n_correct} correct, {internal} internal errors -> {escape(str(out_path))}",
                  soft_wrap=True)
    if tp + fp + fn + tn:
        prec = tp / (tp + fp) if tp + fp else float("nan")
        rec = tp / (tp + fn) if tp + fn else float("nan")
        console.print(f"against `label`: accuracy {(tp + tn) / (tp + fp + fn + tn):.4f}, precision {prec:.4f}, recall {rec:.4f} "
                      f"(tp {tp}, fp {fp}, fn {fn}, tn {tn})")
    if internal:
        console.print(f"[bold red]ERROR: {internal} of {plural(len(rows), 'verdict')} {'is an internal error' if internal == 1 else 'are internal errors'}: "
                      f"{escape(INTERNAL_ERROR_ADVICE)}[/bold red]", soft_wrap=True)
        raise typer.Exit(1)
