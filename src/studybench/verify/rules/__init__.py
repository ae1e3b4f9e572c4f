"""The rule registry: one rule per answer type, and the dispatch of compound answers (docs/protocol.md 5).

:data:`RULES` maps every :class:`~studybench.records.AnswerType` to its :class:`Rule` (one hop from a type
to the code that decides it: the ``RULE`` of the module its row of :mod:`studybench.answer_types` names);
:data:`COMPOUND_RULES` maps TUP and ALT to the functions that combine their slots. Every rule has two tiers that share the same dispatch
(:func:`compare_boxes`):

* the fast tier (:func:`fast_slot`, :func:`fast_verdict`): cheap, in-process, string-level -
  normalised string equality for every type, then :attr:`Rule.fast` (MC letters, TF synonyms, QL
  normalised text). It decides or says "undecided";
* the full tier (:func:`full_slot`, :func:`full_verdict`): the fast tier, then :attr:`Rule.full`, which
  may call SymPy and pint and runs inside a sandbox worker (:mod:`studybench.verify.sandbox`) under a
  hard timeout. :func:`full_verdict` makes the :class:`Context` of the verification (the registry, and
  on a second pass the item's definitions) and hands it to every rule.

==== ======================================= =================================================
type rule                                    notes
==== ======================================= =================================================
NV   :func:`.nv.nv_rule`                     takes the gold's unit hint; symbolic golds: EX
EX   :func:`.ex.ex_rule`                     takes the gold's unit hint; reactions and decays
EQ   :func:`.eq.eq_rule`                     sides that are no equations: EX
IN   :func:`.in_.in_rule`
MC   :func:`.mc.mc_rule`                     fast tier only (always decides)
TF   :func:`.tf.tf_rule`                     fast tier only (always decides)
QL   :func:`.ql.ql_rule`                     a formula-like gold: :func:`.ql.ql_full_rule` (EX)
TUP  :func:`.tup.tup_rule`                   slot by slot; a TUP-typed slot: whole box, EX
ALT  :func:`.alt.alt_rule`                   any of; an ALT-typed slot: whole box, EX
==== ======================================= =================================================

A rule module never imports another: a rule that falls back on another type's rule asks the
:class:`Context` for it (:meth:`Context.full`), and helpers two rules share live in
:mod:`studybench.verify.rules._shared` or in :mod:`studybench.verify.comparison`. Atomic types with
several gold boxes are matched order-free when the boxes form a set (equations, labelled values,
states), else in order (:func:`compare_boxes`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from typing import Any

from studybench.records import AnswerType, parse_type_sequence
from studybench.verify.comparison.parts import match_in_order, match_unordered, regroup, set_like
from studybench.verify.physics.definitions import (
    Definition,
    Definitions,
    gold_box_definitions,
    may_substitute,
)
from studybench.verify.physics.units import split_hints
from studybench.verify.reading.conversion import MAX_SYMBOLIC_LEN
from studybench.verify.reading.latex import norm_string
from studybench.verify.rules._shared import CompoundRule, Context, Rule
from studybench.verify.verdict import RuleResult, SlotRule, Verdict

__all__ = [
    "COMPOUND_RULES",
    "CompoundRule",
    "Context",
    "RULES",
    "Rule",
    "check_gold_parsable_local",
    "compare_boxes",
    "fast_slot",
    "fast_verdict",
    "full_slot",
    "full_verdict",
    "normalise_types",
    "to_verdict",
]


def normalise_types(
    answer_type: AnswerType | str, type_sequence: Sequence[AnswerType] | str | None
) -> tuple[AnswerType, list[AnswerType]]:
    """Parse an answer type and a type sequence.

    Args:
        answer_type: an :class:`~studybench.records.AnswerType` or its name (any case).
        type_sequence: a comma string (``"EQ,NV"``), a list of types or names, or ``None``.

    Returns:
        ``(answer_type, type_sequence)`` as answer types.

    Raises:
        ValueError: an unknown type.
    """
    at = answer_type if isinstance(answer_type, AnswerType) else AnswerType(str(answer_type).strip().upper())
    if isinstance(type_sequence, str) or type_sequence is None:
        ts = parse_type_sequence(type_sequence or "")
    else:
        ts = parse_type_sequence([t.value if isinstance(t, AnswerType) else str(t) for t in type_sequence])
    return at, ts


# ---------------------------------------------------------------------------------------------
# the registry

def _rule_of(t: AnswerType) -> Rule:
    """The ``RULE`` of the module the answer type table names for ``t`` (``studybench.answer_types``)."""
    module = importlib.import_module(f"{__name__}.{t.info.rule}")
    rule = getattr(module, "RULE", None)
    if not isinstance(rule, Rule):
        raise TypeError(f"{module.__name__} defines no RULE for {t.value}")
    if (rule.compound is not None) != t.info.compound:
        raise TypeError(f"{module.__name__}.RULE: compound rule and the table's parts disagree for {t.value}")
    return rule


RULES: dict[AnswerType, Rule] = {t: _rule_of(t) for t in AnswerType}
"""The rule of every answer type, for one gold box against one predicted box (one module per row of the
answer type table)."""

COMPOUND_RULES: dict[AnswerType, CompoundRule] = {t: r.compound for t, r in RULES.items() if r.compound is not None}
"""The compound rule of TUP and ALT."""


# ---------------------------------------------------------------------------------------------
# one slot: the two tiers

_SYM = r"(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?"
_CALL_FORM = re.compile(rf"(?<![A-Za-z\\])({_SYM})\s*(?:\\left\s*)?\(\s*({_SYM})\s*(?:\\right\s*)?\)")
_NOT_SYMBOLS = frozenset({"\\sin", "\\cos", "\\tan", "\\ln", "\\log", "\\exp", "\\sinh", "\\cosh", "\\tanh",
                          "\\arcsin", "\\arccos", "\\arctan", "\\sqrt", "\\left", "\\right", "\\cdot", "\\times"})


def _call_forms(text: str) -> set[tuple[str, str]]:
    """Every ``A(B)`` of two single symbols (a function of a variable, or a product), braces removed."""
    out = set()
    for m in _CALL_FORM.finditer(text):
        a, b = (x.replace("{", "").replace("}", "") for x in m.groups())
        if a not in _NOT_SYMBOLS and b not in _NOT_SYMBOLS and a != b:
            out.add((a, b))
    return out


def swapped_call(gold: str, pred: str) -> str | None:
    r"""A function and its variable swapped: the gold writes ``n(x)``, the prediction ``x(n)``.

    The verifier reads ``n(x)`` as a product (it cannot know that ``n`` is a function), which makes
    ``x(n)`` equal to it; but a careful grader reads ``n(x)`` as "n as a function of x" and ``x(n)`` as a
    different statement. Found by the mutation sweep (``bench/verify_mutations.py``).

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        The reason when ``pred`` writes ``B(A)`` where ``gold`` writes ``A(B)`` (and never ``B(A)``);
        ``None`` otherwise.
    """
    g = _call_forms(gold)
    if not g:
        return None
    for a, b in sorted(_call_forms(pred)):
        if (b, a) in g and (a, b) not in g:
            return f"the prediction writes {a}({b}) where the gold writes {b}({a})"
    return None



def fast_slot(gold: str, pred: str, t: AnswerType, hint: str | None = None) -> RuleResult:
    """Cheap in-process decision for one gold box against one predicted box.

    An empty prediction is wrong, equal normalised strings are right (every type), then the type's
    :attr:`Rule.fast` decides when it can.

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        t: the box's answer type.
        hint: the gold's unit (not needed at this tier).

    Returns:
        ``(decision, reason)``; decision ``None`` when symbolic or numeric work is needed.
    """
    if not pred.strip():
        return False, "empty answer"
    if norm_string(gold) == norm_string(pred):
        return True, "same normalised string"
    fast = RULES[t].fast
    return fast(gold, pred) if fast is not None else (None, "")


def full_slot(gold: str, pred: str, t: AnswerType, hint: str | None, ctx: Context) -> RuleResult:
    """Complete decision for one gold box against one predicted box (worker side).

    The fast tier first, then the type's :attr:`Rule.full`. Never raises: internal errors give
    ``(False, reason)``.

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        t: the box's answer type.
        hint: the unit of a unitless gold (:func:`studybench.verify.physics.units.split_hints`); the
            rules that read units use it (NV, EX).
        ctx: the verification's context (:func:`full_verdict`).

    Returns:
        ``(decision, reason)``; ``None`` only when no rule could decide.
    """
    try:
        ok, why = fast_slot(gold, pred, t)
        if ok is not None:
            return ok, why
        swapped = swapped_call(gold, pred)
        if swapped is not None:
            return False, swapped
        if len(pred) > MAX_SYMBOLIC_LEN:
            return False, "answer too long for symbolic comparison"
        rule = ctx.rules[t]
        if rule.full is None:
            return False, "no rule for this type"
        return rule.full(gold, pred, hint, ctx)
    except RecursionError:
        return False, "expression too deep"
    except Exception as e:  # never let a parser error escape
        return False, f"internal error ({type(e).__name__})"


# ---------------------------------------------------------------------------------------------
# all boxes: compound and atomic dispatch

def compare_boxes(
    gold_boxes: list[str],
    pred_boxes: list[str],
    at: AnswerType,
    ts: list[AnswerType],
    slot: SlotRule,
    hints: list[str | None] | None = None,
) -> RuleResult:
    """Compare all boxes of one answer: dispatch on the answer type and combine the slots.

    TUP and ALT go to :data:`COMPOUND_RULES`. An atomic type with one gold box compares it with the
    last predicted box (several different predicted boxes must all be right); with several gold boxes
    the predictions are regrouped to as many boxes and matched order-free when both sides form a set
    (:func:`studybench.verify.comparison.parts.set_like`; always for EQ), else in order.

    Args:
        gold_boxes: the gold box contents.
        pred_boxes: the predicted box contents (non-strings are ignored).
        at: the answer type.
        ts: the ``type_sequence`` (TUP / ALT).
        slot: compares one gold box with one predicted box (:func:`fast_slot` or :func:`full_slot`).
        hints: one unit hint per gold box (:func:`studybench.verify.physics.units.split_hints`).

    Returns:
        ``(decision, reason)``; ``None`` when undecided at this tier.
    """
    golds = [g for g in gold_boxes]
    hs = hints if hints is not None and len(hints) == len(golds) else [None] * len(golds)
    preds = [p for p in pred_boxes if isinstance(p, str)]
    if not golds:
        return False, "no gold answer"
    if not preds:
        return False, "no final answer found"
    compound = COMPOUND_RULES.get(at)
    if compound is not None:
        return compound(golds, preds, ts, slot, hs)
    if len(golds) == 1:
        if len({norm_string(p) for p in preds}) > 1:
            # several boxes for one slot: accepted only when every one of them is right (3 and 3.0)
            res = [slot(golds[0], p, at, hs[0]) for p in preds]
            if all(r[0] is True for r in res):
                return True, f"all {len(preds)} answers match"
            if all(r[0] is not False for r in res):
                return None, ""
            return False, f"{len(preds)} different answers for one slot"
        return slot(golds[0], preds[-1], at, hs[0])
    preds = regroup(preds, len(golds))
    idx = [str(i) for i in range(len(golds))]  # by position: equal gold strings may carry different hints

    def by_index(i: str, p: str) -> RuleResult:
        return slot(golds[int(i)], p, at, hs[int(i)])

    if at is AnswerType.EQ or (set_like(golds) and set_like(preds)):
        return match_unordered(idx, preds, by_index)
    return match_in_order(idx, preds, by_index)


# ---------------------------------------------------------------------------------------------
# verdicts

def to_verdict(res: RuleResult, preds: list[str]) -> Verdict:
    """The :class:`~studybench.verify.verdict.Verdict` of a decided rule result.

    Args:
        res: ``(decision, reason)``.
        preds: the predicted boxes that were compared.

    Returns:
        ``Verdict(decision, "correct: reason" or "incorrect: reason", preds)``.
    """
    ok, why = res
    word = "correct" if ok else "incorrect"
    return Verdict(bool(ok), f"{word}: {why}" if why else word, tuple(preds))


def fast_verdict(
    gold_boxes: list[str], pred_boxes: list[str], answer_type: AnswerType | str, type_sequence: Any = "", gold_unit: Any = None
) -> Verdict | None:
    """The in-process fast tier for one answer (:func:`compare_boxes` with :func:`fast_slot`).

    Args:
        gold_boxes: the gold box contents.
        pred_boxes: the predicted box contents.
        answer_type: one of the nine types.
        type_sequence: the primitive type of each box for TUP / ALT.
        gold_unit: the unit hint (:func:`studybench.verify.physics.units.split_hints`).

    Returns:
        A :class:`~studybench.verify.verdict.Verdict` when string-level rules decide, else ``None``.
        Never raises (bad types give an incorrect verdict).
    """
    try:
        at, ts = normalise_types(answer_type, type_sequence)
        preds = [p for p in pred_boxes if isinstance(p, str)]
        res = compare_boxes(list(gold_boxes), preds, at, ts, fast_slot, split_hints(gold_unit, len(gold_boxes)))
    except Exception as e:  # malformed types or inputs
        return Verdict(False, f"incorrect: bad input ({type(e).__name__})", tuple(p for p in pred_boxes if isinstance(p, str)))
    if res[0] is None:
        return None
    return to_verdict(res, preds)


def full_verdict(
    gold_boxes: list[str],
    pred_boxes: list[str],
    answer_type: AnswerType | str,
    type_sequence: Any = "",
    gold_unit: Any = None,
    definitions: Sequence[Definition] = (),
) -> Verdict:
    """The complete verdict for one answer (:func:`compare_boxes` with :func:`full_slot`); worker side.

    A first pass without definitions; when it is incorrect and the item has definitions
    (:func:`studybench.verify.physics.definitions.extract_definitions`) that may decide
    (:func:`~studybench.verify.physics.definitions.may_substitute`), a second pass with them, the gold
    boxes without their trailing definition clauses: its verdict counts only when it is correct and
    used a definition, and its reason names them (``"... (using tau = RC from the problem)"``). Each
    pass makes its own :class:`Context`; nothing outlives the call.

    Args:
        gold_boxes: the gold box contents.
        pred_boxes: the predicted box contents.
        answer_type: one of the nine types.
        type_sequence: the primitive type of each box for TUP / ALT.
        gold_unit: the unit hint (:func:`studybench.verify.physics.units.split_hints`).
        definitions: the item's ``(symbol, expression, origin)`` definitions.

    Returns:
        A :class:`~studybench.verify.verdict.Verdict`; still undecided is incorrect ("undecided").
    """
    plain = _full_pass(gold_boxes, pred_boxes, answer_type, type_sequence, gold_unit, None)
    defs = [tuple(d) for d in definitions]
    if plain.correct or not defs or not may_substitute(pred_boxes, defs):  # type: ignore[arg-type]
        return plain
    golds = [gold_box_definitions(g)[0] if isinstance(g, str) else g for g in gold_boxes]
    active = Definitions(defs)  # type: ignore[arg-type]
    v = _full_pass(golds, pred_boxes, answer_type, type_sequence, gold_unit, active)
    if not v.correct or not active.used:
        return plain
    return Verdict(True, f"{v.reason} (using {', '.join(active.used)})", v.extracted)


def _full_pass(
    gold_boxes: list[str], pred_boxes: list[str], answer_type: AnswerType | str, type_sequence: Any, gold_unit: Any,
    definitions: Definitions | None,
) -> Verdict:
    """One pass of the full tier over all boxes, in a :class:`Context` of its own. Never raises."""
    preds = [p for p in pred_boxes if isinstance(p, str)]
    ctx = Context(RULES, definitions)

    def slot(gold: str, pred: str, t: AnswerType, hint: str | None) -> RuleResult:
        return full_slot(gold, pred, t, hint, ctx)

    try:
        at, ts = normalise_types(answer_type, type_sequence)
        res = compare_boxes(list(gold_boxes), preds, at, ts, slot, split_hints(gold_unit, len(gold_boxes)))
    except Exception as e:  # pragma: no cover - compare_boxes/full_slot already guard
        return Verdict(False, f"incorrect: internal error ({type(e).__name__})", tuple(preds))
    if res[0] is None:
        res = (False, "undecided")
    return to_verdict(res, preds)


def check_gold_parsable_local(box: str, answer_type: AnswerType | str) -> str | None:
    """Whether the full tier can read a gold box for a primitive type (worker side).

    Args:
        box: one gold box content.
        answer_type: its primitive answer type; compound types are checked slot by slot by the caller.

    Returns:
        ``None`` when parsable, else a short reason (:attr:`Rule.gold_check`). Never raises.
    """
    try:
        at, _ = normalise_types(answer_type, "")
        if not box.strip():
            return "empty box"
        return RULES[at].gold_check(box)
    except Exception as e:  # never raise
        return f"internal error ({type(e).__name__})"
