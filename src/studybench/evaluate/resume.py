"""Why a run directory cannot be resumed, in the words of the command line.

:meth:`studybench.store.Manifest.resume_conflicts` lists what differs between a run directory's
manifest and the one a new invocation would write; :func:`resume_refusal` says the same to a person,
in one line: what the run was made with, what was asked now, and the likely fix (never a dump of
the manifest's dictionaries or internal fields).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from studybench.models import PRESETS
from studybench.store import OPERATIONAL_BACKEND_KEYS, Manifest, current_budgets

__all__ = ["NEW_RUN_HINT", "resume_refusal"]

NEW_RUN_HINT = "use another --out for a new run"
"""How a refusal ends: the way to a new run (a caller whose run directory is not ``--out`` words its own)."""

_SAMPLING_FLAGS = {
    "temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k", "min_p": "--min-p",
    "presence_penalty": "--presence-penalty", "repetition_penalty": "--repetition-penalty",
    "max_tokens": "--max-tokens", "context_budget": "--context-budget",
}
_ARTEFACT_FLAGS = {"system_prompt": "--system-prompt", "playbook": "--playbook", "guidance": "--guidance"}
_INTERNAL_BACKEND_KEYS = {"prompt_token_estimate"}  # follows from the sampling's budget convention


def _short(value: Any, limit: int = 40) -> str:
    text = "unset" if value is None else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_BUDGET_KEYS = ("max_tokens", "context_budget")


def _preset_of(sampling: Any) -> str | None:
    """The preset whose sampling parameters ``sampling`` has, token budgets aside.

    ``--preset paper --max-tokens 4096`` is still the paper's sampling. ``None`` when none has them.
    """
    if not isinstance(sampling, dict):
        return None
    for name, params in PRESETS.items():
        d = params.to_dict()
        if all(d.get(k) == sampling.get(k) for k in set(d) | set(sampling) if k not in _BUDGET_KEYS):
            return name
    return None


def _preset_fix(name: str, sampling: dict[str, Any]) -> str:
    """``give --preset paper`` plus the budget flags the run had on top of that preset."""
    d = PRESETS[name].to_dict()
    extra = [f"{_SAMPLING_FLAGS[k]} {sampling[k]}" for k in _BUDGET_KEYS if sampling.get(k) != d.get(k) and sampling.get(k)]
    return " ".join([f"give --preset {name}", *extra])


def _thinking(value: Any) -> str:
    return {True: "--thinking", False: "--no-thinking"}.get(value, "neither --thinking nor --no-thinking")


def _sampling_message(old: Any, new: Any, preset: str | None) -> tuple[str, str]:
    old_preset = _preset_of(old)
    if old_preset is not None and old_preset != "none" and old_preset != preset:
        asked = "without --preset" if preset in (None, "none") else f"with --preset {preset}"
        return f"it was started with --preset {old_preset} and you ran {asked}", _preset_fix(old_preset, old)
    o = old if isinstance(old, dict) else {}
    n = new if isinstance(new, dict) else {}
    parts: list[str] = []
    for key, flag in _SAMPLING_FLAGS.items():
        if o.get(key) != n.get(key):
            parts.append(f"{flag} {_short(o.get(key))} (now {_short(n.get(key))})")
    if o.get("enable_thinking") != n.get("enable_thinking"):
        parts.append(f"{_thinking(o.get('enable_thinking'))} (now {_thinking(n.get('enable_thinking'))})")
    known = {*_SAMPLING_FLAGS, "enable_thinking"}
    parts += [f"sampling setting {k} {_short(o.get(k))} (now {_short(n.get(k))})"
              for k in sorted((set(o) | set(n)) - known) if o.get(k) != n.get(k)]
    return "its sampling differs: it was made with " + ", ".join(parts), "give the same sampling flags"


def _backend_messages(old: dict[str, Any], new: dict[str, Any], preset: str | None) -> list[tuple[str, str | None]]:
    old, new = current_budgets(old), current_budgets(new)  # a manifest from before --context-budget existed
    out: list[tuple[str, str | None]] = []
    if old.get("backend") != new.get("backend"):  # nothing else of two backends compares
        return [(f"it was made with --model {_short(old.get('model'))} (the {old.get('backend')} backend) and you asked "
                 f"for {_short(new.get('model'))} (the {new.get('backend')} backend)", None)]
    if old.get("model") != new.get("model"):
        out.append((f"it was made with --model {_short(old.get('model'))} and you asked for {_short(new.get('model'))}", None))
    if old.get("mode") != new.get("mode"):
        out.append((f"it was made with --reference-mode {old.get('mode')} and you asked for {new.get('mode')}",
                    f"give --reference-mode {old.get('mode')}"))
    if old.get("sampling") != new.get("sampling"):
        out.append(_sampling_message(old.get("sampling"), new.get("sampling"), preset))
    if old.get("errata") != new.get("errata"):  # the reference replay of corrected golds
        was = "the corrected golds (--errata apply)" if old.get("errata") == "apply" else "the published golds"
        now = "--errata apply" if new.get("errata") == "apply" else "the published golds"
        out.append((f"its reference replay was made with {was} and you asked for {now} (the replayed answers differ)",
                    "give --errata apply" if old.get("errata") == "apply" else "leave out --errata apply"))
    skip = {"backend", "model", "mode", "sampling", "errata", *OPERATIONAL_BACKEND_KEYS}
    if old.get("sampling") != new.get("sampling"):
        skip |= _INTERNAL_BACKEND_KEYS
    for key in sorted((set(old) | set(new)) - skip):
        if old.get(key) != new.get(key):
            out.append((f"its backend setting {key} was {_short(old.get(key))} (now {_short(new.get(key))}; "
                        "made by another studybench version?)", None))
    return out


def _split_messages(old: Manifest, new: Manifest) -> list[tuple[str, str | None]]:
    o, n = old.split, new.split
    if o.sha256 == n.sha256:
        return []
    if o.name != n.name:
        return [(f"it holds the {o.name} split and you asked for {n.name}", None)]
    where = f" ({o.path})" if o.path and o.path == n.path else ""
    if o.path and n.path and o.path != n.path:
        return [(f"it was made on the test-set file {o.path} and you gave {n.path}, whose content differs", None)]
    return [(f"the {o.name} test-set file{where} changed since the run was made (sha256 {str(o.sha256)[:12]} -> "
             f"{str(n.sha256)[:12]}), and a run cannot mix two versions of a test set", None)]


def _artefact_messages(old: Manifest, new: Manifest) -> list[tuple[str, str | None]]:
    od = old.artefacts.get("digests") if isinstance(old.artefacts.get("digests"), dict) else {}
    nd = new.artefacts.get("digests") if isinstance(new.artefacts.get("digests"), dict) else {}
    out: list[tuple[str, str | None]] = []
    for key in sorted(set(od) | set(nd)):
        if od.get(key) == nd.get(key):
            continue
        flag = _ARTEFACT_FLAGS.get(key, f"the {key} artefact")
        if key not in nd:
            out.append((f"it was made with {flag}", f"give {flag} with the same file"))
        elif key not in od:
            out.append((f"it was made without {flag}", f"leave {flag} out"))
        else:
            out.append((f"the {flag} file's content differs from the one it was made with", "give that file"))
    return out


def resume_refusal(run_dir: Path | str, previous: Manifest, new: Manifest, preset: str | None = None) -> str | None:
    """Why a new invocation may not resume the run in ``run_dir``, as one line with the fix.

    Args:
        run_dir: the run directory (named in the message).
        previous: its manifest.
        new: the manifest the new invocation would write.
        preset: the sampling preset asked for now (to recognise a forgotten ``--preset``).

    Returns:
        ``None`` when resuming is safe (:meth:`~studybench.store.Manifest.resume_conflicts` is empty),
        else e.g. ``"runs/x holds another run: it was started with --preset paper and you ran
        without --preset: give --preset paper (or use another --out for a new run)"`` or ``"runs/x
        holds another run: it holds the transfer split and you asked for application; use another
        --out for a new run"``.
    """
    if not previous.resume_conflicts(new):
        return None
    parts = [*_split_messages(previous, new), *_backend_messages(previous.backend, new.backend, preset),
             *_artefact_messages(previous, new)]
    if not parts:  # resume_conflicts knows a difference this module does not word yet
        parts = [(d, None) for d in previous.resume_conflicts(new)]
    what = "; ".join(w if fix is None else f"{w}: {fix}" for w, fix in parts)
    tail = f" (or {NEW_RUN_HINT})" if any(fix for _, fix in parts) else f"; {NEW_RUN_HINT}"
    return f"{run_dir} holds another run: {what}{tail}"
