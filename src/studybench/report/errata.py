"""The report's ``errata`` block: which golds a run scored, and how many attempts touch errata items.

A run records its errata setting in the manifest (:attr:`studybench.store.Manifest.errata`). With the
official golds (the default, comparable with the paper) the block counts the selection's sub-problems
whose gold :mod:`studybench.errata` lists as wrong and the attempts on their parents; with ``apply``
the same items were scored with the corrected golds; with ``exclude`` (and for the unanswerable items
of ``apply``) their parents were left out, named in ``dropped``. A run made before errata were
recorded scored the official golds; its items are then found by their keys in the manifest's index
(``recorded: false``), and the block is left out when it holds none, so such reports read as before.

The errata are golds of the official test sets (:data:`studybench.datasets.OFFICIAL_SPLITS`). A run on
another test set (a file of one's own, a set made with :mod:`studybench.testset`) records the setting
too, but its block says ``official_test_set: false`` and its line says what is true there: no erratum
applies, or (for a set holding official parents unchanged) which of its golds the errata list as
wrong; it never calls the golds "official" or "the paper's".
"""

from __future__ import annotations

from typing import Any

from studybench.datasets import OFFICIAL_SPLITS
from studybench.errata import load_errata
from studybench.escaping import plural
from studybench.store import Manifest

__all__ = ["errata_block", "errata_line"]


def errata_block(manifest: Manifest) -> dict[str, Any] | None:
    """The report's ``errata`` block of a run (``None`` for an older run without errata items).

    Args:
        manifest: the run's manifest (its ``k``, seeds and parent index count the attempts).

    Returns:
        ``{"mode", "recorded", "split", "official_test_set", "items": [{"id", "parent", "sub_id", "kind"}],
        "sub_problems", "parents", "turns", "attempts", "of_attempts", "dropped": {uid: why}}``: the
        setting the manifest records, the run's test set and whether it is an official one
        (:data:`~studybench.datasets.OFFICIAL_SPLITS`; the errata are corrections of those), the errata
        items in the selection, the parents holding them, the turns on those items and the attempts
        (parent x seed x attempt) on those parents, out of all attempts of the report.
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
        "split": manifest.split.name,
        "official_test_set": manifest.split.name in OFFICIAL_SPLITS,
        "items": items,
        "sub_problems": len(items),
        "parents": len(parents),
        "turns": len(items) * per,
        "attempts": len(parents) * per,
        "of_attempts": len(manifest.parents) * per,
        "dropped": dropped,
    }


def errata_line(block: dict[str, Any] | None) -> str | None:
    """One sentence saying which golds were scored and what touches the errata (report.md, HTML and the terminal).

    Args:
        block: the report's ``errata`` block (:func:`errata_block`); one without ``official_test_set``
            (a report written before it was recorded) reads as a run on an official test set.

    Returns:
        The sentence, or ``None`` without a block. For a run on a test set that is not official, it
        never calls the golds "official" or "the paper's": it says that no erratum applies, or which of
        the set's golds the errata (of the official sets) list as wrong.
    """
    if not block:
        return None
    n, p, a, of = block["sub_problems"], block["parents"], block["attempts"], block["of_attempts"]
    official = block.get("official_test_set", True) is not False
    held = (f"{plural(n, 'sub-problem')} of this selection ({plural(p, 'parent')}) "
            f"{'have' if n != 1 else 'has'} an erratum{'' if official else ' of the official test sets'}: "
            f"{a} of {plural(of, 'attempt')} {'touches' if a == 1 else 'touch'} {'them' if n != 1 else 'it'}")
    dropped = block["dropped"]
    left = (f"; left out: {plural(len(dropped), 'parent')} "
            f"({', '.join(sorted(dropped)[:5])}{', ...' if len(dropped) > 5 else ''})") if dropped else ""
    mode = block["mode"]
    if not official and not n and not dropped:
        setting = "" if mode == "official" else f"; --errata {mode} changed nothing"
        return (f"Errata: none apply: {block.get('split') or 'this test set'} is not an official test set "
                f"(the errata correct golds of {' and '.join(OFFICIAL_SPLITS)}){setting}.")
    if mode == "apply":
        paper = "; not the paper's golds" if official else ""
        return (f"Errata: scored with the corrected golds (--errata apply{paper}); "
                f"{held if n else 'no erratum in this selection'}{left}.")
    if mode == "exclude":
        return f"Errata: parents holding an erratum left out (--errata exclude){left or '; none in this selection'}."
    golds = "official golds (the paper's)" if official else "the test set's golds as given"
    if not n:
        return f"Errata: {golds}; no erratum in this selection."
    return (f"Errata: {golds}; {held}. --errata apply scores them with the corrected golds, "
            "--errata exclude leaves them out.")
