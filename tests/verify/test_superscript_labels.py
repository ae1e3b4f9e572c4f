"""A superscript 0 on a symbol is a label (a reference value: nu^0, E_F^0, w^(0)), never the power 0.

Read as a power it made the factor 1 (and sin(2 pi w^0) zero), so any multiple, a sign flip or a dropped
factor was accepted: the mutation sweep (bench/verify_mutations.py) found these on real golds.
"""

from __future__ import annotations

import pytest

from studybench.verify import Verifier

CASES = [
    # right forms
    (r"\frac{2}{5} n \mu^{0}", r"\frac{2 n \mu^{0}}{5}", "EX", True),
    (r"\sin(2\pi w^{0} t)", r"\sin(2 \pi t w^{0})", "EX", True),
    (r"E = E_F^{0}(1 - x)", r"E = E_F^{0} - x E_F^{0}", "EQ", True),
    (r"I_S^{(0)} e^{-t/\tau}", r"e^{-t/\tau} I_S^{(0)}", "EX", True),
    # wrong twins: a factor 2, a sign, a dropped labelled factor, the label dropped inside a function
    (r"\frac{2}{5} n \mu^{0}", r"\frac{4}{5} n \mu^{0}", "EX", False),
    (r"\frac{2}{5} n \mu^{0}", r"-\frac{2}{5} n \mu^{0}", "EX", False),
    (r"\frac{2}{5} n \mu^{0}", r"\frac{2}{5} n", "EX", False),
    (r"\sin(2\pi w^{0} t)", r"\sin(4\pi w^{0} t)", "EX", False),
    (r"\sin(2\pi w^{0} t)", r"\sin(2\pi t)", "EX", False),
    (r"E = E_F^{0}(1 - x)", r"E = 2E_F^{0}(1 - x)", "EQ", False),
    (r"I_S^{(0)} e^{-t/\tau}", r"e^{-t/\tau}", "EX", False),
]


@pytest.mark.parametrize("gold,pred,answer_type,want", CASES)
def test_superscript_zero_is_a_label(verifier: Verifier, gold: str, pred: str, answer_type: str, want: bool) -> None:
    v = verifier.verify([gold], [pred], answer_type, [])
    assert v.correct is want, v.reason
