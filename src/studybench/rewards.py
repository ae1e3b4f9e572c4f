"""Rule-only RL rewards built on the studybench verifier (never an LLM; docs/protocol.md section 6).

Two adapters share one lazily started :class:`studybench.verify.Verifier`:

* :func:`compute_score` - verl's custom reward function (``reward.custom_reward_function.path`` /
  ``name``; the older top-level ``custom_reward_function`` works too). verl 0.9 calls it by keyword,
  ``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **extra)``,
  and may pass more keywords (``reward_router_address``, ``reward_model_tokenizer``, ...): they
  are accepted and ignored; positional calls work too. ``ground_truth`` is what the verl export
  writes to ``reward_model.ground_truth``: a dict with ``answer`` (the gold, ``\\boxed{}`` per
  slot), ``answer_type``, ``type_sequence`` (TUP / ALT) and ``gold_unit``; verl may hand it back as
  the dict or as its JSON text, both work. A plain gold string works when ``extra_info`` carries
  ``answer_type`` (and ``type_sequence``). It returns a float, or with ``return_dict=True`` (in verl:
  ``+reward.custom_reward_function.reward_kwargs.return_dict=true``, which verl merges into every
  call; or ``STUDYBENCH_REWARD_DICT=1`` in the environment) verl's dict form: ``{"score": float, "acc": 1.0 or 0.0, "reason": str, "answer_type": str,
  "extracted": str, "pred": str}`` - the same scalar keys for every row, so verl can log them.
  ``reason`` is the verifier's reason or ``"malformed ground truth: answer_type missing"``
  (``answer missing``, ``unknown answer_type``, ``bad type_sequence``, ``TUP needs a
  type_sequence``); ``extracted`` is the predicted boxes joined by ``" | "`` and ``pred`` a copy
  of it (verl's validation reports ``acc`` as its core metric and votes on ``pred`` for ``maj@n``).
* :func:`compute_score_batch` - the same for verl's batch reward manager (``reward_manager.name=batch``;
  older configs ``reward_model.reward_manager=batch``), which calls it once per batch with
  ``data_sources``, ``solution_strs``, ``ground_truths`` and ``extra_infos`` lists and takes one float
  (or dict) per rollout: the whole batch is judged in one verifier call (see below).
* :func:`trl_reward` - a TRL ``GRPOTrainer`` reward function (TRL 1.x): TRL passes ``prompts``,
  ``completions``, ``completion_ids``, ``trainer_state`` and every dataset column as keyword lists;
  the columns ``answer``, ``answer_type`` and optional ``type_sequence`` / ``gold_unit`` are read,
  the rest ignored. ``completions`` are strings or conversational message lists. It returns one
  float per completion, or ``None`` for a row without a gold (``answer`` empty or None, e.g. an
  instruction without an answer), which TRL leaves out.

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
truth or model text gives the lowest reward (0.0 binary, -0.5 dense), and each kind of malformed
ground truth is logged once per process (``logging`` warning from ``studybench.rewards``) so that a
broken dataset does not train on silent zeros. Symbolic work is bounded by the verifier's hard
wall-clock timeout (``STUDYBENCH_REWARD_TIMEOUT`` seconds, default 5).

Batches: :func:`compute_score_batch`, :func:`trl_reward` and their dense variants hand every
rollout of a batch to ONE :meth:`studybench.verify.Verifier.verify_many` call on the shared verifier
(:func:`reward_verifier`): memo hits and string-rule cases are decided in-process, identical
(gold, prediction, type) items are judged once, and the rest run in parallel on the worker pool
(``STUDYBENCH_REWARD_WORKERS`` processes, default the CPU count, at most 8), each verification
under its own timeout. Each rollout gets exactly the reward :func:`compute_score` gives it alone.
``bench/reward_batch_bench.py`` measures a 1,024-rollout batch.

The rewards of one response and the shared verifier (:func:`reward_for`, :func:`dense_reward_for`,
:func:`dense_components`, :func:`reward_verifier`) are :mod:`studybench.reward_scores`, importable
from here; this module holds the verl and TRL adapters.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, cast

from studybench.reward_scores import (
    DENSE_WEIGHTS,
    close_reward_verifier,
    dense_components,
    dense_rest,
    dense_reward_for,
    no_answer_components,
    reward_for,
    reward_inputs,
    reward_verifier,
)

__all__ = [
    "DENSE_WEIGHTS",
    "close_reward_verifier",
    "compute_score",
    "compute_score_batch",
    "compute_score_batch_dense",
    "compute_score_dense",
    "dense_components",
    "dense_reward_for",
    "reward_for",
    "reward_verifier",
    "trl_reward",
    "trl_reward_dense",
]


def _variant(info: dict[str, Any], forced: str | None) -> str:
    v = forced or info.get("reward") or os.environ.get("STUDYBENCH_REWARD", "binary")
    return "dense" if str(v).strip().lower() == "dense" else "binary"


_log = logging.getLogger(__name__)
_WARNED: set[str] = set()
_LOCK = threading.Lock()

_TRUE = ("1", "true", "yes", "on")


def _warn_once(reason: str) -> None:
    """Log a malformed-input reason once per process (a reward call never raises; this is the sign)."""
    with _LOCK:
        if reason in _WARNED:
            return
        _WARNED.add(reason)
    _log.warning("studybench reward: %s; every such row scores the lowest reward (this warning is shown once)", reason)


def _given(*values: Any) -> Any:
    """The first value that is neither None nor a blank string (arrays count as given)."""
    for v in values:
        if v is not None and not (isinstance(v, str) and not v.strip()):
            return v
    return None


def _ground_truth(ground_truth: Any, info: dict[str, Any]) -> tuple[str, Any, Any, Any] | str:
    """``(answer, answer_type, type_sequence, gold_unit)`` from verl's ground truth, or why not.

    ``ground_truth`` is a dict, its JSON text, or a plain gold string (types then from ``info``).
    """
    from studybench.records import AnswerType, parse_type_sequence

    gt = ground_truth
    if isinstance(gt, (bytes, bytearray)):
        gt = gt.decode("utf-8", "replace")
    if isinstance(gt, str) and gt.lstrip().startswith("{"):
        try:
            gt = json.loads(gt)
        except ValueError:
            pass
    fields = gt if isinstance(gt, dict) else {"answer": gt}
    answer = fields.get("answer")
    at, ts, unit = (_given(fields.get(k), info.get(k)) for k in ("answer_type", "type_sequence", "gold_unit"))
    ts = "" if ts is None else ts
    if not isinstance(answer, str) or not answer.strip():
        return "malformed ground truth: answer missing"
    if at is None or (isinstance(at, str) and not at.strip()):
        return "malformed ground truth: answer_type missing"
    try:
        atype = AnswerType(str(getattr(at, "value", at)).strip().upper())
    except ValueError:
        return "malformed ground truth: unknown answer_type"
    if not isinstance(ts, str):
        try:
            ts = [str(getattr(t, "value", t)) for t in ts]  # a list, or the array parquet gives back
        except TypeError:
            return "malformed ground truth: bad type_sequence"
    try:
        seq = parse_type_sequence(ts)
    except ValueError:
        return "malformed ground truth: bad type_sequence"
    if atype.info.compound and not seq:
        return f"malformed ground truth: {atype.value} needs a type_sequence"
    return answer, atype, seq, unit


def _score(solution_str: Any, ground_truth: Any, info: dict[str, Any], dense: bool) -> dict[str, Any]:
    """The reward and what explains it (the dict form of :func:`compute_score`). Never raises."""
    low = DENSE_WEIGHTS["no_answer"] if dense else 0.0
    out: dict[str, Any] = {"score": low, "acc": 0.0, "reason": "", "answer_type": "", "extracted": "", "pred": ""}
    try:
        gt = _ground_truth(ground_truth, info)
        if isinstance(gt, str):
            _warn_once(gt)
            out["reason"] = gt
            return out
        answer, at, ts, unit = gt
        out["answer_type"] = at.value
        if not isinstance(solution_str, str):
            out["reason"] = "bad input: solution_str is not a string"
            return out
        problem = _given(ground_truth.get("problem") if isinstance(ground_truth, dict) else None, info.get("problem"))
        verdict = reward_verifier().verify_response(answer, solution_str, at, ts, gold_unit=unit,
                                              problem=problem if isinstance(problem, str) else None)
        out["acc"] = 1.0 if verdict.correct else 0.0
        out["reason"] = verdict.reason
        out["extracted"] = out["pred"] = " | ".join(verdict.extracted)
        out["score"] = dense_reward_for(solution_str, answer, at, ts, unit) if dense else out["acc"]
    except Exception as e:  # noqa: BLE001 - a reward must never raise inside a training loop
        out["score"], out["acc"], out["reason"] = low, 0.0, f"internal error ({type(e).__name__})"
    return out


def compute_score(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: Any = None,
    *,
    variant: str | None = None,
    return_dict: bool | str | None = None,
    **kwargs: Any,
) -> float | dict[str, Any]:
    """verl custom reward function (rule-only); called by keyword, extra keywords are ignored.

    Args:
        data_source: the row's data source (unused).
        solution_str: the decoded response.
        ground_truth: ``reward_model.ground_truth``: a dict with ``answer``, ``answer_type``,
            ``type_sequence`` and ``gold_unit``, or its JSON text, or a plain gold string (then
            ``extra_info`` must carry ``answer_type``).
        extra_info: the row's ``extra_info``: ``{"reward": "dense"}`` selects the dense reward;
            ``answer_type`` / ``type_sequence`` / ``gold_unit`` fill in what ``ground_truth`` lacks;
            ``problem`` (the problem text the model saw; also read from ``ground_truth``) lets the
            verifier use definitions it states ("where \\omega_0 = \\sqrt{k/m}"), as the rule pass does.
        variant: ``"dense"`` or ``"binary"``, any case (overrides ``extra_info`` and
            ``STUDYBENCH_REWARD``).
        return_dict: return the dict form (default: ``STUDYBENCH_REWARD_DICT=1``, else False); a
            string counts as true only when it reads ``1``, ``true``, ``yes`` or ``on``. verl users
            set keywords with ``reward.custom_reward_function.reward_kwargs``.
        **kwargs: whatever else verl passes (``reward_router_address``, ...): ignored.

    Returns:
        The reward, or with ``return_dict`` ``{"score", "acc", "reason", "answer_type",
        "extracted", "pred"}``: ``acc`` 1.0 when the rule verifier accepts the answer, ``reason`` the
        verifier's reason or ``"malformed ground truth: ..."``, ``extracted`` the predicted boxes
        joined by ``" | "``. Never raises.
    """
    info = extra_info if isinstance(extra_info, dict) else {}
    dense = _variant(info, variant) == "dense"
    out = _score(solution_str, ground_truth, info, dense)
    flag: Any = os.environ.get("STUDYBENCH_REWARD_DICT", "") if return_dict is None else return_dict
    if isinstance(flag, str):  # verl's reward_kwargs may carry the text "false"
        flag = flag.strip().lower() in _TRUE
    return out if flag else float(out["score"])


def compute_score_dense(
    data_source: Any = None, solution_str: Any = None, ground_truth: Any = None, extra_info: Any = None,
    *, return_dict: bool | str | None = None, **kwargs: Any,
) -> float | dict[str, Any]:
    """verl custom reward function with the dense reward (rule-only); as :func:`compute_score`."""
    return compute_score(data_source, solution_str, ground_truth, extra_info, variant="dense", return_dict=return_dict)


def _score_batch(rows: Sequence[tuple[Any, Any, dict[str, Any], bool]]) -> list[dict[str, Any]]:
    """:func:`_score` of many rollouts ``(solution_str, ground_truth, info, dense)``, judged together.

    Every rollout's verification (and, for the dense reward, the answer component's verification)
    goes into ONE :meth:`studybench.verify.Verifier.verify_many` call, which decides memo hits and
    string-rule cases in-process, deduplicates identical items and spreads the rest over the worker
    pool. Each rollout gets exactly what :func:`_score` gives it alone; a bad rollout never affects
    another. Never raises.
    """
    from studybench.verify import extract_pair
    from studybench.verify.rules import normalise_types

    outs: list[dict[str, Any]] = []
    items: list[tuple[Any, ...]] = []
    # per rollout: (index of its response item or a ready Verdict, the dense plan) or None when done
    plans: list[tuple[Any, Any] | None] = []
    for solution_str, ground_truth, info, dense in rows:
        low = DENSE_WEIGHTS["no_answer"] if dense else 0.0
        out: dict[str, Any] = {"score": low, "acc": 0.0, "reason": "", "answer_type": "", "extracted": "", "pred": ""}
        outs.append(out)
        plans.append(None)
        try:
            gt = _ground_truth(ground_truth, info)
            if isinstance(gt, str):
                _warn_once(gt)
                out["reason"] = gt
                continue
            answer, at, ts, unit = gt
            out["answer_type"] = at.value
            if not isinstance(solution_str, str):
                out["reason"] = "bad input: solution_str is not a string"
                continue
            problem = _given(ground_truth.get("problem") if isinstance(ground_truth, dict) else None, info.get("problem"))
            pair = extract_pair(answer, solution_str, at, ts)
            if isinstance(pair, tuple):  # as Verifier.verify_response does before Verifier.verify
                nat, nts = normalise_types(at, ts)
                items.append((pair[0], pair[1], nat, nts, unit, problem if isinstance(problem, str) else None))
                first: Any = len(items) - 1
            else:
                first = pair
            dense_plan: Any = None
            if dense:  # as dense_components: its own extraction, verified without the problem text
                try:
                    prep = reward_inputs(solution_str, answer, at, ts)
                    if prep is None or not prep[3]:
                        dense_plan = no_answer_components()
                    else:
                        items.append((prep[2], prep[3], prep[0], prep[1], unit))
                        dense_plan = (prep, unit, len(items) - 1)
                except Exception:  # noqa: BLE001
                    dense_plan = no_answer_components()
            plans[-1] = (first, dense_plan)
        except Exception as e:  # noqa: BLE001 - a reward must never raise inside a training loop
            out["score"], out["acc"], out["reason"] = low, 0.0, f"internal error ({type(e).__name__})"
    try:
        verdicts = reward_verifier().verify_many(items) if any(p is not None for p in plans) else []
    except Exception as e:  # noqa: BLE001 - e.g. a bad STUDYBENCH_REWARD_WORKERS; each row keeps its lowest reward
        for out, plan in zip(outs, plans, strict=True):
            if plan is not None:
                out["reason"] = f"internal error ({type(e).__name__})"
        return outs
    for (solution_str, _gt, _info, dense), out, plan in zip(rows, outs, plans, strict=True):
        if plan is None:
            continue
        low = out["score"]
        try:
            first, dense_plan = plan
            verdict = verdicts[first] if isinstance(first, int) else first
            out["acc"] = 1.0 if verdict.correct else 0.0
            out["reason"] = verdict.reason
            out["extracted"] = out["pred"] = " | ".join(verdict.extracted)
            if not dense:
                out["score"] = out["acc"]
                continue
            try:
                if isinstance(dense_plan, dict):
                    comps = dense_plan
                else:
                    prep, unit, k = dense_plan
                    comps = dense_rest(solution_str, prep, unit, verdicts[k].correct)
            except Exception:  # noqa: BLE001
                comps = no_answer_components()
            out["score"] = _dense_total(comps)
        except Exception as e:  # noqa: BLE001
            out["score"], out["acc"], out["reason"] = low, 0.0, f"internal error ({type(e).__name__})"
    return outs


def _dense_total(comps: dict[str, float]) -> float:
    """The dense reward from its components: their sum clipped to [-1, 1] (as :func:`dense_reward_for`)."""
    try:
        return max(-1.0, min(1.0, float(sum(comps.values()))))
    except Exception:  # noqa: BLE001
        return DENSE_WEIGHTS["no_answer"]


def _as_list(values: Any, n: int) -> list[Any]:
    """A verl batch field as a list of ``n`` (numpy arrays and tuples too; missing rows are None)."""
    if values is None or isinstance(values, (str, bytes, bytearray, dict)):
        return [None] * n
    try:
        out = list(values)[:n]
    except Exception:  # noqa: BLE001 - not iterable, or its iteration fails: a reward call never raises
        return [None] * n
    return out + [None] * (n - len(out))


def compute_score_batch(
    data_sources: Any = None,
    solution_strs: Any = None,
    ground_truths: Any = None,
    extra_infos: Any = None,
    *,
    variant: str | None = None,
    return_dict: bool | str | None = None,
    **kwargs: Any,
) -> list[float | dict[str, Any]]:
    """verl batch reward function (rule-only): every rollout of a batch judged in one verifier call.

    For verl's ``BatchRewardManager`` (``reward_model.reward_manager=batch``, or
    ``reward_manager.name=batch`` in newer configs, with ``custom_reward_function.path`` = this
    module's file and ``custom_reward_function.name=compute_score_batch``). verl calls it once per
    batch (verl/workers/reward_manager/batch.py, ``BatchRewardManager.verify``, volcengine/verl at
    b178a3cd, 2026-01)::

        scores = self.compute_score(data_sources=data_sources, solution_strs=responses_str,
                                    ground_truths=ground_truths, extra_infos=extras, **self.reward_kwargs)

    and reads ``scores[i]`` as a float or as a dict with a ``"score"`` key (every other key goes
    into ``reward_extra_info``). ``data_sources`` and ``extra_infos`` are numpy object arrays there;
    any sequence works. Each rollout gets exactly what :func:`compute_score` gives it alone (same
    ground-truth forms, ``extra_info`` keys, dense choice per row, dict keys); a malformed rollout
    gets its own lowest reward and never fails the batch. (verl's asynchronous reward loop,
    ``verl/experimental/reward_loop``, has no batch manager at that commit: it scores one rollout
    at a time through :func:`compute_score`.)

    All rollouts' verifications go to ONE :meth:`studybench.verify.Verifier.verify_many` call on
    the shared reward verifier (:func:`reward_verifier`): memo hits and string-rule cases are
    decided in-process, identical (gold, prediction, type) items are judged once, and the rest run
    in parallel on its worker pool of ``STUDYBENCH_REWARD_WORKERS`` processes (default: the CPU
    count, at most 8), each verification under a hard wall-clock limit of
    ``STUDYBENCH_REWARD_TIMEOUT`` seconds (default 5; an overrun is "incorrect: timed out" and
    scores the lowest reward). The pool starts (about a second per worker, in parallel) before the
    first symbolic verification of the process.

    Args:
        data_sources: one data source per rollout (unused).
        solution_strs: the decoded responses.
        ground_truths: one ``reward_model.ground_truth`` per rollout, as for :func:`compute_score`.
        extra_infos: one ``extra_info`` per rollout, as for :func:`compute_score` (a row's
            ``{"reward": "dense"}`` selects the dense reward for that row).
        variant: ``"dense"`` or ``"binary"`` for every row (overrides ``extra_info`` and
            ``STUDYBENCH_REWARD``).
        return_dict: return dicts (as :func:`compute_score`; default ``STUDYBENCH_REWARD_DICT``).
        **kwargs: whatever else verl passes: ignored, except a per-rollout call's
            ``data_source`` / ``solution_str`` / ``ground_truth`` / ``extra_info`` (see Returns).

    Returns:
        One reward (or dict) per entry of ``solution_strs``, in order; ``[]`` when
        ``solution_strs`` is not a list of rows. Called the per-rollout way (``solution_str=...``
        and no ``solution_strs``: a per-rollout reward manager or verl's reward loop pointed at this
        function), the one reward :func:`compute_score` gives, with a warning logged once. Never raises.
    """
    if solution_strs is None and "solution_str" in kwargs:
        _warn_per_rollout_call()
        return compute_score(kwargs.pop("data_source", None), kwargs.pop("solution_str"),
                             kwargs.pop("ground_truth", None), kwargs.pop("extra_info", None),
                             variant=variant, return_dict=return_dict)
    try:
        n = len(solution_strs) if solution_strs is not None and not isinstance(solution_strs, (str, bytes, dict)) else 0
        sols = _as_list(solution_strs, n)
    except Exception:  # noqa: BLE001
        _warn_once("the batch reward function got solution_strs that are not a list")
        return []
    flag: Any = os.environ.get("STUDYBENCH_REWARD_DICT", "") if return_dict is None else return_dict
    if isinstance(flag, str):
        flag = flag.strip().lower() in _TRUE
    rows: list[tuple[Any, Any, dict[str, Any], bool]] = []
    for sol, gt, extra in zip(sols, _as_list(ground_truths, n), _as_list(extra_infos, n), strict=True):
        info = extra if isinstance(extra, dict) else {}
        try:
            dense = _variant(info, variant) == "dense"
        except Exception:  # noqa: BLE001
            dense = False
        rows.append((sol, gt, info, dense))
    outs = _score_batch(rows)
    return [o if flag else float(o["score"]) for o in outs]


def compute_score_batch_dense(
    data_sources: Any = None, solution_strs: Any = None, ground_truths: Any = None, extra_infos: Any = None,
    *, return_dict: bool | str | None = None, **kwargs: Any,
) -> list[float | dict[str, Any]]:
    """verl batch reward function with the dense reward (rule-only); as :func:`compute_score_batch`."""
    kwargs.pop("variant", None)
    return compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, variant="dense",
                               return_dict=return_dict, **kwargs)


def _warn_per_rollout_call() -> None:
    """Log once that a batch reward function was called for one rollout (verl's naive manager or reward loop)."""
    with _LOCK:
        if "per-rollout" in _WARNED:
            return
        _WARNED.add("per-rollout")
    _log.warning("studybench reward: compute_score_batch was called for one rollout (solution_str=..., the way "
                 "verl's per-rollout reward managers and its reward loop call): each call is scored as "
                 "compute_score would; for one call per batch use verl's batch reward manager")


def _text(completion: Any) -> Any:
    """Completion text from a string or a conversational completion (list of message dicts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, dict):
            return last.get("content")
    return None


def _column(kwargs: dict[str, Any], name: str, n: int) -> list[Any] | None:
    """A dataset column TRL passed as a keyword list (``[None] * n`` when absent; ``None`` when it is
    not a list: a string would otherwise be read one character per row)."""
    col = kwargs.get(name)
    if col is None:
        return [None] * n
    if isinstance(col, (str, bytes, bytearray, dict)):
        return None
    try:
        col = list(col)[:n]
    except TypeError:
        return None
    return col + [None] * (n - len(col))


def _trl(completions: Sequence[Any], kwargs: dict[str, Any], dense: bool) -> list[float | None]:
    low = DENSE_WEIGHTS["no_answer"] if dense else 0.0
    try:
        completions = list(completions)
    except TypeError:
        _warn_once("the TRL reward function got completions that are not a list")
        return []
    n = len(completions)
    if kwargs.get("answer") is None:
        _warn_once("no 'answer' column reached the TRL reward function")
        return [low] * n
    cols = {k: _column(kwargs, k, n) for k in ("answer", "answer_type", "type_sequence", "gold_unit")}
    problems = _column(kwargs, "problem", n) if kwargs.get("problem") is not None else None
    for k, col in cols.items():
        if col is None:
            _warn_once(f"the {k!r} column reached the TRL reward function as a {type(kwargs[k]).__name__}, not a list")
            return [low] * n
    answers, types, seqs, units = (cast(list[Any], c) for c in cols.values())
    rows: list[tuple[Any, Any, dict[str, Any], bool]] = []
    judged: list[int] = []
    for i, c in enumerate(completions):
        answer = answers[i]
        if answer is None or (isinstance(answer, str) and not answer.strip()):
            continue  # no gold (e.g. an instruction without an answer): None, which TRL ignores
        gt = {"answer": answer, "answer_type": types[i], "type_sequence": seqs[i], "gold_unit": units[i],
              "problem": problems[i] if problems is not None else None}
        rows.append((_text(c), gt, {}, dense))
        judged.append(i)
    out: list[float | None] = [None] * n
    for i, o in zip(judged, _score_batch(rows), strict=True):  # the whole batch in one verifier call
        out[i] = float(o["score"])
    return out


def trl_reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """TRL ``GRPOTrainer`` reward function: one binary reward per completion.

    Args:
        completions: strings or conversational message lists (the last message's content is read).
        **kwargs: TRL passes ``prompts``, ``completion_ids``, ``trainer_state`` and every dataset
            column as a list; the columns ``answer``, ``answer_type`` and optional
            ``type_sequence`` / ``gold_unit`` / ``problem`` are read, the rest ignored.

    Returns:
        One reward per completion; ``None`` for a row without a gold (empty or missing
        ``answer``), which TRL ignores. ``STUDYBENCH_REWARD=dense`` switches to the dense reward.
        Without an ``answer`` column at all every row gets the lowest reward (and a warning is
        logged once). Never raises.
    """
    return _trl(completions, kwargs, _variant({}, None) == "dense")


def trl_reward_dense(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """TRL GRPO reward function with the dense reward; otherwise as :func:`trl_reward`."""
    return _trl(completions, kwargs, True)
