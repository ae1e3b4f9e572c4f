r"""Definitions stated in the problem text or in the gold's own box, used as substitutions (issue 14).

A problem that says "Define $\alpha = 16\sigma/c$" or "..., where $\omega_0 = \sqrt{k/m}$" makes
``\alpha`` and ``16\sigma/c`` the same answer for that item; so does a gold box that ends with a
trailing clause ``..., \omega_0 = \sqrt{k/m}``. Two steps:

* in the main process, pure strings (:func:`extract_definitions`): candidate ``symbol = expression``
  pairs are taken from the problem text only where the text introduces them ("where", "let",
  "define", "with", "denote", ``:=``, ``\equiv``; 设 令 假设 其中 定义 记), never from a sentence that
  states a result ("show that", "prove") or from a clause that asks a question ("find", "?"); from a
  gold box only as a trailing clause that defines a symbol the box's answer uses. Precision first:
  a left side that is not one plain (possibly subscripted) symbol, a right side without a symbol
  (a number, a measured value with units), a chain ``a = b = c``, a symbol defined twice
  differently, or a definition of what the gold answers are all ignored.
* in a sandbox worker (:func:`studybench.verify.rules.full_verdict` with a :class:`Definitions`,
  made for that one verification and passed down as an argument): only when the plain verdict is
  incorrect and :func:`may_substitute` allows it, the answer is compared again with every
  definition substituted on both sides (the symbol replaced by its expression in gold and
  prediction), the definitions parsed through the same safe LaTeX path as the answers (:func:`studybench.verify.reading.conversion.to_sympy_readings`) and applied by
  :func:`studybench.verify.physics.identities.reconcile`. The verdict's reason names the definitions used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from studybench.records import AnswerType
from studybench.verify.reading.conversion import to_sympy_readings

__all__ = [
    "Definition",
    "Definitions",
    "extract_definitions",
    "gold_box_definitions",
    "may_substitute",
    "problem_definitions",
    "symbol_key",
]

Definition = tuple[str, str, str]
"""``(symbol, expression, origin)``: LaTeX strings; origin ``"problem"`` or ``"gold"``."""

MAX_PROBLEM_CHARS = 20_000
"""Only the first this many characters of a problem text are searched."""
MAX_DEFINITIONS = 8
"""At most this many definitions per item (the first ones found)."""
_MAX_SIDE = 200

_GREEK = (
    "alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi|"
    "rho|varrho|sigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Upsilon|Phi|Psi|Omega"
)
_SUB = r"_(?:[A-Za-z0-9]|\{\s*(?:[A-Za-z0-9]|\\(?:" + _GREEK + r")|\\mathrm\{[A-Za-z0-9]{1,6}\}|\\text\{[A-Za-z0-9]{1,6}\})"\
       r"(?:\s*(?:[A-Za-z0-9]|\\(?:" + _GREEK + r")))*\s*\}|\\(?:" + _GREEK + r")(?![A-Za-z]))"
_SYMBOL = r"(?:(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])|\\(?:" + _GREEK + r")(?![A-Za-z]))(?:\s*" + _SUB + ")?"
_DEF_RE = re.compile(r"^\s*(" + _SYMBOL + r")\s*(?::=|\\coloneqq|\\equiv|=)\s*(.+?)\s*$", re.S)
_NOT_SYMBOL = frozenset({"e", "i", "d"})  # Euler's number, the imaginary unit, a differential
_RELATION = re.compile(r"=|<|>|\\(?:approx|sim|simeq|le|leq|ge|geq|leqslant|geqslant|neq|ne|propto|to|rightarrow|Rightarrow|in|gg|ll|mp|pm)(?![A-Za-z])|\?")
_MEASURED = re.compile(r"\d\.\d|\\times\s*10|\b10\s*\^|\\(?:mathrm|text|rm|unit|si|SI)\b|\\mathrm\s*\{|~")
_HAS_LETTER = re.compile(r"(?<!\\)[A-Za-z]|\\(?:" + _GREEK + r")(?![A-Za-z])")

_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_EN_TRIGGER = re.compile(
    r"(?:^|[\s(,;:])(where|let|define[sd]?(?:\s+as)?|defining|with|denote[sd]?(?:\s+by)?|denoting|here)"
    r"((?:\s+[A-Za-z-]+){0,3})\s*$",
    re.I,
)
_ZH_TRIGGER = re.compile(r"(其中|设|令|假设|假定|定义|记)\s*$")
_INTERVENING_STOP = frozenset(
    "at from to in on when if for by until after before of that is are be and or which find show prove "
    "point points position place time instant moment region".split()
)
_RESULT_WORDS = re.compile(r"\b(?:show|shows|shown|prove|proves|verify|demonstrate|derive that|confirm|check that)\b|证明|验证|说明", re.I)
_QUESTION_WORDS = re.compile(
    r"\b(?:find|calculate|compute|determine|estimate|evaluate|obtain|what|how|which|derive|express|give)\b|\?|？|求|计算|试|多少|什么",
    re.I,
)
_CONTINUED = re.compile(r"\s*(?:\([^()$]{0,60}\)\s*)?(?:\$\$?|\\\(|\\\[)\s*(?:[-+*/^=]|\\(?:cdot|times|pm|mp)(?![A-Za-z]))")
_SENTENCE_END = re.compile(r"[.!?。！？；;]\s|[。！？；]|\n\s*\n|[.!?]$")
_CLAUSE_END = re.compile(r"[,，;；:：]")
_SPLIT_TOP = re.compile(r",|;|\\q?quad|\\text\s*\{\s*(?:and|,|;)\s*\}|\\,\s*\\text\s*\{\s*and\s*\}")
_GOLD_MARK = re.compile(r"^\s*(?:\\text\s*\{\s*(?:where|with)\s*\}|\\(?:mathrm|textrm)\s*\{\s*(?:where|with)\s*\}|where|with)\s*", re.I)


# ---------------------------------------------------------------------------------------------
# strings (main process)

def _top_level_split(s: str) -> list[str]:
    r"""``s`` split at commas, semicolons and ``\quad`` outside braces, brackets and parentheses."""
    out: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth = max(0, depth - 1)
        elif depth == 0:
            m = _SPLIT_TOP.match(s, i)
            if m and m.end() > i:
                out.append(s[start:i])
                start = i = m.end()
                continue
        i += 1
    out.append(s[start:])
    return [p for p in (x.strip() for x in out) if p]


def symbol_key(sym: str) -> str:
    r"""A comparison key for a symbol's LaTeX: spaces, upright subscript markup and one-character subscript braces folded.

    Args:
        sym: a symbol's LaTeX (``\omega_{0}``, ``k_{\mathrm{B}}``).

    Returns:
        The key (``\omega_0``, ``k_B``).
    """
    s = re.sub(r"\\(?:mathrm|text|rm)\s*\{\s*([A-Za-z0-9]+)\s*\}", r"\1", sym)
    s = re.sub(r"\s*_\s*", "_", s)
    s = re.sub(r"\{\s*([^{}]*?)\s*\}", lambda m: "{" + re.sub(r"\s+", "", m.group(1)) + "}", s)
    s = re.sub(r"_\{([A-Za-z0-9])\}", r"_\1", s)
    return s.strip()


def _uses_symbol(text: str, sym: str) -> bool:
    """Whether ``text`` writes the symbol ``sym`` (as its own token, subscript and all)."""
    key = symbol_key(sym)
    folded = symbol_key(text)
    base, _, sub = key.partition("_")
    if not base.startswith("\\"):
        folded = re.sub(r"\\[A-Za-z]+", " ", folded)  # a letter inside \frac is no symbol; mk is m k
    head = re.escape(base) + (r"(?![A-Za-z])" if base.startswith("\\") else "")
    if sub:
        tail = r"(?![A-Za-z])" if sub.startswith("\\") else ""  # _0t is omega_0 times t
        pat = head + "_" + re.escape(sub) + tail
    else:
        pat = head + r"(?!_)"
    return re.search(pat, folded) is not None


def _as_definition(piece: str) -> tuple[str, str] | None:
    """``(symbol, expression)`` when ``piece`` is exactly one plain definition, else ``None``."""
    if len(piece) > 2 * _MAX_SIDE:
        return None
    m = _DEF_RE.match(piece)
    if m is None:
        return None
    lhs, rhs = m.group(1).strip(), m.group(2).strip().rstrip(".,;").strip()
    if not rhs or len(rhs) > _MAX_SIDE or lhs in _NOT_SYMBOL:
        return None
    if _RELATION.search(rhs) or _MEASURED.search(rhs) or "\\text" in rhs or not _HAS_LETTER.search(rhs):
        return None  # a chain, a condition, a measured value, prose, or a number
    if _uses_symbol(rhs, lhs):
        return None  # recursive
    if rhs[-1] in "+-*/^_=\\" or rhs.endswith(("\\cdot", "\\times")):
        return None  # the formula goes on
    if rhs.count("{") != rhs.count("}") or rhs.count("(") != rhs.count(")"):
        return None
    return lhs, rhs


def _mask_math(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """The text with every math segment blanked (same length), and the segments ``(start, end, body)``."""
    segs: list[tuple[int, int, str]] = []
    chars = list(text)
    for m in _MATH.finditer(text):
        body = next(g for g in m.groups() if g is not None)
        segs.append((m.start(), m.end(), body))
        for k in range(m.start(), m.end()):
            chars[k] = "M" if chars[k] != "\n" else "\n"
    return "".join(chars), segs


def _sentence_bounds(masked: str, start: int, end: int) -> tuple[int, int]:
    lo = 0
    for m in _SENTENCE_END.finditer(masked, 0, start):
        lo = m.end()
    m = _SENTENCE_END.search(masked, end)
    return lo, (m.end() if m else len(masked))


def _clause_bounds(masked: str, lo: int, hi: int, start: int, end: int) -> tuple[int, int]:
    c_lo = lo
    for m in _CLAUSE_END.finditer(masked, lo, start):
        c_lo = m.end()
    m = _CLAUSE_END.search(masked, end, hi)
    return c_lo, (m.start() if m else hi)


def _introduced(before: str) -> bool:
    """Whether the prose just before a math segment introduces a definition."""
    if _ZH_TRIGGER.search(before):
        return True
    m = _EN_TRIGGER.search(before)
    if m is None:
        return False
    words = m.group(2).split()
    if any(w.lower() in _INTERVENING_STOP for w in words):
        return False
    if m.group(1).lower() in ("where", "here"):
        # "..., where ..." or a sentence that starts with it; not "the point where r = R/2"
        head = before[: m.start(1)].rstrip()
        return not head or head[-1] in ",;:.$)]\n" or head.endswith("M")
    return True


def problem_definitions(problem: str | None) -> list[tuple[str, str]]:
    r"""The plain ``symbol = expression`` definitions a problem text states.

    Pure string work (safe in-process). A definition is taken from a math segment (``$...$``,
    ``$$...$$``, ``\(...\)``, ``\[...\]``) introduced by "where" (after a comma or a formula),
    "let", "define", "with", "denote", "here" (at most three words between, none of them a
    preposition or a place/time noun) or 设/令/假设/其中/定义/记, or written with ``:=`` / ``\equiv``;
    never from a sentence that states a result ("show that", "prove", "verify") or a clause that
    asks ("find", "calculate", "?", 求).

    Args:
        problem: the problem text (stem and sub-problem); ``None`` or empty gives none.

    Returns:
        ``(symbol, expression)`` LaTeX pairs in text order. Never raises.
    """
    if not isinstance(problem, str) or not problem.strip():
        return []
    text = problem[:MAX_PROBLEM_CHARS]
    try:
        masked, segs = _mask_math(text)
    except (ValueError, StopIteration):
        return []
    out: list[tuple[str, str]] = []
    prev_end = 0
    for start, end, body in segs:
        before = masked[max(prev_end, start - 120) : start]
        prev_end_was = prev_end
        prev_end = end
        explicit = re.search(r":=|\\coloneqq|\\equiv", body) is not None
        if not explicit and not _introduced(("M" if prev_end_was and start - prev_end_was < 3 else "") + before):
            continue
        if _CONTINUED.match(text, end):
            continue  # "\\( A = N \\) (neutron number) \\( + Z \\)": one formula cut by prose
        lo, hi = _sentence_bounds(masked, start, end)
        if _RESULT_WORDS.search(masked[lo:hi]) or masked[lo:hi].rstrip().endswith(("?", "？")):
            continue
        c_lo, c_hi = _clause_bounds(masked, lo, hi, start, end)
        if _QUESTION_WORDS.search(masked[c_lo:start] + " " + masked[end:c_hi]):
            continue
        for piece in _top_level_split(body):
            if not explicit or re.search(r":=|\\coloneqq|\\equiv", piece):
                d = _as_definition(piece)
                if d is not None:
                    out.append(d)
    return out


def gold_box_definitions(box: str) -> tuple[str, list[tuple[str, str]]]:
    r"""A gold box's trailing definition clauses, and the box without them.

    ``A\cos(\omega_0 t), \omega_0 = \sqrt{k/m}`` is the answer ``A\cos(\omega_0 t)`` with the
    definition ``\omega_0 = \sqrt{k/m}``. A trailing clause is a definition when it is exactly
    ``symbol = expression`` (optionally after "where" / "with"), every clause after it is one too,
    the symbol is written in the answer part, and no clause before it has that symbol as its left
    side. Without "where" / "with", an answer part that is itself a list of ``symbol = ...``
    clauses takes no definition (``x = v t, v = a t`` answers both). Pure string work.

    Args:
        box: one gold box content.

    Returns:
        ``(answer part, definitions)``; ``(box, [])`` when the box ends with no definition.
    """
    if not isinstance(box, str) or len(box) > 4 * _MAX_SIDE or "," not in box and "quad" not in box and "where" not in box:
        return box, []
    try:
        pieces = _top_level_split(box)
    except RecursionError:  # pragma: no cover - the split is iterative
        return box, []
    merged: list[str] = []
    for p in pieces:  # "..., \\quad \\text{where} \\quad \\omega = ...": the marker alone is split off
        if merged and _GOLD_MARK.sub("", merged[-1], count=1) == "" and _GOLD_MARK.match(merged[-1]):
            merged[-1] = merged[-1] + " " + p
        else:
            merged.append(p)
    pieces = merged
    if len(pieces) < 2:
        return box, []
    defs: list[tuple[str, str]] = []
    k = len(pieces)
    marked = True
    while k > 1:
        piece = _GOLD_MARK.sub("", pieces[k - 1], count=1)
        d = _as_definition(piece)
        if d is None:
            break
        marked = marked and piece != pieces[k - 1]
        defs.insert(0, d)
        k -= 1
    if not defs:
        return box, []
    answer = pieces[:k]
    if not marked and all(_DEF_RE.match(p) for p in answer):
        return box, []  # "x = v t, v = a t": a list of results, not a result and its definition
    answer_text = ", ".join(answer)
    lhs_keys = {symbol_key(m.group(1)) for p in answer if (m := _DEF_RE.match(p)) is not None}
    for sym, _ in defs:
        if not _uses_symbol(answer_text, sym) or symbol_key(sym) in lhs_keys:
            return box, []
    # the answer part itself must not be a bare symbol (the defined quantity is then the answer)
    return answer_text, defs


def _answers_symbol(golds: Sequence[str], sym: str) -> bool:
    """Whether a gold answers ``sym`` itself (``sym = ...`` in a box, or a box that is just ``sym``)."""
    key = symbol_key(sym)
    for g in golds:
        for piece in _top_level_split(g):
            m = _DEF_RE.match(piece)
            if symbol_key(piece) == key or (m is not None and symbol_key(m.group(1)) == key):
                return True
            # an equation whose left side is the symbol with other markup (E_n = ..., \omega^2 = ...)
            lhs = piece.split("=", 1)[0] if "=" in piece else ""
            if lhs and re.fullmatch(re.escape(key) + r"(?:\^\{?\d\}?)?", symbol_key(lhs)):
                return True
    return False


def extract_definitions(problem: str | None, golds: Sequence[str], answer_type: str = "") -> tuple[Definition, ...]:
    r"""The definitions one item may use: from the problem text and from the gold boxes' trailing clauses.

    A symbol defined twice with different expressions is dropped (both definitions), as is the
    definition of a symbol the gold answers (``\omega = ...`` when the gold is ``\omega = \sqrt{k/m}``:
    the problem then states what is asked). Only EX and EQ answers (and EX/EQ slots) use definitions.

    Args:
        problem: the problem text (stem and sub-problem), or ``None``.
        golds: the gold box contents.
        answer_type: the item's answer type name; the types whose row of :mod:`studybench.answer_types`
            says so (MC, TF, QL, IN, NV) take no definitions.

    Returns:
        At most :data:`MAX_DEFINITIONS` ``(symbol, expression, origin)`` triples, in a stable order
        (part of the memo key). Never raises.
    """
    try:
        key = str(answer_type).strip().upper()
        if key in AnswerType.__members__ and not AnswerType[key].info.definitions:
            return ()  # the answer type table: MC, TF, QL, NV and IN take no definitions
        found: list[Definition] = [(s, e, "problem") for s, e in problem_definitions(problem)]
        for g in golds:
            if isinstance(g, str):
                found += [(s, e, "gold") for s, e in gold_box_definitions(g)[1]]
        by_key: dict[str, set[str]] = {}
        for s, e, _ in found:
            by_key.setdefault(symbol_key(s), set()).add(re.sub(r"\s+", "", e))
        out: list[Definition] = []
        seen: set[str] = set()
        for s, e, origin in found:
            key = symbol_key(s)
            if key in seen or len(by_key[key]) > 1:
                continue  # a repeat, or two definitions that disagree
            if origin == "problem" and _answers_symbol(golds, s):
                continue
            seen.add(key)
            out.append((s, e, origin))
        return tuple(out[:MAX_DEFINITIONS])
    except (RecursionError, ValueError, TypeError):  # pragma: no cover - defensive
        return ()


# ---------------------------------------------------------------------------------------------
# worker side

class Definitions:
    r"""One verification's definitions, and the descriptions of those it substituted (worker side).

    Made afresh for each verification by the rule dispatch (:func:`studybench.verify.rules.full_verdict`)
    and handed down, as an argument, to every comparison that substitutes (through
    :func:`studybench.verify.physics.identities.reconcile`); never stored in a module, so no item's
    definitions can reach another item's comparison, in any thread or order.

    Attributes:
        items: the item's ``(symbol, expression, origin)`` definitions (:func:`extract_definitions`).
        used: the descriptions of the definitions substituted so far (``"\tau = RC from the problem"``),
            in the order they were first used.
    """

    __slots__ = ("items", "used")

    def __init__(self, items: Sequence[Definition]) -> None:
        """Hold ``items``; nothing is used yet."""
        self.items: tuple[Definition, ...] = tuple(items)
        self.used: list[str] = []

    def substitute(self, gold: list[Any], pred: list[Any], aliases: Any) -> tuple[list[Any], list[Any]]:
        """Replace every defined symbol by its expression on both sides, and record the ones used.

        A definition that does not parse to one plain symbol and one expression is skipped.

        Args:
            gold: the gold's SymPy objects.
            pred: the prediction's SymPy objects (same alias table).
            aliases: the shared alias table.

        Returns:
            ``(gold, pred)`` with the definitions substituted.
        """
        if not self.items:
            return gold, pred
        import sympy

        rep: dict[Any, Any] = {}
        descs: dict[Any, str] = {}
        for sym, expr, origin in self.items:
            try:
                s = _parse_one(sym, aliases)
                e = _parse_one(expr, aliases)
            except Exception:  # unparsable or ambiguous: ignored
                continue
            if not isinstance(s, sympy.Symbol) or not hasattr(e, "free_symbols") or not e.free_symbols or s in e.free_symbols:
                continue
            rep[s] = e
            descs[s] = f"{sym} = {expr} from the {'problem' if origin == 'problem' else 'gold'}"
        if not rep:
            return gold, pred
        used = {s for x in (*gold, *pred) for s in getattr(x, "free_symbols", ()) if s in rep}
        for _ in range(len(rep)):
            gold = [x.xreplace(rep) if hasattr(x, "xreplace") else x for x in gold]
            pred = [x.xreplace(rep) if hasattr(x, "xreplace") else x for x in pred]
            more = {s for x in (*gold, *pred) for s in getattr(x, "free_symbols", ()) if s in rep}
            if not more:
                break
            used |= more
        for s in sorted(used, key=lambda u: descs[u]):
            if descs[s] not in self.used:
                self.used.append(descs[s])
        return gold, pred


def _parse_one(latex: str, aliases: Any) -> Any:
    readings = to_sympy_readings(latex, aliases, gold=True)
    if len(readings) != 1:
        raise ValueError("ambiguous")
    return readings[0]


def may_substitute(preds: Sequence[Any], defs: Sequence[Definition]) -> bool:
    r"""Whether predicted boxes may be accepted with the item's definitions substituted.

    Not when a box is only a defined symbol (``\tau`` or ``x = \tau`` for "let \tau = RC"), nor when
    it writes a symbol that the gold box itself defines (without defining it).

    Args:
        preds: the predicted boxes (non-strings are ignored).
        defs: the item's definitions.

    Returns:
        Whether the definitions may decide.
    """
    boxes = [p for p in preds if isinstance(p, str)]
    if any(symbol_key(p.split("=")[-1]) == symbol_key(s) for p in boxes for s, _, _ in defs):
        return False
    return not any(_uses_symbol(p, s) for p in boxes for s, _, origin in defs if origin == "gold")
