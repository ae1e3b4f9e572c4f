"""Hypothesis strategies for fuzzing the verifier (issue 3, safety): random and adversarial LaTeX.

Used by ``tests/verify/test_fuzz.py`` (a few hundred examples on every test run) and by
``bench/verify_fuzz.py`` (a large run with a summary). Needs ``hypothesis`` (the ``dev`` extra).

The generated text covers: a small LaTeX grammar (numbers, symbols, Greek letters, fractions,
roots, powers, functions, brackets, relations, text groups, matrices, environments), nesting up to
a configurable depth, pathological numbers (huge exponents, exponent towers, factorial chains,
40+ digit integers), unbalanced braces, and canary payloads (Python, shell and LaTeX injections
that would create the file :data:`CANARY_NAME` if they were ever executed).
"""

from __future__ import annotations

from typing import Any

from studybench.answer_types import AnswerType

__all__ = ["CANARY_NAME", "canary_payloads", "latex", "fuzz_item"]

CANARY_NAME = "studybench_fuzz_canary"
"""File name the canary payloads try to create in the current directory."""


def canary_payloads(path: str) -> list[str]:
    """Injection strings that create ``path`` if anything evaluates or executes them."""
    return [
        f"__import__('os').system('touch {path}')",
        f"__import__('pathlib').Path('{path}').touch()",
        f"exec(\"open('{path}','w').close()\")",
        f"eval(\"__import__('os').system('touch {path}')\")",
        f"$(touch {path})",
        f"`touch {path}`",
        f"\\immediate\\write18{{touch {path}}}",
        f"\\input{{{path}}}",
        f"{{{{ ''.__class__.__mro__[1].__subclasses__() }}}} open('{path}','w')",
        f"lambda: __import__('os').system('touch {path}')",
    ]


def latex(max_depth: int = 6) -> Any:
    """A strategy for LaTeX-ish strings: grammatical expressions mixed with hostile fragments."""
    from hypothesis import strategies as st

    numbers = st.one_of(
        st.integers(-10**6, 10**6).map(str),
        st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda x: f"{x:.6g}"),
        st.sampled_from(["10^{99999}", "9^{9^{9^{9}}}", "2^{2^{2^{2^{2}}}}", "100!!!!", "(10!)!", "1" * 60,
                         "1e999999", "3\\times10^{-99999}", "0.000", "-0", "\\infty", "-\\infty", "0/0", "\\frac{1}{0}"]),
    )
    symbols = st.sampled_from([
        "x", "y", "m", "E", "v_0", "k_B", "\\hbar", "\\omega", "\\varepsilon_0", "\\mu_0", "\\alpha", "c", "e",
        "\\mathrm{d}x", "\\hat{x}", "\\vec{E}", "\\mathbf{B}", "\\psi(x, t)", "\\langle x \\rangle", "T_{\\mathrm{max}}",
    ])
    hostile = st.sampled_from([
        "{", "}", "\\", "\\left(", "\\right)", "\\begin{cases}", "\\end{array}", "&", "\\\\", "^", "_", "'", "''",
        "\\boxed{", "\\text{", "\\frac", "\\sqrt", "\\sqrt[3]", "<think>", "</think>", "\\%", "^\\circ", "\\pm",
        "\u0000", "\ud800", "\u202e", "\\mathrm{rad/s}", "\\,", "\\;", "~", " or ", " and ", "\\to", "\\in",
    ])
    units = st.sampled_from(["\\,\\mathrm{m}", "\\ \\text{km/s}", "\\,\\mathrm{kg\\,m^{2}\\,s^{-1}}", "\\,\\mu\\mathrm{m}",
                             "\\,\\mathrm{eV}", "\\%", "^\\circ", "\\,\\mathrm{K}"])
    leaf = st.one_of(numbers, symbols, hostile, st.text(max_size=8))

    def extend(inner: Any) -> Any:
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
            inner.map(lambda a: f"\\sqrt{{{a}}}"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}^{{{t[1]}}}"),
            st.tuples(inner, st.sampled_from(["+", "-", "\\cdot", "\\times", "/", "=", "<", "\\approx", ","]), inner).map(
                lambda t: f"{t[0]} {t[1]} {t[2]}"
            ),
            inner.map(lambda a: f"\\left({a}\\right)"),
            st.tuples(st.sampled_from(["\\sin", "\\cos", "\\ln", "\\exp", "\\mathrm{sech}", "\\coth", "\\sqrt"]), inner).map(
                lambda t: f"{t[0]} {t[1]}"
            ),
            st.tuples(inner, units).map(lambda t: t[0] + t[1]),
            inner.map(lambda a: f"\\text{{ {a} }}"),
            st.tuples(inner, inner).map(lambda t: f"\\begin{{pmatrix}} {t[0]} & {t[1]} \\\\ {t[1]} & {t[0]} \\end{{pmatrix}}"),
            st.tuples(inner, inner).map(lambda t: f"\\begin{{aligned}} x &= {t[0]} \\\\ y &= {t[1]} \\end{{aligned}}"),
        )

    return st.recursive(leaf, extend, max_leaves=max_depth * 4)


def fuzz_item(canary_path: str, max_depth: int = 6) -> Any:
    """A strategy for ``(gold, pred, answer_type, type_sequence, gold_unit)`` with canaries mixed
    into every field."""
    from hypothesis import strategies as st

    canary = st.sampled_from(canary_payloads(canary_path))
    text = st.one_of(latex(max_depth), canary, st.tuples(latex(max_depth), canary).map(lambda t: t[0] + t[1]))
    types = st.one_of(st.sampled_from([t.value for t in AnswerType]), canary)
    ts = st.one_of(st.just(""), st.sampled_from(["NV,EX", "EQ,EQ", "QL,NV,IN"]), canary)
    unit = st.one_of(st.none(), st.sampled_from(["\\mathrm{m}", "\\text{MeV}, None", "\\hbar"]), canary)
    return st.tuples(st.lists(text, min_size=1, max_size=3), st.lists(text, min_size=0, max_size=4), types, ts, unit)
