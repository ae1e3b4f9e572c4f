"""The rule-only rewards of one response and the verifier they share (docs/protocol.md section 6).

* :func:`reward_for` - the binary reward: 1.0 when the rule verifier accepts the response's final
  answer, else 0.0.
* :func:`dense_reward_for` - the dense reward: the five components of :func:`dense_components`
  (answer, format, dimensional, symbolic, consistency; weights :data:`DENSE_WEIGHTS`, ours) summed
  and clipped to [-1, 1].
* :func:`reward_verifier` - the one :class:`studybench.verify.Verifier` every reward of the process
  shares, started lazily (``STUDYBENCH_REWARD_WORKERS``, ``STUDYBENCH_REWARD_TIMEOUT``);
  :func:`close_reward_verifier` stops it.

None of these raises. The verl and TRL adapters built on them are :mod:`studybench.rewards`, where
every name here is importable too. Only the standard library is imported when this module loads.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

__all__ = [
    "DENSE_WEIGHTS",
    "close_reward_verifier",
    "dense_components",
    "dense_reward_for",
    "dense_rest",
    "no_answer_components",
    "reward_for",
    "reward_inputs",
    "reward_types",
    "reward_verifier",
]

_LOCK = threading.Lock()

_VERIFIER: Any = None


def _verifier() -> Any:
    global _VERIFIER
    with _LOCK:
        if _VERIFIER is None:
            from studybench.verify import Verifier

            try:
                timeout = float(os.environ.get("STUDYBENCH_REWARD_TIMEOUT", "5"))
            except ValueError:
                timeout = 5.0
            _VERIFIER = Verifier(workers=int(os.environ.get("STUDYBENCH_REWARD_WORKERS", "0")) or None, timeout=timeout)
        return _VERIFIER


def reward_verifier() -> Any:
    """The :class:`studybench.verify.Verifier` every reward function of this process shares.

    Started on first use with ``STUDYBENCH_REWARD_WORKERS`` worker processes (default: the CPU
    count, at most 8) and a ``STUDYBENCH_REWARD_TIMEOUT``-second wall-clock limit per verification
    (default 5). Call its ``warm()`` to start the workers before the first batch.

    Returns:
        The shared verifier (its ``stats`` count fast, worker, memo and timed-out verifications).

    Raises:
        ValueError: ``STUDYBENCH_REWARD_WORKERS`` is not a whole number, or the timeout is not positive.
    """
    return _verifier()


def close_reward_verifier() -> None:
    """Stop the shared reward verifier's workers and forget its memo; the next reward starts a fresh one.

    Useful between benchmark repetitions and in tests; a training loop never needs it (the workers
    die with the process).
    """
    global _VERIFIER
    with _LOCK:
        v, _VERIFIER = _VERIFIER, None
    if v is not None:
        v.close()


def reward_types(response: Any, answer: Any, answer_type: Any, type_sequence: Any) -> tuple[Any, Any] | None:
    """The parsed answer type and type_sequence, or None for input no reward can be given for."""
    from studybench.records import AnswerType, parse_type_sequence

    if not isinstance(response, str) or not isinstance(answer, str):
        return None
    at = AnswerType(str(answer_type).strip().upper())
    ts = parse_type_sequence(type_sequence or "")
    if at.info.compound and not ts:
        return None  # malformed ground truth: a compound type needs its type_sequence
    return at, ts


def reward_inputs(response: Any, answer: Any, answer_type: Any, type_sequence: Any) -> tuple[Any, Any, list[str], list[str]] | None:
    """``(answer type, type_sequence, gold boxes, predicted answers)``, or None for input no reward can be given for."""
    from studybench.answers import extract_answers
    from studybench.records import gold_boxes

    types = reward_types(response, answer, answer_type, type_sequence)
    if types is None:
        return None
    at, ts = types
    golds = gold_boxes(answer, at, ts)
    if not golds:
        return None
    return at, ts, golds, extract_answers(response, len(golds))


def reward_for(response: Any, answer: Any, answer_type: Any, type_sequence: Any = "", gold_unit: Any = None) -> float:
    """Binary reward of one response: 1.0 if the rule verifier accepts it, else 0.0. Never raises.

    Args:
        response: the model's completion text (reasoning is removed before extraction).
        answer: the gold answer, ``\\boxed{...}`` per slot.
        answer_type: one of NV EX EQ TUP IN MC TF QL ALT.
        type_sequence: slot types for TUP / ALT (comma string or list).
        gold_unit: unit of a unitless gold (see :meth:`studybench.verify.Verifier.verify`).
    """
    try:
        types = reward_types(response, answer, answer_type, type_sequence)
        if types is None:
            return 0.0
        at, ts = types
        return 1.0 if _verifier().verify_response(answer, response, at, ts, gold_unit=gold_unit).correct else 0.0
    except Exception:  # noqa: BLE001 - a reward must never raise inside a training loop
        return 0.0


DENSE_WEIGHTS: dict[str, float] = {
    "answer": 0.8,
    "format": 0.1,
    "no_answer": -0.5,
    "dimensional": 0.05,
    "wrong_dimension": -0.2,
    "symbolic": 0.05,
    "unreadable": -0.1,
    "inconsistent": -0.2,
}
"""Weights of the dense reward's components (ours; see :func:`dense_components`)."""

_FINAL_LINE = re.compile(r"final\s+answer\s*[:：]", re.IGNORECASE)


def dense_components(response: Any, answer: Any, answer_type: Any, type_sequence: Any = "", gold_unit: Any = None) -> dict[str, float]:
    """The five components of the dense reward for one response (docs/protocol.md section 6 reward mode;
    Physics-R1's dense variant). Rule-only; never raises.

    * ``answer``: ``+0.8`` when the rule verifier accepts the final answer.
    * ``format``: ``+0.1`` when the answer is boxed on a ``Final Answer:`` line with exactly one box
      per gold slot; ``-0.5`` when no final answer can be extracted at all.
    * ``dimensional``: per NV slot whose gold unit is known (in the box or ``gold_unit``), ``+0.05``
      (averaged over slots) when the predicted unit converts to it, ``-0.2`` when it cannot; 0 when
      nothing can be checked.
    * ``symbolic``: per EX / EQ slot, ``+0.05`` (averaged) when the prediction uses exactly the
      gold's symbols (same quantities, perhaps a wrong formula), ``-0.1`` when it cannot be read.
    * ``consistency``: ``-0.2`` when the response boxes more answers than there are slots and they
      disagree (hedging between answers).

    Returns the components; :func:`dense_reward_for` sums them and clips to [-1, 1].
    """
    try:
        prep = reward_inputs(response, answer, answer_type, type_sequence)
        if prep is None or not prep[3]:
            return no_answer_components()
        at, ts, golds, preds = prep
        correct = _verifier().verify(golds, preds, at, ts, gold_unit=gold_unit).correct
        return dense_rest(response, prep, gold_unit, correct)
    except Exception:  # noqa: BLE001 - a reward must never raise
        return no_answer_components()


def no_answer_components() -> dict[str, float]:
    """The dense components of a response without a usable final answer (or of malformed input)."""
    return {"answer": 0.0, "format": DENSE_WEIGHTS["no_answer"], "dimensional": 0.0, "symbolic": 0.0, "consistency": 0.0}


def dense_rest(response: str, prep: tuple[Any, Any, list[str], list[str]], gold_unit: Any, correct: bool) -> dict[str, float]:
    """The dense components once the answer is judged (``prep`` from :func:`reward_inputs`, with answers).

    May raise; callers fall back to :func:`no_answer_components`.
    """
    from studybench.answers import find_boxes, strip_reasoning
    from studybench.verify.physics.units import split_hints
    from studybench.verify.reading.conversion import symbol_keys
    from studybench.verify.reading.latex import norm_string

    w = DENSE_WEIGHTS
    comp = {"answer": 0.0, "format": 0.0, "dimensional": 0.0, "symbolic": 0.0, "consistency": 0.0}
    at, ts, golds, preds = prep
    if correct:
        comp["answer"] = w["answer"]
    visible = strip_reasoning(response)
    boxes = [b.content for b in find_boxes(visible)]
    finals = _FINAL_LINE.search(visible) is not None
    if finals and len(preds) == len(golds):
        comp["format"] = w["format"]
    if len(boxes) > len(golds) and len({norm_string(b) for b in boxes}) > len(golds):
        comp["consistency"] = w["inconsistent"]
    types = ts if at.info.compound and len(ts) == len(golds) else [at] * len(golds)
    hints = split_hints(gold_unit, len(golds))
    dims: list[float] = []
    syms: list[float] = []
    for g, p, t, h in zip(golds, preds, types, hints, strict=False):
        check = t.info.dense  # what the dense reward checks in a slot of this type (studybench.answer_types)
        if check == "dimensional":
            d = _dimension_check(g, p, h)
            if d is not None:
                dims.append(w["dimensional"] if d else w["wrong_dimension"])
        elif check == "symbolic":
            gk, pk = symbol_keys(g), symbol_keys(p)
            if pk is None:
                syms.append(w["unreadable"])
            elif gk is not None and gk and gk == pk:
                syms.append(w["symbolic"])
            else:
                syms.append(0.0)
    if dims:
        comp["dimensional"] = sum(dims) / len(dims)
    if syms:
        comp["symbolic"] = sum(syms) / len(syms)
    return comp


def _dimension_check(gold: str, pred: str, hint: Any) -> bool | None:
    """Whether the predicted unit converts to the gold's; None when either unit is unknown."""
    from studybench.verify.physics.units import convert_unit, hint_unit
    from studybench.verify.reading.numbers import quantity_candidates

    gq, pq = quantity_candidates(gold), quantity_candidates(pred)
    if not gq or not pq:
        return None
    gu = gq[-1].unit or (hint_unit(hint)[0] if hint else None)
    pu = pq[-1].unit
    if not gu or not pu:
        return None
    return convert_unit(1.0, pu, gu) is not None


def dense_reward_for(response: Any, answer: Any, answer_type: Any, type_sequence: Any = "", gold_unit: Any = None) -> float:
    """Dense reward of one response: the sum of :func:`dense_components`, clipped to [-1, 1].
    Rule-only; never raises (malformed input gives -0.5, the no-answer reward)."""
    try:
        return max(-1.0, min(1.0, float(sum(dense_components(response, answer, answer_type, type_sequence, gold_unit).values()))))
    except Exception:  # noqa: BLE001
        return DENSE_WEIGHTS["no_answer"]
