r"""General answer forms: sets, lists of solutions, tuples, ``\pm``, matrices (docs/protocol.md section 5, EX).

For users who verify math answers beside physics ones. :func:`compare_forms` recognises the form of a
gold box and compares a prediction in the same form, element by element with the caller's rule for one
value (so the usual equivalences of a value hold inside every form):

* a **set** written with braces (``\{(1,2),(3,4)\}``, ``S = \{-3, 2\}``, ``x \in \{1, 2\}``, ``\emptyset``)
  matches its elements in any order, written as a set or as a bare list (commas, semicolons, "and",
  "or", ``\quad``); repeated elements count once;
* a **list of solution tuples** (``(1,2), (3,4)``: two or more tuples of one length) is a solution set
  too: any order. A single tuple, and the entries of every tuple, stay in order;
* a value with **one** ``\pm`` / ``\mp`` (``1 \pm \sqrt{3}``, ``\{1 \pm \sqrt{5}, -2\}``) stands for both
  values when the prediction lists several (``1+\sqrt3, 1-\sqrt3``); a single predicted value is left to
  the caller (physics golds use ``\pm`` for either sign);
* values of one **label** (``x = 2, -3``; ``x = 2, x = -3``) are a set: any order, the label optional;
* a **tuple** (``(1, \frac{3}{2})``, ``(p, q) = (3, 2)``, ``\langle 1, 2\rangle``) entry by entry, in order;
* a **matrix** (:mod:`studybench.verify.comparison.matrices`) entry by entry;
* an **interval** form (a union, mixed brackets, an infinite end, set-builder notation, ``\mathbb{R}``,
  a membership) is handed to the caller's interval rule.

Anything else gives ``None`` and the caller compares as before. Pure string work.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from studybench.answers import split_top_level
from studybench.verify.comparison.matrices import compare_matrices, has_matrix, read_matrix
from studybench.verify.comparison.parts import (
    LATEX_CLOSERS,
    LATEX_OPENERS,
    latex_tokens,
    match_in_order,
    match_unordered,
    split_listing,
    split_top,
)
from studybench.verify.reading.latex import norm_string, split_relations, states_inequality
from studybench.verify.verdict import RuleResult

__all__ = ["compare_forms", "expand_pm", "interval_like", "interval_pair", "list_items", "read_set", "read_tuple"]

_SIZING = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|big|Big|bigg|Bigg)(?![A-Za-z])\s*")
_EMPTY = re.compile(r"\s*(?:\\emptyset|\\varnothing|\\O|\\\{\s*\\\}|\\lbrace\s*\\rbrace|\\text\s*\{\s*\\O\s*\})\s*")
_PM = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")
_SERIES = re.compile(r"\\(?:ldots|cdots|dots|dotsc)(?![A-Za-z])|\.\.\.")
_BUILDER = re.compile(r"\\mid(?![A-Za-z])|\\vert(?![A-Za-z])|\||:")
_INEQ = re.compile(r"\\(?:le|ge|leq|geq|leqslant|geqslant|lt|gt)(?![A-Za-z])|[<>]")
_MEMBER = re.compile(r"\\in(?![A-Za-z])")

One = Callable[[str, str], RuleResult]


def _clean(s: str) -> str:
    t = s.replace("$", "").strip()
    t = _SIZING.sub("", t)
    t = re.sub(r"\\(?:displaystyle|textstyle)(?![A-Za-z])", "", t)
    return re.sub(r"[\s.]+$", "", t) if not t.endswith("\\.") else t


def _one_pair(toks: list[str], opens: tuple[str, ...], closes: tuple[str, ...]) -> bool:
    """Whether the tokens are one bracket pair, opening with one of ``opens`` and closing with one of ``closes``."""
    if len(toks) < 2 or toks[0] not in opens or toks[-1] not in closes:
        return False
    depth = 0
    for i, tk in enumerate(toks):
        if tk in LATEX_OPENERS:
            depth += 1
        elif tk in LATEX_CLOSERS:
            depth -= 1
            if depth == 0 and i != len(toks) - 1:
                return False
    return depth == 0


def _wrapped(t: str, opens: tuple[str, ...], closes: tuple[str, ...]) -> str | None:
    """The inside of ``t`` when all of it is one bracket pair opening with one of ``opens``."""
    toks = latex_tokens(t.strip())
    return "".join(toks[1:-1]) if _one_pair(toks, opens, closes) else None


def list_items(s: str) -> list[str]:
    r"""The items a box lists: top-level commas (else semicolons), "and", "or", ``\quad``.

    Args:
        s: one box (LaTeX).

    Returns:
        The non-empty items in order (one item when the box lists nothing).
    """
    t = _clean(s)
    parts = [p for p in split_top_level(t) if p.strip()]
    if len(parts) < 2:
        parts = [p for p in split_top_level(t, ";") if p.strip()]
    out = [x for p in parts for x in split_listing(p)]
    return out or [t]


def read_set(s: str) -> list[str] | None:
    r"""The elements of a set written with braces, or ``None``.

    ``\{a, b\}``, ``\left\{ a; b \right\}``, ``\lbrace a, b\rbrace``, ``S = \{a, b\}``, ``x \in \{a, b\}``;
    ``\emptyset`` / ``\varnothing`` / ``\{\}`` give ``[]``. Set-builder notation (``\{x \mid x > 2\}``) is no
    element list (``None``).

    Args:
        s: one box (LaTeX).

    Returns:
        The elements in written order, or ``None``.
    """
    if not isinstance(s, str) or len(s) > 5000:
        return None
    t = _strip_label(_clean(s))
    if _EMPTY.fullmatch(t):
        return []
    inner = _wrapped(t, ("\\{", "\\lbrace"), ("\\}", "\\rbrace"))
    if inner is None:
        return None
    if len(split_top(inner, _BUILDER)) > 1:
        return None
    items = [x.strip() for x in split_top_level(inner) if x.strip()]
    if len(items) < 2:
        items = [x.strip() for x in split_top_level(inner, ";") if x.strip()]
    return items


def _strip_label(t: str) -> str:
    r"""``S = \{..\}``, ``(x, y) = (1, 2)``, ``x \in \{..\}``: the part after the last top-level ``=`` or ``\in``."""
    for pat in (re.compile(r"(?<![<>!\\])=(?!=)"), _MEMBER):
        segs = split_top(t, pat)
        if len(segs) > 1 and segs[-1]:
            last = segs[-1]
            if _wrapped(last, ("\\{", "\\lbrace", "(", "\\langle"), LATEX_CLOSERS) is not None or _EMPTY.fullmatch(last):
                return last
    return t


def read_tuple(s: str) -> list[str] | None:
    r"""The entries of a tuple: ``(a, b)``, ``\left(a, b\right)``, ``\langle a, b\rangle``, ``(p, q) = (a, b)``.

    Args:
        s: one box or one list item (LaTeX).

    Returns:
        Two or more entries in order, or ``None`` (a single value, an interval such as ``[0, 1)``).
    """
    if not isinstance(s, str) or len(s) > 3000:
        return None
    t = _strip_label(_clean(s))
    inner = _wrapped(t, ("(", "\\langle"), (")", "\\rangle"))
    if inner is None:
        vec = read_matrix(s)
        if vec is not None and not vec.det and (vec.shape[0] == 1 or vec.shape[1] == 1) and len(vec.entries) > 1:
            return vec.entries
        return None
    entries = [e.strip() for e in split_top_level(inner)]
    if len(entries) < 2:
        entries = [e.strip() for e in split_top_level(inner, ";")]  # (3; 5; 1)
    if len(entries) < 2 or any(not e for e in entries):
        return None
    return entries


def expand_pm(item: str) -> list[str]:
    r"""A value with one ``\pm`` or ``\mp`` as its two values (``1 \pm \sqrt3`` -> ``1 + \sqrt3``, ``1 - \sqrt3``).

    Args:
        item: one value (LaTeX).

    Returns:
        The two values, or ``[item]`` when it has no ``\pm`` / ``\mp`` or more than one.
    """
    ms = list(_PM.finditer(item))
    if len(ms) != 1:
        return [item]
    m = ms[0]
    a, b = ("+", "-") if "pm" in m.group(0) else ("-", "+")
    return [item[: m.start()] + a + item[m.end() :], item[: m.start()] + b + item[m.end() :]]


def interval_like(gold: str, pred: str) -> bool:
    r"""Whether a gold (with its prediction) is an interval form for the IN rule.

    A union or difference of sets, ``\mathbb{R}``, set-builder notation, a membership ``x \in ...``, an
    interval with mixed brackets or an infinite end; ``[a, b]`` or ``(a, b)`` when the prediction is
    one of those forms or an inequality.

    Args:
        gold: one gold box.
        pred: one predicted box.

    Returns:
        Whether the IN rule should compare them.
    """

    def strong(s: str) -> bool:
        t = _clean(s)
        if re.search(r"\\(?:cup|setminus|mathbb\s*\{?\s*R)(?![A-Za-z])", t):
            return True
        if _MEMBER.search(t) and read_set(t) is None and read_tuple(t) is None:
            return True
        inner = _wrapped(t, ("\\{", "\\lbrace"), ("\\}", "\\rbrace"))
        if inner is not None and len(split_top(inner, _BUILDER)) > 1:
            return True
        pair = interval_pair(t)
        return pair is not None and (pair[0] != pair[1] or "infty" in t)

    if strong(gold):
        return True
    if states_inequality(gold) and "=" not in gold and (strong(pred) or interval_pair(pred) is not None):
        return True  # -3 \le x \le 8 against x \in [-3, 8] or [-3, 8]
    return interval_pair(gold) is not None and (strong(pred) or (_INEQ.search(pred) is not None and "=" not in pred))


def interval_pair(t: str) -> tuple[bool, bool, str, str] | None:
    """``(left open, right open, low, high)`` of a two-entry bracket pair such as ``[a, b)``, else ``None``.

    Args:
        t: one box or piece (LaTeX).

    Returns:
        The brackets and the two end texts, or ``None``.
    """
    toks = latex_tokens(_clean(t))
    if not _one_pair(toks, ("(", "["), (")", "]")):
        return None
    parts = split_top_level("".join(toks[1:-1]))
    if len(parts) != 2 or not all(p.strip() for p in parts):
        return None
    return toks[0] == "(", toks[-1] == ")", parts[0].strip(), parts[1].strip()


def _label_of(item: str) -> tuple[str, str] | None:
    segs, _ = split_relations(item, frozenset({"="}))
    if len(segs) != 2 or not segs[0].strip() or not segs[1].strip() or re.fullmatch(r"\s*[-+]?\d[\d.]*\s*", segs[0]):
        return None
    return norm_string(segs[0]), segs[1].strip()


def _labelled_values(items: list[str]) -> tuple[str, list[str]] | None:
    """``x = 2, -3`` or ``x = 2, x = -3``: the one label and its values."""
    first = _label_of(items[0])
    if first is None or "(" in first[0] and "," in first[0]:
        return None
    values = [first[1]]
    for it in items[1:]:
        lab = _label_of(it)
        if lab is None:
            if "=" in it or _INEQ.search(it):
                return None
            values.append(it)
        elif lab[0] != first[0]:
            return None
        else:
            values.append(lab[1])
    return first[0], values


def _label_groups(s: str, labels: list[str] | None = None) -> tuple[list[str], list[str]] | None:
    """``p = 3, q = 2; p = 5, q = 2``: the labels and one tuple per group, the values in the labels' order.

    With ``labels`` (the gold's), the groups must name exactly those labels (in any order).
    """
    groups = [g for g in split_top_level(_clean(s), ";") if g.strip()]
    if len(groups) < 2 or len(groups) > 50:
        return None
    out = []
    for g in groups:
        pairs = [_label_of(x) for x in split_top_level(g) if x.strip()]
        if len(pairs) < 2 or any(p is None for p in pairs):
            return None
        names = [p[0] for p in pairs if p]
        if len(set(names)) != len(names):
            return None
        if labels is None:
            labels = names
        if sorted(names) != sorted(labels):
            return None
        vals = dict(p for p in pairs if p)
        out.append("(" + ", ".join(vals[k] for k in labels) + ")")
    return labels or [], out


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for x in items:
        k = norm_string(x)
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out


def _element_rule(one: One) -> One:
    """One element of a set: tuples entry by entry in order, anything else by ``one``."""

    def fn(g: str, p: str) -> RuleResult:
        gt, pt = read_tuple(g), read_tuple(p)
        if gt is None and pt is None:
            return one(g, p)
        if gt is None or pt is None:
            return False, "a tuple against a single value"
        if len(gt) != len(pt):
            return False, f"tuples of {len(pt)} vs {len(gt)} entries"
        res = match_in_order(gt, pt, one)
        return res if res[0] is not True else (True, f"same {len(gt)}-tuple")

    return fn


def _pred_elements(pred: str, label: str | None) -> list[str]:
    r"""A prediction's elements: a braced set, else its listed items; a stated label dropped; ``\pm`` expanded."""
    st = read_set(pred)
    items = st if st is not None else list_items(pred)
    out = []
    for it in items:
        lab = _label_of(it)
        if lab is not None and (label is None or lab[0] == label or "," in lab[0]):
            it = lab[1]
        out.extend(expand_pm(it))
    return _dedupe(out)


def compare_forms(gold: str, pred: str, one: One, interval: One | None = None) -> RuleResult | None:
    r"""Compare a gold written in a general answer form (see the module docstring) with a prediction.

    Args:
        gold: one gold box.
        pred: one predicted box.
        one: the rule that compares one gold value with one predicted value.
        interval: the rule for interval forms (the IN rule), or ``None`` to leave them to the caller.

    Returns:
        ``(decision, reason)``, or ``None`` when the gold is in none of these forms (or the prediction
        cannot be read in the gold's form and the caller's own comparison should decide).
    """
    if not isinstance(gold, str) or not isinstance(pred, str) or len(gold) + len(pred) > 8000:
        return None
    if has_matrix(gold):
        return compare_matrices(gold, pred, one)
    if interval is not None and interval_like(gold, pred):
        return interval(gold, pred)
    if _SERIES.search(gold):
        return None
    elem = _element_rule(one)
    groups = _label_groups(gold)
    if groups is not None:
        labels, gtuples = groups
        ptuples = _label_groups(pred, labels)
        preds = ptuples[1] if ptuples is not None else _pred_elements(pred, None)
        res = match_unordered(gtuples, preds, elem)
        return (True, f"same {len(gtuples)} solutions ({', '.join(labels)}; any order)") if res[0] is True else res
    gset = read_set(gold)
    if gset is not None:
        golds = _dedupe([v for x in gset for v in expand_pm(x)])
        if not golds:
            return (True, "the empty set") if read_set(pred) == [] else (False, "the gold is the empty set")
        preds = _pred_elements(pred, None)
        if read_set(pred) is None and len(preds) == 1 and len(golds) == 1:
            return None  # \{a\} against a: the caller decides
        res = match_unordered(golds, preds, elem)
        return (True, f"same set of {len(golds)} elements (any order)") if res[0] is True else res
    items = list_items(gold)
    tuples = [read_tuple(x) for x in items]
    if len(items) >= 2 and all(t is not None for t in tuples) and len({len(t) for t in tuples if t}) == 1:
        preds = _pred_elements(pred, None)
        res = match_unordered(_dedupe(items), preds, elem)
        return (True, f"same {len(items)} solutions (any order)") if res[0] is True else res
    lv = _labelled_values(items) if len(items) >= 2 else None
    if lv is not None:
        label, values = lv
        golds = _dedupe([v for x in values for v in expand_pm(x)])
        preds = _pred_elements(pred, label)
        if len(preds) < 2:
            return None
        res = match_unordered(golds, preds, elem)
        return (True, f"same {len(golds)} values of {label} (any order)") if res[0] is True else res
    expanded = [v for x in items for v in expand_pm(x)]
    if len(expanded) > len(items) and not any(_label_of(x) for x in items[1:]):
        labelled = _label_of(items[0]) if len(items) == 1 else None
        label = labelled[0] if labelled else None
        golds = _dedupe([v for x in ([labelled[1]] if labelled else items) for v in expand_pm(x)])
        preds = _pred_elements(pred, label)
        if len(preds) < 2:
            return None  # a single value against a \pm gold: the caller's rule (either sign, as before)
        res = match_unordered(golds, preds, elem)
        return (True, f"both values of \\pm ({len(golds)} in all, any order)") if res[0] is True else res
    if len(items) == 1:
        gt = read_tuple(gold)
        if gt is not None:
            pt = read_tuple(pred)
            if pt is None:
                return None
            return elem(gold, pred) if len(gt) == len(pt) else (False, f"tuples of {len(pt)} vs {len(gt)} entries")
    return None
