"""The run directory: manifest + append-only JSONL (DESIGN.md "Run directory").

::

    RUN/
      manifest.json      config, data hash, package version, backend, sampling, verifier mode
      generations.jsonl  one row per generated turn
      judgements.jsonl   one row per judged turn (rule verifier)
      llm_judgements.jsonl  one row per LLM-judged turn and judge configuration
      report.json, report.md

Rows are appended with a single ``write`` of a complete line on a file opened with ``O_APPEND``,
so a process killed at any moment (SIGKILL) leaves at most one torn last line. Opening a log
truncates such a torn tail before appending. Each row carries a key; readers keep the last row per
key, so re-running is idempotent. The manifest is written to a temporary file and renamed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studybench.files import JsonlLog, atomic_write_text, dumps_json, text_digest

__all__ = ["RunStore", "TurnKey", "current_rule_verdict"]


@dataclass(frozen=True, order=True)
class TurnKey:
    """Identity of one turn: (split, parent uid, sub-problem id, seed, attempt)."""

    split: str
    parent: str
    sub_id: str
    seed: int
    attempt: int

    def as_str(self) -> str:
        return json.dumps([self.split, self.parent, self.sub_id, self.seed, self.attempt], ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "parent": self.parent,
            "sub_id": self.sub_id,
            "seed": self.seed,
            "attempt": self.attempt,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TurnKey:
        return cls(str(row["split"]), str(row["parent"]), str(row["sub_id"]), int(row["seed"]), int(row["attempt"]))


def current_rule_verdict(
    gens: dict[TurnKey, dict[str, Any]], rules: dict[TurnKey, dict[str, Any]], key: TurnKey
) -> tuple[dict[str, Any], str] | None:
    """``(rule judgement row, completion digest)`` when turn ``key`` has a usable generation (no error,
    a string completion) and a rule judgement of that very completion; else ``None``."""
    g = gens.get(key)
    if g is None or g.get("error") or not isinstance(g.get("completion"), str):
        return None
    cd = text_digest(g["completion"])
    j = rules.get(key)
    if j is None or j.get("completion_digest") != cd:
        return None
    return j, cd


class RunStore:
    """Files of one run directory."""

    MANIFEST = "manifest.json"
    GENERATIONS = "generations.jsonl"
    JUDGEMENTS = "judgements.jsonl"
    LLM_JUDGEMENTS = "llm_judgements.jsonl"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.generations = JsonlLog(self.root / self.GENERATIONS)
        self.judgements = JsonlLog(self.root / self.JUDGEMENTS)
        self.llm_judgements = JsonlLog(self.root / self.LLM_JUDGEMENTS)

    @property
    def manifest_path(self) -> Path:
        return self.root / self.MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def read_manifest(self) -> dict[str, Any]:
        try:
            obj = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(f"{self.root}: not a run directory (no {self.MANIFEST})") from None
        except OSError as e:
            raise ValueError(f"{self.manifest_path}: cannot read ({e.strerror or e})") from None
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{self.manifest_path}: not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{self.manifest_path}: expected a JSON object")
        return obj

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_text(self.manifest_path, dumps_json(manifest) + "\n")

    @staticmethod
    def _latest(log: JsonlLog) -> dict[TurnKey, dict[str, Any]]:
        """Last row per turn key of ``log`` (rows without a valid key are skipped)."""
        out: dict[TurnKey, dict[str, Any]] = {}
        for row in log.rows():
            try:
                out[TurnKey.from_row(row)] = row
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def latest_generations(self) -> dict[TurnKey, dict[str, Any]]:
        """Last generation row per turn key."""
        return self._latest(self.generations)

    def latest_judgements(self) -> dict[TurnKey, dict[str, Any]]:
        """Last judgement row per turn key."""
        return self._latest(self.judgements)

    def latest_llm_judgements(self) -> dict[tuple[TurnKey, str], dict[str, Any]]:
        """Last LLM judgement row per (turn key, judge id)."""
        out: dict[tuple[TurnKey, str], dict[str, Any]] = {}
        for row in self.llm_judgements.rows():
            jid = row.get("judge_id")
            if not isinstance(jid, str):
                continue
            try:
                out[(TurnKey.from_row(row), jid)] = row
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def close(self) -> None:
        self.generations.close()
        self.judgements.close()
        self.llm_judgements.close()
