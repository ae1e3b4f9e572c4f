r"""Written variation on the gold's own text, TF / MC / QL sentences, and interval forms.

Print styles (label ``True``): ``\frac`` as ``\dfrac`` or as a slash (bracketed so that the
reading cannot change), ``\cdot`` and ``\times`` exchanged (never beside vector markup, where
``\times`` is a cross product), ``\left( \right)`` added or removed, spacing commands replaced or
inserted around operators, single-character ``^{x}`` / ``_{x}`` braces dropped or added.

Choices: a truth value as a sentence ("That claim is false", "Yes, it holds"), a letter as a
sentence ("The answer is (B)"), a plain-word QL phrase in another case or wrapped in ``\text{}``;
near misses: the opposite truth value, another letter.

Intervals: an inequality read from the other side (``a < x`` as ``x > a``); near misses: one
relation reversed, one finite bracket of an interval flipped (the protocol's bracket rule).
"""

from __future__ import annotations

import re
from random import Random

from studybench.testing.pairgen.base import Candidate, Slot, Transformation, norm_ws

__all__ = ["TEXT", "truth_value"]

_MATH = frozenset({"NV", "EX", "EQ", "IN"})
_VECTOR = re.compile(r"\\(?:vec|mathbf|boldsymbol|bm|overrightarrow|hat)(?![A-Za-z])")
_FUNC_CMDS = {"sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "ln", "log", "exp", "sqrt",
              "arcsin", "arccos", "arctan", "operatorname", "mathrm", "text", "frac", "dfrac", "tfrac"}
_OPEN_BEFORE = re.compile(r"\\(?:left[(\[.|]|left\\\{|cdot|times|quad|qquad|[,;: ]|le|ge|leq|geq|leqslant|geqslant|lt|gt|ll|gg|approx|"
                          r"sim|simeq|cong|propto|neq|ne|equiv|to|rightarrow|pm|mp)$")
_SIMPLE = re.compile(r"\s*(?:\d+(?:\.\d+)?|[A-Za-z]|\\[A-Za-z]+)(?:_\{[^{}]*\}|_[A-Za-z0-9])?'*\s*")


def _group_end(s: str, i: int) -> int | None:
    """Index after the braced group starting at ``s[i] == '{'``."""
    if i >= len(s) or s[i] != "{":
        return None
    depth = 0
    k = i
    while k < len(s):
        c = s[k]
        if c == "\\":
            k += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    return None


def _changed(slot: Slot, text: str, why: str) -> list[Candidate]:
    return [] if norm_ws(text) == norm_ws(slot.box) else [Candidate(text, ("text", why), why)]


def _dfrac(slot: Slot, rng: Random) -> list[Candidate]:
    return _changed(slot, re.sub(r"\\frac(?![A-Za-z])", r"\\dfrac", slot.box), "\\frac as \\dfrac")


def _slash(slot: Slot, rng: Random) -> list[Candidate]:
    s = slot.box
    if re.search(r"\\(?:sum|int|iint|oint|prod|lim)(?![A-Za-z])", s):
        return []  # a fraction after \sum_{..}^{..} is its summand: a \cdot there would change the reading
    spans = []
    for m in re.finditer(r"(?<!\\)\\[dt]?frac(?![A-Za-z])\s*", s):
        a0 = m.end()
        a1 = _group_end(s, a0)
        if a1 is None:
            continue
        b0 = a1 + len(s[a1:]) - len(s[a1:].lstrip())
        b1 = _group_end(s, b0)
        if b1 is None:
            continue
        num, den = s[a0 + 1: a1 - 1], s[b0 + 1: b1 - 1]
        if re.search(r"\\[dt]?frac|&|\\\\", num + den):
            continue  # innermost fractions only
        if re.fullmatch(r"\s*(?:\\mathrm\s*\{\s*d\s*\}|\\mathrm\s*d|d|\\partial|\\delta)(?:\^\s*\{?\s*\d\s*\}?)?\s*", num):
            continue  # an operator (d/dt): not a quotient to bracket
        before = s[: m.start()].rstrip()
        after = s[b1:].lstrip()
        prev_cmd = re.search(r"\\([A-Za-z]+)\s*$", before)
        if prev_cmd and prev_cmd.group(1) in _FUNC_CMDS:
            continue
        diff = r"\s*(?:\\mathrm\s*\{\s*d\s*\}|d|\\partial)\s*(?:\\?[A-Za-z]+(?:_\{[^{}]*\}|_[A-Za-z0-9])?)\s*"
        derivative = re.fullmatch(diff, num) is not None and re.fullmatch(diff, den) is not None
        n_txt = num.strip() if derivative or _SIMPLE.fullmatch(num) or re.fullmatch(r"\s*-\s*(?:\d+|[A-Za-z])\s*", num) else f"({num.strip()})"
        d_txt = den.strip() if derivative or _SIMPLE.fullmatch(den) else f"({den.strip()})"
        body = f"{n_txt}/{d_txt}"
        left_open = before == "" or before[-1] in "{([=+-,&<>" or bool(re.search(_OPEN_BEFORE, before))
        right_open = after == "" or after[0] in "})]=+-,&" or after.startswith(("\\right", "\\quad", "\\qquad"))
        if before.endswith(("^", "_")):
            body = "{" + body + "}"
        elif not (left_open and right_open):
            body = ("" if left_open else " \\cdot ") + f"\\left({body}\\right)"
        spans.append((m.start(), b1, body))
    if not spans:
        return []
    out = s
    for a, b, body in reversed(spans):
        out = out[:a] + body + out[b:]
    return _changed(slot, out, "fractions with a slash")


def _mul(slot: Slot, rng: Random) -> list[Candidate]:
    s = slot.box
    if _VECTOR.search(s):
        return []
    if re.search(r"\\cdot(?![A-Za-z])", s):
        return _changed(slot, re.sub(r"\\cdot(?![A-Za-z])", r"\\times", s), "\\cdot as \\times")
    if re.search(r"\\times(?![A-Za-z])", s):
        return _changed(slot, re.sub(r"\\times(?![A-Za-z])", r"\\cdot", s), "\\times as \\cdot")
    return []


def _left_right(slot: Slot, rng: Random) -> list[Candidate]:
    s = slot.box
    if re.search(r"\\(?:left|right)(?![A-Za-z])", s):
        if re.search(r"\\(?:left|right)\s*\.", s):
            return []
        out = re.sub(r"\\(?:left|right)(?![A-Za-z])\s*", "", s)
        return _changed(slot, out, "\\left/\\right removed")
    stack: list[tuple[str, int]] = []
    pairs: list[tuple[int, int]] = []
    for i, c in enumerate(s):
        if i and s[i - 1] == "\\":
            continue
        if c in "([":
            stack.append((c, i))
        elif c in ")]":
            if not stack or {"(": ")", "[": "]"}[stack[-1][0]] != c:
                return []  # an interval such as [a, b): not bracket pairs
            pairs.append((stack.pop()[1], i))
    if stack or not pairs:
        return []
    out = list(s)
    for a, b in pairs:
        out[a] = "\\left" + s[a]
        out[b] = "\\right" + s[b]
    return _changed(slot, "".join(out), "\\left( \\right) added")


_SPACES = ["\\,", "\\;", "\\ ", "~", "\\:"]


def _spacing(slot: Slot, rng: Random) -> list[Candidate]:
    s = slot.box
    masked = re.sub(r"\\(?:text|mathrm|operatorname|textrm)\s*\{[^{}]*\}", lambda m: "\0" * len(m.group(0)), s)
    out: list[str] = []
    i = 0
    changed = False
    while i < len(s):
        if masked[i] == "\0":
            out.append(s[i])
            i += 1
            continue
        if s.startswith("\\\\", i):
            out.append("\\\\")
            i += 2
            continue
        m = re.match(r"\\[,;: ]|~", s[i:])
        if m:
            out.append(rng.choice([x for x in _SPACES if x != m.group(0)]))
            i += m.end()
            changed = True
            continue
        c = s[i]
        prev = s[:i].rstrip()[-1:]
        e_notation = c in "+-" and prev in ("e", "E") and s[:i].rstrip()[-2:-1].isdigit()
        if c == "=" or (c in "+-" and prev and (prev.isalnum() or prev in "})") and not e_notation):
            out.append(f"{rng.choice(_SPACES)}{c}{rng.choice(_SPACES)}")
            changed = True
            i += 1
            continue
        out.append(c)
        i += 1
    return _changed(slot, "".join(out), "spacing commands") if changed else []


def _braces(slot: Slot, rng: Random) -> list[Candidate]:
    s = slot.box
    out = re.sub(r"([\^_])\{\s*([A-Za-z0-9])\s*\}", r"\1\2", s)
    if out != s:
        return _changed(slot, out, "single-character braces dropped")
    out = re.sub(r"(?<!\\)([\^_])([A-Za-z0-9])", r"\1{\2}", s)
    return _changed(slot, out, "single-character braces added") if out != s else []


def _exp_func(slot: Slot, rng: Random) -> list[Candidate]:
    """``e^{...}`` (a symbolic exponent) as ``\\exp\\left(...\\right)``; a number exponent may be a charge squared."""
    s = slot.box
    spans = []
    for m in re.finditer(r"(?<![A-Za-z\\_^])(?:\\mathrm\s*\{\s*e\s*\}|e)\s*\^\s*(?=\{)", s):
        end = _group_end(s, m.end())
        if end is None:
            continue
        inner = s[m.end() + 1: end - 1]
        if not re.search(r"[A-Za-z]", inner):
            continue
        spans.append((m.start(), end, f"\\exp\\left({inner}\\right)"))
    out = s
    for a, b, body in reversed(spans):
        out = out[:a] + body + out[b:]
    return _changed(slot, out, "e^{x} as \\exp(x)") if spans else []


# ------------------------------------------------------------------------------------ choices

def _plain_words(box: str) -> str:
    t = box.strip()
    for _ in range(2):
        m = re.fullmatch(r"\\(?:text|mathrm|textrm|textbf|mbox)\s*\{(.*)\}", t, flags=re.S)
        if m:
            t = m.group(1).strip()
    return t


def truth_value(box: str) -> bool | None:
    """The truth value a TF box states (``True``, ``\\text{NO}``, ``Yes``), ``None`` when it is not one word of the kind."""
    w = re.sub(r"[.!\s]+$", "", _plain_words(box)).strip().lower()
    if w in ("true", "yes", "t", "correct", "y"):
        return True
    if w in ("false", "no", "f", "incorrect", "n"):
        return False
    return None


_TRUE = ["\\text{Yes, it holds}", "\\text{That claim is true}", "\\text{True}", "\\text{Yes}", "\\text{It is true.}",
         "\\text{TRUE}", "\\text{The statement is correct}", "True"]
_FALSE = ["\\text{That claim is false}", "\\text{No, it does not hold}", "\\text{False}", "\\text{No}", "\\text{It is false.}",
          "\\text{FALSE}", "\\text{The statement is incorrect}", "False"]


def _tf(flip: bool):  # noqa: ANN202
    def apply(slot: Slot, rng: Random) -> list[Candidate]:
        v = truth_value(slot.box)
        if v is None:
            return []
        pool = _TRUE if (v != flip) else _FALSE
        choices = [x for x in pool if norm_ws(x) != norm_ws(slot.box)]
        return [Candidate(rng.choice(choices), ("text", "opposite truth value" if flip else "truth value as a sentence"))]

    return apply


def _letter(box: str) -> str | None:
    w = _plain_words(box)
    m = re.fullmatch(r"\(?\s*([A-Ha-h])\s*\)?\.?", w)
    return m.group(1) if m else None


def _mc(flip: bool):  # noqa: ANN202
    def apply(slot: Slot, rng: Random) -> list[Candidate]:
        letter = _letter(slot.box)
        if letter is None:
            return []
        if flip:
            order = "ABCD" if letter.upper() in "ABCD" else "ABCDEFGH"
            i = order.index(letter.upper())
            other = order[(i + rng.choice([1, 2, 3])) % len(order)]
            letter = other.lower() if letter.islower() else other
        forms = [f"\\text{{The answer is ({letter})}}", f"({letter})", f"\\text{{({letter})}}", f"\\text{{Option {letter}}}",
                 f"\\mathrm{{{letter}}}", f"\\text{{{letter}}}", f"{letter}."]
        choices = [f for f in forms if norm_ws(f) != norm_ws(slot.box)]
        return [Candidate(rng.choice(choices), ("text", "another letter" if flip else "letter as a sentence"))]

    return apply


def _ql_case(slot: Slot, rng: Random) -> list[Candidate]:
    w = _plain_words(slot.box)
    if not re.fullmatch(r"[A-Za-z][A-Za-z ,;'-]{1,80}", w) or not re.search(r"[a-z]", w, flags=re.I):
        return []
    new = rng.choice([w.lower(), w.upper(), w[:1].upper() + w[1:].lower()])
    wrapped = slot.box.strip() != w
    text = f"\\text{{{new}}}" if wrapped else new
    return _changed(slot, text, "phrase in another case")


def _ql_text(slot: Slot, rng: Random) -> list[Candidate]:
    w = _plain_words(slot.box)
    if not re.fullmatch(r"[A-Za-z][A-Za-z ,;'-]{1,80}", w):
        return []
    text = w if slot.box.strip() != w else f"\\text{{{w}}}"
    return _changed(slot, text, "\\text{} wrapper added or removed")


# ------------------------------------------------------------------------------------ intervals

_REL = r"\\leqslant|\\geqslant|\\leq|\\geq|\\le|\\ge|\\lt|\\gt|<|>"
_MIRROR = {"<": ">", ">": "<", "\\lt": "\\gt", "\\gt": "\\lt", "\\le": "\\ge", "\\ge": "\\le", "\\leq": "\\geq",
           "\\geq": "\\leq", "\\leqslant": "\\geqslant", "\\geqslant": "\\leqslant"}


def _relation_parts(s: str) -> tuple[list[str], list[str]] | None:
    if re.search(r"\\(?:neq|ne|ll|gg|in|cup|cap|approx|text)(?![A-Za-z])|=|,", s):
        return None
    parts, rels = [], []
    depth = 0
    last = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif depth == 0:
            m = re.match(r"(?:" + _REL + r")(?![A-Za-z])", s[i:])
            if m:
                parts.append(s[last:i].strip())
                rels.append(m.group(0))
                i += m.end()
                last = i
                continue
        i += 1
    parts.append(s[last:].strip())
    if not rels or any(not p for p in parts) or depth != 0:
        return None
    return parts, rels


def _in_flip(slot: Slot, rng: Random) -> list[Candidate]:
    pr = _relation_parts(slot.box)
    if pr is None:
        return []
    parts, rels = pr
    out = parts[-1]
    for p, r in zip(reversed(parts[:-1]), reversed(rels), strict=True):
        out += f" {_MIRROR[r]} {p}"
    return _changed(slot, out, "read from the other side")


def _miss_in_direction(slot: Slot, rng: Random) -> list[Candidate]:
    pr = _relation_parts(slot.box)
    if pr is None or len(pr[1]) != 1:
        return []
    (a, b), (r,) = pr
    return _changed(slot, f"{a} {_MIRROR[r]} {b}", "relation reversed")


def _miss_in_bracket(slot: Slot, rng: Random) -> list[Candidate]:
    s = slot.box.strip()
    m = re.fullmatch(r"(\\left\s*)?([(\[])(.*?),(.*?)(\\right\s*)?([)\]])", s, flags=re.S)
    if not m or m.group(3).count("(") != m.group(3).count(")") or m.group(4).count("(") != m.group(4).count(")"):
        return []
    lo, hi = m.group(3), m.group(4)
    flip = {"(": "[", "[": "(", ")": "]", "]": ")"}
    if "infty" not in lo:
        out = (m.group(1) or "") + flip[m.group(2)] + lo + "," + hi + (m.group(5) or "") + m.group(6)
    elif "infty" not in hi:
        out = (m.group(1) or "") + m.group(2) + lo + "," + hi + (m.group(5) or "") + flip[m.group(6)]
    else:
        return []
    return _changed(slot, out, "a finite bracket flipped")


def _t(name: str, family: str, label: bool, types: frozenset[str], fn, doc: str) -> Transformation:  # noqa: ANN001
    return Transformation(name, family, label, types, fn, doc)


def _identity(slot: Slot, rng: Random) -> list[Candidate]:
    return [Candidate(slot.box, ("text", "the gold itself"), "the gold itself")]


_IN = frozenset({"IN"})
_ALL = frozenset({"NV", "EX", "EQ", "IN", "MC", "TF", "QL"})
TEXT: tuple[Transformation, ...] = (
    _t("id:gold", "identity", True, _ALL, _identity, "the gold box itself (the baseline)"),
    _t("print:dfrac", "print", True, _MATH, _dfrac, "\\frac as \\dfrac"),
    _t("print:slash", "print", True, _MATH, _slash, "innermost \\frac{a}{b} as (a)/(b), bracketed where needed"),
    _t("print:mul", "print", True, _MATH, _mul, "\\cdot and \\times exchanged (no vectors)"),
    _t("print:left-right", "print", True, _MATH, _left_right, "\\left( \\right) added or removed"),
    _t("print:spacing", "print", True, _MATH, _spacing, "spacing commands replaced or inserted"),
    _t("print:braces", "print", True, _MATH, _braces, "single-character ^{x} _{x} braces dropped or added"),
    _t("print:exp", "print", True, _MATH, _exp_func, "e^{x} with a symbolic exponent as \\exp(x)"),
    _t("tf:sentence", "choice", True, frozenset({"TF"}), _tf(False), "a truth value as a sentence"),
    _t("mc:sentence", "choice", True, frozenset({"MC"}), _mc(False), "a letter as a sentence"),
    _t("ql:case", "choice", True, frozenset({"QL"}), _ql_case, "a plain-word phrase in another case"),
    _t("ql:text", "choice", True, frozenset({"QL"}), _ql_text, "a plain-word phrase with or without \\text{}"),
    _t("in:flip", "interval", True, _IN, _in_flip, "an inequality read from the other side"),
    _t("miss:tf", "near-miss", False, frozenset({"TF"}), _tf(True), "the opposite truth value as a sentence"),
    _t("miss:mc", "near-miss", False, frozenset({"MC"}), _mc(True), "another letter"),
    _t("miss:in-direction", "near-miss", False, _IN, _miss_in_direction, "the relation reversed"),
    _t("miss:in-bracket", "near-miss", False, _IN, _miss_in_bracket, "a finite interval bracket flipped"),
)
"""The written-variation, choice and interval transformations, in table order."""
