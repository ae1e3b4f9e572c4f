r"""Vector expressions compared by value: cross and dot products, unit vectors (docs/protocol.md section 5, EX).

The symbolic path (:mod:`studybench.verify.reading.conversion`) reads ``\vec E`` as the scalar ``E`` and refuses
cross products of vectors. :func:`vector_equal` reads a small vector grammar instead and evaluates
both sides at seeded random 3-vectors: every symbol written with vector markup (``\vec v``,
``\mathbf v``, ``\boldsymbol v``, ``\overrightarrow v``) is a vector, the same letter without
markup is its magnitude, ``\hat r`` is ``\vec r / r``, other symbols are positive scalars. So
``-q\vec B\times\vec v`` = ``q\vec v\times\vec B``, ``q(\vec v\times\vec B)`` = ``\vec v\times(q\vec B)``,
and ``\hat r / r^2`` = ``\vec r / r^3``, while a cross product reordered without its sign, or
``\hat r / r^3``, differ. Pure Python floats: nothing is evaluated from the text; the grammar is
numbers, symbols, ``+ - \times \cdot /``, implicit products, brackets, ``\frac``, ``\sqrt`` and
numeric powers. Anything else is "cannot read" (``None``), and the caller keeps its own verdict.
"""

from __future__ import annotations

import math
import random
import re

from studybench.verify.reading.aliasing import Aliaser
from studybench.verify.reading.latex import LatexError, expand_braceless, tokenize

__all__ = ["has_vector_markup", "vector_equal"]

_VEC_MARKUP = {"\\vec", "\\mathbf", "\\boldsymbol", "\\bm", "\\overrightarrow", "\\pmb"}
_HAT = {"\\hat", "\\widehat"}
_SKIP = {"\\left", "\\right", "\\,", "\\;", "\\:", "\\!", "\\ ", "\\quad", "\\qquad", "\\displaystyle", "~"}
_OPEN = {"(": ")", "[": "]", "{": "}"}
_MAX_TOKENS = 400
_RANK = {"scalar": 0, "hat": 1, "vec": 2}
_FUNCS = {"\\sin": math.sin, "\\cos": math.cos, "\\tan": math.tan, "\\exp": math.exp, "\\ln": math.log, "\\sinh": math.sinh, "\\cosh": math.cosh}
_ENDS = {"+", "-", ")", "]", "}", "\\times", "\\cdot", "/"}
_MARKUP_RE = re.compile(r"\\(?:vec|mathbf|boldsymbol|bm|overrightarrow|pmb|hat|widehat)(?![A-Za-z])")

Value = float | tuple[float, float, float]


class _Unreadable(Exception):
    """Outside the vector grammar."""


def has_vector_markup(s: str) -> bool:
    r"""Whether a LaTeX text writes a vector or a unit vector (``\vec``, ``\mathbf``, ``\hat`` ...).

    Args:
        s: LaTeX text.

    Returns:
        ``True`` when some vector markup occurs.
    """
    return isinstance(s, str) and _MARKUP_RE.search(s) is not None


def _add(a: Value, b: Value, sign: float) -> Value:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return (a[0] + sign * b[0], a[1] + sign * b[1], a[2] + sign * b[2])
    if isinstance(a, tuple) or isinstance(b, tuple):
        raise _Unreadable("vector plus scalar")
    return a + sign * b


def _mul(a: Value, b: Value, op: str) -> Value:
    va, vb = isinstance(a, tuple), isinstance(b, tuple)
    if va and vb:
        assert isinstance(a, tuple) and isinstance(b, tuple)
        if op == "\\times":
            return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
        if op == "\\cdot":
            return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
        raise _Unreadable("two vectors side by side")
    if va:
        assert isinstance(a, tuple) and not isinstance(b, tuple)
        return (a[0] * b, a[1] * b, a[2] * b)
    if vb:
        assert isinstance(b, tuple) and not isinstance(a, tuple)
        return (b[0] * a, b[1] * a, b[2] * a)
    assert not isinstance(a, tuple) and not isinstance(b, tuple)
    return a * b


def _norm(v: tuple[float, float, float]) -> float:
    return math.sqrt(v[0] ** 2 + v[1] ** 2 + v[2] ** 2)


class _Reader:
    """Recursive-descent reader of one side, evaluated at one sample point."""

    def __init__(self, toks: list[str], env: dict[str, Value] | None, kinds: dict[str, str]) -> None:
        self.toks = toks
        self.i = 0
        self.al = Aliaser()
        self.env = env  # "vec:K" / "scalar:K" -> value at this sample point; None: the first pass
        self.kinds = kinds  # key -> "vec" | "scalar", filled while reading (first pass)

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok: str) -> None:
        if self.peek() != tok:
            raise _Unreadable(f"expected {tok}")
        self.i += 1

    def expr(self, close: str | None = None) -> Value:
        sign = 1.0
        if self.peek() in ("+", "-"):
            sign = -1.0 if self.peek() == "-" else 1.0
            self.i += 1
        val = _mul(self.term(), sign, "")
        while self.peek() in ("+", "-"):
            s = -1.0 if self.peek() == "-" else 1.0
            self.i += 1
            val = _add(val, self.term(), s)
        if self.peek() != close:
            raise _Unreadable(f"unexpected {self.peek()}")
        return val

    def term(self) -> Value:
        val = self.power()
        crosses = 0
        while True:
            t = self.peek()
            if t is None or t in ("+", "-", ")", "]", "}"):
                return val
            if t in ("\\times", "\\cdot"):
                self.i += 1
                rhs = self.power()
                while self.peek() not in (None, "+", "-", ")", "]", "}", "\\times", "\\cdot", "/"):
                    rhs = _mul(rhs, self.power(), "")  # \vec r \times m\vec v: the implicit product is the operand
                if t == "\\times" and isinstance(val, tuple) and isinstance(rhs, tuple):
                    crosses += 1
                    if crosses > 1:
                        raise _Unreadable("a chain of cross products without brackets")
                val = _mul(val, rhs, t)
            elif t == "/":
                self.i += 1
                val = self._div(val, self.power())
            else:
                rhs = self.power()
                if isinstance(val, tuple) and isinstance(rhs, tuple):
                    raise _Unreadable("two vectors side by side")
                val = _mul(val, rhs, "")

    def _function(self, name: str) -> Value:
        r"""``\sin``, ``\cos`` ... of a scalar.

        A bracketed argument, or one symbol that ends the product (``\sin\theta\,\hat x``;
        ``\sin\omega t`` is ambiguous and not read).
        """
        if self.peek() == "^":
            raise _Unreadable("a power of a function")
        if self.peek() in ("(", "[", "{"):
            arg = self.factor()
        else:
            arg = self.factor()
            nxt = self.peek()
            if not (nxt is None or nxt in _ENDS or nxt in _VEC_MARKUP or nxt in _HAT):
                raise _Unreadable("a brace-less function argument followed by more factors")
        if isinstance(arg, tuple):
            raise _Unreadable("a function of a vector")
        if name == "\\ln" and arg <= 0:
            raise _Unreadable("log of a non-positive number")
        if name == "\\exp" and arg > 50:
            raise _Unreadable("overflow")
        return _FUNCS[name](arg)

    @staticmethod
    def _div(a: Value, b: Value) -> Value:
        if isinstance(b, tuple) or b == 0:
            raise _Unreadable("division by a vector or by zero")
        return _mul(a, 1.0 / b, "")

    def power(self) -> Value:
        base = self.factor()
        if self.peek() == "^":
            self.i += 1
            ex = self.group_value()
            if isinstance(base, tuple) or isinstance(ex, tuple) or abs(ex) > 12:
                raise _Unreadable("power of a vector")
            if base < 0 and ex != int(ex):
                raise _Unreadable("fractional power of a negative number")
            if base == 0 and ex < 0:
                raise _Unreadable("division by zero")
            return float(base**ex)
        return base

    def group_value(self) -> Value:
        """A macro argument or exponent: a braced group, or one token."""
        t = self.peek()
        if t == "{":
            self.i += 1
            v = self.expr("}")
            self.take("}")
            return v
        if t is not None and re.fullmatch(r"\d+", t) and len(t) > 1:
            raise _Unreadable("x^23")
        return self.factor()

    def factor(self) -> Value:
        t = self.peek()
        if t is None:
            raise _Unreadable("missing operand")
        if re.fullmatch(r"\d+(?:\.\d+)?|\.\d+", t):
            self.i += 1
            return float(t)
        if t in _OPEN:
            self.i += 1
            v = self.expr(_OPEN[t])
            self.take(_OPEN[t])
            return v
        if t in ("\\frac", "\\dfrac", "\\tfrac"):
            self.i += 1
            num = self.group_value()
            den = self.group_value()
            return self._div(num, den)
        if t == "\\sqrt":
            self.i += 1
            if self.peek() == "[":
                raise _Unreadable("n-th root")
            v = self.group_value()
            if isinstance(v, tuple) or v < 0:
                raise _Unreadable("root of a vector or a negative number")
            return math.sqrt(v)
        if t == "\\pi":
            self.i += 1
            return math.pi
        if t in _FUNCS:
            self.i += 1
            return self._function(t)
        kind = "vec" if t in _VEC_MARKUP else "hat" if t in _HAT else "scalar"
        try:
            atom = self.al.atom_at(self.toks, self.i)
        except LatexError as e:
            raise _Unreadable(str(e)) from None
        if atom is None:
            raise _Unreadable(f"unsupported {t}")
        key, self.i = atom
        if kind == "hat":
            key = re.sub(r"^hat\((.*)\)", r"\1", key, count=1)
            # \hat{\mathbf r} is \hat r
            key = re.sub(r"^\\(?:mathbf|vec|boldsymbol|bm|pmb)\s*\{?\s*([^{}\s]+?)\s*\}?((?:_\{.*\})?'*)$", r"\1\2", key)
        if key.startswith(("rm:", "d(", "deriv")) or "(" in key:
            raise _Unreadable("not a plain symbol")
        if self.env is None:  # first pass: the markup each key is written with, placeholder values
            cur = self.kinds.get(key, "scalar")
            self.kinds[key] = kind if _RANK[kind] > _RANK[cur] else cur
            return 1.5 if kind == "scalar" else (1.0, 2.0, 3.0)
        if kind == "scalar":
            return self.env["scalar:" + key]
        return self.env[kind + ":" + key]


def _tokens(s: str) -> list[str]:
    toks = [t for t in tokenize(expand_braceless(s)) if t not in _SKIP]
    if len(toks) > _MAX_TOKENS:
        raise _Unreadable("too long")
    return toks


def _evaluate(toks: list[str], env: dict[str, Value] | None, kinds: dict[str, str]) -> Value:
    return _Reader(toks, env, kinds).expr(None)


def _close(a: Value, b: Value) -> bool:
    if isinstance(a, tuple) != isinstance(b, tuple):
        return False
    av = a if isinstance(a, tuple) else (a,)
    bv = b if isinstance(b, tuple) else (b,)
    scale = max(1e-300, max(abs(x) for x in av + bv))  # type: ignore[operator]
    return all(abs(x - y) <= 1e-9 * scale for x, y in zip(av, bv, strict=True))  # type: ignore[operator]


def vector_equal(gold: str, pred: str) -> bool | None:
    r"""Whether two vector expressions are equal, by value at seeded random 3-vectors.

    Args:
        gold: the gold's expression (LaTeX, one side, no relation).
        pred: the prediction's expression.

    Returns:
        ``True`` / ``False`` when both sides read in the vector grammar and some side holds a vector
        (a cross or dot product, a unit vector); ``None`` when either cannot be read (then the
        caller's own comparison stands). Never raises.
    """
    if not (isinstance(gold, str) and isinstance(pred, str)) or len(gold) + len(pred) > 4000:
        return None
    try:
        gt, pt = _tokens(gold), _tokens(pred)
        kinds: dict[str, str] = {}  # key -> "vec" (written \vec K somewhere), "hat" (only \hat K), "scalar"
        # first pass: how each key is written (on either side), with placeholder values
        _evaluate(gt, None, kinds)
        _evaluate(pt, None, kinds)
        if set(kinds.values()) <= {"scalar"}:
            return None
        rng = random.Random(20261201)
        for _ in range(3):
            env: dict[str, Value] = {}
            for k in sorted(kinds):
                # a key written \vec K: K is its magnitude and \hat K its direction; a key written only
                # \hat K: a unit vector of its own, K an independent scalar
                v = (rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(-2, 2))
                size = _norm(v)
                env["hat:" + k] = (v[0] / size, v[1] / size, v[2] / size)
                env["scalar:" + k] = size if kinds[k] == "vec" else rng.uniform(0.5, 2.5)
                if kinds[k] == "vec":
                    env["vec:" + k] = v
            if not _close(_evaluate(gt, env, {}), _evaluate(pt, env, {})):
                return False
        return True
    except (_Unreadable, LatexError, KeyError, OverflowError, ZeroDivisionError, RecursionError, ValueError, IndexError):
        return None
