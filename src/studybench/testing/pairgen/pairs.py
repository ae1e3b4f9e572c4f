r"""The generator: every transformation applied to every gold, as labelled (gold, response) pairs.

:func:`generate_pairs` walks the golds in order and the transformations in table order; for each
(gold, transformation) it tries the gold's boxes of the right type in a seeded order and keeps at
most ``cap`` candidates. A pair replaces one box of the gold (an ALT answer is the one changed
alternative) and wraps the boxes as a model would: a line of reasoning, then ``Final Answer:
\boxed{...}``. Seeded and deterministic: the same golds, seed and cap give the same pairs in the
same order. A gold it cannot read is skipped with a count (:class:`GenStats`); nothing raises.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from random import Random
from typing import Any

from studybench.answers import brace_balance_error
from studybench.testing.pairgen.base import Candidate, Slot, Transformation, norm_ws
from studybench.testing.pairgen.forms import FORMS
from studybench.testing.pairgen.golds import Gold, slot_types
from studybench.testing.pairgen.numbers import NUMBERS
from studybench.testing.pairgen.symtrans import SYMBOLIC
from studybench.testing.pairgen.text import TEXT

__all__ = ["TRANSFORMATIONS", "GenStats", "Pair", "generate_pairs", "subsample", "wrap_response"]


def _merge(groups: Iterable[Sequence[Transformation]]) -> dict[str, Transformation]:
    """One transformation per name; implementations that share a name (``miss:coeff`` on a SymPy
    form and on a written number) are tried one after the other."""
    out: dict[str, Transformation] = {}
    for group in groups:
        for t in group:
            old = out.get(t.name)
            if old is None:
                out[t.name] = t
                continue

            def both(slot: Slot, rng: Random, a: Transformation = old, b: Transformation = t) -> list[Candidate]:
                first: list[Candidate] = []
                if slot.slot_type in a.slot_types:
                    try:
                        first = a.apply(slot, rng)
                    except Exception:  # noqa: BLE001 - the other implementation may still apply
                        first = []
                return first + (b.apply(slot, rng) if slot.slot_type in b.slot_types else [])

            out[t.name] = Transformation(t.name, old.family, old.label, old.slot_types | t.slot_types, both, old.doc)
    return out


_BASE = _merge([SYMBOLIC, NUMBERS, TEXT, FORMS])

_COMBO_FIRST = ("sym:sympy", "sym:expand", "sym:factor", "sym:together", "sym:cancel", "sym:trig", "sym:exp", "sym:root",
                "sym:decimal-coeff", "ex:drop-lhs", "eq:swap", "eq:scale", "eq:solve", "eq:clear", "num:sci", "num:e",
                "num:more-digits", "num:fraction", "unit:prefix", "unit:equivalent", "unit:angle")
_COMBO_MISS = ("miss:coeff", "miss:exponent", "miss:sign", "miss:swap-vars", "miss:drop-term", "miss:tolerance",
               "miss:unit-prefix")
_COMBO_SECOND = ("print:dfrac", "print:slash", "print:mul", "print:left-right", "print:spacing", "print:braces",
                 "print:exp", "words:approx", "words:about")


def _combo(firsts: Sequence[str], seconds: Sequence[str]) -> Any:
    """Two transformations in a row: one of ``firsts``, then one of ``seconds`` on its result (seeded choices)."""

    def apply(slot: Slot, rng: Random) -> list[Candidate]:
        order1 = [n for n in firsts if slot.slot_type in _BASE[n].slot_types]
        rng.shuffle(order1)
        for n1 in order1[:6]:
            c1 = next(iter(_BASE[n1].apply(slot, rng)), None)
            if c1 is None:
                continue
            mid = Slot(slot.gold, slot.index, c1.box, slot.slot_type, slot.unit)
            order2 = [n for n in seconds if slot.slot_type in _BASE[n].slot_types]
            rng.shuffle(order2)
            for n2 in order2:
                c2 = next(iter(_BASE[n2].apply(mid, rng)), None)
                if c2 is not None:
                    return [Candidate(c2.box, c1.check, f"{n1} then {n2}")]
        return []

    return apply


_MATH = frozenset({"NV", "EX", "EQ"})
TRANSFORMATIONS: dict[str, Transformation] = {
    **_BASE,
    "combo:equivalent": Transformation("combo:equivalent", "combo", True, _MATH, _combo(_COMBO_FIRST, _COMBO_SECOND),
                                       "an equivalent form, then a print style or words"),
    "combo:miss": Transformation("combo:miss", "near-miss", False, _MATH, _combo(_COMBO_MISS, _COMBO_SECOND),
                                 "a near miss, then a print style or words"),
}
"""Every transformation by name, in table order (equivalent forms, then near misses, then the combinations)."""

_INTROS = (
    "Setting up the relevant relations and solving step by step gives the result below.",
    "Using the given quantities and simplifying, we obtain the answer.",
    "We apply the governing equation, eliminate the unknowns and simplify.",
    "Combining the equations above and doing the algebra, the result follows.",
    "Substituting the known values and evaluating carefully:",
    "From the conservation law and the boundary conditions we find the answer.",
)


def wrap_response(boxes: Sequence[str], rng: Random) -> str:
    r"""A response as a model writes it: one line of reasoning, then ``Final Answer: \boxed{..}, \boxed{..}``."""
    return f"{rng.choice(_INTROS)}\n\nFinal Answer: " + ", ".join(f"\\boxed{{{b}}}" for b in boxes)


@dataclass(frozen=True)
class Pair:
    """One labelled (gold, response) pair.

    Attributes:
        gold_id: the gold's id (:attr:`studybench.testing.pairgen.golds.Gold.gold_id`).
        source: where the gold comes from.
        gold: the gold string (``\\boxed{}`` per answer).
        answer_type: as the gold's.
        type_sequence: as the gold's.
        gold_unit: the unit hint the verifier takes, or ``None``.
        response: the generated response.
        label: ``True`` when the response is right by construction.
        transformation: the transformation's name.
        family: its class.
        slot: the index of the changed box.
        slot_type: that box's primitive type.
        gold_box: the gold box that was changed.
        pred_box: what it became.
        note: what the transformation did.
        check: how the label was made certain (:attr:`Candidate.check`; not written to JSON).
    """

    gold_id: str
    source: str
    gold: str
    answer_type: str
    type_sequence: str
    gold_unit: str | None
    response: str
    label: bool
    transformation: str
    family: str
    slot: int
    slot_type: str
    gold_box: str
    pred_box: str
    note: str = ""
    check: tuple[Any, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The pair as a JSON object (the dev-pair fields ``gold``, ``response``, ``answer_type``,
        ``type_sequence``, ``gold_unit``, ``label``, so that ``studybench verify-file`` reads it)."""
        return {"gold_id": self.gold_id, "source": self.source, "transformation": self.transformation,
                "family": self.family, "label": self.label, "answer_type": self.answer_type,
                "type_sequence": self.type_sequence, "gold": self.gold, "gold_unit": self.gold_unit,
                "response": self.response, "slot": self.slot, "slot_type": self.slot_type,
                "gold_box": self.gold_box, "pred_box": self.pred_box, "note": self.note}

    def item(self) -> tuple[Any, ...]:
        """``(gold, response, answer_type, type_sequence, gold_unit)`` for :meth:`studybench.verify.Verifier.verify_responses`."""
        return (self.gold, self.response, self.answer_type, self.type_sequence, self.gold_unit)


@dataclass
class GenStats:
    """What the generator did.

    Attributes:
        golds: golds seen.
        slots: boxes seen, by type.
        unreadable: boxes of a math type (NV, EX, EQ) that neither SymPy nor the number reader read.
        pairs: pairs made, by transformation.
        no_slot: golds without a box of the transformation's types, by transformation.
        not_applicable: golds with such boxes where it applied to none, by transformation.
        failed: candidates lost to an exception or time limit, by ``(transformation, exception)``.
        rejected: candidates dropped (unbalanced braces, equal to the gold, ambiguous ALT), by reason.
    """

    golds: int = 0
    slots: Counter[str] = field(default_factory=Counter)
    unreadable: Counter[str] = field(default_factory=Counter)
    pairs: Counter[str] = field(default_factory=Counter)
    no_slot: Counter[str] = field(default_factory=Counter)
    not_applicable: Counter[str] = field(default_factory=Counter)
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)


def _alt_distinct(gold_slots: list[Slot], slot: Slot, cand: Candidate) -> bool:
    """A near miss of one ALT alternative must differ clearly from every other alternative.

    Only numbers are compared (the alternatives of a symbolic ALT are read with separate alias tables);
    a symbolic near miss of an ALT with other math alternatives is dropped as ambiguous.
    """
    others = [s for s in gold_slots if s.index != slot.index]
    if not others:
        return True
    if not cand.check or cand.check[0] != "value":
        return all(s.slot_type in ("QL", "TF", "MC") for s in others) and slot.slot_type not in ("QL", "TF", "MC")
    new = cand.check[2]
    for s in others:
        n = s.number
        if n is None or n.unit_text != (slot.number.unit_text if slot.number else None):
            return False
        if abs(n.value - new) <= 0.05 * max(abs(n.value), abs(new)):
            return False
    return True


def _make(g: Gold, slot: Slot, cand: Candidate, t: Transformation, rng: Random) -> Pair:
    if g.answer_type == "ALT":
        boxes = [cand.box]
    else:
        boxes = list(g.boxes)
        boxes[slot.index] = cand.box
    return Pair(gold_id=g.gold_id, source=g.source, gold=g.answer, answer_type=g.answer_type,
                type_sequence=g.type_sequence, gold_unit=g.gold_unit, response=wrap_response(boxes, rng),
                label=t.label, transformation=t.name, family=t.family, slot=slot.index, slot_type=slot.slot_type,
                gold_box=slot.box, pred_box=cand.box, note=cand.note, check=cand.check)


def generate_pairs(
    golds: Iterable[Gold],
    *,
    seed: int = 0,
    cap: int = 1,
    transformations: Sequence[str] | None = None,
    stats: GenStats | None = None,
) -> list[Pair]:
    """Apply every transformation to every gold.

    Args:
        golds: the golds (:func:`studybench.testing.pairgen.golds.load_golds`).
        seed: the seed of every random choice (each (gold, transformation) gets its own stream).
        cap: at most this many pairs per gold and transformation.
        transformations: names to run (default: all of :data:`TRANSFORMATIONS`, in table order).
        stats: filled with counts when given.

    Returns:
        The pairs, in gold order then table order.

    Raises:
        KeyError: an unknown transformation name.
    """
    st = stats if stats is not None else GenStats()
    chosen = [TRANSFORMATIONS[n] for n in (transformations or list(TRANSFORMATIONS))]
    out: list[Pair] = []
    for g in golds:
        st.golds += 1
        types = slot_types(g)
        units = g.units if len(g.units) == len(g.boxes) else (None,) * len(g.boxes)
        slots = [Slot(g, i, b, t, u) for i, (b, t, u) in enumerate(zip(g.boxes, types, units, strict=True))]
        for s in slots:
            st.slots[s.slot_type] += 1
        for t in chosen:
            elig = [s for s in slots if s.slot_type in t.slot_types]
            if not elig:
                st.no_slot[t.name] += 1
                continue
            rng = Random(int.from_bytes(hashlib.sha256(f"{seed}|{g.gold_id}|{t.name}".encode()).digest()[:8], "big"))
            rng.shuffle(elig)
            made: set[str] = set()
            for s in elig:
                if len(made) >= cap:
                    break
                try:
                    cands = t.apply(s, rng)
                except Exception as e:  # noqa: BLE001 - counted, the gold is skipped for this transformation
                    st.failed[(t.name, type(e).__name__)] += 1
                    continue
                for c in cands:
                    if len(made) >= cap:
                        break
                    why = None
                    if brace_balance_error(c.box):
                        why = f"unbalanced braces ({t.name})"
                    elif norm_ws(c.box) == norm_ws(s.box) and t.name != "id:gold":
                        why = "equal to the gold"
                    elif norm_ws(c.box) in made:
                        why = "duplicate"
                    elif g.answer_type == "ALT" and not t.label and not _alt_distinct(slots, s, c):
                        why = "ALT near miss not clearly apart from another alternative"
                    if why:
                        st.rejected[why] += 1
                        continue
                    made.add(norm_ws(c.box))
                    out.append(_make(g, s, c, t, rng))
                    st.pairs[t.name] += 1
            if not made:
                st.not_applicable[t.name] += 1
        for s in slots:
            if s.slot_type in ("NV", "EX", "EQ") and s.reading is None and s.number is None:
                st.unreadable[s.slot_type] += 1
    return out


_HINTS: dict[str, tuple[str, str]] = {
    # name: (regex on a box, slot types); golds that the rarer transformations apply to
    "square": (r"=\s*[^=]*\\sqrt", "EQ"),
    "trig": (r"\\(?:tan|cot|sec|csc)(?![a-z])|\\sin.*\\cos", "EX,EQ"),
    "exp": (r"e\^\{\s*-", "EX,EQ"),
    "root": (r"\^\s*\{?\s*-?\s*\d\s*/\s*\d|\\frac\{\d\}\{\d\}\}", "EX,EQ"),
    "thousands": (r"^\s*\d{4,}\s*$", "NV"),
    "angle": (r"\\circ", "NV"),
    "four digits": (r"^\s*\d\.\d{3,}", "NV"),
    "choice": (r".", "TF,MC,IN"),
}


def subsample(golds: Sequence[Gold], n: int, seed: int = 0, cover: int = 0) -> list[Gold]:
    """A deterministic sample of ``n`` golds, spread over sources and answer types.

    Golds are ranked by a hash of (seed, id) within each (source, answer type) group and taken in
    turns from the groups, so that the sample does not depend on file order. With ``cover``, up to
    that many more golds are added per hint of a rarer transformation (a root in an equation,
    tangents, ``e^{-x}``, fractional powers, long integers, angles, four-digit values, TF / MC / IN
    slots), the first by the same hash order.
    """
    groups: dict[tuple[str, str], list[Gold]] = {}
    for g in golds:
        groups.setdefault((g.source, g.answer_type), []).append(g)
    for k in groups:
        groups[k].sort(key=lambda g: hashlib.sha256(f"{seed}|{g.gold_id}".encode()).hexdigest())
    out: list[Gold] = []
    keys = sorted(groups)
    i = 0
    while len(out) < n and any(groups.values()):
        k = keys[i % len(keys)]
        if groups[k]:
            out.append(groups[k].pop(0))
        i += 1
    if cover:
        import re

        chosen = {g.gold_id for g in out}
        ranked = sorted(golds, key=lambda g: hashlib.sha256(f"{seed}|{g.gold_id}".encode()).hexdigest())
        for pattern, types in _HINTS.values():
            found = 0
            for g in ranked:
                if found >= cover:
                    break
                if g.gold_id in chosen:
                    continue
                if any(t in types.split(",") and re.search(pattern, b) for b, t in zip(g.boxes, slot_types(g), strict=True)):
                    out.append(g)
                    chosen.add(g.gold_id)
                    found += 1
    return out
