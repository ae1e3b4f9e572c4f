r"""EQ in another but equivalent form (issue 14, kind 1): solution sets and proportionality.

Right forms a careful grader accepts, each with wrong twins (a changed factor, a wrong exponent, a
swapped symbol, a dropped root / wrong branch) that must be rejected. Golds marked "ugphysics" are real
EQ golds from /work/shared/data/ugphysics (not used by the dev pairs), written here as test cases.
"""

from __future__ import annotations

import pytest

from studybench.verify import Verdict, Verifier
from studybench.verify.comparison.equation_forms import is_proportionality
from studybench.verify.rules.eq import eq_gold_check

# (gold, prediction, expected, why)
CASES: list[tuple[str, str, bool, str]] = [
    # --- squared both sides: the gold's sign decides the branch ------------------------------------
    (r"v = \sqrt{2gh}", r"v^2 = 2gh", True, "squared"),
    (r"v = \sqrt{2gh}", r"v^2 = gh", False, "squared, factor lost"),
    (r"v = \sqrt{2gh}", r"v^2 = \frac{2g}{h}", False, "squared, symbol moved to the denominator"),
    (r"v = \sqrt{2gh}", r"v = -\sqrt{2gh}", False, "wrong root"),
    (r"v = -\sqrt{2gh}", r"v^2 = 2gh", False, "gold picks the negative root, squared form drops it"),
    (r"v^2 = 2gh", r"v = \sqrt{2gh}", False, "gold states both roots, prediction one"),
    (r"v = \pm\sqrt{2gh}", r"v = \sqrt{2gh}", False, "dropped +-"),
    (r"x = vt", r"x^2 = v^2 t^2", False, "signed quantity squared"),
    (r"x = \frac{a}{b}", r"x^2 b = a x", False, "extra root x = 0"),
    (r"PV=nRT", r"PV^2=nRTV", False, "extra root V = 0"),
    (r"x^2+y^2=R^2", r"x(x^2+y^2)=xR^2", False, "extra root x = 0"),
    # --- solved for another symbol ------------------------------------------------------------------
    (r"T = 2\pi\sqrt{\frac{L}{g}}", r"g = \frac{4\pi^2 L}{T^2}", True, "solved for g"),
    (r"T = 2\pi\sqrt{\frac{L}{g}}", r"g = \frac{4\pi^2 T^2}{L}", False, "solved for g, symbols swapped"),
    (r"T = 2\pi\sqrt{\frac{L}{g}}", r"g = \frac{2\pi^2 L}{T^2}", False, "solved for g, wrong factor"),
    (r"T = 2\pi\sqrt{\frac{L}{g}}", r"g = \frac{4\pi L}{T^2}", False, "solved for g, wrong power of pi"),
    (r"v = \sqrt{2gh}", r"h = \frac{v^2}{2g}", True, "solved for h"),
    (r"v = \sqrt{2gh}", r"h = \frac{v^2}{g}", False, "solved for h, factor lost"),
    # --- inverse functions --------------------------------------------------------------------------
    (r"\sin\theta = \frac{n_2}{n_1}", r"\theta = \arcsin\frac{n_2}{n_1}", True, "arcsin applied"),
    (r"\sin\theta = \frac{n_2}{n_1}", r"\theta = \arccos\frac{n_2}{n_1}", False, "arccos instead of arcsin"),
    (r"\sin\theta = \frac{n_2}{n_1}", r"\theta = \arcsin\frac{n_1}{n_2}", False, "arcsin of the inverse ratio"),
    (r"\sin\theta = \frac{n_2}{n_1}", r"\theta = \pi - \arcsin\frac{n_2}{n_1}", False, "the other branch"),
    (r"\theta = \arcsin\frac{n_2}{n_1}", r"\sin\theta = \frac{n_2}{n_1}", True, "sin applied"),
    (r"\theta = \arcsin\frac{n_2}{n_1}", r"\cos\theta = \frac{n_2}{n_1}", False, "cos instead of sin"),
    # --- exponentials and logarithms ----------------------------------------------------------------
    (r"N = N_0 e^{-\lambda t}", r"\ln\frac{N}{N_0} = -\lambda t", True, "logarithm taken"),
    (r"N = N_0 e^{-\lambda t}", r"\ln\frac{N_0}{N} = -\lambda t", False, "logarithm, ratio inverted"),
    (r"N = N_0 e^{-\lambda t}", r"\ln\frac{N}{N_0} = -2\lambda t", False, "logarithm, wrong factor"),
    # --- real golds (ugphysics EQ answers) ----------------------------------------------------------
    (r"\omega = \sqrt{\frac{12 B M}{\rho l^{2}}}", r"\omega^2 \rho l^2 = 12 B M", True, "ugphysics: squared"),
    (r"\omega = \sqrt{\frac{12 B M}{\rho l^{2}}}", r"\omega^2 \rho l = 12 B M", False, "ugphysics: squared, wrong power"),
    (r"c=\sqrt{\frac{\gamma R T}{\mu}}", r"c^2\mu = \gamma R T", True, "ugphysics: sound speed squared"),
    (r"c=\sqrt{\frac{\gamma R T}{\mu}}", r"c^2 = \gamma R T\mu", False, "ugphysics: mu on the wrong side"),
    (r"\sin \beta = \frac{b}{\sqrt{a^{2} + b^{2} + z^{2}}}", r"\beta = \arcsin\frac{b}{\sqrt{a^2+b^2+z^2}}", True, "ugphysics: arcsin"),
    (r"\sin \beta = \frac{b}{\sqrt{a^{2} + b^{2} + z^{2}}}", r"\tan\beta = \frac{b}{\sqrt{a^2+b^2+z^2}}", False, "ugphysics: tan for sin"),
    (r"x = \frac{m}{b} \ln \left(1+\frac{b v_{0}}{m} t\right)", r"e^{bx/m} = 1 + \frac{b v_0 t}{m}", True, "ugphysics: exponentiated"),
    (r"x = \frac{m}{b} \ln \left(1+\frac{b v_{0}}{m} t\right)", r"t = \frac{m}{b v_0}\left(e^{bx/m} - 1\right)", True, "ugphysics: solved for t"),
    (r"x = \frac{m}{b} \ln \left(1+\frac{b v_{0}}{m} t\right)", r"e^{bx/m} = 1 - \frac{b v_0 t}{m}", False, "ugphysics: sign flipped"),
    (r"x = \frac{m}{b} \ln \left(1+\frac{b v_{0}}{m} t\right)", r"e^{bx/m} = 1 + \frac{v_0 t}{m}", False, "ugphysics: factor lost"),
    (r"\theta_{0} = \arccos \left( \frac{2 R^{2} \omega \Omega - 5 g l}{5 l^{2} \omega^{2}} \right)", r"\cos\theta_0 = \frac{2 R^{2} \omega \Omega - 5 g l}{5 l^{2} \omega^{2}}", True, "ugphysics: cos applied"),
    (r"\theta_{0} = \arccos \left( \frac{2 R^{2} \omega \Omega - 5 g l}{5 l^{2} \omega^{2}} \right)", r"\sin\theta_0 = \frac{2 R^{2} \omega \Omega - 5 g l}{5 l^{2} \omega^{2}}", False, "ugphysics: sin for cos"),
    (r"T_{m} = \frac{T_{0}}{1+\frac{R T_{0}}{L} \ln \frac{p_{0}}{p_{m}}}", r"\frac{1}{T_m} - \frac{1}{T_0} = \frac{R}{L}\ln\frac{p_0}{p_m}", True, "ugphysics: reciprocals"),
    (r"T_{m} = \frac{T_{0}}{1+\frac{R T_{0}}{L} \ln \frac{p_{0}}{p_{m}}}", r"\frac{1}{T_m} - \frac{1}{T_0} = \frac{R}{L}\ln\frac{p_m}{p_0}", False, "ugphysics: log ratio inverted"),
    (r"\omega=\sqrt{\frac{g\left(1+3 \cos ^{2} \theta_{0}\right)}{l \cos \theta_{0}}}", r"\omega^2 l\cos\theta_0 = g(1+3\cos^2\theta_0)", True, "ugphysics: squared, cleared"),
    (r"\omega=\sqrt{\frac{g\left(1+3 \cos ^{2} \theta_{0}\right)}{l \cos \theta_{0}}}", r"\omega^2 l = g(1+3\cos^2\theta_0)", False, "ugphysics: a cos lost"),
    (r"\theta = 2 \arccos \sqrt{\frac{E_0 + m_0 c^2}{E_0 + 3 m_0 c^2}}", r"\cos\frac{\theta}{2} = \frac{E_0+m_0c^2}{E_0+3m_0c^2}", False, "ugphysics: root lost"),
    (r"\theta = 2 \arccos \sqrt{\frac{E_0 + m_0 c^2}{E_0 + 3 m_0 c^2}}", r"\cos^2\frac{\theta}{2} = \frac{E_0+m_0c^2}{E_0+3m_0c^2}", False, "ugphysics: squared admits the obtuse half-angle"),
    (r"\gamma = \frac{\ln p_{1} - \ln p_{0}}{\ln p_{1} - \ln p_{2}}", r"\frac{p_1}{p_0} = \left(\frac{p_1}{p_2}\right)^\gamma", True, "ugphysics: exponentiated"),
    (r"\gamma = \frac{\ln p_{1} - \ln p_{0}}{\ln p_{1} - \ln p_{2}}", r"\frac{p_1}{p_0} = \left(\frac{p_2}{p_1}\right)^\gamma", False, "ugphysics: ratio inverted"),
    # --- proportionality and conserved quantities ---------------------------------------------------
    (r"PV^{5/3} = \text{const}", r"P \propto V^{-5/3}", True, "proportionality for a conserved quantity"),
    (r"PV^{5/3} = \text{const}", r"P \propto V^{5/3}", False, "proportionality, exponent sign"),
    (r"PV^{5/3} = \text{const}", r"P \propto V^{-3/5}", False, "proportionality, exponent inverted"),
    (r"PV^{5/3} = \text{const}", r"VP^{5/3} = \text{const}", False, "conserved quantity, symbols swapped"),
    (r"P \propto V^{-5/3}", r"P^3 V^5 = \text{const}", True, "a power of the conserved quantity"),
    (r"P \propto V^{-5/3}", r"P = C V^{-5/3}", True, "one named constant"),
    (r"P \propto V^{-5/3}", r"P = C V^{-3/5}", False, "one named constant, wrong exponent"),
    (r"P = \frac{nRT}{V}", r"P \propto \frac{T}{V}", False, "exact gold, bare proportionality"),
    (r"TV^{\gamma-1} = \mathrm{const}", r"T \propto V^{1-\gamma}", True, "symbolic exponent"),
    (r"TV^{\gamma-1} = \mathrm{const}", r"T \propto V^{\gamma-1}", False, "symbolic exponent, sign"),
    # x = \pm a and x^2 = a^2 state the same two solutions (either side holding the \pm)
    (r"v=\pm\sqrt{2gh}", r"v^2=2gh", True, "pm gold, squared prediction"),
    (r"v^2=2gh", r"v=\pm\sqrt{2gh}", True, "squared gold, pm prediction"),
    (r"x=\pm\frac{a}{2}", r"4x^2=a^2", True, "pm gold, squared and scaled"),
    (r"v=\pm\sqrt{2gh}", r"v^2=gh", False, "squared prediction, factor lost"),
    (r"v=\pm\sqrt{2gh}", r"v=\sqrt{2gh}", False, "pm dropped"),
    (r"v=\pm\sqrt{2gh}", r"v=-\sqrt{2gh}", False, "one branch only"),
    (r"x=\pm\frac{a}{2}", r"4x^3=a^2 x", False, "an extra root x = 0"),
    (r"v^2=2gh", r"v=\pm\sqrt{gh}", False, "pm prediction, factor lost"),
]


@pytest.mark.parametrize("gold,pred,expected,why", CASES, ids=[c[3] for c in CASES])
def test_equivalent_forms(verifier: Verifier, gold: str, pred: str, expected: bool, why: str) -> None:
    v = verifier.verify([gold], [pred], "EQ", "")
    assert isinstance(v, Verdict)
    assert v.correct is expected, f"{why}: {v.reason}"


def test_proportionality_detection_and_gold_check() -> None:
    assert is_proportionality(r"P \propto V^{-5/3}")
    assert is_proportionality(r"PV^{5/3} = \text{const}")
    assert is_proportionality(r"\text{constant} = PV")
    assert not is_proportionality(r"P = C V")
    assert not is_proportionality(r"\text{const} = \text{const}")
    assert eq_gold_check(r"P \propto V^{-5/3}") is None
    assert eq_gold_check(r"P \propto") is not None
