"""The rule verifier (docs/protocol.md sections 4-5).

Public API:

* :class:`Verifier` - reusable and thread-safe: :meth:`Verifier.verify` (boxes against boxes),
  :meth:`Verifier.verify_many` (in parallel), :meth:`Verifier.verify_response` (extract the final
  answers from a raw response, then verify); a memo, an in-process fast path and a pool of sandbox
  worker processes (hard wall-clock timeout per verification) for symbolic work.
* :func:`verify_boxes` / :func:`verify_response` - one verification by a process-wide default
  :class:`Verifier`.
* :meth:`Verifier.verify_responses` - many raw responses at once, with what was extracted.
* :func:`extract_pair` - the gold boxes and a response's final answers (the step before verifying).
* :func:`check_gold_parsable` - whether a gold box is readable for its primitive type.
* :func:`extract_answers` - final-answer extraction (:mod:`studybench.answers`).
* :class:`Verdict` - the result record; :func:`is_internal_error` - whether its reason says the verifier
  failed (a broken install, a rule that raised) rather than decided.

The rule of each answer type is one module of :mod:`studybench.verify.rules`, registered in
:data:`studybench.verify.rules.RULES` from the answer type table (:mod:`studybench.answer_types`).
Inside, the package reads as its pipeline, imports flowing down only: :mod:`.reading` (LaTeX, numbers,
unit words) -> :mod:`.physics` (units, constants, identities, definitions) -> :mod:`.comparison`
(tolerance, symbolic, numeric, relations, equations) -> :mod:`.rules` -> :mod:`.sandbox` ->
:mod:`.verifier`; :mod:`.verdict` below them all.
"""

from studybench.answers import extract_answers
from studybench.verify.verdict import Verdict, is_internal_error
from studybench.verify.verifier import (
    Verifier,
    check_gold_parsable,
    extract_pair,
    verify_boxes,
    verify_response,
)

__all__ = [
    "Verdict",
    "Verifier",
    "check_gold_parsable",
    "extract_answers",
    "extract_pair",
    "is_internal_error",
    "verify_boxes",
    "verify_response",
]
