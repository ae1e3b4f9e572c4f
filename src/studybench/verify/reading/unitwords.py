r"""Units written in words or in pieces (docs/protocol.md section 5, NV units): pure string work.

* :func:`unit_glyphs`: ``\AA``, ``\mathring{A}``, ``Å`` (U+00C5, U+212B) -> ``angstrom``;
* :func:`unit_phrases`: ``per second`` -> ``1/second``, ``m per s`` -> ``m/s``, ``degrees Celsius`` ->
  ``degC``; a Celsius or Fahrenheit degree inside a compound unit (``degC/m``, ``J/(kg degC)``,
  ``degC^-1``) is a temperature *difference* (``delta_degC``: no 273.15 offset), while a lone ``degC``
  is an absolute temperature (25 °C = 298.15 K);
* :func:`mixed_units`: ``2\ \mathrm{h}\ 30\ \mathrm{min}`` (= 2.5 h), ``5\ \mathrm{ft}\ 3\ \mathrm{in}``:
  one value in the first (largest) unit, from a small fixed table (time, feet/inches, pounds/ounces);
* :func:`turn_count`: revolutions, orbits, cycles, turns, rotations, oscillations are counts.

No eval, no pint here (the caller converts); linear-time patterns.
"""

from __future__ import annotations

import math
import re

__all__ = ["IRREGULAR_PLURALS", "TURN_WORDS", "count_noun", "mixed_units", "turn_count", "unit_glyphs", "unit_phrases"]


_GLYPHS = re.compile(r"\\mathring\s*\{\s*A\s*\}|\\mathring\s+A(?![A-Za-z])|\\AA(?![A-Za-z])|[\u00c5\u212b]")


def unit_glyphs(u: str) -> str:
    r"""Replace the Ångström glyphs by the word pint reads.

    Args:
        u: unit text (``\mathring{A}``, ``\AA``, ``Å``).

    Returns:
        The text with each glyph replaced by ``angstrom``.
    """
    return _GLYPHS.sub("angstrom", u)


_TEMP_WORDS = re.compile(r"(?i)(?<![A-Za-z])degrees?\s*(celsius|centigrade|fahrenheit)(?![A-Za-z])")
_PER = re.compile(r"(?<![A-Za-z])per\s+(?=[A-Za-z])")
_OFFSET = re.compile(r"(?<![A-Za-z_])deg([CF])(?![A-Za-z])")


def unit_phrases(v: str) -> str:
    """Rewrite unit words into pint syntax (the normalised unit string, before pint sees it).

    Args:
        v: a normalised unit string (``per second``, ``degrees Celsius``, ``degC/m``).

    Returns:
        ``1/second``, ``degC``, ``delta_degC/m``: ``per`` is a division, a temperature degree inside a
        compound unit (another unit or a power beside it) is a temperature difference.
    """
    v = _TEMP_WORDS.sub(lambda m: "degF" if m.group(1).lower() == "fahrenheit" else "degC", v)
    v = v.strip()
    if v.startswith("per ") and _PER.match(v):
        v = "1/" + v[4:].lstrip()
    v = _PER.sub("/", v)
    v = re.sub(r"\s*/\s*", "/", v)
    if _OFFSET.search(v) and not re.fullmatch(r"deg[CF]", v):
        # degC/m, J/(kg degC), degC^-1: a gradient, a heat capacity, an expansion coefficient are
        # per degree of difference; only a lone degC is an absolute temperature
        v = _OFFSET.sub(lambda m: "delta_deg" + m.group(1), v)
    return v


# unit -> (kind, size in the kind's smallest unit)
_MIXED: dict[str, tuple[str, float]] = {}
for _names, _kind, _size in (
    (("d", "day", "days"), "time", 86400.0),
    (("h", "hr", "hrs", "hour", "hours"), "time", 3600.0),
    (("min", "mins", "minute", "minutes"), "time", 60.0),
    (("s", "sec", "secs", "second", "seconds"), "time", 1.0),
    (("ft", "foot", "feet"), "length", 12.0),
    (("in", "inch", "inches"), "length", 1.0),
    (("lb", "lbs", "pound", "pounds"), "mass", 16.0),
    (("oz", "ounce", "ounces"), "mass", 1.0),
):
    for _n in _names:
        _MIXED[_n] = (_kind, _size)

_WRAP = re.compile(r"\\(?:mathrm|text|textrm|rm|mbox)\s*\{\s*([A-Za-z]+)\s*\}|\\(?:mathrm|rm)\s+([A-Za-z]+)")
_PIECE = re.compile(r"\s*([A-Za-z]+)\s*(?:,\s*(?:and\s+)?|and\s+)?(?=\d|\.\d|$)")
_NUM = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)")


def mixed_units(value: float, rest: str) -> tuple[float, str] | None:
    r"""Read a value written in several units of one kind (``2\ \mathrm{h}\ 30\ \mathrm{min}``).

    Args:
        value: the leading number (``2``).
        rest: the text after it (``\mathrm{h} 30 \mathrm{min}``), spacing macros already blanked.

    Returns:
        ``(value in the first unit, first unit)`` (``(2.5, "h")``), or ``None`` unless there are at
        least two pieces, every unit is in the table, all of one kind, in strictly decreasing size,
        and every later number is non-negative and below one of the unit before it (``2 h 90 min``
        is not a mixed unit).
    """
    if len(rest) > 200 or not re.search(r"\d", rest):
        return None
    t = _WRAP.sub(lambda m: " " + (m.group(1) or m.group(2)) + " ", rest).strip()
    units: list[str] = []
    nums: list[float] = [abs(value)]
    pos = 0
    while True:
        m = _PIECE.match(t, pos)
        if not m:
            return None
        units.append(m.group(1))
        pos = m.end()
        if pos >= len(t):
            break
        n = _NUM.match(t, pos)
        if not n:
            return None
        nums.append(float(n.group(1)))
        pos = n.end()
    if len(units) < 2 or len(units) != len(nums) or any(u not in _MIXED for u in units):
        return None
    kinds = {_MIXED[u][0] for u in units}
    sizes = [_MIXED[u][1] for u in units]
    if len(kinds) != 1 or any(b >= a for a, b in zip(sizes, sizes[1:], strict=False)):
        return None
    if any(n * b >= a for a, b, n in zip(sizes, sizes[1:], nums[1:], strict=False)):
        return None
    total = sum(n * s for n, s in zip(nums, sizes, strict=True)) / sizes[0]
    return math.copysign(total, value if value else 1.0), units[0]


TURN_WORDS = frozenset({
    "revolution", "revolutions", "orbit", "orbits", "cycle", "cycles", "turn", "turns", "rotation", "rotations",
    "oscillation", "oscillations", "rev", "revs",
})
"""Words that count whole turns: dimensionless counts beside a unitless gold, one turn (2 pi rad)
each beside an angle."""


def turn_count(u: str) -> bool:
    """Whether a unit string is one word counting turns (``orbits``, ``cycles``).

    Args:
        u: a normalised unit string.

    Returns:
        Whether it is one of :data:`TURN_WORDS` (any case).
    """
    return u.strip().lower() in TURN_WORDS


_NOT_NOUNS = frozenset({
    "or", "and", "to", "times", "more", "less", "than", "about", "approximately", "approx", "per", "of", "at", "least",
    "most", "not", "no", "plus", "minus", "percent", "over", "under", "up", "fewer", "thousand", "thousands", "million",
    "millions", "billion", "billions", "trillion", "hundred", "hundreds", "dozen", "dozens", "squared", "cubed", "halves",
    "half", "thirds", "quarters", "tenths", "hundredths", "ppm", "ppb", "ppt", "pct", "order", "orders", "magnitude",
    "powers", "power", "decades", "factor", "fold", "twice", "thrice", "hence", "so", "with", "without", "each", "only",
})


IRREGULAR_PLURALS = frozenset({
    "nuclei", "quanta", "maxima", "minima", "radii", "foci", "loci", "spectra", "bacteria", "phenomena", "vertices",
    "indices", "matrices", "children", "people", "men", "women", "mice", "data", "media", "antinuclei",
})
"""Plural nouns without a final ``s`` that may follow a count (``0.0106 nuclei``, ``3 maxima``)."""


def count_noun(u: str) -> bool:
    """Whether the trailing words after a count name what is counted (``15 levels``, ``3 bright fringes``).

    Args:
        u: the text after the number.

    Returns:
        ``True`` for one to three lower-case words ending in a plural noun (``fringes``, or one of
        :data:`IRREGULAR_PLURALS`: ``nuclei``, ``maxima``), none of them a hedge, operator or scale
        word (``or more``, ``thousand``, ``squared``).
    """
    words = u.split()
    return (
        1 <= len(words) <= 3
        and all(re.fullmatch(r"[a-z]{3,}", w) and w not in _NOT_NOUNS for w in words)
        and (words[-1] in IRREGULAR_PLURALS or (words[-1].endswith("s") and not words[-1].endswith(("ss", "ths"))))
    )
