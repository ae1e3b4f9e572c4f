"""The report's ``errata`` block: which golds a run scored, and how many attempts touch errata items.

A run records its errata setting in the manifest (:attr:`studybench.store.Manifest.errata`). With the
official golds (the default, comparable with the paper) the block counts the selection's sub-problems
whose gold :mod:`studybench.errata` lists as wrong and the attempts on their parents; with ``apply``
the same items were scored with the corrected golds; with ``exclude`` (and for the unanswerable items
of ``apply``) their parents were left out, named in ``dropped``. A run made before errata were
recorded scored the official golds; its items are then found by their keys in the manifest's index
(``recorded: false``), and the block is left out when it holds none, so such reports read as before.
"""

from __future__ import annotations

from typing import Any

from studybench.errata import load_errata
from studybench.store import Manifest

__all__ = ["errata_block", "errata_line"]


def errata_block(manifest: Manifest) -> dict[str, Any] | None:
    """The report's ``errata`` block of a run (``None`` for an older run without errata items).

    Args:
        manifest: the run's manifest (its ``k``, seeds and parent index count the attempts).

    Returns:
        ``{"mode", "recorded", "items": [{"id", "parent", "sub_id", "kind"}], "sub_problems",
        "parents", "turns", "attempts", "of_attempts", "dropped": {uid: why}}``: the errata items in the
        selection, the parents holding them, the turns on those items and the attempts (parent x seed x
        attempt) on those parents, out of all attempts of the report.
    """
    rec = manifest.errata if isinstance(manifest.errata, dict) else None
    index = {p.uid: {s.id for s in p.subs} for p in manifest.parents}
    if rec is not None:
        mode = rec.get("mode") if rec.get("mode") in ("official", "apply", "exclude") else "official"
        raw = rec.get("items") if isinstance(rec.get("items"), list) else []
        items = [{k: str(x.get(k, "")) for k in ("id", "parent", "sub_id", "kind")} for x in raw if isinstance(x, dict)]
        dropped = {str(k): str(v) for k, v in rec["dropped"].items()} if isinstance(rec.get("dropped"), dict) else {}
    else:
        mode, dropped = "official", {}
        items = [{"id": e.id, "parent": e.parent_uid, "sub_id": e.problem_id, "kind": e.kind}
                 for e in load_errata() if e.problem_id in index.get(e.parent_uid, ())]
        if not items:
            return None
    items = [x for x in items if x["sub_id"] in index.get(x["parent"], ())]
    per = manifest.k * len(manifest.seeds)
    parents = sorted({x["parent"] for x in items})
    return {
        "mode": mode,
        "recorded": rec is not None,
        "items": items,
        "sub_problems": len(items),
        "parents": len(parents),
        "turns": len(items) * per,
        "attempts": len(parents) * per,
        "of_attempts": len(manifest.parents) * per,
        "dropped": dropped,
    }


def errata_line(block: dict[str, Any] | None) -> str | None:
    """One sentence saying which golds were scored and what touches the errata (report.md and the terminal)."""
    if not block:
        return None
    n, p, a, of = block["sub_problems"], block["parents"], block["attempts"], block["of_attempts"]
    held = (f"{n} sub-problem{'s' if n != 1 else ''} of this selection ({p} parent{'s' if p != 1 else ''}) "
            f"{'have' if n != 1 else 'has'} an erratum: {a} of {of} attempts touch {'them' if n != 1 else 'it'}")
    dropped = block["dropped"]
    left = (f"; left out: {len(dropped)} parent{'s' if len(dropped) != 1 else ''} "
            f"({', '.join(sorted(dropped)[:5])}{', ...' if len(dropped) > 5 else ''})") if dropped else ""
    if block["mode"] == "apply":
        return (f"Errata: scored with the corrected golds (--errata apply; not the paper's golds); "
                f"{held if n else 'no erratum in this selection'}{left}.")
    if block["mode"] == "exclude":
        return f"Errata: parents holding an erratum left out (--errata exclude){left or '; none in this selection'}."
    if not n:
        return "Errata: official golds (the paper's); no erratum in this selection."
    return (f"Errata: official golds (the paper's); {held}. --errata apply scores them with the corrected golds, "
            "--errata exclude leaves them out.")
