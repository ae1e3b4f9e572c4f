r"""What the leakage gate compares with the gold: the candidate spans of a guidance text.

:func:`candidates` lists every piece of a text that could state a gold (:mod:`.leakage` compares each
with every gold slot through the rule verifier):

- every math span (``$...$``, ``$$...$$``, ``\(...\)``, ``\[...\]``, equation environments,
  :data:`MATH`), each comma / ``\quad`` part, each side and each adjacent pair of a relation chain;
- every bare number of the prose (scientific notation in any spelling: ``3.57e34``,
  ``3.57 x 10^34``, ``3.57×10³⁴``), with and without up to three unit words after it; numbers that
  follow a reference word ("Eq. 3", "step 2") are not values;
- a few number words (``twice``, ``half``, ``two`` ... ``ten``);
- plain-text equations (``v = ...``) and plain-text formulas (:func:`plain_formulas`: ``sqrt(2gh)``,
  ``√(2gh)``, ``(2*g*h)**0.5``, "the square root of 2gh", ``2π√(L/g)``, ``\sqrt{2gh}`` without math
  delimiters), written as LaTeX.

Pure string work: nothing here evaluates a text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MATH", "Candidate", "candidates", "mask", "plain_formulas"]


MATH = re.compile(
    r"\$\$(?P<a>.+?)\$\$|\\\[(?P<b>.+?)\\\]|\\\((?P<c>.+?)\\\)|(?<![\\$])\$(?P<d>[^$]+?)(?<!\\)\$"
    r"|\\begin\{(?P<env>equation|align|gather|eqnarray|multline|displaymath|math)\*?\}(?P<e>.+?)\\end\{(?P=env)\*?\}",
    re.S,
)
"""A math span: ``$$...$$``, ``\\[...\\]``, ``\\(...\\)``, ``$...$`` or an equation environment."""
_RELATION = re.compile(r"\\(?:approx|simeq|equiv|cong|Rightarrow|rightarrow|to|implies|leftrightarrow|sim)(?![A-Za-z])|[=≈→⇒]")
_PARTS = re.compile(r"\\q?quad\b|\\\\|;|,(?![^{]*\})|\\text\{\s*(?:and|or|so|thus|hence|i\.e\.|where)\s*\}")
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUP_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")

_NUMBER = re.compile(
    r"(?<![\w.^_{}\\])(?P<m>[-−+]?(?:\d+(?:[.,]\d+)*|\.\d+))"
    r"(?:\s*(?:(?P<e>[eE][-−+]?\d+)\b|(?:\\times|×|x|X|\*|·|\\cdot)\s*10\s*(?:\^\s*\{?\s*(?P<x>[-−+]?\d+)\s*\}?|(?P<s>[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+))))?"
    r"(?![\d.])(?!(?:st|nd|rd|th)\b)"
)
_UNIT_TOKEN = re.compile(
    r"\s*(?:·|\*|/)?\s*([A-Za-zμµΩÅ°]{1,4}(?:\^?\{?[-−]?\d\}?|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?(?:/[A-Za-zμµΩÅ°]{1,4}(?:\^?\{?[-−]?\d\}?|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?)*)(?![\w])"
)
_NOT_UNITS = frozenset(
    "a an and are as at be by for from if in into is it its of on or so the then this to use was we with you "
    "than that when where which each per times step part also both case".split()
)
_REFERENCE = re.compile(
    r"(?:\beq(?:uation)?s?\.?|\bexamples?|\bsections?|\bsec\.|\bfigures?|\bfig\.|\bchapters?|\bch\.|\btables?|"
    r"\bproblems?|\bexercises?|\bsteps?|\bparts?|\bappendix|\bvolume|\bvol\.|\bpage|\bp\.)\s*\(?\s*$", re.I)
_NUMBER_WORDS = {"zero": "0", "half": "\\frac{1}{2}", "twice": "2", "double": "2", "two": "2", "three": "3",
                 "thrice": "3", "triple": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
                 "nine": "9", "ten": "10", "quarter": "\\frac{1}{4}"}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.I)
_PLAIN_EQ = re.compile(r"(?<![\w\\])([A-Za-z][\w']*(?:\([^()\s]*\))?)\s*=\s*([^\s,;:]+(?:\s*[-+*/^]\s*[^\s,;:]+)*)")


def _latex_number(m: re.Match[str]) -> str:
    mant = m.group("m").replace("−", "-").replace(",", "") if "." in m.group("m") else m.group("m").replace("−", "-")
    if "," in mant:  # 1,000 (thousands) or 1,5 (decimal comma)
        head, _, tail = mant.partition(",")
        mant = mant.replace(",", "") if len(tail.split(",")[0]) == 3 else f"{head}.{tail}"
    exp = m.group("e") or m.group("x") or (m.group("s").translate(_SUPERSCRIPT) if m.group("s") else None)
    if exp is None:
        return mant
    exp = exp.lstrip("eE").replace("−", "-")
    return f"{mant}\\times10^{{{exp}}}"


def _unit_latex(tok: str) -> str:
    tok = _SUP_RUN.sub(lambda s: "^{" + s.group(0).translate(_SUPERSCRIPT) + "}", tok).replace("−", "-")
    return tok.replace("µ", "\\mu ").replace("μ", "\\mu ").replace("Ω", "\\Omega").replace("°", "^\\circ")


@dataclass(frozen=True)
class Candidate:
    """One span of a text (``start``:``end``) and the LaTeX it is compared as; ``kind`` says how it was found."""

    start: int
    end: int
    text: str
    kind: str  # math | number | word | plain


def _strip_math(s: str) -> str:
    s = s.strip().replace("&", " ")
    s = re.sub(r"\\(?:left|right|displaystyle|,|;|!|quad|qquad)(?![A-Za-z])", " ", s)
    return s.strip().rstrip(".,;:").strip()


def _math_pieces(body: str) -> list[str]:
    body = _strip_math(body)
    if not body:
        return []
    out = [body]
    for part in _PARTS.split(body):
        part = _strip_math(part)
        if not part:
            continue
        out.append(part)
        sides = [s.strip() for s in _RELATION.split(part)]
        rels = _RELATION.findall(part)
        if len(sides) > 1:
            out += [s for s in sides if s]
            for i in range(len(sides) - 1):
                if sides[i] and sides[i + 1]:
                    op = rels[i] if rels[i] in ("=",) else "="
                    out.append(f"{sides[i]} {op} {sides[i + 1]}")
    seen: set[str] = set()
    return [p for p in out if len(p) <= 2000 and not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def mask(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with every character of ``spans`` but newlines made a space (positions are kept).

    Args:
        text: the text.
        spans: ``(start, end)`` character ranges to blank.

    Returns:
        The masked text, as long as ``text``.
    """
    chars = list(text)
    for s, e in spans:
        for i in range(s, e):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def candidates(text: str) -> list[Candidate]:
    """Every candidate span of ``text`` (see the module docstring), in the order found.

    Args:
        text: a guidance text (or a problem text).

    Returns:
        The candidates; a span may give several (a math span, its parts and sides).
    """
    out: list[Candidate] = []
    math_spans: list[tuple[int, int]] = []
    for m in MATH.finditer(text):
        body = next(g for g in (m.group("a"), m.group("b"), m.group("c"), m.group("d"), m.group("e")) if g is not None)
        math_spans.append(m.span())
        for piece in _math_pieces(body):
            out.append(Candidate(m.start(), m.end(), piece, "math"))
    prose = mask(text, math_spans)
    for m in _NUMBER.finditer(prose):
        if _REFERENCE.search(prose[max(0, m.start() - 16):m.start()]):
            continue
        num = _latex_number(m)
        out.append(Candidate(m.start(), m.end(), num, "number"))
        pos, units = m.end(), []
        while len(units) < 3:
            u = _UNIT_TOKEN.match(prose, pos)
            if not u or u.group(1).lower() in _NOT_UNITS:
                break
            units.append(_unit_latex(u.group(1)))
            pos = u.end()
            out.append(Candidate(m.start(), pos, f"{num}\\ \\mathrm{{{' '.join(units)}}}", "number"))
    for m in _NUMBER_WORD.finditer(prose):
        out.append(Candidate(m.start(), m.end(), _NUMBER_WORDS[m.group(1).lower()], "word"))
    for m in _PLAIN_EQ.finditer(prose):
        lhs, rhs = m.group(1), m.group(2).rstrip(".")
        out.append(Candidate(m.start(), m.end(), f"{lhs} = {rhs}", "plain"))
        out.append(Candidate(m.start(2), m.end(), rhs, "plain"))
    have = {c.text for c in out}
    for start, end, latex in plain_formulas(prose):
        for piece in _math_pieces(latex):
            if piece not in have:
                have.add(piece)
                out.append(Candidate(start, end, piece, "plain"))
    return out


# ------------------------------------------------------------------------- plain-text formulas

_PF_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<root>(?:the\s+)?(?:square|cube)\s+root\s+of\s+(?:the\s+)?)"
    r"|(?P<cmd>\\[A-Za-z]+)"
    r"|(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+(?![A-Za-z]))?)"
    r"|(?P<word>[A-Za-z]+(?:_(?:\{[^{}\s]{1,12}\}|[A-Za-z0-9]{1,4}))?'*)"
    r"|(?P<greek>[\u0391-\u03a9\u03b1-\u03c9\u03d1\u03d5\u03f5])"
    r"|(?P<radical>[√∛∜])"
    r"|(?P<sup>[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+)"
    r"|(?P<op>\*\*|[-+*/^=≈×·−])"
    r"|(?P<open>[({\[])"
    r"|(?P<close>[)}\]])"
    r"|(?P<other>.)",
    re.S | re.I,
)
_PF_FUNCS = {"exp": r"\exp", "ln": r"\ln", "log": r"\log", "sin": r"\sin", "cos": r"\cos", "tan": r"\tan",
             "arcsin": r"\arcsin", "arccos": r"\arccos", "arctan": r"\arctan", "sinh": r"\sinh", "cosh": r"\cosh",
             "tanh": r"\tanh", "abs": "", "sqrt": "", "root": "", "cbrt": ""}
_PF_ROOT_WORDS = {"sqrt": "", "root": "", "cbrt": "3"}
_PF_GREEK_NAMES = frozenset(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi rho sigma tau "
    "upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split()
)
_PF_GREEK_CHARS = dict(zip(
    "αβγδεζηθικλμνξπρστυφχψωϑϕϵΓΔΘΛΞΠΣΥΦΨΩ",
    ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon phi chi psi "
     "omega vartheta phi epsilon Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega").split(),
    strict=True,
))
_PF_STOP = _NOT_UNITS | frozenset(
    "get got for has had was now set let see put one two all any not but can may how why our via own new "
    "used then thus here gives give".split()
)
_PF_OPERAND = ("num", "word", "greek", "cmd")
_Tok = tuple[str, str, int, int]  # kind, text, start, end


def _pf_word_ok(toks: list[_Tok], i: int) -> bool:
    """Whether a word token belongs to a formula: a function or Greek name, or a short symbol run (not an English word)."""
    base = toks[i][1].rstrip("'").split("_", 1)[0]
    if base.lower() in _PF_FUNCS or base in _PF_GREEK_NAMES:
        return True
    if len(base) > 3:
        return False
    if base.lower() not in _PF_STOP:
        return True
    # a stop word is a symbol only right beside an operator ("a = F/m")
    for j in (i - 1, i + 1):
        k = j + (j - i) if 0 <= j < len(toks) and toks[j][0] == "ws" else j
        if 0 <= k < len(toks) and toks[k][0] == "op":
            return True
    return False


def _pf_runs(text: str) -> list[list[_Tok]]:
    """Maximal runs of formula tokens in prose (stopped by punctuation and English words), each with an operator, root or power."""
    toks: list[_Tok] = [(m.lastgroup or "other", m.group(0), m.start(), m.end()) for m in _PF_TOKEN.finditer(text)]
    runs: list[list[_Tok]] = []
    cur: list[_Tok] = []
    depth = 0

    def close_run() -> None:
        nonlocal cur, depth
        while cur and cur[-1][0] in ("ws", "op", "root", "radical", "open"):
            cur.pop()
        while cur and (cur[0][0] == "ws" or (cur[0][0] == "op" and cur[0][1] not in "-−")):
            cur.pop(0)
        if cur:
            runs.append(cur)
        cur, depth = [], 0

    for i, t in enumerate(toks):
        kind = t[0]
        if kind == "ws":
            if cur:
                cur.append(t)
        elif (kind == "word" and not _pf_word_ok(toks, i)) or kind == "other" or (kind == "close" and depth == 0):
            close_run()
        else:
            depth += {"open": 1, "close": -1}.get(kind, 0)
            cur.append(t)
            if len(cur) > 160:
                close_run()
    close_run()
    return [r for r in runs if any(t[0] in ("root", "radical", "sup", "cmd", "op") or (t[0] == "word" and t[1].lower() in _PF_FUNCS)
                                   for t in r) and any(t[0] in _PF_OPERAND for t in r)]


def _pf_group_end(toks: list[_Tok], i: int) -> int:
    """End (exclusive) of the bracketed group that opens at ``toks[i]``; ``len(toks)`` when it never closes."""
    depth = 0
    for j in range(i, len(toks)):
        depth += {"open": 1, "close": -1}.get(toks[j][0], 0)
        if depth == 0:
            return j + 1
    return len(toks)


def _pf_inner(toks: list[_Tok], i: int) -> list[_Tok]:
    """The tokens inside the bracketed group that opens at ``toks[i]``."""
    j = _pf_group_end(toks, i)
    return toks[i + 1 : j - 1] if toks[j - 1][0] == "close" else toks[i + 1 : j]


def _pf_operand(toks: list[_Tok], i: int, greedy: bool) -> tuple[list[_Tok], int]:
    """The operand of a root at ``toks[i]`` and where it ends: a bracketed group, or juxtaposed factors (``√2gh``)."""
    if i < len(toks) and toks[i][0] == "ws":
        i += 1
    if i >= len(toks):
        return [], i
    if toks[i][0] == "open":
        return _pf_inner(toks, i), _pf_group_end(toks, i)
    j = i + 1
    while greedy and j < len(toks) and toks[j][0] in (*_PF_OPERAND, "sup"):
        j += 1
    return toks[i:j], j


def _pf_latex(toks: list[_Tok], greedy: bool) -> str:
    """A run of prose formula tokens as LaTeX: roots, powers, products and Greek letters made explicit."""
    out: list[str] = []
    i = 0
    while i < len(toks):
        kind, val = toks[i][0], toks[i][1]
        low = val.rstrip("'").lower()
        if kind in ("root", "radical") or (kind == "word" and low in _PF_ROOT_WORDS):
            deg = {"∛": "3", "∜": "4"}.get(val, _PF_ROOT_WORDS.get(low, "3" if "cube" in low else ""))
            inner, i = _pf_operand(toks, i + 1, greedy)
            out.append((f"\\sqrt[{deg}]" if deg else "\\sqrt") + "{" + _pf_latex(inner, greedy) + "} ")
            continue
        if kind == "word" and low == "abs" and i + 1 < len(toks) and toks[i + 1][0] == "open":
            out.append("\\left|" + _pf_latex(_pf_inner(toks, i + 1), greedy) + "\\right| ")
            i = _pf_group_end(toks, i + 1)
            continue
        if kind == "op" and val in ("^", "**") and i + 1 < len(toks) and toks[i + 1][0] == "open":
            out.append("^{" + _pf_latex(_pf_inner(toks, i + 1), greedy) + "}")
            i = _pf_group_end(toks, i + 1)
            continue
        if kind == "op" and val in ("^", "**") and i + 1 < len(toks) and toks[i + 1][0] in _PF_OPERAND:
            out.append("^{" + _pf_latex(toks[i + 1 : i + 2], greedy) + "}")
            i += 2
            continue
        if kind == "word" and low in _PF_FUNCS:
            out.append(_PF_FUNCS[low] + " ")
        elif kind == "word":
            base, _, sub = val.rstrip("'").partition("_")
            sym = ("\\" + base if base in _PF_GREEK_NAMES else base) + ("_{" + sub.strip("{}") + "}" if sub else "")
            out.append(sym + "'" * (len(val) - len(val.rstrip("'"))) + " ")
        elif kind == "greek":
            out.append("\\" + _PF_GREEK_CHARS.get(val, "alpha") + " ")
        elif kind == "sup":
            out.append("^{" + val.translate(_SUPERSCRIPT) + "}")
        elif kind == "op":
            out.append({"**": "^", "*": " \\cdot ", "×": " \\cdot ", "·": " \\cdot ", "−": "-", "≈": "="}.get(val, val))
        elif kind == "num" and "e" in val.lower():
            mant, _, exp = val.lower().partition("e")
            out.append(mant + "\\times10^{" + exp + "}")
        else:
            out.append(" " if kind == "ws" else val)
        i += 1
    text = re.sub(r"\s+", " ", "".join(out))
    return re.sub(r"([({\[]) | (?=[)}\]^/])|(?<=/) ", r"\1", text).strip()


def plain_formulas(text: str) -> list[tuple[int, int, str]]:
    r"""The formulas written in plain text in a prose passage, as LaTeX (for the gold comparison).

    A formula is a run of symbols, numbers, operators and brackets that holds an operator, a root, a
    power or a function (``v = sqrt(2gh)``, ``√(2gh)``, ``(2gh)^(1/2)``, ``2*pi*sqrt(L/g)``, "the square
    root of 2gh", ``\sqrt{2gh}`` outside math delimiters); punctuation and English words end it, and a
    short stop word (``a``, ``at``, ``is``) belongs to it only right beside an operator. A root
    without brackets is read both ways: ``√2gh`` as ``\sqrt{2gh}`` and as ``\sqrt{2} gh``. Pure string
    work; nothing is evaluated.

    Args:
        text: prose (mask math spans out first).

    Returns:
        ``(start, end, latex)`` per reading of each formula, in text order.
    """
    out: list[tuple[int, int, str]] = []
    for run in _pf_runs(text):
        readings = dict.fromkeys(_pf_latex(run, greedy) for greedy in (True, False))
        out += [(run[0][2], run[-1][3], latex) for latex in readings if latex]
    return out
