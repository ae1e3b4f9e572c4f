r"""LaTeX normalisation for string comparison (docs/protocol.md section 5).

Pure string helpers, safe and cheap in any process (the in-process fast path uses them):
:func:`norm_string` (the normalised form compared for exact equality), :func:`norm_text`
(case-folded text for QL / MC / TF), :func:`split_relations` (top-level ``=``, ``\approx``, ``<`` ...
splitting), :func:`rhs`, :func:`expand_braceless` (``\frac12`` -> ``\frac{1}{2}``),
:func:`strip_text_remarks`, :func:`join_digit_groups`, :func:`tokenize`, and the relation chains
(:func:`relation_chain`, :func:`states_inequality`). None of them raises.

:class:`LatexError` is the one error the LaTeX -> SymPy conversion (:mod:`studybench.verify.reading.conversion`)
raises; it lives here, below every module that raises or catches it.

The relation helpers (:func:`split_relations`, :func:`rhs`, :func:`relation_chain`,
:func:`states_inequality`) are in :mod:`studybench.verify.reading.relation_signs` and importable from here.
"""

from __future__ import annotations

import re

from studybench.answers import match_brace
from studybench.verify.reading.relation_signs import relation_chain, rhs, split_relations, states_inequality

__all__ = [
    "LatexError",
    "expand_braceless",
    "join_digit_groups",
    "norm_string",
    "norm_text",
    "relation_chain",
    "rhs",
    "split_relations",
    "states_inequality",
    "strip_text_remarks",
    "bar_to_prime",
    "tokenize",
    "value_link",
    "vector_tuple",
]


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
    """One TeX macro argument at ``s[i:]`` (spaces skipped).

    A braced group (kept with braces), a control word, or a single character (so ``12`` gives ``1``).
    ``None`` at the end or before an optional ``[`` argument.
    """
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
    r"""Give brace-less macro arguments their braces: ``\frac12`` -> ``\frac{1}{2}``.

    Also ``\frac\pi4`` -> ``\frac{\pi}{4}``, ``\sqrt2`` -> ``\sqrt{2}`` (TeX reads one token per
    argument), also inside braced arguments up to a nesting depth of 20. ``\sqrt[n]{...}`` is left
    alone.

    Args:
        s: LaTeX text (anything else gives "").
        _depth: recursion depth (internal).

    Returns:
        ``s`` with explicit braces; strings over 4,000 characters unchanged (the scan is quadratic in
        the worst case). Never raises.
    """
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
    r"""``\mathrm{B}`` -> `` B`` (the space keeps it apart from a preceding control word).

    The space is dropped later; after ``_``/``^`` one character stays bare and longer content keeps its
    braces, so ``k_\mathrm{B}``, ``k_{\mathrm{B}}`` and ``k_B`` agree while ``v_\text{max}`` stays
    ``v_{max}``.
    """
    c = m.group("c")
    pre = m.group("pre")
    if pre:
        c = c.strip()
        return pre.strip() + (c if len(c) == 1 else "{" + c + "}")
    return " " + c + " "


def norm_string(s: str) -> str:
    r"""Normalised LaTeX for exact-string comparison (the fast path's equality).

    Drops ``$``, ``\left``/``\right``, spacing commands, font/text wrappers (keeping their
    content), ``\dfrac``/``\tfrac`` -> ``\frac``, ``\le``/``\ge`` spellings, a trailing period,
    and whitespace that LaTeX ignores. A space between a control word and a letter is kept, so
    ``\omega t`` and ``\omegat`` stay different.

    Args:
        s: LaTeX text (anything else gives "").

    Returns:
        The normalised string. Never raises.
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
    r"""Case-folded plain text for QL / MC / TF comparison.

    Strips ``\text{}``-style wrappers, ``$``, braces, punctuation and repeated spaces.

    Args:
        s: text, possibly LaTeX (anything else gives "").

    Returns:
        Lower-case words separated by single spaces. Never raises.
    """
    if not isinstance(s, str):
        return ""
    t = s.replace("$", " ")
    t = _SPACING.sub(" ", t)
    t = re.sub(r"\\(?:text|mathrm|textrm|textbf|mathbf|textit|mathit|emph|operatorname|mbox)(?![A-Za-z])", " ", t)
    t = t.replace("\\\\", " ").replace("{", " ").replace("}", " ")
    t = re.sub(r"[.,;:!?\"'`()\[\]]", " ", t)
    return " ".join(t.lower().split())


_ARROW_LINK = re.compile(r"\\(?:to|rightarrow|longrightarrow)(?![A-Za-z])")
_LEAD_REL = re.compile(r"^\s*(?:\\approx|\\simeq|\\sim|=)(?![A-Za-z])\s*(?=\S)")


def value_link(s: str) -> str:
    r"""A prediction's value link made plain: ``I \to 0`` -> ``I = 0``, ``\approx 3.2`` -> ``3.2``.

    A leading ``\approx`` / ``\sim`` / ``=`` is dropped; one top-level ``\to`` (``\rightarrow``)
    whose left side is a label (letters, subscripts, no number or operator) states the value on its
    right. Anything else (a reaction, a limit inside braces, two arrows) is returned unchanged.

    Args:
        s: one predicted box (LaTeX).

    Returns:
        The rewritten text, or ``s``. Never raises.
    """
    t = _LEAD_REL.sub("", s, count=1) if isinstance(s, str) else s
    if not isinstance(t, str) or len(t) > 2000:
        return s
    arrows = [m for m in _ARROW_LINK.finditer(t) if _depth_at(t, m.start()) == 0]
    if len(arrows) != 1:
        return t
    m = arrows[0]
    left, right = t[: m.start()].strip(), t[m.end() :].strip()
    bare = re.sub(r"_\{[^{}]*\}|_\\?[A-Za-z0-9]", "", left)
    if not right or not left or re.search(r"[0-9+\-*/=<>^]|\\infty|\\lim|\\frac|\\sqrt", bare):
        return t
    return f"{left} = {right}"


_VECTOR_ENV = re.compile(
    r"\s*(?:\\left\s*[(\[]\s*)?\\begin\{([pbB]?matrix|array)\}(?:\{[lcr|]*\})?(.*?)\\end\{\1\}(?:\s*\\right\s*[)\]])?\s*",
    re.DOTALL,
)


def vector_tuple(s: str) -> str | None:
    r"""A column or row vector written as a matrix, as a tuple: ``\begin{pmatrix}a\\b\\c\end{pmatrix}`` -> ``(a, b, c)``.

    Args:
        s: one box (LaTeX).

    Returns:
        ``(a, b, c)`` for a matrix with one column or one row (two or more entries), else ``None``.
        Never raises.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return None
    m = _VECTOR_ENV.fullmatch(s)
    if not m or "\\begin" in m.group(2):
        return None
    rows = [r.strip() for r in m.group(2).split("\\\\")]
    while rows and not rows[-1]:
        rows.pop()
    cells = [[c.strip() for c in r.split("&")] for r in rows]
    if any(not c for r in cells for c in r):
        return None
    if len(cells) > 1 and all(len(r) == 1 for r in cells):
        entries = [r[0] for r in cells]
    elif len(cells) == 1 and len(cells[0]) > 1:
        entries = cells[0]
    else:
        return None
    if any("," in e for e in entries):
        return None
    return "(" + ", ".join(entries) + ")"


_D = r"(?:d|\\mathrm\s*\{\s*d\s*\}|\\text\s*\{\s*d\s*\})"
_BAR_DERIV = re.compile(
    r"(?:\\left\s*\.\s*)?\\[dt]?frac\s*\{\s*" + _D + r"\s*([A-Za-z])\s*\}\s*\{\s*" + _D + r"\s*([A-Za-z])\s*\}"
    r"\s*(?:\\right\s*\||\\[Bb]igg?r?\s*\||\|)\s*_\s*\{\s*([A-Za-z])\s*=\s*([^{}]{1,40}?)\s*\}"
)


def bar_to_prime(s: str) -> str:
    r"""An evaluated derivative in prime notation: ``\left.\frac{df}{dx}\right|_{x=x_0}`` -> ``f'(x_0)``.

    Only a one-letter function and variable, the bar's variable the same as the derivative's.

    Args:
        s: LaTeX text.

    Returns:
        The rewritten text (``s`` when there is no such bar). Never raises.
    """
    if not isinstance(s, str) or len(s) > 2000:
        return s

    def repl(m: re.Match[str]) -> str:
        f, x, x2, at = m.groups()
        return f"{f}'({at})" if x == x2 else m.group(0)

    return _BAR_DERIV.sub(repl, s)


def _depth_at(s: str, pos: int) -> int:
    """The bracket depth (``{([``) at ``pos`` of ``s``."""
    depth = 0
    for c in s[:pos]:
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth = max(0, depth - 1)
    return depth


_TEXT_MACRO = re.compile(r"\\(?:text|textrm|mbox|textit|textbf)\s*\{")


def strip_text_remarks(s: str) -> str:
    r"""Remove ``\text{...}`` groups whose content is a remark (contains a space or > 3 letters).

    Short ``\text{max}``-style labels stay.

    Args:
        s: LaTeX text.

    Returns:
        ``s`` with each remark group replaced by a space. Never raises.
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


_DIGIT_GROUPS = re.compile(r"(?<![\d.])(\d{1,3})((?:(?:\\,|\{,\})\d{3})+)(?![\d])")


def join_digit_groups(s: str) -> str:
    r"""Join digit groups written with thin spaces or braces: ``12{,}000`` and ``12\,000`` -> ``12000``.

    Args:
        s: LaTeX text.

    Returns:
        ``s`` with every group of three digits after ``\,`` or ``{,}`` joined to the digits before it.
    """
    return _DIGIT_GROUPS.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), s)


# ---------------------------------------------------------------------------------------------
# tokens

_TOKEN = re.compile(
    r"\\[A-Za-z]+\*?"  # control word
    r"|\\."  # control symbol
    r"|\d+(?:\.\d*)?(?:[eE][+-]?\d+(?![A-Za-z]))?|\.\d+"  # number (with optional e-notation)
    r"|\s+"
    r"|.",
    re.DOTALL,
)


def tokenize(s: str) -> list[str]:
    """Split LaTeX into tokens.

    Control words (trailing spaces dropped), control symbols, numbers (``3e8`` is one number), and
    single characters; whitespace is dropped.

    Args:
        s: LaTeX text.

    Returns:
        The tokens in order. Never raises.
    """
    out = []
    for m in _TOKEN.finditer(s):
        t = m.group(0)
        if t.isspace():
            continue
        out.append(t)
    return out


# ---------------------------------------------------------------------------------------------
# relation chains (a < b \le c, R \geq \frac{2GM}{c^2}, \lambda \ll d)


