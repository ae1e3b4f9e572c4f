"""Final-answer extraction and text hygiene for model output and gold strings (docs/protocol.md section 4).

The lowest module of the package (it imports nothing of studybench): every other module that scans
boxes, removes reasoning or cleans model text uses these functions. Everything here is pure string
scanning: no regex backtracking on untrusted text, no parsing into SymPy, and no function raises on
any ``str`` input.

Public entry points:

* :func:`strip_reasoning` - remove ``<think>`` blocks (closed, unclosed, stray ``</think>``).
* :func:`clean_surrogates` - lone UTF-16 surrogates (unencodable as UTF-8) become U+FFFD.
* :func:`find_boxes` - every top-level ``\\boxed{...}`` / ``\\fbox{...}`` / ``\\boxed 5`` with its span.
* :func:`extract_answers` - the answers a response commits to: boxes on the ``Final Answer:`` line
  first, else the last ``m`` boxes anywhere.
* :func:`brace_balance_error` - why a string's braces do not balance (``None`` when they do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Box",
    "match_brace",
    "brace_balance_error",
    "clean_surrogates",
    "extract_answers",
    "find_boxes",
    "split_top_level",
    "strip_reasoning",
]

_BOX_MACROS = ("\\boxed", "\\fbox")
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_FINAL_ANSWER = re.compile(r"final\s+answer", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_surrogates(text: str) -> str:
    """Text made safe to store, send as JSON and hash: every lone surrogate becomes U+FFFD.

    Model replies and judge replies can carry lone UTF-16 surrogates (a broken ``\\u`` escape) that
    UTF-8 cannot encode; everything else is returned unchanged.

    Args:
        text: any string.

    Returns:
        ``text`` with each character in U+D800..U+DFFF replaced by U+FFFD.
    """
    return _SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class Box:
    """One top-level box: ``content`` is the text inside the braces; ``start``/``end`` index the
    whole macro (``text[start:end]`` is e.g. ``\\boxed{5}``)."""

    content: str
    start: int
    end: int


def strip_reasoning(text: str) -> str:
    """Remove model reasoning from ``text`` (docs/protocol.md section 2).

    Removes closed ``<think>...</think>`` blocks; then, if a stray ``</think>`` remains (the
    opening tag was part of the prompt template), keeps only what follows the last one; then, if an
    unclosed ``<think>`` remains, drops everything from it to the end. Never raises.
    """
    if not isinstance(text, str):
        return ""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        j = text.find(_THINK_OPEN, i)
        if j < 0:
            out.append(text[i:])
            break
        k = text.find(_THINK_CLOSE, j + len(_THINK_OPEN))
        if k < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        i = k + len(_THINK_CLOSE)
    s = "".join(out)
    last_close = s.rfind(_THINK_CLOSE)
    if last_close >= 0:
        s = s[last_close + len(_THINK_CLOSE) :]
    first_open = s.find(_THINK_OPEN)
    if first_open >= 0:
        s = s[:first_open]
    return s.strip()


_BRACE_TOKENS = re.compile(r"\\.|[{}]", re.DOTALL)
_BOX_MACRO_RE = re.compile(r"\\(?:boxed|fbox)")


def _brace_matches(text: str) -> dict[int, int]:
    """One left-to-right pass: for every unescaped ``{`` that is closed, map its index to the index
    just past its matching ``}``. A backslash escapes the next character (so ``\\{`` and ``\\}``
    do not count); a stray ``}`` is ignored. Linear in ``len(text)``."""
    out: dict[int, int] = {}
    stack: list[int] = []
    push = stack.append
    pop = stack.pop
    for m in _BRACE_TOKENS.finditer(text):
        c = m.group()
        if c == "{":
            push(m.start())
        elif c == "}":
            if stack:
                out[pop()] = m.start() + 1
    return out


def match_brace(text: str, open_idx: int) -> int:
    """Given ``text[open_idx] == '{'``, return the index just past the matching ``}``, or -1.

    A backslash escapes the next character, so ``\\{`` and ``\\}`` do not count. One call is
    linear in the scanned length; :func:`find_boxes` uses :func:`_brace_matches` (one pass for all).
    """
    depth = 0
    for m in _BRACE_TOKENS.finditer(text, open_idx):
        c = m.group()
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return m.end()
    return -1


def find_boxes(text: str) -> list[Box]:
    """All top-level boxes in ``text``, in order of appearance.

    Recognises ``\\boxed{...}``, ``\\boxed*{...}``, ``\\fbox{...}`` (balanced braces with
    backslash escapes) and the brace-less ``\\boxed 5`` form (the next run of non-space characters,
    stopping at ``$``). Boxes nested inside a box are part of the outer content. An unclosed
    ``\\boxed{`` is ignored (boxes after its ``{`` are still found). Never raises; linear in
    ``len(text)``: brace matches come from one stack pass and macros from one regex scan.
    """
    if not isinstance(text, str):
        return []
    if "\\boxed" not in text and "\\fbox" not in text:
        return []
    matches: dict[int, int] | None = None
    boxes: list[Box] = []
    n = len(text)
    i = 0  # nothing before i can start a box
    for mm in _BOX_MACRO_RE.finditer(text):
        best = mm.start()
        if best < i:
            continue
        k = mm.end()
        if k < n and text[k].isalpha():
            continue  # another macro such as \boxedx
        if k < n and text[k] == "*":
            k += 1
        ws = k
        while k < n and text[k] in " \t":
            k += 1
        if k < n and text[k] == "{":
            if matches is None:
                matches = _brace_matches(text)
            end = matches.get(k, -1)
            if end < 0:
                i = k + 1
                continue
            boxes.append(Box(text[k + 1 : end - 1], best, end))
            i = end
            continue
        if k > ws and k < n:
            # \boxed 5 : one bare token
            e = k
            while e < n and not text[e].isspace() and text[e] not in "$\\":
                e += 1
            if e > k:
                token = text[k:e].rstrip(".,;")
                if token:
                    boxes.append(Box(token, best, k + len(token)))
                i = e
                continue
        i = k if k > best else best + 1
    return boxes


def _final_answer_region(text: str) -> int:
    """Index where the last ``Final Answer`` marker's text begins, or -1."""
    last = None
    for m in _FINAL_ANSWER.finditer(text):
        last = m
    return -1 if last is None else last.end()


def extract_answers(response: str, m: int, *, strip_think: bool = True) -> list[str]:
    """The answers a response commits to, as box contents (docs/protocol.md section 4, ours).

    Args:
        response: raw model completion (untrusted; any string).
        m: number of gold boxes of the sub-problem (>= 1); at most ``m`` answers are returned.
        strip_think: remove reasoning first (:func:`strip_reasoning`).

    Returns:
        Boxes on the ``Final Answer:`` line when it holds any (the line may continue over newlines
        inside a box), else the last ``m`` boxes anywhere; in both cases the last ``m``. Empty when
        the response holds no box. Never raises.
    """
    if not isinstance(response, str):
        return []
    m = max(1, int(m)) if isinstance(m, int) else 1
    text = strip_reasoning(response) if strip_think else response
    boxes = find_boxes(text)
    if not boxes:
        return []
    start = _final_answer_region(text)
    if start >= 0:
        nl = text.find("\n", start)
        line_end = len(text) if nl < 0 else nl
        on_line: list[Box] = []
        for b in boxes:
            if b.start < start:
                continue
            if b.start > line_end:
                break
            on_line.append(b)
            # a box that spans newlines extends the line
            if b.end > line_end:
                nl = text.find("\n", b.end)
                line_end = len(text) if nl < 0 else nl
        if on_line:
            return [b.content for b in on_line[-m:]]
    return [b.content for b in boxes[-m:]]


def brace_balance_error(text: str) -> str | None:
    """Describe the first brace imbalance in ``text`` (escaped braces ignored), or ``None``."""
    depth = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return f"unmatched '}}' at character {i}"
        i += 1
    if depth > 0:
        return f"{depth} unclosed '{{'"
    return None


_OPENERS = {"{": "}", "(": ")", "[": "]"}


_SPLIT_SPACING = re.compile(r"^\s*(\\(quad|qquad|,|;|:|!| )\s*)+")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep`` characters outside braces, parentheses and brackets.

    ``\\left(`` / ``\\right)`` count as brackets; escaped braces do not. Interval notation such as
    ``[0, 1)`` stays whole because the ``,`` is inside a bracket. A LaTeX spacing command directly
    after a separator (``,\\ ``, ``,\\quad``) is dropped. Never raises; linear in ``len(text)`` (one
    regex scan over the special characters only).
    """
    if not isinstance(text, str):
        return [""]
    if not isinstance(sep, str) or len(sep) != 1 or sep in "\\{}()[]":
        sep = ""  # a bracket, a backslash or several characters never separate
    tokens = re.compile(r"\\[^A-Za-z]|[{}()\[\]" + re.escape(sep) + "]", re.DOTALL)
    parts: list[str] = []
    depth = 0
    last = 0
    for m in tokens.finditer(text):
        c = m.group()
        if len(c) == 2:
            continue  # control symbol (\{ \} \, \; \\ ...): never a separator or a bracket
        if c == sep:
            if depth == 0:
                parts.append(text[last : m.start()])
                last = m.end()
        elif c in _OPENERS:
            depth += 1
        else:
            depth = max(0, depth - 1)
    parts.append(text[last:])
    cleaned = []
    for p in parts:
        if p[:1] == "\\" or p[:1].isspace():
            p = _SPLIT_SPACING.sub("", p)
        cleaned.append(p.strip())
    return cleaned
