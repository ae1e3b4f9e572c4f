"""The method artefacts a run was made with, kept in its directory (``RUN/artefacts/``).

A run made with a system prompt (GEPA; an EvoSkill skills folder inlined by ``studybench artefact
evoskill``), an ACE playbook or guidance keeps the exact text the model saw, so that reports show it
and no one needs the original files:

- ``artefacts/system_prompt.txt``: the system prompt as used (surrounding blank space removed);
- ``artefacts/playbook.txt``: the playbook as inserted (ACE ids and counters removed);
- ``artefacts/system_message.txt``: the system message every turn opened with (with either of those);
- ``artefacts/guidance.json``: the hints used, one JSON object per sub-problem key (a guidance file
  ``eval --guidance`` reads back).

The manifest references them (``artefacts.stored``: ``{name: {"path", "sha256"}}``, the sha256 of the
UTF-8 text), beside the sha256 of the files given (``artefacts.digests``), which alone decide whether
a run may be resumed. Each file is written atomically before the manifest that names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studybench.files import atomic_write_text, dumps_json, read_user_text, text_digest
from studybench.protocol import ArtefactError, Artefacts, load_artefacts

__all__ = ["ARTEFACTS_DIR", "ARTEFACT_FILES", "artefact_texts", "read_stored_artefacts", "stored_artefact_refs", "write_artefacts"]

ARTEFACTS_DIR = "artefacts"
"""The run directory's folder of method artefacts."""

ARTEFACT_FILES = {"system_prompt": "system_prompt.txt", "playbook": "playbook.txt",
                  "system_message": "system_message.txt", "guidance": "guidance.json"}
"""The file each kept artefact is written to, inside :data:`ARTEFACTS_DIR`."""
_FILES = ARTEFACT_FILES


def artefact_texts(art: Artefacts) -> dict[str, str]:
    """The text of each artefact file a run keeps, by name (none for a run without artefacts).

    Args:
        art: the run's artefacts.

    Returns:
        ``{name: text}`` for ``system_prompt``, ``playbook``, ``system_message`` (with either) and
        ``guidance``, those the run has.
    """
    out: dict[str, str] = {}
    if art.system_prompt is not None:
        out["system_prompt"] = art.system_prompt
    if art.playbook is not None:
        out["playbook"] = art.playbook
    if art.system_prompt is not None or art.playbook is not None:
        out["system_message"] = art.system_message()
    if art.guidance:
        rows = [{"source": s, "year": y, "source_problem_id": p, "problem_id": q, "guidance": text}
                for (s, y, p, q), text in sorted(art.guidance.items())]
        out["guidance"] = dumps_json(rows) + "\n"
    return out


def stored_artefact_refs(art: Artefacts) -> dict[str, dict[str, str]]:
    """The manifest's ``artefacts.stored``: each kept file's path in the run directory and sha256.

    Args:
        art: the run's artefacts.

    Returns:
        ``{name: {"path": "artefacts/FILE", "sha256": HEX}}`` (empty without artefacts).
    """
    return {name: {"path": f"{ARTEFACTS_DIR}/{_FILES[name]}", "sha256": text_digest(text)}
            for name, text in artefact_texts(art).items()}


def write_artefacts(root: Path | str, art: Artefacts) -> dict[str, dict[str, str]]:
    """Write the artefact files of a run into ``root/artefacts/``, each atomically.

    Args:
        root: the run directory.
        art: the run's artefacts.

    Returns:
        :func:`stored_artefact_refs` of what was written.

    Raises:
        OSError: a file cannot be written (``filename`` names it).
    """
    for name, text in artefact_texts(art).items():
        atomic_write_text(Path(root) / ARTEFACTS_DIR / _FILES[name], text)
    return stored_artefact_refs(art)


def read_stored_artefacts(root: Path | str, artefacts: dict[str, Any]) -> tuple[Artefacts | None, str | None]:
    """The artefacts a run kept, read back and checked against the manifest's digests.

    Args:
        root: the run directory.
        artefacts: the manifest's ``artefacts`` block.

    Returns:
        ``(artefacts, None)``; ``(None, None)`` when the run keeps none (a run without artefacts, or
        one made before runs kept them); ``(None, why)`` when a kept file is missing, unreadable or
        not the text the manifest names.
    """
    stored = artefacts.get("stored")
    if not isinstance(stored, dict) or not stored:
        return None, None
    texts: dict[str, str] = {}
    for name, ref in stored.items():
        if name not in _FILES or not isinstance(ref, dict):
            continue
        path = Path(root) / ARTEFACTS_DIR / _FILES[name]
        try:
            text = read_user_text(path)
        except (OSError, ValueError) as e:
            return None, f"{path}: {e}"
        if text_digest(text) != ref.get("sha256"):
            return None, f"{path}: not the text the run was made with (sha256 differs from the manifest's)"
        texts[name] = text
    guidance = {}
    if "guidance" in texts:
        try:
            guidance = load_artefacts(guidance=Path(root) / ARTEFACTS_DIR / _FILES["guidance"]).guidance
        except ArtefactError as e:
            return None, str(e)
    digests = artefacts.get("digests") if isinstance(artefacts.get("digests"), dict) else {}
    art = Artefacts(system_prompt=texts.get("system_prompt"), playbook=texts.get("playbook"), guidance=guidance,
                    digests={str(k): str(v) for k, v in digests.items()})
    return art, None
