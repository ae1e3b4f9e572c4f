"""Method-only guidance per covered sub-problem (paper section 2.1, ``build guide``).

:mod:`.guide` runs the writer, the deterministic leakage gate and the review for a few rounds, then
the sanitiser; :mod:`.leakage` is the gate and the sanitiser (every number, formula and phrase of the
guidance compared with the gold by the rule verifier); :mod:`.spans` finds what the gate compares (math
spans, numbers, number words, prose formulas). ``guide`` over ``leakage`` over ``spans``, never the reverse.
"""

from studybench.testset.guidance.guide import (
    GuideError,
    GuideSettings,
    guide_one,
    run_guide,
    write_guidance_file,
)
from studybench.testset.guidance.leakage import (
    Finding,
    GateResult,
    GoldSlot,
    check_leakage,
    gold_slots,
    sanitise,
)

__all__ = [
    "Finding",
    "GateResult",
    "GoldSlot",
    "GuideError",
    "GuideSettings",
    "check_leakage",
    "gold_slots",
    "guide_one",
    "run_guide",
    "sanitise",
    "write_guidance_file",
]
