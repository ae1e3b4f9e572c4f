r"""A metamorphic pair generator for the rule verifier (issue 25, item 2): labelled pairs from every gold.

Every gold the package has (:func:`load_golds`: both test sets, the training layers, the UGPhysics
golds) is transformed into predicted answers whose label is known by construction:

* equivalent forms computed with SymPy (:mod:`.symtrans`: expand, factor, together, cancel,
  trigonometric and exponential rewrites, roots and powers, equations swapped / scaled / squared /
  solved for another symbol);
* written variation (:mod:`.text`, :mod:`.numbers`): print styles, spacing, number formats, pint
  unit conversions, words around a value, TF / MC sentences;
* near misses (label ``False``): a changed coefficient or exponent, a flipped sign, swapped
  symbols, a dropped term, a wrong unit prefix, a value 3x the documented tolerance away;
* general answer forms (:mod:`.forms`): seeded golds of the forms a general math verifier sees
  (:func:`general_golds`: sets, solution lists, tuples, ``\pm``, matrices, intervals) with their
  equivalent forms and near misses, and TF / MC sentences with double negations and hedges.

Each label is checked numerically before the pair is kept (random points, equation solutions,
exact decimals). :func:`generate_pairs` is seeded and deterministic; :func:`judge_pairs` and
:func:`score` measure the rule verifier per transformation. Testing code only: nothing in an
evaluation run imports it. ``bench/verify_metamorphic.py`` runs it on everything.
"""

from studybench.testing.pairgen.base import Candidate, Slot, Transformation
from studybench.testing.pairgen.forms import GENERAL_KINDS, general_golds
from studybench.testing.pairgen.golds import Gold, GoldSet, load_golds, slot_types
from studybench.testing.pairgen.judge import (
    UNPARSABLE,
    Row,
    failure_kinds,
    format_table,
    judge_pairs,
    reason_kind,
    score,
)
from studybench.testing.pairgen.pairs import (
    TRANSFORMATIONS,
    GenStats,
    Pair,
    generate_pairs,
    subsample,
    wrap_response,
)

__all__ = [
    "GENERAL_KINDS",
    "TRANSFORMATIONS",
    "UNPARSABLE",
    "Candidate",
    "GenStats",
    "Gold",
    "GoldSet",
    "Pair",
    "Row",
    "Slot",
    "Transformation",
    "failure_kinds",
    "format_table",
    "general_golds",
    "generate_pairs",
    "judge_pairs",
    "load_golds",
    "reason_kind",
    "score",
    "slot_types",
    "subsample",
    "wrap_response",
]
