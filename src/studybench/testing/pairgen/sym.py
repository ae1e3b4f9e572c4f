r"""SymPy forms of gold boxes: read with the project's LaTeX -> SymPy path, printed back, checked numerically.

:func:`read_box` reads one box (``expr`` or ``lhs = expr``) with :func:`studybench.verify.reading.conversion.to_sympy`
(never ``sympify`` of a string), renames the opaque aliases back to the LaTeX each symbol was
written with (:func:`symbol_latex`) and makes every symbol positive (the physics convention the
verifier samples under too). :func:`to_latex` prints a form back with ``sympy.latex``.

Labels are checked numerically, independently of the verifier: :func:`same_values` and
:func:`clearly_differ` evaluate two expressions at seeded random positive points;
:func:`equation_implies` substitutes the solution of one equation (for a symbol it is linear in)
into another. Every SymPy call that could take long runs under :func:`time_limit`.
"""

from __future__ import annotations

import math
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from random import Random
from typing import Any

import sympy as sp
from sympy.core.function import AppliedUndef

__all__ = [
    "GenTimeout",
    "Reading",
    "ambiguous_reading",
    "clearly_differ",
    "equation_implies",
    "linear_symbols",
    "read_box",
    "same_values",
    "split_equation",
    "symbol_latex",
    "time_limit",
    "to_latex",
]


class GenTimeout(Exception):
    """A SymPy step ran past its :func:`time_limit`."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`GenTimeout` in the block after ``seconds`` (main thread on POSIX; elsewhere no limit).

    An outer ``SIGALRM`` timer (pytest-timeout's) is restored afterwards, less the time spent.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise GenTimeout(f"over {seconds} s")

    old_handler = signal.signal(signal.SIGALRM, _raise)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - t0), 0.001), old_interval)


# ----------------------------------------------------------------------------------------- reading

_ACCENT_KEY = re.compile(r"(hat|dot|ddot|bar|overline|tilde|widetilde|check|breve|underline|mathring)\((.+)\)(.*)")
_PLAIN_KEY = re.compile(r"(\\?[A-Za-z]+)((?:_\{[^{}]*\}|\^\{[^{}]*\})*)('*)")
_VECTOR_MARKUP = re.compile(r"\\(?:vec|mathbf|boldsymbol|bm|pmb|overrightarrow)(?![A-Za-z])")
_UPRIGHT = re.compile(r"\\(?:mathrm|text|textrm|rm|operatorname|mbox)\s*\{([^{}]*)\}")
_SUBSCRIPT = re.compile(r"_\s*\{(?:[^{}]|\{[^{}]*\})*\}|_\s*\\?[A-Za-z0-9]+")
_FUNCS = {"sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "sech", "csch", "arcsin",
          "arccos", "arctan", "ln", "log", "exp", "sqrt", "frac", "left", "right", "cdot", "times", "Delta"}
# a symbol written directly before a bracket holding one bare name: f(x), E\left(r\right); read as a
# product by the verifier, so printing it back without the bracket could change its meaning
_CALL_LIKE = re.compile(r"(\\[A-Za-z]+|[A-Za-z])(?:_\{[^{}]*\}|_[A-Za-z0-9])?'*\s*(?:\\left\s*)?\(\s*\\?[A-Za-z]+"
                        r"(?:_\{[^{}]*\}|_[A-Za-z0-9])?\s*(?:,\s*\\?[A-Za-z]+\s*)*(?:\\right\s*)?\)")
_BAD_HEADS = (sp.Derivative, sp.Integral, sp.Sum, sp.Product, sp.Limit, sp.Piecewise, sp.Order)


def split_equation(text: str) -> tuple[str | None, str]:
    """``(left side, right side)`` at the one top-level ``=`` of ``text``; ``(None, text)`` when it has none.

    Raises:
        ValueError: more than one top-level ``=``, or another relation at top level.
    """
    depth = 0
    eqs = []
    for i, c in enumerate(text):
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == "=" and depth == 0 and text[i - 1: i] not in ("<", ">", "!", "\\"):
            eqs.append(i)
    if re.search(r"\\(?:approx|neq|ne|le|ge|leq|geq|leqslant|geqslant|sim|simeq|propto|equiv|to|rightarrow)(?![A-Za-z])|[<>]", text):
        raise ValueError("another relation")
    if len(eqs) > 1:
        raise ValueError("several '='")
    if not eqs:
        return None, text
    return text[: eqs[0]].strip(), text[eqs[0] + 1:].strip()


def ambiguous_reading(text: str) -> str | None:
    r"""Why ``text`` has no one reading to print back, or ``None``.

    Vector markup (the verifier reads ``\vec E`` as ``E``), an upright unit outside a subscript
    (``3\,\mathrm{J}``: the verifier reads the letter as a symbol), or a slash followed by a
    juxtaposed factor (``8\chi^2/3r``: is ``r`` in the denominator?).
    """
    if _VECTOR_MARKUP.search(text):
        return "vector markup"
    from studybench.testing.pairgen.units import parse_unit

    outside = _SUBSCRIPT.sub(" ", text)
    for m in _UPRIGHT.finditer(outside):
        inner = m.group(1).strip()
        if inner not in ("d", "e", "i") and parse_unit(inner) is not None:
            return "an upright unit"
        if re.search(r"[A-Za-z]{2,}|\s", inner) and inner not in _FUNCS and inner != "arcsinh":
            return "words or an upright name"
    if re.search(r"\^\s*\{?\s*(?:\(|\*|\\ast|\\dagger|\\star)", text):
        return "a superscript label (x^{(1)}, a^{*}), not a power"
    if re.search(r"\\log(?!\s*_)(?![A-Za-z])", text):
        return "\\log without a base (natural or decimal?)"
    bare = re.sub(r"\\(?:left|right|big|Big|bigl|bigr|Bigl|Bigr)(?![A-Za-z])", "", text)
    for m in re.finditer(r"/", bare):
        rest = bare[m.end():]
        k = _one_factor(rest)
        if k is not None and re.match(r"\s*(?:[A-Za-z0-9(]|\\(?!right|cdot|times|quad|qquad|,|;|:|!|pm|mp)[A-Za-z])", rest[k:]):
            return "a slash before juxtaposed factors"
    return None


def _one_factor(s: str) -> int | None:
    """Length of one factor at the start of ``s`` (a number, a symbol with sub/superscripts, a group)."""
    m = re.match(r"\s*(?:\d+(?:\.\d+)?|[A-Za-z]|\\[A-Za-z]+)", s)
    if m is None:
        if s.lstrip()[:1] not in ("(", "{", "["):
            return None
        i = len(s) - len(s.lstrip())
        close = {"(": ")", "{": "}", "[": "]"}[s[i]]
        depth = 0
        for k in range(i, len(s)):
            depth += s[k] == s[i]
            depth -= s[k] == close
            if depth == 0:
                j = k + 1
                break
        else:
            return None
    else:
        j = m.end()
        if s[m.start():j].strip().startswith("\\") and s[j:].lstrip()[:1] == "{":
            sub = _one_factor(s[j:])
            j = j + (sub or 0)
    while True:
        mm = re.match(r"\s*[_^]\s*(?:\{(?:[^{}]|\{[^{}]*\})*\}|\\?[A-Za-z0-9]+)", s[j:])
        if not mm:
            return j
        j += mm.end()


def symbol_latex(key: str) -> str | None:
    r"""The LaTeX a symbol key (:class:`studybench.verify.reading.aliasing.Aliaser`) prints as; ``None`` if unprintable.

    Args:
        key: ``k_{B}``, ``hat(r)``, ``call:E|x,t``, ``<x>``, ...
    """
    m = _PLAIN_KEY.fullmatch(key)
    if m:
        base = m.group(1)
        if base.startswith("\\") and base[1:] in _FUNCS:
            return None
        return base + m.group(2) + m.group(3)
    m = _ACCENT_KEY.fullmatch(key)
    if m:
        inner = symbol_latex(m.group(2))
        tail = m.group(3)
        if inner is None or (tail and not re.fullmatch(r"(?:_\{[^{}]*\})?'*", tail)):
            return None
        return f"\\{m.group(1)}{{{inner}}}{tail}"
    if key.startswith("\\mathcal ") and re.fullmatch(r"[A-Za-z]", key[9:]):
        return f"\\mathcal{{{key[9:]}}}"
    if key.startswith("<") and key.endswith(">"):
        inner = symbol_latex(key[1:-1])
        return None if inner is None else f"\\langle {inner} \\rangle"
    if key.startswith("call:"):
        name, _, args = key[5:].partition("|")
        head = symbol_latex(name)
        parts = [symbol_latex(a.strip()) for a in args.split(",")]
        if head is None or not parts or any(p is None for p in parts):
            return None
        return f"{head}({', '.join(p for p in parts if p)})"
    return None


@dataclass
class Reading:
    """One box read into SymPy.

    Attributes:
        text: the box.
        lhs_text: the text left of its ``=`` (``None``: no ``=``).
        rhs_text: the expression (the right side of an equation).
        lhs: the left side (positive symbols), or ``None``.
        rhs: the right side (positive symbols).
        names: symbol -> the LaTeX it prints as.
        call_like: the text writes ``f(x)`` (a name before a bracketed bare name).
    """

    text: str
    lhs_text: str | None
    rhs_text: str
    lhs: Any
    rhs: Any
    names: dict[Any, str] = field(default_factory=dict)
    call_like: bool = False

    @property
    def symbols(self) -> list[Any]:
        """Every free symbol, sorted by name."""
        syms = set(self.rhs.free_symbols) | (set(self.lhs.free_symbols) if self.lhs is not None else set())
        return sorted(syms, key=lambda s: s.name)

    @property
    def has_float(self) -> bool:
        """Whether a decimal number (SymPy ``Float``) occurs."""
        return bool(self.rhs.atoms(sp.Float) or (self.lhs is not None and self.lhs.atoms(sp.Float)))


def _evaluated(e: Any) -> Any:
    if not getattr(e, "args", None) or isinstance(e, sp.Symbol):
        return e
    return e.func(*[_evaluated(a) for a in e.args])


def _usable(e: Any) -> bool:
    if not isinstance(e, sp.Expr) or isinstance(e, (sp.MatrixBase, sp.Tuple)):
        return False
    if e.has(*_BAD_HEADS) or e.atoms(AppliedUndef):
        return False
    if e.has(sp.zoo, sp.nan, sp.oo, -sp.oo, sp.I):
        return False
    return sp.count_ops(e) <= 120


def read_box(text: str, timeout: float = 3.0) -> Reading | None:
    r"""Read one box (``expr`` or ``lhs = expr``) into SymPy; ``None`` when it cannot be used.

    Uses the project's LaTeX -> SymPy path (aliasing, then ``latex2sympy2_extended``). Left out:
    other relations, several ``=``, sets, matrices, derivatives, integrals, sums, unknown functions,
    infinities, ``i``, symbols that cannot be printed back (derivative keys, upright words), and
    anything over 400 characters.

    Args:
        text: the box content.
        timeout: seconds for the parse and the evaluation.

    Returns:
        A :class:`Reading`, or ``None``. Never raises.
    """
    from studybench.verify.reading.aliasing import new_aliases
    from studybench.verify.reading.conversion import to_sympy

    if not isinstance(text, str) or not text.strip() or len(text) > 400:
        return None
    try:
        lhs_text, rhs_text = split_equation(text)
    except ValueError:
        return None
    if not rhs_text or (lhs_text is not None and not lhs_text) or ambiguous_reading(text) is not None:
        return None
    try:
        with time_limit(timeout):
            al = new_aliases(text)
            lhs = to_sympy(lhs_text, al) if lhs_text is not None else None
            rhs = to_sympy(rhs_text, al)
            names_by_alias = al.keys_by_name()
            syms = set(rhs.free_symbols) | (set(lhs.free_symbols) if lhs is not None else set())
            ren: dict[Any, Any] = {}
            names: dict[Any, str] = {}
            for s in syms:
                key = names_by_alias.get(s.name)
                shown = symbol_latex(key) if key is not None else None
                if shown is None:
                    return None
                pos = sp.Symbol(s.name, positive=True)
                ren[s] = pos
                names[pos] = shown
            raw = [e for e in (lhs, rhs) if e is not None]
            rhs = _evaluated(rhs.xreplace(ren))
            lhs = _evaluated(lhs.xreplace(ren)) if lhs is not None else None
            if any(len(e.free_symbols) != len(n.free_symbols) for e, n in zip(raw, [x for x in (lhs, rhs) if x is not None], strict=True)):
                return None  # a symbol cancelled on evaluation (e^{A} B e^{-A} of operators): no safe reading
    except Exception:  # noqa: BLE001 - LatexError, GenTimeout, anything SymPy raises: not usable
        return None
    if not _usable(rhs) or (lhs is not None and not _usable(lhs)):
        return None
    return Reading(text=text, lhs_text=lhs_text, rhs_text=rhs_text, lhs=lhs, rhs=rhs, names=names,
                   call_like=_CALL_LIKE.search(text) is not None
                   and any(m.group(1)[1:] not in _FUNCS for m in _CALL_LIKE.finditer(text)))


def to_latex(expr: Any, names: dict[Any, str], **settings: Any) -> str:
    r"""``sympy.latex`` with the gold's symbol names, ``\ln`` for the natural log and ``\arcsin`` style.

    Inverse hyperbolic functions print as ``\operatorname{arcsinh}`` (SymPy writes ``arsinh``).
    """
    opts: dict[str, Any] = {"symbol_names": names, "ln_notation": True, "inv_trig_style": "full"}
    opts.update(settings)
    return re.sub(r"\\operatorname\{ar(sinh|cosh|tanh|coth|sech|csch)\}", r"\\operatorname{arc\1}", sp.latex(expr, **opts))


# ----------------------------------------------------------------------------------------- numbers

def _points(symbols: list[Any], rng: Random, n: int) -> list[dict[Any, Any]]:
    return [{s: sp.Float(math.exp(rng.uniform(math.log(0.3), math.log(3.0))), 30) for s in symbols} for _ in range(n)]


def _value(expr: Any, point: dict[Any, Any]) -> complex | None:
    try:
        v = complex(sp.N(expr.xreplace(point), 25))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if not (math.isfinite(v.real) and math.isfinite(v.imag)):
        return None
    return v


def _rel(a: complex, b: complex) -> float:
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def same_values(a: Any, b: Any, symbols: list[Any], rng: Random, n: int = 6, tol: float = 1e-9) -> bool | None:
    """Whether ``a`` and ``b`` agree at ``n`` random positive points.

    Returns:
        ``True`` when they agree (relative ``tol``) at every point where both are finite and there are
        at least ``n - 2`` such points; ``False`` when they differ somewhere; ``None`` when too few
        points evaluate.
    """
    good = 0
    for p in _points(symbols, rng, n):
        va, vb = _value(a, p), _value(b, p)
        if va is None or vb is None:
            continue
        if _rel(va, vb) > tol and abs(va - vb) > 1e-12:
            return False
        good += 1
    return True if good >= n - 2 else None


def clearly_differ(a: Any, b: Any, symbols: list[Any], rng: Random, n: int = 6, gap: float = 0.05) -> bool:
    """Whether ``a`` and ``b`` differ by more than ``gap`` (relative) at most of ``n`` random positive points."""
    far = total = 0
    for p in _points(symbols, rng, n):
        va, vb = _value(a, p), _value(b, p)
        if va is None or vb is None:
            continue
        total += 1
        if _rel(va, vb) > gap:
            far += 1
    return total >= n - 2 and far * 2 > total


def linear_symbols(residual: Any) -> list[Any]:
    """The symbols a residual ``lhs - rhs`` is linear in (nonzero coefficient free of the symbol), by name."""
    out = []
    for s in sorted(residual.free_symbols, key=lambda s: s.name):
        try:
            d = sp.diff(residual, s)
        except Exception:  # noqa: BLE001
            continue
        if d != 0 and not d.has(s):
            out.append(s)
    return out


def equation_implies(eq1: tuple[Any, Any], eq2: tuple[Any, Any], rng: Random, n: int = 6, tol: float = 1e-9) -> bool | None:
    """Whether the solutions of ``eq1`` (``(lhs, rhs)``) satisfy ``eq2``, at random points.

    ``eq1`` is solved for a symbol it is linear in, at random positive values of the others; ``eq2``
    is evaluated there. Returns ``True`` when it holds at every usable point (at least ``n - 2``),
    ``False`` when it fails clearly (relative residual over 1e-3) at most points, ``None`` otherwise
    (no linear symbol, too few points, or a mixed picture).
    """
    res1 = eq1[0] - eq1[1]
    lin = linear_symbols(res1)
    if not lin:
        return None
    s = lin[0]
    try:
        sol = -res1.xreplace({s: 0}) / sp.diff(res1, s)
    except Exception:  # noqa: BLE001
        return None
    others = sorted((res1.free_symbols | eq2[0].free_symbols | eq2[1].free_symbols) - {s}, key=lambda x: x.name)
    holds = fails = 0
    for p in _points(others, rng, n):
        v = _value(sol, p)
        if v is None or abs(v.imag) > 1e-12 * max(1.0, abs(v)):
            continue
        q = dict(p)
        q[s] = sp.Float(v.real, 30)
        a, b = _value(eq2[0], q), _value(eq2[1], q)
        terms = [_value(t, q) for t in (*sp.Add.make_args(eq2[0]), *sp.Add.make_args(eq2[1]))]
        if a is None or b is None or any(t is None for t in terms):
            continue
        scale = max(abs(t) for t in terms if t is not None) or 1.0  # a side may be 0 (x - y = 0)
        if abs(a - b) <= tol * scale:
            holds += 1
        elif abs(a - b) > 1e-3 * scale:
            fails += 1
    if holds >= n - 2 and fails == 0:
        return True
    if fails * 2 > holds + fails and fails >= (n - 2) // 2 + 1:
        return False
    return None
