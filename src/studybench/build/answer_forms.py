"""Conservative reading of a textbook's printed answers (Markdown with ``$...$`` math) as gold answers.

:func:`classify_answer` accepts only two shapes and says why anything else was refused:

* **NV**: one number (decimal, optionally ``\\times 10^{n}``) followed by nothing but a unit: unit letters
  outside math, or inside ``\\text{...}``/``\\mathrm{...}`` in math (bare letters in math are variables,
  so ``$2mg$`` is not "2 milligrams");
* **EX**: one math span holding a single expression in variables (no words, lists, relations or units).

A leading ``symbol =`` is dropped (``$v = 3.0\\,\\text{m/s}$`` gives ``3.0\\,\\text{m/s}``). Anything with
"or", several paragraphs, several numbers or free words is refused. :func:`split_labelled_parts` splits
"(a) ...; (b) ..." or "a. ...; b. ..." into labelled parts.
"""

from __future__ import annotations

import re

__all__ = ["classify_answer", "split_labelled_parts"]

_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.DOTALL)
_SPACE_CMD = re.compile(r"\\[ ,;:!]|\\quad|\\qquad|~")
_NUMBER = re.compile(r"^[-+]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:\s*(?:\\times|×|\\cdot)\s*10\s*\^\s*(?:\{\s*[-+]?\s*\d+\s*\}|[-+]?\d))?")
_TEXT_WRAP = re.compile(r"\\(?:text|mathrm|mathit|textrm|operatorname)\s*\{([^{}]*)\}")
_EXPONENT = re.compile(r"\^\s*(?:\{\s*[-+]?\s*\d+(?:\.\d+)?\s*\}|[-+]?\d)")
_UNIT_CMDS = re.compile(r"\\(?:mu|Omega|circ|cdot|degree|%)")
_UNIT_CHARS = re.compile(r"^[A-Za-zμΩ°·%/\s\-(){}^*.]*$")
_LETTERS = re.compile(r"[A-Za-zμΩ]+")
_OR = re.compile(r"\bor\b|\band\b", re.IGNORECASE)
_RELATION = re.compile(r"=|\\approx|\\simeq|\\sim\b|≈")
_LABEL = re.compile(r"(?:^|(?<=[\s;,.:]))(?:\(([a-h])\)|([a-h])\\?[.)])\s")  # pandoc writes "a\." at a line start


def _mask_math(text: str) -> str:
    """``text`` with every math span replaced by the same number of ``#`` (offsets kept)."""
    return _MATH.sub(lambda m: "#" * len(m.group(0)), text)


def split_labelled_parts(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Split "(a) ... (b) ..." (or "a. ...; b. ...") into a stem and labelled parts.

    Labels must run a, b, c, ... from ``a``; at least two are needed. Markers inside math are ignored.

    Args:
        text: a problem or an answer (Markdown).

    Returns:
        ``(stem, [(label, part_text), ...])``; ``(text, [])`` when the text has no such parts.
    """
    masked = _mask_math(text)
    found: list[tuple[str, int, int]] = []
    want = "a"
    for m in _LABEL.finditer(masked):
        label = m.group(1) or m.group(2)
        if label == want:
            found.append((label, m.start(), m.end()))
            want = chr(ord(want) + 1)
        elif found and m.group(1) and label < want:
            return text, []  # a label again ("if it goes up: (a) ... if it goes down: (a) ..."): ambiguous
    if len(found) < 2:
        return text, []
    stem = text[:found[0][1]].strip()
    parts = []
    for j, (label, _start, end) in enumerate(found):
        stop = found[j + 1][1] if j + 1 < len(found) else len(text)
        parts.append((label, text[end:stop].strip().rstrip(";,").strip()))
    return stem, parts


def _unit_ok(unit: str, in_math: bool) -> bool:
    """Whether ``unit`` (what follows the number) is only a unit."""
    if in_math:
        bare = _TEXT_WRAP.sub("", unit)
        bare = _EXPONENT.sub("", _UNIT_CMDS.sub("", bare))
        if _LETTERS.search(bare):
            return False  # a bare letter in math is a variable, not a unit
    u = _UNIT_CMDS.sub("", _TEXT_WRAP.sub(r"\1", unit))
    u = _EXPONENT.sub("", u)
    if len(u.strip()) > 16 or not _UNIT_CHARS.match(u):
        return False
    return all(len(w) <= 4 for w in _LETTERS.findall(u))


def _strip_lhs(latex: str) -> str | None:
    """The right-hand side after the last relation, or ``None`` when the left side is not a short symbol."""
    parts = _RELATION.split(latex)
    if len(parts) == 1:
        return latex
    lhs = parts[0].strip()
    if not lhs or len(lhs) > 30 or re.search(r"\d", re.sub(r"_\s*(\{[^{}]*\}|\w)", "", lhs)):
        return None
    return parts[-1].strip()


def classify_answer(text: str, *, allow_expression: bool = True, allow_lhs: bool = True) -> tuple[str, str] | str:
    """Read a printed answer as an NV or EX gold.

    Args:
        text: the answer as Markdown (math in ``$...$`` or ``$$...$$``).
        allow_expression: accept EX (a symbolic expression); when false only NV.
        allow_lhs: drop a leading ``symbol =`` (and take the last side of a chain).

    Returns:
        ``(answer_type, latex)`` with the box content, or a short reason for refusing it.
    """
    s = text.strip().replace("−", "-")
    if "\n\n" in s:
        return "has several paragraphs"
    s = re.sub(r"[\s.;,]+$", "", s)
    if not s:
        return "is empty"
    if _OR.search(_mask_math(s)):
        return "gives alternatives or a list"
    spans = list(_MATH.finditer(s))
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for m in spans:
        if s[pos:m.start()].strip():
            pieces.append((s[pos:m.start()].strip(), False))
        pieces.append(((m.group(1) or m.group(2)).strip(), True))
        pos = m.end()
    if s[pos:].strip():
        pieces.append((s[pos:].strip(), False))
    if not pieces:
        return "is empty"
    head, head_math = pieces[0]
    head = _SPACE_CMD.sub(" ", head).strip().rstrip(".,;").strip()
    if head_math and allow_lhs:
        rhs = _strip_lhs(head)
        if rhs is None:
            return "is a relation, not a value"
        head = rhs
    elif head_math and _RELATION.search(head):
        return "is a relation, not a value"
    tail_units = [p for p, _ in pieces[1:]]
    if any(m for _, m in pieces[1:]):
        return "has several math spans"
    # NV: a number, then only a unit
    num = _NUMBER.match(head)
    if num and re.search(r"\d", num.group(0)):
        unit = head[num.end():]
        extra = " ".join(tail_units)
        if _unit_ok(unit, head_math) and (not extra or _unit_ok(extra, False)):
            value = head.strip()
            if not head_math and unit.strip():
                value = num.group(0).strip() + r"\,\text{" + unit.strip().replace("\\", "").replace("{", "").replace("}", "") + "}"
            if extra:
                value += r"\,\text{" + extra.replace("\\", "").replace("{", "").replace("}", "") + "}"
            return "NV", re.sub(r"\s+", " ", value)
        return "has words or symbols after the number"
    if not head_math:
        return "is text, not a value"
    if not allow_expression:
        return "is not a number with a unit"
    if tail_units:
        return "has words after the expression"
    bare = re.sub(r"\\[A-Za-z]+", " ", head)
    if (len(head) > 80 or re.search(r"[,;<>]|\\text|\\mathrm|\\le|\\ge", head) or _RELATION.search(head)
            or not re.search(r"[A-Za-z]", bare) or any(len(w) >= 4 for w in _LETTERS.findall(bare))):
        return "is not a single expression"
    return "EX", re.sub(r"\s+", " ", head)
