"""On-disk cache of LLM judge verdicts (PROTOCOL.md section 6).

A verdict is stored under the key ``sha256(json([judge model, template digest, inputs digest]))``:
the same inputs judged by the same model with the same template are never sent twice, whether
they come from a re-run, a refreshed report or another run. Every judge task (answer equivalence,
the contamination audit's duplicate question) shares the one cache; the template digest keeps their
keys apart. The judge's reasoning is not part of
the inputs, so it never changes a key. Only final outcomes are cached (TRUE, FALSE and
``unjudgeable`` after the parse retries); transport failures are not, so they are tried again.

Layout: one append-only JSONL file, ``<root>/verdicts.jsonl`` (:class:`studybench.store.JsonlLog`,
so concurrent writers and a killed process leave it readable; the last row per key wins). The
default root is ``$STUDYBENCH_JUDGE_CACHE`` or the user cache directory (``.../studybench/judge``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from studybench.files import JsonlLog

__all__ = ["LLMVerdictCache", "cache_key", "default_cache_root"]

log = logging.getLogger(__name__)


def default_cache_root() -> Path:
    """Where verdicts are cached unless a directory is given.

    Returns:
        ``$STUDYBENCH_JUDGE_CACHE`` if set, else ``<user cache dir>/studybench/judge``.
    """
    env = os.environ.get("STUDYBENCH_JUDGE_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("studybench")) / "judge"


def cache_key(judge_model: str, template_digest: str, inputs_digest: str) -> str:
    """The cache key of one judgement.

    Args:
        judge_model: the judge model name.
        template_digest: sha256 hex of the template text.
        inputs_digest: sha256 hex of the inputs (:meth:`LLMJudgeTask.inputs_digest`).

    Returns:
        sha256 hex of the JSON list of the three.
    """
    blob = json.dumps([judge_model, template_digest, inputs_digest], ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


class LLMVerdictCache:
    """Verdicts by :func:`cache_key`, loaded lazily from ``<root>/verdicts.jsonl``.

    Thread-safe within a process; several processes may append to the same file. A row that does not
    match its own key, or holds no final verdict, is ignored when read.

    Args:
        root: the cache directory (created on first write); ``None``: :func:`default_cache_root`.
    """

    FILE = "verdicts.jsonl"

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_root()
        self._log = JsonlLog(self.root / self.FILE)
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
                key = row.get("key")
                if not isinstance(key, str) or row.get("verdict") not in ("TRUE", "FALSE", "unjudgeable"):
                    continue
                fields = (row.get("judge_model"), row.get("template_digest"), row.get("inputs_digest"))
                if not all(isinstance(f, str) for f in fields) or cache_key(*fields) != key:
                    continue  # a row that does not match its own key is not trusted
                if row["verdict"] != "unjudgeable" and row.get("error"):
                    continue
                rows[key] = row
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
        """Store a final verdict (appended to the file; kept in memory if the file cannot be written).

        Args:
            key: :func:`cache_key` of the judgement.
            row: must hold ``verdict`` in TRUE / FALSE / unjudgeable, and ``judge_model``,
                ``template_digest`` and ``inputs_digest`` (rows that do not match their key are
                ignored when read back).

        Raises:
            ValueError: any other verdict (transport errors are never cached).
        """
        if row.get("verdict") not in ("TRUE", "FALSE", "unjudgeable"):
            raise ValueError(f"only final verdicts are cached, got {row.get('verdict')!r}")
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
        """Create the cache directory and open its file for appending.

        Raises:
            OSError: the directory or file cannot be created or written.
        """
        with self._lock:
            self._log.open()

    def __len__(self) -> int:
        with self._lock:
            return len(self._load())

    def close(self) -> None:
        """Close the file (it is reopened by the next write)."""
        with self._lock:
            self._log.close()
