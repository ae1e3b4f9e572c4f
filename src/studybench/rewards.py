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

The reward is the Physics-R1 binary reward: 1.0 when the rule verifier accepts the response's final
answer (MC letter equality, numeric within 1% relative tolerance, symbolic equivalence, ...), else
0.0. A reward call never raises: malformed ground truth or model text gives 0.0, and symbolic work
is bounded by the verifier's hard wall-clock timeout (``STUDYBENCH_REWARD_TIMEOUT`` seconds,
default 5).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["compute_score", "reward_for", "trl_reward"]

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


def reward_for(response: Any, answer: Any, answer_type: Any, type_sequence: Any = "") -> float:
    """Binary reward of one response: 1.0 if the rule verifier accepts it, else 0.0. Never raises.

    Args:
        response: the model's completion text (reasoning is removed before extraction).
        answer: the gold answer, ``\\boxed{...}`` per slot.
        answer_type: one of NV EX EQ TUP IN MC TF QL ALT.
        type_sequence: slot types for TUP / ALT (comma string or list).
    """
    try:
        from studybench.schema import AnswerType, gold_boxes, parse_type_sequence
        from studybench.verify import extract_answers

        if not isinstance(response, str) or not isinstance(answer, str):
            return 0.0
        at = AnswerType(str(answer_type).strip().upper())
        ts = parse_type_sequence(type_sequence or "")
        if at.value in ("TUP", "ALT") and not ts:
            return 0.0  # malformed ground truth: a compound type needs its type_sequence
        golds = gold_boxes(answer, at, ts)
        if not golds:
            return 0.0
        preds = extract_answers(response, len(golds))
        if not preds:
            return 0.0
        return 1.0 if _verifier().judge(golds, preds, at, ts).correct else 0.0
    except Exception:  # noqa: BLE001 - a reward must never raise inside a training loop
        return 0.0


def compute_score(data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, **kwargs: Any) -> float:
    """verl custom reward function (rule-only). See the module docstring for ``ground_truth``."""
    try:
        gt = ground_truth
        if isinstance(gt, str) and gt.lstrip().startswith("{"):
            try:
                gt = json.loads(gt)
            except ValueError:
                pass
        info = extra_info if isinstance(extra_info, dict) else {}
        if isinstance(gt, dict):
            return reward_for(solution_str, gt.get("answer"), gt.get("answer_type", info.get("answer_type")),
                              gt.get("type_sequence", info.get("type_sequence", "")))
        return reward_for(solution_str, gt, info.get("answer_type"), info.get("type_sequence", ""))
    except Exception:  # noqa: BLE001
        return 0.0


def _text(completion: Any) -> Any:
    """Completion text from a string or a conversational completion (list of message dicts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, dict):
            return last.get("content")
    return None


def trl_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL GRPO reward function: one binary reward per completion (dataset columns as kwargs)."""
    answers = kwargs.get("answer") or []
    types = kwargs.get("answer_type") or []
    seqs = kwargs.get("type_sequence") or [""] * len(completions)
    out: list[float] = []
    for i, c in enumerate(completions):
        try:
            out.append(reward_for(_text(c), answers[i], types[i], seqs[i] if i < len(seqs) else ""))
        except Exception:  # noqa: BLE001
            out.append(0.0)
    return out
