"""Conservative reading of a textbook's printed answers (Markdown with ``$...$`` math) as gold answers.

:func:`classify_answer` accepts only two shapes and says why anything else was refused:

* **NV**: one number (decimal, optionally ``\\times 10^{n}``) followed by nothing but a unit: unit letters
  outside math, or inside ``\\text{...}``/``\\mathrm{...}`` in math (bare letters in math are variables,
  so ``$2mg$`` is not "2 milligrams");
* **EX**: one math span holding a single expression in variables (no words, lists, relations or units).

A leading ``symbol =`` is dropped (``$v = 3.0\\,\\text{m/s}$`` gives ``3.0\\,\\text{m/s}``). Units are
written as the verifier reads them: ``%`` as ``\\%``, ``°`` as ``^{\\circ}``, ``Ω`` as ``\\Omega``, ``N-m`` as
``\\text{N}\\cdot\\text{m}``; Unicode superscripts and subscripts (``10³``, ``m²``, ``v₀``) become ``^{3}``
and ``_{0}``. Anything with "or", several paragraphs, several numbers or free words (``5.4 cm from the
axis``) is refused. :func:`split_labelled_parts` splits "(a) ...; (b) ..." or "a. ...; b. ..." into
labelled parts.
"""

from __future__ import annotations

import re

__all__ = ["classify_answer", "split_labelled_parts", "unicode_scripts"]

_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.DOTALL)
_SPACE_CMD = re.compile(r"\\[ ,;:!]|\\quad|\\qquad|\\mspace\s*\{[^{}]*\}|~")
_NUMBER = re.compile(r"^[-+]?\s*10\s*\^\s*(?:\{\s*[-+]?\s*\d+\s*\}|[-+]?\d)(?![\d.])|^[-+]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:\s*(?:\\times|×|\\cdot)\s*10\s*\^\s*(?:\{\s*[-+]?\s*\d+\s*\}|[-+]?\d))?")
_TEXT_WRAP = re.compile(r"\\(?:text|mathrm|mathit|textrm|operatorname)\s*\{([^{}]*)\}")
_EXPONENT = re.compile(r"\^\s*(?:\{\s*[-+]?\s*\d+(?:\.\d+)?\s*\}|[-+]?\d)")
_UNIT_CMDS = re.compile(r"\\(?:mu|Omega|circ|cdot|degree|%)")
_UNIT_CHARS = re.compile(r"^[A-Za-zμΩ°·%/\s\-{}^*.]*$")  # no brackets: "(N/m^2) s" is not read as one unit
_LETTERS = re.compile(r"[A-Za-zμΩ]+")
_OR = re.compile(r"\bor\b|\band\b", re.IGNORECASE)
_RELATION = re.compile(r"=|\\approx|\\simeq|\\sim\b|\\propto|\\equiv|≈|∝")
_PROSE = frozenset({"the", "from", "of", "to", "at", "on", "is", "are", "for", "by", "its", "it", "as", "an",
                    "with", "each", "per", "than", "about", "this", "that", "then"})
_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUB = str.maketrans("₀₁₂₃₄₅₆₇₈₉₋₊", "0123456789-+")
_SCRIPTS = re.compile(r"([⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+)|([₀₁₂₃₄₅₆₇₈₉₋₊]+)")
_UNIT_TOKEN = re.compile(r"(\s*)(?:([A-Za-zμ]+)|(Ω)|(°)|(\\?%)|(\^\s*(?:\{\s*[-+]?\d+\s*\}|[-+]?\d))|([/·⋅*-]))")
_PREFIXES = ("k", "M", "G", "m", "μ", "n", "p")
_PREFIX_OHM = re.compile(r"(\\text\{(?:" + "|".join(_PREFIXES) + r")\})\s*\\Omega")
_TEXT_GROUP = re.compile(r"\\(?:text|mathrm)\s*\{([^{}]*)\}")
_LABEL = re.compile(r"(?:^|(?<=[\s;,.:]))(?:\(([a-h])\)|([a-h])\\?[.)])\s")  # pandoc writes "a\." at a line start


def _mask_math(text: str) -> str:
    """``text`` with every math span replaced by the same number of ``#`` (offsets kept)."""
    return _MATH.sub(lambda m: "#" * len(m.group(0)), text)


def unicode_scripts(text: str) -> str:
    """Unicode superscripts and subscripts as TeX: ``10³`` -> ``10^{3}``, ``v₀`` -> ``v_{0}``.

    Pandoc writes ``<sup>`` and ``<sub>`` text this way when its superscript extension is off; an en
    dash used as a minus sign (``<sup>–17</sup>``) comes out as ``⁻⁻``, which is read as one minus.

    Args:
        text: Markdown or LaTeX.

    Returns:
        The text with every run of script characters as one ``^{...}`` or ``_{...}`` group.
    """
    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return "^{" + re.sub(r"-+", "-", m.group(1).translate(_SUP)) + "}"
        return "_{" + m.group(2).translate(_SUB) + "}"
    return _SCRIPTS.sub(one, text)


def _unit_latex(unit: str) -> str | None:
    """A plain-text unit (``m/s^{2}``, ``N-m``, ``°C``, ``kΩ``, ``%``) as LaTeX the verifier reads, or ``None``.

    Words become ``\\text{...}``; a space, ``-``, ``·`` or ``*`` between two units is a product
    (``\\cdot``); a prefix letter written against ``Ω`` stays one unit (``\\text{k}\\Omega``).
    """
    single = re.fullmatch(r"\s*[*_]([A-Za-z])[*_]\s*", unit)
    if single:
        return single.group(1)  # an italic letter (``0.800 *c*``) is a constant, not an upright unit
    u = re.sub(r"\*([^*\s]+)\*|(?<![A-Za-z])_([^_\s]+)_", lambda m: m.group(1) or m.group(2), unit.strip())
    prefixes = {f"\\text{{{p}}}" for p in _PREFIXES}
    out: list[str] = []
    prev = ""  # the last token's kind: "" (start), "unit", "deg", "pct", "op"
    pos = 0
    while pos < len(u):
        m = _UNIT_TOKEN.match(u, pos)
        if m is None:
            return None
        pos = m.end()
        space, word, ohm, deg, pct, exp, op = m.groups()
        if word or ohm:
            if prev == "pct" or (prev == "deg" and (space or word not in ("C", "F"))):
                return None  # "4 % of", "35° west": words, not a unit
            if prev == "unit" and (space or not ohm or out[-1] not in prefixes):
                out.append(r"\cdot ")
            out.append(f"\\text{{{word}}}" if word else r"\Omega ")
            prev = "unit"
        elif deg or pct:
            if prev:
                return None
            out.append(r"^{\circ}" if deg else r"\%")
            prev = "deg" if deg else "pct"
        elif exp:
            if prev != "unit" or space:
                return None
            out.append("^{" + re.sub(r"[\s^{}]", "", exp) + "}")
        else:
            if prev != "unit":
                return None
            out.append("/" if op == "/" else r"\cdot ")
            prev = "op"
    if prev in ("", "op"):
        return None
    return "".join(out).strip()


def _math_units(latex: str) -> str:
    """Rewrite unit text groups inside math (``\\text{%}``, ``\\text{°C}``, ``\\text{Ω}``, ``\\text{N-m}``)."""
    latex = re.sub(r"\\text\s*\{\s*[-–]\s*\}", "-", latex)
    latex = re.sub(r"^(\s*\{?\s*)–|(=\s*)–", lambda m: (m.group(1) or m.group(2) or "") + "-", latex)

    def group(m: re.Match[str]) -> str:
        inner = m.group(1)
        if not re.search(r"[°Ω%*·^-]", inner):
            return m.group(0)
        return _unit_latex(inner) or m.group(0)
    latex = _TEXT_GROUP.sub(group, latex)
    # a prefix written apart from its Ohm sign (``\\text{k} \\Omega``) is one unit, not a factor k
    return _PREFIX_OHM.sub(r"\1\\Omega", latex)


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
    if any(w.lower() in _PROSE for w in _LETTERS.findall(u)):
        return False  # "5.4 cm from the axis"
    return all(len(w) <= 4 for w in _LETTERS.findall(u))


def _strip_lhs(latex: str) -> str | None:
    """The right-hand side after the last relation, or ``None`` when the left side is not a short symbol."""
    parts = _RELATION.split(latex)
    if len(parts) == 1:
        return latex
    lhs = parts[0].strip()
    if not lhs or len(lhs) > 30 or re.search(r"\d", re.sub(r"_\s*(\{[^{}]*\}|\w)", "", lhs)):
        return None
    rhs = parts[-1].strip()
    while rhs.endswith("}") and rhs.count("}") > rhs.count("{"):
        rhs = rhs[:-1].rstrip()  # "{x = 15.8}": the brace opened before the relation
    return rhs


def classify_answer(text: str, *, allow_expression: bool = True, allow_lhs: bool = True) -> tuple[str, str] | str:
    """Read a printed answer as an NV or EX gold.

    Args:
        text: the answer as Markdown (math in ``$...$`` or ``$$...$$``).
        allow_expression: accept EX (a symbolic expression); when false only NV.
        allow_lhs: drop a leading ``symbol =`` (and take the last side of a chain).

    Returns:
        ``(answer_type, latex)`` with the box content, or a short reason for refusing it.
    """
    s = unicode_scripts(text.strip().replace("−", "-"))
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
        pieces.append((_math_units((m.group(1) or m.group(2)).strip()), True))
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
            if not head_math:
                value = num.group(0).strip().replace("×", r"\times ")
                if unit.strip():
                    tex = _unit_latex(unit)
                    if tex is None:
                        return "has a unit the verifier cannot read"
                    value += r"\," + tex
            if extra:
                tex = _unit_latex(extra)
                if tex is None:
                    return "has a unit the verifier cannot read"
                value += r"\," + tex
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
