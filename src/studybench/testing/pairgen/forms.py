r"""General answer forms for the pair generator: sets, solution lists, tuples, ``\pm``, matrices, intervals, TF / MC.

The real golds hold few of the forms a general math verifier sees, so :func:`general_golds` builds
seeded golds of each form (source ``general``) from exact values: a set of numbers or of tuples, a
list of solution tuples, a single tuple, a value with ``\pm``, values of one label, a matrix or a
vector, a union of intervals. Every value is a SymPy number or a linear expression printed by the
generator itself, so each rewrite is right or wrong by construction.

Transformations (label ``True``): ``set:order`` (elements in another order), ``set:list`` (braces
dropped or added), ``set:words`` (joined by "and" / "or"), ``set:pm`` (``\pm`` written out),
``set:entries`` (one element in an equivalent form), ``tuple:entries`` (entries in equivalent forms),
``matrix:env`` (another environment or delimiters), ``matrix:entries``, ``matrix:vector`` (a vector as
a tuple or a transposed row), ``interval:order``, ``interval:ineq`` (a union as inequalities joined
by "or"), ``interval:builder`` (set-builder notation), ``interval:merge`` (an interval cut into
touching pieces), ``tf:negation`` (``It is not true`` for a false gold), ``tf:lead`` (``No, it does
not hold``), ``mc:gloss`` (``B) 3.2 m/s``), ``mc:lead`` (``I choose B``, ``The correct option is (B).``).

Near misses (label ``False``): ``miss:set-swap`` (two entries of one tuple swapped), ``miss:set-extra``,
``miss:set-drop``, ``miss:set-value``, ``miss:pm-one`` (one value of ``\pm``), ``miss:tuple-order``,
``miss:matrix-entry``, ``miss:matrix-transpose``, ``miss:matrix-shape``, ``miss:interval-bracket``,
``miss:interval-point``, ``miss:tf-double`` (``It is not false``, ``Yes, it does not hold``),
``miss:tf-hedge``, ``miss:mc-two`` (two options named).

Longer than 600 lines because the golds, the readers of their printed forms and the transformations
are one generator: every transformation reads back what the gold builder printed (the private
``_elements`` / ``_value_of`` readers) and draws from the same value pool, and the one table
:data:`FORMS` fixes the order in which the seeded pairs are generated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from random import Random

import sympy as sp

from studybench.testing.pairgen.base import Candidate, Slot, Transformation, norm_ws
from studybench.testing.pairgen.golds import Gold

__all__ = ["FORMS", "GENERAL_KINDS", "general_golds"]

_X = sp.Symbol("x")
_A = sp.Symbol("a")


# ------------------------------------------------------------------------------------ values

def _tex(v: sp.Expr) -> str:
    """The canonical print of one generated value."""
    return sp.latex(v)


def _variants(v: sp.Expr, rng: Random) -> list[str]:
    """Equivalent prints of a value, computed from its exact form (never its canonical print)."""
    out: list[str] = []
    if v.is_Integer:
        n = int(v)
        out += [f"{n}.0", f"\\frac{{{2 * n}}}{{2}}", f"\\dfrac{{{3 * n}}}{{3}}"]
    elif v.is_Rational:
        f = Fraction(int(v.p), int(v.q))
        sign = "-" if f < 0 else ""
        p, q = abs(f.numerator), f.denominator
        out += [f"{sign}\\dfrac{{{p}}}{{{q}}}", f"{sign}\\frac{{{2 * p}}}{{{2 * q}}}", f"{sign}{p}/{q}"]
        if all(d in (2, 5) for d in sp.factorint(q)):
            out.append(str(float(f)))
    elif v.is_Add:
        terms = list(v.as_ordered_terms())
        rev = [sp.latex(t) for t in reversed(terms)]
        out.append(" + ".join(rev).replace("+ -", "- "))
        out.append(f"\\left({sp.latex(v)}\\right)")
    elif v.is_Mul:
        c, rest = v.as_coeff_Mul()
        out.append(f"{sp.latex(c)} \\cdot {sp.latex(rest)}")
        out.append(f"{sp.latex(rest)} \\cdot {sp.latex(c)}")
        if rest.is_Pow and rest.exp == sp.Rational(1, 2):
            out.append(f"\\sqrt{{{sp.latex(c ** 2 * rest.base)}}}")
    elif v.is_Pow and v.exp == sp.Rational(1, 2):
        out += [f"{sp.latex(v.base)}^{{1/2}}", f"\\frac{{{sp.latex(v.base)}}}{{\\sqrt{{{sp.latex(v.base)}}}}}", f"\\sqrt {sp.latex(v.base)}"]
    out = [o for o in out if o and norm_ws(o) != norm_ws(_tex(v))]
    rng.shuffle(out)
    return out


def _miss_value(v: sp.Expr, rng: Random, avoid: list[sp.Expr]) -> sp.Expr | None:
    """A clearly different value (not equal to any value in ``avoid``)."""
    for cand in (v + 1, -v, v + 2, v * 2, v - 3):
        cand = sp.nsimplify(sp.expand(cand))
        if sp.simplify(cand - v) != 0 and all(sp.simplify(cand - a) != 0 for a in avoid):
            return cand
    return None


_POOL: tuple[sp.Expr, ...] = (
    sp.Integer(2), sp.Integer(-3), sp.Integer(5), sp.Integer(0), sp.Integer(7), sp.Integer(-1), sp.Integer(12),
    sp.Rational(1, 2), sp.Rational(-3, 4), sp.Rational(5, 2), sp.Rational(2, 3), sp.Rational(7, 5),
    sp.sqrt(2), 3 * sp.sqrt(5), 1 + sp.sqrt(3), sp.Integer(4) - sp.sqrt(7),
)
_LINEAR: tuple[sp.Expr, ...] = (_X + 1, 2 * _X, 3 - _X, _A + 2 * _X, _X / 2, 2 * _A - 1)


def _pick(rng: Random, n: int, pool: tuple[sp.Expr, ...] = _POOL) -> list[sp.Expr]:
    vals: list[sp.Expr] = []
    while len(vals) < n:
        v = rng.choice(pool)
        if all(sp.simplify(v - w) != 0 for w in vals):
            vals.append(v)
    return vals


# ------------------------------------------------------------------------------------ golds

def _tuple_tex(vals: list[sp.Expr]) -> str:
    return "(" + ", ".join(_tex(v) for v in vals) + ")"


def _matrix_tex(rows: list[list[sp.Expr]], env: str = "pmatrix") -> str:
    body = " \\\\ ".join(" & ".join(_tex(v) for v in r) for r in rows)
    return f"\\begin{{{env}}} {body} \\end{{{env}}}"


def _gold(kind: str, i: int, box: str, at: str = "EX") -> Gold:
    return Gold(gold_id=f"general:{kind}:{i}", source="general", answer=f"\\boxed{{{box}}}", answer_type=at,
                type_sequence="", boxes=(box,))


def _asym_tuple(rng: Random, k: int) -> list[sp.Expr]:
    while True:
        t = _pick(rng, k)
        if len({_tex(v) for v in t}) == k:
            return t


GENERAL_KINDS = ("set", "set-tuples", "solutions", "tuple", "pm", "labelled", "matrix", "vector", "union", "interval")
"""The forms :func:`general_golds` builds, one gold of each per round."""


def general_golds(n: int = 12, seed: int = 0) -> list[Gold]:
    r"""Seeded golds in the general answer forms (``n`` of each kind of :data:`GENERAL_KINDS`).

    Args:
        n: golds per kind.
        seed: the seed of every choice.

    Returns:
        The golds (source ``general``, EX except the intervals, IN), deterministic for a seed.
    """
    rng = Random(f"general|{seed}")
    out: list[Gold] = []
    for i in range(n):
        vals = _pick(rng, rng.choice([2, 3, 4]))
        out.append(_gold("set", i, "\\{" + ", ".join(_tex(v) for v in vals) + "\\}"))
        k = rng.choice([2, 2, 3])
        tups = [_asym_tuple(rng, k) for _ in range(rng.choice([2, 3]))]
        out.append(_gold("set-tuples", i, "\\{" + ", ".join(_tuple_tex(t) for t in tups) + "\\}"))
        tups = [_asym_tuple(rng, 2) for _ in range(rng.choice([2, 3, 4]))]
        out.append(_gold("solutions", i, ", ".join(_tuple_tex(t) for t in tups)))
        t = _asym_tuple(rng, rng.choice([2, 3]))
        label = rng.choice(["", "(x, y) = " if len(t) == 2 else "(x, y, z) = "])
        out.append(_gold("tuple", i, label + _tuple_tex(t)))
        a, b = rng.choice([1, 2, -1, 3]), rng.choice([2, 3, 5, 6, 7])
        c = rng.choice([1, 2, 3])
        root = f"{c if c != 1 else ''}\\sqrt{{{b}}}"
        out.append(_gold("pm", i, rng.choice([f"{a} \\pm {root}", f"x = {a} \\pm {root}", f"\\{{{a} \\pm {root}, {a + 10}\\}}"])))
        vals = _pick(rng, rng.choice([2, 3]))
        out.append(_gold("labelled", i, "x = " + ", ".join(_tex(v) for v in vals)))
        r, cdim = rng.choice([(2, 2), (2, 3), (3, 3), (3, 2)])
        rows = [[rng.choice(_POOL + _LINEAR) for _ in range(cdim)] for _ in range(r)]
        while sp.Matrix(rows) == sp.Matrix(rows).T:
            rows[0][-1] = rows[0][-1] + 1
        out.append(_gold("matrix", i, _matrix_tex(rows, rng.choice(["pmatrix", "bmatrix"]))))
        vec = _asym_tuple(rng, rng.choice([2, 3]))
        out.append(_gold("vector", i, _matrix_tex([[v] for v in vec], rng.choice(["pmatrix", "bmatrix"]))))
        lo, hi = sorted(rng.sample(range(-9, 10), 2))
        point = hi + rng.choice([2, 3])
        form = rng.choice(["outside", "point", "two"])
        if form == "outside":
            box = f"(-\\infty, {lo}) \\cup ({hi}, \\infty)" if rng.random() < 0.5 else f"(-\\infty, {lo}] \\cup [{hi}, \\infty)"
        elif form == "point":
            box = f"[{lo}, {hi}) \\cup \\{{{point}\\}}"
        else:
            box = f"({lo}, {hi}] \\cup ({point}, {point + 4})"
        out.append(_gold("union", i, box, "IN"))
        lo2, hi2 = sorted(rng.sample(range(-9, 10), 2))
        out.append(_gold("interval", i, rng.choice([f"[{lo2}, {hi2}]", f"({lo2}, {hi2}]", f"({lo2}, \\infty)", f"[{lo2}, {hi2})"]), "IN"))
    return out


# ------------------------------------------------------------------------------------ reading the generated forms back

_SETBR = re.compile(r"^\\\{(.*)\\\}$", re.S)


def _top_split(s: str) -> list[str]:
    out, depth, last = [], 0, 0
    i = 0
    while i < len(s):
        c = s[i]
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(s[last:i].strip())
            last = i + 1
        i += 1
    out.append(s[last:].strip())
    return [x for x in out if x]


def _elements(box: str) -> tuple[str, list[str]] | None:
    """``(kind, elements)`` of a generated set / solution list / labelled list."""
    m = _SETBR.match(box.strip())
    if m:
        return "set", _top_split(m.group(1))
    parts = _top_split(box)
    if len(parts) >= 2 and all(p.startswith("(") for p in parts):
        return "solutions", parts
    if len(parts) >= 2 and parts[0].startswith("x = "):
        return "labelled", [parts[0][4:]] + parts[1:]
    return None


def _is_general(slot: Slot) -> bool:
    return slot.gold.source == "general"


def _cand(box: str, why: str, slot: Slot) -> list[Candidate]:
    return [] if norm_ws(box) == norm_ws(slot.box) else [Candidate(box, ("text", why), why)]


# ------------------------------------------------------------------------------------ sets and lists

def _set_order(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or len(el[1]) < 2:
        return []
    kind, items = el
    new = items[1:] + items[:1] if rng.random() < 0.5 else list(reversed(items))
    if kind == "set":
        return _cand("\\{" + ", ".join(new) + "\\}", "elements in another order", slot)
    if kind == "labelled":
        return _cand("x = " + ", ".join(new), "values in another order", slot)
    return _cand(", ".join(new), "solutions in another order", slot)


def _set_list(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or el[0] == "labelled":
        return []
    kind, items = el
    if "\\pm" in slot.box:
        return []
    if kind == "set":
        return _cand(", ".join(rng.sample(items, len(items))), "a set written as a bare list", slot)
    return _cand("\\left\\{" + ", ".join(items) + "\\right\\}", "a solution list written as a set", slot)


def _set_words(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or len(el[1]) < 2 or "\\pm" in slot.box:
        return []
    kind, items = el
    joiner = rng.choice(["\\text{ and }", " \\text{ or } ", " \\quad ", ", \\text{and } "])
    if kind == "labelled":
        return _cand(joiner.join(f"x = {v}" for v in items), "values joined by words", slot)
    if kind == "set":
        items = rng.sample(items, len(items))
    return _cand(", ".join(items[:-1]) + joiner + items[-1] if joiner.startswith(",") else joiner.join(items), "elements joined by words", slot)


_PM_GOLD = re.compile(r"^(x = )?(-?\d+) \\pm (\d*)\\sqrt\{(\d+)\}(?:, (\S+))?$")


def _pm_parts(box: str) -> tuple[str, int, str, str | None] | None:
    b = box.strip()
    braced = _SETBR.match(b)
    inner = braced.group(1) if braced else b
    m = _PM_GOLD.match(inner)
    if not m:
        return None
    root = f"{m.group(3)}\\sqrt{{{m.group(4)}}}"
    return (m.group(1) or ""), int(m.group(2)), root, m.group(5)


def _set_pm(slot: Slot, rng: Random) -> list[Candidate]:
    pm = _pm_parts(slot.box) if _is_general(slot) else None
    if pm is None:
        return []
    label, a, root, extra = pm
    vals = [f"{a} + {root}", f"{a} - {root}"] + ([extra] if extra else [])
    rng.shuffle(vals)
    if label and rng.random() < 0.5:
        return _cand(", ".join(f"x = {v}" for v in vals), "\\pm written out, labelled", slot)
    box = ", ".join(vals) if rng.random() < 0.5 else "\\{" + ", ".join(vals) + "\\}"
    return _cand(box, "\\pm written out", slot)


def _value_of(tex: str) -> sp.Expr | None:
    """The exact value of a generated value print (the generator's own prints only)."""
    for v in _POOL + _LINEAR:
        if norm_ws(_tex(v)) == norm_ws(tex):
            return v
    return None


def _set_entries(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or el[0] != "set" or "(" in slot.box:
        return []
    items = el[1]
    order = list(range(len(items)))
    rng.shuffle(order)
    for k in order:
        v = _value_of(items[k])
        if v is None:
            continue
        variants = _variants(v, rng)
        if variants:
            new = list(items)
            new[k] = variants[0]
            return _cand("\\{" + ", ".join(new) + "\\}", "one element in an equivalent form", slot)
    return []


# ------------------------------------------------------------------------------------ tuples

def _tuple_parts(box: str) -> tuple[str, list[str]] | None:
    m = re.match(r"^(\(x, y(?:, z)?\) = )?\((.*)\)$", box.strip())
    if not m or _elements(box) is not None:
        return None
    items = _top_split(m.group(2))
    return (m.group(1) or ""), items


def _tuple_entries(slot: Slot, rng: Random) -> list[Candidate]:
    tp = _tuple_parts(slot.box) if _is_general(slot) else None
    if tp is None:
        return []
    label, items = tp
    new = []
    for it in items:
        v = _value_of(it)
        var = _variants(v, rng) if v is not None else []
        new.append(var[0] if var and rng.random() < 0.7 else it)
    wrap = rng.choice([("\\left(", "\\right)"), ("(", ")"), ("\\langle ", " \\rangle")])
    return _cand(rng.choice([label, ""]) + wrap[0] + ", ".join(new) + wrap[1], "entries in equivalent forms", slot)


# ------------------------------------------------------------------------------------ matrices

_MAT = re.compile(r"^\\begin\{(pmatrix|bmatrix)\} (.*) \\end\{\1\}$", re.S)


def _matrix_rows(box: str) -> list[list[str]] | None:
    m = _MAT.match(box.strip())
    if not m:
        return None
    return [[c.strip() for c in r.split("&")] for r in m.group(2).split("\\\\")]


def _env(rows: list[list[str]], rng: Random, avoid: str) -> str:
    body = " \\\\ ".join(" & ".join(r) for r in rows)
    cols = "c" * len(rows[0])
    forms = [f"\\begin{{bmatrix}} {body} \\end{{bmatrix}}", f"\\begin{{pmatrix}} {body} \\end{{pmatrix}}",
             f"\\left[\\begin{{array}}{{{cols}}} {body} \\end{{array}}\\right]",
             f"\\left(\\begin{{array}}{{{cols}}} {body} \\\\ \\end{{array}}\\right)",
             "\\begin{pmatrix}" + body.replace(" & ", "&").replace(" \\\\ ", "\\\\") + "\\end{pmatrix}"]
    forms = [f for f in forms if norm_ws(f) != norm_ws(avoid)]
    return rng.choice(forms)


def _matrix_env(slot: Slot, rng: Random) -> list[Candidate]:
    rows = _matrix_rows(slot.box) if _is_general(slot) else None
    return _cand(_env(rows, rng, slot.box), "another matrix environment", slot) if rows else []


def _matrix_entries(slot: Slot, rng: Random) -> list[Candidate]:
    rows = _matrix_rows(slot.box) if _is_general(slot) else None
    if rows is None:
        return []
    new = []
    changed = False
    for r in rows:
        nr = []
        for c in r:
            v = _value_of(c)
            var = _variants(v, rng) if v is not None else []
            if var and rng.random() < 0.5:
                nr.append(var[0])
                changed = True
            else:
                nr.append(c)
        new.append(nr)
    if not changed:
        return []
    return _cand(_env(new, rng, ""), "entries in equivalent forms", slot)


def _matrix_vector(slot: Slot, rng: Random) -> list[Candidate]:
    rows = _matrix_rows(slot.box) if _is_general(slot) else None
    if rows is None or any(len(r) != 1 for r in rows):
        return []
    entries = [r[0] for r in rows]
    form = rng.choice(["tuple", "transpose", "angle"])
    if form == "tuple":
        return _cand("(" + ", ".join(entries) + ")", "a column vector as a tuple", slot)
    if form == "angle":
        return _cand("\\langle " + ", ".join(entries) + " \\rangle", "a column vector in angle brackets", slot)
    return _cand("\\begin{pmatrix} " + " & ".join(entries) + " \\end{pmatrix}^{T}", "a column vector as a transposed row", slot)


# ------------------------------------------------------------------------------------ intervals

_PIECE = re.compile(r"\\cup")


def _pieces(box: str) -> list[str]:
    return [p.strip() for p in _PIECE.split(box)]


def _interval_order(slot: Slot, rng: Random) -> list[Candidate]:
    if not _is_general(slot) or "\\cup" not in slot.box:
        return []
    ps = _pieces(slot.box)
    return _cand(" \\cup ".join(reversed(ps)), "union in another order", slot)


GE = "\\ge"
_IV = re.compile(r"^([(\[])(-\\infty|-?\d+), (\\infty|-?\d+)([)\]])$")


def _as_ineq(piece: str) -> str | None:
    m = _IV.match(piece)
    if m:
        lo, hi = m.group(2), m.group(3)
        lrel = "<" if m.group(1) == "(" else "\\le"
        rrel = "<" if m.group(4) == ")" else "\\le"
        if "infty" in lo and "infty" in hi:
            return None
        if "infty" in lo:
            return f"x {rrel} {hi}"
        if "infty" in hi:
            return f"x {'>' if lrel == '<' else GE} {lo}"
        return f"{lo} {lrel} x {rrel} {hi}"
    pt = re.match(r"^\\\{(-?\d+)\\\}$", piece)
    return f"x = {pt.group(1)}" if pt else None


def _interval_ineq(slot: Slot, rng: Random) -> list[Candidate]:
    if not _is_general(slot):
        return []
    ps = _pieces(slot.box)
    ineqs = [_as_ineq(p) for p in ps]
    if any(q is None for q in ineqs) or any(q.startswith("x = ") for q in ineqs if q):  # points: "or x = 3" is no IN form
        return []
    if len(ps) == 1 and rng.random() < 0.5:
        return _cand(f"x \\in {slot.box}", "membership", slot)
    return _cand(rng.choice([" \\text{ or } ", " \\lor "]).join(q for q in ineqs if q), "a union as inequalities joined by or", slot)


def _interval_builder(slot: Slot, rng: Random) -> list[Candidate]:
    if not _is_general(slot) or "\\cup" in slot.box:
        return []
    q = _as_ineq(slot.box.strip())
    if q is None:
        return []
    return _cand(rng.choice([f"\\{{x \\mid {q}\\}}", f"\\left\\{{x \\in \\mathbb{{R}} : {q}\\right\\}}"]), "set-builder notation", slot)


def _interval_merge(slot: Slot, rng: Random) -> list[Candidate]:
    if not _is_general(slot) or "\\cup" in slot.box:
        return []
    m = _IV.match(slot.box.strip())
    if not m or "infty" in m.group(2) or "infty" in m.group(3) or int(m.group(3)) - int(m.group(2)) < 2:
        return []
    lo, hi = int(m.group(2)), int(m.group(3))
    mid = rng.randint(lo + 1, hi - 1)
    return _cand(f"{m.group(1)}{lo}, {mid}] \\cup [{mid}, {hi}{m.group(4)}", "an interval cut into touching pieces", slot)


# ------------------------------------------------------------------------------------ near misses

def _miss_set_swap(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or el[0] == "labelled" or not all(x.startswith("(") for x in el[1]):
        return []
    kind, items = el
    k = rng.randrange(len(items))
    entries = _top_split(items[k][1:-1])
    i, j = 0, 1
    if entries[i] == entries[j]:
        return []
    entries[i], entries[j] = entries[j], entries[i]
    swapped = "(" + ", ".join(entries) + ")"
    if any(norm_ws(swapped) == norm_ws(x) for x in items):
        return []
    new = list(items)
    new[k] = swapped
    box = ", ".join(new)
    return _cand("\\{" + box + "\\}" if kind == "set" else box, "two entries of one tuple swapped", slot)


def _miss_set_extra(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or "\\pm" in slot.box:
        return []
    kind, items = el
    if items[0].startswith("("):
        extra = "(" + ", ".join(_tex(v) for v in _pick(rng, len(_top_split(items[0][1:-1])))) + ")"
    else:
        vals = [_value_of(x) for x in items]
        extra_v = _miss_value(sp.Integer(99), rng, [v for v in vals if v is not None])
        extra = _tex(extra_v) if extra_v is not None else "99"
    if any(norm_ws(extra) == norm_ws(x) for x in items):
        return []
    new = items + [extra]
    rng.shuffle(new)
    if kind == "set":
        return _cand("\\{" + ", ".join(new) + "\\}", "an extra element", slot)
    if kind == "labelled":
        return _cand("x = " + ", ".join(new), "an extra value", slot)
    return _cand(", ".join(new), "an extra solution", slot)


def _miss_set_drop(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or len(el[1]) < 2 or "\\pm" in slot.box:
        return []
    kind, items = el
    new = list(items)
    new.pop(rng.randrange(len(new)))
    if kind == "set":
        return _cand("\\{" + ", ".join(new) + "\\}", "an element dropped", slot)
    if kind == "labelled":
        return _cand("x = " + ", ".join(new), "a value dropped", slot)
    return _cand(", ".join(new), "a solution dropped", slot)


def _miss_set_value(slot: Slot, rng: Random) -> list[Candidate]:
    el = _elements(slot.box) if _is_general(slot) else None
    if el is None or "(" in slot.box or "\\pm" in slot.box:
        return []
    kind, items = el
    vals = [_value_of(x) for x in items]
    k = rng.randrange(len(items))
    if vals[k] is None:
        return []
    nv = _miss_value(vals[k], rng, [v for v in vals if v is not None])
    if nv is None:
        return []
    new = list(items)
    new[k] = _tex(nv)
    return _cand("\\{" + ", ".join(new) + "\\}" if kind == "set" else "x = " + ", ".join(new), "one value changed", slot)


def _miss_pm_one(slot: Slot, rng: Random) -> list[Candidate]:
    pm = _pm_parts(slot.box) if _is_general(slot) else None
    if pm is None:
        return []
    label, a, root, extra = pm
    one = f"{a} {rng.choice(['+', '-'])} {root}"
    if extra:
        return _cand("\\{" + f"{one}, {extra}" + "\\}", "one value of \\pm only", slot)
    other = f"{a + 1} + {root}"  # two values, one of them wrong
    return _cand(rng.choice([f"{one}, {other}", f"{other}, {one}"]), "one value of \\pm and a wrong one", slot)


def _miss_tuple_order(slot: Slot, rng: Random) -> list[Candidate]:
    tp = _tuple_parts(slot.box) if _is_general(slot) else None
    if tp is None:
        return []
    label, items = tp
    new = items[1:] + items[:1]
    return _cand(label + "(" + ", ".join(new) + ")", "tuple entries in another order", slot)


def _miss_matrix_entry(slot: Slot, rng: Random) -> list[Candidate]:
    rows = _matrix_rows(slot.box) if _is_general(slot) else None
    if rows is None:
        return []
    cells = [(i, j) for i in range(len(rows)) for j in range(len(rows[0]))]
    rng.shuffle(cells)
    for i, j in cells:
        v = _value_of(rows[i][j])
        if v is None:
            continue
        nv = _miss_value(v, rng, [])
        if nv is None:
            continue
        new = [list(r) for r in rows]
        new[i][j] = _tex(nv)
        return _cand(_env(new, rng, ""), "one entry changed", slot)
    return []


def _miss_matrix_transpose(slot: Slot, rng: Random) -> list[Candidate]:
    rows = _matrix_rows(slot.box) if _is_general(slot) else None
    if rows is None or len(rows) != len(rows[0]):
        return []
    t = [list(c) for c in zip(*rows, strict=True)]
    if t == rows:
        return []
    return _cand(_env(t, rng, ""), "the transpose", slot)


def _miss_matrix_shape(slot: Slot, rng: Random) -> list[Candidate]:
    rows = _matrix_rows(slot.box) if _is_general(slot) else None
    if rows is None or len(rows) < 2:
        return []
    if len(rows[0]) == 1:  # a column vector as a row: another shape
        return _cand("\\begin{pmatrix} " + " & ".join(r[0] for r in rows) + " \\end{pmatrix}", "a column vector as a row", slot)
    return _cand(_env(rows[:-1], rng, ""), "a row dropped", slot)


_FLIP = {"(": "[", "[": "(", ")": "]", "]": ")"}


def _miss_interval_bracket(slot: Slot, rng: Random) -> list[Candidate]:
    if not _is_general(slot) or "\\cup" not in slot.box:
        return []
    ps = _pieces(slot.box)
    order = list(range(len(ps)))
    rng.shuffle(order)
    for k in order:
        m = _IV.match(ps[k])
        if not m:
            continue
        if "infty" not in m.group(2) and not (k > 0 and _IV.match(ps[k - 1])):
            ps[k] = _FLIP[m.group(1)] + ps[k][1:]
        elif "infty" not in m.group(3):
            ps[k] = ps[k][:-1] + _FLIP[m.group(4)]
        else:
            continue
        return _cand(" \\cup ".join(ps), "one finite bracket of a union flipped", slot)
    return []


def _miss_interval_point(slot: Slot, rng: Random) -> list[Candidate]:
    if not _is_general(slot) or "\\cup" not in slot.box:
        return []
    ps = _pieces(slot.box)
    if any(p.startswith("\\{") for p in ps):
        return _cand(" \\cup ".join(p for p in ps if not p.startswith("\\{")), "the isolated point dropped", slot)
    m = _IV.match(ps[-1])
    if not m or "infty" in m.group(2):
        return []
    ps[-1] = f"{m.group(1)}{int(m.group(2)) + 1}, {m.group(3)}{m.group(4)}"
    return _cand(" \\cup ".join(ps), "an end point moved", slot)


# ------------------------------------------------------------------------------------ TF / MC

def _truth(box: str) -> bool | None:
    from studybench.testing.pairgen.text import truth_value

    return truth_value(box)


def _letter(box: str) -> str | None:
    w = re.sub(r"^\\(?:text|mathrm|textbf)\s*\{(.*)\}$", r"\1", box.strip())
    m = re.fullmatch(r"\(?\s*([A-Ha-h])\s*\)?\.?", w.strip())
    return m.group(1) if m else None


_TF_NEG = {True: ["\\text{It is not false}", "\\text{not false}", "\\text{Yes, it does not hold}", "\\text{It is not wrong}"],
           False: ["\\text{It is not false}", "\\text{not wrong}", "\\text{No, it holds}", "\\text{It is not incorrect}"]}


def _tf_negation(slot: Slot, rng: Random) -> list[Candidate]:
    v = _truth(slot.box)
    if v is not False:
        return []
    return _cand(rng.choice(["\\text{It is not true}", "\\text{not true}", "\\text{The statement is not correct.}",
                             "\\text{That claim does not hold}", "\\text{It isn't true.}"]), "a negated true word", slot)


def _tf_lead(slot: Slot, rng: Random) -> list[Candidate]:
    v = _truth(slot.box)
    if v is None:
        return []
    pool = (["\\text{Yes, it holds}", "\\text{Yes, it does.}", "\\text{Yes, the statement is true.}", "\\text{True, it holds.}"]
            if v else ["\\text{No, it does not hold}", "\\text{No, it doesn't.}", "\\text{No, that claim is false.}",
                       "\\text{False: it does not hold.}"])
    return _cand(rng.choice(pool), "a truth value leading a sentence that agrees", slot)


def _miss_tf_double(slot: Slot, rng: Random) -> list[Candidate]:
    v = _truth(slot.box)
    if v is None:
        return []
    return _cand(rng.choice(_TF_NEG[v]), "a double negation or a contradiction (no single truth value)", slot)


def _miss_tf_hedge(slot: Slot, rng: Random) -> list[Candidate]:
    v = _truth(slot.box)
    if v is None:
        return []
    word = "True" if v else "False"
    return _cand(rng.choice([f"\\text{{{word}, but only for small angles}}", f"\\text{{{word} and false}}",
                             f"\\text{{Probably {word.lower()}}}", f"\\text{{{word}, except at the ends}}"]),
                 "a qualified truth value", slot)


def _mc_gloss(slot: Slot, rng: Random) -> list[Candidate]:
    letter = _letter(slot.box)
    if letter is None:
        return []
    return _cand(rng.choice([f"{letter}) 3.2\\ \\mathrm{{m/s}}", f"\\text{{({letter}) the second option}}",
                             f"\\text{{{letter}: 3.2 m/s}}", f"\\text{{The answer is {letter}, 3.2 m/s}}"]),
                 "a letter with its option text", slot)


def _mc_lead(slot: Slot, rng: Random) -> list[Candidate]:
    letter = _letter(slot.box)
    if letter is None:
        return []
    return _cand(rng.choice([f"\\text{{I choose {letter}}}", f"\\text{{The correct option is ({letter}).}}",
                             f"\\text{{Answer: {letter}}}", f"\\textbf{{({letter})}}", f"\\text{{Option {letter} is correct}}",
                             f"\\text{{The answer is option {letter}.}}"]), "a letter inside a sentence", slot)


def _miss_mc_two(slot: Slot, rng: Random) -> list[Candidate]:
    letter = _letter(slot.box)
    if letter is None:
        return []
    up = letter.upper()
    other = "ABCD"[("ABCD".index(up) + rng.choice([1, 2, 3])) % 4] if up in "ABCD" else "A"
    if letter.islower():
        other = other.lower()
    return _cand(rng.choice([f"\\text{{{letter} and {other}}}", f"\\text{{({letter}) or ({other})}}", f"\\text{{Either {letter} or {other}}}",
                             f"\\text{{{other}, {letter}}}", f"\\text{{{letter} (or possibly {other})}}", f"\\text{{{letter}/{other}}}"]),
                 "two options named", slot)


def _t(name: str, family: str, label: bool, types: str, fn: Callable[[Slot, Random], list[Candidate]], doc: str) -> Transformation:
    return Transformation(name, family, label, frozenset(types.split(",")), fn, doc)


FORMS: tuple[Transformation, ...] = (
    _t("set:order", "form", True, "EX", _set_order, "set elements / solutions / values of one label in another order"),
    _t("set:list", "form", True, "EX", _set_list, "a set as a bare list, a solution list as a set"),
    _t("set:words", "form", True, "EX", _set_words, "elements joined by and / or / \\quad"),
    _t("set:pm", "form", True, "EX", _set_pm, "\\pm written out as both values"),
    _t("set:entries", "form", True, "EX", _set_entries, "one set element in an equivalent form"),
    _t("tuple:entries", "form", True, "EX", _tuple_entries, "tuple entries in equivalent forms, other brackets"),
    _t("matrix:env", "form", True, "EX", _matrix_env, "another matrix environment or delimiters"),
    _t("matrix:entries", "form", True, "EX", _matrix_entries, "matrix entries in equivalent forms"),
    _t("matrix:vector", "form", True, "EX", _matrix_vector, "a column vector as a tuple or a transposed row"),
    _t("interval:order", "interval", True, "IN", _interval_order, "the pieces of a union in another order"),
    _t("interval:ineq", "interval", True, "IN", _interval_ineq, "a union as inequalities joined by or; a membership"),
    _t("interval:builder", "interval", True, "IN", _interval_builder, "set-builder notation"),
    _t("interval:merge", "interval", True, "IN", _interval_merge, "an interval cut into touching pieces"),
    _t("tf:negation", "choice", True, "TF", _tf_negation, "a false gold as a negated true word"),
    _t("tf:lead", "choice", True, "TF", _tf_lead, "a truth value leading a sentence that agrees"),
    _t("mc:gloss", "choice", True, "MC", _mc_gloss, "a letter with its option text"),
    _t("mc:lead", "choice", True, "MC", _mc_lead, "a letter inside a sentence"),
    _t("miss:set-swap", "near-miss", False, "EX", _miss_set_swap, "two entries of one tuple of a set swapped"),
    _t("miss:set-extra", "near-miss", False, "EX", _miss_set_extra, "an extra element"),
    _t("miss:set-drop", "near-miss", False, "EX", _miss_set_drop, "an element dropped"),
    _t("miss:set-value", "near-miss", False, "EX", _miss_set_value, "one element changed"),
    _t("miss:pm-one", "near-miss", False, "EX", _miss_pm_one, "one value of \\pm only (with a wrong one)"),
    _t("miss:tuple-order", "near-miss", False, "EX", _miss_tuple_order, "a tuple's entries in another order"),
    _t("miss:matrix-entry", "near-miss", False, "EX", _miss_matrix_entry, "one matrix entry changed"),
    _t("miss:matrix-transpose", "near-miss", False, "EX", _miss_matrix_transpose, "the transpose of a non-symmetric matrix"),
    _t("miss:matrix-shape", "near-miss", False, "EX", _miss_matrix_shape, "a row dropped; a column vector as a row"),
    _t("miss:interval-bracket", "near-miss", False, "IN", _miss_interval_bracket, "one finite bracket of a union flipped"),
    _t("miss:interval-point", "near-miss", False, "IN", _miss_interval_point, "a union's point dropped or an end moved"),
    _t("miss:tf-double", "near-miss", False, "TF", _miss_tf_double, "a double negation or a contradicting sentence"),
    _t("miss:tf-hedge", "near-miss", False, "TF", _miss_tf_hedge, "a qualified truth value"),
    _t("miss:mc-two", "near-miss", False, "MC", _miss_mc_two, "two options named"),
)
"""The general-form, TF and MC transformations, in table order."""
