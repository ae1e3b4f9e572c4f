r"""TTRL pseudo-labels: a majority vote over sampled responses, clustered by the rule verifier.

Test-time RL (TTRL) samples several responses per problem, takes the majority answer as a
pseudo-label and rewards each response 1.0 when its answer agrees with that label. Upstream TTRL
(``verl/utils/reward_score/ttrl/ttt_metrics.py``) extracts each answer with the Qwen math parser (the
last ``boxed``, else "the answer is ...", else the last number; normalised by ``strip_string``),
counts the strings with a ``Counter`` (ties: the first seen), so ``3\times10^{8}`` and ``3e8`` split
the vote, and then grades every response against the winning string with its math-equivalence
grader; a response without a box still votes (its last number, or the empty string). Here answers
are clustered by the rule verifier's equivalence (:class:`studybench.verify.Verifier`), so equal
answers in other forms (numbers within tolerance, units, symbolic rewrites) vote together, and a
response without a box abstains. :attr:`VoteResult.share` is upstream's ``majority_ratio`` (the
winning count over all responses) and :func:`label_accuracy` its ``label_accuracy``.

:func:`majority_vote` votes for one problem and returns a :class:`VoteResult`;
:func:`label_accuracy` votes for many problems and reports TTRL's label accuracy
(:class:`LabelAccuracy`). The rules:

* **Votes.** Each response's final answer is extracted as the verifier does
  (:func:`studybench.answers.extract_answers`, reasoning removed, the ``Final Answer:`` line first):
  the last box for an atomic type; for TUP / ALT the ordered tuple of up to
  ``len(type_sequence)`` boxes (a TUP packed into one box, ``\boxed{a, b}``, is split at top-level
  commas). A response with no box (empty, reasoning only, not a string) does not vote: it is an
  *abstention*.
* **Clusters.** Votes are taken in response order. Votes with the same normalised string
  (:func:`studybench.verify.reading.latex.norm_string`, slot by slot) always share a cluster. Otherwise a
  vote joins the first cluster (in order of creation) whose *representative* (the cluster's first
  vote) the verifier accepts it against, in either direction: the representative as gold and the
  vote as prediction, or the vote as gold and the representative as prediction. Either direction
  suffices because the verifier is asymmetric (its numeric tolerance is relative to the gold, and a
  unitless gold rejects a prediction with a unit, so ``3e8`` and ``3e8\,\mathrm{m/s}`` agree only
  one way round). For TUP the comparison is the verifier's TUP rule: slot by slot, in order, every
  slot must agree, so tuples differing in one slot form separate clusters. For ALT it is the ALT
  rule (any-of), so a response listing two forms of one answer joins a response giving one of them.
* **Timeouts never split a cluster silently.** A comparison or readability check that overruns the
  verifier's hard timeout (a loaded machine, not the answers) is verified again, once, with a long
  limit (:data:`RETRY_TIMEOUT_FACTOR` times the verifier's, at least :data:`RETRY_TIMEOUT_FLOOR_S`);
  the vote is then what a quiet machine gives. One that still times out counts as "not equivalent"
  (or "unreadable"), and the result says so: :attr:`VoteResult.timeouts` counts them and
  :attr:`VoteResult.complete` is ``False``, so the rewards of such a vote may differ from a quiet
  run's and should not be used as if they were final.
* **Unreadable votes** (a slot the verifier cannot read for its type, or a TUP vote with the wrong
  number of slots) are never compared by the verifier: they cluster only by normalised string.
* **The pseudo-label** is the largest cluster's representative, written as a gold answer (one
  ``\boxed{...}`` per slot, joined by ``", "``) that :func:`studybench.answers.extract_answers` and
  :func:`studybench.records.gold_boxes` read back slot for slot. Ties go to the cluster whose first
  vote came earliest (deterministic for a given response order).
* **Rewards** (TTRL's reward): 1.0 for a response whose vote is in the winning cluster, else 0.0
  (abstentions get 0.0). **Label correctness** (TTRL's label accuracy), when a gold is given:
  whether the verifier accepts the pseudo-label against the gold.

**Cost.** Each readable vote is compared (one batched verifier call) with the representatives of
the clusters made so far, so ``n`` responses cost about ``n * c`` comparisons for ``c`` clusters:
few when the samples mostly agree, but up to ``n * (n - 1)`` when every answer differs (64 samples:
about 4,000; 1,000 samples: about a million). Keep ``n`` at TTRL's usual sizes.

Symbolic work runs only in the verifier's worker processes, under its hard timeout; pass one
:class:`~studybench.verify.Verifier` to reuse it, else the process-wide default one is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from studybench.answers import extract_answers, split_top_level
from studybench.records import AnswerType, gold_boxes, parse_type_sequence
from studybench.verify import Verifier
from studybench.verify.reading.latex import norm_string
from studybench.verify.verifier import default_verifier

__all__ = [
    "RETRY_TIMEOUT_FACTOR",
    "RETRY_TIMEOUT_FLOOR_S",
    "Cluster",
    "LabelAccuracy",
    "VoteResult",
    "boxed_label",
    "label_accuracy",
    "majority_vote",
]

RETRY_TIMEOUT_FACTOR = 4.0
"""A comparison that timed out is verified again with this many times the verifier's timeout..."""
RETRY_TIMEOUT_FLOOR_S = 60.0
"""... and at least this many seconds."""
_TIMED_OUT = "incorrect: timed out"

_READ_CHECKED = frozenset(t for t in AnswerType if t.info.parsed)
"""Primitive types whose slots are checked for readability: those the verifier's parsers read (NV, EX,
EQ, IN); MC, TF, QL are string rules (the ``reading`` of :mod:`studybench.answer_types`)."""


@dataclass(frozen=True)
class Cluster:
    r"""One group of equivalent votes.

    Attributes:
        representative: the first vote's answer slots (box contents, stripped).
        label: ``representative`` as a gold answer string (:func:`boxed_label`).
        members: indices (into the responses) of the votes in the cluster, ascending.
        readable: False when the representative could not be read by the verifier (the cluster
            then only holds votes with the same normalised string).
    """

    representative: tuple[str, ...]
    label: str
    members: tuple[int, ...]
    readable: bool = True

    @property
    def size(self) -> int:
        """Number of votes in the cluster."""
        return len(self.members)


@dataclass(frozen=True)
class VoteResult:
    """The outcome of a majority vote over one problem's responses.

    Attributes:
        label: the pseudo-label (gold-style ``\\boxed{...}`` per slot), or None when nobody voted.
        slots: the pseudo-label's answer slots (``()`` when nobody voted).
        clusters: all clusters, in order of creation (of their first vote).
        winner: index of the winning cluster in ``clusters``, or None when nobody voted.
        votes: each response's extracted answer slots, None for an abstention.
        abstentions: number of responses without an extractable answer.
        share: winning cluster size / number of responses (0.0 without responses).
        vote_share: winning cluster size / number of votes (0.0 without votes).
        rewards: TTRL's reward per response: 1.0 when its vote is in the winning cluster, else 0.0.
        label_correct: whether the verifier accepts the label against the gold; None without a gold
            (False when a gold was given but nobody voted).
        timeouts: verifier comparisons and readability checks that still timed out after their retry
            with a long limit (each counted as not equivalent / unreadable); see :attr:`complete`.
        retried: comparisons and checks that timed out once and were verified again (their final
            verdict is in the vote).
    """

    label: str | None
    slots: tuple[str, ...]
    clusters: tuple[Cluster, ...]
    winner: int | None
    votes: tuple[tuple[str, ...] | None, ...]
    abstentions: int
    share: float
    vote_share: float
    rewards: tuple[float, ...]
    label_correct: bool | None = None
    timeouts: int = 0
    retried: int = 0

    @property
    def complete(self) -> bool:
        """Whether every comparison was decided (no timeout left): only then is the vote independent of load."""
        return self.timeouts == 0

    @property
    def n_responses(self) -> int:
        """Number of responses voted over (votes and abstentions)."""
        return len(self.votes)

    @property
    def n_votes(self) -> int:
        """Number of responses that voted (had an extractable answer)."""
        return len(self.votes) - self.abstentions


@dataclass(frozen=True)
class LabelAccuracy:
    """TTRL's label accuracy over many problems (:func:`label_accuracy`).

    Attributes:
        items: number of problems.
        labelled: problems with a pseudo-label (at least one vote).
        correct: problems whose pseudo-label the verifier accepts against the gold.
        accuracy: ``correct / items`` (0.0 without items); a problem without votes counts as wrong.
        mean_vote_share: mean of the winning ``vote_share`` over the labelled problems (0.0 if none).
        results: one :class:`VoteResult` per problem, in input order.
        timeouts: comparisons that still timed out after their retry, over all problems.
        incomplete: problems whose vote had such a timeout (:attr:`VoteResult.complete` is ``False``).
    """

    items: int
    labelled: int
    correct: int
    accuracy: float
    mean_vote_share: float
    results: tuple[VoteResult, ...]
    timeouts: int = 0
    incomplete: int = 0


def boxed_label(slots: Sequence[str]) -> str:
    r"""A gold-style answer string for answer slots: one ``\boxed{...}`` per slot, joined by ``", "``.

    Box contents come from :func:`studybench.answers.find_boxes`, so their braces balance and
    ``extract_answers(boxed_label(s), len(s))`` gives ``s`` back.

    Args:
        slots: box contents.

    Returns:
        The answer string (``""`` for no slots).
    """
    return ", ".join("\\boxed{" + s + "}" for s in slots)


def _types(answer_type: Any, type_sequence: Any) -> tuple[AnswerType, list[AnswerType]]:
    """Parse the answer type and type_sequence; a compound type needs a type_sequence.

    Raises:
        ValueError: an unknown type, or TUP / ALT without a type_sequence.
    """
    try:
        at = answer_type if isinstance(answer_type, AnswerType) else AnswerType(str(answer_type).strip().upper())
    except ValueError:
        raise ValueError(f"unknown answer_type {answer_type!r} (allowed: {', '.join(a.value for a in AnswerType)})") from None
    ts = parse_type_sequence(type_sequence or "")
    if at.info.compound and not ts:
        raise ValueError(f"answer_type {at.value} needs a type_sequence")
    return at, ts


def _extract(response: Any, at: AnswerType, ts: list[AnswerType]) -> tuple[tuple[str, ...] | None, bool]:
    """A response's vote (stripped slots, or None for an abstention) and whether its shape is right."""
    n = len(ts) if at.info.compound else 1
    if isinstance(response, str) and not response.isascii():
        try:
            response.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate cannot reach the verifier's workers: it becomes "?"
            response = response.encode("utf-8", "replace").decode("utf-8")
    boxes = [b.strip() for b in extract_answers(response, n)] if isinstance(response, str) else []
    if not any(boxes):
        return None, False
    if at.info.parts == "tuple" and len(boxes) != n:
        parts = [x.strip() for b in boxes for x in split_top_level(b.rstrip(".,;")) if x.strip()]
        if len(parts) != n:
            parts = [y.strip() for x in parts for y in split_top_level(x, ";") if y.strip()]
        if len(parts) != n:
            return tuple(boxes), False
        boxes = parts
    return tuple(boxes), True


def _slot_types(at: AnswerType, ts: list[AnswerType], n: int) -> list[frozenset[AnswerType]]:
    """The types each slot may be read as (ALT: any alternative's; a compound slot: EX)."""
    prim = [AnswerType.EX if t.info.compound else t for t in ts]
    if at.info.parts == "tuple":
        return [frozenset({prim[i]}) for i in range(n)]
    if at.info.parts == "alternatives":
        return [frozenset(prim)] * n
    return [frozenset({at})] * n


def _retry_timeout(v: Verifier) -> float:
    """The long limit of a retry after a timeout (seconds)."""
    base = getattr(v, "timeout", 5.0)
    return max(RETRY_TIMEOUT_FLOOR_S, RETRY_TIMEOUT_FACTOR * (base if isinstance(base, (int, float)) else 5.0))


class _Tally:
    """Timeouts met during one vote: ``retried`` (then decided) and ``left`` (still timed out)."""

    def __init__(self) -> None:
        self.retried = 0
        self.left = 0


def _verify_settled(v: Verifier, items: list[tuple[Any, ...]], tally: _Tally) -> list[Any]:
    """``verify_many``, then each comparison that timed out once more with a long limit."""
    verdicts = list(v.verify_many(items)) if items else []
    for k, x in enumerate(verdicts):
        if x.reason == _TIMED_OUT:
            tally.retried += 1
            golds, preds, at, ts, unit = items[k]
            verdicts[k] = v.verify(golds, preds, at, ts, gold_unit=unit, timeout=_retry_timeout(v))
            tally.left += verdicts[k].reason == _TIMED_OUT
    return verdicts


def _parsable(v: Verifier, box: str, t: AnswerType, tally: _Tally) -> bool:
    """Whether the verifier reads ``box`` as type ``t``; a check that timed out is made once more with a long limit."""
    why = v.check_gold_parsable(box, t)
    if why == "timed out":
        tally.retried += 1
        why = v.check_gold_parsable(box, t, timeout=_retry_timeout(v))
        tally.left += why == "timed out"
    return why is None


def _readable(
    v: Verifier, slots: tuple[str, ...], at: AnswerType, ts: list[AnswerType], memo: dict[tuple[str, AnswerType], bool], tally: _Tally
) -> bool:
    for s, types in zip(slots, _slot_types(at, ts, len(slots)), strict=True):
        checked = [t for t in types if t in _READ_CHECKED]
        if not checked:
            continue
        ok = False
        for t in sorted(checked, key=lambda x: x.value):
            if (s, t) not in memo:
                memo[(s, t)] = _parsable(v, s, t, tally)
            if memo[(s, t)]:
                ok = True
                break
        if not ok:
            return False
    return True


def majority_vote(
    responses: Sequence[Any],
    answer_type: AnswerType | str,
    type_sequence: Sequence[AnswerType] | str = "",
    *,
    gold: str | None = None,
    gold_unit: str | Sequence[str | None] | None = None,
    verifier: Verifier | None = None,
) -> VoteResult:
    r"""TTRL's majority vote over one problem's responses, clustered by the rule verifier.

    See the module docstring for how votes are extracted and clustered, how ties are broken and
    what the rewards are.

    Args:
        responses: the sampled responses (raw model text; anything that is not a string abstains).
        answer_type: the problem's answer type (NV EX EQ TUP IN MC TF QL ALT).
        type_sequence: the slot types for TUP / ALT (comma string or list).
        gold: the gold answer (``\boxed{}`` per slot), for :attr:`VoteResult.label_correct`.
        gold_unit: the unit of a unitless gold when the source states it; used in every comparison
            (see :meth:`studybench.verify.Verifier.verify`).
        verifier: the verifier to use (reused; not closed); default: the process-wide one.

    Returns:
        The :class:`VoteResult`.

    Raises:
        ValueError: an unknown answer type, or TUP / ALT without a ``type_sequence``.
    """
    at, ts = _types(answer_type, type_sequence)
    v = verifier if verifier is not None else default_verifier()
    votes: list[tuple[str, ...] | None] = []
    shapes: list[bool] = []
    for r in responses:
        vote, ok = _extract(r, at, ts)
        votes.append(vote)
        shapes.append(ok)

    reps: list[tuple[str, ...]] = []
    rep_readable: list[bool] = []
    members: list[list[int]] = []
    by_norm: dict[tuple[str, ...], int] = {}
    parse_memo: dict[tuple[str, AnswerType], bool] = {}
    tally = _Tally()
    for i, vote in enumerate(votes):
        if vote is None:
            continue
        key = tuple(norm_string(s) for s in vote)
        if key in by_norm:
            members[by_norm[key]].append(i)
            continue
        readable = shapes[i] and _readable(v, vote, at, ts, parse_memo, tally)
        found = None
        if readable:
            cand = [c for c, ok in enumerate(rep_readable) if ok]
            items: list[tuple[Any, ...]] = []
            for c in cand:
                items.append((list(reps[c]), list(vote), at, ts, gold_unit))
                items.append((list(vote), list(reps[c]), at, ts, gold_unit))
            verdicts = _verify_settled(v, items, tally)
            for k, c in enumerate(cand):
                if verdicts[2 * k].correct or verdicts[2 * k + 1].correct:
                    found = c
                    break
        if found is None:
            found = len(reps)
            reps.append(vote)
            rep_readable.append(readable)
            members.append([])
        members[found].append(i)
        by_norm[key] = found

    clusters = tuple(
        Cluster(representative=r, label=boxed_label(r), members=tuple(m), readable=ok)
        for r, m, ok in zip(reps, members, rep_readable, strict=True)
    )
    n_votes = sum(1 for x in votes if x is not None)
    winner = max(range(len(clusters)), key=lambda c: (clusters[c].size, -c)) if clusters else None
    win = clusters[winner] if winner is not None else None
    won = set(win.members) if win else set()
    label_correct = None
    if gold is not None:
        label_correct = False
        if win is not None:
            golds = gold_boxes(gold, at, ts) if isinstance(gold, str) else []
            if golds:
                verdict = _verify_settled(v, [(golds, list(win.representative), at, ts, gold_unit)], tally)[0]
                label_correct = verdict.correct
    return VoteResult(
        label=win.label if win else None,
        slots=win.representative if win else (),
        clusters=clusters,
        winner=winner,
        votes=tuple(votes),
        abstentions=len(votes) - n_votes,
        share=win.size / len(votes) if win else 0.0,
        vote_share=win.size / n_votes if win else 0.0,
        rewards=tuple(1.0 if i in won else 0.0 for i in range(len(votes))),
        label_correct=label_correct,
        timeouts=tally.left,
        retried=tally.retried,
    )


def label_accuracy(items: Iterable[Sequence[Any]], *, verifier: Verifier | None = None) -> LabelAccuracy:
    r"""TTRL's label accuracy: how often the majority-vote pseudo-label matches the gold.

    Args:
        items: one ``(responses, answer_type, type_sequence, gold[, gold_unit])`` per problem
            (as the arguments of :func:`majority_vote`).
        verifier: the verifier to use for all problems; default: the process-wide one.

    Returns:
        The :class:`LabelAccuracy` with one :class:`VoteResult` per problem.

    Raises:
        ValueError: an item of the wrong length, an unknown answer type, or TUP / ALT without a
            ``type_sequence`` (the message names the item's index).
    """
    v = verifier if verifier is not None else default_verifier()
    results: list[VoteResult] = []
    for k, item in enumerate(items):
        if len(item) not in (4, 5):
            raise ValueError(f"label_accuracy item {k}: expected (responses, answer_type, type_sequence, gold[, gold_unit]), got {len(item)} fields")
        responses, at, ts, gold, *rest = item
        try:
            results.append(majority_vote(responses, at, ts, gold=gold, gold_unit=rest[0] if rest else None, verifier=v))
        except ValueError as e:
            raise ValueError(f"label_accuracy item {k}: {e}") from None
    labelled = [r for r in results if r.label is not None]
    correct = sum(1 for r in results if r.label_correct)
    return LabelAccuracy(
        items=len(results),
        labelled=len(labelled),
        correct=correct,
        accuracy=correct / len(results) if results else 0.0,
        mean_vote_share=sum(r.vote_share for r in labelled) / len(labelled) if labelled else 0.0,
        results=tuple(results),
        timeouts=sum(r.timeouts for r in results),
        incomplete=sum(1 for r in results if not r.complete),
    )
