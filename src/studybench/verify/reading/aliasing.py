r"""The symbol aliaser: what counts as one symbol, each renamed to an opaque alias (docs/protocol.md section 5).

:class:`Aliaser` rewrites every symbol of tokenised LaTeX (letters, Greek macros, accented and
subscripted names, ``\langle x\rangle``) into an opaque alias ``\mathrm{vN}``, one table per
comparison (:func:`new_aliases`), so that latex2sympy sees only names it cannot misread. Aliasing keeps
``M`` and ``m`` apart, keeps ``\hbar`` a symbol (so ``2\hbar\omega`` never equals ``2\omega``), and
makes spacing meaningful exactly as LaTeX does (``\omega t`` is two symbols, never ``\omegat``).

It also decides what one symbol is: glyph variants (``\varepsilon_0`` = ``\epsilon_0``) and vector
markup (``\vec E`` = ``E``) merge; differentials (``\mathrm{d}x``), derivatives
(``\frac{\partial A}{\partial z}``, ``\partial_z A``, linear over bracketed sums), function calls
with argument lists (``\psi(x, t)``) and integral limits become single keys; cross products of
vectors are refused. Pure string work: the conversion to SymPy is :mod:`studybench.verify.reading.conversion`.

Longer than 600 lines because :class:`Aliaser` alone is about 640: one pass over the tokens whose
rules (atoms, differentials, derivatives, calls, integral limits) share its symbol table and state.
"""

from __future__ import annotations

import re

from studybench.verify.reading.latex import LatexError, norm_string

__all__ = ["EULER_KEY", "MAX_NUMBER_DIGITS", "SPACE_MARK", "UPRIGHT_FUNCS", "Aliaser", "new_aliases"]


MAX_NUMBER_DIGITS = 40
"""Longest allowed digit run in symbolic input."""
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
r"""Vector / unit-vector markup that names the same quantity as the bare symbol (``\hat{x}``,
``\vec{E}``, ``\mathbf{E}`` are ``x`` and ``E``); other accents (``\bar``, ``\dot``, ``\tilde``)
change the meaning and stay part of the symbol."""
_GREEK_VARIANTS = {"varepsilon": "epsilon", "varphi": "phi", "vartheta": "theta", "varrho": "rho", "varsigma": "sigma", "varkappa": "kappa", "varpi": "pi"}
r"""Glyph variants of one Greek letter (``\varepsilon_0`` and ``\epsilon_0`` are one symbol)."""
UPRIGHT_FUNCS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "sech", "csch",
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "ln", "log", "exp",
}
r"""Function names also written upright (``\mathrm{sech}``, ``\operatorname{coth}``)."""
_FONTS = {"mathbf", "boldsymbol", "bm", "mathcal", "mathit", "mathsf", "mathbb", "mathfrak", "mathscr", "pmb"}
_TEXTS = {"text", "mathrm", "textrm", "rm", "mbox", "textit", "textbf"}
_DROP = {
    "left", "right", "displaystyle", "textstyle", "scriptstyle", "bigl", "bigr", "Bigl", "Bigr", "big",
    "Big", "biggl", "biggr", "limits", "nolimits", "quad", "qquad", "mathstrut", "strut",
}
_SPACE_SYMS = {"\\,", "\\;", "\\:", "\\!", "\\ ", "\\>", "~"}
SPACE_MARK = "\\,"
r"""What :meth:`Aliaser.convert` leaves where the LaTeX has a spacing command (``\,``, ``\;``, ``\quad`` ...;
never ``\!``): a written space ends a brace-less function argument (``\sin\phi_0\,e^{-t/\tau}``). The
conversion (:mod:`studybench.verify.reading.conversion`) reads it and drops it before parsing."""
EULER_KEY = "e"
r"""The symbol key of a letter ``e`` read as a symbol (the elementary charge): bare ``e``, and ``e`` to a
numeric power (``e^{2}``) unless the table reads ``e`` as Euler's number (:class:`Aliaser`)."""
_NUMERIC_EXPONENT_MACROS = {"\\pi", "\\frac", "\\dfrac", "\\tfrac", "\\left", "\\right", "\\cdot", "\\times", "\\sqrt"}


def _key(s: str) -> str:
    r"""Identity of a symbol part: normalised, braces dropped (``\mathbf{r}`` and ``r`` agree)."""
    return norm_string(s).replace("{", "").replace("}", "")


_UPRIGHT_D = re.compile(r"\\(?:mathrm|text|textrm|rm|operatorname)\s*\{\s*(?:~|\\[,;: !])*\s*d\s*\}|\\rm\s+d(?![A-Za-z])|\\int|\\oint|\\iint")
_ENV_OK = {"pmatrix", "bmatrix", "Bmatrix", "matrix", "vmatrix", "smallmatrix"}


class Aliaser:
    r"""Rewrite LaTeX symbols to ``\mathrm{vN}`` aliases; one table per comparison.

    The letter ``e`` follows one rule, the same for both sides of a comparison: raised to a power that
    holds a symbol (``e^{-t/\tau}``, ``e^{i k x}``) it is Euler's number, an exponential; a bare ``e`` is
    the symbol ``e`` (the elementary charge); ``e`` to a numeric power (``e^{2}``) is that symbol too when
    the comparison also writes a bare ``e`` (``symbol_e``: ``\frac{eE}{m}`` against ``\frac{e^{2}E^{2}}{meE}``),
    else Euler's number (``1 - e^{-1}``). Every ``e`` is Euler's number when ``euler`` is set. An upright
    ``\mathrm{e}`` is always Euler's number, ``e_r`` always a symbol.

    Args:
        diff_d: read a bare ``d`` directly before a symbol as a differential (``dx``); set when either
            side of the comparison writes an upright ``\mathrm{d}`` or an integral (:func:`new_aliases`).
        euler: read every ``e`` (bare, or to a numeric power) as Euler's number.
        symbol_e: the comparison writes a bare ``e`` (:func:`new_aliases`): ``e^{2}`` is then that symbol squared.

    Attributes:
        table: symbol key (``k_{B}``) -> alias name (``v3``).
        diff_d: as above; an integral turns it on while converting.
        euler: as above.
        symbol_e: as above.
        vectors: the aliases (``\mathrm{v3}``) of symbols written with vector or unit-vector markup.
    """

    def __init__(self, diff_d: bool = False, euler: bool = False, symbol_e: bool = False) -> None:
        """Start an empty alias table (see the class docstring)."""
        self.table: dict[str, str] = {}
        self.diff_d = diff_d
        self.euler = euler
        self.symbol_e = symbol_e and not euler
        self.vectors: set[str] = set()  # alias strings of symbols written with vector markup

    def alias(self, key: str) -> str:
        r"""The alias of a symbol key, added to the table on first use.

        Args:
            key: a symbol key (``k_{B}``, ``d(x)``, ``deriv1(v|t)``).

        Returns:
            ``\mathrm{vN}``, the same for the same key within this table.
        """
        name = self.table.get(key)
        if name is None:
            name = f"v{len(self.table)}"
            self.table[key] = name
        return f"\\mathrm{{{name}}}"

    def keys_by_name(self) -> dict[str, str]:
        """The table the other way round.

        Returns:
            Alias name (``v3``) -> symbol key (``k_{B}``).
        """
        return {v: k for k, v in self.table.items()}

    def group(self, toks: list[str], i: int) -> tuple[list[str], int]:
        """The macro argument at ``toks[i]``: a braced group's inner tokens, or one token.

        Args:
            toks: LaTeX tokens (:func:`studybench.verify.reading.latex.tokenize`).
            i: index of the argument's first token.

        Returns:
            ``(argument tokens, index after the argument)``.

        Raises:
            LatexError: no argument, or unbalanced braces.
        """
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
        """Extend an atom key with its subscripts and primes.

        Args:
            toks: LaTeX tokens.
            i: index right after the atom.
            key: the atom's key so far.

        Returns:
            ``(key with ``_{...}`` and primes, index after them)``.

        Raises:
            LatexError: a subscript without its argument or with unbalanced braces.
        """
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
                if g in (["0"], ["(", "0", ")"]):
                    # \nu^{0}, E_F^{0}, w^{(0)}: a label (a reference value), never the power 0 (which would make
                    # the whole factor 1 and let any multiple of it through)
                    key += "^{0}"
                    i = j
                    continue
            break
        return key, i

    @staticmethod
    def _text_inner(g: list[str]) -> str:
        return "".join(x for x in g if x not in _SPACE_SYMS).strip()

    def atom_at(self, toks: list[str], i: int) -> tuple[str, int] | None:
        r"""The symbol starting at ``toks[i]``.

        A letter, a Greek letter, an accented / bold / upright name, each with subscripts and primes;
        vector markup (``\vec``, ``\mathbf``) names the bare symbol, other accents are part of it.

        Args:
            toks: LaTeX tokens.
            i: index of the candidate symbol.

        Returns:
            ``(key, next index)``, or ``None`` when no symbol starts there.

        Raises:
            LatexError: an accent or font macro without a readable argument.
        """
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
            if re.fullmatch(r"[A-Za-z]{1,12}", inner) and inner not in UPRIGHT_FUNCS and inner not in ("e", "d"):
                # an upright single letter is the same symbol as the italic one (\mathrm{E} = E)
                return self.atom_suffix(toks, j, inner if len(inner) == 1 else "rm:" + inner)
        return None

    def _is_upright_d(self, toks: list[str], i: int) -> int | None:
        r"""Index after an upright ``\mathrm{d}`` at ``toks[i]`` (or a bare ``d`` when differentials are on).

        Returns ``None`` when there is none.
        """
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
        r"""Rewrite tokenised LaTeX for latex2sympy: every symbol becomes its alias.

        Differentials, derivatives (Leibniz, ``\partial_z``), function calls with argument lists and
        integral limits become single aliased symbols; spacing and sizing macros are dropped; ``2(4)``
        becomes a product.

        Args:
            toks: LaTeX tokens (:func:`studybench.verify.reading.latex.tokenize`).

        Returns:
            The converted tokens, ready to be joined and parsed.

        Raises:
            LatexError: constructs the verifier refuses (unsupported environments, ``\sum``, ``\lim``,
                arrows, cross products of vectors, unreadable upright groups, subscripts after brackets,
                over-long numbers ...).
        """
        out: list[str] = []
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            deg = _degree_sign(toks, i)
            if deg is not None:
                i = self._degrees(toks, deg, out)
                continue
            if t in ("\\left", "\\right") and i + 1 < n and toks[i + 1] == ".":
                i += 2  # \left. and \right.: an invisible delimiter
                continue
            if t in _SPACE_SYMS or t in ("\\quad", "\\qquad"):
                if t != "\\!" and out and out[-1] != SPACE_MARK:
                    out.append(SPACE_MARK)
                i += 1
                continue
            sd = self._slash_derivative(toks, i)
            if sd is not None:
                emitted, i = sd
                out.extend(emitted)
                i = self._product_guard(toks, i, out)
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
                    if inner in UPRIGHT_FUNCS:
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
                if name == "times" and next((x for x in reversed(out) if x != SPACE_MARK), None) in self.vectors:
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
                if t == "e" and i + 1 < n and toks[i + 1] == "^" and (not self.symbol_e or _symbolic_exponent(self.group(toks, i + 2)[0])):
                    out.append("e")  # an exponential
                    i += 1
                    continue
                key, i = self.atom_suffix(toks, i + 1, t)
                out.append("e" if key == EULER_KEY and self.euler else self.alias(key))
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

    @staticmethod
    def _degrees(toks: list[str], j: int, out: list[str]) -> int:
        r"""An angle in degrees (``60^{\circ}``, ``(90 - \theta)^\circ``) as radians: the number or bracket times pi/180.

        Returns the index after the degree sign at ``toks[j - 1]``.

        Raises:
            LatexError: degrees of something that is no number or bracket, a temperature (``25^\circ C``),
                or degrees and minutes (``7^\circ 20'``: not a product).
        """
        nxt = toks[j + 2] if j + 2 < len(toks) and toks[j] in _TEXT_MACROS and toks[j + 1] == "{" else (toks[j] if j < len(toks) else "")
        if nxt in ("C", "F"):
            raise LatexError("a temperature in degrees")
        after = next((t for t in toks[j:] if t not in _SPACE_SYMS), "")
        if after[:1].isdigit() or (after[:1] == "." and after[1:2].isdigit()):
            raise LatexError("degrees and minutes")
        if out and _NUMBER_RE.fullmatch(out[-1]):
            k = len(out) - 1
        elif out and out[-1] == ")":
            depth = 0
            k = len(out) - 1
            while k >= 0:
                depth += out[k] == ")"
                depth -= out[k] == "("
                if depth == 0:
                    break
                k -= 1
            if k < 0:
                raise LatexError("unbalanced brackets before a degree sign")
        else:
            raise LatexError("a degree sign after no number")
        out[k:] = ["(", *out[k:], "\\cdot", "\\frac", "{", "\\pi", "}", "{", "180", "}", ")"]
        return j

    def _d_end(self, toks: list[str], i: int) -> int | None:
        r"""Index after a differential's ``d`` at ``toks[i]`` (``d``, ``\partial``, ``\mathrm{d}``), else ``None``."""
        if i >= len(toks):
            return None
        j = i + 1 if toks[i] in ("d", "\\partial") else (self._is_upright_d(toks, i) if toks[i] != "d" else None)
        if j is None or (j < len(toks) and toks[j] in ("_", "'")):
            return None
        return j

    def _slash_derivative(self, toks: list[str], i: int) -> tuple[list[str], int] | None:
        r"""``dI/dx`` (also ``\mathrm{d}``, ``\partial``, ``d^2x/dt^2``) at ``toks[i]``: the derivative ``\frac{dI}{dx}``.

        Only at the start of a term (after nothing, an operator, a relation, an opening bracket or
        ``\left.``), so that ``a\,d/d\,t`` stays a product; one symbol over one symbol.
        """
        if i > 0 and toks[i - 1] not in _TERM_START and toks[i - 1] not in _SPACE_SYMS and toks[max(0, i - 2) : i] != ["\\left", "."]:
            return None
        j = self._d_end(toks, i)
        if j is None:
            return None
        order = "1"
        if j + 1 < len(toks) and toks[j] == "^":
            g, j = self.group(toks, j + 1)
            if len(g) != 1 or not g[0].isdigit():
                return None
            order = g[0]
        try:
            top = self.atom_at(toks, j)
            if top is None or top[1] >= len(toks) or toks[top[1]] != "/":
                return None
            k = self._d_end(toks, top[1] + 1)
            bottom = self.atom_at(toks, k) if k is not None else None
        except LatexError:
            return None
        if bottom is None:
            return None
        end, var = bottom[1], bottom[0]
        if order != "1":
            if end >= len(toks) or toks[end] != "^":
                return None
            g, end = self.group(toks, end + 1)
            if g != [order]:
                return None
            var = _key(" ".join(toks[k:end]))  # dt^2, keyed as in \frac{d^2x}{dt^2}
        return [self.alias(f"deriv{order}({top[0]}|{var})")], end

    def _diff_mark(self, g: list[str]) -> tuple[str, list[str]] | None:
        r"""Split ``d X`` / ``\mathrm{d} X`` / ``\partial X`` / ``d^2 X`` into (order, X).

        X may be empty (the operator ``\frac{d}{dt}``).
        """
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
        """Derivative tokens of ``g``: one symbol, or a bracketed sum / difference of symbols.

        The derivative is linear; ``None`` for anything else.
        """
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
        r"""``\frac{dX}{dY}`` (also ``\mathrm{d}``, ``\partial``, ``d^2``) at ``toks[i]`` as one opaque symbol.

        The symbol is keyed by X and Y, so that ``\frac{dv}{dt}`` never equals ``\frac{v}{t}``; a bracketed
        sum ``\frac{\partial (A + B)}{\partial z}`` and the operator form ``\frac{\partial}{\partial z} X``
        give the sum of the derivatives.
        """
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

    def _call(self, out: list[str], prefix: str, args: list[str]) -> bool:
        r"""Turn the symbol just emitted into one call symbol keyed with its arguments (``E(0)``).

        Not for ``e``, ``i`` or ``\pi`` (a constant times a bracket). Returns whether it did.
        """
        names = self.keys_by_name()
        last = out[-1][len("\\mathrm{") : -1] if out and out[-1].startswith("\\mathrm{v") else ""
        if last not in names or names[last] in ("e", "i", "\\pi", "pi"):
            return False
        out[-1] = self.alias(prefix + names[last] + "|" + _key(" ".join(args)))
        return True

    def _product_guard(self, toks: list[str], i: int, out: list[str]) -> int:
        r"""An atom directly followed by ``(`` is a product, not a function call.

        But an argument list with commas (``Y_{00}(\theta, \varphi)``, ``\psi(x, t)``) names the variables
        of a function and is dropped.
        """
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
            inner = [x for x in toks[j : k - 1] if x not in ("\\right", "\\left")]
            if depth == 0 and _numeric_argument(inner) and self._call(out, "at:", inner):
                # E(0), f'(2), E[1]: a function at a number, not E times 0
                return k
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


_TERM_START = {"=", "+", "-", "(", "[", "{", ",", "<", ">", "\\cdot", "\\times", "\\left", "\\approx", "\\pm", "\\mp"}
_TEXT_MACROS = {"\\mathrm", "\\text", "\\textrm", "\\rm", "\\mbox"}
_NUMBER_RE = re.compile(r"\d+(?:\.\d*)?|\.\d+|\(\d[\d.]*\\times 10\^\{-?\d+\}\)")


def _degree_sign(toks: list[str], i: int) -> int | None:
    r"""The index after a degree sign at ``toks[i]`` (``^{\circ}``, ``^\circ``, ``°``, ``\degree``), else ``None``."""
    t = toks[i]
    if t in ("\u00b0", "\\degree"):
        return i + 1
    if t != "^" or i + 1 >= len(toks):
        return None
    if toks[i + 1] == "\\circ":
        return i + 2
    if toks[i + 1 : i + 4] == ["{", "\\circ", "}"]:
        return i + 4
    return None


def _symbolic_exponent(g: list[str]) -> bool:
    r"""Whether an exponent holds a symbol (``-t/\tau``, ``i k x``), not only numbers (``2``, ``-1/2``, ``\pi``)."""
    return any(
        (len(x) == 1 and x.isalpha()) or (x.startswith("\\") and x[1:].isalpha() and x not in _NUMERIC_EXPONENT_MACROS)
        for x in g
    )


def _numeric_argument(inner: list[str]) -> bool:
    """A bracket holding one number (``(0)``, ``[2]``, ``(-1)``, ``(0.5)``)."""
    body = inner[1:] if inner[:1] == ["-"] else inner
    return len(body) == 1 and re.fullmatch(r"\d+(?:\.\d+)?", body[0]) is not None


def _number(t: str) -> str:
    r"""A number token for latex2sympy: ``3e8`` -> ``(3\times 10^{8})``; over-long numbers refused."""
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


def new_aliases(*texts: str, euler: bool = False) -> Aliaser:
    r"""A fresh alias table to share between the two sides of one comparison.

    Args:
        *texts: both sides' LaTeX. When either writes an upright differential (``\mathrm{d}x``) or an
            integral, a bare ``dx`` on the other side is read as a differential too.
        euler: read ``e`` as Euler's number everywhere (:class:`Aliaser`), for both sides.

    Returns:
        An empty :class:`Aliaser`; ``e`` to a numeric power is the symbol ``e`` when any text writes a
        bare ``e`` (:func:`_writes_bare_e`).
    """
    strs = [t for t in texts if isinstance(t, str)]
    return Aliaser(
        diff_d=any(_UPRIGHT_D.search(t) is not None for t in strs),
        euler=euler,
        symbol_e=any(_writes_bare_e(t) for t in strs),
    )


_UPRIGHT_GROUP = re.compile(r"\\(?:mathrm|text|textrm|rm|operatorname|mbox|mathit|mathbf)\s*\{[^{}]*\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_BARE_E = re.compile(r"e(?!\s*[_^]|[-+]?\d)")  # math letters are single symbols (eE, me); not 1.5e-3


def _writes_bare_e(text: str) -> bool:
    r"""Whether ``text`` writes the letter ``e`` alone, not raised to a power nor subscripted (``eE``, ``\frac{e}{m}``).

    Upright groups (``\mathrm{e}``, ``\text{the}``) and command names (``\beta``) do not count.
    """
    return _BARE_E.search(_COMMAND.sub(" ", _UPRIGHT_GROUP.sub(" ", text))) is not None
