r"""Verifier round 2 (issue 14), kinds 4, 5 and 9: vector algebra, notation, MC / TF / QL small forms.

Every accepted form comes with wrong twins (a reordered cross product without its sign, a changed
power, a swapped component, another option, a hedge) that must stay rejected. Several golds are real
test-set golds (application / transfer) rewritten the way a careful grader would still accept.
"""

from __future__ import annotations

import pytest

from studybench.verify import Verifier
from studybench.verify.comparison.vectors import has_vector_markup, vector_equal
from studybench.verify.reading.latex import bar_to_prime, value_link, vector_tuple

# (gold, prediction, answer type, expected, why)
VECTORS = [
    (r"-q\vec{B}\times\vec{v}", r"q\vec{v}\times\vec{B}", "EX", True, "cross product reordered, sign compensated"),
    (r"-q\vec{B}\times\vec{v}", r"q\vec{B}\times\vec{v}", "EX", False, "sign dropped"),
    (r"-q\vec{B}\times\vec{v}", r"-q\vec{v}\times\vec{B}", "EX", False, "reordered without the sign"),
    (r"q(\vec{v}\times\vec{B})", r"\vec{v}\times(q\vec{B})", "EX", True, "scalar moved into the cross product"),
    (r"q(\vec{v}\times\vec{B})", r"\vec{B}\times(q\vec{v})", "EX", False, "scalar moved, order flipped"),
    (r"q(\vec{v}\times\vec{B})", r"\vec{v}\times(2q\vec{B})", "EX", False, "changed factor"),
    (r"m\vec{r}\times\vec{v}", r"\vec{r}\times m\vec{v}", "EX", True, "implicit product as the right operand"),
    (r"\vec{a}\times\vec{b}+\vec{c}\times\vec{d}", r"\vec{c}\times\vec{d}+\vec{a}\times\vec{b}", "EX", True, "sum in any order"),
    (r"\vec{a}\times\vec{b}+\vec{c}\times\vec{d}", r"\vec{d}\times\vec{c}+\vec{a}\times\vec{b}", "EX", False, "one term reordered"),
    (r"\frac{kq\hat{r}}{r^2}", r"\frac{kq\vec{r}}{r^3}", "EX", True, "unit vector over r^2 = vector over r^3"),
    (r"\frac{kq\hat{r}}{r^2}", r"\frac{kq\hat{r}}{r^3}", "EX", False, "hat r over r^3"),
    (r"\frac{kq\vec{r}}{r^3}", r"\frac{kq\hat{r}}{r^3}", "EX", False, "vec r vs hat r over r^3"),
    (r"\mathbf{F} = q\mathbf{v}\times\mathbf{B}", r"-q\mathbf{B}\times\mathbf{v}", "EX", True, "bold vectors, gold with left side"),
    (r"\mathbf{F} = q\mathbf{v}\times\mathbf{B}", r"q\mathbf{B}\times\mathbf{v}", "EX", False, "bold, sign dropped"),
    (r"\vec{a}\times(\vec{b}\times\vec{c})", r"\vec{b}(\vec{a}\cdot\vec{c})-\vec{c}(\vec{a}\cdot\vec{b})", "EX", True, "BAC-CAB"),
    (r"\vec{a}\times(\vec{b}\times\vec{c})", r"(\vec{a}\times\vec{b})\times\vec{c}", "EX", False, "cross product not associative"),
    (r"\begin{pmatrix}1\\2\\3\end{pmatrix}", r"(1, 2, 3)", "EX", True, "column vector vs tuple"),
    (r"\begin{pmatrix}1\\2\\3\end{pmatrix}", r"(2, 1, 3)", "EX", False, "component swapped"),
    (r"\begin{pmatrix}1\\2\\3\end{pmatrix}", r"(1, 2, 4)", "EX", False, "component changed"),
    (r"(a, b, c)", r"\begin{pmatrix}a\\b\\c\end{pmatrix}", "EX", True, "tuple vs column vector"),
    (r"(a, b, c)", r"\begin{pmatrix}b\\a\\c\end{pmatrix}", "EX", False, "tuple vs column, swapped"),
    (r"(a, b, c)", r"\begin{pmatrix}a & b & c\end{pmatrix}", "EX", True, "tuple vs row vector"),
    # real golds (application / transfer test sets) rewritten
    (r"\mathbf{E} = \frac{q}{4\pi\epsilon_0(1+\chi_e)}\frac{\hat{\mathbf{r}}}{r^2}",
     r"\frac{q\,\mathbf{r}}{4\pi\epsilon_0(1+\chi_e)r^3}", "EX", True, "field of a point charge in a dielectric"),
    (r"\mathbf{E} = \frac{q}{4\pi\epsilon_0(1+\chi_e)}\frac{\hat{\mathbf{r}}}{r^2}",
     r"\frac{q\,\hat{\mathbf{r}}}{4\pi\epsilon_0(1+\chi_e)r^3}", "EX", False, "hat r over r^3"),
    (r"\mathbf{F} = q_{m}\left(\mathbf{B} - \frac{1}{c^{2}}\mathbf{v} \times \mathbf{E}\right)",
     r"q_m\mathbf{B} + \frac{q_m}{c^2}\mathbf{E}\times\mathbf{v}", "EX", True, "force on a monopole"),
    (r"\mathbf{F} = q_{m}\left(\mathbf{B} - \frac{1}{c^{2}}\mathbf{v} \times \mathbf{E}\right)",
     r"q_m\mathbf{B} + \frac{q_m}{c^2}\mathbf{v}\times\mathbf{E}", "EX", False, "monopole, sign lost"),
    (r"\vec v=\Omega\,\hat z\times \vec R+r\,\vec\omega\times\hat z", r"\Omega\hat{z}\times\vec{R} - r\hat{z}\times\vec{\omega}", "EX", True, "rolling ball"),
    (r"\vec v=\Omega\,\hat z\times \vec R+r\,\vec\omega\times\hat z", r"\Omega\hat{z}\times\vec{R} + r\hat{z}\times\vec{\omega}", "EX", False, "rolling ball, sign"),
    (r"\vec a = \frac{I}{I+mr^2}\,\Omega\,\hat z\times\vec v", r"-\frac{I\Omega}{I+mr^2}\vec v\times\hat z", "EX", True, "ball on a turntable"),
    (r"\vec a = \frac{I}{I+mr^2}\,\Omega\,\hat z\times\vec v", r"-\frac{I\Omega}{I+mr}\vec v\times\hat z", "EX", False, "changed power"),
    (r"\vec R(t)=\vec R_0\cos(\Omega_0 t)+\left(\hat z\times \vec R_0\right)\sin(\Omega_0 t)",
     r"\vec R_0\cos(\Omega_0 t)-\sin(\Omega_0 t)\,\vec R_0\times\hat z", "EX", True, "circular orbit"),
    (r"\vec R(t)=\vec R_0\cos(\Omega_0 t)+\left(\hat z\times \vec R_0\right)\sin(\Omega_0 t)",
     r"\vec R_0\sin(\Omega_0 t)+\cos(\Omega_0 t)\,\hat z\times\vec R_0", "EX", False, "sin and cos swapped"),
    (r"\vec{f} = -\frac{\alpha Q^2}{8\pi^2 \varepsilon_0^2 r^5} \hat{r}", r"-\frac{\alpha Q^2\vec r}{8\pi^2 \epsilon_0^2 r^6}", "EX", True, "induced dipole force"),
    (r"\vec{f} = -\frac{\alpha Q^2}{8\pi^2 \varepsilon_0^2 r^5} \hat{r}", r"\frac{\alpha Q^2\vec r}{8\pi^2 \epsilon_0^2 r^6}", "EX", False, "attraction became repulsion"),
]

NOTATION = [
    (r"E(n) = -\frac{13.6}{n^2}", r"E[n] = -\frac{13.6}{n^2}", "EX", True, "call vs bracket form"),
    (r"E(2)", r"E[2]", "EX", True, "call vs bracket at a number"),
    (r"E(0)", r"0", "EX", False, "E(0) is no product E times 0"),
    (r"E(0)", r"V(0)", "EX", False, "another function at 0"),
    (r"E(2)", r"2E", "EX", False, "E(2) is no product"),
    (r"E(1)", r"E", "EX", False, "the argument of an evaluation is not dropped"),
    (r"f'(0)", r"f(0)", "EX", False, "derivative vs function at 0"),
    (r"v(1+\beta)", r"v + v\beta", "EX", True, "a symbol before a bracket of terms is still a product"),
    (r"f'(x_0)", r"\left.\frac{df}{dx}\right|_{x=x_0}", "EX", True, "prime vs evaluated Leibniz"),
    (r"f'(x_0)", r"\left.\frac{df}{dx}\right|_{x=x_1}", "EX", False, "other point"),
    (r"f'(x_0)", r"\left.\frac{dg}{dx}\right|_{x=x_0}", "EX", False, "other function"),
    (r"2f'(a)", r"2\frac{\mathrm{d}f}{\mathrm{d}x}\Big|_{x=a}", "EX", True, "upright d, Big bar"),
    (r"\left.\frac{df}{dx}\right|_{x=0}", r"f'(0)", "EX", True, "Leibniz gold, prime prediction"),
    (r"\left.\frac{df}{dx}\right|_{x=0}", r"f(0)", "EX", False, "not the derivative"),
    (r"1 + x + \frac{x^2}{2} + \cdots", r"\sum_{n=0}^{\infty}\frac{x^n}{n!}", "EX", True, "dots vs sum"),
    (r"1 + x + \frac{x^2}{2} + \cdots", r"\sum_{n=0}^{\infty}\frac{x^n}{n}", "EX", False, "other general term"),
    (r"1 + x + \frac{x^2}{2} + \cdots", r"\sum_{n=1}^{\infty}\frac{x^n}{n!}", "EX", False, "other start"),
    (r"\sum_{n=1}^{\infty}\frac{1}{n^2}", r"1 + \frac{1}{4} + \frac{1}{9} + \dots", "EX", True, "sum vs first terms"),
    (r"\sum_{n=1}^{\infty}\frac{1}{n^2}", r"1 + \frac{1}{2} + \frac{1}{3} + \dots", "EX", False, "harmonic instead"),
    (r"\sum_{n=1}^{\infty}\frac{1}{n^2}", r"1 + \frac{1}{4} + \dots", "EX", False, "two terms fix too little"),
    (r"x - \frac{x^3}{6} + \frac{x^5}{120} - \cdots", r"\sum_{k=0}^{\infty}\frac{(-1)^k x^{2k+1}}{(2k+1)!}", "EX", True, "alternating sum"),
    (r"x - \frac{x^3}{6} + \frac{x^5}{120} - \cdots", r"\sum_{k=0}^{\infty}\frac{x^{2k+1}}{(2k+1)!}", "EX", False, "signs lost"),
    (r"x - \frac{x^3}{6} + \frac{x^5}{120} - \cdots", r"x - \frac{x^3}{3!} + \frac{x^5}{5!} - \ldots", "EX", True, "dots vs dots"),
    (r"x - \frac{x^3}{6} + \frac{x^5}{120} - \cdots", r"x + \frac{x^3}{3!} + \frac{x^5}{5!} + \ldots", "EX", False, "dots vs dots, signs"),
    (r"S = \sum_{n=1}^{\infty}\frac{1}{n^2}", r"S = 1 + \frac{1}{4} + \frac{1}{9} + \cdots", "EX", True, "both with a left side"),
    (r"0", r"I \to 0", "NV", True, "an arrow link states its value"),
    (r"1", r"I \to 0", "NV", False, "arrow link, other value"),
    (r"\frac{v}{2}", r"v_f \to \frac{v}{2}", "EX", True, "EX arrow link"),
    (r"\frac{v}{2}", r"v_f \to \frac{v}{3}", "EX", False, "EX arrow link, other value"),
    (r"3.2", r"x \approx 3.2", "NV", True, "approx link"),
    (r"3.2\,\mathrm{m}", r"\approx 3.2\,\mathrm{m}", "NV", True, "leading approx"),
    (r"3.2\,\mathrm{m}", r"\approx 3.5\,\mathrm{m}", "NV", False, "leading approx, other value"),
    (r"\frac{v}{2}", r"\approx \frac{v}{2}", "EX", True, "EX leading approx"),
    (r"\frac{v}{2}", r"\approx \frac{v}{3}", "EX", False, "EX leading approx, other value"),
    (r"p \to e^{+} + \nu", r"p \to e^{+} + \nu", "EX", True, "a reaction is still a reaction"),
    (r"p \to e^{+} + \nu", r"p = e^{+} + \nu", "EX", False, "a reaction is no value link"),
]

SMALL_FORMS = [
    (r"Jupiter", r"Jupiter (the largest planet)", "MC", True, "option text with a gloss"),
    (r"Jupiter", r"Saturn (the largest planet)", "MC", False, "other option with a gloss"),
    (r"Jupiter", r"Jupiter (or Saturn)", "MC", False, "a hedge in the gloss"),
    (r"Jupiter", r"Jupiter (not Saturn, B)", "MC", False, "another letter in the gloss"),
    (r"Jupiter (the largest planet)", r"Jupiter", "MC", False, "the gold's own gloss is kept"),
    (r"B", r"(B) Jupiter", "MC", True, "letter with option text"),
    (r"B", r"(C) Jupiter", "MC", False, "other letter with option text"),
    (r"Pluto", r"(a) Pluto", "MC", True, "letter prefix before the text"),
    (r"Yes", r"Yes.", "QL", True, "yes with a full stop"),
    (r"Yes", r"True", "QL", True, "yes/no gold judged like TF"),
    (r"No", r"No, because the field is uniform", "QL", True, "no with a justification"),
    (r"Yes", r"No.", "QL", False, "the other answer"),
    (r"Yes", r"seY", "QL", False, "no symbolic reading of Yes"),
    (r"Yes", r"Yes, but only when the field is uniform", "QL", False, "a hedge"),
    (r"No", r"Yes", "QL", False, "yes vs no"),
    (r"No", r"No, but only at low speeds; otherwise yes", "QL", False, "qualified no"),
]


# a function of a symbol and its variable swapped (the mutation sweep's two false accepts), with right twins
CALL_SWAPS = [
    (r"\frac{dn}{dx} = \frac{n(x)QE}{kT}", r"\frac{dn}{dx} = \frac{x(n)QE}{kT}", "EQ", False, "n(x) written x(n)"),
    (r"P(t) \approx 3t^2", r"t(P) \approx 3t^2", "EQ", False, "P(t) written t(P)"),
    (r"v(t)=at", r"t(v)=at", "EQ", False, "v(t) written t(v)"),
    (r"\rho(r) = \rho_0 r", r"r(\rho) = \rho_0 r", "EQ", False, "rho(r) written r(rho)"),
    (r"n(x) Q", r"x(n) Q", "EX", False, "n(x) written x(n) in an expression"),
    (r"v(t)=at", r"v(t)=ta", "EQ", True, "function form kept, product reordered"),
    (r"\rho(r) = \rho_0 r", r"\rho(r)=r\rho_0", "EQ", True, "greek function form kept"),
    (r"m(g+a)", r"m(a+g)", "EX", True, "a product with a bracket is not a call form"),
    (r"m(g)", r"g m", "EX", True, "product written without the bracket"),
    (r"x(t) = A\cos(\omega t)", r"x(t)=A\cos(t\omega)", "EQ", True, "argument of a function reordered"),
]


@pytest.mark.parametrize(("gold", "pred", "at", "expected", "why"), VECTORS + NOTATION + SMALL_FORMS + CALL_SWAPS,
                         ids=[c[4] for c in VECTORS + NOTATION + SMALL_FORMS + CALL_SWAPS])
def test_round2_notation(verifier: Verifier, gold: str, pred: str, at: str, expected: bool, why: str) -> None:
    v = verifier.verify([gold], [pred], at, "")
    assert v.correct is expected, f"{why}: {v.reason}"


def test_leading_approx_inside_a_box_of_a_response(verifier: Verifier) -> None:
    ok = verifier.verify_response(r"\boxed{3.2\,\mathrm{m}}", r"Final Answer: \boxed{\approx 3.2\,\mathrm{m}}", "NV", "")
    bad = verifier.verify_response(r"\boxed{3.2\,\mathrm{m}}", r"Final Answer: \boxed{\approx 4.2\,\mathrm{m}}", "NV", "")
    assert ok.correct and not bad.correct


def test_value_link() -> None:
    assert value_link(r"I \to 0") == "I = 0"
    assert value_link(r"\approx 3.2") == "3.2"
    assert value_link(r"v_{f} \rightarrow 5") == "v_{f} = 5"
    # not a label on the left, two arrows, an arrow inside braces: unchanged
    assert value_link(r"2 \to 3") == r"2 \to 3"
    assert value_link(r"a \to b \to c") == r"a \to b \to c"
    assert value_link(r"\lim_{x \to 0} f") == r"\lim_{x \to 0} f"


def test_vector_tuple() -> None:
    assert vector_tuple(r"\begin{pmatrix}1\\2\\3\end{pmatrix}") == "(1, 2, 3)"
    assert vector_tuple(r"\begin{bmatrix}a & b\end{bmatrix}") == "(a, b)"
    assert vector_tuple(r"\begin{pmatrix}1&2\\3&4\end{pmatrix}") is None  # a matrix, not a vector
    assert vector_tuple("(1, 2)") is None


def test_bar_to_prime() -> None:
    assert bar_to_prime(r"\left.\frac{df}{dx}\right|_{x=x_0}") == "f'(x_0)"
    assert bar_to_prime(r"\left.\frac{df}{dx}\right|_{t=0}") == r"\left.\frac{df}{dx}\right|_{t=0}"  # other variable


def test_vector_equal_reads_only_its_grammar() -> None:
    assert has_vector_markup(r"\hat z") and not has_vector_markup("x + y")
    assert vector_equal("x", "x") is None  # no vector: the symbolic path decides
    assert vector_equal(r"\vec a\times\vec b\times\vec c", r"(\vec a\times\vec b)\times\vec c") is None  # ambiguous chain
    assert vector_equal(r"\vec a \vec b", r"\vec b \vec a") is None  # two vectors side by side
    assert vector_equal(r"t\sin\omega\,\hat{x}", r"\sin\omega t\,\hat{x}") is None  # ambiguous argument
    assert vector_equal(r"\vec{v}\cdot\vec{v}", "v^2") is True
    assert vector_equal(r"\vec{v}\cdot\vec{v}", "v^3") is False
    assert vector_equal(r"\frac{\vec r}{r^3}", r"\frac{1}{r^2}") is False  # a vector is no scalar
