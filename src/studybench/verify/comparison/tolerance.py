r"""The tolerance policy, in one place (docs/protocol.md section 5; the judge rubric; Physics-R1's binary reward).

Numbers (NV rules): :func:`within_precision`, driven by the gold's significant figures
(:class:`studybench.verify.reading.numbers.Precision`, read by
:func:`studybench.verify.reading.numbers.written_precision`). The rubric says "different precisions
that round to the same value at the reference's stated precision are equivalent" and accepts about
2% for estimates. A prediction ``p`` (converted to the gold's unit first) matches a gold ``g`` when

1. **relative tolerance**: ``|p - g| <= 1% |g| + h``, never more than 2% of ``|g|`` (the reference
   judge rounds to the gold's digits and allows 1%; the rubric's ~2% for estimates), or
2. **rounding at the gold's precision**: ``p`` rounds to ``g`` at the gold's significant figures
   (``|p - g| < h``, a tie rounding half away from zero), but never more than 5% of ``|g|`` (2% when
   the significant figures are ambiguous),

where ``h`` is half a unit in the gold's last significant digit. So ``11\,mm`` accepts ``11.28`` and
``10.5`` (they round to 11) and rejects ``11.6`` and ``11.5`` (they round to 12); ``1.0\,kg``
accepts ``1.04``; ``2\times10^{5}`` accepts ``2.09\times10^{5}`` and rejects ``2.4\times10^{5}``.

* **Which digits count**: a decimal point makes every digit after the first non-zero one significant
  (``0.30`` -> 2, ``300.`` -> 3); a mantissa times a power of ten counts its digits
  (``1.2\times10^{3}`` -> 2); a plain integer counts to its last non-zero digit (``11`` -> 2).
* **Ambiguous trailing zeros** (``500``, ``1200``: an integer without a decimal point): read at the
  non-zero digits (``1200`` -> 2), but the rounding clause is capped at 2% (the stricter reading that
  still accepts a careful solver's ``1183`` for ``1200``; ``1150`` is 4% off: rejected).
* **Exact numbers state no precision** (``h = 0``: the plain 1%): a plain integer without a unit (a
  count or an exact ratio: ``3`` rejects ``3.04``), a fraction, a bare power of ten (``10^{5}``), a
  closed form, a computed value.
* **One significant figure**: the rounding interval is 5-50% wide and holds the realistic wrong
  answers (a factor sqrt(2), 1.2, pi/3); the 5% cap is the widest interval a two-figure gold ever
  gives (half a unit of ``1.0``), so no gold accepts more than 5%.
* **Ties** (exactly half a unit away, within float noise): half away from zero, the textbook rule
  (``10.5`` and ``-10.5`` round to ``11`` and ``-11``: accepted for ``11`` / ``-11``; ``11.5`` rounds
  to ``12``: rejected). Banker's rounding would accept both ties of an even gold and neither of an
  odd one.
* **Signs, magnitudes**: everything is relative to ``|g|``; a sign flip is never within tolerance;
  very small and very large magnitudes behave alike (the half unit scales with the value).
* **Zero**: a gold of exactly 0 needs a prediction of 0 (:data:`ABS_TOL_ZERO`): ``1.6\times10^{-19}``
  is not ``0.0``.
* **The prediction's own precision never widens anything**: ``1`` and ``1.0`` are 3.8% off
  ``1.04`` (``h`` = 0.005): rejected.

:func:`close_enough` is clause 1 alone (for callers without a written gold: bounds, recomputation).

Symbolic comparison at sample points (:func:`sample_tolerance`, :func:`rel_close`):

* :data:`EXACT_REL_TOL` (1e-6) between exact forms;
* :data:`DECIMAL_GOLD_REL_TOL` (the NV 1%) when the gold itself contains a decimal number;
* a prediction's decimals allow their written precision (:func:`written_tolerance`: half a unit in
  the last written place of its least precise decimal, at most 1%) when the gold has none;
* a decimal in a symbolic prediction stands for the values within its written precision, never more
  than :data:`MAX_DECIMAL_REL` (2%) away (:func:`written_decimals`, :func:`decimal_half_width`).
"""

from __future__ import annotations

import math
import re

from studybench.verify.reading.numbers import Precision

__all__ = [
    "ABS_TOL_ZERO",
    "DECIMAL_GOLD_REL_TOL",
    "EXACT_REL_TOL",
    "MAX_DECIMAL_REL",
    "MAX_REL_TOL",
    "REL_TOL",
    "ROUNDING_CAP",
    "close_enough",
    "decimal_half_width",
    "rel_close",
    "sample_tolerance",
    "tolerance_width",
    "within_precision",
    "written_decimals",
    "written_tolerance",
]


# ---------------------------------------------------------------------------------------------
# numbers (NV rules)

REL_TOL = 0.01
"""Relative tolerance of NV comparisons (1% of the gold value)."""
ABS_TOL_ZERO = 1e-300
"""Absolute tolerance when the gold value is exactly zero: the prediction must be zero (a tiny
physical value such as 1.6e-19 is not zero); computed values are rounded to 0 below 1e-14 relative
noise before they get here."""
MAX_REL_TOL = 0.02
"""Upper bound of the tolerance when the gold's written precision widens it (the LLM rubric's
"about 2% for estimates")."""


def close_enough(pred: float, gold: float, rel_tol: float = REL_TOL, resolution: float = 0.0) -> bool:
    """The relative tolerance (clause 1 of :func:`within_precision`): whether ``pred`` matches ``gold``.

    ``|pred - gold| <= rel_tol * |gold| + resolution``, never more than 2% of the gold; a gold of
    exactly 0 needs a prediction of 0. The NV rules use :func:`within_precision`, which adds the
    rounding at the gold's significant figures.

    Args:
        pred: the predicted value.
        gold: the gold value.
        rel_tol: relative tolerance; defaults to :data:`REL_TOL` (1%, Physics-R1's binary reward).
        resolution: half a unit in the gold's last written decimal place (:func:`written_resolution`;
            the reference rounds the prediction to the gold's decimals first), in the gold's unit.

    Returns:
        Whether the values match; never for non-finite values.
    """
    if not (math.isfinite(pred) and math.isfinite(gold)):
        return False
    if gold == 0:
        return abs(pred) <= ABS_TOL_ZERO  # noise of a computed value only: 1.6e-19 C is not 0
    tol = min(rel_tol * abs(gold) + max(resolution, 0.0), max(MAX_REL_TOL, rel_tol) * abs(gold))
    return abs(pred - gold) <= tol * (1 + 1e-12)


ROUNDING_CAP = 0.05
"""The widest relative interval the rounding clause of :func:`within_precision` accepts (a gold
with one significant figure: its half unit is 5-50%); the same as half a unit of a two-figure
``1.0``."""
_TIE = 1e-9  # relative float noise within which a difference is exactly half a unit


def within_precision(pred: float, gold: float, precision: Precision | None = None, *, exact: bool = False) -> bool:
    r"""The NV tolerance policy: whether ``pred`` equals ``gold`` at the gold's stated precision.

    The one numeric equality of the NV rules (docs/protocol.md section 5; the rubric: "different
    precisions that round to the same value at the reference's stated precision are equivalent",
    about 2% for estimates). With ``h`` half a unit in the gold's last significant digit, a match is

    1. ``|p - g| <= min(1% |g| + h, 2% |g|)`` (:func:`close_enough`), or
    2. ``p`` rounds to ``g`` at the gold's significant figures (``|p - g| < h``; a tie rounds half
       away from zero), within :data:`ROUNDING_CAP` (5%) of ``|g|``, or within 2% when the
       significant figures are ambiguous (``500``, ``1200``).

    A gold of 0 needs 0; an exact gold (no precision stated, or ``exact``) keeps the plain 1%. The
    module docstring lists every edge (ties, trailing zeros, one significant figure, signs).

    Args:
        pred: the predicted value, already in the gold's unit.
        gold: the gold value.
        precision: how the gold is written (:func:`studybench.verify.reading.numbers.written_precision`),
            its ``half_unit`` scaled to ``gold``'s unit; ``None`` for an exact gold.
        exact: the gold is exact whatever its digits (a plain integer without a unit: a count or an
            exact ratio).

    Returns:
        Whether the values match; never for non-finite values.
    """
    if not (math.isfinite(pred) and math.isfinite(gold)):
        return False
    h = _half_unit(precision, exact)
    if close_enough(pred, gold, resolution=h):
        return True
    if gold == 0 or h == 0 or (pred < 0) != (gold < 0):
        return False
    d = abs(pred - gold)
    if d > _rounding_width(gold, h, precision) * (1 + _TIE):
        return False
    if abs(d - h) <= _TIE * h:
        return abs(pred) < abs(gold)  # exactly half a unit: rounds half away from zero
    return True


def _half_unit(precision: Precision | None, exact: bool) -> float:
    return 0.0 if precision is None or exact else max(precision.half_unit, 0.0)


def _rounding_width(gold: float, h: float, precision: Precision | None) -> float:
    cap = MAX_REL_TOL if precision is not None and precision.ambiguous else ROUNDING_CAP
    return min(h, cap * abs(gold))


def tolerance_width(gold: float, precision: Precision | None = None, *, exact: bool = False) -> float:
    """The widest distance from ``gold`` that :func:`within_precision` accepts (its boundary).

    Args:
        gold: the gold value.
        precision: how the gold is written, as for :func:`within_precision`.
        exact: the gold is exact, as for :func:`within_precision`.

    Returns:
        ``max(min(1% |g| + h, 2% |g|), min(h, 5% |g|))`` (2% instead of 5% for ambiguous trailing
        zeros); 0 for a gold of 0. A near miss "just outside the tolerance" lies beyond it.
    """
    if gold == 0 or not math.isfinite(gold):
        return 0.0
    h = _half_unit(precision, exact)
    return max(min(REL_TOL * abs(gold) + h, MAX_REL_TOL * abs(gold)), _rounding_width(gold, h, precision) if h else 0.0)


# ---------------------------------------------------------------------------------------------
# symbolic comparison

EXACT_REL_TOL = 1e-6
"""Relative tolerance between exact symbolic forms at a sample point."""
DECIMAL_GOLD_REL_TOL = REL_TOL
"""Relative tolerance at a sample point when the gold contains a decimal number (the NV 1%)."""
MAX_DECIMAL_REL = MAX_REL_TOL
"""A decimal in a symbolic prediction stands for any value within its written precision, but never
more than 2% away (the NV policy's bound for coarse numbers)."""
_DECIMAL = re.compile(r"(?<![\d.])(\d+)\.(\d+)")


def sample_tolerance(gold_has_decimal: bool) -> float:
    """The relative tolerance of a symbolic comparison at sample points.

    Args:
        gold_has_decimal: whether the gold contains a decimal number (a SymPy ``Float``).

    Returns:
        :data:`DECIMAL_GOLD_REL_TOL` (1%) for a gold with decimals, else :data:`EXACT_REL_TOL` (1e-6).
    """
    return DECIMAL_GOLD_REL_TOL if gold_has_decimal else EXACT_REL_TOL


def rel_close(a: complex, b: complex, tol: float) -> bool:
    """Whether two sample values agree within a relative tolerance.

    Args:
        a: one value.
        b: the other value.
        tol: relative tolerance, applied to the larger magnitude (plus 1e-12 absolute).

    Returns:
        ``|a - b| <= tol * max(|a|, |b|) + 1e-12``.
    """
    scale = max(abs(a), abs(b))
    return abs(a - b) <= tol * scale + 1e-12


def written_decimals(text: str) -> dict[float, int]:
    """The decimals written in a text, each with its number of decimal places.

    Args:
        text: the LaTeX the decimals were read from (``0.33 x + 1.5``).

    Returns:
        ``{value rounded to 9 places: places}`` (``{0.33: 2, 1.5: 1}``), for matching SymPy ``Float``
        atoms back to their written precision.
    """
    places: dict[float, int] = {}
    for m in _DECIMAL.finditer(text):
        places[round(float(m.group(0)), 9)] = len(m.group(2))
    return places


def decimal_half_width(value: float, places: int) -> float:
    """How far a decimal in a symbolic prediction may stand from the value it rounds.

    Args:
        value: the decimal's value.
        places: its number of written decimal places.

    Returns:
        Half a unit in its last written place, but never more than :data:`MAX_DECIMAL_REL` (2%) of the
        value (0.2 is no rounding of 1/4).
    """
    return min(0.5 * 10.0 ** (-places), MAX_DECIMAL_REL * abs(value))


def written_tolerance(text: str) -> float:
    """The relative tolerance a prediction's decimals allow.

    Half a unit in the last written place of its least precise decimal, relative to its value
    (``0.9945`` -> 5e-5, ``0.33`` -> 1.5%), at most 1%. Used when the gold has no decimals, so that a
    rounded coefficient matches while a changed constant (``1.05`` for ``1``) does not.

    Args:
        text: the prediction's LaTeX.

    Returns:
        The tolerance; :data:`EXACT_REL_TOL` (1e-6) when the text writes no decimal.
    """
    tol = EXACT_REL_TOL
    for m in _DECIMAL.finditer(text):
        v = float(m.group(0))
        if v:
            tol = max(tol, 0.5 * 10.0 ** (-len(m.group(2))) / v)
    return min(tol, REL_TOL)
