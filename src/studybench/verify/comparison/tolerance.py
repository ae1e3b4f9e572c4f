r"""The tolerance policy, in one place (PROTOCOL.md section 5; Physics-R1's binary reward).

Numbers (NV rules, :func:`close_enough`):

* relative error at most :data:`REL_TOL` (1%) of the gold;
* widened by half a unit in the gold's last written decimal (:func:`studybench.verify.reading.numbers.written_resolution`;
  the reference rounds the prediction to the gold's decimals), but never beyond :data:`MAX_REL_TOL` (2%);
* a gold of exactly 0 needs a prediction of 0 (:data:`ABS_TOL_ZERO`).

Significant figures (golds written to one or two significant figures): the tolerance is
``min(1% + half a unit in the gold's last written significant digit, 2%)``. A prediction that rounds
to the gold at the gold's written precision is right as long as it is within 2% (``1.96\times10^{5}``
for ``2\times10^{5}``, ``0.305`` for ``0.3``); the 2% cap is the LLM rubric's bound for estimates, so
a prediction that merely rounds to the gold at one significant figure but lies further away is wrong
(``2.4\times10^{5}``, ``1.8\times10^{5}`` and ``2.5\times10^{5}`` for ``2\times10^{5}``: 20%, 10%, 25%
off; rounding half-up or half-even never matters, as the cap decides first). Which digits count as
written:

* a decimal point makes every digit after it significant (``0.30`` -> 0.005, ``2.0\times10^{5}`` ->
  5000);
* an integer mantissa with an explicit power of ten counts to its last digit (``2\times10^{5}`` and
  ``2e5`` -> 50000, ``25\times10^{3}`` -> 500), so such a gold gets the 2% cap;
* a plain integer (``100``, ``3``, ``12000``) is read as exact: trailing zeros are ambiguous and a
  count is exact, so it keeps the plain 1% (``104`` and ``3.04`` are wrong for ``100`` and ``3``);
* a bare power of ten (``10^{5}``) writes no digit and keeps 1%.

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

__all__ = [
    "ABS_TOL_ZERO",
    "DECIMAL_GOLD_REL_TOL",
    "EXACT_REL_TOL",
    "MAX_DECIMAL_REL",
    "MAX_REL_TOL",
    "REL_TOL",
    "close_enough",
    "decimal_half_width",
    "rel_close",
    "sample_tolerance",
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
    """The NV tolerance policy (PROTOCOL.md section 5): whether ``pred`` matches ``gold``.

    ``|pred - gold| <= rel_tol * |gold| + resolution``, never more than 2% of the gold; a gold of
    exactly 0 needs a prediction of 0.

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
