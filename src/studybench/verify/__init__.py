"""The rule-based verifier (PROTOCOL.md sections 4-5).

Public API:

* :func:`extract_answers`, :func:`strip_reasoning`, :func:`find_boxes` - final-answer extraction.
* :func:`judge_boxes` / :func:`judge_response` - one judgement, via a shared default
  :class:`Verifier`.
* :class:`Verifier` - a reusable, thread-safe judge with an in-process fast path, a memo, and a
  pool of sandbox worker processes (hard wall-clock timeout per judgement) for symbolic work.
* :func:`check_gold_parsable` - whether a gold box is readable for its primitive type.
* :class:`Verdict` - the result record.

Safety: model text is never evaluated; SymPy objects are built only by latex2sympy from LaTeX, and
only inside worker processes that are SIGKILLed on overrun. No exception escapes ``judge_*`` or
:class:`Verifier` methods.
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from studybench.answers import extract_answers, find_boxes, strip_reasoning
from studybench.verify.sandbox import SandboxPool, TimedOut, WorkerDied
from studybench.verify.verdict import Verdict

if TYPE_CHECKING:
    from studybench.records import AnswerType

# studybench.records imports studybench.answers, so schema and the judges (which import
# schema) are imported lazily inside functions here to keep the package import acyclic.

__all__ = [
    "Verdict",
    "Verifier",
    "check_gold_parsable",
    "extract_answers",
    "find_boxes",
    "judge_boxes",
    "judge_response",
    "strip_reasoning",
]

MAX_PRED_CHARS = 2000
"""Predicted boxes longer than this are judged by string rules only."""

MAX_FAST_CHARS = 20_000
"""Predicted boxes longer than this (and than twice the longest gold box) are incorrect outright."""

MAX_PRED_BOXES = 64
"""More predicted boxes than this (and than four per gold box) are incorrect outright."""

_MEMO_SIZE = 200_000

Item = tuple[Any, ...]
"""``(gold_boxes, pred_boxes, answer_type, type_sequence)`` or the same with a fifth element,
``gold_unit`` (see :func:`studybench.verify.judges.split_hints`)."""


def _ts_key(type_sequence: Any) -> str:
    if type_sequence is None:
        return ""
    if isinstance(type_sequence, str):
        return type_sequence.replace(" ", "").upper()
    return ",".join(str(getattr(t, "value", t)).strip().upper() for t in type_sequence)


def _at_key(answer_type: Any) -> str:
    return str(getattr(answer_type, "value", answer_type)).strip().upper()


def _unit_key(gold_unit: Any) -> Any:
    if gold_unit is None or isinstance(gold_unit, str):
        return gold_unit
    try:
        return tuple(None if u is None else str(u) for u in gold_unit)
    except TypeError:
        return None


class Verifier:
    """Reusable, thread-safe rule-based judge (PROTOCOL.md section 5).

    Args:
        workers: maximum worker processes for symbolic/numeric judgements (default: CPU count, at
            most 8). Workers start lazily on the first judgement that needs one.
        timeout: wall-clock seconds per symbolic judgement; an overrun kills the worker and gives
            ``Verdict(False, "incorrect: timed out", ...)``.

    Verdicts are memoised by (gold boxes, predicted boxes, answer_type, type_sequence, gold_unit); timed-out,
    worker-died and internal-error verdicts are not memoised. A timed-out verdict's reason is exactly
    ``"incorrect: timed out"`` (callers may re-judge reasons starting with that).
    """

    def __init__(self, workers: int | None = None, timeout: float = 5.0) -> None:
        self.timeout = float(timeout)
        self._pool = SandboxPool(workers)
        self._memo: OrderedDict[tuple[Any, ...], Verdict] = OrderedDict()
        self._memo_lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None
        self._threads_lock = threading.Lock()
        self.stats = {"fast": 0, "worker": 0, "memo": 0, "timeouts": 0}
        self._warm_lock = threading.Lock()
        self._warmed = False

    def _ensure_warm(self) -> None:
        """Boot all workers (in parallel) before the first symbolic judgement, so that interpreter
        start-up never counts against a judgement's timeout."""
        if self._warmed:
            return
        with self._warm_lock:
            if not self._warmed:
                self._pool.warm()
                self._warmed = True

    # -- memo
    def _get(self, key: tuple[Any, ...]) -> Verdict | None:
        with self._memo_lock:
            v = self._memo.get(key)
            if v is not None:
                self._memo.move_to_end(key)
                self.stats["memo"] += 1
            return v

    def _put(self, key: tuple[Any, ...], v: Verdict) -> None:
        with self._memo_lock:
            self._memo[key] = v
            if len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)

    # -- judging
    def _key(self, gold: Sequence[str], pred: Sequence[str], at: Any, ts: Any, unit: Any = None) -> tuple[Any, ...]:
        return (tuple(gold), tuple(pred), _at_key(at), _ts_key(ts), _unit_key(unit))

    def _prepare(self, gold: Any, pred: Any, at: Any, ts: Any, unit: Any = None) -> tuple[tuple[Any, ...] | None, Verdict | None]:
        """Validate and try memo + fast path; returns (key, verdict-or-None)."""
        from studybench.verify.judges import fast_judge, normalise_types

        try:
            golds = [str(g) for g in gold]
            preds = [p for p in pred if isinstance(p, str)]
            normalise_types(at, ts)
        except Exception as e:  # bad input never escapes
            return None, Verdict(False, f"incorrect: bad input ({type(e).__name__})", ())
        if not preds:
            return None, Verdict(False, "incorrect: no final answer found", ())
        # cheap guards first, so that even the in-process string rules stay fast on hostile input
        if len(preds) > max(MAX_PRED_BOXES, 4 * len(golds)):
            return None, Verdict(False, f"incorrect: too many answers ({len(preds)})", ())
        limit = max(MAX_FAST_CHARS, 2 * max((len(g) for g in golds), default=0))
        if any(len(p) > limit for p in preds):
            return None, Verdict(False, "incorrect: answer too long", tuple(p[:200] for p in preds))
        key = self._key(golds, preds, at, ts, unit)
        v = self._get(key)
        if v is not None:
            return key, v
        v = fast_judge(golds, preds, at, ts, key[4])
        if v is not None:
            self.stats["fast"] += 1
            self._put(key, v)
            return key, v
        if any(len(p) > MAX_PRED_CHARS for p in preds):
            v = Verdict(False, "incorrect: answer too long for symbolic comparison", tuple(preds))
            self._put(key, v)
            return key, v
        return key, None

    def _run_worker(self, key: tuple[Any, ...], timeout: float | None = None) -> Verdict:
        golds, preds, at, ts, unit = key
        t = self.timeout if timeout is None else float(timeout)
        self._ensure_warm()
        try:
            v = self._pool.call("judge", (list(golds), list(preds), at, ts, list(unit) if isinstance(unit, tuple) else unit), t)
            if not isinstance(v, Verdict):
                v = Verdict(False, "incorrect: internal error (bad worker reply)", tuple(preds))
            self.stats["worker"] += 1
        except TimedOut:
            # never memoised: a later call (perhaps with a longer timeout) judges afresh
            self.stats["timeouts"] += 1
            return Verdict(False, "incorrect: timed out", tuple(preds))
        except WorkerDied as e:
            return Verdict(False, f"incorrect: worker died ({e})", tuple(preds))
        except Exception as e:  # closed pool, task error
            return Verdict(False, f"incorrect: internal error ({type(e).__name__}: {str(e)[:60]})", tuple(preds))
        self._put(key, v)
        return v

    def judge(
        self,
        gold_boxes: Sequence[str],
        pred_boxes: Sequence[str],
        answer_type: AnswerType | str,
        type_sequence: Sequence[AnswerType] | str = "",
        *,
        gold_unit: str | Sequence[str | None] | None = None,
        timeout: float | None = None,
    ) -> Verdict:
        """Judge one sub-problem: gold box contents vs predicted box contents.

        Args:
            gold_boxes: gold box contents, one per slot (``SubProblem.boxes``).
            pred_boxes: extracted predicted box contents (:func:`extract_answers`).
            answer_type: one of the nine types.
            type_sequence: per-slot primitive types for TUP / ALT (list or comma string).
            gold_unit: the unit of a unitless gold, when the source states it: one string, a
                comma-separated string with one entry per box (``"\\mu\\mathrm{m}, None"``), or a
                list. A prediction in another compatible unit is converted; without it, a
                prediction with a dimensional unit against a unitless nonzero gold is not accepted.
            timeout: override of the per-judgement wall-clock limit in seconds.

        Returns:
            A :class:`Verdict`. Never raises.
        """
        key, v = self._prepare(gold_boxes, pred_boxes, answer_type, type_sequence, gold_unit)
        if v is not None:
            return v
        assert key is not None
        return self._run_worker(key, timeout)

    def _executor(self) -> ThreadPoolExecutor:
        with self._threads_lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(
                    max_workers=self._pool.max_workers, thread_name_prefix="studybench-verify"
                )
            return self._threads

    def judge_many(self, items: Sequence[Item]) -> list[Verdict]:
        """Judge many ``(gold_boxes, pred_boxes, answer_type, type_sequence[, gold_unit])`` items in
        parallel.

        Items decided by the memo or the fast path never touch a worker; the rest are deduplicated
        and spread over the worker pool. Returns verdicts in item order. Never raises.
        """
        out: list[Verdict | None] = [None] * len(items)
        pending: dict[tuple[Any, ...], list[int]] = {}
        for i, item in enumerate(items):
            try:
                gold, pred, at, ts, *rest = item
                if len(rest) > 1:
                    raise ValueError("too many fields")
            except Exception as e:  # malformed item
                out[i] = Verdict(False, f"incorrect: bad input ({type(e).__name__})", ())
                continue
            key, v = self._prepare(gold, pred, at, ts, rest[0] if rest else None)
            if v is not None:
                out[i] = v
            elif key is not None:
                pending.setdefault(key, []).append(i)
        if pending:
            keys = list(pending)
            if len(keys) == 1:
                results = [self._run_worker(keys[0])]
            else:
                try:
                    results = list(self._executor().map(self._run_worker, keys))
                except Exception as e:  # executor shut down
                    results = [Verdict(False, f"incorrect: internal error ({type(e).__name__})", k[1]) for k in keys]
            for k, v in zip(keys, results, strict=True):
                for i in pending[k]:
                    out[i] = v
        return [v if v is not None else Verdict(False, "incorrect: internal error", ()) for v in out]

    def check_gold_parsable(self, box: str, answer_type: AnswerType | str) -> str | None:
        """See :func:`check_gold_parsable`."""
        try:
            return self._pool.call("parsable", (str(box), _at_key(answer_type)), self.timeout)
        except TimedOut:
            return "timed out"
        except Exception as e:
            return f"internal error ({type(e).__name__})"

    def warm(self) -> None:
        """Start all worker processes now (otherwise they start before the first judgement that
        needs one)."""
        self._ensure_warm()

    @property
    def pool(self) -> SandboxPool:
        return self._pool

    def close(self) -> None:
        """Stop worker processes and threads. Idempotent; the object is unusable afterwards."""
        with self._threads_lock:
            if self._threads is not None:
                self._threads.shutdown(wait=False, cancel_futures=True)
                self._threads = None
        self._pool.close()

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_DEFAULT: Verifier | None = None
_DEFAULT_LOCK = threading.Lock()


def _default_verifier() -> Verifier:
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Verifier()
            atexit.register(_DEFAULT.close)
        return _DEFAULT


def judge_boxes(
    gold_boxes: list[str],
    pred_boxes: list[str],
    answer_type: AnswerType | str,
    type_sequence: list[AnswerType] | str = "",
    *,
    gold_unit: str | Sequence[str | None] | None = None,
    timeout: float = 5.0,
) -> Verdict:
    """Judge predicted box contents against gold box contents (PROTOCOL.md section 5).

    Uses a process-wide default :class:`Verifier` (started lazily). ``gold_unit``: see
    :meth:`Verifier.judge`. ``timeout`` is the wall-clock limit in seconds for the symbolic part.
    Never raises.
    """
    return _default_verifier().judge(gold_boxes, pred_boxes, answer_type, type_sequence, gold_unit=gold_unit, timeout=timeout)


def judge_response(
    gold_answer: str,
    response: str,
    answer_type: AnswerType | str,
    type_sequence: list[AnswerType] | str = "",
    *,
    gold_unit: str | Sequence[str | None] | None = None,
    timeout: float = 5.0,
) -> Verdict:
    """Extract the final answers from a raw response and judge them (PROTOCOL.md sections 4-5).

    ``gold_answer`` is the gold string with ``\\boxed{}`` boxes. A response without a box gives
    ``Verdict(False, "incorrect: no final answer found", ())``. Never raises.
    """
    from studybench.records import gold_boxes
    from studybench.verify.judges import normalise_types

    try:
        at, ts = normalise_types(answer_type, type_sequence)
        golds = gold_boxes(gold_answer, at, ts)
    except Exception as e:
        return Verdict(False, f"incorrect: bad gold ({type(e).__name__})", ())
    if not golds:
        return Verdict(False, "incorrect: gold has no box", ())
    preds = extract_answers(response, m=len(golds))
    if not preds:
        return Verdict(False, "incorrect: no final answer found", ())
    return judge_boxes(golds, preds, at, ts, gold_unit=gold_unit, timeout=timeout)


def check_gold_parsable(box: str, answer_type: AnswerType | str) -> str | None:
    """``None`` when the verifier can parse this gold box content for a primitive answer type,
    else a short reason (used by ``studybench data check``). Runs in a sandbox worker. Never raises."""
    return _default_verifier().check_gold_parsable(box, answer_type)
