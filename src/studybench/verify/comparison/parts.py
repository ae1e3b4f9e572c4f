r"""Multi-part answers: parts, groups, labels, and matching them in order or order-free (docs/protocol.md 5).

:func:`answer_parts` lists the parts of one box (groups separated by ``;``, comma-separated parts,
alignment rows, equations joined by ``\quad`` or "and"); :func:`compare_parts` compares two boxes
part by part: groups as wholes, parts order-free when they form a set (:func:`set_like`: equations,
labelled values, states) with labels respected, collective subscripts (``P_{2,1,0}``) written out,
spectroscopic terms ``^{2S+1}L_J`` read as ``L=, S=, J=``. :func:`match_unordered` is the order-free
matching (a perfect bipartite matching), :func:`match_in_order` the positional one; both are also
used for several boxes (:mod:`studybench.verify.rules`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from studybench.answers import split_top_level
from studybench.verify.comparison.symbolic import latex_equal
from studybench.verify.physics.definitions import Definitions
from studybench.verify.reading.latex import norm_string, split_relations
from studybench.verify.reading.numbers import quantity_candidates
from studybench.verify.verdict import RuleResult

__all__ = [
    "LATEX_CLOSERS",
    "LATEX_OPENERS",
    "SUBSCRIPT_RE",
    "answer_parts",
    "compare_parts",
    "flatten_env",
    "labels_compatible",
    "latex_tokens",
    "match_in_order",
    "match_unordered",
    "regroup",
    "same_lhs",
    "set_like",
    "split_listing",
    "split_top",
]


# ---------------------------------------------------------------------------------------------
# the parts of one box

_ENV = re.compile(
    r"\\(?:begin|end)\s*\{\s*(?:aligned|align\*?|alignat\*?|gathered|gather\*?|split|eqnarray\*?|array|cases)\s*\}(?:\s*\{[^{}]*\})?"
)
_MATRIX_ENV = re.compile(r"\\begin\s*\{\s*[pbBvV]?matrix")
_QUAD_SPLIT = re.compile(r"\\q?quad(?![A-Za-z])|\\text\s*\{\s*(?:and|,|;)\s*\}|\\(?:text|mbox)\s*\{\s*,?\s*and\s*\}")
_COLLECTIVE = re.compile(r"_\{\s*([^{}]{1,20}?,[^{}]{1,20}?)\s*\}")


def flatten_env(s: str) -> str:
    r"""Rows of an alignment environment as separate answers (matrices keep their rows).

    Args:
        s: one box (``\begin{aligned} a &= b, \\ c &= d \end{aligned}``).

    Returns:
        ``s`` with the environment dropped and its rows separated by commas (``a = b, , c = d``).
    """
    if "\\begin" not in s or _MATRIX_ENV.search(s):
        return s
    t = _ENV.sub(" ", s)
    t = re.sub(r"\\\\(?:\[[^\]]{0,12}\])?", ",", t)
    return re.sub(r"[ \t\n]+", " ", t.replace("&", " "))


def _split_quad(p: str) -> list[str]:
    r"""``y' = y \quad z' = z`` (two equations joined by spacing or "and") -> two parts."""
    if len(split_relations(p, frozenset({"="}))[0]) < 3 or not _QUAD_SPLIT.search(p):
        return [p]
    pieces = [x.strip() for x in _QUAD_SPLIT.split(p) if x.strip().strip(",;")]
    if len(pieces) > 1 and all("=" in x for x in pieces):
        return pieces
    return [p]


LATEX_OPENERS = ("\\{", "\\lbrace", "\\langle", "(", "[", "{")
"""Tokens that open a bracket (:func:`latex_tokens`)."""
LATEX_CLOSERS = ("\\}", "\\rbrace", "\\rangle", ")", "]", "}")
"""Tokens that close a bracket (:func:`latex_tokens`)."""
_TOKEN = re.compile(r"\\(?:lbrace|rbrace|langle|rangle)(?![A-Za-z])|\\[{}]|\\[A-Za-z]+|\\.?|[()\[\]{}]|[^\\()\[\]{}]+", re.DOTALL)
_LIST_WORDS = re.compile(
    r"\s*(?:\\(?:text|textrm|mbox|mathrm)\s*\{\s*,?\s*(?:and|or)\s*\}|\\q?quad(?![A-Za-z])|\\(?:lor|vee)(?![A-Za-z])"
    r"|(?<![A-Za-z\\])(?:and|or)(?![A-Za-z]))\s*"
)


def latex_tokens(t: str) -> list[str]:
    r"""``t`` as tokens that tell brackets apart: ``\{``, ``\langle``, control words, brackets, runs of other text.

    Args:
        t: LaTeX text.

    Returns:
        The tokens; joined they give ``t`` back.
    """
    return _TOKEN.findall(t)


def split_top(t: str, pattern: re.Pattern[str]) -> list[str]:
    r"""``t`` split at the matches of ``pattern`` outside every bracket (``\{ \}`` and ``\langle`` count).

    A match at either end of ``t`` does not split.

    Args:
        t: LaTeX text.
        pattern: the separator.

    Returns:
        The stripped pieces (one when nothing splits).
    """
    depth = [0] * (len(t) + 1)
    d = 0
    pos = 0
    for tk in latex_tokens(t):
        if tk in LATEX_CLOSERS:
            d -= 1
        for k in range(pos, pos + len(tk)):
            depth[k] = d
        if tk in LATEX_OPENERS:
            d += 1
        pos += len(tk)
    out, last = [], 0
    for m in pattern.finditer(t):
        if m.start() == 0 or m.end() >= len(t) or depth[m.start()] != 0 or m.start() < last:
            continue
        out.append(t[last : m.start()])
        last = m.end()
    out.append(t[last:])
    return [x.strip() for x in out]


def split_listing(p: str) -> list[str]:
    r"""One part split where it lists answers in words: "and", "or", ``\text{ and }``, ``\quad``, ``\lor``.

    Args:
        p: one part (no top-level comma).

    Returns:
        The non-empty pieces (``[p]`` when it lists nothing).
    """
    out = []
    for x in split_top(p, _LIST_WORDS):
        m = _LIST_WORDS.match(x)
        if m and m.end() < len(x) and (m.start() == 0):
            x = x[m.end() :]  # "1, 2, and 3": the last item after the serial comma
        out.append(x.strip(" ,;"))
    return [x for x in out if x] or [p]


def answer_parts(s: str) -> list[list[str]]:
    r"""The parts one box lists.

    Groups are separated by top-level ``;``, parts within a group by top-level commas; alignment rows
    count as parts and equations joined by ``\quad`` or "and" are two parts. Brackets keep tuples and
    intervals whole.

    Args:
        s: one box.

    Returns:
        One list of parts per group, empty parts dropped. Never raises.
    """
    t = flatten_env(s).strip().rstrip(".")
    out = []
    for g in split_top_level(t, ";"):
        ps = []
        for p in split_top_level(g):
            p = p.strip().rstrip(".")
            if p:
                ps.extend(_split_quad(p))
        if ps:
            out.append(ps)
    return out


def _expand_collective(parts: list[str]) -> list[str]:
    """``^{3}P_{2,1,0}`` -> ``^{3}P_{2}``, ``^{3}P_{1}``, ``^{3}P_{0}``.

    A subscript list names several levels.
    """
    out = []
    for p in parts:
        m = _COLLECTIVE.search(p)
        items = m.group(1).split(",") if m else []
        if m and 1 < len(items) <= 8 and all(0 < len(x.strip()) <= 4 for x in items):
            out.extend(p[: m.start()] + "_{" + x.strip() + "}" + p[m.end() :] for x in items)
        else:
            out.append(p)
    return out


def regroup(preds: list[str], n: int) -> list[str]:
    """Regroup predicted boxes to ``n`` boxes when the model packed several answers into one box.

    Args:
        preds: the predicted boxes.
        n: the number of gold boxes.

    Returns:
        The parts split at top-level commas, else also at top-level semicolons, when that gives ``n``;
        else ``preds`` unchanged.
    """
    if len(preds) == n:
        return preds
    parts = [x for p in preds for x in split_top_level(p.strip().rstrip(".,;")) if x]
    if len(parts) == n:
        return parts
    parts = [y for x in parts for y in split_top_level(x, ";") if y]
    if len(parts) == n:
        return parts
    return preds


# ---------------------------------------------------------------------------------------------
# labels

def _label(p: str) -> tuple[str, str] | None:
    """``(label, value)`` of a part written ``label = value`` whose label is not a number."""
    segs, _ = split_relations(p, frozenset({"="}))
    if len(segs) < 2 or not segs[0] or quantity_candidates(segs[0]):
        return None
    return segs[0], segs[-1]


def _labelled(one: Callable[[str, str], RuleResult], equations: bool, definitions: Definitions | None) -> Callable[[str, str], RuleResult]:
    """Wrap a part rule: when both parts carry labels (``E_1 = ...``), the labels must agree.

    ``E_1 = a, E_2 = b`` never matches ``E_1 = b, E_2 = a``.
    """

    def fn(g: str, p: str) -> RuleResult:
        gl, pl = _label(g), _label(p)
        if not equations and gl is not None and pl is not None and not same_lhs(gl[0], pl[0], definitions=definitions):
            return False, "different label"
        return one(g, p)

    return fn


_MARKUP_RE = re.compile(r"\\(?:hat|vec|mathbf|boldsymbol|bm|widehat|overrightarrow)(?![A-Za-z])")
SUBSCRIPT_RE = re.compile(r"_\{[^{}]*\}|_\\?[A-Za-z0-9]+")


def same_lhs(glhs: str, plhs: str, *, definitions: Definitions | None) -> bool:
    """Whether two left sides are the same: equal normalised strings, or symbolically equal.

    Args:
        glhs: the gold's left side.
        plhs: the prediction's left side.
        definitions: the verification's definitions, or ``None`` (:func:`studybench.verify.comparison.symbolic.latex_equal`).

    Returns:
        Whether they name the same quantity (worker side: may call SymPy).
    """
    if norm_string(glhs) == norm_string(plhs):
        return True
    ok, _ = latex_equal(glhs, plhs, definitions=definitions)
    return ok is True


def labels_compatible(a: str, b: str, *, definitions: Definitions | None) -> bool:
    """Whether two left sides name the same quantity.

    Equal (as strings or symbolically), equal up to vector markup, or equal once the subscripts of the
    one side that has them are dropped (``x_0`` and ``x``; never ``v_{max}`` and ``v_{min}``, never
    ``T_1`` and ``T_2``).

    Args:
        a: one left side.
        b: the other left side.
        definitions: the verification's definitions, or ``None`` (:func:`same_lhs`).

    Returns:
        Whether they are compatible labels.
    """
    if same_lhs(a, b, definitions=definitions):
        return True

    def plain(x: str, drop_sub: bool) -> str:
        t = _MARKUP_RE.sub("", norm_string(x))
        if drop_sub:
            t = SUBSCRIPT_RE.sub("", t)
        return t.replace("{", "").replace("}", "").replace(" ", "")

    sa, sb = bool(SUBSCRIPT_RE.search(norm_string(a))), bool(SUBSCRIPT_RE.search(norm_string(b)))
    if plain(a, False) == plain(b, False):
        return True
    if sa != sb:
        return plain(a, sa) == plain(b, sb)
    return False


def _loose_label(s: str) -> str:
    t = norm_string(s)
    t = SUBSCRIPT_RE.sub("", t)
    t = _MARKUP_RE.sub("", t)
    return t.replace("{", "").replace("}", "").replace(" ", "")


def _ordered_loose(
    golds: list[str], preds: list[str], one: Callable[[str, str], RuleResult], definitions: Definitions | None
) -> RuleResult | None:
    glabels = [_label(g) for g in golds]
    plabels = [_label(p) for p in preds]
    if any(x is None for x in glabels + plabels):
        return None
    gset = sorted(norm_string(x[0]) for x in glabels if x)
    pset = sorted(norm_string(x[0]) for x in plabels if x)
    if gset == pset or len({_loose_label(x[0]) for x in glabels if x}) < len(glabels):
        return None  # the same labels (then they decide) or labels that only subscripts tell apart
    for _g, _p, gl, pl in zip(golds, preds, glabels, plabels, strict=True):
        if gl is None or pl is None or not labels_compatible(gl[0], pl[0], definitions=definitions):
            return None
        ok, why = one(gl[1], pl[1])
        if not ok:
            return None
    return True, f"all {len(golds)} labelled parts match in order"


# ---------------------------------------------------------------------------------------------
# term symbols

_TERM = re.compile(r"^\s*(?:\{\s*\})?\s*\^\s*\{?\s*(\d+)\s*\}?\s*(?:\\mathrm\s*\{\s*)?([SPDFGHIK])\s*\}?\s*_\s*\{?\s*(\d+(?:\s*/\s*2)?)\s*\}?\s*$")
_L_LETTERS = "SPDFGHIK"


def _term_as_quantum_numbers(part: str) -> str | None:
    """A spectroscopic term ``^{2S+1}L_J`` (``{}^{3}P_{2}``) as ``L=1, S=1, J=2``; else None."""
    m = _TERM.match(part)
    if not m:
        return None
    mult = int(m.group(1))
    if mult < 1:
        return None
    s2 = mult - 1  # 2S
    spin = str(s2 // 2) if s2 % 2 == 0 else f"{s2}/2"
    j = m.group(3).replace(" ", "")
    return f"L={_L_LETTERS.index(m.group(2))}, S={spin}, J={j}"


def _terms_to_groups(gg: list[list[str]], pg: list[list[str]]) -> list[list[str]] | None:
    """Prediction term symbols rewritten as groups of quantum numbers.

    Only when the gold lists its states as ``L=.., S=.., J=..`` groups; else ``None``.
    """
    labels = {(_label(x) or ("",))[0].strip() for g in gg for x in g}
    if len(gg) < 1 or not labels or not labels <= {"L", "S", "J"}:
        return None
    flat = [x for g in pg for x in g]
    conv = [_term_as_quantum_numbers(x) for x in flat]
    if not conv or any(c is None for c in conv):
        return None
    return [c.split(", ") for c in conv if c is not None]


# ---------------------------------------------------------------------------------------------
# matching

_PRESCRIPT = re.compile(r"^\s*(?:\{\s*\})?\s*\^")


def set_like(parts: list[str]) -> bool:
    """Whether several answers form a set that may be listed in any order.

    Every part is an equation or a labelled value (``E_1 = ...``), or a state written with a
    pre-superscript (``^{3}P_{2}``, ``^{4}_{2}He``). A list of plain numbers, letters or unlabelled
    expressions is a sequence (parts in order, a ranking).

    Args:
        parts: the answers.

    Returns:
        Whether they form a set (``False`` for no parts).
    """
    if not parts:
        return False
    return all(_label(p) is not None or "=" in split_relations(p, frozenset({"="}))[1] for p in parts) or all(
        _PRESCRIPT.match(p) for p in parts
    )


def match_in_order(golds: list[str], preds: list[str], fn: Callable[[str, str], RuleResult]) -> RuleResult:
    """Match gold and predicted answers position by position.

    Args:
        golds: the gold answers.
        preds: the predicted answers.
        fn: the rule that compares one gold answer with one predicted answer.

    Returns:
        ``(decision, reason)``: ``False`` at the first mismatch (the reason names the position) or for
        different counts, ``None`` when some pair is undecided, else ``True``.
    """
    if len(golds) != len(preds):
        return False, f"expected {len(golds)} answers, got {len(preds)}"
    undecided = False
    for i, (g, p) in enumerate(zip(golds, preds, strict=True)):
        ok, why = fn(g, p)
        if ok is False:
            return False, f"answer {i + 1} of {len(golds)} (in order): {why}"
        if ok is None:
            undecided = True
    return (None, "") if undecided else (True, f"all {len(golds)} answers match in order")


def _bipartite(table: list[list[bool]]) -> bool:
    """Whether a perfect matching exists in a square boolean table (augmenting paths)."""
    n = len(table)
    match_col: list[int] = [-1] * n

    def augment(r: int, seen: list[bool]) -> bool:
        for c in range(n):
            if table[r][c] and not seen[c]:
                seen[c] = True
                if match_col[c] < 0 or augment(match_col[c], seen):
                    match_col[c] = r
                    return True
        return False

    return all(augment(r, [False] * n) for r in range(n))


def match_unordered(golds: list[str], preds: list[str], fn: Callable[[str, str], RuleResult]) -> RuleResult:
    """Order-free matching of equally many gold and predicted answers (a perfect bipartite matching).

    Every gold answer must be matched by a different prediction. The answers in the gold's order are
    tried first.

    Args:
        golds: the gold answers.
        preds: the predicted answers.
        fn: the rule that compares one gold answer with one predicted answer.

    Returns:
        ``(decision, reason)``; ``None`` when only undecided pairs could complete the matching.
    """
    n = len(golds)
    if n != len(preds):
        return False, f"expected {n} answers, got {len(preds)}"
    if n > 1:
        # the common case first: the answers in the gold's order
        diagonal = [fn(g, p) for g, p in zip(golds, preds, strict=True)]
        if all(d[0] is True for d in diagonal):
            return True, f"all {n} answers match"
    table: list[list[RuleResult]] = []
    for g in golds:
        row = []
        for p in preds:
            row.append(fn(g, p))
        table.append(row)
    if _bipartite([[r[0] is True for r in row] for row in table]):
        return True, f"all {n} answers match"
    if _bipartite([[r[0] is not False for r in row] for row in table]):
        return None, ""
    bad = next((i for i, row in enumerate(table) if not any(r[0] for r in row)), None)
    if bad is not None:
        reasons = [r[1] for r in table[bad] if r[1]]
        return False, f"answer {bad + 1} of {n} has no match" + (f" ({reasons[0]})" if reasons else "")
    return False, "answers do not match the gold set"


def compare_parts(
    gold: str, pred: str, one: Callable[[str, str], RuleResult], equations: bool = False, *, definitions: Definitions | None
) -> RuleResult | None:
    """Compare two boxes part by part (:func:`answer_parts`) when the gold lists several answers.

    Groups (``;``) are matched as wholes, order-free; the parts are matched order-free with labels
    respected when both sides form a set (:func:`set_like`) or for equations, else in order; a
    collective subscript (``P_{2,1,0}``) may be written out and spectroscopic terms may stand for
    ``L=, S=, J=`` groups.

    Args:
        gold: one gold box.
        pred: one predicted box.
        one: the rule that compares one gold part with one predicted part.
        equations: the parts are equations (EQ): always order-free, labels compared by ``one``.
        definitions: the verification's definitions, or ``None`` (labels are compared with them).

    Returns:
        ``(decision, reason)``, or ``None`` when the gold is a single answer (the caller compares it
        whole).
    """
    gg, pg = answer_parts(gold), answer_parts(pred)
    terms = _terms_to_groups(gg, pg)
    if terms is not None:
        pg = terms
    gflat = [x for g in gg for x in g]
    pflat = [x for g in pg for x in g]
    if len(gflat) == 1 and len(pflat) > 1 and len(split_listing(gflat[0])) == len(pflat):
        gflat = split_listing(gflat[0])  # a gold listing its answers in words ("8 and 9") against "8, 9"
    if len(gflat) <= 1:
        return None
    fn = _labelled(one, equations, definitions)
    if len(gg) > 1 and len(gg) == len(pg):
        # groups (one state per group: "n=1, l=0; n=2, l=1") must match as wholes
        return match_unordered(
            [";".join(g) for g in gg], [";".join(p) for p in pg],
            lambda a, b: match_unordered(a.split(";"), b.split(";"), fn) if a.count(";") == b.count(";") else (False, "group sizes differ"),
        )
    if len(gflat) != len(pflat):
        gflat, pflat = _expand_collective(gflat), _expand_collective(pflat)
    if len(gflat) != len(pflat):
        # "5 and 6", "x = 2 \text{ or } x = -3": the answers listed in words
        worded = [x for p in pflat for x in split_listing(p)]
        if len(worded) == len(gflat):
            pflat = worded
    if len(gflat) != len(pflat):
        return False, f"expected {len(gflat)} parts, got {len(pflat)}"
    if not (equations or (set_like(gflat) and set_like(pflat))):
        # a list of numbers or plain expressions (or an unlabelled prediction) is read in order
        # (parts (a), (b); a ranking)
        return match_in_order(gflat, pflat, fn)
    res = match_unordered(gflat, pflat, fn)
    if res[0] is False and not equations:
        # labels written differently (\Delta_\psi \hat{x} vs \Delta x): in the gold's order, with
        # labels equal up to subscripts and vector markup, values compared
        ordered = _ordered_loose(gflat, pflat, one, definitions)
        if ordered is not None:
            return ordered
    return res
