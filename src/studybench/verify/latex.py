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

import functools
import re
from typing import Any

from studybench.answers import match_brace

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
_MARKUP = {"vec", "overrightarrow", "mathbf", "boldsymbol", "bm", "pmb"}
"""Vector / unit-vector markup that names the same quantity as the bare symbol (``\\hat{x}``,
``\\vec{E}``, ``\\mathbf{E}`` are ``x`` and ``E``); other accents (``\\bar``, ``\\dot``, ``\\tilde``)
change the meaning and stay part of the symbol."""
_GREEK_VARIANTS = {"varepsilon": "epsilon", "varphi": "phi", "vartheta": "theta", "varrho": "rho", "varsigma": "sigma", "varkappa": "kappa", "varpi": "pi"}
"""Glyph variants of one Greek letter (``\\varepsilon_0`` and ``\\epsilon_0`` are one symbol)."""
_UPRIGHT_FUNCS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "sech", "csch",
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "ln", "log", "exp",
}
"""Function names also written upright (``\\mathrm{sech}``, ``\\operatorname{coth}``)."""
_RECIPROCAL = {"sech": "cosh", "csch": "sinh", "coth": ("cosh", "sinh")}
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


_UPRIGHT_D = re.compile(r"\\(?:mathrm|text|textrm|rm|operatorname)\s*\{\s*(?:~|\\[,;: !])*\s*d\s*\}|\\rm\s+d(?![A-Za-z])|\\int|\\oint|\\iint")
_FUNC_TOKENS = {"\\" + f for f in _UPRIGHT_FUNCS}
_OPEN = {"(": ")", "[": "]"}
_ENV_OK = {"pmatrix", "bmatrix", "Bmatrix", "matrix", "vmatrix", "smallmatrix"}
_MAX_READINGS = 6


class _Aliaser:
    """Rewrite LaTeX symbols to ``\\mathrm{vN}`` aliases; one table per comparison.

    ``diff_d``: a bare ``d`` directly before a symbol is a differential (``dx``), set when either
    side of the comparison writes an upright ``\\mathrm{d}`` or an integral."""

    def __init__(self, diff_d: bool = False) -> None:
        self.table: dict[str, str] = {}
        self.diff_d = diff_d
        self.vectors: set[str] = set()  # alias strings of symbols written with vector markup

    def alias(self, key: str) -> str:
        name = self.table.get(key)
        if name is None:
            name = f"v{len(self.table)}"
            self.table[key] = name
        return f"\\mathrm{{{name}}}"

    def keys_by_name(self) -> dict[str, str]:
        """Alias name (``v3``) -> symbol key (``k_{B}``)."""
        return {v: k for k, v in self.table.items()}

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

    @staticmethod
    def _text_inner(g: list[str]) -> str:
        return "".join(x for x in g if x not in _SPACE_SYMS).strip()

    def atom_at(self, toks: list[str], i: int) -> tuple[str, int] | None:
        """The symbol starting at ``toks[i]`` as ``(key, next index)``: a letter, a Greek letter,
        an accented / bold / upright name, each with subscripts and primes; ``None`` otherwise."""
        if i >= len(toks):
            return None
        t = toks[i]
        if len(t) == 1 and t.isalpha():
            return self.atom_suffix(toks, i + 1, t)
        if not (t.startswith("\\") and t[1:].isalpha()):
            return None
        name = t[1:]
        if name in _GREEK or name in _GREEK_VARIANTS:
            return self.atom_suffix(toks, i + 1, "\\" + _GREEK_VARIANTS.get(name, name))
        if name in _ACCENTS or name in _FONTS:
            g, j = self.group(toks, i + 1)
            inner = _key(" ".join(g))
            if name in _FONTS and len(inner) > 12:
                return None
            if name in ("hat", "widehat") and re.fullmatch(r"e(?:_.*)?", inner):
                base = inner  # \hat{e}_\theta is the unit vector e_\theta
            else:
                base = inner if name in _MARKUP else f"{'hat' if name == 'widehat' else name}({inner})"
            key, k = self.atom_suffix(toks, j, base)
            if name in _MARKUP or name in ("hat", "widehat"):
                self.vectors.add(self.alias(key))
            return key, k
        if name in _TEXTS or name == "operatorname":
            g, j = self.group(toks, i + 1)
            inner = self._text_inner(g)
            if re.fullmatch(r"[A-Za-z]{1,12}", inner) and inner not in _UPRIGHT_FUNCS and inner not in ("e", "d"):
                # an upright single letter is the same symbol as the italic one (\mathrm{E} = E)
                return self.atom_suffix(toks, j, inner if len(inner) == 1 else "rm:" + inner)
        return None

    def _is_upright_d(self, toks: list[str], i: int) -> int | None:
        """Index after an upright ``\\mathrm{d}`` at ``toks[i]`` (or a bare ``d`` when differentials
        are on), else None."""
        t = toks[i]
        if t == "d" and self.diff_d:
            return i + 1
        if t in ("\\mathrm", "\\text", "\\textrm", "\\operatorname") and i + 1 < len(toks) and toks[i + 1] == "{":
            g, j = self.group(toks, i + 1)
            if self._text_inner(g) == "d":
                return j
        if t == "\\rm" and i + 1 < len(toks) and toks[i + 1] == "d":
            return i + 2
        return None

    def convert(self, toks: list[str]) -> list[str]:
        out: list[str] = []
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            if t in _SPACE_SYMS:
                i += 1
                continue
            # differentials: \mathrm{d}x (and dx inside integrals) is one symbol d(x)
            j = self._is_upright_d(toks, i)
            if j is not None:
                at = self.atom_at(toks, j)
                if at is not None and not (t == "d" and j < n and toks[j] in ("_", "^", "'")):
                    key, i = at
                    out.append(self.alias("d(" + key + ")"))
                    i = self._product_guard(toks, i, out)
                    continue
            if t in ("\\{", "\\lbrace"):
                out.append("(")
                i += 1
                continue
            if t in ("\\}", "\\rbrace"):
                out.append(")")
                i += 1
                continue
            if t in (")", "]") and i + 1 < n and toks[i + 1] == "_":
                # (\partial\chi/\partial p)_T: the held-constant subscript belongs to the derivative
                g, j = self.group(toks, i + 2)
                names = self.keys_by_name()
                last = out[-1][len("\\mathrm{") : -1] if len(out) >= 2 and out[-2] == "(" and out[-1].startswith("\\mathrm{v") else ""
                if last in names and names[last].startswith("deriv"):
                    out[-1] = self.alias(names[last] + "_{" + _key(" ".join(g)) + "}")
                    out.append(t)
                    i = j
                    continue
                raise LatexError("subscript after a bracket")
            if t.startswith("\\") and len(t) > 1 and t[1:].rstrip("*").isalpha():
                name = t[1:].rstrip("*")
                if name in _DROP:
                    i += 1
                    continue
                if name in ("frac", "dfrac", "tfrac", "cfrac"):
                    lz = self._leibniz(toks, i)
                    if lz is not None:
                        emitted, i = lz
                        out.extend(emitted)
                        i = self._product_guard(toks, i, out)
                        continue
                    out.append("\\frac")
                    i += 1
                    continue
                if name == "partial" and i + 1 < n and toks[i + 1] == "_":
                    # \partial_z A: the derivative of A with respect to z
                    g, j = self.group(toks, i + 2)
                    var = self.atom_at(g, 0)
                    if var is not None and var[1] == len(g):
                        operand = self._operand(toks, j, var[0], "1")
                        if operand is not None:
                            emitted, i = operand
                            out.extend(emitted)
                            i = self._product_guard(toks, i, out)
                            continue
                if name in ("int", "iint", "iiint", "oint"):
                    # an integral is linear: its limits become one opaque factor, the integrand and
                    # the differentials (one symbol each) stay, so that linear rewrites compare equal
                    self.diff_d = True
                    j = i + 1
                    lims = []
                    while j < n and toks[j] in ("_", "^"):
                        g, j = self.group(toks, j + 1)
                        lims.append(_key(" ".join(g)))
                    out.append(self.alias(f"{name}(" + "|".join(lims) + ")"))
                    i = j
                    continue
                if name == "begin" or name == "end":
                    g, j = self.group(toks, i + 1)
                    env = "".join(g)
                    if env not in _ENV_OK:
                        raise LatexError(f"unsupported environment {env[:20]}")
                    out.append(f"\\{name}{{{'bmatrix' if env != 'vmatrix' else 'vmatrix'}}}")
                    i = j
                    continue
                if name in _GREEK_VARIANTS or name in _GREEK or name in _ACCENTS or name in _FONTS:
                    at = self.atom_at(toks, i)
                    if at is None:  # a long bold group: its content
                        g, j = self.group(toks, i + 1)
                        out.extend(self.convert(g))
                        i = j
                        continue
                    key, i = at
                    out.append(self.alias(key))
                    i = self._product_guard(toks, i, out)
                    continue
                if name in _TEXTS or name == "operatorname":
                    g, j = self.group(toks, i + 1)
                    inner = self._text_inner(g)
                    if inner in _UPRIGHT_FUNCS:
                        out.append("\\" + inner)
                        i = j
                        continue
                    if not inner or not re.fullmatch(r"[A-Za-z]{1,12}", inner):
                        if re.fullmatch(r"[\d.]+", inner):
                            out.append(inner)
                        elif inner:
                            # \mathrm{m\,s^{-1}}, \mathrm{1/s}: a unit or label that must not vanish
                            raise LatexError("unreadable upright group")
                        i = j
                        continue
                    if inner == "e" and name in ("mathrm", "rm", "text", "textrm") and not (j < n and toks[j] in ("_", "'")):
                        out.append("e")  # upright e is Euler's number
                        i = j
                        continue
                    at = self.atom_at(toks, i)
                    if at is None:
                        i = j
                        continue
                    key, i = at
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
                if name == "times" and out and out[-1] in self.vectors:
                    # \hat z \times \vec v is a cross product, not a commutative product
                    raise LatexError("cross product of vectors")
                if name == "pi" and not (i + 1 < n and toks[i + 1] == "_"):
                    out.append("\\pi")
                    i += 1
                    continue
                if name in ("cases", "ldots", "cdots", "dots", "xrightarrow", "to", "rightarrow", "sum", "lim", "prod"):
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
                if i < n and toks[i] in ("(", "\\left", "[") and not (i >= 2 and toks[i - 2] in ("^", "_")):
                    out.append("\\cdot")  # 2(4) is a product (latex2sympy would add)
                continue
            out.append(t)
            i += 1
        return out

    def _diff_mark(self, g: list[str]) -> tuple[str, list[str]] | None:
        """Split ``d X`` / ``\\mathrm{d} X`` / ``\\partial X`` / ``d^2 X`` into (order, X); X may be
        empty (the operator ``\\frac{d}{dt}``)."""
        if not g:
            return None
        if g[0] in ("d", "\\partial"):
            rest = g[1:]
        else:
            j = self._is_upright_d(g, 0) if g[0] != "d" else None
            if j is None:
                return None
            rest = g[j:]
        order = "1"
        if rest[:1] == ["^"]:
            if rest[1:2] and rest[1].isdigit():
                order, rest = rest[1], rest[2:]
            elif rest[1:2] == ["{"] and rest[3:4] == ["}"] and rest[2].isdigit():
                order, rest = rest[2], rest[4:]
            else:
                return None
        if rest and rest[0] in ("_", "^", "'", ")", "}", "+", "-", "="):
            return None
        return order, rest

    def _atom_key_all(self, g: list[str]) -> str | None:
        """Key of ``g`` when it is exactly one symbol."""
        try:
            at = self.atom_at(g, 0)
        except LatexError:
            return None
        if at is None or at[1] != len(g):
            return None
        return at[0]

    def _linear(self, g: list[str], var: str, order: str) -> list[str] | None:
        """Derivative tokens of ``g``: one symbol, or a bracketed sum / difference of symbols
        (the derivative is linear); ``None`` otherwise."""
        key = self._atom_key_all(g)
        if key is not None:
            return [self.alias(f"deriv{order}({key}|{var})")]
        if len(g) >= 3 and g[0] in ("(", "[", "\\left") :
            inner = g[1:-1] if g[-1] in (")", "]") else None
            if g[0] == "\\left":
                inner = g[2:-2] if len(g) >= 5 and g[-2] == "\\right" else None
            if inner is None:
                return None
            out = ["("]
            piece: list[str] = []
            sign = ""
            for tok in [*inner, "+"]:
                if tok in ("+", "-") and piece:
                    k = self._atom_key_all(piece)
                    if k is None:
                        return None
                    if sign:
                        out.append(sign)
                    out.append(self.alias(f"deriv{order}({k}|{var})"))
                    piece = []
                    sign = tok
                elif tok in ("+", "-"):
                    sign = tok if tok == "-" else sign
                else:
                    piece.append(tok)
            out.append(")")
            return out
        return None

    def _operand(self, toks: list[str], j: int, var: str, order: str) -> tuple[list[str], int] | None:
        """The operand of a derivative operator at ``toks[j]``: a symbol or a bracketed sum."""
        at = self.atom_at(toks, j)
        if at is not None:
            return [self.alias(f"deriv{order}({at[0]}|{var})")], at[1]
        if j < len(toks) and toks[j] in ("(", "\\left"):
            depth = 0
            k = j
            while k < len(toks):
                if toks[k] in ("(", "["):
                    depth += 1
                elif toks[k] in (")", "]"):
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            if k >= len(toks):
                return None
            lin = self._linear(toks[j : k + 1], var, order)
            if lin is None:
                return None
            return lin, k + 1
        return None

    def _leibniz(self, toks: list[str], i: int) -> tuple[list[str], int] | None:
        """``\\frac{dX}{dY}`` (also ``\\mathrm{d}``, ``\\partial``, ``d^2``) at ``toks[i]``: one opaque
        symbol keyed by X and Y, so that ``\\frac{dv}{dt}`` never equals ``\\frac{v}{t}``; a bracketed
        sum ``\\frac{\\partial (A + B)}{\\partial z}`` and the operator form
        ``\\frac{\\partial}{\\partial z} X`` give the sum of the derivatives."""
        try:
            num, j = self.group(toks, i + 1)
            den, k = self.group(toks, j)
        except LatexError:
            return None
        a, b = self._diff_mark(num), self._diff_mark(den)
        if a is None or b is None or not b[1]:
            return None
        var = self._atom_key_all(b[1]) or _key(" ".join(b[1]))
        if not a[1]:
            return self._operand(toks, k, var, a[0])
        lin = self._linear(a[1], var, a[0])
        if lin is not None:
            return lin, k
        return [self.alias(f"deriv{a[0]}({_key(' '.join(a[1]))}|{var})")], k

    def _product_guard(self, toks: list[str], i: int, out: list[str]) -> int:
        """An atom directly followed by ``(`` is a product, not a function call; but an argument
        list with commas (``Y_{00}(\\theta, \\varphi)``, ``\\psi(x, t)``) names the variables of a
        function and is dropped."""
        if i < len(toks) and toks[i] in ("(", "[", "\\left"):
            j = i + 1 if toks[i] != "\\left" else i + 2
            depth = 1
            k = j
            commas = 0
            simple = True
            while k < len(toks) and depth:
                tk = toks[k]
                if tk in ("(", "[", "{"):
                    depth += 1
                elif tk in (")", "]", "}"):
                    depth -= 1
                elif depth == 1 and tk == ",":
                    commas += 1
                elif not (len(tk) == 1 and tk.isalpha() or tk[1:] in _GREEK or tk in ("\\right", "\\left", "_", "'") or tk.isdigit() or tk in _SPACE_SYMS):
                    simple = False
                k += 1
            if commas and simple and depth == 0:
                # psi(x, t): a function of the listed variables, one symbol keyed with them
                names = self.keys_by_name()
                last = out[-1][len("\\mathrm{") : -1] if out and out[-1].startswith("\\mathrm{v") else ""
                if last in names:
                    args = _key(" ".join(x for x in toks[j : k - 1] if x not in ("\\right", "\\left")))
                    out[-1] = self.alias("call:" + names[last] + "|" + args)
                return k
            out.append("\\cdot")
        return i


def _factor_end(conv: list[str], i: int) -> int | None:
    """End of one multiplicative factor of converted tokens starting at ``conv[i]`` (a symbol, number,
    fraction, root or bracketed group, with an optional power), else None."""
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


def _function_readings(conv: list[str], gold: bool = False, stops: frozenset[str] = frozenset()) -> list[list[str]]:
    """Readings of brace-less function arguments: ``\\sin \\theta e_\\theta`` may mean
    ``\\sin(\\theta) e_\\theta`` or ``\\sin(\\theta e_\\theta)``; each reading makes every argument
    explicit. The first reading is the greedy one (latex2sympy's). At most :data:`_MAX_READINGS`."""
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
            if j >= len(r) or r[j] in ("(", "[", "{"):
                continue
            ends = []
            k = j
            while len(ends) < 4:
                e2 = _factor_end(r, k)
                if e2 is None:
                    break
                ends.append(e2)
                k = e2
            if not ends:
                continue
            choices = list(reversed(ends))
            if gold:
                # a gold is read the conventional way: the argument takes the juxtaposed factors,
                # stopping only before a vector or a subscripted symbol (\sin\theta\,\hat{e}_r,
                # \sin\frac{\pi}{R} r\, Y_{00}); never \cos(\omega) t
                stop = next((e for e, nxt in zip(ends, [*ends[1:], None], strict=True) if nxt is not None and r[e] in stops), None)
                choices = [ends[-1]] + ([stop] if stop is not None and stop != ends[-1] else [])
            for e2 in choices:
                expand(r[:j] + ["("] + r[j:e2] + [")"] + r[e2:], idx + 1)
            return
        out.append(r)

    expand(conv, 0)
    readings = out[:_MAX_READINGS] or [conv]
    tight = None if gold else _tight_division(readings[0])
    if tight is not None and len(readings) < _MAX_READINGS:
        readings.append(tight)
    return [_reciprocal_functions(r) for r in readings]


def _tight_division(conv: list[str]) -> list[str] | None:
    """The reading of ``(a)/(b)\\, c`` as ``\\frac{a}{b} c`` (latex2sympy reads ``a/(b c)``): each
    ``X / Y`` with single factors X and Y followed by more factors becomes a fraction. None when
    there is no such division."""
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
    """``\\sech``, ``\\csch``, ``\\coth`` (which latex2sympy misreads as ``\\sec h``) as quotients of
    ``\\cosh`` and ``\\sinh``; the argument must be bracketed by then."""
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


def _convert(latex: str, aliases: _Aliaser | None) -> tuple[_Aliaser, list[str]]:
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
    al = aliases if aliases is not None else new_aliases(latex)
    conv = al.convert(toks)
    for x, y in zip(conv, conv[1:], strict=False):
        if _NUMBER_TOKEN.fullmatch(x) and _NUMBER_TOKEN.fullmatch(y):
            # "2 3" (latex2sympy would add them) or "2 \text{ or } 3": not one expression
            raise LatexError("juxtaposed numbers")
    if not conv:
        raise LatexError("nothing to convert")
    return al, conv


def _l2s(conv: list[str]) -> Any:
    return _l2s_text(" ".join(conv).strip())


@functools.lru_cache(maxsize=8192)
def _l2s_text(text: str) -> Any:
    """latex2sympy on aliased text, memoised: the ANTLR parse dominates the verifier's cost and the
    same aliased text recurs across the pairs of one judgement (SymPy objects are immutable)."""
    global _L2S_CONFIG
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


def to_sympy(latex: str, aliases: _Aliaser | None = None) -> Any:
    """Convert LaTeX to a SymPy object (expression, Equality, relational, set, matrix).

    Args:
        latex: one box's content or a part of it (untrusted).
        aliases: a shared alias table (:func:`new_aliases`) so that two strings compared with each
            other map the same symbol to the same SymPy symbol; a fresh one when ``None``.

    Returns:
        The SymPy object built by ``latex2sympy2_extended`` from the aliased LaTeX (the greedy
        reading of brace-less function arguments; see :func:`to_sympy_readings`).

    Raises:
        LatexError: input too long, exponent towers, over-long numbers, unsupported constructs, or
            anything latex2sympy cannot parse.
    """
    return to_sympy_readings(latex, aliases)[0]


def to_sympy_readings(latex: str, aliases: _Aliaser | None = None, gold: bool = False) -> list[Any]:
    """Every reading of ``latex`` that parses: ``\\sin \\theta\\, e_\\theta`` is read both as
    ``sin(theta) e_theta`` and as ``sin(theta e_theta)`` (brace-less function arguments are
    ambiguous in LaTeX); the first element is latex2sympy's greedy reading when it parses. At most
    six readings. A ``gold`` is read only the conventional way (greedy, or stopping before a vector
    or subscripted symbol) and never with the tight-slash reading, so that a prediction cannot match
    an unintended reading of the gold. Raises :class:`LatexError` when no reading parses (same causes
    as :func:`to_sympy`)."""
    al, conv = _convert(latex, aliases)
    out: list[Any] = []
    err: LatexError | None = None
    stops = frozenset(al.vectors) | frozenset(al.alias(k) for k in list(al.table) if "_{" in k)
    for r in _function_readings(conv, gold, stops):
        try:
            out.append(_l2s(r))
        except LatexError as e:
            err = err or e
    if not out:
        raise err or LatexError("unparsable LaTeX")
    return out


def symbol_keys(latex: str) -> set[str] | None:
    """The symbols a LaTeX answer uses, as normalised keys (``k_{B}``, ``\\epsilon_{0}``,
    ``deriv1(x|t)``), without SymPy (pure string work, safe in-process); ``None`` when it cannot be
    read. Never raises."""
    try:
        al = new_aliases(latex)
        _convert(latex, al)
    except (LatexError, RecursionError, ValueError, IndexError):
        return None
    return set(al.table)


def new_aliases(*texts: str) -> _Aliaser:
    """A fresh alias table to share between the two sides of one comparison. Pass both sides' text:
    when either writes an upright differential (``\\mathrm{d}x``) or an integral, a bare ``dx`` on
    the other side is read as a differential too."""
    return _Aliaser(diff_d=any(isinstance(t, str) and _UPRIGHT_D.search(t) is not None for t in texts))
