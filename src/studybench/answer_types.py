"""The answer types of StudyBench in one table (paper 2.2): what every part of the package knows of a type.

:class:`AnswerType` is the table: one member per type, each with its row (:class:`TypeInfo`): what the
type means, whether it is atomic or compound, how a box of it is read, what the LLM judge is told, what
the dense reward checks per slot, whether the item's definitions apply, and the module of the rule
verifier that decides it. Every user of the types reads this table rather than a list of its own: the
records (:mod:`studybench.records`, which re-exports :class:`AnswerType`), the rule registry
(:data:`studybench.verify.rules.RULES`), the definitions (:mod:`studybench.verify.physics.definitions`),
the LLM judge's inputs (:mod:`studybench.llm_judge.inputs`), the rewards (:mod:`studybench.rewards`),
the TTRL vote (:mod:`studybench.methods.ttrl`) and the fuzz strategies (:mod:`studybench.testing.fuzz`).

Adding a type is one row here and one rule module ``studybench/verify/rules/<rule>.py`` that defines
``RULE`` (docs/architecture.md, "Add an answer type").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["AnswerType", "COMPOUND_TYPES", "DENSE_CHECKS", "PARTS", "READINGS", "TypeInfo"]

PARTS = ("atomic", "tuple", "alternatives")
"""``atomic``: one answer per box; ``tuple``: one slot per box, all in ``type_sequence`` order;
``alternatives``: one alternative per box, any one suffices."""

READINGS = ("quantity", "symbolic", "text", "slots")
"""How a box is read: a number with a unit, a formula (SymPy), words or letters, or slot by slot."""

DENSE_CHECKS = ("dimensional", "symbolic", "")
"""What the dense reward checks in a slot of the type: its unit, its symbols, or nothing."""


@dataclass(frozen=True)
class TypeInfo:
    """One row of the table: what the package knows of one answer type.

    Attributes:
        meaning: what an answer of the type is (``"numeric value"``).
        parts: ``"atomic"``, ``"tuple"`` or ``"alternatives"`` (:data:`PARTS`).
        reading: how a box of the type is read (:data:`READINGS`); ``quantity`` and ``symbolic`` boxes
            go through the verifier's parsers, ``text`` boxes through string rules only.
        judge_label: how the LLM judge's reference answers name the type (``"NV (numerical value)"``).
        dense: what the dense reward checks per slot of the type (:data:`DENSE_CHECKS`).
        definitions: whether the definitions a problem or gold states may be substituted.
        rule: the module of :mod:`studybench.verify.rules` whose ``RULE`` decides the type.
    """

    meaning: str
    parts: str
    reading: str
    judge_label: str
    dense: str
    definitions: bool
    rule: str

    def __post_init__(self) -> None:
        """Refuse a row with a value outside its column's vocabulary."""
        if self.parts not in PARTS or self.reading not in READINGS or self.dense not in DENSE_CHECKS:
            raise ValueError(f"bad answer type row: {self}")
        if (self.parts == "atomic") == (self.reading == "slots"):
            raise ValueError(f"a compound type is read slot by slot, an atomic one is not: {self}")

    @property
    def compound(self) -> bool:
        """Whether an answer of the type has slots (TUP, ALT)."""
        return self.parts != "atomic"

    @property
    def parsed(self) -> bool:
        """Whether a box of the type is read by the verifier's parsers (so it may be unreadable)."""
        return self.reading in ("quantity", "symbolic")


class AnswerType(str, Enum):
    """The nine answer types of StudyBench (paper 2.2); each member carries its row, :attr:`info`."""

    info: TypeInfo

    #                      meaning                            parts           reading     judge_label                       dense          definitions rule
    NV = "NV",   TypeInfo("numeric value",                   "atomic",       "quantity", "numerical value",                "dimensional", False,      "nv")
    EX = "EX",   TypeInfo("symbolic expression",             "atomic",       "symbolic", "expression",                     "symbolic",    True,       "ex")
    EQ = "EQ",   TypeInfo("equation",                        "atomic",       "symbolic", "equation",                       "symbolic",    True,       "eq")
    TUP = "TUP", TypeInfo("ordered tuple, one box per slot", "tuple",        "slots",    "tuple of answers",               "",            True,       "tup")
    IN = "IN",   TypeInfo("interval / inequality",           "atomic",       "symbolic", "interval",                       "",            False,      "in_")
    MC = "MC",   TypeInfo("one multiple-choice letter",      "atomic",       "text",     "multiple choice",                "",            False,      "mc")
    TF = "TF",   TypeInfo("true / false",                    "atomic",       "text",     "true/false",                     "",            False,      "tf")
    QL = "QL",   TypeInfo("short qualitative phrase",        "atomic",       "text",     "answer in words",                "",            False,      "ql")
    ALT = "ALT", TypeInfo("alternative forms, any of",       "alternatives", "slots",    "alternatives, any one suffices", "",            True,       "alt")

    def __new__(cls, value: str, info: TypeInfo) -> AnswerType:
        """A member whose value is its name and whose row is ``info``."""
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.info = info
        return obj

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


COMPOUND_TYPES = frozenset(t for t in AnswerType if t.info.compound)
"""The types whose answers have slots (TUP, ALT)."""
