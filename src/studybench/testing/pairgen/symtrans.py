r"""Transformations computed with SymPy: equivalent forms of expressions and equations, and near misses.

Equivalent forms (label ``True``) of the expression part of a box (the right side of ``lhs = ...``,
whose left side is kept as written): the SymPy print, ``expand``, ``factor``, ``together``,
``cancel``, trigonometric and exponential rewrites, powers as roots and roots as powers, products
with ``\cdot`` / ``\times``, short fractions with a slash; exact numbers as decimals. Equations
(EQ slots): sides swapped, both sides scaled, everything moved to one side, squared (a positive
right side under a single-symbol left side), solved for another symbol, denominators cleared.

Near misses (label ``False``): a coefficient changed, an exponent changed, one term's sign
flipped, two symbols swapped, a term dropped.

Every candidate is checked numerically before it is kept (:mod:`studybench.testing.pairgen.sym`):
an equivalent form must agree with the gold at random points (an equation: each implies the other
where that can be checked), a near miss must clearly differ (an equation: the gold's solutions must
fail it).
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

import sympy as sp
from sympy.printing.latex import LatexPrinter
from sympy.simplify.fu import TR2i

from studybench.testing.pairgen.base import Candidate, Slot, Transformation, norm_ws
from studybench.testing.pairgen.sym import (
    Reading,
    ambiguous_reading,
    clearly_differ,
    equation_implies,
    linear_symbols,
    same_values,
    time_limit,
    to_latex,
)

__all__ = ["SYMBOLIC"]

_MATH = frozenset({"EX", "EQ", "NV"})
_STEP_S = 2.0


def _shown(r: Reading, rhs_text: str) -> str:
    return rhs_text if r.lhs_text is None else f"{r.lhs_text} = {rhs_text}"


def _reading(slot: Slot) -> Reading | None:
    """The slot's SymPy reading when a rewrite of it is safe: an NV box only when it is a pure number
    (letters in an NV box are units or named constants, not symbols)."""
    r = slot.reading
    if r is None or r.call_like:
        return None
    if slot.slot_type == "NV" and (r.rhs.free_symbols or r.lhs is not None):
        return None
    return r


def _printed_ok(text: str) -> bool:
    """SymPy's short-fraction print can write ``L_0 / R T`` for L_0/(R T): such text is not kept."""
    return ambiguous_reading(text) is None


def _no_vectors(r: Reading) -> bool:
    return not any(("\\" in s and any(m in s for m in ("\\vec", "\\mathbf", "\\hat", "\\boldsymbol", "\\bm", "\\overrightarrow")))
                   for s in r.names.values())


def _expr_form(name: str, fn: Callable[[Any], Any], **print_opts: Any) -> Callable[[Slot, Random], list[Candidate]]:
    """An equivalent form of the slot's expression part: ``fn(rhs)`` printed with ``print_opts``."""

    def apply(slot: Slot, rng: Random) -> list[Candidate]:
        r = _reading(slot)
        if r is None:
            return []
        with time_limit(_STEP_S):
            new = fn(r.rhs)
            if new is None:
                return []
            text = to_latex(new, r.names, **print_opts)
            plain = to_latex(r.rhs, r.names)
        if not _printed_ok(text):
            return []
        if name != "sympy" and norm_ws(text) == norm_ws(plain):
            return []  # the rewrite changed nothing the canonical print does not show
        if not same_values(r.rhs, new, r.symbols, rng):
            return []
        return [Candidate(_shown(r, text), ("expr", r.rhs, new, r.symbols))]

    return apply


def _bounded(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def run(e: Any) -> Any:
        out = fn(e)
        return out if sp.count_ops(out) <= 3 * sp.count_ops(e) + 30 else None

    return run


def _trig(e: Any) -> Any:
    """tan/cot/sec/csc (and hyperbolic) as sin/cos; else sin/cos ratios as tan; else double angles expanded."""
    rep = {sp.tan: lambda a: sp.sin(a) / sp.cos(a), sp.cot: lambda a: sp.cos(a) / sp.sin(a),
           sp.sec: lambda a: 1 / sp.cos(a), sp.csc: lambda a: 1 / sp.sin(a),
           sp.tanh: lambda a: sp.sinh(a) / sp.cosh(a), sp.coth: lambda a: sp.cosh(a) / sp.sinh(a)}
    if any(e.has(f) for f in rep):
        out = e
        for f, g in rep.items():
            out = out.replace(f, g)
        return out
    if e.has(sp.sin) and e.has(sp.cos):
        out = TR2i(e)
        if out != e:
            return out
    if e.has(sp.sin, sp.cos):
        out = sp.expand_trig(e)
        return out if out != e else None
    return None


def _exp(e: Any) -> Any:
    """e^{-x} as 1/e^{x}; else e^{a+b} as e^a e^b; else a product of exponentials merged."""
    if not e.has(sp.exp):
        return None
    neg = {x: sp.Pow(sp.exp(-x.args[0]), -1, evaluate=False)
           for x in e.atoms(sp.exp) if x.args[0].could_extract_minus_sign()}
    if neg:
        return e.xreplace(neg)
    out = sp.expand_power_exp(e)
    if out != e:
        return out
    out = sp.powsimp(e)
    return out if out != e else None


class _RootPrinter(LatexPrinter):
    """Fractional powers printed as roots: ``x^{3/2}`` as ``(\\sqrt{x})^{3}``, ``x^{1/3}`` as ``\\sqrt[3]{x}``.

    The root is taken first and then raised (``(x^{1/q})^{p} = x^{p/q}`` on the principal branch for
    every ``x``; ``\\sqrt{x^{3}}`` would not be for a negative ``x``).
    """

    def _print_Pow(self, expr: Any) -> str:
        b, ex = expr.as_base_exp()
        if ex.is_Rational and ex.q > 1 and not (abs(ex.p) == 1 and ex.q == 2):
            inner = self._print(b)
            root = f"\\sqrt{{{inner}}}" if ex.q == 2 else f"\\sqrt[{ex.q}]{{{inner}}}"
            if abs(ex.p) != 1:
                root = f"\\left({root}\\right)^{{{abs(ex.p)}}}"
            return root if ex.p > 0 else f"\\frac{{1}}{{{root}}}"
        return super()._print_Pow(expr)


def _roots(slot: Slot, rng: Random) -> list[Candidate]:
    r = _reading(slot)
    if r is None:
        return []
    if not any(p.exp.is_Rational and p.exp.q > 1 and not (abs(p.exp.p) == 1 and p.exp.q == 2) for p in r.rhs.atoms(sp.Pow)):
        return []
    with time_limit(_STEP_S):
        text = _RootPrinter({"symbol_names": r.names, "ln_notation": True, "inv_trig_style": "full"}).doprint(r.rhs)
    return [Candidate(_shown(r, text), ("expr", r.rhs, r.rhs, r.symbols), "printed with roots")]


def _eq_candidate(r: Reading, lhs: Any, rhs: Any, text: str, rng: Random, both_ways: bool = True) -> list[Candidate]:
    gold = (r.lhs, r.rhs)
    new = (lhs, rhs)
    if equation_implies(gold, new, rng) is not True:
        return []
    if both_ways and equation_implies(new, gold, rng) is False:
        return []
    return [Candidate(text, ("eq", gold, new))]


def _eq_swap(slot: Slot, rng: Random) -> list[Candidate]:
    r = slot.reading
    if r is None or r.lhs is None:
        return []
    return [Candidate(f"{r.rhs_text} = {r.lhs_text}", ("eq", (r.lhs, r.rhs), (r.rhs, r.lhs)), "sides swapped")]


def _eq_scale(slot: Slot, rng: Random) -> list[Candidate]:
    r = slot.reading
    if r is None or r.lhs is None or r.call_like:
        return []
    k = rng.choice([sp.Integer(2), sp.Integer(3), sp.Integer(-1), sp.Rational(1, 2), sp.Integer(4)])
    with time_limit(_STEP_S):
        lhs, rhs = k * r.lhs, k * r.rhs
        text = f"{to_latex(lhs, r.names)} = {to_latex(rhs, r.names)}"
    return [Candidate(c.box, c.check, f"both sides times {k}") for c in _eq_candidate(r, lhs, rhs, text, rng)]


def _eq_move(slot: Slot, rng: Random) -> list[Candidate]:
    r = slot.reading
    if r is None or r.lhs is None or r.call_like:
        return []
    with time_limit(_STEP_S):
        res = r.lhs - r.rhs
        if res == 0:
            return []
        text = f"{to_latex(res, r.names)} = 0"
    return _eq_candidate(r, res, sp.Integer(0), text, rng)


def _eq_square(slot: Slot, rng: Random) -> list[Candidate]:
    r = slot.reading
    if r is None or r.lhs is None or r.call_like or not isinstance(r.lhs, sp.Symbol) or r.lhs in r.rhs.free_symbols:
        return []
    # the project's convention (tests/verify/test_eq_forms.py): a root's square is the same equation,
    # so only a right side that is a product with a square root (and positive) is squared
    if not any(isinstance(f, sp.Pow) and f.exp in (sp.Rational(1, 2), sp.Rational(-1, 2)) for f in sp.Mul.make_args(r.rhs)):
        return []
    with time_limit(_STEP_S):
        if r.rhs.is_positive is not True:
            return []
        lhs, rhs = r.lhs ** 2, r.rhs ** 2
        text = f"{to_latex(lhs, r.names)} = {to_latex(rhs, r.names)}"
    return [Candidate(c.box, c.check, "squared") for c in _eq_candidate(r, lhs, rhs, text, rng, both_ways=False)]


def _eq_solve(slot: Slot, rng: Random) -> list[Candidate]:
    r = slot.reading
    if r is None or r.lhs is None or r.call_like:
        return []
    res = r.lhs - r.rhs
    cands = [s for s in linear_symbols(res) if s != r.lhs]
    if not cands:
        return []
    s = rng.choice(cands)
    with time_limit(_STEP_S):
        sol = sp.together(-res.xreplace({s: 0}) / sp.diff(res, s))
        if sp.count_ops(sol) > 3 * sp.count_ops(res) + 30:
            return []
        text = f"{r.names[s]} = {to_latex(sol, r.names)}"
    out = _eq_candidate(r, s, sol, text, rng)
    return [Candidate(c.box, c.check, f"solved for {r.names[s]}") for c in out]


def _eq_clear(slot: Slot, rng: Random) -> list[Candidate]:
    r = slot.reading
    if r is None or r.lhs is None or r.call_like:
        return []
    with time_limit(_STEP_S):
        num, den = sp.fraction(sp.together(r.rhs))
        if den.is_number:
            return []
        lhs = r.lhs * den
        text = f"{to_latex(lhs, r.names)} = {to_latex(num, r.names)}"
    return [Candidate(c.box, c.check, "denominator cleared") for c in _eq_candidate(r, lhs, num, text, rng)]


def _decimal(slot: Slot, rng: Random) -> list[Candidate]:
    r = _reading(slot)
    if r is None or r.rhs.free_symbols or r.rhs.is_Integer or r.rhs.is_Float or r.has_float:
        return []
    with time_limit(_STEP_S):
        v = complex(sp.N(r.rhs, 20))
    if v.imag or v.real == 0:
        return []
    text = f"{float(f'{v.real:.4g}'):.4g}"
    if "e" in text:
        mant, _, ex = text.partition("e")
        text = f"{mant} \\times 10^{{{int(ex)}}}"
    return [Candidate(_shown(r, text), ("value", v.real, float(f"{v.real:.4g}"), 5e-4), "4 significant figures")]


def _terminating(q: Any) -> bool:
    d = int(q.q)
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    return d == 1


def _decimal_coeffs(e: Any) -> Any:
    """Terminating fractional coefficients of the terms as exact decimals (``\frac{3}{2} k T`` as ``1.5 k T``)."""
    terms = []
    changed = False
    for t in sp.Add.make_args(e):
        c, rest = t.as_coeff_Mul()
        if isinstance(c, sp.Rational) and not c.is_Integer and _terminating(c) and rest != 1:
            digits = 0
            while (c * 10 ** digits).q != 1:
                digits += 1
            t = sp.Float(f"{float(c):.{digits}f}", 30) * rest
            changed = True
        terms.append(t)
    return sp.Add(*terms) if changed else None


def _drop_lhs(slot: Slot, rng: Random) -> list[Candidate]:
    from studybench.testing.pairgen.sym import split_equation

    try:
        lhs, rhs = split_equation(slot.box)
    except ValueError:
        return []
    if lhs is None or not rhs:
        return []
    return [Candidate(rhs, ("text", "the expression without its left side"), "left side dropped")]


# ------------------------------------------------------------------------------------ near misses

def _terms_choice(e: Any, rng: Random) -> tuple[list[Any], int]:
    terms = list(sp.Add.make_args(e))
    return terms, rng.randrange(len(terms))


def _miss_coeff(e: Any, rng: Random) -> Any:
    terms, i = _terms_choice(e, rng)
    c, rest = terms[i].as_coeff_Mul()
    f = rng.choice([sp.Integer(2), sp.Integer(3), sp.Rational(1, 2)])
    terms[i] = (c * f) * rest
    return sp.Add(*terms)


def _miss_exponent(e: Any, rng: Random) -> Any:
    pows = sorted((p for p in e.atoms(sp.Pow) if p.exp.is_Rational and p.exp != 0), key=sp.default_sort_key)
    if not pows:
        return None
    p = rng.choice(pows)
    ex = p.exp
    step = sp.Integer(1) if ex.q == 1 else sp.Rational(1, ex.q) * 2
    return e.xreplace({p: sp.Pow(p.base, ex + step if ex > 0 else ex - step)})


def _miss_sign(e: Any, rng: Random) -> Any:
    terms, i = _terms_choice(e, rng)
    if len(terms) == 1:
        return -e
    terms[i] = -terms[i]
    return sp.Add(*terms)


def _miss_swap(e: Any, rng: Random) -> Any:
    syms = sorted(e.free_symbols, key=lambda s: s.name)
    if len(syms) < 2:
        return None
    a, b = rng.sample(syms, 2)
    return e.xreplace({a: b, b: a})


def _miss_drop(e: Any, rng: Random) -> Any:
    adds = [a for a in sp.preorder_traversal(e) if isinstance(a, sp.Add) and len(a.args) >= 2]
    if not adds:
        return None
    a = rng.choice(sorted(set(adds), key=sp.default_sort_key))
    args = list(a.args)
    del args[rng.randrange(len(args))]
    return e.xreplace({a: sp.Add(*args)})


def _near_miss(fn: Callable[[Any, Random], Any], note: str) -> Callable[[Slot, Random], list[Candidate]]:
    def apply(slot: Slot, rng: Random) -> list[Candidate]:
        r = _reading(slot)
        if r is None or r.rhs == 0:
            return []
        with time_limit(_STEP_S):
            new = fn(r.rhs, rng)
            if new is None or new == r.rhs:
                return []
            text = to_latex(new, r.names)
        if r.lhs is not None and slot.slot_type == "EQ":
            if equation_implies((r.lhs, r.rhs), (r.lhs, new), rng) is not False:
                return []
            return [Candidate(_shown(r, text), ("eq", (r.lhs, r.rhs), (r.lhs, new)), note)]
        if not clearly_differ(r.rhs, new, r.symbols, rng):
            return []
        return [Candidate(_shown(r, text), ("expr", r.rhs, new, r.symbols), note)]

    return apply


def _t(name: str, family: str, label: bool, types: frozenset[str], fn: Callable[[Slot, Random], list[Candidate]], doc: str) -> Transformation:
    return Transformation(name, family, label, types, fn, doc)


_EQ = frozenset({"EQ"})
SYMBOLIC: tuple[Transformation, ...] = (
    _t("sym:sympy", "symbolic", True, _MATH, _expr_form("sympy", lambda e: e), "SymPy's own print of the expression"),
    _t("sym:expand", "symbolic", True, _MATH, _expr_form("expand", _bounded(sp.expand)), "expand"),
    _t("sym:factor", "symbolic", True, _MATH, _expr_form("factor", _bounded(sp.factor)), "factor"),
    _t("sym:together", "symbolic", True, _MATH, _expr_form("together", _bounded(sp.together)), "one fraction"),
    _t("sym:cancel", "symbolic", True, _MATH, _expr_form("cancel", _bounded(sp.cancel)), "cancel"),
    _t("sym:trig", "symbolic", True, _MATH, _expr_form("trig", _trig), "tan as sin/cos (or back), double angles"),
    _t("sym:exp", "symbolic", True, _MATH, _expr_form("exp", _exp), "e^{-x} as 1/e^{x}, e^{a+b} split or merged"),
    _t("sym:root", "symbolic", True, _MATH, _roots, "fractional powers written as roots"),
    _t("sym:power", "symbolic", True, _MATH, _expr_form("power", lambda e: e if e.has(sp.Pow) else None, root_notation=False),
       "roots written as fractional powers"),
    _t("sym:cdot", "symbolic", True, _MATH, _expr_form("cdot", lambda e: e, mul_symbol="dot"), "products with \\cdot"),
    _t("sym:times", "symbolic", True, _MATH, _expr_form("times", lambda e: e, mul_symbol="times"), "products with \\times"),
    _t("sym:decimal-coeff", "symbolic", True, _MATH, _expr_form("decimal", _decimal_coeffs), "terminating fractional coefficients as decimals"),
    _t("ex:drop-lhs", "symbolic", True, frozenset({"EX"}), _drop_lhs, "an expression answer without the gold's left side"),
    _t("sym:slash", "symbolic", True, _MATH, _expr_form("slash", lambda e: e, fold_short_frac=True), "short fractions with /"),
    _t("num:decimal", "number", True, _MATH, _decimal, "an exact number as a 4-significant-figure decimal"),
    _t("eq:swap", "equation", True, _EQ, _eq_swap, "sides swapped"),
    _t("eq:scale", "equation", True, _EQ, _eq_scale, "both sides times a constant"),
    _t("eq:move", "equation", True, _EQ, _eq_move, "everything on one side, = 0"),
    _t("eq:square", "equation", True, _EQ, _eq_square, "squared (a right side with a square-root factor)"),
    _t("eq:solve", "equation", True, _EQ, _eq_solve, "solved for another symbol"),
    _t("eq:clear", "equation", True, _EQ, _eq_clear, "denominator cleared"),
    _t("miss:coeff", "near-miss", False, _MATH, _near_miss(_miss_coeff, "a coefficient changed"), "a coefficient changed"),
    _t("miss:exponent", "near-miss", False, _MATH, _near_miss(_miss_exponent, "an exponent changed"), "an exponent changed"),
    _t("miss:sign", "near-miss", False, _MATH, _near_miss(_miss_sign, "a sign flipped"), "one term's sign flipped"),
    _t("miss:swap-vars", "near-miss", False, _MATH, _near_miss(_miss_swap, "two symbols swapped"), "two symbols swapped"),
    _t("miss:drop-term", "near-miss", False, _MATH, _near_miss(_miss_drop, "a term dropped"), "a term dropped"),
)
"""The SymPy-computed transformations, in table order."""
