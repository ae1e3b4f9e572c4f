r"""LaTeX -> SymPy through latex2sympy2_extended on aliased LaTeX (docs/protocol.md section 5).

:func:`to_sympy` and :func:`to_sympy_readings` run the size guards (length, exponent nesting, digit
runs), alias every symbol (:class:`studybench.verify.reading.aliasing.Aliaser`), make brace-less function
arguments explicit (every reading of ``\sin \theta\, e_\theta``) and hand the result to
``latex2sympy2_extended`` with ``lowercase_symbols=False``; parses are memoised. They are meant to run
inside a sandbox worker (:mod:`studybench.verify.sandbox`). :func:`symbol_keys` is the pure string part
(which symbols an answer uses), safe in-process.

Model text never reaches ``eval``, ``exec``, ``sympify`` of a string or ``parse_expr``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from studybench.verify.reading import fastparse
from studybench.verify.reading.aliasing import SPACE_MARK, UPRIGHT_FUNCS, Aliaser, new_aliases
from studybench.verify.reading.l2s_parse import parse_plain, parse_sll
from studybench.verify.reading.latex import (
    LatexError,
    expand_braceless,
    join_digit_groups,
    strip_text_remarks,
    tokenize,
)

__all__ = ["MAX_EXPONENT_DEPTH", "MAX_SYMBOLIC_LEN", "symbol_keys", "to_sympy", "to_sympy_readings"]


MAX_SYMBOLIC_LEN = 2000
"""Inputs longer than this (characters) are never given to SymPy."""
MAX_EXPONENT_DEPTH = 2
"""Deepest allowed nesting of ``^`` inside exponents (``a^{b^{c}}`` has depth 2)."""
_RECIPROCAL = {"sech": "cosh", "csch": "sinh", "coth": ("cosh", "sinh")}
_FUNC_TOKENS = {"\\" + f for f in UPRIGHT_FUNCS}
_OPEN = {"(": ")", "[": "]"}
_MAX_READINGS = 6
_NUMBER_TOKEN = re.compile(r"\d+(?:\.\d*)?|\.\d+|\(\d[\d.]*\\times 10\^\{-?\d+\}\)")


def _factor_end(conv: list[str], i: int) -> int | None:
    """End of one multiplicative factor of converted tokens starting at ``conv[i]``.

    A symbol, number, fraction, root or bracketed group, with an optional power; ``None`` otherwise.
    """
    n = len(conv)
    if i >= n:
        return None
    t = conv[i]

    def grp(j: int) -> int | None:
        if j >= n:
            return None
        if conv[j] != "{":
            return j + 1
        depth = 0
        for k in range(j, n):
            if conv[k] == "{":
                depth += 1
            elif conv[k] == "}":
                depth -= 1
                if depth == 0:
                    return k + 1
        return None

    if t.startswith("\\mathrm{v") or t in ("\\pi", "e") or _NUMBER_TOKEN.fullmatch(t):
        j: int | None = i + 1
    elif t == "\\frac":
        j = grp(i + 1)
        j = grp(j) if j is not None else None
    elif t == "\\sqrt":
        j = grp(i + 1)
    elif t in _OPEN:
        depth = 0
        j = None
        for k in range(i, n):
            if conv[k] in _OPEN:
                depth += 1
            elif conv[k] in (")", "]"):
                depth -= 1
                if depth == 0:
                    j = k + 1
                    break
    else:
        return None
    if j is not None and j < n and conv[j] == "^":
        j = grp(j + 1)
    return j


def _argument_ends(r: list[str], j: int) -> list[int]:
    r"""Ends of the factors a brace-less argument starting at ``r[j]`` may take (at most four).

    A written space ends the argument (``\sin\phi_0\,e^{-t/\tau}``) unless only numbers precede it
    (``\sin 2\,\theta``).
    """
    ends: list[int] = []
    k = j
    while len(ends) < 4:
        e2 = _factor_end(r, k)
        if e2 is None:
            if k < len(r) and r[k] == SPACE_MARK and ends and all(_NUMBER_TOKEN.fullmatch(t) or t == SPACE_MARK for t in r[j:k]):
                k += 1
                continue
            break
        ends.append(e2)
        k = e2
    return ends


def _conventional_stop(r: list[str], j: int, e: int) -> bool:
    r"""Whether the factor at ``r[e]`` conventionally starts after a brace-less argument starting at ``r[j]``.

    An exponential (``\sin\theta\, e^{i\phi}``), a root or a fraction after the argument's first
    factor is a new factor (``\cos\theta\sqrt{2gh}``, ``\sin\theta\frac{a}{b}``), unless only numbers
    and ``\pi`` precede it (``\sin 2\pi\frac{x}{\lambda}`` is ``\sin(2\pi x/\lambda)``).
    """
    if all(_NUMBER_TOKEN.fullmatch(t) or t in ("\\pi", "\\cdot", SPACE_MARK) for t in r[j:e]):
        return False
    return (r[e] == "e" and e + 1 < len(r) and r[e + 1] == "^") or r[e] in ("\\sqrt", "\\frac")


def _braced_argument(r: list[str], j: int) -> list[str] | None:
    r"""``\sin{x y}``: the braced group at ``r[j]`` as the bracketed argument ``\sin(x y)``; ``None`` when unbalanced.

    latex2sympy would read ``\sin{(x)} \cdot \sin{(y)}`` as ``sin(x sin(y))``.
    """
    depth = 0
    for k in range(j, len(r)):
        depth += r[k] == "{"
        depth -= r[k] == "}"
        if depth == 0:
            return [*r[:j], "(", *r[j + 1 : k], ")", *r[k + 1 :]]
    return None


def _function_readings(conv: list[str], gold: bool = False, stops: frozenset[str] = frozenset()) -> list[list[str]]:
    r"""Readings of brace-less function arguments.

    ``\sin \theta e_\theta`` may mean ``\sin(\theta) e_\theta`` or ``\sin(\theta e_\theta)``; each
    reading makes every argument explicit. A braced argument is the whole argument (``\sin{x}\cdot y``),
    a written space ends one (:func:`_argument_ends`). The first reading is the greedy one
    (latex2sympy's); a gold is read only the conventional way (:func:`_conventional_stop`). The space
    marks are dropped from the result. At most :data:`_MAX_READINGS`.
    """
    out: list[list[str]] = []

    def expand(r: list[str], start: int) -> None:
        if len(out) >= _MAX_READINGS:
            return
        for idx in range(start, len(r)):
            if r[idx] not in _FUNC_TOKENS:
                continue
            j = idx + 1
            if j < len(r) and r[j] == "^":
                e = _factor_end(["\\mathrm{v}", *r[j:]], 0)
                if e is None:
                    continue
                j = j + e - 1
            while j < len(r) and r[j] == SPACE_MARK:
                j += 1
            if j < len(r) and r[j] == "{":
                braced = _braced_argument(r, j)
                if braced is not None:
                    r = braced
            if j >= len(r) or r[j] in ("(", "["):
                continue
            ends = _argument_ends(r, j)
            if not ends:
                continue
            choices = list(reversed(ends))
            if gold:
                # a gold is read the conventional way: the argument takes the juxtaposed factors up to
                # an exponential, a root or a fraction, and also stops before a vector or a subscripted
                # symbol (\sin\theta\,\hat{e}_r, \sin\frac{\pi}{R} r\, Y_{00}); never \cos(\omega) t
                conventional = next((e for e in ends[:-1] if _conventional_stop(r, j, e)), ends[-1])
                stop = next((e for e in ends if e < conventional and r[e] in stops), None)
                choices = [conventional] + ([stop] if stop is not None else [])
            for e2 in choices:
                expand(r[:j] + ["("] + r[j:e2] + [")"] + r[e2:], idx + 1)
            return
        out.append([t for t in r if t != SPACE_MARK])

    expand(conv, 0)
    readings = out[:_MAX_READINGS] or [[t for t in conv if t != SPACE_MARK]]
    tight = None if gold else _tight_division(readings[0])
    if tight is not None and len(readings) < _MAX_READINGS:
        readings.append(tight)
    return [_reciprocal_functions(r) for r in readings]


def _tight_division(conv: list[str]) -> list[str] | None:
    r"""The reading of ``(a)/(b)\, c`` as ``\frac{a}{b} c`` (latex2sympy reads ``a/(b c)``).

    Each ``X / Y`` with single factors X and Y followed by more factors becomes a fraction. ``None``
    when there is no such division.
    """
    out = list(conv)
    changed = False
    k = 0
    while k < len(out):
        if out[k] != "/" or k == 0:
            k += 1
            continue
        # X: a bracketed group or one token before the slash
        if out[k - 1] in (")", "]"):
            depth = 0
            j = k - 1
            while j >= 0:
                depth += out[j] in (")", "]")
                depth -= out[j] in ("(", "[")
                if depth == 0:
                    break
                j -= 1
            if j < 0:
                return None
            x0 = j
        elif out[k - 1].startswith("\\mathrm{v") or _NUMBER_TOKEN.fullmatch(out[k - 1]):
            x0 = k - 1
        else:
            k += 1
            continue
        y1 = _factor_end(out, k + 1)
        if y1 is None or y1 >= len(out) or _factor_end(out, y1) is None:
            k += 1
            continue
        x = out[x0:k]
        y = out[k + 1 : y1]
        if x[:1] == ["("] and x[-1:] == [")"]:
            x = x[1:-1]
        if y[:1] == ["("] and y[-1:] == [")"]:
            y = y[1:-1]
        out[x0:y1] = ["\\frac", "{", *x, "}", "{", *y, "}"]
        changed = True
        k = x0 + 1
    return out if changed else None


def _reciprocal_functions(conv: list[str]) -> list[str]:
    r"""``\sech``, ``\csch``, ``\coth`` (which latex2sympy misreads as ``\sec h``) as quotients.

    They become quotients of ``\cosh`` and ``\sinh``; the argument must be bracketed by then.
    """
    if not any(t in ("\\sech", "\\csch", "\\coth") for t in conv):
        return conv
    out: list[str] = []
    i = 0
    n = len(conv)
    while i < n:
        t = conv[i]
        if t not in ("\\sech", "\\csch", "\\coth"):
            out.append(t)
            i += 1
            continue
        j = i + 1
        power: list[str] = []
        if j < n and conv[j] == "^":
            e = _factor_end(["\\mathrm{v}", *conv[j:]], 0)
            if e is None:
                raise LatexError("bad power")
            power = conv[j : j - 1 + e]
            j = j - 1 + e
        e = _factor_end(conv, j)
        if e is None or conv[j] not in _OPEN:
            raise LatexError(f"cannot read the argument of {t}")
        arg = conv[j:e]
        f = t[1:]
        if f == "coth":
            out += ["\\frac", "{", "\\cosh", *power, *arg, "}", "{", "\\sinh", *power, *arg, "}"]
        else:
            out += ["\\frac", "{", "1", "}", "{", "\\" + _RECIPROCAL[f], *power, *arg, "}"]  # type: ignore[operator]
        i = e
    return out


def _exponent_depth(toks: list[str]) -> int:
    """Deepest nesting of ``^`` within exponent groups."""
    best = 0
    stack: list[int] = []  # per brace level: exponent depth inside
    depth = 0
    pending = False
    for t in toks:
        if t == "^":
            pending = True
            continue
        if t == "{":
            stack.append(depth)
            if pending:
                depth += 1
                best = max(best, depth)
            pending = False
            continue
        if t == "}":
            depth = stack.pop() if stack else 0
            continue
        if pending:
            best = max(best, depth + 1)
            pending = False
    return best


_L2S_CONFIG: Any = None


def _convert(latex: str, aliases: Aliaser | None) -> tuple[Aliaser, list[str]]:
    """Size guards, then the aliased tokens of ``latex`` (raises :class:`LatexError`)."""
    if not isinstance(latex, str) or not latex.strip():
        raise LatexError("empty")
    if len(latex) > MAX_SYMBOLIC_LEN:
        raise LatexError("input too long for symbolic comparison")
    # a doubled backslash before a command name is an escaping slip (\\frac), not a line break
    latex = _trim_edges(latex)
    text0 = re.sub(r"\\\\(?=(?:frac|dfrac|sqrt|cdot|times|pi|left|right)(?![A-Za-z]))", r"\\", latex.replace("$", " "))
    text0 = join_digit_groups(text0)
    toks = tokenize(strip_text_remarks(expand_braceless(text0)))
    if _exponent_depth(toks) > MAX_EXPONENT_DEPTH:
        raise LatexError("exponent tower too deep")
    al = aliases if aliases is not None else new_aliases(latex)
    conv = al.convert(toks)
    plain = [t for t in conv if t != SPACE_MARK]
    for x, y in zip(plain, plain[1:], strict=False):
        if _NUMBER_TOKEN.fullmatch(x) and _NUMBER_TOKEN.fullmatch(y):
            # "2 3" (latex2sympy would add them) or "2 \text{ or } 3": not one expression
            raise LatexError("juxtaposed numbers")
    if not plain:
        raise LatexError("nothing to convert")
    return al, conv


_EDGE = r"(?:\s|(?<!\\)\\[,;:! >]|\\q?quad(?![A-Za-z])|~|\\displaystyle(?![A-Za-z]))"
_LEADING = re.compile(rf"^{_EDGE}+")
_TRAILING = re.compile(rf"(?:{_EDGE}|(?<!\\)[.,;]|(?<!\\)\\\\|(?<!\\)\\(?=\s*$))+$")


def _trim_edges(latex: str) -> str:
    r"""``latex`` without spacing commands, whitespace, ``\displaystyle`` and trailing punctuation at its ends.

    ``\tau \,`` (the left side of ``\tau \,= x``) is ``\tau``; the comma of a trailing ``\,`` is no
    punctuation (dropping it alone would leave a lone backslash); a lone trailing backslash is a
    control space whose space was stripped (``\tau \ = x`` split at ``=``).
    """
    return _TRAILING.sub("", _LEADING.sub("", latex))


def _l2s(conv: list[str]) -> Any:
    return _l2s_text(" ".join(conv).strip())


def _l2s_text(text: str) -> Any:
    """latex2sympy on aliased text, memoised (:func:`_l2s_parse`, keyed on the text and ``fastparse.ENABLED``).

    The memo key holds everything the result depends on, so a parse made while the fast parser was
    off (the worker's warm-up, a test) never answers a later call made with it on.
    """
    return _l2s_parse(text, fastparse.ENABLED)


@functools.lru_cache(maxsize=8192)
def _l2s_parse(text: str, fast_enabled: bool) -> Any:
    """latex2sympy on aliased text, memoised.

    The ANTLR parse dominates the verifier's cost and the same aliased text recurs across the reading
    pairs of one comparison (SymPy objects are immutable). The hand-written parser of the common
    subset first (:mod:`studybench.verify.reading.fastparse`, the very tree; ``fastparse.ENABLED`` switches it
    off, and is passed here as ``fast_enabled`` so that it is part of the memo key), then SLL
    prediction, then the plain parse when that fails (:mod:`studybench.verify.reading.l2s_parse`): the same
    result, most often much faster.
    """
    fast = fastparse.fast_parse(text) if fast_enabled else None
    if fast is not None:
        return fast
    global _L2S_CONFIG
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig

    if _L2S_CONFIG is None:
        _L2S_CONFIG = ConversionConfig(
            lowercase_symbols=False,
            interpret_as_mixed_fractions=False,
            interpret_simple_eq_as_assignment=False,
        )
    try:
        result = parse_sll(text, _L2S_CONFIG)
        if result is None:
            result = parse_plain(text, _L2S_CONFIG)
    except Exception as e:  # latex2sympy raises bare Exception on syntax errors
        raise LatexError(f"unparsable LaTeX ({type(e).__name__})") from None
    if result is None:
        raise LatexError("unparsable LaTeX")
    return result


_l2s_text.cache_clear = _l2s_parse.cache_clear  # type: ignore[attr-defined]  # tests clear the memo by this name


WARM_UP_LATEX = (
    r"\frac{a}{b} + \sqrt{x^{2} + y_{1}^{2}} - 2 \cdot 3.5 \times 10^{-3}",
    r"F = -\frac{G M m}{r^{2}}", r"E = \frac{1}{2} m v^{2} + m g h", r"x^{2} - 1 = 0",
    r"\sin(\omega t) + \cos \theta - \tan^{2} \phi", r"e^{-\frac{t}{\tau}} \ln(1 + x)",
    r"\left(\frac{p}{q}\right)^{\frac{3}{2}}", r"\sqrt[3]{2 k T / m}", r"\frac{\partial u}{\partial x}",
    r"\frac{d y}{d t} = -k y", r"\int_{0}^{1} x^{2} \, d x", r"\sum_{n=1}^{N} n^{2}", r"a < x \leq b",
    r"(0, 1]", r"\{1, 2, 3\}", r"|z| \geq 2", r"\exp(-\beta E) / Z", r"\hbar \omega (n + \frac{1}{2})",
    r"\mu_{0} I / (2 \pi r)", r"\alpha \beta \gamma", r"3 \times 10^{8}", r"-\frac{1}{2}", r"\pi R^{2} L",
    r"\arcsin\left(\frac{v}{c}\right)", r"\cosh x \sinh y", r"x!", r"\log_{2} N", r"f(x) = a x + b",
    r"\frac{m v^{2}}{2} \left[ a b - (c - d) \right]", r"\frac{1}{2} m_{1} \dot{x}_{1}^{2} - \frac{q^{2}}{2 C}",
    r"N k \left\{ \ln \frac{\cosh[(n + 1) y]}{\cosh y} - y \tanh y \right\}",
    r"\sqrt{\frac{3}{L}} \cos \frac{\pi x}{L}", r"-k T \ln \left( 1 + e^{-\beta \epsilon} \right)",
    r"\left[ 1 - \left( \frac{v}{c} \right)^{2} \right]^{-1/2}", r"A \cos(k x - \omega t + \phi)",
    r"\frac{\mu_{0} I}{4 \pi} \cdot \frac{2 a b}{(a^{2} + b^{2})^{3/2}}", r"x^{\prime} = \gamma (x - v t)",
    r"\frac{3}{2} n k T", r"2.5 \times 10^{-3}", r"(M + m) g \sin \theta", r"\frac{q}{4 \pi \varepsilon_{0} r^{2}}",
)
"""Generic expressions a worker parses at start-up so that ANTLR's prediction cache (shared by all
later parses in the process) is warm before the first timed task (:func:`warm_up_parser`)."""


def warm_up_parser() -> None:
    """Parse :data:`WARM_UP_LATEX` once (errors ignored): fills ANTLR's prediction cache. Never raises.

    The fast parser is off meanwhile, so that ANTLR sees every shape (the texts it still gets later
    are built of the same parts).
    """
    enabled, fastparse.ENABLED = fastparse.ENABLED, False
    try:
        for text in WARM_UP_LATEX:
            try:
                to_sympy(text)
            except Exception:  # noqa: BLE001 - best effort
                pass
    finally:
        fastparse.ENABLED = enabled


def to_sympy(latex: str, aliases: Aliaser | None = None) -> Any:
    r"""Convert LaTeX to a SymPy object (expression, Equality, relational, set, matrix).

    Args:
        latex: one box's content or a part of it (untrusted).
        aliases: a shared alias table (:func:`new_aliases`) so that two strings compared with each
            other map the same symbol to the same SymPy symbol; a fresh one when ``None``.

    Returns:
        The SymPy object built by ``latex2sympy2_extended`` from the aliased LaTeX, in the conventional
        reading of brace-less function arguments (the first of :func:`to_sympy_readings` with
        ``gold=True``: ``\cos\omega t`` is ``cos(omega t)``, ``\sin\phi\, e^{-t/\tau}`` is
        ``sin(phi) e^{-t/tau}``).

    Raises:
        LatexError: input too long, exponent towers, over-long numbers, unsupported constructs, or
            anything latex2sympy cannot parse.
    """
    return to_sympy_readings(latex, aliases, gold=True, first=True)[0]


def to_sympy_readings(latex: str, aliases: Aliaser | None = None, gold: bool = False, first: bool = False) -> list[Any]:
    r"""Every reading of ``latex`` that parses.

    ``\sin \theta\, e_\theta`` is read both as ``sin(theta) e_theta`` and as ``sin(theta e_theta)``
    (brace-less function arguments are ambiguous in LaTeX); the first element is latex2sympy's greedy
    reading when it parses. A written space always ends an argument, a braced group always is the whole
    argument. At most six readings.

    Args:
        latex: one box's content or a part of it (untrusted).
        aliases: the shared alias table of the comparison (:func:`studybench.verify.reading.aliasing.new_aliases`);
            a fresh one when ``None``.
        gold: read the text only the conventional way (the argument stops before an exponential, a
            root or a fraction, and also, as a second reading, before a vector or subscripted symbol)
            and never with the tight-slash reading, so that a prediction cannot match an unintended
            reading of the gold.
        first: stop at the first reading that parses.

    Returns:
        The SymPy objects, one per reading that parses.

    Raises:
        LatexError: when no reading parses (the causes of :func:`to_sympy`).
    """
    al, conv = _convert(latex, aliases)
    out: list[Any] = []
    err: LatexError | None = None
    stops = frozenset(al.vectors) | frozenset(al.alias(k) for k in list(al.table) if "_{" in k)
    for r in _function_readings(conv, gold, stops):
        try:
            out.append(_l2s(r))
        except LatexError as e:
            err = err or e
            continue
        if first:
            break
    if not out:
        raise err or LatexError("unparsable LaTeX")
    return out


def symbol_keys(latex: str) -> set[str] | None:
    r"""The symbols a LaTeX answer uses, as normalised keys, without SymPy.

    Pure string work, safe in-process (the dense reward uses it).

    Args:
        latex: one answer.

    Returns:
        Keys such as ``k_{B}``, ``\epsilon_{0}``, ``deriv1(x|t)``; ``None`` when the answer cannot be
        read. Never raises.
    """
    try:
        al = new_aliases(latex)
        _convert(latex, al)
    except (LatexError, RecursionError, ValueError, IndexError):
        return None
    return set(al.table)
