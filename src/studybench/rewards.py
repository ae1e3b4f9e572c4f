"""Rule-only RL rewards built on the studybench verifier (never an LLM; PROTOCOL.md section 6).

Two adapters share one lazily started :class:`studybench.verify.Verifier`:

* :func:`compute_score` - verl's ``custom_reward_function`` signature
  ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float``.
  ``ground_truth`` is a dict (or its JSON text) with ``answer`` (the gold ``\\boxed{}`` string),
  ``answer_type`` and optional ``type_sequence``; a plain gold string works when ``extra_info``
  carries ``answer_type`` (and ``type_sequence``).
* :func:`trl_reward` - a TRL ``GRPOTrainer`` reward function: ``trl_reward(completions, **kwargs)``
  with the dataset columns ``answer``, ``answer_type`` and optional ``type_sequence`` passed as
  lists; ``completions`` are strings or conversational message lists. Returns one float each.

Two rewards (both rule-only):

* ``binary`` (default) - the Physics-R1 binary reward: 1.0 when the rule verifier accepts the
  response's final answer (MC letter equality, numeric within 1% relative tolerance, symbolic
  equivalence, ...), else 0.0.
* ``dense`` - the Physics-R1-style dense variant (:func:`dense_reward_for`): five components,
  answer + format + dimensional + symbolic + consistency, summed and clipped to [-1, 1]. The
  components and their weights (:data:`DENSE_WEIGHTS`) are ours; the correct answer always scores
  at least 0.9 and a wrong one at most 0.3, so the answer component dominates.

Choose the dense reward with :func:`compute_score_dense` / :func:`trl_reward_dense`, with
``extra_info={"reward": "dense"}`` (verl) or with ``STUDYBENCH_REWARD=dense``. ``ground_truth`` may
carry ``gold_unit`` (the unit of a unitless gold). A reward call never raises: malformed ground
truth or model text gives the lowest reward (0.0 binary, -0.5 dense), and symbolic work is bounded
by the verifier's hard wall-clock timeout (``STUDYBENCH_REWARD_TIMEOUT`` seconds, default 5).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

__all__ = [
    "DENSE_WEIGHTS",
    "compute_score",
    "compute_score_dense",
    "dense_components",
    "dense_reward_for",
    "reward_for",
    "trl_reward",
    "trl_reward_dense",
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


def _types(response: Any, answer: Any, answer_type: Any, type_sequence: Any) -> tuple[Any, Any] | None:
    """The parsed answer type and type_sequence, or None for input no reward can be given for."""
    from studybench.records import AnswerType, parse_type_sequence

    if not isinstance(response, str) or not isinstance(answer, str):
        return None
    at = AnswerType(str(answer_type).strip().upper())
    ts = parse_type_sequence(type_sequence or "")
    if at.value in ("TUP", "ALT") and not ts:
        return None  # malformed ground truth: a compound type needs its type_sequence
    return at, ts


def _prepare(response: Any, answer: Any, answer_type: Any, type_sequence: Any) -> tuple[Any, Any, list[str], list[str]] | None:
    from studybench.answers import extract_answers
    from studybench.records import gold_boxes

    types = _types(response, answer, answer_type, type_sequence)
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
        types = _types(response, answer, answer_type, type_sequence)
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
    """The five components of the dense reward for one response (PROTOCOL.md section 6 reward mode;
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
    comp = {"answer": 0.0, "format": 0.0, "dimensional": 0.0, "symbolic": 0.0, "consistency": 0.0}
    w = DENSE_WEIGHTS
    try:
        from studybench.answers import find_boxes, strip_reasoning
        from studybench.verify.conversion import symbol_keys
        from studybench.verify.latex import norm_string
        from studybench.verify.quantity import split_hints

        prep = _prepare(response, answer, answer_type, type_sequence)
        if prep is None or not prep[3]:
            comp["format"] = w["no_answer"]
            return comp
        at, ts, golds, preds = prep
        if _verifier().verify(golds, preds, at, ts, gold_unit=gold_unit).correct:
            comp["answer"] = w["answer"]
        visible = strip_reasoning(response)
        boxes = [b.content for b in find_boxes(visible)]
        finals = _FINAL_LINE.search(visible) is not None
        if finals and len(preds) == len(golds):
            comp["format"] = w["format"]
        if len(boxes) > len(golds) and len({norm_string(b) for b in boxes}) > len(golds):
            comp["consistency"] = w["inconsistent"]
        types = ts if at.value in ("TUP", "ALT") and len(ts) == len(golds) else [at] * len(golds)
        hints = split_hints(gold_unit, len(golds))
        dims: list[float] = []
        syms: list[float] = []
        for g, p, t, h in zip(golds, preds, types, hints, strict=False):
            tv = getattr(t, "value", str(t))
            if tv == "NV":
                d = _dimension_check(g, p, h)
                if d is not None:
                    dims.append(w["dimensional"] if d else w["wrong_dimension"])
            elif tv in ("EX", "EQ"):
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
    except Exception:  # noqa: BLE001 - a reward must never raise
        return {"answer": 0.0, "format": w["no_answer"], "dimensional": 0.0, "symbolic": 0.0, "consistency": 0.0}
    return comp


def _dimension_check(gold: str, pred: str, hint: Any) -> bool | None:
    """Whether the predicted unit converts to the gold's; None when either unit is unknown."""
    from studybench.verify.quantity import convert_unit, hint_unit, quantity_candidates

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


def _variant(info: dict[str, Any], forced: str | None) -> str:
    if forced:
        return forced
    v = info.get("reward") or os.environ.get("STUDYBENCH_REWARD", "binary")
    return "dense" if str(v).strip().lower() == "dense" else "binary"


def compute_score(data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, *, variant: str | None = None, **kwargs: Any) -> float:
    """verl custom reward function (rule-only). See the module docstring for ``ground_truth``;
    ``extra_info={"reward": "dense"}`` (or ``STUDYBENCH_REWARD=dense``) selects the dense reward."""
    info = extra_info if isinstance(extra_info, dict) else {}
    fn = dense_reward_for if _variant(info, variant) == "dense" else reward_for
    low = DENSE_WEIGHTS["no_answer"] if fn is dense_reward_for else 0.0
    try:
        gt = ground_truth
        if isinstance(gt, str) and gt.lstrip().startswith("{"):
            try:
                gt = json.loads(gt)
            except ValueError:
                pass
        if isinstance(gt, dict):
            return fn(solution_str, gt.get("answer"), gt.get("answer_type", info.get("answer_type")),
                      gt.get("type_sequence", info.get("type_sequence", "")), gt.get("gold_unit", info.get("gold_unit")))
        return fn(solution_str, gt, info.get("answer_type"), info.get("type_sequence", ""), info.get("gold_unit"))
    except Exception:  # noqa: BLE001
        return low


def compute_score_dense(data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, **kwargs: Any) -> float:
    """verl custom reward function with the dense reward (rule-only)."""
    return compute_score(data_source, solution_str, ground_truth, extra_info, variant="dense")


def _text(completion: Any) -> Any:
    """Completion text from a string or a conversational completion (list of message dicts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, dict):
            return last.get("content")
    return None


def _trl(completions: Sequence[Any], kwargs: dict[str, Any], dense: bool) -> list[float]:
    fn = dense_reward_for if dense else reward_for
    low = DENSE_WEIGHTS["no_answer"] if dense else 0.0
    answers = kwargs.get("answer") or []
    types = kwargs.get("answer_type") or []
    seqs = kwargs.get("type_sequence") or [""] * len(completions)
    units = kwargs.get("gold_unit") or [None] * len(completions)
    out: list[float] = []
    for i, c in enumerate(completions):
        try:
            out.append(fn(_text(c), answers[i], types[i], seqs[i] if i < len(seqs) else "", units[i] if i < len(units) else None))
        except Exception:  # noqa: BLE001
            out.append(low)
    return out


def trl_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL GRPO reward function: one binary reward per completion (dataset columns ``answer``,
    ``answer_type``, optional ``type_sequence`` and ``gold_unit`` as kwargs);
    ``STUDYBENCH_REWARD=dense`` switches to the dense reward."""
    return _trl(completions, kwargs, _variant({}, None) == "dense")


def trl_reward_dense(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL GRPO reward function with the dense reward."""
    return _trl(completions, kwargs, True)
