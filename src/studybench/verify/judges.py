"""One judge per answer type, dispatched by answer_type / type_sequence (PROTOCOL.md section 5).

Two tiers share the same dispatch (:func:`combine`):

* :func:`fast_slot` - cheap, in-process, string-level: normalised string equality for every type,
  MC letters, TF synonyms, QL normalised text. Returns ``True`` / ``False`` when it can decide and
  ``None`` when symbolic or numeric work is needed.
* :func:`full_slot` - the complete per-type judges (:func:`judge_nv`, :func:`judge_ex`,
  :func:`judge_eq`, :func:`judge_in`, :func:`judge_ql`, ...). These may call SymPy and are meant to run
  inside a sandbox worker (:mod:`studybench.verify.sandbox`) under a hard timeout.

Compound answers: TUP is slot-wise in ``type_sequence`` order (a single predicted box holding all
slots is split at top-level commas); ALT accepts any predicted box that matches any gold alternative
(an alternative typed TUP is compared as a whole box); atomic types with several gold boxes are
matched order-free.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from studybench.answers import split_top_level
from studybench.records import AnswerType, parse_type_sequence
from studybench.verify.identities import reconcile
from studybench.verify.latex import (
    MAX_SYMBOLIC_LEN,
    LatexError,
    new_aliases,
    norm_string,
    norm_text,
    split_relations,
    to_sympy,
    to_sympy_readings,
)
from studybench.verify.quantity import (
    Quantity,
    close_enough,
    convert_unit,
    is_unit,
    quantity_candidates,
    same_unit,
)
from studybench.verify.verdict import Verdict

__all__ = [
    "SlotFn",
    "check_gold_parsable_local",
    "combine",
    "fast_judge",
    "fast_slot",
    "full_judge",
    "full_slot",
    "judge_eq",
    "judge_ex",
    "judge_in",
    "judge_mc",
    "judge_nv",
    "judge_ql",
    "judge_tf",
    "normalise_types",
]

SlotResult = tuple[bool | None, str]
"""(decision, reason): decision ``None`` means undecided (needs the full tier)."""
SlotFn = Callable[[str, str, AnswerType, "str | None"], SlotResult]


# ---------------------------------------------------------------------------------------------
# type handling


def normalise_types(
    answer_type: AnswerType | str, type_sequence: Sequence[AnswerType] | str | None
) -> tuple[AnswerType, list[AnswerType]]:
    """Parse ``answer_type`` and ``type_sequence`` (string or list). Raises ValueError."""
    at = answer_type if isinstance(answer_type, AnswerType) else AnswerType(str(answer_type).strip().upper())
    if isinstance(type_sequence, str) or type_sequence is None:
        ts = parse_type_sequence(type_sequence or "")
    else:
        ts = parse_type_sequence([t.value if isinstance(t, AnswerType) else str(t) for t in type_sequence])
    return at, ts


# ---------------------------------------------------------------------------------------------
# MC / TF / QL (string-level, decisive)

_MC_WRAP = re.compile(r"\\(?:text|mathrm|textbf|mathbf|textrm|mbox|textit|mathit|emph|boldsymbol|bm)\s*\{([^{}]*)\}")
_MC_SPACING = re.compile(r"\\(?:,|;|:|!| |quad(?![A-Za-z])|qquad(?![A-Za-z]))|~")
_MC_HEAD = re.compile(r"\(\s*([A-Za-z])\s*\)|\[\s*([A-Za-z])\s*\]|([A-Za-z])(?![A-Za-z0-9])")
_MC_SEP = re.compile(r"\s*[:.)\]-]")
_MC_JOIN = re.compile(r"\s*(?:,|;|/|&|\+|\\&|\b(?:and|or|und|oder|et|ou|y|und/or|and/or)\b)\s*", re.IGNORECASE)
_MC_OTHER = re.compile(r"\(\s*([A-Za-z])\s*\)|([A-Za-z])(?![A-Za-z0-9])")


_MC_NEGATION = re.compile(r"\b(?:incorrect|wrong|not|false|neither|none|also|either|maybe|possibly|plausible|or|and)\b", re.IGNORECASE)


def _mc_letter(s: str) -> str | None:
    """The one option letter a box commits to (:func:`_mc_letter_first`), ``None`` when the box
    also names another option letter (``B (or C)``, ``A is wrong; the answer is C``) or qualifies
    its choice (``A is incorrect``)."""
    letter = _mc_letter_first(s)
    if letter is None or not isinstance(s, str):
        return letter
    t = re.sub(r"\\(?:text|mathrm|textbf|textrm|mbox|emph)\s*\{([^{}]*)\}", r" \1 ", s)
    t = t.replace("$", " ").replace("{", " ").replace("}", " ")
    # other standalone option letters (A-H, either case) anywhere after the choice
    m = re.search(r"(?<![A-Za-z\\])\(?([A-Ha-h])\)?(?![A-Za-z0-9_^'=(])", t)
    rest = t[m.end() :] if m else t
    cls = "A-H" if letter == (m.group(1) if m else letter) else "a-h"
    others = {
        x.upper()
        for x in re.findall(r"(?<![A-Za-z0-9\\_^/*+=-])\(?([" + cls + r"])\)?(?![A-Za-z0-9_^'=(/*+-])", rest)
    }
    if others - {letter}:
        return None
    words = re.sub(r"\\[A-Za-z]+", " ", rest)
    if _MC_NEGATION.search(words) and not re.search(r"[=<>]", rest):
        return None
    return letter


def _mc_letter_first(s: str) -> str | None:
    """The one option letter a box commits to: ``E``, ``(E)``, ``\\text{E}``, ``\\textbf{E}``,
    ``Option E``, ``E: text``, ``E. text``, ``(E) text``. ``None`` when there is none, and when the
    box hedges between options (``A and C``, ``A or B``, ``A, B``, ``A B``, ``(A) (C)``): a second
    standalone letter of the same case right after the first (joined by and / or / a comma / a
    slash / a space, or after a separator) means several options."""
    if not isinstance(s, str) or len(s) > 2000:
        return None
    t = s
    for _ in range(3):
        t2 = _MC_WRAP.sub(r" \1 ", t)
        if t2 == t:
            break
        t = t2
    t = _MC_SPACING.sub(" ", t)
    t = t.replace("$", " ").replace("{", " ").replace("}", " ")
    t = " ".join(t.split())
    t = re.sub(r"^(?:the\s+)?(?:correct\s+)?(?:option|choice|answer)(?:\s+is)?\s*:?\s*", "", t, flags=re.IGNORECASE)
    m = _MC_HEAD.match(t)
    if not m:
        return None
    letter = next(g for g in m.groups() if g)
    rest = t[m.end() :]
    ms = _MC_SEP.match(rest)
    after = rest[ms.end() :] if ms else rest
    if after and not ms and not after[:1].isspace() and m.group(3):
        return None  # "A1", "Ax": not a bare letter
    # a second option letter right after the first (possibly after a joining word) is hedging
    mj = _MC_JOIN.match(after)
    tail = after[mj.end() :] if mj else after.lstrip()
    mo = _MC_OTHER.match(tail)
    if mo:
        other = mo.group(1) or mo.group(2)
        joined = mj is not None or not ms
        after_other = tail[mo.end() :].lstrip()
        formula = mo.group(2) is not None and after_other[:1] in ("=", "_", "^", "\\", "<", ">") and mj is None
        if other.isupper() == letter.isupper() and (joined or not after_other) and not formula:
            return None
    return letter.upper()


def judge_mc(gold: str, pred: str) -> SlotResult:
    """MC: option-letter equality (case-insensitive); a gold that is a word (``Pluto``) needs the same
    normalised text, optionally after an option-letter prefix in the prediction."""
    g = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", gold).strip()
    if re.fullmatch(r"\(?\s*[A-Za-z]\s*\)?", g.replace("{", "").replace("}", "")):
        gl = _mc_letter(g)
        pl = _mc_letter(pred)
        if pl is None:
            return False, f"no option letter in {pred[:40]!r}"
        return (gl == pl), f"option {pl} vs {gl}"
    gt = norm_text(gold)
    pt = norm_text(pred)
    if gt == pt:
        return True, "same option text"
    stripped = re.sub(r"^[a-z]\s+", "", pt)
    return (stripped == gt), "option text"


_TRUE = {"true", "yes", "correct", "right", "t", "y", "holds", "valid"}
_FALSE = {"false", "no", "incorrect", "wrong", "f", "n", "invalid", "not true"}


_TF_HEDGE = re.compile(
    r"\b(?:true|false|yes|no|correct|incorrect|wrong|right|but|except|however|unless|otherwise|fails?|only|depends|sometimes|not)\b"
)
_TF_LEAD = re.compile(r"^\s*(true|false|yes|no|correct|incorrect)\s*(?:[,;:.!]|--|\u2014|\u2013)\s*\S", re.IGNORECASE)


def _tf_value(s: str) -> bool | None:
    """The truth value a TF box states: a synonym alone (``True``, ``no``, ``\\text{Yes}``) or one
    leading a justification after a comma, colon or dash (``No, they cannot be distinguished``)."""
    t = norm_text(s)
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    plain = re.sub(r"\\(?:text|mathrm|textrm|textbf|mbox|emph)\s*\{", "", s).replace("}", "").replace("$", "")
    m = _TF_LEAD.match(plain)
    if m:
        rest = plain[m.end() - 1 :].lower()
        if _TF_HEDGE.search(rest):
            return None  # "True, but only for small angles; otherwise false": no single truth value
        return m.group(1).lower() in _TRUE
    return None


def judge_tf(gold: str, pred: str) -> SlotResult:
    """TF: true/yes/correct vs false/no/incorrect synonyms, case-insensitive, inside ``\\text{}``."""
    g, p = _tf_value(gold), _tf_value(pred)
    if p is None:
        return False, f"not a truth value: {pred[:40]!r}"
    if g is None:
        return (norm_text(gold) == norm_text(pred)), "text"
    return (g == p), f"{p} vs {g}"


def _looks_mathy(s: str) -> bool:
    """A QL gold that is really a formula or number (no prose)."""
    if "\\text" in s:
        return False
    words = re.findall(r"(?<!\\)\b[A-Za-z]{4,}\b", s)
    return not words


_ARTICLES = frozenset({"a", "an", "the"})
_HEDGE_WORDS = re.compile(r"\b(?:or|not|no|nor|but|except|unless|either|neither)\b")
_SPELLING_SKIP = frozenset({"wise", "rise", "noise", "precise", "concise", "exercise", "otherwise", "likewise", "expertise", "premise", "promise", "surprise", "raise", "praise", "poise", "arise"})
_SYNONYMS = {
    "anticlockwise": "counterclockwise", "counter clockwise": "counterclockwise", "counter-clockwise": "counterclockwise",
    "doesn't": "does not", "don't": "do not", "can't": "cannot", "isn't": "is not", "won't": "will not",
}
MAX_QL_CHARS = 4000
"""QL texts longer than this are compared by plain normalised equality only (the fast tier runs
in-process, so every rule here must stay cheap)."""


def _spelling(w: str) -> str:
    """British to American spelling of one word (``polarised`` -> ``polarized``, ``colour`` ->
    ``color``, ``centre`` -> ``center``); words such as ``clockwise`` or ``noise`` are left alone."""
    if w in _SPELLING_SKIP or w.endswith("wise"):
        return w
    m = re.fullmatch(r"([a-z]{3,})is(e|ed|es|ing|ation|ations)", w)
    if m:
        return m.group(1) + "iz" + m.group(2)
    if re.fullmatch(r"[a-z]{2,}our(s?)", w) and w not in ("four", "hour", "hours", "pour", "tour", "your", "yours", "sour", "flour"):
        return w[: w.rindex("our")] + "or" + w[w.rindex("our") + 3 :]
    if re.fullmatch(r"[a-z]{3,}tre(s?)", w):
        return w[: w.rindex("tre")] + "ter" + w[w.rindex("tre") + 3 :]
    return "gray" if w == "grey" else w


def _ql_words(s: str) -> list[str]:
    """Normalised words of one clause: case-folded, hyphens as spaces, articles dropped, a few
    synonyms mapped, British spellings mapped, a plural or third-person ``s`` removed."""
    t = norm_text(s)
    for a, b in _SYNONYMS.items():
        t = re.sub(r"(?<![a-z])" + re.escape(a) + r"(?![a-z])", b, t)
    t = t.replace("-", " ").replace("\u2013", " ").replace("/", " / ")
    out = []
    for w in t.split():
        if w in _ARTICLES:
            continue
        w = _spelling(w)
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        out.append(w)
    return out


def _ql_clauses(s: str) -> list[tuple[str, ...]]:
    """Clauses (split at ``;``) as word tuples. Clauses that all carry a label (``M87: synchrotron
    cooling``) may come in any order and are sorted; unlabelled clauses keep their order
    (``increases; decreases`` is not ``decreases; increases``)."""
    t = re.sub(r"\\(?:text|mathrm|textrm|textbf|textit|mbox|emph)\s*\{([^{}]*)\}", r"\1", s)
    raw = [c for c in t.split(";") if _ql_words(c)]
    clauses = [tuple(_ql_words(c)) for c in raw]
    if len(raw) > 1 and all(re.match(r"\s*[^:]{1,40}:\s*\S", c) for c in raw):
        return sorted(clauses)
    return clauses


def ql_alternatives(gold: str) -> list[str]:
    """A short gold naming one thing two ways (``Aries (Ari)``, ``Orion Nebula (M42)``) accepts
    either name; the parenthesis must hold a short designation (one token of at most six
    characters with a capital or a digit), not a description (``Red (longer wavelength)``)."""
    t = re.sub(r"\\(?:text|mathrm|textrm|textbf|textit|mbox|emph)\s*\{([^{}]*)\}", r"\1", gold).strip()
    m = re.fullmatch(r"([A-Za-z][\w .'-]{0,40}?)\s*\(([A-Za-z0-9][\w.-]{0,5})\)", t)
    if m and len(m.group(1).split()) <= 4 and re.search(r"[A-Z0-9]", m.group(2)):
        return [gold, m.group(1), m.group(2)]
    return [gold]


def judge_ql(gold: str, pred: str) -> SlotResult:
    """QL: normalised text equality (PROTOCOL.md section 5): case, punctuation, hyphens, articles,
    plurals, British spellings and a small synonym lexicon are ignored, labelled clauses separated
    by ``;`` may come in any order, and a short gold written ``Name (M42)`` accepts either name.
    Anything else (real paraphrase, glosses, hedges) is left to the LLM judge: decisive ``False``
    for prose golds, undecided for formula-like golds."""
    if norm_text(gold) == norm_text(pred):
        return True, "same text"
    if len(gold) > MAX_QL_CHARS or len(pred) > MAX_QL_CHARS:
        return False, "different text (too long for the phrase rules)"
    for g in ql_alternatives(gold):
        gk = _ql_clauses(g)
        if gk and _ql_clauses(pred) == gk:
            return True, "same text after normalisation"
    if _looks_mathy(gold):
        return None, "formula-like QL"
    return False, "different text"


# ---------------------------------------------------------------------------------------------
# fast tier


def fast_slot(gold: str, pred: str, t: AnswerType, hint: str | None = None) -> SlotResult:
    """Cheap in-process decision for one slot (see module docstring); ``hint`` (the gold's unit) is
    not needed at this tier. Never raises."""
    if not pred.strip():
        return False, "empty answer"
    if norm_string(gold) == norm_string(pred):
        return True, "same normalised string"
    if t is AnswerType.MC:
        return judge_mc(gold, pred)
    if t is AnswerType.TF:
        return judge_tf(gold, pred)
    if t is AnswerType.QL:
        return judge_ql(gold, pred)
    if t in (AnswerType.TUP, AnswerType.ALT):  # a compound-typed slot inside ALT
        if norm_text(gold) == norm_text(pred):
            return True, "same text"
        return None, ""
    return None, ""


# ---------------------------------------------------------------------------------------------
# numeric / symbolic tier (worker side)

_RNG_SEED = 20240917
_N_POINTS = 6


def _replace_undef(expr: Any) -> Any:
    """Replace applied undefined functions ``f(x)`` by plain symbols (by their printed form)."""
    import sympy
    from sympy.core.function import AppliedUndef

    undefs = expr.atoms(AppliedUndef) if hasattr(expr, "atoms") else set()
    if not undefs:
        return expr
    return expr.xreplace({u: sympy.Symbol("F_" + str(abs(hash(str(u))))) for u in undefs})


def _has_float(*exprs: Any) -> bool:
    import sympy

    return any(bool(e.atoms(sympy.Float)) for e in exprs if hasattr(e, "atoms"))


def _points(symbols: list[Any], n: int = _N_POINTS, signed: bool = False) -> list[dict[Any, Any]]:
    """Seeded sample points in [0.3, 2.7] per symbol (physical magnitudes are positive); with
    ``signed`` each value also gets a random sign (used when an absolute value is involved, so that
    ``|q|`` never equals ``q``)."""
    import sympy

    rng = random.Random(_RNG_SEED)
    pts = []
    for _ in range(n):
        pts.append({s: sympy.Float(round(rng.uniform(0.3, 2.7) * (rng.choice((-1, 1)) if signed else 1), 6)) for s in symbols})
    return pts


def _has_abs(*exprs: Any) -> bool:
    import sympy

    return any(hasattr(e, "has") and e.has(sympy.Abs, sympy.sign) for e in exprs)


def _num(expr: Any, pt: dict[Any, Any]) -> complex | None:
    try:
        v = expr.xreplace(pt).evalf(20)
        c = complex(v)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError):
        return None
    if not (math.isfinite(c.real) and math.isfinite(c.imag)):
        return None
    return c


_DECIMAL = re.compile(r"(?<![\d.])(\d+)\.(\d+)")
MAX_DECIMAL_REL = 0.02
"""A decimal in a symbolic prediction stands for any value within its written precision, but never
more than 2% away (the NV policy's bound for coarse numbers)."""


def _simplest_fraction(v: float, tol: float) -> Any:
    """The fraction with the smallest denominator (at most 100) within ``tol`` of ``v``, else None."""
    import sympy

    for den in range(1, 101):
        num = round(v * den)
        if abs(num / den - v) <= tol:
            return sympy.Rational(num, den)
    return None


def _rationalize(expr: Any, text: str) -> Any:
    """Decimals of a symbolic prediction read as the simplest fraction (denominator <= 100) within
    their written precision: ``0.33`` -> 1/3, ``1.5`` -> 3/2, ``2.1`` -> 21/10 (never 2). Decimals
    with no such fraction (``0.9945`` for 180/181) stay floats and are compared at their written
    precision (:func:`written_tolerance`)."""
    import sympy

    floats = expr.atoms(sympy.Float) if hasattr(expr, "atoms") else set()
    if not floats:
        return expr
    places: dict[float, int] = {}
    for m in _DECIMAL.finditer(text):
        places[round(float(m.group(0)), 9)] = len(m.group(2))
    rep = {}
    for f in floats:
        v = float(f)
        d = places.get(round(abs(v), 9))
        if d is None:
            continue
        r = _simplest_fraction(v, min(0.5 * 10.0 ** (-d), MAX_DECIMAL_REL * abs(v)))
        if r is not None:
            rep[f] = r
    return expr.xreplace(rep) if rep else expr


def _nonfinite(*exprs: Any) -> bool:
    """Whether any expression contains nan, zoo or +-oo (``0/0``, ``1/0``, ``0\\cdot\\infty``)."""
    import sympy

    bad = (sympy.nan, sympy.zoo, sympy.oo, -sympy.oo)
    return any(hasattr(e, "has") and e.has(*bad) for e in exprs)


def _undefined(*exprs: Any) -> bool:
    """Whether any expression contains nan or zoo (never equal to anything)."""
    import sympy

    return any(hasattr(e, "has") and e.has(sympy.nan, sympy.zoo) for e in exprs)


def _close(a: complex, b: complex, tol: float) -> bool:
    scale = max(abs(a), abs(b))
    return abs(a - b) <= tol * scale + 1e-12


def sym_equal(a: Any, b: Any, tol: float | None = None) -> tuple[bool | None, str]:
    """Whether two SymPy expressions are equal: structural equality, then a numeric check at
    seeded random positive points (relative tolerance ``tol``; by default 1e-6, or 1% when the gold
    ``a`` contains a decimal number), then ``simplify(a - b) == 0`` when the numeric check was
    inconclusive. Matrices are compared entry by entry."""
    import sympy
    from sympy.matrices import MatrixBase
    from sympy.matrices.expressions import MatrixExpr

    a = a.as_explicit() if isinstance(a, MatrixExpr) else a
    b = b.as_explicit() if isinstance(b, MatrixExpr) else b
    if isinstance(a, MatrixBase) or isinstance(b, MatrixBase):
        if not (isinstance(a, MatrixBase) and isinstance(b, MatrixBase)) or a.shape != b.shape:
            return False, "matrix against non-matrix or different shapes"
        for x, y in zip(a, b, strict=True):
            ok, why = sym_equal(x, y, tol)
            if not ok:
                return ok, "matrix entries: " + why
        return True, "same matrix"
    if not isinstance(a, sympy.Expr) or not isinstance(b, sympy.Expr):
        return None, "not expressions"
    if _undefined(a, b):
        return False, "undefined value (nan/zoo)"
    if a == b:
        return True, "identical"
    if _nonfinite(a) != _nonfinite(b):
        return False, "infinite on one side only"
    a, b = _replace_undef(a), _replace_undef(b)
    if tol is None:
        tol = 0.01 if _has_float(a) else 1e-6  # decimals in the gold allow 1%; see _rationalize
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    good = 0
    pts = _points(syms) + (_points(syms, signed=True) if _has_abs(a, b) else [])
    for pt in pts:
        va, vb = _num(a, pt), _num(b, pt)
        if va is None or vb is None:
            continue
        if not _close(va, vb, tol):
            if not syms:
                return False, f"values differ ({_fmt(vb)} vs {_fmt(va)})"
            return False, "differs at a sample point"
        good += 1
        if not syms:
            break
    if good >= (1 if not syms else 3):
        return True, "numerically equal"
    try:
        d = sympy.simplify(a - b)
        if d == 0 and not _nonfinite(d):
            return True, "simplify(a-b)=0"
    except Exception:  # sympy raises many types on odd input
        return None, "simplify failed"
    return False, "not shown equal"


def _fmt(v: complex) -> str:
    return f"{v.real:.6g}" if abs(v.imag) < 1e-12 else f"{v:.4g}"


def _value(expr: Any) -> complex | None:
    """Numeric value of a closed SymPy expression, else None."""
    import sympy

    if not isinstance(expr, sympy.Expr) or expr.free_symbols:
        return None
    return _num(expr, {})


def _eff_unit(q: Quantity) -> str:
    """The unit a quantity is stated in, with ``^\\circ`` read as the unit ``deg``."""
    if q.degrees:
        return "deg" if not q.unit else "deg " + q.unit
    return q.unit


def _cmp_quantities(g: Quantity, p: Quantity) -> tuple[bool, str]:
    """Compare a predicted quantity with a gold one (NV rules).

    * ``\\pm`` in the prediction but not in the gold: incorrect (a +- answer states two values);
      both with ``\\pm``: magnitudes compared; gold only: the prediction's magnitude.
    * percent: a gold ``98.5\\%`` accepts 98.5 or 0.985; a predicted ``10\\%`` is 0.1 unless the
      gold is a percentage too.
    * units (``^\\circ`` counts as ``deg``): equal strings compare as is; otherwise pint converts
      (angles never to or from non-angles); a prediction whose trailing text is no real unit is not a
      plain number (unless it is a count noun: ``15 levels``); a dimensional unit against a unitless
      nonzero gold is not accepted (the gold's unit is unknown; pass ``gold_unit``).
    * tolerance: :func:`studybench.verify.quantity.close_enough` (1% plus half a unit in the gold's
      last written decimal, at most 2%).
    """
    if p.plus_minus and not g.plus_minus:
        return False, "prediction is a +- pair, gold is one value"
    if g.plus_minus and not p.plus_minus:
        return False, "gold is a +- pair, prediction states one value"
    # a gold 50\% accepts 50 or 0.5, but a predicted percentage must state the same percentage
    gvals = [g.value] + ([g.value / 100.0] if g.percent and not p.percent else [])
    pvals = [p.value / 100.0] if p.percent and not g.percent else [p.value]
    if g.plus_minus:
        gvals = [abs(v) for v in gvals]
        pvals = [abs(v) for v in pvals]
    unit_note = ""
    gu, pu = _eff_unit(g), _eff_unit(p)
    if pu and not (gu and same_unit(pu, gu)):
        conv = convert_unit(p.value, pu, gu) if gu else None
        if conv is not None:
            pvals = [abs(conv) if g.plus_minus else conv]
            unit_note = f" after {pu}->{gu}"
        elif not is_unit(pu):
            if gu or not _count_noun(pu):
                return False, f"not a plain number (leftover {pu[:30]!r})"
            unit_note = f" ({pu!r} read as a count noun)"
        elif gu:
            return False, f"unit mismatch ({pu} vs {gu})"
        elif g.value != 0 and not _dimensionless(pu):
            # the gold's unit is unknown (no unit in the box, no hint): 9.9 MeV may be 1000x off
            return False, f"gold states no unit; cannot check {pu}"
    for pv in pvals:
        for gv in gvals:
            res = g.resolution * abs(gv / g.value) if g.value else 0.0
            if close_enough(pv, gv, resolution=res):
                err = 0.0 if gv == 0 else abs(pv - gv) / abs(gv)
                return True, f"numeric match (rel. err {err:.2%}){unit_note}"
    return False, f"numeric mismatch ({pvals[0]:.6g} vs {gvals[0]:.6g}){unit_note}"


_EQ_ONLY = frozenset({"="})


def _pred_ops(gold: str) -> frozenset[str]:
    """Relations that may separate values in a prediction: ``=`` always, an inequality only when the
    gold states a bound with the same relation (``x > 2`` does not state the value 2)."""
    _, found = split_relations(gold, frozenset({"=", "<", ">", "<=", ">="}))
    return _EQ_ONLY | frozenset(found)


def _plain_value_text(pred: str) -> bool:
    """A prediction the numeric fallback may evaluate: no prose (``\\text{ or }``), no list."""
    if re.search(r"\\(?:text|mbox|textrm|textit|textbf)\s*\{", pred):
        return False
    if re.search(r"(?<![A-Za-z\\])(?:or|and)(?![A-Za-z])", pred):
        return False
    return len(split_top_level(pred)) == 1 and len(split_top_level(pred, ";")) == 1


# signs that trailing letters after a number are a unit, not symbols: a text wrapper, an explicit
# thin space, degrees or an astronomy unit macro (``3\,\mathrm{m/s}``, ``3\,kg``; ``3mg`` is 3mg)
_UNIT_MARK = re.compile(
    r"\\(?:mathrm|text|textrm|rm|mbox|operatorname)\s*\{|\\[,;: ]|~|\\quad(?![A-Za-z])|\\circ|\u00b0|\\odot|\\oplus|\\AA|\\Omega"
)


def _plain_quantity(s: str, ops: frozenset[str] = _EQ_ONLY) -> Quantity | None:
    """The one quantity a text states when it is nothing but a number with an optional real unit
    (EX/EQ use NV rules only then). ``None`` when anything symbolic remains: brackets, operators,
    functions, or trailing letters that are no unit or are written as a product of symbols
    (``2mg``, ``\\frac{180}{181}c``, ``\\frac43 T``)."""
    qs = quantity_candidates(s, ops)
    if len(qs) != 1:
        return None
    q = qs[0]
    if q.unit and not (is_unit(q.unit, upright=_upright_unit(s, q.unit)) and _UNIT_MARK.search(s)):
        return None
    return q


def _upright_unit(s: str, unit: str) -> bool:
    """Whether ``unit`` is written upright in ``s`` (``\\mathrm{G}``, ``\\text{ T}``)."""
    return re.search(r"\\(?:mathrm|text|rm|textrm|mbox)\s*\{\s*" + re.escape(unit) + r"\s*\}", s) is not None


_REMARK = re.compile(
    r"\\(?:text|mbox|textrm|textit)\s*\{\s*\([^{}]*\)\s*\}\s*$"  # \text{(both rotating)}
    r"|\s*\((?=[^()\\^_=]*[A-Za-z]{3,}\s+[A-Za-z]{3,})[^()\\^_=]*\)\s*$"  # (zero outside): prose only
)
_TRAILING_SPACE = re.compile(r"(?:\\[,;: ]|~|\\q?quad(?![A-Za-z])|\s)+$")
_CONDITION = re.compile(r"\\(?:text|mbox|textrm)\s*\{\s*,?\s*(?:for|if|when|where|with)\b")


def strip_remark(s: str) -> str:
    """Drop a trailing parenthetical remark: ``\\text{ (both rotating)}``, ``(axial, zero outside)``."""
    t = _TRAILING_SPACE.sub("", s)
    for _ in range(3):
        t2 = _TRAILING_SPACE.sub("", _REMARK.sub("", t))
        if t2 == t:
            break
        t = t2
    return t or s


def split_condition(s: str) -> tuple[str, str]:
    """``(value, condition)`` of ``B = 0 \\text{ for } r < r_1``; ``(s, "")`` without a condition."""
    m = _CONDITION.search(s)
    if not m or not s[: m.start()].strip():
        return s, ""
    return _TRAILING_SPACE.sub("", s[: m.start()]).rstrip(","), s[m.start() :]


def _split_conditions(gold: str, pred: str) -> tuple[str, str] | SlotResult:
    """The gold and prediction without their conditions (``\\text{ for } r < R``) when the conditions
    agree, else a failing :data:`SlotResult`: a gold condition must be stated, and a prediction may
    not add a condition or definition the gold does not state."""
    gv, gc = split_condition(gold)
    pv, pc = split_condition(pred)
    if gc and not pc:
        return False, "the gold's condition is missing"
    if pc and not gc:
        return False, "the prediction adds a condition or definition the gold does not state"
    if gc and _condition_key(gc) != _condition_key(pc):
        return False, "different condition"
    return (gv, pv) if gc else (gold, pred)


def _condition_key(c: str) -> list[str]:
    t = re.sub(r"\\(?:text|mbox|textrm)\s*\{([^{}]*)\}", r" \1 ", c)
    t = re.sub(r"\b(?:for|if|when|where|with)\b", " ", t)
    parts = re.split(r"\band\b|,|;|\\quad|\\wedge", t)
    return sorted(norm_string(x).replace(" ", "") for x in parts if x.strip())


# a \mathrm{...} / \text{...} group holding something that is neither letters nor a number: a unit
# such as \mathrm{/s} or \mathrm{1/s} that symbolic conversion would silently drop
_ODD_TEXT_GROUP = re.compile(r"\\(?:mathrm|text|textrm|rm|mbox|operatorname)\s*\{\s*(?![A-Za-z]*\s*\}|[\d.]+\s*\})[^{}]*\}")


_NOT_NOUNS = frozenset({
    "or", "and", "to", "times", "more", "less", "than", "about", "approximately", "approx", "per", "of", "at", "least",
    "most", "not", "no", "plus", "minus", "percent", "over", "under", "up", "fewer", "thousand", "thousands", "million",
    "millions", "billion", "billions", "trillion", "hundred", "hundreds", "dozen", "dozens", "squared", "cubed", "halves",
    "half", "thirds", "quarters", "tenths", "hundredths", "ppm", "ppb", "ppt", "pct", "order", "orders", "magnitude",
    "powers", "power", "decades", "factor", "fold", "twice", "thrice", "hence", "so", "with", "without", "each", "only",
})


def _count_noun(u: str) -> bool:
    """Trailing words after a count that name what is counted (``15 levels``, ``3 bright fringes``):
    one to three lower-case words ending in a plural noun, none of them a hedge, operator or scale
    word (``or more``, ``thousand``, ``squared``)."""
    words = u.split()
    return (
        1 <= len(words) <= 3
        and all(re.fullmatch(r"[a-z]{3,}", w) and w not in _NOT_NOUNS for w in words)
        and words[-1].endswith("s")
        and not words[-1].endswith(("ss", "ths"))
    )


def _dimensionless(u: str) -> bool:
    """Whether a unit string is dimensionless with scale 1 (``rad``, ``sr``): ``0.5 rad`` may stand
    for an unlabelled 0.5, ``0.5 mrad``, ``0.5^\\circ`` or ``5 ppm`` may not."""
    from studybench.verify.quantity import _parse_units, _registry

    units = _parse_units(u)
    try:
        if units is None or dict(units.dimensionality):
            return False
        ureg = _registry()
        factor, _ = ureg.get_root_units(units)
        return abs(float(factor) - 1.0) < 1e-12
    except Exception:  # pint internals
        return False


_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "a hundred": 100, "one hundred": 100, "none": 0, "infinitely many": -1})


def _hint_unit(hint: str | None) -> tuple[str | None, str | None]:
    """A unit hint as ``(pint unit, None)`` when pint reads it (``\\mu\\mathrm{m}``, ``\\text{MeV}``,
    ``Joules per Kelvin``), else ``(None, text)`` for a symbolic unit such as ``m_0`` or ``\\hbar^2``."""
    from studybench.verify.quantity import _norm_unit, _parse_units

    if not hint:
        return None, None
    cands = [_norm_unit(re.sub(r"\\[,;: !]|~", " ", hint))]
    words = norm_text(hint)
    if re.fullmatch(r"[a-z ]+", words):
        cands.append(re.sub(r"\s+", "*", words.replace(" per ", "/")))
    for c in cands:
        if c and _parse_units(c) is not None and is_unit(c) or (c and c in ("m", "s", "g") and _parse_units(c) is not None):
            return c, None
    return None, hint


def _strip_symbolic_unit(pred: str, text: str) -> str:
    """``-0.167\\,m_{0}`` with the symbolic unit ``m_0`` -> ``-0.167``."""
    p, t = norm_string(pred), norm_string(text)
    if t and p.endswith(t) and len(p) > len(t):
        head = p[: -len(t)].rstrip()
        if head and (head[-1].isdigit() or head[-1] in "}."):
            return head
    return pred


def judge_nv(gold: str, pred: str, hint: str | None = None) -> SlotResult:
    """NV: numbers with scientific notation, fractions, percent, degrees, optional unit and
    optional left side; relative tolerance 1% (a gold of 0 needs 0). Falls back to a symbolic
    numeric value (``\\frac{\\sqrt2}{2}``) and then to EX rules for symbolic NV golds.

    Units: ``hint`` is the unit of a unitless gold (``gold_unit``); a prediction in a compatible unit
    is converted, one without a unit is read in the gold's unit, and one with a dimensional unit
    against a gold whose unit is unknown is not accepted (unless the gold is 0). A gold listing
    several values (``1.822, 0.831, 1.8``) is compared value by value."""
    if len(split_top_level(gold)) > 1:
        gparts = split_top_level(gold)
        ghints = split_hints(hint, len(gparts))
        pparts = split_top_level(pred)
        if len(pparts) == len(gparts) and len(set(gparts)) < len(gparts):
            # equal gold values with different hints: by position
            return _match_in_order([str(i) for i in range(len(gparts))], pparts, lambda i, p: judge_nv(gparts[int(i)], p, ghints[int(i)]))
        hmap = dict(zip(gparts, ghints, strict=True))
        res = judge_parts(gold, pred, lambda g, p: judge_nv(g, p, hmap.get(g)))
        if res is not None:
            return res
    unit, sym = _hint_unit(hint)
    if sym:
        pred = _strip_symbolic_unit(pred, sym)
    word = _NUMBER_WORDS.get(norm_text(pred))
    if word is not None and word >= 0:
        pred = str(word)
    gq = quantity_candidates(gold)
    if not gq and _plain_value_text(_rhs(gold)) and not _ODD_TEXT_GROUP.search(gold):
        # a closed-form gold (\sqrt{2}, 2\pi, \frac{\sqrt3}{2}) is a number: NV rules apply
        try:
            gv = _value(to_sympy(_rhs(gold)))
        except LatexError:
            gv = None
        if gv is not None and abs(gv.imag) < 1e-12:
            gq = [Quantity(gv.real)]
    if unit:
        gq = [replace(q, unit=unit) if not (q.unit or q.degrees or q.percent) else q for q in gq]
    pq = quantity_candidates(pred, _pred_ops(gold))
    if not pq and gq and _plain_value_text(pred) and not _ODD_TEXT_GROUP.search(pred):
        try:
            pv = _value(to_sympy(_rhs(pred)))
        except LatexError:
            pv = None
        if pv is not None and abs(pv.imag) < 1e-12:
            pq = [Quantity(pv.real if abs(pv.real) > 1e-14 else 0.0)]
    if gq and pq:
        gsegs, _ = split_relations(gold, _VALUE_RELS)
        psegs, _ = split_relations(pred, _pred_ops(gold))
        gl, pl = _value_lhs(gsegs), _value_lhs(psegs)
        if gl and pl and not _labels_compatible(gl, pl):
            return False, f"different left side ({pl[:30]!r} vs {gl[:30]!r})"
        _, gops = split_relations(gold, _VALUE_RELS)
        _, pops = split_relations(pred, _VALUE_RELS)
        if {o for o in gops if o != "="} != {o for o in pops if o != "="}:
            return False, "the gold states a bound; the prediction does not state the same relation"
        stated = [
            x for x in (psegs[1:] if pl else psegs)
            if re.match(r"\s*[-+]?\s*(?:\d|\.\d|\\[dt]?frac\s*\{\s*[\d.]+\s*\}\s*\{\s*[\d.]+\s*\})", x)
        ]
        if len(pq) < len(stated):
            return False, "a stated value cannot be read"
        p = pq[-1]

        def golds_for(q: Quantity) -> list[Quantity]:
            # a gold chain T = 328 K = 55 C: a prediction in C is compared with the C link only
            same = [g for g in gq if _eff_unit(g) and _eff_unit(q) and same_unit(_eff_unit(g), _eff_unit(q))]
            return same or gq

        for extra in pq[:-1]:
            # a chained prediction (x = 5 = 2): every value it states must match the gold
            if not any(_cmp_quantities(g, extra)[0] for g in golds_for(extra)):
                return False, "a stated value does not match"
        reasons = []
        for g in golds_for(p):
            ok, why = _cmp_quantities(g, p)
            if ok:
                return True, why
            reasons.append(why)
        if any(g.unit and not is_unit(g.unit) for g in gq) and not p.unit:
            # a gold such as 0.5 R (a symbol, not a unit): EX rules decide
            ok, why = judge_ex(gold, pred)
            if ok:
                return True, why
        return False, reasons[0]
    if not gq:
        return judge_ex(gold, pred)
    if any(g.unit and not is_unit(g.unit) for g in gq):
        return judge_ex(gold, pred)
    gsegs, _ = split_relations(gold, frozenset({"="}))
    psegs, _ = split_relations(pred, frozenset({"="}))
    if len(gsegs) == 2 and len(psegs) == 2 and _value_lhs(gsegs) and _value_lhs(psegs):
        # beta = 1 stated as v = c: the same relation by the identities (EQ rules)
        return _eq_one(gold, pred)
    return False, "no number found"


def _rhs(s: str) -> str:
    segs, _ = split_relations(s, frozenset({"="}))
    return segs[-1]


_VALUE_RELS = frozenset({"=", "<", ">", "<=", ">="})


def _value_lhs(segs: list[str]) -> str:
    """The left side of ``v = 3 m/s`` (a symbolic first segment of a relation chain), else ""."""
    if len(segs) < 2 or not segs[0] or not re.search(r"[A-Za-z]", segs[0]):
        return ""
    return "" if quantity_candidates(segs[0]) else segs[0]


def _ex_candidates(gold: str) -> list[str]:
    segs, _ = split_relations(gold, frozenset({"="}))
    return [x for x in segs[1:] if x] if len(segs) > 1 else segs


_ARROW = re.compile(
    r"\\(?:to|rightarrow|longrightarrow|xrightarrow\s*(?:\[[^\]]*\])?\s*\{[^{}]*\}|leftrightarrow|longleftrightarrow|rightleftharpoons|rightleftarrows|leftrightarrows)(?![A-Za-z])|->|<->|\u2192|\u21cc|\u2194"
)
_REVERSIBLE = ("leftrightarrow", "rightleftharpoons", "rightleftarrows", "leftrightarrows", "<->", "\u21cc", "\u2194")


def _species(side: str) -> list[str] | None:
    """The particles / species of one side of a reaction as a sorted list of normalised atoms
    (``\\pi^{+} + \\pi^{-}`` and ``\\pi^+\\pi^-`` give the same list; a coefficient counts as an
    atom; pre-scripts such as ``^{4}_{2}He`` stay with their symbol); ``None`` when the side has a
    construct that is not a species list."""
    from studybench.verify.latex import tokenize

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


def judge_reaction(gold: str, pred: str) -> SlotResult | None:
    """A reaction or decay (``\\rho^0 \\to \\pi^+ + \\pi^-``): the same arrow kind (one-way or
    reversible) and, on each side, the same species in any order, with or without ``+``. ``None``
    when the gold is no reaction."""
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
    """One side of a reaction as a sorted multiset of species: terms separated by top-level ``+``
    keep their coefficients (``2H_2 + O_2``: H2, H2, O2; ``H_2O`` stays one species), a side
    written without ``+`` (``\\pi^+\\pi^-``, ``2\\gamma``) is read particle by particle."""
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


def judge_ex(gold: str, pred: str, hint: str | None = None) -> SlotResult:
    """EX: a gold listing several answers is compared part by part (:func:`judge_parts`); a single
    answer by :func:`_ex_one`. A trailing unit (``(\\ldots)\\ \\mathrm{V}``) is converted to the
    gold's unit (its own or ``hint``) by a numeric factor, or dropped when the gold states none."""
    res = judge_reaction(gold, pred)
    if res is not None:
        return res
    res = judge_parts(gold, pred, lambda g, p: _ex_units(g, p, None))
    if res is not None:
        return res
    return _ex_units(_flatten_env(gold), _flatten_env(pred), hint)


_UNIT_GAP = re.compile(r"\\[,;: ]|~|\\q?quad(?![A-Za-z])|\\(?=(?:mathrm|text|rm|textrm|mbox)\s*\{)")


def split_unit_suffix(s: str) -> tuple[str, str]:
    """``(body, unit)`` of a symbolic answer that ends in an explicitly spaced or upright unit
    (``\\frac{q}{4\\pi\\varepsilon_0 r}\\,\\mathrm{V}``); ``(s, "")`` when there is none. The unit
    must be one pint reads (:func:`studybench.verify.quantity.is_unit`)."""
    from studybench.verify.quantity import _norm_unit

    for m in _UNIT_GAP.finditer(s):
        head, tail = s[: m.start()].rstrip(), s[m.end() :].strip()
        if not head or not tail or head.rstrip().endswith(("=", "+", "-", "\\cdot", "\\times")):
            continue
        u = _norm_unit(tail)
        if not u or not is_unit(u):
            continue
        # a bare trailing letter (\\, a^{-1}) is a symbol; a unit is upright or a multi-letter name
        if re.search(r"\\(?:mathrm|text|rm|textrm|mbox)(?![A-Za-z])", tail) or re.match(r"[A-Za-z]{2,}", u):
            return head, u
    return s, ""


def trailing_words(s: str) -> tuple[str, str]:
    """``(body, words)``: a trailing remark or phrase (``\\text{ (counterclockwise)}``,
    ``(outside the sphere)``, ``\\text{ upward}``) split from the formula; ``(s, "")`` when none."""
    body = strip_remark(s)
    if body != s:
        return body, s[len(body) :]
    m = re.search(r"\\(?:text|mbox|textrm|textit)\s*\{\s*([A-Za-z][A-Za-z \-]*)\}\s*\.?\s*$", s)
    if m and s[: m.start()].strip() and not _CONDITION.match(s[m.start() :]):
        return _TRAILING_SPACE.sub("", s[: m.start()]), m.group(1)
    return s, ""


def _ex_units(gold: str, pred: str, hint: str | None) -> SlotResult:
    (gold, gw), (pred, pw) = trailing_words(gold), trailing_words(pred)
    if gw and pw and not _prose_equal(re.sub(r"[()]", " ", gw), re.sub(r"[()]", " ", pw)):
        return False, "the words after the formula differ (direction, region ...)"
    res = _split_conditions(gold, pred)
    if isinstance(res[0], bool):
        return res  # type: ignore[return-value]
    return _ex_units_plain(res[0], res[1], hint)


_PROSE = re.compile(r"\\(?:text|mbox|textrm|textit|textbf)\s*\{")


def prose_segments(s: str) -> list[tuple[bool, str]]:
    """``s`` cut at prose groups (``\\text{...}`` with a space inside): ``(is_prose, text)`` pieces in
    order, empty pieces dropped; one-word groups (``\\text{max}``) stay inside the math. Never raises."""
    from studybench.answers import match_brace

    out: list[tuple[bool, str]] = []
    i = pos = 0
    while True:
        m = _PROSE.search(s, pos)
        if not m:
            break
        end = match_brace(s, m.end() - 1)
        if end < 0:
            break
        content = s[m.end() : end - 1].strip()
        if " " in content:
            math = s[i : m.start()].strip()
            if math:
                out.append((False, math))
            out.append((True, content))
            i = end
        pos = end
    tail = s[i:].strip()
    if tail:
        out.append((False, tail))
    return out


def _prose_equal(a: str, b: str) -> bool:
    return _ql_words(a) == _ql_words(b)


def _ex_units_plain(gold: str, pred: str, hint: str | None) -> SlotResult:
    gseg = prose_segments(gold)
    if _prose_segments_after_math(gseg):
        # words between formulas ("the omega = 6 mode with vector (4, -3, 0, 1) is absent"): piece by piece
        pseg = prose_segments(pred)
        if len(pseg) != len(gseg) or any(a[0] != b[0] for a, b in zip(gseg, pseg, strict=True)):
            return False, "prose and formulas do not line up with the gold"
        for (is_p, g), (_, p) in zip(gseg, pseg, strict=True):
            if is_p:
                if not _prose_equal(g, p):
                    return False, "different words between the formulas"
            else:
                ok, why = _ex_one(g, p, None)
                if not ok:
                    return False, why
        return True, "formulas and words match piece by piece"
    return _ex_units_body(gold, pred, hint)


def _prose_segments_after_math(seg: list[tuple[bool, str]]) -> bool:
    """Whether a formula follows some prose (``A \\text{ for } B``), not only trailing words."""
    seen_prose = False
    for is_p, _ in seg:
        if is_p:
            seen_prose = True
        elif seen_prose:
            return True
    return False


def _ex_units_body(gold: str, pred: str, hint: str | None) -> SlotResult:
    if _plain_quantity(_rhs(pred)) is not None or "\\" not in pred + gold:
        return _ex_one(gold, pred, hint)
    gbody, gu = split_unit_suffix(gold)
    pbody, pu = split_unit_suffix(pred)
    if not pu:
        return _ex_one(gbody if gu else gold, pred, hint)
    target = gu or _hint_unit(hint)[0]
    if not target:
        return _ex_one(gbody, pbody, None)
    if same_unit(pu, target):
        return _ex_one(gbody, pbody, None)
    f = convert_unit(1.0, pu, target)
    if f is None:
        return False, f"unit mismatch ({pu} vs {target})"
    from fractions import Fraction

    fr = Fraction(f).limit_denominator(10**12)
    ok, why = _ex_one(gbody, f"\\frac{{{fr.numerator}}}{{{fr.denominator}}} \\cdot \\left({pbody}\\right)", None)
    return ok, why + f" after {pu}->{target}"


def _ex_one(gold: str, pred: str, hint: str | None = None) -> SlotResult:
    """One EX answer: compare the right-hand side after a top-level ``=`` (any later part of a
    chained gold ``a = b = c``) with the prediction's last part; plain numbers use NV rules;
    otherwise SymPy equivalence (:func:`sym_equal`) with one alias table so every symbol must
    correspond, under every reading of brace-less function arguments and the constant identities.
    A chained prediction ``v = \\frac{180}{181}c \\approx 0.9945c`` also matches when an earlier link
    is equal and every later link agrees within 1%."""
    segs, _ = split_relations(pred, frozenset({"="}))
    if len(segs) < 2:
        return _ex_link(gold, pred, hint)
    gsegs, _ = split_relations(gold, frozenset({"="}))
    links = segs[1:] if _chain_label(segs[0], gsegs[0] if len(gsegs) > 1 else "") else segs
    if len(links) == 1:
        return _ex_link(gold, links[0], hint)
    # a chain (v = \frac{180}{181}c \approx 0.9945c): every value it states must match the gold
    for k, link in enumerate(links):
        ok, why = _ex_link(gold, link, hint)
        if not ok:
            return False, f"link {k + 1} of the chain: {why}"
    return True, f"all {len(links)} links of the chain match"


def _chain_label(seg: str, gold_lhs: str = "") -> bool:
    """Whether the first segment of a chain is a label rather than a value: the gold's own left side,
    a derivative or evaluation bar (``\\frac{dr}{dt}``, ``\\left.f\\right|_{t=0}``), or symbols only
    (``v``, ``\\Delta V``, ``c(T)``, ``\\mathbf{E}(r)``) - no number, sum, fraction or root."""
    if not seg.strip():
        return False
    if gold_lhs and _labels_compatible(gold_lhs, seg):
        return True
    if re.search(r"\\right\s*\||\\[Bb]ig[gl]?\s*\||\|_\{|\\[dt]?frac\s*\{\s*(?:d|\\partial|\\mathrm\s*\{\s*d)", seg):
        return True
    bare = _SUBSCRIPT_RE.sub("", seg)
    return not re.search(r"[0-9+\-]|\\[dt]?frac|\\sqrt|\\cdot|\\times|/", bare)


def _ex_link(gold: str, pr: str, hint: str | None = None) -> SlotResult:
    reason = "not equal"
    for g in _ex_candidates(gold):
        if norm_string(g) == norm_string(pr):
            return True, "same right-hand side"
        gq, pq = _plain_quantity(g, _pred_ops(g)), _plain_quantity(pr, _pred_ops(g))
        hu = _hint_unit(hint)[0]
        if gq is not None and hu and not (gq.unit or gq.degrees or gq.percent):
            gq = replace(gq, unit=hu)
        if gq is not None and pq is not None:
            ok, why = _cmp_quantities(gq, pq)
            if ok:
                return True, why
            reason = why
            continue
        ok, why = _expr_equal_str(g, pr)
        if ok:
            return True, "symbolic match: " + why
        reason = why
    return False, reason


def _monomial(x: Any) -> bool:
    """A product of nonzero numbers, symbols and function values with numeric powers (no sum at
    the top level): a factor that cannot vanish for generic positive symbols."""
    import sympy

    if x.is_number:
        return bool(x != 0) and x.is_finite is not False
    if x.is_Symbol:
        return True
    if x.is_Pow:
        if x.exp.is_Rational and not x.exp.is_Integer:
            return True  # a root such as sqrt(1 - v^2/c^2): nonzero wherever it is defined
        return _monomial(x.base) and x.exp.is_number
    if x.is_Mul:
        return all(_monomial(a) for a in x.args)
    if isinstance(x, sympy.Function) and not isinstance(x, sympy.Abs):
        return True
    return False


def _written_denominators(al: Any, *texts: str) -> set[Any]:
    """Symbols written in a denominator (``\\frac{..}{DEN}`` or after ``/``) of the LaTeX as typed,
    before SymPy cancels anything (``\\frac{\\Delta V}{V}``), as the shared alias table's symbols."""
    import sympy

    from studybench.answers import match_brace
    from studybench.verify.latex import symbol_keys

    keys: set[str] = set()
    for text in texts:
        for m in re.finditer(r"\\[dt]?frac\s*\{", text):
            end = match_brace(text, m.end() - 1)
            if end < 0 or end >= len(text) or text[end] != "{":
                continue
            end2 = match_brace(text, end)
            if end2 > 0:
                keys |= symbol_keys(text[end + 1 : end2 - 1]) or set()
        for m in re.finditer(r"/\s*(\([^()]*\)|\\?[A-Za-z]+(?:_\{[^{}]*\}|_\w)?)", text):
            keys |= symbol_keys(m.group(1)) or set()
    return {sympy.Symbol(al.table[k]) for k in keys if k in al.table}


def _denominator_symbols(*exprs: Any) -> set[Any]:
    """Symbols that appear in a denominator of any of ``exprs``."""
    import sympy

    out: set[Any] = set()
    for e in exprs:
        try:
            den = sympy.fraction(sympy.together(e))[1]
        except Exception:  # sympy raises many types
            continue
        out |= den.free_symbols
    return out


def _factors_allowed(q: Any, allowed: set[Any] | None) -> bool:
    """Every multiplicative factor of ``q`` is a number or uses only ``allowed`` symbols."""
    import sympy

    if allowed is None:
        return True
    num, den = sympy.fraction(q)
    for part in (num, den):
        for f in sympy.Mul.make_args(part):
            if f.free_symbols and not f.free_symbols <= allowed:
                return False
    return True


def _monomial_factor(dg: Any, dp: Any, forbidden: Any = (), allowed: set[Any] | None = None) -> bool:
    """Whether ``dg / dp`` simplifies to a monomial (:func:`_monomial`) free of ``forbidden``
    symbols and built only from ``allowed`` symbols (when given): the two equations differ by a
    nonzero factor such as ``2m`` or ``T`` that clears a denominator, never by a factor that can
    vanish such as ``x`` in ``x(x^2 + y^2) = x R^2``."""
    import sympy

    try:
        ratio = dg / dp
        roots = sorted(
            {a for a in ratio.atoms(sympy.Pow) if a.exp.is_Rational and not a.exp.is_Integer and a.base.free_symbols},
            key=sympy.default_sort_key,
        )
        # roots become opaque generators, so that sqrt(1 - v^2/c^2) cancels as a factor
        variants = [ratio]
        if roots:
            variants.append(ratio.xreplace({r: sympy.Symbol(f"_root{i}", positive=True) for i, r in enumerate(roots)}))
        for r in variants:
            q = sympy.cancel(sympy.together(r))
            if forbidden and q.free_symbols & set(forbidden):
                continue
            num, den = sympy.fraction(q)
            if _monomial(num) and _monomial(den) and _factors_allowed(q.xreplace({v: k for k, v in zip(roots, [sympy.Symbol(f"_root{i}", positive=True) for i in range(len(roots))], strict=True)}) if roots else q, allowed):
                return True
        return False
    except Exception:  # sympy raises many types
        return False


def _eq_diff_ratio(
    g_l: Any, g_r: Any, p_l: Any, p_r: Any, forbidden: Any = (), tol: float | None = None, extra_allowed: Any = None
) -> tuple[bool | None, str]:
    """Whether (g_l - g_r) / (p_l - p_r) is a finite nonzero constant, or a nonzero monomial factor
    (``2m``, ``1/T``; never one containing the ``forbidden`` symbols, the gold's isolated left side).
    Any side that is or contains nan / zoo / +-oo never matches; the ratio must be finite and nonzero
    at every sample point."""
    import sympy

    dg = _replace_undef(g_l - g_r)
    dp = _replace_undef(p_l - p_r)
    if not isinstance(dg, sympy.Expr) or not isinstance(dp, sympy.Expr):
        return None, "not expressions"
    if _nonfinite(dg, dp, g_l, g_r, p_l, p_r):
        return False, "equation side not finite"
    if tol is None:
        tol = 0.01 if _has_float(dg) else 1e-6
    syms = sorted(dg.free_symbols | dp.free_symbols, key=str)
    ratios = []
    for pt in _points(syms, 8):
        a, b = _num(dg, pt), _num(dp, pt)
        if a is None or b is None:
            continue
        if abs(b) < 1e-300:
            if abs(a) < 1e-300:
                continue
            return False, "pred equation holds where gold does not"
        r = a / b
        if not (math.isfinite(r.real) and math.isfinite(r.imag)):
            continue
        ratios.append(r)
    if len(ratios) >= 3:
        r0 = ratios[0]
        if abs(r0) < 1e-12:
            return False, "gold equation holds where pred does not"
        if all(_close(r, r0, tol) for r in ratios):
            return True, "equations proportional"
        allowed = _denominator_symbols(g_l, g_r, p_l, p_r) | set(extra_allowed or ())
        if all(abs(r) > 1e-12 for r in ratios) and _monomial_factor(dg, dp, forbidden, allowed):
            return True, "equations equal up to a nonzero factor (clearing a denominator)"
        return False, "equations not proportional"
    try:
        q = sympy.simplify(dg / dp)
        if q.is_number and q.is_finite is True and q.is_zero is False and not _nonfinite(q):
            return True, "equations proportional (simplify)"
    except Exception:  # sympy raises many types
        return None, "simplify failed"
    return False, "not shown equivalent"


def _single_atom(lhs: str) -> bool:
    """A short isolated left side such as ``v``, ``v_0``, ``\\omega'``, ``T_{\\mathrm{new}}``."""
    try:
        al = new_aliases()
        e = to_sympy(lhs, al)
    except LatexError:
        return False
    import sympy

    return isinstance(e, sympy.Symbol)


_ENV = re.compile(
    r"\\(?:begin|end)\s*\{\s*(?:aligned|align\*?|alignat\*?|gathered|gather\*?|split|eqnarray\*?|array|cases)\s*\}(?:\s*\{[^{}]*\})?"
)
_MATRIX_ENV = re.compile(r"\\begin\s*\{\s*[pbBvV]?matrix")
_QUAD_SPLIT = re.compile(r"\\q?quad(?![A-Za-z])|\\text\s*\{\s*(?:and|,|;)\s*\}|\\(?:text|mbox)\s*\{\s*,?\s*and\s*\}")
_COLLECTIVE = re.compile(r"_\{\s*([^{}]{1,20}?,[^{}]{1,20}?)\s*\}")


def _flatten_env(s: str) -> str:
    """``\\begin{aligned} a &= b, \\\\ c &= d \\end{aligned}`` -> ``a = b, , c = d``: the rows of an
    alignment environment are separate answers (matrices keep their rows)."""
    if "\\begin" not in s or _MATRIX_ENV.search(s):
        return s
    t = _ENV.sub(" ", s)
    t = re.sub(r"\\\\(?:\[[^\]]{0,12}\])?", ",", t)
    return re.sub(r"[ \t\n]+", " ", t.replace("&", " "))


def _split_quad(p: str) -> list[str]:
    """``y' = y \\quad z' = z`` (two equations joined by spacing or "and") -> two parts."""
    if len(split_relations(p, frozenset({"="}))[0]) < 3 or not _QUAD_SPLIT.search(p):
        return [p]
    pieces = [x.strip() for x in _QUAD_SPLIT.split(p) if x.strip().strip(",;")]
    if len(pieces) > 1 and all("=" in x for x in pieces):
        return pieces
    return [p]


def answer_parts(s: str) -> list[list[str]]:
    """The parts one box lists: groups separated by top-level ``;``, each a list of top-level
    comma-separated parts (alignment rows count as parts; equations joined by ``\\quad`` or "and"
    are two parts). Brackets keep tuples and intervals whole. Never raises."""
    t = _flatten_env(s).strip().rstrip(".")
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
    """``^{3}P_{2,1,0}`` -> ``^{3}P_{2}``, ``^{3}P_{1}``, ``^{3}P_{0}`` (a subscript list names several
    levels)."""
    out = []
    for p in parts:
        m = _COLLECTIVE.search(p)
        items = m.group(1).split(",") if m else []
        if m and 1 < len(items) <= 8 and all(0 < len(x.strip()) <= 4 for x in items):
            out.extend(p[: m.start()] + "_{" + x.strip() + "}" + p[m.end() :] for x in items)
        else:
            out.append(p)
    return out


def _label(p: str) -> tuple[str, str] | None:
    """``(label, value)`` of a part written ``label = value`` whose label is not a number."""
    segs, _ = split_relations(p, frozenset({"="}))
    if len(segs) < 2 or not segs[0] or quantity_candidates(segs[0]):
        return None
    return segs[0], segs[-1]


def _labelled(one: Callable[[str, str], SlotResult], equations: bool) -> Callable[[str, str], SlotResult]:
    """Wrap a part judge: when both parts carry labels (``E_1 = ...``), the labels must agree
    (``E_1 = a, E_2 = b`` never matches ``E_1 = b, E_2 = a``)."""

    def fn(g: str, p: str) -> SlotResult:
        gl, pl = _label(g), _label(p)
        if not equations and gl is not None and pl is not None and not _same_lhs(gl[0], pl[0]):
            return False, "different label"
        return one(g, p)

    return fn


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
    """Prediction term symbols rewritten as groups of quantum numbers when the gold lists its
    states as ``L=.., S=.., J=..`` groups."""
    labels = {(_label(x) or ("",))[0].strip() for g in gg for x in g}
    if len(gg) < 1 or not labels or not labels <= {"L", "S", "J"}:
        return None
    flat = [x for g in pg for x in g]
    conv = [_term_as_quantum_numbers(x) for x in flat]
    if not conv or any(c is None for c in conv):
        return None
    return [c.split(", ") for c in conv if c is not None]


def judge_parts(gold: str, pred: str, one: Callable[[str, str], SlotResult], equations: bool = False) -> SlotResult | None:
    """Compare two boxes part by part (:func:`answer_parts`) when the gold lists several answers;
    ``None`` when the gold is a single answer (the caller judges it whole).

    Groups (``;``) are matched order-free, parts within a group order-free with labels respected
    (:func:`_labelled`); a collective subscript (``P_{2,1,0}``) may be written out."""
    gg, pg = answer_parts(gold), answer_parts(pred)
    terms = _terms_to_groups(gg, pg)
    if terms is not None:
        pg = terms
    gflat = [x for g in gg for x in g]
    pflat = [x for g in pg for x in g]
    if len(gflat) <= 1:
        return None
    fn = _labelled(one, equations)
    if len(gg) > 1 and len(gg) == len(pg):
        # groups (one state per group: "n=1, l=0; n=2, l=1") must match as wholes
        return _match_unordered(
            [";".join(g) for g in gg], [";".join(p) for p in pg],
            lambda a, b: _match_unordered(a.split(";"), b.split(";"), fn) if a.count(";") == b.count(";") else (False, "group sizes differ"),
        )
    if len(gflat) != len(pflat):
        gflat, pflat = _expand_collective(gflat), _expand_collective(pflat)
    if len(gflat) != len(pflat):
        return False, f"expected {len(gflat)} parts, got {len(pflat)}"
    if not (equations or (set_like(gflat) and set_like(pflat))):
        # a list of numbers or plain expressions (or an unlabelled prediction) is read in order
        # (parts (a), (b); a ranking)
        return _match_in_order(gflat, pflat, fn)
    res = _match_unordered(gflat, pflat, fn)
    if res[0] is False and not equations:
        # labels written differently (\Delta_\psi \hat{x} vs \Delta x): in the gold's order, with
        # labels equal up to subscripts and vector markup, values compared
        ordered = _ordered_loose(gflat, pflat, one)
        if ordered is not None:
            return ordered
    return res


_MARKUP_RE = re.compile(r"\\(?:hat|vec|mathbf|boldsymbol|bm|widehat|overrightarrow)(?![A-Za-z])")
_SUBSCRIPT_RE = re.compile(r"_\{[^{}]*\}|_\\?[A-Za-z0-9]+")


def _labels_compatible(a: str, b: str) -> bool:
    """Two left sides name the same quantity: equal (as strings or symbolically), equal up to vector
    markup, or equal once the subscripts of the one side that has them are dropped (``x_0`` and
    ``x``; never ``v_{max}`` and ``v_{min}``, never ``T_1`` and ``T_2``)."""
    if _same_lhs(a, b):
        return True

    def plain(x: str, drop_sub: bool) -> str:
        t = _MARKUP_RE.sub("", norm_string(x))
        if drop_sub:
            t = _SUBSCRIPT_RE.sub("", t)
        return t.replace("{", "").replace("}", "").replace(" ", "")

    sa, sb = bool(_SUBSCRIPT_RE.search(norm_string(a))), bool(_SUBSCRIPT_RE.search(norm_string(b)))
    if plain(a, False) == plain(b, False):
        return True
    if sa != sb:
        return plain(a, sa) == plain(b, sb)
    return False


def _loose_label(s: str) -> str:
    t = norm_string(s)
    t = re.sub(r"_\{[^{}]*\}|_\\?[A-Za-z0-9]+", "", t)
    t = re.sub(r"\\(?:hat|vec|mathbf|boldsymbol|bm|widehat|overrightarrow)(?![A-Za-z])", "", t)
    return t.replace("{", "").replace("}", "").replace(" ", "")


def _ordered_loose(golds: list[str], preds: list[str], one: Callable[[str, str], SlotResult]) -> SlotResult | None:
    glabels = [_label(g) for g in golds]
    plabels = [_label(p) for p in preds]
    if any(x is None for x in glabels + plabels):
        return None
    gset = sorted(norm_string(x[0]) for x in glabels if x)
    pset = sorted(norm_string(x[0]) for x in plabels if x)
    if gset == pset or len({_loose_label(x[0]) for x in glabels if x}) < len(glabels):
        return None  # the same labels (then they decide) or labels that only subscripts tell apart
    for _g, _p, gl, pl in zip(golds, preds, glabels, plabels, strict=True):
        if gl is None or pl is None or not _labels_compatible(gl[0], pl[0]):
            return None
        ok, why = one(gl[1], pl[1])
        if not ok:
            return None
    return True, f"all {len(golds)} labelled parts match in order"


def judge_eq(gold: str, pred: str) -> SlotResult:
    """EQ: same solution set. Several comma-separated equations are matched order-free; a gold
    with a numeric right side compares the left side as a string/expression and the value by NV
    rules; otherwise ``lhs - rhs`` of both must be proportional by a nonzero constant. A prediction
    without ``=`` is compared with the right side when the gold's left side is one symbol."""
    res = judge_parts(gold, pred, _eq_one, equations=True)
    if res is not None:
        return res
    return _eq_one(_flatten_env(gold), _flatten_env(pred))


def _eq_one(gold: str, pred: str) -> SlotResult:
    """One EQ answer; a trailing remark is dropped and a stated condition (``\\text{ for } r < R``)
    must match the gold's (:func:`split_condition`)."""
    gold, pred = strip_remark(gold), strip_remark(pred)
    res = _split_conditions(gold, pred)
    if isinstance(res[0], bool):
        return res  # type: ignore[return-value]
    return _eq_plain(res[0], res[1])


_PM = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")


def _pm_variants(s: str) -> list[str]:
    """``x = \\pm a`` as the two equations ``x = +a`` and ``x = -a`` (first ``\\pm`` only)."""
    m = _PM.search(s)
    if not m:
        return [s]
    plus, minus = ("+", "-") if m.group(0) == "\\pm" else ("-", "+")
    return [s[: m.start()] + plus + s[m.end() :], s[: m.start()] + minus + s[m.end() :]]


def _eq_plain(gold: str, pred: str) -> SlotResult:
    if _PM.search(gold) or _PM.search(pred):
        # x = \pm a: the two solutions, matched as a set (a prediction must state both)
        gv, pv = _pm_variants(gold), _pm_variants(pred)
        if len(gv) != len(pv) or len(_PM.findall(gold)) > 1 or len(_PM.findall(pred)) > 1:
            return False, "the +- solutions differ"
        res = _match_unordered(gv, pv, _eq_plain)
        return (res[0], "both +- solutions match") if res[0] else res
    gsegs, _ = split_relations(gold, frozenset({"="}))
    psegs, _ = split_relations(pred, frozenset({"="}))
    if len(psegs) == 2 and _plain_quantity(psegs[0]) is not None and _plain_quantity(psegs[1]) is None:
        psegs = [psegs[1], psegs[0]]  # 64.1^\circ = \varphi: the value written first
    if len(gsegs) < 2 or not gsegs[0]:
        return judge_ex(gold, pred)
    if len(psegs) < 2:
        if _single_atom(gsegs[0]):
            return judge_ex(gold, pred)
        return False, "prediction is not an equation"
    if any(not x for x in psegs):
        return False, "empty side in the prediction"
    gq = _plain_quantity(gsegs[-1])
    if gq is not None:
        res = _eq_valued(gsegs, psegs)
        if res[0] or res[1] != "different left side" or gq.unit:
            return res
        # "m x'' - k x = 0" against "m x'' = k x": the same equation with terms moved
    # symbolic: every link the prediction states must be an equation equivalent to a gold link
    reason = "not equivalent"
    for j in range(1, len(psegs)):
        hit = False
        for k in range(1, len(gsegs)):
            try:
                al = new_aliases(gold, pred)
                gl, pl = to_sympy(gsegs[0], al), to_sympy(psegs[0], al)
                grs, prs = to_sympy_readings(gsegs[k], al, gold=True), to_sympy_readings(psegs[j], al)
            except LatexError as e:
                reason = str(e)
                continue
            lhs_syms = gl.free_symbols if _single_atom(gsegs[0]) and hasattr(gl, "free_symbols") else set()
            for gr in grs:
                for pr in prs:
                    (gl2, gr2), (pl2, pr2), applied = reconcile([gl, gr], [pl, pr], al)
                    if not _has_float(gl2, gr2):
                        pl2, pr2 = _rationalize(pl2, pred), _rationalize(pr2, pred)
                    t = 0.01 if _has_float(gl2, gr2) else (written_tolerance(pred) if _has_float(pl2, pr2) else 1e-6)
                    ok, why = _eq_diff_ratio(gl2, gr2, pl2, pr2, lhs_syms, t, _written_denominators(al, gold, pred))
                    reason = why + (f" (using {', '.join(applied)})" if applied and ok else "")
                    if ok:
                        hit = True
                        break
                if hit:
                    break
            if hit:
                break
        if not hit:
            return False, reason if len(psegs) == 2 else f"link {j}: {reason}"
    return True, reason


def _same_lhs(glhs: str, plhs: str) -> bool:
    if norm_string(glhs) == norm_string(plhs):
        return True
    ok, _ = _expr_equal_str(glhs, plhs)
    return ok is True


def _pred_value(p: str) -> Quantity | None:
    pq = quantity_candidates(p, _EQ_ONLY)
    if len(pq) == 1:
        return pq[0]
    if not pq and _plain_value_text(p) and not _ODD_TEXT_GROUP.search(p):
        try:
            pv = _value(to_sympy(p))
        except LatexError:
            return None
        if pv is not None and abs(pv.imag) < 1e-12:
            return Quantity(pv.real)
    return None


def _link_equal(g: str, p: str) -> bool:
    """One link of a chained answer (``A = B = C``): NV rules when the gold link is a plain
    quantity, else the same normalised string or SymPy equality."""
    gq = _plain_quantity(g)
    if gq is not None:
        pq = _pred_value(p)
        return pq is not None and _cmp_quantities(gq, pq)[0]
    if norm_string(g) == norm_string(p):
        return True
    ok, _ = _expr_equal_str(g, p)
    return ok is True


def _eq_valued(gsegs: list[str], psegs: list[str]) -> SlotResult:
    """EQ whose gold ends in a quantity (``T_1 = 279\\,K``, ``L = 2v t = 6.4\\,cm``): the same left
    side, the prediction's final value matching the gold's by NV rules, and every other link the
    prediction states matching a gold link. Never proportionality (``T_1 = 292.95`` is no multiple
    of a right answer)."""
    if not _same_lhs(gsegs[0], psegs[0]):
        return False, "different left side"
    gq = _plain_quantity(gsegs[-1])
    if gq is None:
        return False, "gold has no value"
    pq = _pred_value(psegs[-1])
    if pq is None:
        return False, "no value on the right side"
    ok, why = _cmp_quantities(gq, pq)
    if not ok:
        return False, why
    for link in psegs[1:-1]:
        if not any(_link_equal(g, link) for g in gsegs[1:]):
            return False, "an intermediate link does not match"
    return True, why


def _sym_pairs(g: str, p: str) -> list[tuple[Any, Any, list[str], Any]]:
    """Every (gold reading, prediction reading) pair of two LaTeX strings, built with one alias
    table and reconciled by the constant identities (:func:`studybench.verify.identities.reconcile`).
    Raises LatexError when either side has no reading."""
    al = new_aliases(g, p)
    gs = to_sympy_readings(g, al, gold=True)
    ps = to_sympy_readings(p, al)
    out = []
    for ge in gs:
        for pe in ps:
            a, b, applied = reconcile([ge], [pe], al)
            out.append((a[0], b[0] if _has_float(a[0]) else _rationalize(b[0], p), applied, b[0]))
    return out


def _decimals_bracket(gold: Any, pred: Any, text: str) -> bool:
    """Whether the prediction's decimals, each read as the interval of its written precision
    (``1.414`` is [1.4135, 1.4145]), bracket the gold: at every sample point the gold's value lies
    between the prediction's values at the interval corners. ``\\sqrt{2}`` matches ``1.414``;
    ``\\sin 2\\varphi`` never matches ``\\sin 2.1\\varphi``. At most four decimals."""
    import itertools

    import sympy

    if not isinstance(gold, sympy.Expr) or not isinstance(pred, sympy.Expr):
        return False
    places: dict[float, int] = {}
    for m in _DECIMAL.finditer(text):
        places[round(float(m.group(0)), 9)] = len(m.group(2))
    floats = sorted(pred.atoms(sympy.Float), key=float)
    if not floats or len(floats) > 4:
        return False
    deltas = []
    for f in floats:
        d = places.get(round(abs(float(f)), 9))
        if d is None:
            return False
        # written precision, but never more than 2% of the decimal (0.2 is no rounding of 1/4)
        deltas.append(min(0.5 * 10.0 ** (-d), MAX_DECIMAL_REL * abs(float(f))))
    corners = [
        pred.xreplace({f: sympy.Float(float(f) + s * dlt) for f, s, dlt in zip(floats, signs, deltas, strict=True)})
        for signs in itertools.product((-1, 1), repeat=len(floats))
    ]
    syms = sorted(gold.free_symbols | pred.free_symbols, key=str)
    good = 0
    for pt in _points(syms):
        g = _num(gold, pt)
        vals = [_num(c, pt) for c in corners]
        if g is None or any(v is None for v in vals) or abs(g.imag) > 1e-9 * max(1.0, abs(g)):
            continue
        reals = [v.real for v in vals if v is not None]
        if any(abs(v.imag) > 1e-9 * max(1.0, abs(v)) for v in vals if v is not None):
            return False
        slack = 1e-12 * max(1.0, abs(g.real))
        if not (min(reals) - slack <= g.real <= max(reals) + slack):
            return False
        good += 1
        if not syms:
            break
    return good >= (1 if not syms else 3)


def written_tolerance(text: str) -> float:
    """Relative tolerance a prediction's decimals allow: half a unit in the last written place of
    its least precise decimal, relative to its value (``0.9945`` -> 5e-5, ``0.33`` -> 1.5%), at most
    1%; 1e-6 when it writes no decimal. Used when the gold has no decimals, so that a rounded
    coefficient matches while a changed constant (``1.05`` for ``1``) does not."""
    tol = 1e-6
    for m in _DECIMAL.finditer(text):
        v = float(m.group(0))
        if v:
            tol = max(tol, 0.5 * 10.0 ** (-len(m.group(2))) / v)
    return min(tol, 0.01)


def _expr_equal_str(a: str, b: str, tol: float | None = None) -> tuple[bool | None, str]:
    """SymPy equality of two LaTeX strings under any reading pair (see :func:`_sym_pairs`);
    ``tol`` overrides the relative tolerance of :func:`sym_equal`."""
    try:
        pairs = _sym_pairs(a, b)
    except LatexError as e:
        return None, str(e)
    res: tuple[bool | None, str] = (False, "not equal")
    for x, y, applied, y_raw in pairs:
        t = tol if tol is not None else (None if _has_float(x) or not _has_float(y) else written_tolerance(b))
        if tol is None and not _has_float(x) and _has_float(y_raw) and _decimals_bracket(x, y_raw, b):
            return True, "the gold lies within the prediction's written precision" + (f" (using {', '.join(applied)})" if applied else "")
        ok, why = sym_equal(x, y, t)
        if ok:
            return True, why + (f" (using {', '.join(applied)})" if applied else "")
        res = (ok, why)
    return res


def _interval_parts(obj: Any) -> list[tuple[Any, Any, bool, bool]] | None:
    import sympy

    if isinstance(obj, sympy.Interval):
        return [(obj.start, obj.end, bool(obj.left_open), bool(obj.right_open))]
    if isinstance(obj, sympy.Union):
        out = []
        for a in obj.args:
            p = _interval_parts(a)
            if p is None:
                return None
            out.extend(p)
        return out
    return None


def _relations(obj: Any) -> list[tuple[bool, Any]] | None:
    """Relational / And of relationals as ``(strict, expr)`` meaning ``expr > 0`` (or >= 0)."""
    import sympy

    if isinstance(obj, sympy.And):
        out = []
        for a in obj.args:
            r = _relations(a)
            if r is None:
                return None
            out.extend(r)
        return out
    if isinstance(obj, (sympy.StrictLessThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.GreaterThan)):
        strict = isinstance(obj, (sympy.StrictLessThan, sympy.StrictGreaterThan))
        if isinstance(obj, (sympy.StrictLessThan, sympy.LessThan)):
            return [(strict, obj.rhs - obj.lhs)]
        return [(strict, obj.lhs - obj.rhs)]
    return None


def _positive_multiple(a: Any, b: Any) -> bool:
    import sympy

    if not isinstance(a, sympy.Expr) or not isinstance(b, sympy.Expr):
        return False
    tol = 0.01 if _has_float(a) else 1e-6
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    ratios = []
    for pt in _points(syms, 8) + (_points(syms, 8, signed=True) if _has_abs(a, b) else []):
        x, y = _num(a, pt), _num(b, pt)
        if x is None or y is None or abs(y) < 1e-300:
            continue
        ratios.append(x / y)
    if not ratios or (syms and len(ratios) < 3):
        return False
    r0 = ratios[0]
    if abs(r0.imag) < 1e-9 and r0.real > 0 and all(_close(r, r0, tol) for r in ratios):
        return True
    # scaled by a positive monomial (both sides multiplied by 4 m^2): positive at every sample
    # point and a product of powers of (positive) symbols
    if not all(abs(r.imag) < 1e-9 and r.real > 0 for r in ratios):
        return False
    if not _monomial_factor(a, b):
        return False
    try:
        q = sympy.cancel(sympy.together(a / b))
        return not q.atoms(sympy.Function) and (q.as_coeff_Mul()[0] > 0)
    except Exception:  # sympy raises many types
        return False


def _relation_candidates(obj: Any) -> list[tuple[Any, Any, Any, bool, bool]]:
    """Readings of an inequality as ``(variable expression, start, end, left_open, right_open)``:
    ``X >= a`` gives ``(X, a, oo, False, True)`` and also ``(a, -oo, X, True, False)`` (either side
    may be the variable); a chain ``a < X < b`` gives ``(X, a, b, True, True)``."""
    import sympy

    out = []
    rels = list(obj.args) if isinstance(obj, sympy.And) else [obj]
    norm = []
    for r in rels:
        if isinstance(r, (sympy.StrictLessThan, sympy.LessThan)):
            norm.append((r.lhs, r.rhs, isinstance(r, sympy.StrictLessThan)))  # lhs < rhs
        elif isinstance(r, (sympy.StrictGreaterThan, sympy.GreaterThan)):
            norm.append((r.rhs, r.lhs, isinstance(r, sympy.StrictGreaterThan)))
        else:
            return []
    if len(norm) == 1:
        small, big, strict = norm[0]
        out.append((big, small, sympy.oo, strict, True))
        out.append((small, -sympy.oo, big, True, strict))
    elif len(norm) == 2:
        (s1, b1, st1), (s2, b2, st2) = norm
        if b1 == s2:
            out.append((b1, s1, b2, st1, st2))
        elif b2 == s1:
            out.append((b2, s2, b1, st2, st1))
    return out


def _bound_equal(x: Any, y: Any) -> bool:
    """Interval bounds equal: numbers by the NV tolerance (``\\frac{\\sqrt3}{2}`` vs ``0.866``),
    expressions by :func:`sym_equal`."""
    vx, vy = _value(x), _value(y)
    if vx is not None and vy is not None and abs(vx.imag) < 1e-12 and abs(vy.imag) < 1e-12:
        return close_enough(vy.real, vx.real)
    return sym_equal(x, y)[0] is True


def _interval_vs_relation(iv: list[tuple[Any, Any, bool, bool]], rel: Any) -> bool:
    """A single interval against an inequality whose variable side is any expression
    (``[1/n_1, \\infty)`` against ``r/R \\ge 1/n_1``)."""
    if len(iv) != 1:
        return False
    gs, ge, glo, gro = iv[0]
    for _, ps, pe, plo, pro in _relation_candidates(rel):
        if (glo, gro) != (plo, pro):
            continue
        if all(x == y or _bound_equal(x, y) for x, y in ((gs, ps), (ge, pe))):
            return True
    return False


def _relation_intervals(obj: Any) -> list[tuple[Any, Any, bool, bool]] | None:
    """Intervals of an inequality (or a chain of them) in exactly one variable, else None."""
    import sympy

    if not isinstance(obj, (sympy.And, sympy.StrictLessThan, sympy.StrictGreaterThan, sympy.LessThan, sympy.GreaterThan)):
        return None
    if len(obj.free_symbols) != 1 or _relations(obj) is None:
        return None
    try:
        return _interval_parts(obj.as_set())
    except Exception:  # sympy raises many types on odd input
        return None


_IN_SET = re.compile(r"\\in(?![A-Za-z])")


def _membership(s: str) -> tuple[str, str] | None:
    """``(variable, interval)`` of ``b \\in (0, 2m)``, else None."""
    parts = _IN_SET.split(s)
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        return None
    return parts[0].strip(), parts[1].strip()


def _in_membership(gold: str, pred: str) -> SlotResult | None:
    """``b \\in (0, X)`` on one side: its interval against the other side's interval, or against the
    other side's inequality in ``b``, checked numerically with positive symbols (the inequality
    must hold inside the interval and fail outside it, for ``b > 0``, at several parameter points).
    None when neither side is a membership."""
    import sympy

    gm, pm = _membership(gold), _membership(pred)
    if gm is None and pm is None:
        return None
    if gm is not None and pm is not None:
        return judge_in(gm[1], pm[1]) if _same_lhs(gm[0], pm[0]) else (False, "different variable")
    var_text, interval = pm if pm is not None else gm  # type: ignore[misc]
    other = gold if pm is not None else pred
    try:
        al = new_aliases(interval, other, var_text)
        iv = _interval_parts(to_sympy(interval, al))
        rel = to_sympy(other, al)
        var = to_sympy(var_text, al)
    except LatexError as e:
        return False, str(e)
    if iv is None:
        return False, "not an interval"
    if _interval_parts(rel) is not None:
        return judge_in(other, interval) if pm is not None else judge_in(interval, other)
    if len(iv) != 1 or not isinstance(var, sympy.Symbol) or _relations(rel) is None or var not in rel.free_symbols:
        return False, "cannot compare the membership with the other side"
    lo, hi, _, _ = iv[0]
    params = sorted((rel.free_symbols | lo.free_symbols | hi.free_symbols) - {var}, key=str)
    checked = 0
    for pt in _points(params, 4):
        a = complex(0.0) if lo == -sympy.oo else _num(lo, pt)
        b = None if hi == sympy.oo else _num(hi, pt)
        if a is None or abs(a.imag) > 1e-9 or (b is not None and (abs(b.imag) > 1e-9 or not a.real < b.real)):
            continue
        a_r = a.real
        if a_r < 0 or lo == -sympy.oo:
            return False, "cannot compare: the interval reaches negative values"
        exact = {k: sympy.Rational(str(v)) for k, v in pt.items()}  # exact, so the end point is exact
        for end, closed, val in ((lo, not iv[0][2], a), (hi, not iv[0][3], b)):
            if val is None or end in (sympy.oo, -sympy.oo) or val.real <= 0:
                continue
            try:
                at_end = rel.xreplace({**exact, var: end.xreplace(exact)})
            except Exception:  # sympy raises many types
                return False, "cannot evaluate the inequality"
            if at_end in (sympy.true, sympy.false) and bool(at_end) is not closed:
                return False, "the end points differ (open vs closed)"
        if b is None:  # (a, oo)
            inside = [a_r + f * (abs(a_r) + 1.0) for f in (0.02, 0.5, 3.0, 100.0)]
            outside = [a_r * f for f in (0.5, 0.97)] if a_r > 0 else []
        else:
            b_r = b.real
            inside = [a_r + f * (b_r - a_r) for f in (0.02, 0.3, 0.7, 0.98)]
            outside = [b_r * f for f in (1.03, 1.5, 3.0)] + ([a_r * f for f in (0.5, 0.97)] if a_r > 0 else [])
        for x, want in [(x, True) for x in inside] + [(x, False) for x in outside]:
            if not (0 < x < 1e300):
                continue
            try:
                got = rel.xreplace({**pt, var: sympy.Float(x)})
            except Exception:  # sympy raises many types
                return False, "cannot evaluate the inequality"
            if got not in (sympy.true, sympy.false) or bool(got) is not want:
                return False, "the inequality and the interval differ"
        checked += 1
    if checked < 2:
        return False, "cannot compare the membership with the other side"
    return True, "same set for positive values (checked numerically)"


def judge_in(gold: str, pred: str) -> SlotResult:
    """IN: intervals (bracket types must match, bounds equal by EX rules, unions part-wise in order)
    or inequalities (same strictness; each gold relation matched by a prediction relation whose
    ``big - small`` is a positive multiple); ``b \\in (0, X)`` against an inequality in ``b`` is
    compared after solving the inequality with positive symbols."""
    mem = _in_membership(gold, pred)
    if mem is not None:
        return mem
    try:
        al = new_aliases(gold, pred)
        go = to_sympy(gold, al)
        po = to_sympy(pred, al)
    except LatexError as e:
        return False, str(e)
    (go,), (po,), _ = reconcile([go], [po], al)
    gi, pi = _interval_parts(go), _interval_parts(po)
    if gi is not None and pi is None and _relations(po) is not None and _interval_vs_relation(gi, po):
        return True, "interval written as an inequality"
    if pi is not None and gi is None and _relations(go) is not None and _interval_vs_relation(pi, go):
        return True, "inequality written as an interval"
    if (gi is None) != (pi is None):
        # interval against inequalities in one variable: x > 2 is (2, oo)
        if gi is None:
            gi = _relation_intervals(go)
        else:
            pi = _relation_intervals(po)
    if gi is not None and pi is not None:
        if len(gi) != len(pi):
            return False, "different number of intervals"
        for (gs, ge, glo, gro), (ps, pe, plo, pro) in zip(gi, pi, strict=True):
            if (glo, gro) != (plo, pro):
                return False, "bracket types differ"
            for x, y in ((gs, ps), (ge, pe)):
                if x != y and not _bound_equal(x, y):
                    return False, "bounds differ"
        return True, "same intervals"
    gi2, pi2 = _relation_intervals(go), _relation_intervals(po)
    if gi2 is not None and pi2 is not None and go.free_symbols == po.free_symbols:
        # x > \frac{\sqrt3}{2} against x > 0.866: the same one-variable set, bounds by NV rules
        if len(gi2) == len(pi2) and all(
            (glo, gro) == (plo, pro) and all(a == b or _bound_equal(a, b) for a, b in ((gs, ps), (ge, pe)))
            for (gs, ge, glo, gro), (ps, pe, plo, pro) in zip(gi2, pi2, strict=True)
        ):
            return True, "same set"
    gr, pr = _relations(go), _relations(po)
    if gr is not None and pr is not None:
        if len(gr) != len(pr):
            return False, "different number of inequalities"
        used: set[int] = set()
        for gs, ge in gr:
            hit = None
            for j, (ps, pe) in enumerate(pr):
                if j not in used and ps == gs and _positive_multiple(ge, pe):
                    hit = j
                    break
            if hit is None:
                return False, "inequalities differ"
            used.add(hit)
        return True, "same inequalities"
    return False, "cannot compare these interval forms"


def full_slot(gold: str, pred: str, t: AnswerType, hint: str | None = None) -> SlotResult:
    """Complete judgement of one slot (fast tier, then the per-type judge). ``hint`` is the unit of a
    unitless gold (:func:`split_hints`). Worker side; never raises (internal errors give
    ``(False, reason)``)."""
    try:
        ok, why = fast_slot(gold, pred, t)
        if ok is not None:
            return ok, why
        if len(pred) > MAX_SYMBOLIC_LEN:
            return False, "answer too long for symbolic comparison"
        if t is AnswerType.NV:
            return judge_nv(gold, pred, hint)
        if t is AnswerType.EX:
            return judge_ex(gold, pred, hint)
        if t is AnswerType.EQ:
            return judge_eq(gold, pred)
        if t is AnswerType.IN:
            return judge_in(gold, pred)
        if t in (AnswerType.QL, AnswerType.TUP, AnswerType.ALT):
            return judge_ex(gold, pred)
        return False, "no rule for this type"
    except RecursionError:
        return False, "expression too deep"
    except Exception as e:  # never let a parser error escape
        return False, f"internal error ({type(e).__name__})"


# ---------------------------------------------------------------------------------------------
# compound dispatch


_PRESCRIPT = re.compile(r"^\s*(?:\{\s*\})?\s*\^")


def set_like(parts: list[str]) -> bool:
    """Whether several answers form a set that may be listed in any order: every part is an
    equation or a labelled value (``E_1 = ...``), or a state written with a pre-superscript
    (``^{3}P_{2}``, ``^{4}_{2}He``). A list of plain numbers, letters or unlabelled expressions is a
    sequence (parts in order, a ranking)."""
    if not parts:
        return False
    return all(_label(p) is not None or "=" in split_relations(p, frozenset({"="}))[1] for p in parts) or all(
        _PRESCRIPT.match(p) for p in parts
    )


def _match_in_order(golds: list[str], preds: list[str], fn: Callable[[str, str], SlotResult]) -> SlotResult:
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


def _match_unordered(golds: list[str], preds: list[str], fn: Callable[[str, str], SlotResult]) -> SlotResult:
    """Order-free matching of equally many gold and predicted answers: every gold answer must be
    matched by a different prediction (a perfect bipartite matching). ``None`` when only undecided
    pairs could complete the matching."""
    n = len(golds)
    if n != len(preds):
        return False, f"expected {n} answers, got {len(preds)}"
    if n > 1:
        # the common case first: the answers in the gold's order
        diagonal = [fn(g, p) for g, p in zip(golds, preds, strict=True)]
        if all(d[0] is True for d in diagonal):
            return True, f"all {n} answers match"
    table: list[list[SlotResult]] = []
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


def _regroup(preds: list[str], n: int) -> list[str]:
    """Predicted boxes regrouped to ``n`` slots when the model packed several slots into one box:
    split at top-level commas, then also at top-level semicolons; unchanged when no split fits."""
    if len(preds) == n:
        return preds
    parts = [x for p in preds for x in split_top_level(p.strip().rstrip(".,;")) if x]
    if len(parts) == n:
        return parts
    parts = [y for x in parts for y in split_top_level(x, ";") if y]
    if len(parts) == n:
        return parts
    return preds


_NO_UNIT = {"", "none", "null", "-", "n/a", "dimensionless", "unitless", "1"}


def split_hints(gold_unit: Any, n: int) -> list[str | None]:
    """Per-box unit hints from a ``gold_unit`` value (PROTOCOL.md section 5, units).

    ``gold_unit`` is ``None``, one string, a comma-separated string with one entry per gold box
    (``"\\mu\\mathrm{m}, \\hbar"``; ``None`` / ``\\text{None}`` entries mean "no unit"), or a list.
    With one box and several entries the whole string goes to that box (a box listing several
    values). Returns ``n`` entries (``None`` = no hint). Never raises."""
    if gold_unit is None or n <= 0:
        return [None] * max(n, 0)
    if isinstance(gold_unit, (int, float)):
        gold_unit = str(gold_unit)
    try:
        if isinstance(gold_unit, str):
            items: list[Any] = split_top_level(gold_unit)
            if n == 1:
                items = [gold_unit]
        else:
            items = list(gold_unit)
    except Exception:  # a hint of the wrong shape is ignored
        return [None] * n
    out: list[str | None] = []
    for x in items:
        t = str(x).strip() if x is not None else ""
        out.append(None if norm_text(t) in _NO_UNIT else t)
    if len(out) == 1 and n > 1:
        out = out * n
    if len(out) != n:
        return [None] * n
    return out


def combine(
    gold_boxes: list[str],
    pred_boxes: list[str],
    at: AnswerType,
    ts: list[AnswerType],
    slot: SlotFn,
    hints: list[str | None] | None = None,
) -> SlotResult:
    """Dispatch on the answer type and combine per-slot results (see module docstring). ``hints``:
    one unit hint per gold box (:func:`split_hints`)."""
    golds = [g for g in gold_boxes]
    hs = hints if hints is not None and len(hints) == len(golds) else [None] * len(golds)
    preds = [p for p in pred_boxes if isinstance(p, str)]
    if not golds:
        return False, "no gold answer"
    if not preds:
        return False, "no final answer found"
    if at is AnswerType.TUP:
        types = ts if len(ts) == len(golds) else [AnswerType.EX] * len(golds)
        preds = _regroup(preds, len(golds))
        if len(preds) != len(golds):
            return False, f"expected {len(golds)} answers, got {len(preds)}"
        undecided = False
        for i, (g, p, t) in enumerate(zip(golds, preds, types, strict=True)):
            ok, why = slot(g, p, t, hs[i])
            if ok is False:
                return False, f"slot {i + 1} ({t.value}): {why}"
            if ok is None:
                undecided = True
        return (None, "") if undecided else (True, f"all {len(golds)} slots match")
    if at is AnswerType.ALT:
        types = ts if len(ts) == len(golds) else [AnswerType.EX] * len(golds)
        undecided = False
        if len({norm_string(p) for p in preds}) > 1:
            # several different boxes: each must be an accepted alternative (no hedging)
            verdicts = [[slot(g, p, t, h)[0] for g, t, h in zip(golds, types, hs, strict=True)] for p in preds]
            if all(any(v is True for v in row) for row in verdicts):
                return True, f"each of {len(preds)} answers is an accepted alternative"
            if all(any(v is not False for v in row) for row in verdicts):
                return None, ""
            return False, "an answer matches no alternative"
        for g, t, h in zip(golds, types, hs, strict=True):
            for p in preds:
                ok, why = slot(g, p, t, h)
                if ok:
                    return True, f"matches an alternative ({t.value}): {why}"
                if ok is None:
                    undecided = True
        # "Aries or Pisces" when both are accepted alternatives: every option named is right
        for p in preds:
            parts = _or_parts(p)
            if len(parts) < 2:
                continue
            hits = [any(slot(g, q, t, h)[0] is True for g, t, h in zip(golds, types, hs, strict=True)) for q in parts]
            if all(hits):
                return True, f"names {len(parts)} options, each an accepted alternative"
        return (None, "") if undecided else (False, "matches no alternative")
    if len(golds) == 1:
        if len({norm_string(p) for p in preds}) > 1:
            # several boxes for one slot: accepted only when every one of them is right (3 and 3.0)
            res = [slot(golds[0], p, at, hs[0]) for p in preds]
            if all(r[0] is True for r in res):
                return True, f"all {len(preds)} answers match"
            if all(r[0] is not False for r in res):
                return None, ""
            return False, f"{len(preds)} different answers for one slot"
        return slot(golds[0], preds[-1], at, hs[0])
    preds = _regroup(preds, len(golds))
    idx = [str(i) for i in range(len(golds))]  # by position: equal gold strings may carry different hints

    def by_index(i: str, p: str) -> SlotResult:
        return slot(golds[int(i)], p, at, hs[int(i)])

    if at is AnswerType.EQ or (set_like(golds) and set_like(preds)):
        return _match_unordered(idx, preds, by_index)
    return _match_in_order(idx, preds, by_index)


_OR_TEXT = re.compile(r"^\s*\\(?:text|mathrm|textrm|mbox)\s*\{([^{}]*)\}\s*$")
_OR_SPLIT = re.compile(r"\s*\\(?:text|mbox|textrm)\s*\{\s*or\s*\}\s*|\s+or\s+")


def _or_parts(p: str) -> list[str]:
    """The options of ``A or B`` (``\\text{Aries or Pisces}``, ``x = 1 \\text{ or } x = 2``); one
    part when there is no top-level "or"."""
    m = _OR_TEXT.match(p)
    if m:
        return ["\\text{" + x.strip() + "}" for x in re.split(r"\s+or\s+", m.group(1)) if x.strip()]
    parts = [x for x in _OR_SPLIT.split(p) if x.strip()]
    if any(x.count("{") != x.count("}") for x in parts):
        return [p]
    return parts


def _verdict(res: SlotResult, preds: list[str]) -> Verdict:
    ok, why = res
    word = "correct" if ok else "incorrect"
    return Verdict(bool(ok), f"{word}: {why}" if why else word, tuple(preds))


def fast_judge(
    gold_boxes: list[str], pred_boxes: list[str], answer_type: AnswerType | str, type_sequence: Any = "", gold_unit: Any = None
) -> Verdict | None:
    """The in-process fast tier: a :class:`Verdict` when string-level rules decide, else ``None``.
    Never raises (bad types give an incorrect verdict)."""
    try:
        at, ts = normalise_types(answer_type, type_sequence)
        preds = [p for p in pred_boxes if isinstance(p, str)]
        res = combine(list(gold_boxes), preds, at, ts, fast_slot, split_hints(gold_unit, len(gold_boxes)))
    except Exception as e:  # malformed types or inputs
        return Verdict(False, f"incorrect: bad input ({type(e).__name__})", tuple(p for p in pred_boxes if isinstance(p, str)))
    if res[0] is None:
        return None
    return _verdict(res, preds)


def full_judge(
    gold_boxes: list[str], pred_boxes: list[str], answer_type: AnswerType | str, type_sequence: Any = "", gold_unit: Any = None
) -> Verdict:
    """The complete judgement (worker side); ``gold_unit`` as in :func:`split_hints`. Never raises."""
    preds = [p for p in pred_boxes if isinstance(p, str)]
    try:
        at, ts = normalise_types(answer_type, type_sequence)
        res = combine(list(gold_boxes), preds, at, ts, full_slot, split_hints(gold_unit, len(gold_boxes)))
    except Exception as e:  # pragma: no cover - combine/full_slot already guard
        return Verdict(False, f"incorrect: internal error ({type(e).__name__})", tuple(preds))
    if res[0] is None:
        res = (False, "undecided")
    return _verdict(res, preds)


def check_gold_parsable_local(box: str, answer_type: AnswerType | str) -> str | None:
    """Whether the full tier can read a gold box for a primitive type (worker side).

    Returns ``None`` when parsable, else a short reason. Never raises.
    """
    try:
        at, _ = normalise_types(answer_type, "")
        if not box.strip():
            return "empty box"
        if at is AnswerType.NV:
            if quantity_candidates(box):
                return None
            try:
                to_sympy(_rhs(box))
                return None
            except LatexError as e:
                return f"not a number ({e})"
        if at in (AnswerType.EX, AnswerType.EQ, AnswerType.IN):
            try:
                if at is AnswerType.EQ and len(split_relations(box, frozenset({"="}))[0]) < 2:
                    return "equation without '='"
                for part in split_top_level(box):
                    segs, _ = split_relations(part, frozenset({"="}))
                    for seg in segs if at is not AnswerType.IN else [part]:
                        if seg:
                            to_sympy(seg)
                return None
            except LatexError as e:
                return str(e)
        if at is AnswerType.MC:
            g = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", box).strip()
            return None if g else "empty option"
        if at is AnswerType.TF:
            return None if _tf_value(box) is not None else "not a truth value"
        if at is AnswerType.QL:
            return None if norm_text(box) else "empty text"
        return "compound type: check each slot with its primitive type"
    except Exception as e:  # never raise
        return f"internal error ({type(e).__name__})"
