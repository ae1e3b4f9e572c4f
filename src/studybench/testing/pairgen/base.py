"""What every transformation of the pair generator shares: the slot it works on and what it returns.

A :class:`Transformation` maps one gold box (a :class:`Slot`) to candidate predicted boxes
(:class:`Candidate`) whose label is known by construction: ``True`` for an equivalent form,
``False`` for a near miss. Each candidate carries the check that makes its label certain (the two
SymPy forms, the two equations or the two values), so that tests can re-check it independently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from studybench.testing.pairgen.golds import Gold

__all__ = ["Candidate", "Slot", "Transformation", "norm_ws"]


def norm_ws(text: str) -> str:
    """``text`` with runs of whitespace collapsed (to tell a changed box from the gold's)."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Candidate:
    """One predicted box for a slot.

    Attributes:
        box: the predicted box content.
        check: how the label was made certain: ``("expr", gold, new, symbols)``, ``("eq", (l, r),
            (l2, r2))``, ``("value", gold value, new value, relative tolerance)`` or ``("text", why)``.
        note: a short human-readable note (the factor used, the symbol solved for, ...).
    """

    box: str
    check: tuple[Any, ...] = ()
    note: str = ""


@dataclass
class Slot:
    """One box of a gold, with its readings computed on first use.

    Attributes:
        gold: the gold the box belongs to.
        index: the box's position.
        box: its content.
        slot_type: its primitive type (NV, EX, EQ, IN, MC, TF, QL).
        unit: the unit the source states for it (UGPhysics), or ``None``.
    """

    gold: Gold
    index: int
    box: str
    slot_type: str
    unit: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def reading(self) -> Any:
        """The box in SymPy (:func:`studybench.testing.pairgen.sym.read_box`), or ``None``."""
        if "reading" not in self._cache:
            from studybench.testing.pairgen.sym import read_box

            self._cache["reading"] = read_box(self.box)
        return self._cache["reading"]

    @property
    def number(self) -> Any:
        """The box as a written number (:func:`studybench.testing.pairgen.numbers.read_number`), or ``None``."""
        if "number" not in self._cache:
            from studybench.testing.pairgen.numbers import read_number

            self._cache["number"] = read_number(self.box)
        return self._cache["number"]


@dataclass(frozen=True)
class Transformation:
    """One kind of generated pair.

    Attributes:
        name: ``family:what`` for equivalent forms (``sym:expand``), ``miss:what`` for near misses.
        family: the class floors are kept per (``identity``, ``symbolic``, ``equation``, ``print``,
            ``number``, ``unit``, ``words``, ``choice``, ``interval``, ``combo``, ``near-miss``).
        label: the label of every pair it makes.
        slot_types: the slot types it applies to.
        apply: ``(slot, rng) -> candidates`` (empty when it does not apply); may raise, the
            generator counts that as a failure.
        doc: one line saying what it does.
    """

    name: str
    family: str
    label: bool
    slot_types: frozenset[str]
    apply: Callable[[Slot, Random], list[Candidate]]
    doc: str = ""
