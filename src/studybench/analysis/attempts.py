"""A run as one tidy table: one row per parent x sub-problem x seed x attempt (``studybench export attempts``).

The logs of a run directory are append-only (a regenerated turn keeps its old rows), so analysing
them directly means deduplicating them and deciding which verdict counts. :func:`attempt_rows` does
both with the one currency rule the report uses (:func:`studybench.store.turn_verdicts`): grouping
its rows by seed reproduces the report's Par@k and Sub@k exactly (``final_correct`` is what the
report scores). :func:`write_attempts` writes the rows as CSV, JSON Lines or Parquet.

Columns (:data:`ATTEMPT_COLUMNS`, then one ``label_<key>`` column per run label):

- ``split``, ``parent``, ``source``, ``year``, ``source_problem_id``, ``problem_type`` (the
  normalised sub-discipline), ``sub_id``, ``answer_type``, ``seed``, ``attempt``, ``turn`` (the
  sub-problem's 0-based position in its parent);
- ``generated``: the turn has a generation (a failed one too: see ``error``); ``error``,
  ``finish_reason``, ``prompt_tokens``, ``completion_tokens`` from its last generation row;
- ``extracted`` (a JSON list of the extracted answers), ``rule_correct``, ``rule_reason`` of the
  rule verdict that counts, and ``rule_status``: ``current`` (a verdict made on the turn's current
  completion: it counts), ``stale`` (verdicts exist, made on an older completion: none counts, the
  verdict columns are empty) or ``missing`` (never verified);
- ``llm_verdict`` (``TRUE``, ``FALSE``, ``unjudgeable``, ``error`` or ``not judged``; empty when the
  active LLM judge is not asked about the turn: a rule accept, a failed turn, a ``rule`` run),
  ``llm_judge_model``, ``llm_justification`` of the active judge's counting verdict;
- ``final_correct``: strict (rule) or liberal (rule OR LLM judge), as the report scores;
- ``run_complete``, ``run_health``: whether the run is complete (:func:`studybench.report.run_health`)
  and, when it is not, why (``INCOMPLETE: ...``), on every row. An incomplete or unreadable run is
  refused unless ``allow_incomplete``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studybench.answers import clean_surrogates
from studybench.escaping import csv_writer
from studybench.files import atomic_write_text
from studybench.report import SCORINGS, health_status, load_run_report, require_complete
from studybench.store import RunRows, RunStore, turn_verdicts

__all__ = ["ATTEMPT_COLUMNS", "EXPORT_FORMATS", "LABEL_PREFIX", "attempt_rows", "write_attempts"]

ATTEMPT_COLUMNS: dict[str, str] = {
    "split": "string", "parent": "string", "source": "string", "year": "string", "source_problem_id": "string",
    "problem_type": "string", "sub_id": "string", "answer_type": "string", "seed": "int", "attempt": "int",
    "turn": "int", "generated": "bool", "error": "string", "finish_reason": "string", "prompt_tokens": "int",
    "completion_tokens": "int", "extracted": "string", "rule_correct": "bool", "rule_reason": "string",
    "rule_status": "string", "llm_verdict": "string", "llm_judge_model": "string", "llm_justification": "string",
    "final_correct": "bool", "run_complete": "bool", "run_health": "string",
}
"""The columns of :func:`attempt_rows`, in order, with their types (every one may be empty but the key
columns, ``generated``, ``rule_status`` and ``final_correct``)."""

LABEL_PREFIX = "label_"
"""Run labels become columns ``label_<key>``."""

EXPORT_FORMATS = ("csv", "parquet", "jsonl")
"""The formats :func:`write_attempts` writes."""


def _tokens(usage: Any, key: str) -> int | None:
    v = usage.get(key) if isinstance(usage, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def attempt_rows(run_dir: RunStore | Path | str, scoring: str | None = None, *,
                 allow_incomplete: bool = False) -> list[dict[str, Any]]:
    """One row per turn of a run's manifest (seeds, parents, sub-problems, attempts order).

    Args:
        run_dir: the run directory (or its :class:`~studybench.store.RunStore`).
        scoring: what ``final_correct`` is: ``"strict"`` (rule verdicts only), ``"liberal"`` (rule OR
            the active LLM judge) or ``None``: as the report scores (liberal when the run has an
            active judge, else strict).
        allow_incomplete: export an incomplete run too (every row says ``run_complete: False`` and why);
            default: refuse it.

    Returns:
        Dicts with the keys of :data:`ATTEMPT_COLUMNS`, then ``label_<key>`` per run label (see the
        module docstring).

    Raises:
        studybench.report.IncompleteRunError: an unreadable run (no manifest, an invalid one), or an
            incomplete one without ``allow_incomplete``.
        ValueError: an unknown ``scoring``.
    """
    if scoring is not None and scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(Path(run_dir))
    _, health = load_run_report(store.root, scoring)
    require_complete(store.root if isinstance(run_dir, RunStore) else run_dir, health, allow_incomplete)
    run_health = None if health["complete"] else health_status(health)
    man = store.read_manifest()
    judge = man.active_judge
    liberal = scoring == "liberal" or (scoring is None and judge is not None)
    rows = RunRows.read(store, llm=judge is not None)
    table = turn_verdicts(man, rows, judge["judge_id"] if judge is not None else None)
    parents = {p.uid: p for p in man.parents}
    turn_of = {(p.uid, s.id): i for p in man.parents for i, s in enumerate(p.subs)}
    labels = {f"{LABEL_PREFIX}{k}": v for k, v in man.labels.items()}
    out: list[dict[str, Any]] = []
    for t in table:
        key, p = t.key, parents[t.key.parent]
        g = rows.generations.get(key)
        rv = t.rule.verdict
        lv = t.llm.verdict if t.llm is not None else None
        if rv is not None:
            status = "current"
        elif key in rows.rule_verdicts:
            status = "stale"
        else:
            status = "missing"
        out.append({
            "split": key.split, "parent": key.parent, "source": p.source, "year": p.year,
            "source_problem_id": p.source_problem_id, "problem_type": p.problem_type, "sub_id": key.sub_id,
            "answer_type": t.answer_type, "seed": key.seed, "attempt": key.attempt, "turn": turn_of[(key.parent, key.sub_id)],
            "generated": t.rule.generation is not None,
            "error": g.error if g is not None else None,
            "finish_reason": g.finish_reason if g is not None else None,
            "prompt_tokens": _tokens(g.usage, "prompt_tokens") if g is not None else None,
            "completion_tokens": _tokens(g.usage, "completion_tokens") if g is not None else None,
            "extracted": json.dumps(rv.extracted, ensure_ascii=False, allow_nan=False) if rv is not None and rv.extracted is not None else None,
            "rule_correct": rv.correct if rv is not None else None,
            "rule_reason": rv.reason if rv is not None else None,
            "rule_status": status,
            "llm_verdict": None if t.llm is None else (t.llm.value if t.llm.value is not None else "not judged"),
            "llm_judge_model": lv.judge_model if lv is not None else None,
            "llm_justification": lv.justification if lv is not None else None,
            "final_correct": t.liberal if liberal else t.strict,
            "run_complete": bool(health["complete"]),
            "run_health": run_health,
            **labels,
        })
    return out


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    extra = [c for c in (rows[0] if rows else {}) if c not in ATTEMPT_COLUMNS]
    return [*ATTEMPT_COLUMNS, *extra]


def _clean(value: Any) -> Any:
    return clean_surrogates(value) if isinstance(value, str) else value


def write_attempts(rows: Sequence[dict[str, Any]], path: Path | str, fmt: str) -> Path:
    """Write :func:`attempt_rows` to a file (a temporary file in the same directory, then renamed).

    CSV: a header, then one line per row; empty cells for ``None``, booleans as ``True``/``False``
    (``pandas.read_csv`` reads them back as booleans). JSON Lines: one object per line. Parquet
    (needs ``pyarrow``, the ``analysis`` extra): typed columns (:data:`ATTEMPT_COLUMNS`; labels are strings).

    Args:
        rows: the rows.
        path: the file to write (its directory is created).
        fmt: ``"csv"``, ``"jsonl"`` or ``"parquet"``.

    Returns:
        ``path``.

    Raises:
        ValueError: an unknown ``fmt``.
        ImportError: Parquet without pyarrow (the message says what to install).
        OSError: the file cannot be written (``filename`` names it).
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    path = Path(path)
    cols = _columns(rows)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv_writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r.get(c) is None else _clean(r.get(c)) for c in cols])
        atomic_write_text(path, buf.getvalue())
    elif fmt == "jsonl":
        atomic_write_text(path, "".join(json.dumps({c: _clean(r.get(c)) for c in cols}, ensure_ascii=False, allow_nan=False) + "\n" for r in rows))
    else:
        _write_parquet(rows, cols, path)
    return path


def _write_parquet(rows: Sequence[dict[str, Any]], cols: list[str], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing Parquet needs pyarrow: pip install 'studybench[analysis]' "
                          "(or export --format csv / jsonl)") from None
    kinds = {"string": pa.string(), "int": pa.int64(), "bool": pa.bool_()}
    schema = pa.schema([(c, kinds[ATTEMPT_COLUMNS.get(c, "string")]) for c in cols])
    table = pa.table({c: pa.array([_clean(r.get(c)) for r in rows], type=schema.field(c).type) for c in cols}, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, str(tmp))
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename in (None, str(tmp)):
            e.filename = str(path)
        raise
