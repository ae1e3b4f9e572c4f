"""The :class:`Verifier`: memo, in-process fast path, sandbox pool (docs/protocol.md sections 4-5).

:class:`Verifier` checks predicted box contents against gold box contents (:meth:`Verifier.verify`,
:meth:`Verifier.verify_many`) or a raw response against a gold answer string
(:meth:`Verifier.verify_response`: final-answer extraction, then verification). Cases the string
rules decide (string-equal answers, MC, TF, QL) are decided in-process; the rest go to a pool of
sandbox worker processes under a hard wall-clock timeout. Verdicts are memoised.

:func:`verify_boxes`, :func:`verify_response` and :func:`check_gold_parsable` use a process-wide
default :class:`Verifier` (:func:`default_verifier`), started lazily.

Safety: model text is never evaluated; SymPy objects are built only by latex2sympy from LaTeX, and
only inside worker processes that are SIGKILLed on overrun. No exception escapes these functions or
:class:`Verifier` methods.

What a verifier is given (:data:`Item`, :func:`extract_pair`, the size limits) and how its pending
work is spread over the worker threads are in :mod:`studybench.verify.items`, importable from here.
"""

from __future__ import annotations

import atexit
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from studybench.records import AnswerType
from studybench.verify.items import (
    MAX_FAST_CHARS,
    MAX_PRED_BOXES,
    MAX_PRED_CHARS,
    Item,
    answer_type_key,
    extract_pair,
    plan_chunks,
    type_sequence_key,
    unit_key,
)
from studybench.verify.physics.definitions import extract_definitions
from studybench.verify.rules import fast_verdict, normalise_types
from studybench.verify.sandbox import SandboxPool, TimedOut, WorkerDied
from studybench.verify.verdict import Verdict

__all__ = [
    "MAX_FAST_CHARS",
    "MAX_PRED_BOXES",
    "MAX_PRED_CHARS",
    "Item",
    "Verifier",
    "check_gold_parsable",
    "default_verifier",
    "extract_pair",
    "verify_boxes",
    "verify_response",
]


_MEMO_SIZE = 200_000


class Verifier:
    r"""Reusable, thread-safe rule verifier (docs/protocol.md section 5).

    Verdicts are memoised by (gold boxes, predicted boxes, answer_type, type_sequence, gold_unit, the
    definitions taken from the problem text and the gold);
    timed-out, worker-died and internal-error verdicts are not memoised. A timed-out verdict's reason
    is exactly ``"incorrect: timed out"`` (callers may verify again the items whose reason starts
    with that).

    Args:
        workers: maximum worker processes for symbolic/numeric work (default: CPU count, at most 8).
            Workers start lazily, all at once, before the first verification that needs one.
        timeout: wall-clock seconds per symbolic verification; an overrun kills the worker and gives
            ``Verdict(False, "incorrect: timed out", ...)``.

    Attributes:
        timeout: the default per-verification timeout in seconds.
        stats: counters ``fast`` (decided in-process), ``worker``, ``memo`` (hits), ``timeouts`` and
            ``internal_errors`` (verdicts returned whose reason is an internal error,
            :func:`~studybench.verify.verdict.is_internal_error`: the verifier failed, e.g. a broken
            install; callers must not treat results holding one as complete).

    Raises:
        ValueError: ``workers`` below 1, or a ``timeout`` that is not a positive finite number.

    Example:
        >>> with Verifier(workers=4, timeout=5.0) as v:  # doctest: +SKIP
        ...     v.verify(["2.5"], ["2500\\,\\mathrm{m}"], "NV", gold_unit="\\mathrm{km}").correct
        True
    """

    def __init__(self, workers: int | None = None, timeout: float = 5.0) -> None:
        """Create a verifier; no process starts before it is needed (see the class docstring)."""
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be a whole number >= 1 (or None for the CPU count), got {workers!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self._pool = SandboxPool(workers)
        self._memo: OrderedDict[tuple[Any, ...], Verdict] = OrderedDict()
        self._memo_lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None
        self._threads_lock = threading.Lock()
        self.stats = {"fast": 0, "worker": 0, "memo": 0, "timeouts": 0, "internal_errors": 0}
        self._warm_lock = threading.Lock()
        self._warmed = False

    def _ensure_warm(self) -> None:
        """Boot all workers (in parallel) before the first symbolic verification.

        Interpreter start-up then never counts against a verification's timeout.
        """
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

    # -- verifying
    def _key(self, gold: Sequence[str], pred: Sequence[str], at: Any, ts: Any, unit: Any = None, defs: Any = ()) -> tuple[Any, ...]:
        return (tuple(gold), tuple(pred), answer_type_key(at), type_sequence_key(ts), unit_key(unit), tuple(defs))

    def _prepare(
        self, gold: Any, pred: Any, at: Any, ts: Any, unit: Any = None, problem: Any = None
    ) -> tuple[tuple[Any, ...] | None, Verdict | None]:
        """Validate and try memo + fast path; returns (key, verdict-or-None)."""
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
        defs = extract_definitions(problem if isinstance(problem, str) else None, golds, answer_type_key(at))
        key = self._key(golds, preds, at, ts, unit, defs)
        v = self._get(key)
        if v is not None:
            return key, v
        v = fast_verdict(golds, preds, at, ts, key[4])
        if v is not None:
            self.stats["fast"] += 1
            if not v.internal_error:  # a failure is never memoised: a later call tries again
                self._put(key, v)
            return key, v
        if any(len(p) > MAX_PRED_CHARS for p in preds):
            v = Verdict(False, "incorrect: answer too long for symbolic comparison", tuple(preds))
            self._put(key, v)
            return key, v
        return key, None

    def _run_worker(self, key: tuple[Any, ...], timeout: float | None = None) -> Verdict:
        golds, preds, at, ts, unit, defs = key
        t = self.timeout if timeout is None else float(timeout)
        self._ensure_warm()
        args = (list(golds), list(preds), at, ts, list(unit) if isinstance(unit, tuple) else unit)
        try:
            v = self._pool.call("verdict", (*args, [list(d) for d in defs]) if defs else args, t)
            if not isinstance(v, Verdict):
                v = Verdict(False, "incorrect: internal error (bad worker reply)", tuple(preds))
            self.stats["worker"] += 1
        except TimedOut:
            # never memoised: a later call (perhaps with a longer timeout) verifies afresh
            self.stats["timeouts"] += 1
            return Verdict(False, "incorrect: timed out", tuple(preds))
        except WorkerDied as e:
            return Verdict(False, f"incorrect: worker died ({e})", tuple(preds))
        except Exception as e:  # closed pool, task error
            return Verdict(False, f"incorrect: internal error ({type(e).__name__}: {str(e)[:60]})", tuple(preds))
        if not v.internal_error:  # e.g. a worker whose SymPy import failed: never memoised
            self._put(key, v)
        return v

    def _counted(self, verdicts: list[Verdict]) -> list[Verdict]:
        """``verdicts``, with their internal errors added to ``stats["internal_errors"]``."""
        n = sum(1 for v in verdicts if v.internal_error)
        if n:
            with self._memo_lock:
                self.stats["internal_errors"] += n
        return verdicts

    def verify(
        self,
        gold_boxes: Sequence[str],
        pred_boxes: Sequence[str],
        answer_type: AnswerType | str,
        type_sequence: Sequence[AnswerType] | str = "",
        *,
        gold_unit: str | Sequence[str | None] | None = None,
        timeout: float | None = None,
        problem: str | None = None,
    ) -> Verdict:
        r"""Verify one sub-problem's answer: predicted box contents against gold box contents.

        Implements docs/protocol.md section 5; the rule of each answer type is in
        :data:`studybench.verify.rules.RULES`.

        Args:
            gold_boxes: gold box contents, one per box (``SubProblem.boxes``).
            pred_boxes: extracted predicted box contents (:func:`studybench.answers.extract_answers`).
            answer_type: one of the nine types (NV EX EQ TUP IN MC TF QL ALT), as an
                :class:`~studybench.records.AnswerType` or its name.
            type_sequence: the primitive type of each box for TUP / ALT (list or comma string).
            gold_unit: the unit of a unitless gold, when the source states it: one string, a
                comma-separated string with one entry per box (``"\mu\mathrm{m}, None"``), or a
                list. A prediction in another compatible unit is converted; without it, a
                prediction with a dimensional unit against a unitless nonzero gold is not accepted.
            timeout: override of the per-verification wall-clock limit in seconds.
            problem: the problem text (the parent's stem and the sub-problem), when known: a plain
                ``symbol = expression`` definition it states ("where \\omega_0 = \\sqrt{k/m}", "let
                \\tau = RC") is used as a substitution (:mod:`studybench.verify.physics.definitions`); so is a
                trailing definition clause inside a gold box, with or without it.

        Returns:
            A :class:`~studybench.verify.verdict.Verdict`. Never raises: bad input gives an
            incorrect verdict that says why.
        """
        key, v = self._prepare(gold_boxes, pred_boxes, answer_type, type_sequence, gold_unit, problem)
        if v is None:
            assert key is not None
            v = self._run_worker(key, timeout)
        return self._counted([v])[0]

    def verify_response(
        self,
        gold_answer: str,
        response: str,
        answer_type: AnswerType | str,
        type_sequence: Sequence[AnswerType] | str = "",
        *,
        gold_unit: str | Sequence[str | None] | None = None,
        timeout: float | None = None,
        problem: str | None = None,
    ) -> Verdict:
        r"""Extract the final answers from a raw response and verify them (docs/protocol.md sections 4-5).

        The gold boxes come from :func:`studybench.records.gold_boxes` (a TUP/ALT gold packed into one
        box is split), the predicted ones from :func:`studybench.answers.extract_answers` (reasoning
        removed, the ``Final Answer:`` line first, else the last boxes; as many as the gold has).

        Args:
            gold_answer: the gold string with one ``\boxed{}`` per answer.
            response: the model's raw response.
            answer_type: one of the nine types, as in :meth:`verify`.
            type_sequence: the primitive type of each box for TUP / ALT.
            gold_unit: the unit of a unitless gold, as in :meth:`verify`.
            timeout: override of the per-verification wall-clock limit in seconds.
            problem: the problem text, as in :meth:`verify`.

        Returns:
            A :class:`~studybench.verify.verdict.Verdict`; ``Verdict(False, "incorrect: no final
            answer found", ())`` for a response without a box, ``"incorrect: gold has no box"`` or
            ``"incorrect: bad gold (...)"`` for an unusable gold. Never raises.
        """
        pair = extract_pair(gold_answer, response, answer_type, type_sequence)
        if isinstance(pair, Verdict):
            return pair
        golds, preds = pair
        at, ts = normalise_types(answer_type, type_sequence)
        return self.verify(golds, preds, at, ts, gold_unit=gold_unit, timeout=timeout, problem=problem)

    def _executor(self) -> ThreadPoolExecutor:
        with self._threads_lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(
                    max_workers=self._pool.max_workers, thread_name_prefix="studybench-verify"
                )
            return self._threads

    def verify_many(self, items: Sequence[Item]) -> list[Verdict]:
        """Verify many answers in parallel.

        Items decided by the memo or the fast path never touch a worker; the rest are deduplicated
        and spread over the worker pool's threads in chunks (items with the same gold together, the
        most expensive first); every item keeps its own timeout.

        Args:
            items: ``(gold_boxes, pred_boxes, answer_type, type_sequence[, gold_unit[, problem]])``
                tuples, each as the arguments of :meth:`verify`.

        Returns:
            One :class:`~studybench.verify.verdict.Verdict` per item, in item order. Never raises: a
            malformed item gives an incorrect verdict.
        """
        out: list[Verdict | None] = [None] * len(items)
        pending: dict[tuple[Any, ...], list[int]] = {}
        for i, item in enumerate(items):
            try:
                gold, pred, at, ts, *rest = item
                if len(rest) > 2:
                    raise ValueError("too many fields")
            except Exception as e:  # malformed item
                out[i] = Verdict(False, f"incorrect: bad input ({type(e).__name__})", ())
                continue
            key, v = self._prepare(gold, pred, at, ts, *rest)
            if v is not None:
                out[i] = v
            elif key is not None:
                pending.setdefault(key, []).append(i)
        if pending:
            keys = list(pending)
            if len(keys) == 1:
                results = [self._run_worker(keys[0])]
            else:
                chunks = plan_chunks(keys, self._pool.max_workers)
                keys = [k for c in chunks for k in c]
                try:
                    results = [v for c in self._executor().map(self._run_chunk, chunks) for v in c]
                except Exception as e:  # executor shut down
                    results = [Verdict(False, f"incorrect: internal error ({type(e).__name__})", k[1]) for k in keys]
            for k, v in zip(keys, results, strict=True):
                for i in pending[k]:
                    out[i] = v
        return self._counted([v if v is not None else Verdict(False, "incorrect: internal error", ()) for v in out])

    def _run_chunk(self, keys: list[tuple[Any, ...]]) -> list[Verdict]:
        """Verify keys one after another in this thread (each under its own timeout)."""
        return [self._run_worker(k) for k in keys]

    def verify_responses(self, items: Sequence[tuple[Any, ...]]) -> list[tuple[list[str], Verdict]]:
        r"""Extract the final answers of many raw responses and verify them in parallel.

        What :meth:`verify_response` does for one response, for many at once (as
        :meth:`verify_many` spreads them over the workers).

        Args:
            items: ``(gold_answer, response, answer_type, type_sequence[, gold_unit[, problem]])``
                tuples, each as the arguments of :meth:`verify_response`.

        Returns:
            One ``(extracted answers, verdict)`` pair per item, in item order: the answers exactly as
            extracted (``[]`` when there are none) and their :class:`~studybench.verify.verdict.Verdict`.
            Never raises.
        """
        out: list[tuple[list[str], Verdict] | None] = [None] * len(items)
        todo: list[tuple[int, list[str], Item]] = []
        for i, item in enumerate(items):
            try:
                gold_answer, response, at, ts, *rest = item
                if len(rest) > 2:
                    raise ValueError("too many fields")
            except Exception as e:  # malformed item
                out[i] = ([], Verdict(False, f"incorrect: bad input ({type(e).__name__})", ()))
                continue
            pair = extract_pair(gold_answer, response, at, ts)
            if isinstance(pair, Verdict):
                out[i] = ([], pair)
                continue
            golds, preds = pair
            todo.append((i, preds, (golds, preds, at, ts, *rest)))
        for (i, preds, _), verdict in zip(todo, self.verify_many([t[2] for t in todo]), strict=True):
            out[i] = (preds, verdict)
        return [o if o is not None else ([], Verdict(False, "incorrect: internal error", ())) for o in out]

    def check_gold_parsable(self, box: str, answer_type: AnswerType | str, *, timeout: float | None = None) -> str | None:
        """Whether the verifier can read a gold box for a primitive answer type (in a sandbox worker).

        Args:
            box: one gold box content.
            answer_type: its primitive answer type (compound types: check each box with its own).
            timeout: override of the wall-clock limit in seconds.

        Returns:
            ``None`` when readable, else a short reason; exactly ``"timed out"`` when the check overran
            (that says nothing about the box: callers may check again with a longer timeout). Never raises.
        """
        try:
            t = self.timeout if timeout is None else float(timeout)
            self._ensure_warm()  # as for verdicts: a worker's start-up never counts against the check's limit
            return self._pool.call("parsable", (str(box), answer_type_key(answer_type)), t)
        except TimedOut:
            return "timed out"
        except Exception as e:
            return f"internal error ({type(e).__name__})"

    def warm(self) -> None:
        """Start all worker processes now (otherwise they start before the first one is needed)."""
        self._ensure_warm()

    @property
    def pool(self) -> SandboxPool:
        """The sandbox worker pool (for its size and kill counters)."""
        return self._pool

    def close(self) -> None:
        """Stop worker processes and threads. Idempotent; the object is unusable afterwards."""
        with self._threads_lock:
            if self._threads is not None:
                self._threads.shutdown(wait=False, cancel_futures=True)
                self._threads = None
        self._pool.close()

    def __enter__(self) -> Verifier:
        """Use the verifier as a context manager that closes it on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the verifier (:meth:`close`)."""
        self.close()


_DEFAULT: Verifier | None = None
_DEFAULT_LOCK = threading.Lock()


def default_verifier() -> Verifier:
    """The process-wide default :class:`Verifier`, started lazily and closed at exit.

    Returns:
        The shared verifier (default worker count, 5 s timeout).
    """
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Verifier()
            atexit.register(_DEFAULT.close)
        return _DEFAULT


def verify_boxes(
    gold_boxes: list[str],
    pred_boxes: list[str],
    answer_type: AnswerType | str,
    type_sequence: list[AnswerType] | str = "",
    *,
    gold_unit: str | Sequence[str | None] | None = None,
    timeout: float = 5.0,
    problem: str | None = None,
) -> Verdict:
    """Verify predicted box contents against gold box contents (docs/protocol.md section 5).

    Uses the process-wide default :class:`Verifier` (:func:`default_verifier`).

    Args:
        gold_boxes: gold box contents, one per box.
        pred_boxes: extracted predicted box contents.
        answer_type: one of the nine types.
        type_sequence: the primitive type of each box for TUP / ALT.
        gold_unit: the unit of a unitless gold (see :meth:`Verifier.verify`).
        timeout: wall-clock limit in seconds for the symbolic part.
        problem: the problem text, whose definitions are used (see :meth:`Verifier.verify`).

    Returns:
        A :class:`~studybench.verify.verdict.Verdict`. Never raises.
    """
    return default_verifier().verify(gold_boxes, pred_boxes, answer_type, type_sequence, gold_unit=gold_unit, timeout=timeout, problem=problem)


def verify_response(
    gold_answer: str,
    response: str,
    answer_type: AnswerType | str,
    type_sequence: list[AnswerType] | str = "",
    *,
    gold_unit: str | Sequence[str | None] | None = None,
    timeout: float = 5.0,
    problem: str | None = None,
) -> Verdict:
    r"""Extract the final answers from a raw response and verify them (docs/protocol.md sections 4-5).

    Uses the process-wide default :class:`Verifier` (:func:`default_verifier`); see
    :meth:`Verifier.verify_response`.

    Args:
        gold_answer: the gold string with one ``\boxed{}`` per answer.
        response: the model's raw response.
        answer_type: one of the nine types.
        type_sequence: the primitive type of each box for TUP / ALT.
        gold_unit: the unit of a unitless gold (see :meth:`Verifier.verify`).
        timeout: wall-clock limit in seconds for the symbolic part.
        problem: the problem text, whose definitions are used (see :meth:`Verifier.verify`).

    Returns:
        A :class:`~studybench.verify.verdict.Verdict`; a response without a box gives
        ``Verdict(False, "incorrect: no final answer found", ())``. Never raises.
    """
    return default_verifier().verify_response(
        gold_answer, response, answer_type, type_sequence, gold_unit=gold_unit, timeout=timeout, problem=problem
    )


def check_gold_parsable(box: str, answer_type: AnswerType | str, *, timeout: float | None = None) -> str | None:
    """Whether the verifier can read a gold box for a primitive answer type (``studybench data check``).

    Runs in a sandbox worker of the default :class:`Verifier`.

    Args:
        box: one gold box content.
        answer_type: its primitive answer type.
        timeout: override of the wall-clock limit in seconds (default: the verifier's, 5 s).

    Returns:
        ``None`` when readable, else a short reason (``"timed out"`` on an overrun). Never raises.
    """
    return default_verifier().check_gold_parsable(box, answer_type, timeout=timeout)
