"""What the :class:`~studybench.verify.verifier.Verifier` is given, and how its pending work is planned.

- **Items**: :data:`Item` (gold boxes, predicted boxes, answer type, type_sequence, and optionally
  ``gold_unit`` and ``problem``); :func:`extract_pair`, the gold boxes and a response's final answers
  (the step before every response is verified); the limits past which a prediction is compared by
  string rules only or is incorrect outright (:data:`MAX_PRED_CHARS`, :data:`MAX_FAST_CHARS`,
  :data:`MAX_PRED_BOXES`).
- **Memo keys**: :func:`answer_type_key`, :func:`type_sequence_key`, :func:`unit_key` (how the
  verifier's memo spells an item's types and unit).
- **Planning**: :func:`plan_chunks` spreads pending verifications over the worker threads, most
  expensive first.

Re-exported by :mod:`studybench.verify.verifier` and :mod:`studybench.verify`, where callers import them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from studybench.answers import extract_answers
from studybench.records import AnswerType, gold_boxes
from studybench.verify.rules import normalise_types
from studybench.verify.verdict import Verdict

__all__ = [
    "MAX_FAST_CHARS",
    "MAX_PRED_BOXES",
    "MAX_PRED_CHARS",
    "Item",
    "answer_type_key",
    "extract_pair",
    "plan_chunks",
    "type_sequence_key",
    "unit_key",
]

MAX_PRED_CHARS = 2000
"""Predicted boxes longer than this are compared by string rules only."""

MAX_FAST_CHARS = 20_000
"""Predicted boxes longer than this (and than twice the longest gold box) are incorrect outright."""

MAX_PRED_BOXES = 64
"""More predicted boxes than this (and than four per gold box) are incorrect outright."""

Item = tuple[Any, ...]
"""``(gold_boxes, pred_boxes, answer_type, type_sequence)`` or the same with a fifth element,
``gold_unit`` (see :func:`studybench.verify.physics.units.split_hints`), and a sixth, ``problem`` (the
problem text, see :meth:`Verifier.verify`)."""


def extract_pair(
    gold_answer: str, response: str, answer_type: AnswerType | str, type_sequence: Sequence[AnswerType] | str = ""
) -> tuple[list[str], list[str]] | Verdict:
    r"""The gold boxes and the response's final answers: the step before every response is verified.

    The gold boxes come from :func:`studybench.records.gold_boxes` (a TUP/ALT gold packed into one
    box is split), the predicted ones from :func:`studybench.answers.extract_answers` (reasoning
    removed, the ``Final Answer:`` line first, else the last boxes; as many as the gold has).

    Args:
        gold_answer: the gold string with one ``\boxed{}`` per answer.
        response: the model's raw response.
        answer_type: one of the nine types.
        type_sequence: the primitive type of each box for TUP / ALT.

    Returns:
        ``(gold boxes, predicted answers)``, or the incorrect :class:`~studybench.verify.verdict.Verdict`
        that ends verification early: ``"incorrect: bad gold (...)"``, ``"incorrect: gold has no
        box"``, ``"incorrect: bad input (...)"`` or ``"incorrect: no final answer found"``. Never raises.
    """
    try:
        at, ts = normalise_types(answer_type, type_sequence)
        golds = gold_boxes(gold_answer, at, ts)
    except Exception as e:
        return Verdict(False, f"incorrect: bad gold ({type(e).__name__})", ())
    if not golds:
        return Verdict(False, "incorrect: gold has no box", ())
    try:
        preds = extract_answers(response, m=len(golds))
    except Exception as e:  # a response that is no string
        return Verdict(False, f"incorrect: bad input ({type(e).__name__})", ())
    if not preds:
        return Verdict(False, "incorrect: no final answer found", ())
    return golds, preds


def type_sequence_key(type_sequence: Any) -> str:
    """A type_sequence as the memo key holds it (``"NV,EX"``; ``""`` for none)."""
    if type_sequence is None:
        return ""
    if isinstance(type_sequence, str):
        return type_sequence.replace(" ", "").upper()
    return ",".join(str(getattr(t, "value", t)).strip().upper() for t in type_sequence)


def answer_type_key(answer_type: Any) -> str:
    """An answer type as the memo key holds it (``"NV"``)."""
    return str(getattr(answer_type, "value", answer_type)).strip().upper()


def unit_key(gold_unit: Any) -> Any:
    """A ``gold_unit`` as the memo key holds it (a string, a tuple of strings or ``None``s, or ``None``)."""
    if gold_unit is None or isinstance(gold_unit, str):
        return gold_unit
    try:
        return tuple(None if u is None else str(u) for u in gold_unit)
    except TypeError:
        return None


def _cost(key: tuple[Any, ...]) -> int:
    """A rough cost guess for a pending verification: its text length, tripled for equations."""
    n = sum(len(g) for g in key[0]) + sum(len(p) for p in key[1])
    return 3 * n if "EQ" in key[2] or "EQ" in key[3] else n


def plan_chunks(keys: list[tuple[Any, ...]], workers: int) -> list[list[tuple[Any, ...]]]:
    """Pending verifications in chunks for the worker threads, most expensive first.

    Keys with the same gold go to the same chunk (one thread runs a chunk in order and mostly keeps
    its worker, whose parse cache then serves every prediction for that gold); a chunk holds at most
    about an eighth of a worker's share, so the threads stay balanced; chunks are sorted by their
    guessed cost, largest first (longest-processing-time-first list scheduling).
    """
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for k in keys:
        groups.setdefault((k[0], k[2], k[3]), []).append(k)
    cap = max(1, math.ceil(len(keys) / (8 * max(1, workers))))
    chunks: list[list[tuple[Any, ...]]] = []
    for g in groups.values():
        g.sort(key=_cost, reverse=True)
        chunks.extend(g[i:i + cap] for i in range(0, len(g), cap))
    chunks.sort(key=lambda c: sum(_cost(k) for k in c), reverse=True)
    return chunks
