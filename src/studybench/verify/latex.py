"""LaTeX normalisation and LaTeX -> SymPy conversion (PROTOCOL.md section 5).

Two layers:

* Pure string helpers, safe and cheap in any process: :func:`norm_string` (the normalised form
  used by the in-process fast path), :func:`norm_text` (case-folded text for QL / MC / TF),
  :func:`split_relations` (top-level ``=``, ``\\approx``, ``<`` ... splitting) and
  :func:`tokenize`.
* :func:`to_sympy`, which rewrites every symbol of the LaTeX (letters, Greek macros, accented and
  subscripted names, ``\\langle x\\rangle``) into an opaque alias ``\\mathrm{vN}`` and hands the
  result to ``latex2sympy2_extended`` with ``lowercase_symbols=False``. Aliasing keeps ``M`` and
  ``m`` apart, keeps ``\\hbar`` a symbol (so ``2\\hbar\\omega`` never equals ``2\\omega``), and makes
  spacing meaningful exactly as LaTeX does (``\\omega t`` is two symbols, never ``\\omegat``).
  It is meant to run inside a sandbox worker (:mod:`studybench.verify.sandbox`).

Model text never reaches ``eval``, ``exec``, ``sympify`` of a string or ``parse_expr``.
"""

from __future__ import annotations

import re
from typing import Any

from studybench.verify.extract import match_brace

__all__ = [
    "MAX_SYMBOLIC_LEN",
    "LatexError",
    "norm_string",
    "norm_text",
    "split_relations",
    "strip_text_remarks",
    "to_sympy",
    "tokenize",
]

MAX_SYMBOLIC_LEN = 2000
"""Inputs longer than this (characters) are never given to SymPy."""

MAX_EXPONENT_DEPTH = 2
"""Deepest allowed nesting of ``^`` inside exponents (``a^{b^{c}}`` has depth 2)."""

MAX_NUMBER_DIGITS = 40
"""Longest allowed digit run in symbolic input."""


class LatexError(ValueError):
    """LaTeX the verifier will not or cannot convert (too big, unsupported, unparsable)."""


# ---------------------------------------------------------------------------------------------
# string normalisation (fast path)

_SPACING = re.compile(r"\\(?:,|;|:|!|>| |quad(?![A-Za-z])|qquad(?![A-Za-z])|thinspace(?![A-Za-z])|medspace(?![A-Za-z])|thickspace(?![A-Za-z])|enspace(?![A-Za-z]))|~")
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textrm|textbf|mathbf|boldsymbol|bm|mathit|textit|operatorname|rm|displaystyle|mbox)(?![A-Za-z])\s*")
_LEFT_RIGHT = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|biggl|biggr)(?![A-Za-z])\s*\.?")
_FRAC = re.compile(r"\\[dt]frac(?![A-Za-z])")


_WS_RUN = re.compile(r"\s+")


def _merge_spaces(s: str) -> str:
    """Remove whitespace except where it separates a control word from a following letter.

    Linear: each whitespace run looks back only over the letters since the previous run.
    """
    n = len(s)

    def repl(m: re.Match[str]) -> str:
        j = m.end()
        if j >= n or not s[j].isalpha():
            return ""
        k = m.start() - 1
        while k >= 0 and s[k].isalpha():
            k -= 1
        return " " if (k >= 0 and k < m.start() - 1 and s[k] == "\\") else ""

    return _WS_RUN.sub(repl, s)


_BRACELESS_MACROS = {"frac": 2, "dfrac": 2, "tfrac": 2, "cfrac": 2, "sqrt": 1}


def _braceless_arg(s: str, i: int) -> tuple[str, int] | None:
    """One TeX macro argument at ``s[i:]`` (spaces skipped): a braced group (kept with braces),
    a control word, or a single character (so ``12`` gives ``1``). ``None`` at the end or before
    an optional ``[`` argument."""
    n = len(s)
    while i < n and s[i] in " \t\n":
        i += 1
    if i >= n or s[i] in "[}":
        return None
    if s[i] == "{":
        end = match_brace(s, i)
        return None if end < 0 else ("\x00" + s[i:end], end)  # marked: a braced group
    if s[i] == "\\":
        m = re.match(r"\\(?:[A-Za-z]+|.)", s[i:])
        if m is None:
            return None
        return "{" + m.group(0) + "}", i + len(m.group(0))
    return "{" + s[i] + "}", i + 1


_BRACELESS_MAX_LEN = 4_000
_BRACELESS_MAX_DEPTH = 20


def expand_braceless(s: str, _depth: int = 0) -> str:
    """Give brace-less macro arguments their braces: ``\\frac12`` -> ``\\frac{1}{2}``,
    ``\\frac\\pi4`` -> ``\\frac{\\pi}{4}``, ``\\sqrt2`` -> ``\\sqrt{2}`` (TeX reads one token per
    argument), also inside braced arguments up to a nesting depth of 20. ``\\sqrt[n]{...}`` is left
    alone. Strings over 4,000 characters are returned unchanged (the scan is quadratic in the worst case). Never raises."""
    if not isinstance(s, str):
        return ""
    if "\\" not in s or len(s) > _BRACELESS_MAX_LEN or _depth > _BRACELESS_MAX_DEPTH:
        return s
    out: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        if s[i] != "\\":
            out.append(s[i])
            i += 1
            continue
        m = re.match(r"\\([A-Za-z]+)", s[i:])
        if m is None:
            out.append(s[i : i + 2])
            i += 2
            continue
        name = m.group(1)
        j = i + len(m.group(0))
        nargs = _BRACELESS_MACROS.get(name)
        if nargs is None:
            out.append(m.group(0))
            i = j
            continue
        args: list[str] = []
        k = j
        for _ in range(nargs):
            got = _braceless_arg(s, k)
            if got is None:
                break
            args.append(got[0])
            k = got[1]
        if len(args) == nargs:
            args = ["{" + expand_braceless(a[2:-1], _depth + 1) + "}" if a.startswith("\x00") else a for a in args]
            out.append(m.group(0) + "".join(args))
            i = k
        else:
            out.append(m.group(0))
            i = j
    return "".join(out)


_SIMPLE_WRAPPED = re.compile(
    r"(?P<pre>[_^]\s*)?\\(?:text|mathrm|textrm|textbf|mathbf|boldsymbol|bm|mathit|textit|rm|mbox)(?![A-Za-z])\s*\{(?P<c>[^{}\\]*)\}"
)


def _unwrap_simple(m: re.Match[str]) -> str:
    """``\\mathrm{B}`` -> `` B`` (the space keeps it apart from a preceding control word and is
    dropped later); after ``_``/``^`` one character stays bare and longer content keeps its braces,
    so ``k_\\mathrm{B}``, ``k_{\\mathrm{B}}`` and ``k_B`` agree while ``v_\\text{max}`` stays ``v_{max}``."""
    c = m.group("c")
    pre = m.group("pre")
    if pre:
        c = c.strip()
        return pre.strip() + (c if len(c) == 1 else "{" + c + "}")
    return " " + c + " "


def norm_string(s: str) -> str:
    """Normalised LaTeX for exact-string comparison (never raises).

    Drops ``$``, ``\\left``/``\\right``, spacing commands, font/text wrappers (keeping their
    content), ``\\dfrac``/``\\tfrac`` -> ``\\frac``, ``\\le``/``\\ge`` spellings, a trailing period,
    and whitespace that LaTeX ignores. A space between a control word and a letter is kept, so
    ``\\omega t`` and ``\\omegat`` stay different.
    """
    if not isinstance(s, str):
        return ""
    t = expand_braceless(s).replace("$", "").replace("\\\\", "\x00")  # protect line breaks from the spacing rules
    t = _SPACING.sub(" ", t)
    t = _LEFT_RIGHT.sub("", t)
    t = _FRAC.sub(r"\\frac", t)
    t = re.sub(r"\\(?:leq|leqslant)(?![A-Za-z])", r"\\le", t)
    t = re.sub(r"\\(?:geq|geqslant)(?![A-Za-z])", r"\\ge", t)
    t = _SIMPLE_WRAPPED.sub(_unwrap_simple, t)
    t = _WRAPPERS.sub("", t)
    t = _merge_spaces(t)
    t = re.sub(r"([_^])\{([^{}\\])\}", r"\1\2", t)
    t = t.replace("\x00", "\\\\")
    t = re.sub(r"\\\\\[[^\]]{0,12}\]", r"\\\\", t)
    t = re.sub(r"[.,;]\s*(?=\\\\|\\end(?![A-Za-z]))", "", t)
    return t.strip().rstrip(".,;").strip()


def norm_text(s: str) -> str:
    """Case-folded plain text for QL / MC / TF comparison (never raises).

    Strips ``\\text{}``-style wrappers, ``$``, braces, punctuation and repeated spaces.
    """
    if not isinstance(s, str):
        return ""
    t = s.replace("$", " ")
    t = _SPACING.sub(" ", t)
    t = re.sub(r"\\(?:text|mathrm|textrm|textbf|mathbf|textit|mathit|emph|operatorname|mbox)(?![A-Za-z])", " ", t)
    t = t.replace("\\\\", " ").replace("{", " ").replace("}", " ")
    t = re.sub(r"[.,;:!?\"'`()\[\]]", " ", t)
    return " ".join(t.lower().split())


_REL_MACROS = {
    "\\approx": "=",
    "\\simeq": "=",
    "\\sim": "=",
    "\\equiv": "=",
    "\\cong": "=",
    "\\le": "<=",
    "\\leq": "<=",
    "\\leqslant": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\geqslant": ">=",
    "\\lt": "<",
    "\\gt": ">",
    "\\ll": "<",
    "\\gg": ">",
}


def split_relations(s: str, ops: frozenset[str] = frozenset({"=", "<", ">", "<=", ">="})) -> tuple[list[str], list[str]]:
    """Split ``s`` at top-level relation symbols (outside any bracket).

    Returns ``(segments, operators)`` with ``len(segments) == len(operators) + 1``; operators are
    normalised to ``=``, ``<``, ``>``, ``<=``, ``>=`` (``\\approx``/``\\sim``/``\\simeq`` count as
    ``=``). Only operators in ``ops`` split. Never raises.
    """
    segs: list[str] = []
    found: list[str] = []
    depth = 0
    cur: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            m = re.match(r"\\[A-Za-z]+", s[i:])
            if m:
                name = m.group(0)
                if name in ("\\left", "\\right"):
                    cur.append(name)
                    i += len(name)
                    continue
                op = _REL_MACROS.get(name)
                if op is not None and depth == 0 and op in ops:
                    segs.append("".join(cur))
                    found.append(op)
                    cur = []
                    i += len(name)
                    continue
                cur.append(name)
                i += len(name)
                continue
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth = max(0, depth - 1)
        if depth == 0 and c in "=<>":
            op = c
            if i + 1 < n and s[i + 1] == "=" and c in "<>":
                op = c + "="
                i += 1
            if op in ops:
                segs.append("".join(cur))
                found.append(op)
                cur = []
                i += 1
                continue
            cur.append(op)
            i += 1
            continue
        cur.append(c)
        i += 1
    segs.append("".join(cur))
    return [x.strip() for x in segs], found


_TEXT_MACRO = re.compile(r"\\(?:text|textrm|mbox|textit|textbf)\s*\{")


def strip_text_remarks(s: str) -> str:
    """Remove ``\\text{...}`` groups whose content is a remark (contains a space or > 3 letters).

    Short ``\\text{max}``-style labels stay. Never raises.
    """
    out: list[str] = []
    i = 0
    while True:
        m = _TEXT_MACRO.search(s, i)
        if not m:
            out.append(s[i:])
            break
        open_idx = m.end() - 1
        end = match_brace(s, open_idx)
        if end < 0:
            out.append(s[i:])
            break
        content = s[open_idx + 1 : end - 1]
        out.append(s[i : m.start()])
        if " " in content.strip() or len(content.strip()) > 3:
            out.append(" ")
        else:
            out.append(s[m.start() : end])
        i = end
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# tokenising and aliasing

_TOKEN = re.compile(
    r"\\[A-Za-z]+\*?"  # control word
    r"|\\."  # control symbol
    r"|\d+(?:\.\d*)?(?:[eE][+-]?\d+(?![A-Za-z]))?|\.\d+"  # number (with optional e-notation)
    r"|\s+"
    r"|.",
    re.DOTALL,
)


def tokenize(s: str) -> list[str]:
    """Split LaTeX into tokens: control words (trailing spaces dropped), control symbols,
    numbers (``3e8`` is one number), and single characters. Whitespace is dropped. Never raises."""
    out = []
    for m in _TOKEN.finditer(s):
        t = m.group(0)
        if t.isspace():
            continue
        out.append(t)
    return out


_GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta",
    "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "rho", "varrho", "sigma", "varsigma", "tau",
    "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi",
    "Sigma", "Upsilon", "Phi", "Psi", "Omega", "hbar", "ell", "partial", "nabla", "aleph", "varkappa",
}
_ACCENTS = {
    "hat", "widehat", "vec", "bar", "overline", "dot", "ddot", "tilde", "widetilde", "check",
    "overrightarrow", "breve", "acute", "grave", "underline", "mathring",
}
_FONTS = {"mathbf", "boldsymbol", "bm", "mathcal", "mathit", "mathsf", "mathbb", "mathfrak", "mathscr", "pmb"}
_TEXTS = {"text", "mathrm", "textrm", "rm", "mbox", "textit", "textbf"}
_DROP = {
    "left", "right", "displaystyle", "textstyle", "scriptstyle", "bigl", "bigr", "Bigl", "Bigr", "big",
    "Big", "biggl", "biggr", "limits", "nolimits", "quad", "qquad", "mathstrut", "strut",
}
_FUNCS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
    "coth", "ln", "log", "exp", "sqrt", "frac", "cdot", "times", "pm", "mp", "infty", "pi", "operatorname",
    "le", "leq", "ge", "geq", "lt", "gt", "neq", "cup", "cap", "in", "to", "div", "min", "max", "binom",
    "arcsinh", "arccosh", "arctanh", "det", "circ", "prime", "lfloor", "rfloor", "lceil", "rceil",
    "cdots", "ldots", "dots", "sum", "prod", "int", "lim", "approx", "sim", "simeq", "propto", "ll", "gg",
    "mid", "vert", "lvert", "rvert", "langle", "rangle", "emptyset", "varnothing", "setminus",
}
_SPACE_SYMS = {"\\,", "\\;", "\\:", "\\!", "\\ ", "\\>", "~"}


def _key(s: str) -> str:
    """Identity of a symbol part: normalised, braces dropped (``\\mathbf{r}`` and ``r`` agree)."""
    return norm_string(s).replace("{", "").replace("}", "")


class _Aliaser:
    """Rewrite LaTeX symbols to ``\\mathrm{vN}`` aliases; one table per comparison."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {}

    def alias(self, key: str) -> str:
        name = self.table.get(key)
        if name is None:
            name = f"v{len(self.table)}"
            self.table[key] = name
        return f"\\mathrm{{{name}}}"

    def group(self, toks: list[str], i: int) -> tuple[list[str], int]:
        """Argument at ``toks[i]``: a braced group's inner tokens, or one token."""
        if i >= len(toks):
            raise LatexError("missing argument")
        if toks[i] == "{":
            depth = 0
            j = i
            while j < len(toks):
                if toks[j] == "{":
                    depth += 1
                elif toks[j] == "}":
                    depth -= 1
                    if depth == 0:
                        return toks[i + 1 : j], j + 1
                j += 1
            raise LatexError("unbalanced braces")
        return [toks[i]], i + 1

    def atom_suffix(self, toks: list[str], i: int, key: str) -> tuple[str, int]:
        """Extend an atom key with subscripts and primes."""
        while i < len(toks):
            t = toks[i]
            if t == "_":
                nxt = toks[i + 1] if i + 1 < len(toks) else ""
                if nxt[:1] == "\\" and nxt[1:] in _TEXTS | _FONTS | _ACCENTS and i + 2 < len(toks) and toks[i + 2] == "{":
                    # k_\mathrm{B}: the macro takes its braced argument (same key as k_{\mathrm{B}})
                    g2, i = self.group(toks, i + 2)
                    g = [nxt, "{", *g2, "}"]
                else:
                    g, i = self.group(toks, i + 1)
                key += "_{" + _key(" ".join(g)) + "}"
                continue
            if t == "'":
                key += "'"
                i += 1
                continue
            if t == "^" and i + 1 < len(toks):
                g, j = self.group(toks, i + 1)
                if g in (["\\prime"], ["\\prime", "\\prime"], ["*"]):
                    key += "'" * len(g) if g[0] == "\\prime" else "*"
                    i = j
                    continue
            break
        return key, i

    def convert(self, toks: list[str]) -> list[str]:
        out: list[str] = []
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            if t in _SPACE_SYMS:
                i += 1
                continue
            if t.startswith("\\") and len(t) > 1 and t[1:].rstrip("*").isalpha():
                name = t[1:].rstrip("*")
                if name in _DROP:
                    i += 1
                    continue
                if name in ("frac", "dfrac", "tfrac", "cfrac"):
                    lz = self._leibniz(toks, i)
                    if lz is not None:
                        key, i = lz
                        out.append(self.alias(key))
                        i = self._product_guard(toks, i, out)
                        continue
                if name in ("dfrac", "tfrac", "cfrac"):
                    out.append("\\frac")
                    i += 1
                    continue
                if name in _GREEK:
                    key, i = self.atom_suffix(toks, i + 1, "\\" + name)
                    out.append(self.alias(key))
                    i = self._product_guard(toks, i, out)
                    continue
                if name in _ACCENTS or name in _FONTS:
                    g, j = self.group(toks, i + 1)
                    inner = _key(" ".join(g))
                    base = inner if name in ("mathbf", "boldsymbol", "bm", "pmb") else f"{name}({inner})"
                    if name in _FONTS and len(inner) > 12:
                        out.extend(self.convert(g))
                        i = j
                        continue
                    key, i = self.atom_suffix(toks, j, base)
                    out.append(self.alias(key))
                    i = self._product_guard(toks, i, out)
                    continue
                if name in _TEXTS:
                    g, j = self.group(toks, i + 1)
                    inner = "".join(g).strip()
                    if not inner or not re.fullmatch(r"[A-Za-z]{1,12}", inner):
                        if re.fullmatch(r"[\d.]+", inner):
                            out.append(inner)
                        i = j
                        continue
                    if inner == "e" and name in ("mathrm", "rm", "text", "textrm") and not (j < n and toks[j] in ("_", "'")):
                        out.append("e")  # upright e is Euler's number
                        i = j
                        continue
                    # an upright single letter is the same symbol as the italic one (\mathrm{E} = E)
                    key, i = self.atom_suffix(toks, j, inner if len(inner) == 1 else "rm:" + inner)
                    out.append(self.alias(key))
                    i = self._product_guard(toks, i, out)
                    continue
                if name == "langle":
                    depth = 1
                    j = i + 1
                    while j < n and depth:
                        if toks[j] == "\\langle":
                            depth += 1
                        elif toks[j] == "\\rangle":
                            depth -= 1
                        j += 1
                    if depth:
                        raise LatexError("unclosed \\langle")
                    key, i = self.atom_suffix(toks, j, "<" + _key(" ".join(toks[i + 1 : j - 1])) + ">")
                    out.append(self.alias(key))
                    i = self._product_guard(toks, i, out)
                    continue
                if name == "pi" and not (i + 1 < n and toks[i + 1] == "_"):
                    out.append("\\pi")
                    i += 1
                    continue
                if name in ("begin", "end", "cases", "ldots", "cdots", "dots", "xrightarrow", "to", "sum", "int", "lim", "prod"):
                    raise LatexError(f"unsupported construct \\{name}")
                out.append(t)
                i += 1
                continue
            if len(t) == 1 and t.isalpha():
                if t == "e" and i + 1 < n and toks[i + 1] == "^":
                    out.append("e")
                    i += 1
                    continue
                key, i = self.atom_suffix(toks, i + 1, t)
                out.append(self.alias(key))
                i = self._product_guard(toks, i, out)
                continue
            if t[0].isdigit() or (t[0] == "." and len(t) > 1):
                out.append(_number(t))
                i += 1
                continue
            if t == "\\%":
                out.append("\\%")
                i += 1
                continue
            out.append(t)
            i += 1
        return out

    @staticmethod
    def _diff_mark(g: list[str]) -> tuple[str, list[str]] | None:
        """Split ``d X`` / ``\\mathrm{d} X`` / ``\\partial X`` / ``d^2 X`` into (order, X)."""
        if not g:
            return None
        if g[0] in ("d", "\\partial"):
            rest = g[1:]
        elif g[0] in ("\\mathrm", "\\text", "\\rm", "\\textrm", "\\operatorname") and g[1:4] == ["{", "d", "}"]:
            rest = g[4:]
        else:
            return None
        order = "1"
        if rest[:1] == ["^"]:
            if rest[1:2] and rest[1].isdigit():
                order, rest = rest[1], rest[2:]
            elif rest[1:2] == ["{"] and rest[3:4] == ["}"] and rest[2].isdigit():
                order, rest = rest[2], rest[4:]
            else:
                return None
        if not rest or rest[0] in ("_", "^", "'", ")", "}", "+", "-", "="):
            return None
        return order, rest

    def _leibniz(self, toks: list[str], i: int) -> tuple[str, int] | None:
        """``\\frac{dX}{dY}`` (also ``\\mathrm{d}``, ``\\partial``, ``d^2``) at ``toks[i]``: one opaque
        symbol keyed by X and Y, so that ``\\frac{dv}{dt}`` never equals ``\\frac{v}{t}``."""
        try:
            num, j = self.group(toks, i + 1)
            den, k = self.group(toks, j)
        except LatexError:
            return None
        a, b = self._diff_mark(num), self._diff_mark(den)
        if a is None or b is None:
            return None
        key = f"deriv{a[0]}({_key(' '.join(a[1]))}|{_key(' '.join(b[1]))})"
        return key, k

    @staticmethod
    def _product_guard(toks: list[str], i: int, out: list[str]) -> int:
        """An atom directly followed by ``(`` is a product, not a function call."""
        if i < len(toks) and toks[i] in ("(", "[", "\\left"):
            out.append("\\cdot")
        return i


def _number(t: str) -> str:
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?", t)
    if not m:
        return t
    mant, exp = m.group(1), m.group(2)
    if len(mant.replace(".", "")) > MAX_NUMBER_DIGITS:
        raise LatexError("number too long")
    if exp is None:
        return mant
    if abs(int(exp)) > 400:
        raise LatexError("exponent too large")
    return f"({mant}\\times 10^{{{int(exp)}}})"


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
_DIGIT_GROUPS = re.compile(r"(?<![\d.])(\d{1,3})((?:(?:\\,|\{,\})\d{3})+)(?![\d])")
_NUMBER_TOKEN = re.compile(r"\d+(?:\.\d*)?|\.\d+|\(\d[\d.]*\\times 10\^\{-?\d+\}\)")


def to_sympy(latex: str, aliases: _Aliaser | None = None) -> Any:
    """Convert LaTeX to a SymPy object (expression, Equality, relational, set).

    Args:
        latex: one box's content or a part of it (untrusted).
        aliases: a shared alias table so that two strings compared with each other map the same
            symbol to the same SymPy symbol; a fresh one when ``None``.

    Returns:
        The SymPy object built by ``latex2sympy2_extended`` from the aliased LaTeX.

    Raises:
        LatexError: input too long, exponent towers, over-long numbers, unsupported constructs, or
            anything latex2sympy cannot parse.
    """
    global _L2S_CONFIG
    if not isinstance(latex, str) or not latex.strip():
        raise LatexError("empty")
    if len(latex) > MAX_SYMBOLIC_LEN:
        raise LatexError("input too long for symbolic comparison")
    # a doubled backslash before a command name is an escaping slip (\\frac), not a line break
    latex = latex.strip().rstrip(".,;")
    text0 = re.sub(r"\\\\(?=(?:frac|dfrac|sqrt|cdot|times|pi|left|right)(?![A-Za-z]))", r"\\", latex.replace("$", " "))
    text0 = _DIGIT_GROUPS.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), text0)
    toks = tokenize(strip_text_remarks(expand_braceless(text0)))
    if _exponent_depth(toks) > MAX_EXPONENT_DEPTH:
        raise LatexError("exponent tower too deep")
    al = aliases if aliases is not None else _Aliaser()
    conv = al.convert(toks)
    for x, y in zip(conv, conv[1:], strict=False):
        if _NUMBER_TOKEN.fullmatch(x) and _NUMBER_TOKEN.fullmatch(y):
            # "2 3" (latex2sympy would add them) or "2 \text{ or } 3": not one expression
            raise LatexError("juxtaposed numbers")
    text = " ".join(conv).strip()
    if not text:
        raise LatexError("nothing to convert")
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig

    if _L2S_CONFIG is None:
        _L2S_CONFIG = ConversionConfig(
            lowercase_symbols=False,
            interpret_as_mixed_fractions=False,
            interpret_simple_eq_as_assignment=False,
        )
    try:
        result = latex2sympy(text, conversion_config=_L2S_CONFIG)
    except Exception as e:  # latex2sympy raises bare Exception on syntax errors
        raise LatexError(f"unparsable LaTeX ({type(e).__name__})") from None
    if result is None:
        raise LatexError("unparsable LaTeX")
    return result


def new_aliases() -> _Aliaser:
    """A fresh alias table to share between the two sides of one comparison."""
    return _Aliaser()
