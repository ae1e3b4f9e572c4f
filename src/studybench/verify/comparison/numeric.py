r"""Numbers with units compared by the NV rules (docs/protocol.md section 5): signs, ``\pm``, percent, units, tolerance.

:func:`compare_quantities` is the one numeric comparison the NV, EX and EQ rules use: quantities read
by :mod:`studybench.verify.reading.numbers`, units converted by :mod:`studybench.verify.physics.units`,
values compared within the tolerance policy of :mod:`studybench.verify.comparison.tolerance`.
"""

from __future__ import annotations

from dataclasses import replace

from studybench.verify.comparison.tolerance import within_precision
from studybench.verify.physics.units import convert_unit, dimensionless, effective_unit, is_unit, same_unit
from studybench.verify.reading.numbers import Quantity
from studybench.verify.reading.unitwords import count_noun, turn_count

__all__ = ["compare_quantities"]


def compare_quantities(g: Quantity, p: Quantity) -> tuple[bool, str]:
    r"""Compare a predicted quantity with a gold one by the NV rules (docs/protocol.md section 5).

    * ``\pm`` in the prediction but not in the gold: incorrect (a +- answer states two values);
      both with ``\pm``: magnitudes compared; gold only: the prediction's magnitude.
    * percent: a gold ``98.5\%`` accepts 98.5 or 0.985; a predicted ``10\%`` is 0.1 unless the
      gold is a percentage too.
    * units (``^\circ`` counts as ``deg``): equal strings compare as is; otherwise pint converts
      (angles never to or from non-angles); a prediction whose trailing text is no real unit is not a
      plain number (unless it is a count noun: ``15 levels``); a dimensional unit against a unitless
      nonzero gold is not accepted (the gold's unit is unknown; pass ``gold_unit``).
    * tolerance: :func:`studybench.verify.comparison.tolerance.within_precision`, in the gold's unit
      (1%, or a rounding to the gold at its significant figures, at most 2% / 5%); a plain integer
      gold without a unit (a count, an exact ratio) is exact: 1%.

    Args:
        g: the gold quantity.
        p: the predicted quantity.

    Returns:
        ``(match, reason)``.
    """
    if p.plus_minus and not g.plus_minus:
        return False, "prediction is a +- pair, gold is one value"
    if g.plus_minus and not p.plus_minus:
        return False, "gold is a +- pair, prediction states one value"
    # a gold 50\% accepts 50 or 0.5, but a predicted percentage must state the same percentage
    gvals = [g.value] + ([g.value / 100.0] if g.percent and not p.percent else [])
    pvals = [p.value / 100.0] if p.percent and not g.percent else [p.value]
    if g.plus_minus:
        gvals = [abs(v) for v in gvals]
        pvals = [abs(v) for v in pvals]
    unit_note = ""
    gu, pu = effective_unit(g), effective_unit(p)
    if pu and not (gu and same_unit(pu, gu)):
        conv = convert_unit(p.value, pu, gu) if gu else None
        if conv is not None:
            pvals = [abs(conv) if g.plus_minus else conv]
            unit_note = f" after {pu}->{gu}"
        elif not is_unit(pu):
            if gu or not count_noun(pu):
                return False, f"not a plain number (leftover {pu[:30]!r})"
            unit_note = f" ({pu!r} read as a count noun)"
        elif gu:
            return False, f"unit mismatch ({pu} vs {gu})"
        elif turn_count(pu):
            unit_note = f" ({pu!r} read as a count)"  # 12 orbits, 3 cycles: a count, not 2 pi rad each
        elif g.value != 0 and not dimensionless(pu):
            # the gold's unit is unknown (no unit in the box, no hint): 9.9 MeV may be 1000x off
            return False, f"gold states no unit; cannot check {pu}"
    exact = g.precision.integer and not (gu or g.percent)  # 3 fringes, a ratio of 2: a count is exact
    for pv in pvals:
        for gv in gvals:
            prec = replace(g.precision, half_unit=g.precision.half_unit * abs(gv / g.value)) if g.value else None
            if within_precision(pv, gv, prec, exact=exact):
                err = 0.0 if gv == 0 else abs(pv - gv) / abs(gv)
                return True, f"numeric match (rel. err {err:.2%}){unit_note}"
    return False, f"numeric mismatch ({pvals[0]:.6g} vs {gvals[0]:.6g}){unit_note}"
