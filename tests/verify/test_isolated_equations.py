"""EQ golds solved for one symbol (X = f) are compared by their right sides, not by the ratio of X - f to X - g.

That ratio is close to 1 wherever f and g are small beside the sampled X, so a right side off by a factor
2 passed as "equations proportional" (the mutation sweep found it on a real UGPhysics gold).
"""

from __future__ import annotations

import pytest

from studybench.verify import Verifier

THETA = (r"\theta=\arctan \left[\frac{\beta^{\prime} \sin \theta^{\prime}}{1000\left(\beta^{\prime} \cos \theta^{\prime}"
         r"+0.9999995\right)}\right]")


CASES = [
    # right forms: the same right side written otherwise, or the equation in another form
    (THETA, THETA.replace(r"\left[", "(").replace(r"\right]", ")"), True),
    (THETA, r"\tan\theta = \frac{\beta' \sin \theta'}{1000(\beta' \cos \theta' + 0.9999995)}", True),
    (r"v = \sqrt{2gh}", r"v = (2gh)^{1/2}", True),
    (r"x = \frac{1}{2} a t^2", r"x = a t^2 / 2", True),
    (r"\delta = 10^{-3} \frac{L}{R}", r"\delta = \frac{L}{1000 R}", True),
    # wrong twins: small right sides off by a factor, a term, a sign
    (THETA, THETA.replace("1000", "2000"), False),
    (THETA, THETA.replace("1000", "1100"), False),
    (THETA, THETA.replace("+0.9999995", "-0.9999995"), False),
    (r"\delta = 10^{-3} \frac{L}{R}", r"\delta = 2\times 10^{-3} \frac{L}{R}", False),
    (r"\delta = 10^{-3} \frac{L}{R}", r"\delta = 10^{-3} \frac{R}{L}", False),
    (r"\epsilon = \frac{m}{1000 M}", r"\epsilon = -\frac{m}{1000 M}", False),
]


@pytest.mark.parametrize("gold,pred,want", CASES)
def test_isolated_equations(verifier: Verifier, gold: str, pred: str, want: bool) -> None:
    v = verifier.verify([gold], [pred], "EQ", [])
    assert v.correct is want, v.reason


def test_a_symbol_inside_a_transcendental_function_is_not_solved_for_when_others_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    """SymPy took about 95 s to solve the arctan case for theta' (inside sin and cos) and returned nothing; the
    verdict is decided by the isolated symbol and the algebraic ones, with no clock involved (a count of solves)."""
    import sympy as sp

    from studybench.verify.comparison import equation_forms as eq_forms

    th, b, tp = sp.symbols("theta b tp")
    c = sp.Float("0.9999995")
    gold = (th, sp.atan(b * sp.sin(tp) / (1000 * (b * sp.cos(tp) + c))))
    right = (sp.tan(th), b * sp.sin(tp) / (1000 * (b * sp.cos(tp) + c)))
    wrong = (sp.tan(th), b * sp.sin(tp) / (2000 * (b * sp.cos(tp) + c)))
    solved: list[sp.Symbol] = []
    real_solve = eq_forms._solve
    monkeypatch.setattr(eq_forms, "_solve", lambda expr, x: solved.append(x) or real_solve(expr, x))
    assert eq_forms.same_solution_sets(*gold, *right, target=th)[0] is True
    assert tp not in solved and th in solved
    solved.clear()
    assert eq_forms.same_solution_sets(*gold, *wrong, target=th)[0] is False
    # with no isolated symbol and nothing algebraic to decide, the transcendental symbols are still tried
    x, a = sp.symbols("x a")
    solved.clear()
    assert eq_forms.same_solution_sets(sp.exp(x), a, x, sp.log(a), target=None)[0] is True
    assert x in solved
