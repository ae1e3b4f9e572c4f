"""Physics semantics of the rule verifier (issue 3): one case per kind of rule, each with a wrong
twin where one exists. The examples are written for these tests (not taken from the dev pairs), so
that the rules are checked on other problems than the ones they were tuned on."""

from __future__ import annotations

import pytest

from studybench.verify import Verdict, Verifier
from studybench.verify.comparison.parts import answer_parts
from studybench.verify.comparison.tolerance import close_enough
from studybench.verify.physics.units import split_hints, split_unit_suffix
from studybench.verify.reading.numbers import parse_quantity
from studybench.verify.reading.prose import prose_segments

# (gold boxes, predicted boxes, answer_type, type_sequence, gold_unit, expected, why)
CASES: list[tuple[list[str], list[str], str, str, object, bool, str]] = [
    # --- units: hints, conversion, prefixes, compound units ---------------------------------------
    (["2.5"], [r"2500\,\mathrm{m}"], "NV", "", r"\mathrm{km}", True, "hint km, prediction in m"),
    (["2.5"], [r"2.5\,\mathrm{m}"], "NV", "", r"\mathrm{km}", False, "hint km, same number in m"),
    (["2.5"], ["2.5"], "NV", "", r"\mathrm{km}", True, "hint km, prediction without unit"),
    (["2.5"], [r"2.5\,\mathrm{s}"], "NV", "", r"\mathrm{km}", False, "hint km, incompatible unit"),
    (["4.2"], [r"4200\ \text{J/K}"], "NV", "", r"\mathrm{kJ/K}", True, "compound unit hint"),
    (["36"], [r"10\,\mathrm{m/s}"], "NV", "", r"\mathrm{km/h}", True, "km/h to m/s"),
    (["1.6"], [r"1.6\times10^{-19}\,\mathrm{J}"], "NV", "", r"\mathrm{eV}", False, "eV value stated as J"),
    (["1.0"], [r"1.602\times10^{-19}\,\mathrm{J}"], "NV", "", r"\mathrm{eV}", True, "eV to J"),
    (["3"], [r"3\,\mathrm{kg\,m^{2}\,s^{-1}}"], "NV", "", r"\mathrm{J\,s}", True, "kg m^2 s^-1 is J s"),
    (["0.75"], [r"0.75\,\hbar"], "NV", "", r"\hbar", True, "symbolic unit written in the box"),
    (["0.75"], [r"0.75\,m_e"], "NV", "", r"\hbar", False, "other symbolic unit"),
    (["12"], [r"12\,\mathrm{GeV}"], "NV", "", None, False, "no hint: dimensional unit cannot be checked"),
    (["12"], ["12"], "NV", "", None, True, "no hint, no unit"),
    (["0"], [r"0\,\mathrm{N}"], "NV", "", None, True, "zero needs no unit"),
    (["7"], [r"7\ \text{bright fringes}"], "NV", "", None, True, "count noun"),
    (["7"], [r"7\ \text{to}\ 8"], "NV", "", None, False, "a range is no count noun"),
    (["5"], [r"\text{five}"], "NV", "", None, True, "number word"),
    (["0.5, 1.5"], ["500, 1500"], "NV", "", r"\mathrm{kV}, \mathrm{kV}", False, "hinted list, V written without unit"),
    (["0.5, 1.5"], [r"500\,\mathrm{V}, 1.5"], "NV", "", r"\mathrm{kV}, \mathrm{kV}", True, "hinted list, one value in V"),
    (["0.5, 1.5"], ["0.5, 1.6"], "NV", "", None, False, "list with one wrong value"),
    (["2.0", "3.0"], [r"2000\,\mathrm{g}", "3.0"], "TUP", "NV,NV", r"\mathrm{kg}, None", True, "per-slot hints"),
    (["2.0", "3.0"], [r"2\,\mathrm{g}", "3.0"], "TUP", "NV,NV", r"\mathrm{kg}, None", False, "per-slot hints, g vs kg"),
    (["T = 300\\,\\mathrm{K} = 27^\\circ\\mathrm{C}"], ["29^\\circ\\mathrm{C}"], "NV", "", None, False, "Celsius compared with the Celsius link"),
    (["T = 300\\,\\mathrm{K} = 27^\\circ\\mathrm{C}"], ["27.1^\\circ\\mathrm{C}"], "NV", "", None, True, "Celsius within tolerance"),
    # --- numbers -------------------------------------------------------------------------------
    (["6.0\\times10^{23}"], ["6.02e23"], "NV", "", None, True, "e-notation"),
    (["6.0\\times10^{23}"], ["6.0\\cdot 10^{22}"], "NV", "", None, False, "wrong exponent"),
    (["12000"], ["12{,}000"], "NV", "", None, True, "thousands separator"),
    (["0.25"], [r"\frac{1}{4}"], "NV", "", None, True, "fraction for decimal"),
    (["25\\%"], ["0.25"], "NV", "", None, True, "percent as a fraction"),
    (["0.3"], ["0.305"], "NV", "", None, True, "within the gold's written precision"),
    (["0.3"], ["0.32"], "NV", "", None, False, "beyond 2% even for a one-digit gold"),
    (["1.234"], ["1.26"], "NV", "", None, False, "2% off a four-digit gold"),
    (["x = 4\\,\\mathrm{m}"], ["y = 4\\,\\mathrm{m}"], "NV", "", None, False, "different left side"),
    (["x = 4\\,\\mathrm{m}"], ["x_{0} = 4\\,\\mathrm{m}"], "NV", "", None, True, "left side with a subscript"),
    (["E = 5\\,\\mathrm{J}"], ["E = 5\\,\\mathrm{J} = 5\\,\\mathrm{kN}"], "NV", "", None, False, "an unreadable link"),
    ([r"\sqrt{2}"], ["1.414"], "NV", "", None, True, "closed-form gold, decimal answer"),
    ([r"\sqrt{2}"], ["1.40"], "NV", "", None, False, "closed-form gold, 1% off"),
    ([r"\frac{\sqrt{3}}{2}\,\mathrm{m}"], [r"0.866\,\mathrm{m}"], "NV", "", None, True, "closed-form gold with a unit"),
    ([r"\sqrt{2}\, m g"], [r"1.414\, m g"], "EX", "", None, True, "decimal brackets an irrational coefficient"),
    ([r"\sqrt{2}\, m g"], [r"1.42\, m g"], "EX", "", None, False, "decimal outside its written precision"),
    ([r"\frac{4}{3}\pi r^3"], [r"4.19\, r^3"], "EX", "", None, True, "pi folded into a decimal"),
    ([r"(\frac{\sqrt3}{2}, 1]"], [r"(0.866, 1]"], "IN", "", None, True, "decimal interval bound"),
    ([r"x > \frac{\sqrt3}{2}"], [r"x > 0.866"], "IN", "", None, True, "decimal inequality bound"),
    ([r"x > \frac{\sqrt3}{2}"], [r"x \ge 0.866"], "IN", "", None, False, "decimal bound, other strictness"),
    ([r"\frac{n e}{2\varepsilon_0} r"], [r"(ne)/(2\varepsilon_0)\, r"], "EX", "", None, True, "slash division before a factor"),
    ([r"\varphi = 64.1^{\circ}"], [r"64.1^{\circ} = \varphi"], "EQ", "", None, True, "value written first"),
    ([r"\varphi = 64.1^{\circ}"], [r"64.1^{\circ} = \theta"], "EQ", "", None, False, "value written first, other symbol"),
    ([r"N\cos^2\left(\frac{x}{2}\right)"], [r"\frac{N}{2}\left(1+\cos x\right)"], "EX", "", None, True, "half-angle identity"),
    # adversarial twins (a wrong answer that a looser rule would accept)
    ([r"\frac{1}{4} m g L"], [r"0.2\, m g L"], "EX", "", None, False, "coarse decimal is no rounding of 1/4"),
    ([r"\frac{1}{3} m g h"], [r"0.3\, m g h"], "EX", "", None, False, "0.3 is not 1/3"),
    ([r"\frac{\sqrt{3}}{2} m g"], [r"0.9\, m g"], "EX", "", None, False, "0.9 is not cos 30"),
    ([r"\frac{1}{7} M R^2\omega^2"], [r"0.1\, M R^2\omega^2"], "EX", "", None, False, "0.1 is not 1/7"),
    (["0"], [r"1.6\times10^{-19}"], "NV", "", r"\mathrm{C}", False, "a tiny value is not zero"),
    (["15"], [r"15\ \text{thousand}"], "NV", "", None, False, "a multiplier word is no count noun"),
    (["2"], [r"2\ \text{squared}"], "NV", "", None, False, "squared is no count noun"),
    (["0.5"], [r"0.5\,\mathrm{mrad}"], "NV", "", None, False, "mrad against an unlabelled gold"),
    (["0.52"], [r"0.52^{\circ}"], "NV", "", None, False, "degrees against an unlabelled gold"),
    (["x > 2"], ["x = 2"], "NV", "", None, False, "a bound stated as an equality"),
    ([r"x = \pm 2"], ["x = 2"], "NV", "", None, False, "one sign of a +- pair"),
    ([r"v_{\max} = 3\,\mathrm{m/s}"], [r"v_{\min} = 3\,\mathrm{m/s}"], "NV", "", None, False, "other subscript"),
    ([r"T_1 = 300\,\mathrm{K}, T_2 = 400\,\mathrm{K}"], [r"T_2 = 300\,\mathrm{K}, T_1 = 400\,\mathrm{K}"], "NV", "", None, False, "labels swapped"),
    ([r"\frac{mg}{2}, mg"], [r"mg, \frac{mg}{2}"], "EX", "", None, False, "unlabelled parts in another order"),
    (["C, B, A"], ["A, B, C"], "QL", "", None, False, "a ranking reversed"),
    (["3"], ["5", "3"], "NV", "", None, False, "two different boxes for one slot"),
    (["2", "3"], ["7", "2"], "ALT", "NV,NV", None, False, "ALT: a wrong box beside a right one"),
    (["2", "3"], ["3", "2"], "ALT", "NV,NV", None, True, "ALT: both boxes accepted alternatives"),
    # adversarial twins, round 2
    (["x^2+y^2=R^2"], ["x(x^2+y^2)=xR^2"], "EQ", "", None, False, "multiplied by a factor that can vanish"),
    (["PV=nRT"], ["PV^2=nRTV"], "EQ", "", None, False, "multiplied by a variable"),
    (["mv^2"], [r"\frac{mv^2}{2} = mv^2"], "EX", "", None, False, "a wrong link before a right one"),
    ([r"\frac{180}{181}c"], [r"\frac{180}{181}c = 0.985c"], "EX", "", None, False, "a rounding beyond its precision"),
    ([r"\frac{kq}{r^2}\hat{r}"], [r"\frac{kq}{r^2}\vec{r}"], "EX", "", None, False, "unit vector vs position vector"),
    ([r"\frac{1}{2} k x^2"], [r"\frac{1}{2} k_B x^2"], "EX", "", None, False, "a spring constant is no k_B"),
    ([r"\text{increases; decreases}"], [r"\text{decreases; increases}"], "QL", "", None, False, "unlabelled clauses in order"),
    ([r"\text{clockwise}"], [r"\text{clockwise (viewed from below)}"], "QL", "", None, False, "a gloss may qualify"),
    ([r"\text{counterclockwise}"], [r"\text{anticlockwise}"], "QL", "", None, True, "synonym"),
    ([r"\text{Red (longer wavelength)}"], [r"\text{longer wavelength}"], "QL", "", None, False, "a description is no designation"),
    (["B"], [r"\text{B (or C)}"], "MC", "", None, False, "hedge in parentheses"),
    (["A"], [r"\text{A is incorrect}"], "MC", "", None, False, "negated letter"),
    (["True"], [r"\text{True, but only for small angles}"], "TF", "", None, False, "qualified truth value"),
    ([r"\frac{kQ}{r^2}"], [r"\frac{kQ}{r^2} \text{ for } r < R"], "EX", "", None, False, "an added condition"),
    (["v_1 = 2, v_2 = 3"], ["3, 2"], "NV", "", None, False, "unlabelled values against labels, swapped"),
    (["v_1 = 2, v_2 = 3"], ["2, 3"], "NV", "", None, True, "unlabelled values against labels, in order"),
    (["15"], [r"15\ \text{lakh}"], "NV", "", None, False, "a scale word that is no plural noun"),
    (["2", "2"], [r"2\,\mathrm{s}", r"2\,\mathrm{s}"], "TUP", "NV,NV", r"\mathrm{km}, \mathrm{s}", False, "equal golds keep their own hints"),
    # adversarial twins, round 3
    ([r"A\sin kx\cos\omega t"], [r"A\sin(kx)\cos(\omega)\, t"], "EX", "", None, False, "an unintended reading of the gold"),
    ([r"A\cos\omega t"], [r"A\cos(\omega t)"], "EX", "", None, True, "the conventional reading"),
    ([r"|q|"], ["q"], "EX", "", None, False, "absolute value sampled with signs"),
    ([r"x \in [1, 3]"], ["1 < x < 3"], "IN", "", None, False, "closed vs open ends"),
    ([r"x \in (-1, 2)"], ["0 < x < 2"], "IN", "", None, False, "negative values are not assumed away"),
    ([r"2H_2 + O_2 \to 2H_2O"], [r"H_2 + 2O_2 \to 2H_2O"], "EX", "", None, False, "coefficients stay with their species"),
    ([r"\pi^0 \to 2\gamma"], [r"\pi^0 \to \gamma + \gamma"], "EX", "", None, True, "a coefficient written out"),
    ([r"v = \pm\sqrt{2gh}"], [r"v = \pm\sqrt{2hg}"], "EQ", "", None, True, "+- equations"),
    ([r"v = \pm\sqrt{2gh}"], [r"v = \sqrt{2gh}"], "EQ", "", None, False, "one of two +- solutions"),
    # --- symbols, aliases, identities -------------------------------------------------------------
    ([r"\frac{Q}{4\pi\varepsilon_0 R}"], [r"\frac{Q}{4\pi\epsilon_0 R}"], "EX", "", None, True, "epsilon glyphs"),
    ([r"\frac{h}{2 m L}"], [r"\frac{\pi\hbar}{m L}"], "EX", "", None, True, "h = 2 pi hbar"),
    ([r"\frac{h}{2 m L}"], [r"\frac{\hbar}{m L}"], "EX", "", None, False, "h vs hbar without 2 pi"),
    ([r"\mu_0 n I"], [r"\frac{n I}{\varepsilon_0 c^2}"], "EX", "", None, True, "mu0 = 1/(eps0 c^2)"),
    ([r"\frac{3}{2} k_B T"], [r"\frac{3}{2} k T"], "EX", "", None, True, "k for k_B"),
    ([r"\frac{3}{2} k_B T"], [r"\frac{5}{2} k T"], "EX", "", None, False, "k for k_B, wrong factor"),
    ([r"N e^{-\beta E}"], [r"N e^{-E/(k_B T)}"], "EX", "", None, True, "beta = 1/(k_B T)"),
    ([r"\frac{1}{\sqrt{1-\beta^2}}"], [r"\frac{1}{\sqrt{1-v^2/c^2}}"], "EX", "", None, True, "beta = v/c"),
    ([r"\mathbf{F} = q\,\vec{E}"], [r"\vec F = q E"], "EX", "", None, True, "vector markup"),
    ([r"\hat{x} \times \hat{y}"], [r"\hat{y} \times \hat{x}"], "EX", "", None, False, "cross product is not commutative"),
    ([r"\frac{\mathrm{d}p}{\mathrm{d}t}"], [r"\frac{dp}{dt}"], "EX", "", None, True, "upright d"),
    ([r"\frac{\mathrm{d}p}{\mathrm{d}t}"], [r"\frac{p}{t}"], "EX", "", None, False, "a derivative is no quotient"),
    ([r"\frac{\partial (A+B)}{\partial x}"], [r"\partial_x A + \partial_x B"], "EX", "", None, True, "linearity, del_x"),
    ([r"T\,\mathrm{d}S - p\,\mathrm{d}V"], [r"T\,\mathrm{d}V - p\,\mathrm{d}S"], "EX", "", None, False, "differentials are symbols"),
    ([r"\psi(x, t)"], [r"\psi"], "EX", "", None, True, "arguments left implicit"),
    ([r"\psi(x, t)"], [r"\psi(t, x)"], "EX", "", None, False, "arguments in another order"),
    ([r"\left(\frac{\partial U}{\partial V}\right)_{T}"], [r"\left(\frac{\partial U}{\partial V}\right)_{S}"], "EX", "", None, False, "held-constant variable"),
    # --- expressions ----------------------------------------------------------------------------
    ([r"\frac{1}{2} g \sin\theta\, \hat{x}"], [r"\frac{g\sin\theta}{2}\hat{x}"], "EX", "", None, True, "brace-less sine argument"),
    ([r"\mathrm{sech}^2(x)"], [r"\frac{1}{\cosh^2 x}"], "EX", "", None, True, "sech"),
    ([r"x \coth x"], [r"x\frac{\cosh x}{\sinh x}"], "EX", "", None, True, "coth is not cot(h x)"),
    ([r"\frac{1}{3} m g"], [r"0.333\, m g"], "EX", "", None, True, "decimal at its written precision"),
    ([r"\frac{1}{3} m g"], [r"0.35\, m g"], "EX", "", None, False, "decimal that is not 1/3"),
    ([r"\sqrt{a^2 + \sin 2x}"], [r"\sqrt{a^2 + \sin 2.1x}"], "EX", "", None, False, "a diluted decimal constant"),
    ([r"\frac{180}{181} c"], [r"0.9945\, c"], "EX", "", None, True, "decimal within its written precision"),
    ([r"\frac{180}{181} c"], [r"0.9950\, c"], "EX", "", None, False, "decimal beyond its written precision"),
    ([r"\frac{a}{e^{x} - 1}"], [r"\frac{a}{e^{x} - 1.05}"], "EX", "", None, False, "a decimal constant is no rounding"),
    ([r"\sqrt{x^2}"], [r"|x|"], "EX", "", None, True, "branches at positive points"),
    ([r"\ln(ab)"], [r"\ln a + \ln b"], "EX", "", None, True, "log rules"),
    ([r"\frac{q}{4\pi\varepsilon_0 r}"], [r"\frac{q}{4\pi\varepsilon_0 r}\,\mathrm{V}"], "EX", "", None, True, "trailing unit on an expression"),
    ([r"\frac{q}{4\pi\varepsilon_0 r}\,\mathrm{V}"], [r"\frac{1000 q}{4\pi\varepsilon_0 r}\,\mathrm{mV}"], "EX", "", None, True, "unit converted by a factor"),
    ([r"\frac{q}{4\pi\varepsilon_0 r}\,\mathrm{V}"], [r"\frac{q}{4\pi\varepsilon_0 r}\,\mathrm{mV}"], "EX", "", None, False, "unit off by 1000"),
    ([r"a \begin{pmatrix} 1 & 0 \\ 0 & -1 \end{pmatrix}"], [r"\begin{pmatrix} a & 0 \\ 0 & -a \end{pmatrix}"], "EX", "", None, True, "matrices"),
    ([r"a \begin{pmatrix} 1 & 0 \\ 0 & -1 \end{pmatrix}"], [r"\begin{pmatrix} a & 0 \\ 0 & a \end{pmatrix}"], "EX", "", None, False, "matrix entry"),
    ([r"F = k \int_0^L x\,\mathrm{d}x"], [r"F = \int_0^L k x\,\mathrm{d}x"], "EX", "", None, True, "integral is linear"),
    ([r"F = k \int_0^L x\,\mathrm{d}x"], [r"F = \int_0^{2L} k x\,\mathrm{d}x"], "EX", "", None, False, "other limits"),
    # --- equations ------------------------------------------------------------------------------
    (["v = \\sqrt{2 g h}"], ["v^2 = 2 g h"], "EQ", "", None, True, "squared: the same set for the positive v the gold states"),
    (["v = \\sqrt{2 g h}"], ["v^2 = g h"], "EQ", "", None, False, "squared, factor lost"),
    (["E = \\frac{p^2}{2m}"], ["2 m E = p^2"], "EQ", "", None, True, "multiplied by 2m"),
    (["E = \\frac{p^2}{2m}"], ["2 m E = p^3"], "EQ", "", None, False, "wrong power"),
    (["x = \\frac{a}{b}"], ["x b = a"], "EQ", "", None, True, "multiplied by b"),
    (["x = \\frac{a}{b}"], ["x^2 b = a x"], "EQ", "", None, False, "factor containing the unknown"),
    (["m\\ddot{x} + k x = 0"], ["m\\ddot{x} = -k x"], "EQ", "", None, True, "term moved"),
    (["m\\ddot{x} + k x = 0"], ["m\\ddot{x} = k x"], "EQ", "", None, False, "term moved, sign lost"),
    ([r"y = \frac{x}{\sqrt{1-u^2}}"], [r"\sqrt{1-u^2}\,y = x"], "EQ", "", None, True, "multiplied by a root"),
    (["a = 1, b = 2"], ["b = 2, a = 1"], "EQ", "", None, True, "labelled set, other order"),
    (["a = 1, b = 2"], ["a = 2, b = 1"], "EQ", "", None, False, "labels swapped"),
    ([r"\begin{aligned} x &= 1 \\ y &= 2 \end{aligned}"], ["x = 1, y = 2"], "EQ", "", None, True, "aligned rows"),
    ([r"x = 1 \quad y = 2"], ["y = 2, x = 1"], "EQ", "", None, True, "quad-separated equations"),
    (["n=1, l=0; n=2, l=1"], ["l=0, n=1; l=1, n=2"], "EQ", "", None, True, "groups of labelled values"),
    (["n=1, l=0; n=2, l=1"], ["n=1, l=1; n=2, l=0"], "EQ", "", None, False, "groups mixed up"),
    # --- lists, labels, conditions, prose --------------------------------------------------------
    ([r"E_1 = 2a, E_2 = 3a"], [r"E_{1} = 2a, E_{2} = 3a"], "EX", "", None, True, "labelled list"),
    ([r"E_1 = 2a, E_2 = 3a"], [r"E_1 = 3a, E_2 = 2a"], "EX", "", None, False, "labelled list swapped"),
    ([r"^{2}S_{1/2}, ^{2}P_{1/2, 3/2}"], [r"^{2}P_{1/2}, ^{2}S_{1/2}, ^{2}P_{3/2}"], "EX", "", None, True, "collective subscript"),
    ([r"V = 0 \text{ for } x < 0"], [r"V = 0\ \text{for } x<0"], "EX", "", None, True, "same condition"),
    ([r"V = 0 \text{ for } x < 0"], [r"V = 0 \text{ for } x > 0"], "EX", "", None, False, "other condition"),
    ([r"\frac{2}{3} v \text{ directed along } \hat{z}"], [r"\frac{2}{3}v \text{ directed along } \hat{y}"], "EX", "", None, False, "formula after words"),
    ([r"\frac{2}{3} v \text{ directed along } \hat{z}"], [r"\frac{2v}{3} \text{ directed along } \hat{z}"], "EX", "", None, True, "words between formulas"),
    ([r"3 m \text{ (upward)}"], [r"3m"], "EX", "", None, True, "trailing remark"),
    (["L=1, S=0, J=1; L=0, S=1/2, J=1/2"], [r"{}^{1}P_{1},\ {}^{2}S_{1/2}"], "EQ", "", None, True, "term symbols for quantum numbers"),
    (["L=1, S=0, J=1; L=0, S=1/2, J=1/2"], [r"{}^{1}P_{2},\ {}^{2}S_{1/2}"], "EQ", "", None, False, "term symbol with another J"),
    ([r"\beta \approx 1"], [r"v \approx c"], "NV", "", None, True, "beta = 1 as v = c"),
    ([r"\beta \approx 1"], [r"v \approx 2c"], "NV", "", None, False, "beta = 1 vs v = 2c"),
    # --- reactions ------------------------------------------------------------------------------
    ([r"\pi^{+} \to \mu^{+} + \nu_{\mu}"], [r"\pi^+ \rightarrow \nu_\mu \mu^+"], "EX", "", None, True, "decay, other order"),
    ([r"\pi^{+} \to \mu^{+} + \nu_{\mu}"], [r"\pi^+ \rightarrow \mu^+ + \bar{\nu}_\mu"], "EX", "", None, False, "antineutrino"),
    ([r"^{14}_{6}C \to ^{14}_{7}N + e^- + \bar\nu_e"], [r"{}^{14}_{6}\mathrm{C}\to{}^{14}_{7}\mathrm{N}+e^{-}+\bar{\nu}_{e}"], "EX", "", None, True, "nuclear decay"),
    # --- intervals and inequalities ---------------------------------------------------------------
    ([r"[2, \infty)"], [r"x \ge 2"], "IN", "", None, True, "half-line as inequality"),
    ([r"[2, \infty)"], [r"x > 2"], "IN", "", None, False, "strictness"),
    ([r"(a, b)"], [r"a < \omega < b"], "IN", "", None, True, "double inequality"),
    ([r"\frac{v^2}{g} < R"], [r"v^2 < g R"], "IN", "", None, True, "scaled by a positive factor"),
    ([r"\frac{v^2}{g} < R"], [r"v^2 > g R"], "IN", "", None, False, "flipped"),
    ([r"\left(\frac{b}{2m}\right)^2 < \frac{k}{m}"], [r"b \in \left(0, 2\sqrt{k m}\right)"], "IN", "", None, True, "membership against an inequality"),
    ([r"\left(\frac{b}{2m}\right)^2 < \frac{k}{m}"], [r"b \in \left(0, \sqrt{k m}\right)"], "IN", "", None, False, "membership with a wrong bound"),
    ([r"x \ge 1"], [r"x \in [1, \infty)"], "IN", "", None, True, "membership in a half-line"),
    # --- chains, options, extra conditions ---------------------------------------------------------
    ([r"\frac{3}{7} g"], [r"a = \frac{3}{7} g \approx 0.43 g"], "EX", "", None, True, "exact link then a rounded one"),
    ([r"\frac{3}{7} g"], [r"a = \frac{3}{7} g \approx 0.5 g"], "EX", "", None, False, "exact link then a wrong rounding"),
    ([r"\text{Lyra}", r"\text{Cygnus}"], [r"\text{Lyra or Cygnus}"], "ALT", "QL,QL", None, True, "both accepted options named"),
    ([r"\text{Lyra}", r"\text{Cygnus}"], [r"\text{Lyra or Orion}"], "ALT", "QL,QL", None, False, "a wrong option named"),
    ([r"F = q v B"], [r"F = q v B \quad \text{for } v \perp B"], "EQ", "", None, False, "a condition the gold does not state"),
    ([r"U = F x"], [r"U = F x \quad \text{with } F = 10\,\mathrm{N}"], "EQ", "", None, False, "a definition the gold does not state"),
    ([r"2mg \text{ upward}"], [r"2mg \text{ downward}"], "EX", "", None, False, "other direction in words"),
    ([r"2mg \text{ upward}"], [r"2 m g\ \text{upward}"], "EX", "", None, True, "same direction in words"),
    ([r"\frac{\mu_0 I}{2\pi r} \text{ (counterclockwise)}"], [r"\frac{\mu_0 I}{2\pi r} \text{ (clockwise)}"], "EX", "", None, False, "other sense in a remark"),
    ([r"t = 3.2\,\mathrm{s}"], [r"t = \frac{2 v_0}{g} = 3.2\,\mathrm{s}"], "NV", "", None, True, "a symbolic link before the value"),
    # --- MC / TF / QL ------------------------------------------------------------------------------
    (["C"], [r"\text{(C) } T = 2\pi\sqrt{L/g}"], "MC", "", None, True, "letter with option formula"),
    (["C"], [r"\text{(B) } T = 2\pi\sqrt{L/g}"], "MC", "", None, False, "other letter with formula"),
    (["C"], ["A or C"], "MC", "", None, False, "hedging"),
    (["True"], [r"\text{Yes: the energy is conserved}"], "TF", "", None, True, "truth word with reason"),
    (["True"], [r"\text{No, the energy is not conserved}"], "TF", "", None, False, "false with reason"),
    ([r"\text{The electric field lines}"], [r"\text{electric-field line}"], "QL", "", None, True, "articles, hyphens, plurals"),
    ([r"\text{polarised light}"], [r"\text{Polarized light}"], "QL", "", None, True, "British spelling"),
    ([r"\text{Star A: red giant; Star B: white dwarf}"], [r"\text{Star B: white dwarf; Star A: red giant}"], "QL", "", None, True, "clauses in another order"),
    ([r"\text{Star A: red giant; Star B: white dwarf}"], [r"\text{Star A: white dwarf; Star B: red giant}"], "QL", "", None, False, "clauses swapped between subjects"),
    ([r"\text{Star A: red giant; Star B: white dwarf}"], [r"\text{Star A: red giant (or supergiant); Star B: white dwarf}"], "QL", "", None, False, "hedging gloss"),
    ([r"\text{Orion Nebula (M42)}"], [r"\text{M42}"], "QL", "", None, True, "name or designation"),
    ([r"\text{the pressure increases}"], [r"\text{the pressure decreases}"], "QL", "", None, False, "opposite"),
    (["\\text{Lyra}", "\\text{Cygnus}"], ["\\text{cygnus}"], "ALT", "QL,QL", None, True, "ALT any-of"),
]


@pytest.mark.parametrize("gold,pred,atype,ts,unit,expected,why", CASES, ids=[f"{c[2]}-{c[6]}" for c in CASES])
def test_physics_cases(verifier: Verifier, gold: list[str], pred: list[str], atype: str, ts: str, unit: object, expected: bool, why: str) -> None:
    v = verifier.verify(gold, pred, atype, ts, gold_unit=unit)  # type: ignore[arg-type]
    assert isinstance(v, Verdict)
    assert v.correct is expected, f"{why}: {v.reason}"


def test_split_hints() -> None:
    assert split_hints(None, 2) == [None, None]
    assert split_hints(r"\mathrm{m}, \text{None}", 2) == [r"\mathrm{m}", None]
    assert split_hints(r"\mathrm{m}", 3) == [r"\mathrm{m}"] * 3
    assert split_hints(r"\mathrm{m}, \mathrm{s}", 1) == [r"\mathrm{m}, \mathrm{s}"]  # one box, several values
    assert split_hints(["kg", None], 2) == ["kg", None]
    assert split_hints("a, b, c", 2) == [None, None]  # wrong length: ignored
    assert split_hints(12, 1) == ["12"]


def test_answer_parts_and_units() -> None:
    assert answer_parts(r"x = 1, y = (2, 3); z = 4") == [["x = 1", "y = (2, 3)"], ["z = 4"]]
    assert answer_parts(r"\begin{aligned} a &= 1, \\ b &= 2 \end{aligned}") == [["a = 1", "b = 2"]]
    assert split_unit_suffix(r"\frac{q}{r}\,\mathrm{V}") == (r"\frac{q}{r}", "V")
    assert split_unit_suffix(r"q\,a^{-1}") == (r"q\,a^{-1}", "")  # a bare letter is a symbol
    assert [p for p, _ in prose_segments(r"a \text{ for all } b")] == [False, True, False]


def test_tolerance_policy() -> None:
    assert close_enough(1.009, 1.0) and not close_enough(1.011, 1.0)
    assert close_enough(0.0, 0.0) and not close_enough(1e-6, 0.0)
    q = parse_quantity("0.3")
    assert q is not None and abs(q.resolution - 0.05) < 1e-12
    assert close_enough(0.305, 0.3, resolution=q.resolution)
    assert not close_enough(0.31, 0.3, resolution=q.resolution)  # capped at 2%
    assert close_enough(1.05, 1.0, rel_tol=0.06)  # the relative tolerance is configurable
