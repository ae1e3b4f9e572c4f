"""The run directory on disk: the manifest and the three append-only logs (DESIGN.md "Run directory").

::

    RUN/
      manifest.json         Manifest: config, data hash, package version, backend, sampling, verifier
      generations.jsonl     GenerationRow per generated turn
      judgements.jsonl      RuleVerdictRow per rule-judged completion
      llm_judgements.jsonl  LLMVerdictRow per LLM-judged completion and judge configuration
      report.json, report.md

Rows go through :class:`studybench.files.JsonlLog` (one ``write`` of a complete line with
``O_APPEND``: a SIGKILL leaves at most a torn last line, which readers skip); readers keep the last
row per key, so re-running is idempotent. The manifest is written to a temporary file and renamed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from studybench.files import (
    MAX_DATA_BYTES,
    InputFileError,
    JsonlLog,
    atomic_write_text,
    dumps_json,
    read_user_bytes,
)
from studybench.store.manifest import Manifest
from studybench.store.rows import GenerationRow, LLMVerdictRow, RuleVerdictRow, TurnKey

__all__ = ["RunStore"]

_R = TypeVar("_R", bound=BaseModel)


def _latest(log: JsonlLog, model: type[_R], by_judge: bool = False) -> dict[object, _R]:
    """The last row per key of ``log``, validated as ``model``.

    Rows without a valid key are skipped. The last row of a key wins even when it is unusable (fails
    ``model``): the key then has no row, as a corrupt row must not resurrect an older one.
    """
    raw: dict[object, dict[str, object]] = {}
    for row in log.rows():
        try:
            key: object = TurnKey.from_row(row)
        except (KeyError, TypeError, ValueError):
            continue
        if by_judge:
            jid = row.get("judge_id")
            if not isinstance(jid, str):
                continue
            key = (key, jid)
        raw[key] = row
    out: dict[object, _R] = {}
    for key, row in raw.items():
        try:
            out[key] = model.model_validate(row)
        except ValidationError:
            continue
    return out


class RunStore:
    """The files of one run directory.

    Args:
        root: the run directory (created on the first write).

    Attributes:
        generation_log: ``generations.jsonl`` (:class:`GenerationRow` rows).
        rule_log: ``judgements.jsonl`` (:class:`RuleVerdictRow` rows; the file keeps its 0.1.0 name).
        llm_log: ``llm_judgements.jsonl`` (:class:`LLMVerdictRow` rows).
    """

    MANIFEST = "manifest.json"
    GENERATIONS = "generations.jsonl"
    RULE_VERDICTS = "judgements.jsonl"  # the file name of 0.1.0, kept so that old runs load
    LLM_VERDICTS = "llm_judgements.jsonl"

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.generation_log = JsonlLog(self.root / self.GENERATIONS)
        self.rule_log = JsonlLog(self.root / self.RULE_VERDICTS)
        self.llm_log = JsonlLog(self.root / self.LLM_VERDICTS)

    @property
    def manifest_path(self) -> Path:
        """``ROOT/manifest.json``."""
        return self.root / self.MANIFEST

    def exists(self) -> bool:
        """Whether the directory holds a run (a manifest)."""
        return self.manifest_path.exists()

    def read_manifest(self) -> Manifest:
        """The validated manifest.

        Raises:
            FileNotFoundError: not a run directory (no manifest).
            ValueError: unreadable, not JSON, or a field fails validation (the message names the
                file and the field).
        """
        if not self.manifest_path.exists():
            raise FileNotFoundError(f"{self.root}: not a run directory (no {self.MANIFEST})")
        try:  # a regular file only: a named pipe in its place must not block
            obj = json.loads(read_user_bytes(self.manifest_path, limit=MAX_DATA_BYTES))
        except InputFileError as e:
            raise ValueError(str(e)) from None
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{self.manifest_path}: not valid JSON ({e})") from None
        return Manifest.parse(obj, self.manifest_path)

    def write_manifest(self, manifest: Manifest) -> None:
        """Write the manifest atomically (temporary file, then rename)."""
        atomic_write_text(self.manifest_path, dumps_json(manifest.to_json()) + "\n")

    def latest_generations(self) -> dict[TurnKey, GenerationRow]:
        """The last usable generation row per turn key."""
        return _latest(self.generation_log, GenerationRow)  # type: ignore[return-value]

    def latest_rule_verdicts(self) -> dict[TurnKey, RuleVerdictRow]:
        """The last usable rule verdict row per turn key."""
        return _latest(self.rule_log, RuleVerdictRow)  # type: ignore[return-value]

    def latest_llm_verdicts(self) -> dict[tuple[TurnKey, str], LLMVerdictRow]:
        """The last usable LLM verdict row per (turn key, judge id)."""
        return _latest(self.llm_log, LLMVerdictRow, by_judge=True)  # type: ignore[return-value]

    def append(self, row: GenerationRow | RuleVerdictRow | LLMVerdictRow) -> None:
        """Append one row to the log its type belongs to."""
        log = {GenerationRow: self.generation_log, RuleVerdictRow: self.rule_log, LLMVerdictRow: self.llm_log}[type(row)]
        log.append(row.to_json())

    def sync(self) -> None:
        """Flush every open log to disk (fsync)."""
        for log in (self.generation_log, self.rule_log, self.llm_log):
            log.sync()

    def close(self) -> None:
        """Flush (fsync) and close every open log."""
        self.generation_log.close()
        self.rule_log.close()
        self.llm_log.close()
