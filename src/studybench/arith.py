r"""A small, safe evaluator of arithmetic written in LaTeX (numbers only; never ``eval``, never SymPy).

:func:`evaluate_arithmetic` reads what a worked solution writes between its equals signs, such as
``\frac{10^{-1}\,\mathrm{kg/m^2}}{54 \times 1.66 \times 10^{-27}\,\mathrm{kg}}`` or
``-1.1 + 5\log_{10}700 - 5``, and returns its value, or ``None`` when the text is anything but
arithmetic on written numbers (a symbol, an unknown command, a comparison, something too large).

What it reads: decimal numbers (also OCR-spaced ``1 . 6 6``, ``1.6e-19``), ``+ - \times \cdot / \div``,
``\frac`` (``\dfrac``, ``\tfrac``), powers (``^{...}``, ``^2``), ``\sqrt`` and ``\sqrt[n]``, ``\pi``,
``\sin \cos \tan \ln \log \log_{10} \exp``, degrees (``30^\circ`` is 30, and radians inside a trig
function: ``\sin 30^\circ`` is 0.5), parentheses and brackets (``\left( \right)``), implicit products
(``2\pi``, ``5\log_{10}700``) and spacing commands. Units count as the factor 1, so
``10^{-1}\,\mathrm{kg}/\mathrm{m}^{2}`` is 0.1: text groups (``\mathrm{...}``, ``\text{...}``,
``\mbox{...}``, ``\rm kg``), ``\%``, ``M_\odot``-style units, and the unit symbols of :data:`BARE_UNITS`
written as bare letters right after a number (``0.001 m``). Any other letter is a symbol: declined.

The parser is a recursive descent over tokens with bounds on the text's length, the nesting depth
and the exponents, so hostile text costs linear time and cannot overflow the stack.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["BARE_UNITS", "MAX_ARITH_CHARS", "NumberToken", "evaluate_arithmetic", "number_tokens", "tokenize_arithmetic"]

MAX_ARITH_CHARS = 2000
"""The longest text :func:`evaluate_arithmetic` reads (longer text is declined)."""

_MAX_DEPTH = 40
_MAX_EXP = 400.0

_NUMBER = re.compile(r"(?:\d[\d ]*(?:\.[ ]*(?:\d[\d ]*)?)?|\.[ ]*\d[\d ]*)(?:[eE][-+]?\d{1,3}(?!\d))?")
_COMMAND = re.compile(r"\\([A-Za-z]+|.)")
_UNIT_GROUPS = frozenset({"mathrm", "text", "textrm", "mbox", "textup", "operatorname", "textit", "mathit", "unit"})
_SPACING = frozenset({",", ";", ":", "!", " ", "quad", "qquad", "left", "right", "big", "Big", "bigg", "Bigg",
                      "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "displaystyle", "limits", "nolimits"})
_ASTRO_UNIT = re.compile(r"[MRL]_\{?\\(?:odot|oplus|sun|earth)\}?")
_FUNCS = frozenset({"sin", "cos", "tan", "ln", "log", "exp"})
_MUL = frozenset({"times", "cdot", "ast"})
BARE_UNITS = frozenset(
    "m s kg g C A V W J N K T Pa Hz eV keV MeV GeV mm cm km nm um pm fm mol sr rad yr ly pc kpc Mpc AU au "
    "min h L mA kV kW MW mW ms ns us kJ MJ mT kHz MHz GHz Wb F H ohm dB mag arcsec arcmin atm bar erg dyn "
    "cal kcal Gyr Myr lyr".split()
)
"""Unit symbols read as the factor 1 when written as bare letters right after a number (``0.001 m``,
``5\\cdot10^{-8} C/s``): a bare letter anywhere else is a symbol."""


@dataclass(frozen=True)
class NumberToken:
    """A number as written in the text.

    Attributes:
        text: the digits as written, spaces removed (``1.66``, ``1.6e-19``).
        value: its value.
        start: its offset in the text tokenized.
    """

    text: str
    value: float
    start: int


class _Decline(Exception):
    """The text is not arithmetic this evaluator reads."""


def _skip_group(text: str, i: int) -> int:
    """The offset after the ``{...}`` group opening at ``i`` (balanced; ``-1`` when unclosed)."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def tokenize_arithmetic(text: str) -> list[tuple[str, object, int]] | None:
    """The tokens of ``text`` as ``(kind, value, offset)``, or ``None`` when it holds something else.

    Kinds: ``num`` (value: the :class:`NumberToken`), ``op`` (``+ - * / ^ ( ) { } [ ] _``), ``cmd``
    (a command name: ``frac``, ``sqrt``, ``pi``, a function, ``circ``), ``unit`` (a text group or
    ``\rm`` word: the factor 1).

    Args:
        text: LaTeX arithmetic (at most :data:`MAX_ARITH_CHARS` characters).

    Returns:
        The tokens, or ``None`` for a letter, an unknown command, a relation or text too long.
    """
    if not isinstance(text, str) or len(text) > MAX_ARITH_CHARS:
        return None
    out: list[tuple[str, object, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r~&":
            i += 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1] in "0123456789 "):
            m = _NUMBER.match(text, i)
            if not m or not any(ch.isdigit() for ch in m.group()):
                return None
            raw = m.group().rstrip()
            digits = raw.replace(" ", "")
            try:
                value = float(digits)
            except ValueError:
                return None
            out.append(("num", NumberToken(digits, value, i), i))
            i += len(raw)
            continue
        if c == "\\":
            m = _COMMAND.match(text, i)
            if not m:
                return None
            name = m.group(1)
            j = m.end()
            if name in _SPACING:
                i = j
                continue
            if name == "%":
                out.append(("unit", "%", i))
                i = j
                continue
            if name in ("{", "}"):
                out.append(("op", "(" if name == "{" else ")", i))
                i = j
                continue
            if name in _UNIT_GROUPS:
                while j < n and text[j] == " ":
                    j += 1
                if j >= n or text[j] != "{":
                    return None
                end = _skip_group(text, j)
                if end < 0:
                    return None
                out.append(("unit", None, i))
                i = end
                continue
            if name == "rm":  # {\rm kg}: the rest of the group is a unit
                k = j
                while k < n and (text[k].isalpha() or text[k] == " "):
                    k += 1
                out.append(("unit", None, i))
                i = k
                continue
            if name in _MUL:
                out.append(("op", "*", i))
            elif name == "div":
                out.append(("op", "/", i))
            elif name in ("frac", "dfrac", "tfrac"):
                out.append(("cmd", "frac", i))
            elif name in ("sqrt", "pi", "circ") or name in _FUNCS:
                out.append(("cmd", name, i))
            elif name == "degree":
                out.append(("op", "^", i))
                out.append(("cmd", "circ", i))
            else:
                return None
            i = j
            continue
        astro = _ASTRO_UNIT.match(text, i)
        if astro and out and (out[-1][0] == "num" or out[-1][1] == ")"):
            out.append(("unit", astro.group(), i))
            i = astro.end()
            continue
        if c.isalpha():  # a bare unit right after a number (or after "/" following such a unit)
            m = re.match(r"[A-Za-z]+", text[i:])
            word = m.group() if m else c
            prev = out[-1] if out else None
            after_number = prev is not None and (prev[0] == "num" or prev[1] == ")")
            after_unit = len(out) > 1 and prev == ("op", "/", prev[2]) and out[-2][0] == "unit"
            if word not in BARE_UNITS or not (after_number or after_unit):
                return None
            out.append(("unit", word, i))
            i += len(word)
            continue
        if c in "+-*/^()[]{}_":
            kind = {"{": "(", "}": ")", "[": "[", "]": "]"}.get(c, c)
            out.append(("op", kind, i))
            i += 1
            continue
        if c in "\u00d7\u22c5\u00b7":
            out.append(("op", "*", i))
            i += 1
            continue
        if c in "\u2212\u2013":
            out.append(("op", "-", i))
            i += 1
            continue
        if c == "\u00b0":
            out.append(("op", "^", i))
            out.append(("cmd", "circ", i))
            i += 1
            continue
        return None
    return out


def number_tokens(text: str) -> list[NumberToken] | None:
    """The numbers written in ``text`` (``None`` when it is not arithmetic, as :func:`tokenize_arithmetic`)."""
    toks = tokenize_arithmetic(text)
    if toks is None:
        return None
    return [t[1] for t in toks if t[0] == "num"]  # type: ignore[misc]


class _Parser:
    def __init__(self, toks: list[tuple[str, object, int]], values: dict[int, float] | None) -> None:
        self.toks = toks
        self.i = 0
        self.depth = 0
        self.trig = 0
        self.values = values or {}

    def peek(self) -> tuple[str, object] | None:
        if self.i >= len(self.toks):
            return None
        k, v, _ = self.toks[self.i]
        return k, v

    def take(self) -> tuple[str, object, int]:
        if self.i >= len(self.toks):
            raise _Decline
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, kind: str, value: object) -> None:
        k, v, _ = self.take()
        if (k, v) != (kind, value):
            raise _Decline

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Decline

    def expr(self) -> float:
        self.enter()
        value = self.term()
        while (p := self.peek()) is not None and p[0] == "op" and p[1] in ("+", "-"):
            self.take()
            rhs = self.term()
            value = value + rhs if p[1] == "+" else value - rhs
        self.depth -= 1
        return _finite(value)

    def starts_factor(self) -> bool:
        p = self.peek()
        if p is None:
            return False
        k, v = p
        return k in ("num", "unit") or (k == "cmd" and v != "circ") or (k == "op" and v in ("(", "["))

    def term(self) -> float:
        value = self.signed()
        while True:
            p = self.peek()
            if p is not None and p[0] == "op" and p[1] in ("*", "/"):
                self.take()
                rhs = self.signed()
                if p[1] == "/":
                    if rhs == 0:
                        raise _Decline
                    value = value / rhs
                else:
                    value = value * rhs
            elif self.starts_factor():  # implicit product: 2\pi, 5\log_{10}700, (a)(b)
                value = value * self.power()
            else:
                return _finite(value)

    def signed(self) -> float:
        p = self.peek()
        if p is not None and p[0] == "op" and p[1] in ("+", "-"):
            self.take()
            self.enter()
            v = self.signed()
            self.depth -= 1
            return -v if p[1] == "-" else v
        return self.power()

    def exponent(self) -> float | str:
        p = self.peek()
        if p is None:
            raise _Decline
        if p == ("cmd", "circ"):
            self.take()
            return "circ"
        if p[0] == "op" and p[1] == "(":
            self.take()
            if self.peek() == ("cmd", "circ"):
                self.take()
                self.expect("op", ")")
                return "circ"
            v = self.expr()
            self.expect("op", ")")
            return v
        if p[0] == "num":  # ^23 is ^2 then 3: only the first digit is the exponent
            _, tok, off = self.take()
            assert isinstance(tok, NumberToken)
            if len(tok.text) > 1:
                if not tok.text[0].isdigit():
                    raise _Decline
                rest = tok.text[1:]
                self.i -= 1
                self.toks[self.i] = ("num", NumberToken(rest, float(rest), off + 1), off + 1)
                return float(tok.text[0])
            return tok.value
        if p[0] == "op" and p[1] == "-":
            self.take()
            e = self.exponent()
            if isinstance(e, str):
                raise _Decline
            return -e
        raise _Decline

    def power(self) -> float:
        base = self.atom()
        while (p := self.peek()) is not None and p == ("op", "^"):
            self.take()
            e = self.exponent()
            if e == "circ":  # degrees: read as radians inside a trig function, else kept as written
                if self.trig:
                    base = base * math.pi / 180.0
                continue
            assert isinstance(e, float)
            if abs(e) > _MAX_EXP or (base == 0 and e < 0):
                raise _Decline
            try:
                base = math.pow(base, e)
            except (OverflowError, ValueError):
                raise _Decline from None
            base = _finite(base)
        return base

    def group(self) -> float:
        self.expect("op", "(")
        v = self.expr()
        self.expect("op", ")")
        return v

    def atom(self) -> float:
        self.enter()
        k, v, idx = self.take()
        out: float
        if k == "num":
            assert isinstance(v, NumberToken)
            out = self.values.get(v.start, v.value)
        elif k == "unit":
            out = 1.0
        elif k == "op" and v in ("(", "["):
            inner = self.expr()
            self.expect("op", ")" if v == "(" else "]")
            out = inner
        elif k == "cmd" and v == "frac":
            num = self.group()
            den = self.group()
            if den == 0:
                raise _Decline
            out = num / den
        elif k == "cmd" and v == "sqrt":
            root = 2.0
            if self.peek() == ("op", "["):
                self.take()
                root = self.expr()
                self.expect("op", "]")
                if root == 0:
                    raise _Decline
            arg = self.group()
            if arg < 0:
                raise _Decline
            out = arg ** (1.0 / root)
        elif k == "cmd" and v == "pi":
            out = math.pi
        elif k == "cmd" and v in _FUNCS:
            out = self.function(str(v))
        else:
            raise _Decline
        self.depth -= 1
        return _finite(out)

    def function(self, name: str) -> float:
        base = None
        if name == "log" and self.peek() == ("op", "_"):
            self.take()
            base = self.exponent()
            if not isinstance(base, float) or base <= 0 or base == 1:
                raise _Decline
        self.trig += name in ("sin", "cos", "tan")
        try:
            arg = self.power()
        finally:
            self.trig -= name in ("sin", "cos", "tan")
        try:
            if name == "sin":
                return math.sin(arg)
            if name == "cos":
                return math.cos(arg)
            if name == "tan":
                return math.tan(arg)
            if name == "exp":
                if arg > 700:
                    raise _Decline
                return math.exp(arg)
            if arg <= 0:
                raise _Decline
            if name == "ln":
                return math.log(arg)
            return math.log(arg, base) if base is not None else math.log10(arg)
        except (ValueError, OverflowError):
            raise _Decline from None


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise _Decline
    return v


def evaluate_arithmetic(text: str, values: dict[int, float] | None = None) -> float | None:
    r"""The value of LaTeX arithmetic on written numbers, or ``None`` (see the module docstring).

    Args:
        text: the arithmetic, e.g. ``\frac{10^{-7}}{1.6\times10^{-19}}``.
        values: replacement values of some numbers, by their offset in ``text``
            (:attr:`NumberToken.start`): e.g. a rounded intermediate result written ``1.1\times10^{24}``
            replaced by its unrounded value.

    Returns:
        A finite float, or ``None`` when ``text`` is empty, not arithmetic, malformed, divides by
        zero or leaves the float range. Never raises on a string.
    """
    toks = tokenize_arithmetic(text)
    if not toks or not any(t[0] == "num" for t in toks):
        return None
    p = _Parser(list(toks), values)
    try:
        v = p.expr()
    except (_Decline, RecursionError, AssertionError):
        return None
    if p.i != len(p.toks):
        return None
    return v
