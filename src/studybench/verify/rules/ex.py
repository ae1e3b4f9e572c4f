r"""EX: symbolic expressions, and reactions / decays written with arrows (docs/protocol.md section 5).

:func:`ex_rule` compares the part after a top-level ``=`` (any link of a chained gold) with the
prediction: plain numbers by the NV rules (:func:`studybench.verify.comparison.numeric.compare_quantities`),
everything else by SymPy equivalence under one alias table (:func:`studybench.verify.comparison.symbolic.latex_equal`).
Around that core: a gold listing several answers is compared part by part
(:func:`studybench.verify.comparison.parts.compare_parts`), a trailing unit is converted by a numeric factor,
words after the formula and stated conditions are compared (:mod:`studybench.verify.reading.prose`), prose
between formulas piece by piece, and a chained prediction must hold at every link.
:func:`reaction_rule` compares reactions and decays (``\to``): the same species per side, any order.
Worker side.
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from studybench.answers import split_top_level
from studybench.records import AnswerType
from studybench.verify.comparison.forms import compare_forms
from studybench.verify.comparison.numeric import compare_quantities
from studybench.verify.comparison.parts import SUBSCRIPT_RE, compare_parts, flatten_env, labels_compatible
from studybench.verify.comparison.relations import chain_rule
from studybench.verify.comparison.series import series_equal
from studybench.verify.comparison.symbolic import latex_equal
from studybench.verify.comparison.vectors import has_vector_markup, vector_equal
from studybench.verify.physics.units import (
    convert_unit,
    hint_unit,
    plain_quantity,
    same_unit,
    split_unit_suffix,
    unit_words,
)
from studybench.verify.reading.latex import (
    bar_to_prime,
    norm_string,
    rhs,
    split_relations,
    tokenize,
    value_link,
    vector_tuple,
)
from studybench.verify.reading.numbers import value_ops
from studybench.verify.reading.prose import (
    prose_after_math,
    prose_equal,
    prose_segments,
    split_conditions,
    trailing_words,
)
from studybench.verify.rules._shared import Context, Rule, expression_gold_check
from studybench.verify.verdict import RuleResult

__all__ = ["RULE", "ex_rule", "reaction_rule"]


def ex_rule(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    r"""EX: symbolic expressions (docs/protocol.md section 5).

    A reaction or decay is compared by :func:`reaction_rule`; a gold listing several answers part by
    part (:func:`studybench.verify.comparison.parts.compare_parts`); a single answer by its right-hand side, NV
    rules for plain numbers and SymPy equivalence otherwise. A trailing unit
    (``(\ldots)\ \mathrm{V}``) is converted to the gold's unit (its own or ``hint``) by a numeric
    factor, or dropped when the gold states none.

    Args:
        gold: one gold box content.
        pred: one predicted box content.
        hint: the unit of a unitless gold (``gold_unit``), or ``None``.
        ctx: the verification's context (its definitions).

    Returns:
        ``(match, reason)``; ``None`` only when SymPy could not decide.
    """
    res = reaction_rule(gold, pred)
    if res is not None:
        return res
    pred = value_link(pred)  # I \to 0, \approx \frac{v}{2}: the value stated
    gold, pred = _bar_value(gold), _bar_value(pred)
    gold, pred = _same_vector_form(gold, pred)
    # sets, solution lists, tuples, \pm, matrices, interval forms (comparison/forms.py)
    res = compare_forms(gold, pred, lambda g, p: _ex_units(g, p, None, ctx), lambda g, p: ctx.full(AnswerType.IN, g, p))
    if res is not None:
        return res
    res = compare_parts(gold, pred, lambda g, p: _ex_units(g, p, None, ctx), definitions=ctx.definitions)
    if res is not None:
        return res
    return _ex_units(flatten_env(gold), flatten_env(pred), hint, ctx)


def _bar_value(s: str) -> str:
    r"""An evaluated derivative as the value (no top-level ``=``) in prime notation: ``\left.\frac{df}{dx}\right|_{x=x_0}`` -> ``f'(x_0)``.

    As a label (``\left.\frac{dv}{dt}\right|_{t=0} = A``) it stays for :func:`_chain_label`.
    """
    if len(split_relations(s, frozenset({"="}))[0]) > 1:
        return s
    return bar_to_prime(s)


def _same_vector_form(gold: str, pred: str) -> tuple[str, str]:
    r"""A column (or row) vector against a tuple: the matrix side written as the tuple ``(a, b, c)``."""
    gv, pv = vector_tuple(gold), vector_tuple(pred)
    if (gv is None) == (pv is None):
        return gold, pred
    other = rhs(pred if gv is not None else gold)
    if "\\begin" in other or len(split_top_level(re.sub(r"^\s*(?:\\left)?\s*\(|\)\s*$", "", other))) < 2:
        return gold, pred
    return (gv, pred) if gv is not None else (gold, pv)


# ---------------------------------------------------------------------------------------------
# reactions and decays

_ARROW = re.compile(
    r"\\(?:to|rightarrow|longrightarrow|xrightarrow\s*(?:\[[^\]]*\])?\s*\{[^{}]*\}|leftrightarrow|longleftrightarrow|rightleftharpoons|rightleftarrows|leftrightarrows)(?![A-Za-z])|->|<->|\u2192|\u21cc|\u2194"
)
_REVERSIBLE = ("leftrightarrow", "rightleftharpoons", "rightleftarrows", "leftrightarrows", "<->", "\u21cc", "\u2194")


def reaction_rule(gold: str, pred: str) -> RuleResult | None:
    r"""A reaction or decay (``\rho^0 \to \pi^+ + \pi^-``), part of the EX rule.

    The same arrow kind (one-way or reversible) and, on each side, the same species with the same
    coefficients in any order, with or without ``+`` (``2\gamma`` = ``\gamma + \gamma``).

    Args:
        gold: one gold box content.
        pred: one predicted box content.

    Returns:
        ``(match, reason)``, or ``None`` when the gold is no reaction.
    """
    gsides = _ARROW.split(gold)
    if len(gsides) < 2:
        return None
    psides = _ARROW.split(pred)
    if len(psides) != len(gsides):
        return False, "not the same reaction steps"
    gk = [any(r in m.group(0) for r in _REVERSIBLE) for m in _ARROW.finditer(gold)]
    pk = [any(r in m.group(0) for r in _REVERSIBLE) for m in _ARROW.finditer(pred)]
    if gk != pk:
        return False, "different arrow (one-way vs reversible)"
    for gs, ps in zip(gsides, psides, strict=True):
        a, b = _side_species(gs), _side_species(ps)
        if a is None or b is None:
            return False, "cannot read the species"
        if a != b:
            return False, "different species"
    return True, "same reaction"


def _side_species(side: str) -> list[str] | None:
    r"""One side of a reaction as a sorted multiset of species.

    Terms separated by top-level ``+`` keep their coefficients (``2H_2 + O_2``: H2, H2, O2; ``H_2O``
    stays one species); a side written without ``+`` (``\pi^+\pi^-``, ``2\gamma``) is read particle by
    particle.
    """
    terms = [t for t in re.split(r"(?<![\^_{])\+(?![}])", norm_string(side)) if t.strip()]
    if len(terms) <= 1:
        atoms = _species(side)
        if atoms is None:
            return None
        out: list[str] = []
        mult = 1
        for a in atoms:
            if a.isdigit():
                mult = int(a) if int(a) < 100 else 1
                continue
            out.extend([a] * mult)
            mult = 1
        return sorted(out)
    result: list[str] = []
    for t in terms:
        m = re.match(r"\s*(\d+)\s*(?:\\,|\\cdot)?\s*(.*)$", t)
        coef, body = (int(m.group(1)), m.group(2)) if m and m.group(2).strip() else (1, t)
        atoms = _species(body)
        if atoms is None or any(a.isdigit() for a in atoms):
            return None
        result.extend(["+".join(atoms)] * min(coef, 100))
    return sorted(result)


def _species(side: str) -> list[str] | None:
    r"""The particles / species of one side of a reaction as a sorted list of normalised atoms.

    ``\pi^{+} + \pi^{-}`` and ``\pi^+\pi^-`` give the same list; a coefficient counts as an atom;
    pre-scripts such as ``^{4}_{2}He`` stay with their symbol. ``None`` when the side has a construct
    that is not a species list.
    """
    toks = tokenize(norm_string(side))
    atoms: list[str] = []
    n = len(toks)

    def script(j: int) -> tuple[str, int]:
        if j < n and toks[j] == "{":
            depth = 0
            for k in range(j, n):
                depth += toks[k] == "{"
                depth -= toks[k] == "}"
                if depth == 0:
                    return "{" + "".join(toks[j + 1 : k]) + "}", k + 1
            return "{" + "".join(toks[j + 1 :]) + "}", n
        return "{" + (toks[j] if j < n else "") + "}", j + 1

    i = 0
    while i < n:
        tk = toks[i]
        if tk in ("+", "\\cdot"):
            i += 1
            continue
        if tk == "{" and i + 1 < n and toks[i + 1] == "}":
            i += 2  # {}^{4}_{2}He
            continue
        pre: list[str] = []
        while i + 1 < n and toks[i] in ("^", "_"):
            op = toks[i]
            g, i = script(i + 1)
            pre.append(op + g)
        if i >= n:
            if pre:
                atoms.append("".join(sorted(pre)))
            break
        tk = toks[i]
        if tk[0].isdigit():
            atoms.append(tk)
            i += 1
            continue
        if tk.startswith("\\") and tk[1:].isalpha():
            if tk in ("\\bar", "\\overline", "\\tilde", "\\mathbf", "\\boldsymbol"):
                g, i = script(i + 1)
                base = ("\\bar" if tk == "\\overline" else tk) + g
            else:
                base = tk
                i += 1
        elif tk.isalpha():
            base = tk
            i += 1
            while tk.isupper() and i < n and toks[i].isalpha() and toks[i].islower() and len(base) < 3:
                base += toks[i]  # an element symbol: He, Li
                i += 1
        else:
            return None
        post: list[str] = []
        while i < n and toks[i] in ("^", "_", "'"):
            if toks[i] == "'":
                base += "'"
                i += 1
                continue
            op = toks[i]
            g, i = script(i + 1)
            post.append(op + g)
        atoms.append("".join(sorted(pre)) + "|" + base + "".join(sorted(post)))
    return sorted(atoms) if atoms else None


# ---------------------------------------------------------------------------------------------
# one answer: words, conditions, prose, units

def _ex_units(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    """One EX answer: words after the formula and conditions first, then :func:`_ex_units_plain`."""
    (g2, gw), (p2, pw) = trailing_words(gold), trailing_words(pred)
    # a unit written as text (3\ \text{kJ}) is no remark: it stays with its value
    (gold, gw) = (gold, "") if gw and unit_words(gw) else (g2, gw)
    (pred, pw) = (pred, "") if pw and unit_words(pw) else (p2, pw)
    if gw and pw and not prose_equal(re.sub(r"[()]", " ", gw), re.sub(r"[()]", " ", pw)):
        return False, "the words after the formula differ (direction, region ...)"
    res = split_conditions(gold, pred)
    if isinstance(res[0], bool):
        return res  # type: ignore[return-value]
    # a gold stating a relation (R \geq \frac{2GM}{c^2}, \lambda \ll d): compared as relations
    rel = chain_rule(res[0], res[1], lambda g, p: _ex_units_body(g, p, hint, ctx))  # type: ignore[arg-type]
    if rel is not None:
        return rel
    return _ex_units_plain(res[0], res[1], hint, ctx)


def _ex_units_plain(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    """One EX answer without words or conditions: prose between formulas piece by piece, else the units."""
    gseg = prose_segments(gold)
    if prose_after_math(gseg):
        # words between formulas ("the omega = 6 mode with vector (4, -3, 0, 1) is absent"): piece by piece
        pseg = prose_segments(pred)
        if len(pseg) != len(gseg) or any(a[0] != b[0] for a, b in zip(gseg, pseg, strict=True)):
            return False, "prose and formulas do not line up with the gold"
        for (is_p, g), (_, p) in zip(gseg, pseg, strict=True):
            if is_p:
                if not prose_equal(g, p):
                    return False, "different words between the formulas"
            else:
                ok, why = _ex_one(g, p, None, ctx)
                if not ok:
                    return False, why
        return True, "formulas and words match piece by piece"
    return _ex_units_body(gold, pred, hint, ctx)


def _ex_units_body(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    """One EX formula: a trailing unit converted to the gold's (its own or the hint) by a factor."""
    if plain_quantity(rhs(pred)) is not None or "\\" not in pred + gold:
        return _ex_one(gold, pred, hint, ctx)
    gbody, gu = split_unit_suffix(gold)
    pbody, pu = split_unit_suffix(pred)
    if not pu:
        return _ex_one(gbody if gu else gold, pred, hint, ctx)
    target = gu or hint_unit(hint)[0]
    if not target:
        return _ex_one(gbody, pbody, None, ctx)
    if same_unit(pu, target):
        return _ex_one(gbody, pbody, None, ctx)
    f = convert_unit(1.0, pu, target)
    if f is None:
        return False, f"unit mismatch ({pu} vs {target})"
    fr = Fraction(f).limit_denominator(10**12)
    ok, why = _ex_one(gbody, f"\\frac{{{fr.numerator}}}{{{fr.denominator}}} \\cdot \\left({pbody}\\right)", None, ctx)
    return ok, why + f" after {pu}->{target}"


# ---------------------------------------------------------------------------------------------
# one formula, chains

def _ex_one(gold: str, pred: str, hint: str | None, ctx: Context) -> RuleResult:
    r"""One EX answer: the gold's right-hand side against the prediction's.

    The right-hand side after a top-level ``=`` (any later part of a chained gold ``a = b = c``) is
    compared with the prediction's last part; plain numbers use NV rules; otherwise SymPy equivalence
    (:func:`studybench.verify.comparison.symbolic.latex_equal`) with one alias table so every symbol must
    correspond, under every reading of brace-less function arguments and the constant identities. A
    chained prediction ``v = \frac{180}{181}c \approx 0.9945c`` matches only when every link it states
    matches.
    """
    segs, _ = split_relations(pred, frozenset({"="}))
    if len(segs) < 2:
        return _ex_link(gold, pred, hint, ctx)
    gsegs, _ = split_relations(gold, frozenset({"="}))
    links = segs[1:] if _chain_label(segs[0], gsegs[0] if len(gsegs) > 1 else "", ctx) else segs
    if len(links) == 1:
        return _ex_link(gold, links[0], hint, ctx)
    # a chain (v = \frac{180}{181}c \approx 0.9945c): every value it states must match the gold
    for k, link in enumerate(links):
        ok, why = _ex_link(gold, link, hint, ctx)
        if not ok:
            return False, f"link {k + 1} of the chain: {why}"
    return True, f"all {len(links)} links of the chain match"


def _chain_label(seg: str, gold_lhs: str, ctx: Context) -> bool:
    r"""Whether the first segment of a chain is a label rather than a value.

    The gold's own left side, a derivative or evaluation bar (``\frac{dr}{dt}``,
    ``\left.f\right|_{t=0}``), or symbols only (``v``, ``\Delta V``, ``c(T)``, ``\mathbf{E}(r)``) - no
    number, sum, fraction or root.
    """
    if not seg.strip():
        return False
    if gold_lhs and labels_compatible(gold_lhs, seg, definitions=ctx.definitions):
        return True
    if re.search(r"\\right\s*\||\\[Bb]ig[gl]?\s*\||\|_\{|\\[dt]?frac\s*\{\s*(?:d|\\partial|\\mathrm\s*\{\s*d)", seg):
        return True
    bare = SUBSCRIPT_RE.sub("", seg)
    return not re.search(r"[0-9+\-]|\\[dt]?frac|\\sqrt|\\cdot|\\times|/", bare)


def _ex_candidates(gold: str) -> list[str]:
    """The values a gold states: every side after a top-level ``=`` (the whole gold without one)."""
    segs, _ = split_relations(gold, frozenset({"="}))
    return [x for x in segs[1:] if x] if len(segs) > 1 else segs


_SERIES_HINT = re.compile(r"\\(?:sum|cdots|ldots|dots)(?![A-Za-z])|\.\.\.")


def _ex_link(gold: str, pr: str, hint: str | None, ctx: Context) -> RuleResult:
    """One link of a prediction against every value the gold states (NV rules, then SymPy)."""
    reason = "not equal"
    for g in _ex_candidates(gold):
        if norm_string(g) == norm_string(pr):
            return True, "same right-hand side"
        gq, pq = plain_quantity(g, value_ops(g)), plain_quantity(pr, value_ops(g))
        hu = hint_unit(hint)[0]
        if gq is not None and hu and not (gq.unit or gq.degrees or gq.percent):
            gq = replace(gq, unit=hu)
        if gq is not None and pq is not None:
            ok, why = compare_quantities(gq, pq)
            if ok:
                return True, why
            reason = why
            continue
        ok, why = latex_equal(g, pr, definitions=ctx.definitions)
        if ok:
            return True, "symbolic match: " + why
        if (has_vector_markup(g) or has_vector_markup(pr)) and vector_equal(g, pr):
            return True, "same vector at sample vectors (cross / dot products, unit vectors)"
        if _SERIES_HINT.search(g + pr) and series_equal(g, pr):
            return True, "same series term by term"
        reason = why
    return False, reason


RULE = Rule(fast=None, full=ex_rule, gold_check=expression_gold_check)
"""EX: the full tier decides (SymPy, units by a numeric factor); the gold check reads every side."""
