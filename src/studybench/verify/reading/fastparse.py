r"""A hand-written parser for the common subset of aliased LaTeX, giving latex2sympy2_extended's very tree.

The verifier hands latex2sympy2_extended aliased text (every symbol is ``\mathrm{vN}``, tokens joined
by spaces; :mod:`studybench.verify.reading.conversion`). Its ANTLR parse is most of the verifier's cost, and
most aliased texts use a small part of the grammar: numbers, symbols, ``\pi``, ``e``, sums,
differences, products (juxtaposed, ``\cdot``, ``\times``, ``/``), powers, ``\frac``, ``\sqrt``,
brackets, ``|…|`` and the common functions called with parentheses. :func:`fast_parse` reads exactly
that subset by recursive descent and builds the SymPy objects with the constructors and ``evaluate``
flags latex2sympy2_extended's visitor uses, so that the result is the same tree (``srepr`` equal);
for anything outside the subset, or wherever the grammar's reading is not certain (a symbol directly
before a bracket may be a function call, nested ``|``, scripts on scripts, subscripts, relations,
commas), it returns ``None`` and the caller parses the usual way. ``tests/verify/test_fastparse.py``
checks identity against the real parse.

Model text is only tokenised here and SymPy objects are built directly; nothing is evaluated as code.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ENABLED", "fast_parse"]

ENABLED = True
"""Module switch: when ``False``, :func:`fast_parse` always returns ``None`` (the ANTLR parse runs)."""

_SYMBOL = re.compile(r"\\mathrm\{(v\d+)\}")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_TRIG = ("sin", "cos", "tan", "csc", "sec", "cot")
_HYPER = ("sinh", "cosh", "tanh")
_FUNCS = frozenset(
    ["\\" + n for n in (*_TRIG, *_HYPER, "ln", "log", "exp")]
    + ["\\arc" + n for n in _TRIG] + ["\\ar" + n for n in _HYPER] + ["\\arc" + n for n in _HYPER]
)
_MP_OPS = frozenset(["\\cdot", "\\times", "/", ":"])
_CLOSE = {"(": ")", "[": "]"}
_SY: Any = None


class _Unsupported(Exception):
    """Outside the subset (or not certainly read the way latex2sympy reads it)."""


def _sympy() -> Any:
    global _SY
    if _SY is None:
        import sympy

        _SY = sympy
    return _SY


def _is_atom_token(t: str) -> bool:
    return bool(_SYMBOL.fullmatch(t) or _NUMBER.fullmatch(t)) or t in ("\\pi", "\\infty", "e")


class _Parser:
    def __init__(self, toks: list[str]) -> None:
        self.toks = toks
        self.i = 0
        self.n = len(toks)
        self.in_abs = False
        self.sp = _sympy()

    # -- helpers mirroring latex2sympy2_extended's visitor -------------------------------------------
    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.toks[j] if j < self.n else None

    def take(self, t: str) -> None:
        if self.peek() != t:
            raise _Unsupported(t)
        self.i += 1

    def add_flat(self, lh: Any, rh: Any) -> Any:
        sp = self.sp
        if lh.is_Add or rh.is_Add:
            args = list(lh.args) if lh.is_Add else [lh]
            args += list(rh.args) if rh.is_Add else [rh]
            return sp.Add(*args, evaluate=False)
        return sp.Add(lh, rh, evaluate=False)

    def mul_flat(self, lh: Any, rh: Any) -> Any:
        sp = self.sp
        lmul = getattr(lh, "is_Mul", False)
        if lmul or rh.is_Mul:
            args = list(lh.args) if lmul else [lh]
            args += list(rh.args) if rh.is_Mul else [rh]
            return sp.Mul(*args, evaluate=False)
        return sp.Mul(lh, rh, evaluate=False)

    def number(self, text: str) -> Any:
        if text.isdigit():
            text = text.lstrip("0") or "0"
        return self.sp.Number(text)

    # -- grammar -------------------------------------------------------------------------------------
    def expr(self) -> Any:
        """``additive``: left-associative ``+``/``-`` over ``mp``."""
        lh = self.mp()
        while self.peek() in ("+", "-"):
            op = self.toks[self.i]
            self.i += 1
            rh = self.mp()
            if op == "-":
                rh = -rh if rh.func.is_Number else self.mul_flat(-1, rh)
            lh = self.add_flat(lh, rh)
        return lh

    def mp(self) -> Any:
        r"""``mp``: left-associative ``\cdot``, ``\times``, ``/``, ``:`` over ``unary``."""
        sp = self.sp
        lh = self.unary()
        while self.peek() in _MP_OPS:
            op = self.toks[self.i]
            self.i += 1
            rh = self.unary()
            if op in ("\\cdot", "\\times"):
                lh = self.mul_flat(lh, rh)
            elif lh.is_Integer and rh.is_Integer:
                lh = sp.Rational(lh, rh)
            else:
                lh = sp.Mul(lh, sp.Pow(rh, -1, evaluate=False), evaluate=False)
        return lh

    def unary(self) -> Any:
        t = self.peek()
        if t == "+":
            self.i += 1
            return self.unary()
        if t == "-":
            self.i += 1
            x = self.unary()
            if x.func.is_Number or x.is_Number:
                return -x
            return self.mul_flat(-1, x)
        items = []
        while self.starts_comp():
            items.append(self.postfix())
        if not items:
            raise _Unsupported("expected an operand")
        res = items[-1]
        for left in reversed(items[:-1]):
            # juxtaposition: right-nested products; an integer before a positive rational is a
            # mixed number (latex2sympy does this whatever the config says)
            if left.is_Integer and res.is_Rational and res.p > 0 and res.q > 0:
                sp = self.sp
                res = sp.Rational(left * res.q - res.p, res.q) if left < 0 else sp.Rational(left * res.q + res.p, res.q)
            else:
                res = self.mul_flat(left, res)
        return res

    def starts_comp(self) -> bool:
        t = self.peek()
        if t is None:
            return False
        if t == "|":
            return not self.in_abs
        return t in ("(", "[", "\\frac", "\\sqrt", "\\pi", "\\infty", "e") or t in _FUNCS or _is_atom_token(t)

    def script(self) -> Any:
        """The exponent after ``^``: a braced expression or one atom token."""
        t = self.peek()
        if t == "{":
            self.i += 1
            saved, self.in_abs = self.in_abs, False
            x = self.expr()
            self.in_abs = saved
            self.take("}")
        elif t is not None and _is_atom_token(t) and t not in ("e", "\\infty"):
            self.i += 1
            x = self.atom(t)
        else:
            raise _Unsupported("exponent")
        if self.peek() in ("^", "_"):
            raise _Unsupported("script after script")
        return x

    def atom(self, t: str) -> Any:
        m = _SYMBOL.fullmatch(t)
        if m:
            return self.sp.Symbol(m.group(1))
        if t == "\\pi":
            return self.sp.pi
        if t == "\\infty":
            return self.sp.oo
        return self.number(t)

    def check_not_call(self) -> None:
        r"""A symbol or ``\pi`` before a bracket holding one atom (with scripts, or a list) is a call."""
        if self.peek() not in ("(", "["):
            return
        first = self.peek(1)
        if first is None or not _is_atom_token(first):
            return
        # the atom's scripts: ^ or _ and then a braced group or one token
        j = self.i + 2
        while j < self.n and self.toks[j] in ("^", "_"):
            j += 1
            if j < self.n and self.toks[j] == "{":
                depth = 0
                while j < self.n:
                    depth += {"{": 1, "}": -1}.get(self.toks[j], 0)
                    j += 1
                    if depth == 0:
                        break
            else:
                j += 1
        if j >= self.n or self.toks[j] in (")", "]", ","):
            raise _Unsupported("maybe a function call")

    def postfix(self) -> Any:
        sp = self.sp
        t = self.toks[self.i]
        self.i += 1
        if t == "e":
            if self.peek() == "^":
                self.i += 1
                x = sp.exp(self.script())
            else:
                x = sp.E
            self.check_not_call()
            return x
        if t in ("(", "["):
            saved, self.in_abs = self.in_abs, False
            x = self.expr()
            self.in_abs = saved
            self.take(_CLOSE[t])
        elif t == "|":
            self.in_abs = True
            x = sp.Abs(self.expr(), evaluate=False)
            self.in_abs = False
            self.take("|")
        elif t == "\\frac":
            self.take("{")
            top = self.braced_rest()
            self.take("{")
            bot = self.braced_rest()
            if top.is_Integer and bot.is_Integer:
                x = sp.Rational(top, bot)
            else:
                x = sp.Mul(top, sp.Pow(bot, -1, evaluate=False), evaluate=False)
        elif t == "\\sqrt":
            if self.peek() == "[":
                self.i += 1
                root = self.expr()
                self.take("]")
                self.take("{")
                x = sp.Pow(self.braced_rest(), 1 / root, evaluate=False)
            else:
                self.take("{")
                x = sp.Pow(self.braced_rest(), sp.S.Half, evaluate=False)
        elif t in _FUNCS:
            return self.function(t[1:])
        elif _is_atom_token(t):
            x = self.atom(t)
            if self.peek() == "_":
                raise _Unsupported("subscript")
            if not _NUMBER.fullmatch(t):
                if self.peek() == "^":
                    self.i += 1
                    x = sp.Pow(x, self.script(), evaluate=False)
                self.check_not_call()
                return x
        else:
            raise _Unsupported(t)
        if self.peek() == "^":
            self.i += 1
            x = sp.Pow(x, self.script(), evaluate=False)
        if self.peek() in ("_", "!", "'"):
            raise _Unsupported("postfix")
        return x

    def braced_rest(self) -> Any:
        saved, self.in_abs = self.in_abs, False
        x = self.expr()
        self.in_abs = saved
        self.take("}")
        return x

    def function(self, name: str) -> Any:
        sp = self.sp
        func_pow = None
        if self.peek() == "^":
            self.i += 1
            func_pow = self.script()
        if self.peek() != "(":
            raise _Unsupported("function argument without parentheses")
        self.i += 1
        saved, self.in_abs = self.in_abs, False
        arg = self.expr()
        self.in_abs = saved
        self.take(")")
        if name in ("arcsin", "arccos", "arctan", "arccsc", "arcsec", "arccot"):
            expr = getattr(sp, "a" + name[3:])(arg, evaluate=False)
        elif name in ("arsinh", "arcosh", "artanh"):
            expr = getattr(sp, "a" + name[2:])(arg, evaluate=False)
        elif name in ("arcsinh", "arccosh", "arctanh"):
            expr = getattr(sp, "a" + name[3:])(arg, evaluate=False)
        elif name == "log":
            expr = sp.log(arg, 10, evaluate=False)
        elif name == "ln":
            expr = sp.log(arg, sp.E, evaluate=False)
        elif name == "exp":
            expr = sp.exp(arg, evaluate=False)
        else:  # sin … cot, sinh … tanh
            if func_pow == -1:
                name = "a" + name
                func_pow = None
            expr = getattr(sp, name)(arg, evaluate=False)
        if func_pow:
            expr = sp.Pow(expr, func_pow, evaluate=False)
        if self.peek() == "^":
            if func_pow is not None:
                raise _Unsupported("two powers on a function")
            self.i += 1
            expr = sp.Pow(expr, self.script(), evaluate=False)
        if self.peek() in ("_", "!", "'"):
            raise _Unsupported("postfix")
        return expr


def fast_parse(text: str) -> Any:
    r"""latex2sympy2_extended's tree for aliased text in the common subset, else ``None``.

    Args:
        text: aliased LaTeX, tokens separated by single spaces (symbols as ``\mathrm{vN}``).

    Returns:
        The SymPy object latex2sympy2_extended builds for ``text`` (``srepr`` equal), or ``None`` when
        the text is outside the subset (or :data:`ENABLED` is ``False``): then parse the usual way.
    """
    if not ENABLED:
        return None
    toks = text.split()
    if not toks or toks.count("|") not in (0, 2):
        return None
    p = _Parser(toks)
    try:
        result = p.expr()
    except (_Unsupported, RecursionError):
        return None
    except Exception:  # noqa: BLE001 - a SymPy error: let the usual parse raise its own
        return None
    if p.i != p.n:
        return None
    return result
