"""On-disk cache of LLM judge verdicts (docs/protocol.md section 6).

A verdict is stored under the key ``sha256(json([judge model, template digest, inputs digest]))``:
the same inputs judged by the same model with the same template are never sent twice, whether
they come from a re-run, a refreshed report or another run. Every judge task (answer equivalence,
the contamination audit's duplicate question) shares the one cache; the template digest keeps their
keys apart. The judge's reasoning is not part of
the inputs, so it never changes a key. Only verdicts are cached (TRUE and FALSE): an
``unjudgeable`` outcome (a reply outside the format after the parse retries, or inputs the endpoint
refused) is not a verdict and is never written, and rows of it written by older versions are
ignored when read, so a misconfigured judge cannot leave answers behind that a later, fixed judge
would be served; transport failures are not cached either, so they are tried again.

Reading and writing are separate: a judge built with ``read_cache=False`` (``studybench judge
--refresh``) asks afresh and writes through, so its new verdicts replace the cached ones.

Layout: one append-only JSONL file, ``<root>/verdicts.jsonl`` (:class:`studybench.store.JsonlLog`,
so concurrent writers and a killed process leave it readable; the last row per key wins). The
default root is ``$STUDYBENCH_JUDGE_CACHE`` or the user cache directory (``.../studybench/judge``,
e.g. ``~/.cache/studybench/judge`` on Linux). Each row records its ``judge_model`` and its ``task``
(``answer-equivalence``, ``duplicate``): :func:`cache_summary` counts the entries per judge model,
task and verdict (``studybench cache show``), :func:`clear_cache` removes them, all or some
(``studybench cache clear``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from studybench.files import JsonlLog, atomic_write_text, cache_dir, dumps_json

__all__ = ["CACHED_VERDICTS", "LLMVerdictCache", "cache_key", "cache_summary", "clear_cache", "default_cache_root"]

CACHED_VERDICTS = ("TRUE", "FALSE")
"""The verdicts the cache stores and serves (``unjudgeable`` and ``error`` never)."""

_UNKNOWN_TASK = "unknown"

log = logging.getLogger(__name__)


def default_cache_root() -> Path:
    """Where verdicts are cached unless a directory is given.

    Returns:
        ``$STUDYBENCH_JUDGE_CACHE`` if set, else ``<user cache dir>/studybench/judge``.
    """
    return cache_dir("judge", "STUDYBENCH_JUDGE_CACHE")


def cache_key(judge_model: str, template_digest: str, inputs_digest: str) -> str:
    """The cache key of one judgement.

    Args:
        judge_model: the judge model name.
        template_digest: sha256 hex of the template text.
        inputs_digest: sha256 hex of the inputs (:meth:`LLMJudgeTask.inputs_digest`).

    Returns:
        sha256 hex of the JSON list of the three.
    """
    blob = json.dumps([judge_model, template_digest, inputs_digest], ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


class LLMVerdictCache:
    """Verdicts by :func:`cache_key`, loaded lazily from ``<root>/verdicts.jsonl``.

    Thread-safe within a process; several processes may append to the same file. A row that does not
    match its own key, or holds no TRUE / FALSE verdict (e.g. an ``unjudgeable`` row of an older
    version), is ignored when read.

    Args:
        root: the cache directory (created on first write); ``None``: :func:`default_cache_root`.
    """

    FILE = "verdicts.jsonl"

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_root()
        self._log = JsonlLog(self.root / self.FILE, strict=False)  # a lost row is a miss
        self._rows: dict[str, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self._broken: str | None = None

    @property
    def path(self) -> Path:
        """The cache file, ``<root>/verdicts.jsonl``."""
        return self._log.path

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._rows is None:
            rows: dict[str, dict[str, Any]] = {}
            for row in self._log.rows():
                if _valid(row) and row["verdict"] in CACHED_VERDICTS:
                    rows[row["key"]] = row
            self._rows = rows
        return self._rows

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached row of one judgement.

        Args:
            key: :func:`cache_key` of the judgement.

        Returns:
            The row (``verdict``, ``justification``, ``reply`` ...) or ``None``.
        """
        with self._lock:
            return self._load().get(key)

    def put(self, key: str, row: dict[str, Any]) -> None:
        """Store a verdict (appended to the file; kept in memory if the file cannot be written).

        A later :meth:`put` of the same key replaces it (the last row per key wins).

        Args:
            key: :func:`cache_key` of the judgement.
            row: must hold ``verdict`` TRUE or FALSE, and ``judge_model``, ``template_digest`` and
                ``inputs_digest`` (rows that do not match their key are ignored when read back);
                ``task`` names the judge task (for :func:`cache_summary`).

        Raises:
            ValueError: any other verdict (``unjudgeable`` and transport errors are never cached).
        """
        if row.get("verdict") not in CACHED_VERDICTS:
            raise ValueError(f"only TRUE / FALSE verdicts are cached, got {row.get('verdict')!r}")
        full = {"key": key, **row}
        with self._lock:
            self._load()[key] = full
            if self._broken is None:
                try:
                    self._log.append(full)
                except OSError as e:  # keep judging; the verdict stays in memory for this process
                    self._broken = f"{self.path}: cannot write ({e.strerror or e})"
                    log.warning("verdict cache disabled: %s", self._broken)

    def check_writable(self) -> None:
        """Create the cache directory, open its file for appending and read it.

        Raises:
            OSError: the directory or file cannot be created or written.
            studybench.files.InputFileError: the file is not a regular file, or too large.
        """
        with self._lock:
            self._log.open()
            self._load()

    def __len__(self) -> int:
        with self._lock:
            return len(self._load())

    def close(self) -> None:
        """Close the file (it is reopened by the next write)."""
        with self._lock:
            self._log.close()


def _valid(row: dict[str, Any]) -> bool:
    """Whether a cache row is well formed: its fields hash to its key, a final verdict, no error on
    a TRUE / FALSE."""
    key = row.get("key")
    if not isinstance(key, str) or row.get("verdict") not in ("TRUE", "FALSE", "unjudgeable"):
        return False
    fields = (row.get("judge_model"), row.get("template_digest"), row.get("inputs_digest"))
    if not all(isinstance(f, str) for f in fields) or cache_key(*fields) != key:  # type: ignore[arg-type]
        return False  # a row that does not match its own key is not trusted
    return not (row["verdict"] != "unjudgeable" and row.get("error"))


def _task_of(row: dict[str, Any], known_templates: Mapping[str, str]) -> str:
    task = row.get("task")
    if isinstance(task, str) and task:
        return task
    return known_templates.get(str(row.get("template_digest")), _UNKNOWN_TASK)


def _scan(path: Path, known_templates: Mapping[str, str]) -> tuple[int, int, dict[str, dict[str, Any]]]:
    """(lines, rows not well formed, last well-formed row per key with its ``task`` resolved)."""
    lines = invalid = 0
    last: dict[str, dict[str, Any]] = {}
    served: dict[str, dict[str, Any]] = {}
    for row in JsonlLog(path, strict=False).rows():
        lines += 1
        if not _valid(row):
            invalid += 1
            continue
        row = {**row, "task": _task_of(row, known_templates)}
        last[row["key"]] = row
        if row["verdict"] in CACHED_VERDICTS:
            served[row["key"]] = row
    # a key is described by the row the cache serves, else (only unjudgeable rows) by its last row
    return lines, invalid, {k: served.get(k, r) for k, r in last.items()}


def cache_summary(root: str | Path | None = None, *, known_templates: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the verdict cache holds (``studybench cache show``).

    Args:
        root: the cache directory (``None``: :func:`default_cache_root`).
        known_templates: task name per template digest, for rows written before rows named their
            task (e.g. the builtin templates of the answer and the duplicate task); others are
            ``"unknown"``.

    Returns:
        ``root``, ``file``, ``exists``, ``bytes``, ``rows`` (lines read), ``entries`` (judgements the
        cache serves), ``ignored_unjudgeable`` (judgements with only ``unjudgeable`` rows, written by
        an older version and never served), ``invalid_rows`` (rows that do not match their key or
        hold no final verdict) and ``by_model``: ``{judge model: {task: {"TRUE": n, "FALSE": n}}}``
        over the entries served.

    Raises:
        OSError: the cache file exists and cannot be read.
        studybench.files.InputFileError: it is not a regular file, or too large.
    """
    base = Path(root) if root is not None else default_cache_root()
    path = base / LLMVerdictCache.FILE
    lines, invalid, keys = _scan(path, known_templates or {})
    by_model: dict[str, dict[str, dict[str, int]]] = {}
    entries = ignored = 0
    for row in keys.values():
        if row["verdict"] not in CACHED_VERDICTS:
            ignored += 1
            continue
        entries += 1
        counts = by_model.setdefault(row["judge_model"], {}).setdefault(row["task"], {v: 0 for v in CACHED_VERDICTS})
        counts[row["verdict"]] += 1
    return {
        "root": str(base),
        "file": str(path),
        "exists": path.exists(),
        "bytes": path.stat().st_size if path.exists() else 0,
        "rows": lines,
        "entries": entries,
        "ignored_unjudgeable": ignored,
        "invalid_rows": invalid,
        "by_model": {m: dict(sorted(t.items())) for m, t in sorted(by_model.items())},
    }


def clear_cache(
    root: str | Path | None = None,
    *,
    judge_model: str | None = None,
    task: str | None = None,
    known_templates: Mapping[str, str] | None = None,
) -> int:
    """Remove cached verdicts (``studybench cache clear``): all, or those of one judge model and/or task.

    Without a filter the cache file is deleted. With one, the file is rewritten (to a temporary file,
    then renamed) without every row of the matching judgements (their ``unjudgeable`` rows
    included), and without rows that are not well formed. Run it while no judge writes to the same
    cache: a verdict appended during the rewrite is lost (it is asked again next time).

    Args:
        root: the cache directory (``None``: :func:`default_cache_root`).
        judge_model: only the verdicts of this judge model.
        task: only the verdicts of this task (``answer-equivalence``, ``duplicate``, ``unknown``).
        known_templates: as for :func:`cache_summary`.

    Returns:
        The number of judgements removed (entries served and ignored ``unjudgeable`` ones).

    Raises:
        OSError: the file cannot be read, rewritten or removed.
    """
    base = Path(root) if root is not None else default_cache_root()
    path = base / LLMVerdictCache.FILE
    if not path.exists():
        return 0
    known = known_templates or {}
    _, _, keys = _scan(path, known)
    drop = {k for k, r in keys.items()
            if (judge_model is None or r["judge_model"] == judge_model) and (task is None or r["task"] == task)}
    if judge_model is None and task is None:
        path.unlink()
        return len(drop)
    kept = [row for row in JsonlLog(path, strict=False).rows() if _valid(row) and row["key"] not in drop]
    atomic_write_text(path, "".join(dumps_json(row, None) + "\n" for row in kept))
    return len(drop)
