r"""The deterministic leakage gate of ``build guide`` and its rule-based sanitiser (issue 15, item 6a).

Guidance shown to a filter model must name methods, never the answer. :func:`check_leakage` reports
every place where a guidance text gives the answer away:

``box``
    any ``\boxed{``, ``\fbox{`` or ``\framebox`` (a boxed value is a final answer by convention).
``answer_phrase``
    a phrase that announces a result: "final answer", "the answer is", "the result should be",
    ``Answer:``, ``(answer)``, and "you should get / comes out to / works out to / evaluates to /
    is approximately" *followed by a value* (so "you should find the acceleration first" passes).
``gold``
    a number or formula of the guidance that **our verifier** accepts as a gold slot. Every math span
    (``$...$``, ``$$...$$``, ``\(...\)``, ``\[...\]``, equation environments), each side and each
    adjacent pair of a relation chain inside it, each comma/``\quad`` part, every bare number in the
    prose (scientific notation in any spelling: ``3.57e34``, ``3.57 x 10^34``, ``3.57×10³⁴``) with and
    without the unit words after it, a few number words (``twice``, ``half``, ``two`` ... ``ten``) and
    plain-text formulas in the prose (:func:`plain_formulas`: ``v = sqrt(2gh)``, ``√(2gh)``, ``√2gh``,
    ``(2gh)^(1/2)``, ``(2*g*h)**0.5``, "the square root of 2gh", ``2π√(L/g)``, ``\sqrt{2gh}`` without
    math delimiters; the whole formula, each side of a relation and each adjacent pair) is compared
    with every slot of the sub-problem's gold by
    :meth:`studybench.verify.Verifier.verify_many` under its usual wall-clock timeout (nothing is
    evaluated in this process). So ``3.57\times10^{34}`` catches a gold ``3.57e34 kg m^2/s`` and a
    rearranged equation catches an EQ gold. There is **no length floor**: a two-character gold
    (``2g``) is checked like any other. Textual golds are matched as text: a QL phrase by
    word-bounded containment after normalisation, an MC letter when named as an option
    (``(B)``, ``option B``), a TF/yes-no gold when stated as a verdict ("the statement is true",
    a sentence opening "No,").

**Values stated in the problem.** A value equal to a gold is a leak even when the problem's stem
states it too: method-only guidance never needs to restate data, and "the 2 kg block" next to a
gold of 2 tells the solver which given number is the answer. Such findings carry
``in_problem=True`` so a reviewer of the construction can tell them apart; they still block.

A comparison that overruns the verifier's timeout (a loaded machine, not the text) is verified
again, once, with a long limit (:data:`RETRY_TIMEOUT_S`), so the gate decides as on a quiet machine;
one that still times out is counted in :attr:`GateResult.timeouts` and does not block (the review
step is the second check).

:func:`sanitise` removes every sentence (or display block) that holds a finding, then checks the
result again; it is used on the last draft after every review round failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from studybench.records import COMPOUND_TYPES, SubProblem
from studybench.testset.guidance.spans import MATH, Candidate, candidates, mask, plain_formulas
from studybench.verify import Verifier

__all__ = [
    "Finding",
    "GateResult",
    "RETRY_TIMEOUT_S",
    "GoldSlot",
    "Sanitised",
    "check_leakage",
    "gold_slots",
    "plain_formulas",
    "sanitise",
]


@dataclass(frozen=True)
class GoldSlot:
    """One gold box of a sub-problem, typed.

    Attributes:
        index: 0-based slot number.
        text: the box content.
        answer_type: the slot's primitive type (NV EX EQ IN MC TF QL).
        unit: the gold unit when the record states one (``unit`` or ``gold_unit`` field), else ``None``.
    """

    index: int
    text: str
    answer_type: str
    unit: str | None = None


def gold_slots(sub: SubProblem) -> list[GoldSlot]:
    """The typed gold slots of a sub-problem (one per box; TUP/ALT slots typed by ``type_sequence``).

    Args:
        sub: the sub-problem.

    Returns:
        The slots in order.
    """
    boxes = sub.boxes
    ts = sub.type_sequence
    extra = sub.model_extra or {}
    unit = extra.get("gold_unit", extra.get("unit"))
    units: list[str | None]
    if isinstance(unit, str) and unit.strip():
        parts = [u.strip() for u in unit.split(",")]
        units = [None if u in ("", "None") else u for u in parts] if len(parts) == len(boxes) else [unit] * len(boxes)
    else:
        units = [None] * len(boxes)
    out = []
    for i, b in enumerate(boxes):
        at = ts[i].value if sub.answer_type in COMPOUND_TYPES and i < len(ts) else sub.answer_type.value
        out.append(GoldSlot(i, b, at, units[i]))
    return out


@dataclass(frozen=True)
class Finding:
    """One leak.

    Attributes:
        rule: ``box``, ``answer_phrase`` or ``gold``.
        start, end: character span in the guidance.
        span: the guidance text that leaks (for ``gold``: the candidate compared, normalised).
        slot: the gold slot matched (``gold`` only).
        gold: that slot's text.
        reason: the verifier's reason, or the phrase rule that fired.
        in_problem: the matched gold value is also stated in the problem text (still a leak).
    """

    rule: str
    start: int
    end: int
    span: str
    slot: int | None = None
    gold: str | None = None
    reason: str = ""
    in_problem: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class GateResult:
    """What the gate found.

    Attributes:
        findings: the leaks, in text order.
        candidates: spans compared with the gold.
        timeouts: comparisons whose verifier verdict timed out (not counted as leaks).
    """

    findings: list[Finding] = field(default_factory=list)
    candidates: int = 0
    timeouts: int = 0

    @property
    def passed(self) -> bool:
        """No finding."""
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"passed": self.passed, "candidates": self.candidates, "timeouts": self.timeouts,
                "findings": [f.to_dict() for f in self.findings]}

    def describe(self, limit: int = 8) -> list[str]:
        """One line per finding, for the writer's next prompt."""
        out = []
        for f in self.findings[:limit]:
            if f.rule == "gold":
                out.append(f"`{f.span}` equals the gold answer (slot {f.slot}); remove it")
            elif f.rule == "box":
                out.append(f"`{f.span}`: no \\boxed or framed values")
            else:
                out.append(f"`{f.span}`: announces a result ({f.reason})")
        return out


# ------------------------------------------------------------------------------------------- rules

_BOX = re.compile(r"\\(?:boxed|fbox|framebox)\b\s*(?:\[[^\]]*\])?\s*\{?")

_VALUE_AHEAD = r"\s*(?:about\s+|approximately\s+|roughly\s+|around\s+|exactly\s+)?(?:\$|\\\(|\\\[|[-−+]?\.?\d)"
_PHRASES: list[tuple[str, re.Pattern[str]]] = [
    ("final answer", re.compile(r"\bfinal\s+(?:answer|result|value)s?\b", re.I)),
    ("the answer is", re.compile(
        r"\b(?:the|your|our|its|correct|numerical|required|desired)\s+(?:correct\s+|numerical\s+|exact\s+)?"
        r"(?:answer|result|solution)s?\s+(?:is|are|should\s+be|will\s+be|would\s+be|must\s+be|equals?|comes?\s+out)\b", re.I)),
    ("answer:", re.compile(r"\banswers?\s*(?::|=)", re.I)),
    ("(answer)", re.compile(r"\(\s*(?:final\s+)?answer\s*\)", re.I)),
    ("states a value", re.compile(
        r"\b(?:you\s+(?:should|will|would|must)\s+(?:get|obtain|find|arrive\s+at|end\s+up\s+with)|comes?\s+out\s+(?:to|as|at)|"
        r"works?\s+out\s+(?:to|as)|evaluates?\s+to|(?:is|are)\s+(?:approximately|about|roughly)|"
        r"(?:gives|yields)\s+(?:a\s+value\s+of\s+)?(?:approximately|about|roughly))" + _VALUE_AHEAD, re.I)),
]

_MC_OPTION = re.compile(r"(?:\b(?:option|choice|answer|alternative)\s*\(?\s*([A-Ha-h])\s*\)?(?![\w])|\(([A-Ha-h])\))")
_VERDICT = re.compile(r"(?:\b(?:is|are|was|were|be|answer\s+is|verdict\s+is)\s+(?:not\s+)?|^\s*|[.!?]\s+)(true|false|yes|no|correct|incorrect)\b(?=\s*[,.!;:]|\s+(?:statement|claim))?", re.I | re.M)
_LATEX_WRAP = re.compile(r"\\(?:text|mathrm|textbf|textit|mathit|operatorname|mbox)\s*\{([^{}]*)\}")


def _norm_text(s: str) -> str:
    for _ in range(3):
        s = _LATEX_WRAP.sub(r"\1", s)
    s = re.sub(r"\\[A-Za-z]+", " ", s)
    s = re.sub(r"[^0-9a-z]+", " ", s.lower())
    return f" {' '.join(s.split())} "


# ------------------------------------------------------------------------------------------- gate

_TEXT_TYPES = frozenset({"QL", "MC", "TF"})


def _text_findings(text: str, slot: GoldSlot) -> list[Finding]:
    gold = _norm_text(slot.text).strip()
    out: list[Finding] = []
    if not gold:
        return out
    if slot.answer_type == "MC" and len(gold) == 1:
        for m in _MC_OPTION.finditer(text):
            if (m.group(1) or m.group(2)).lower() == gold:
                out.append(Finding("gold", m.start(), m.end(), m.group(0), slot.index, slot.text, "names the option"))
        return out
    if gold in ("true", "false", "yes", "no"):
        pos = {"true": ("true", "yes", "correct"), "yes": ("true", "yes", "correct"),
               "false": ("false", "no", "incorrect"), "no": ("false", "no", "incorrect")}[gold]
        for m in _VERDICT.finditer(text):
            word = m.group(1).lower()
            negated = "not" in m.group(0).lower().split()
            said = ({"true": "false", "yes": "no", "correct": "incorrect", "false": "true", "no": "yes",
                     "incorrect": "correct"}[word] if negated else word)
            if said in pos:
                out.append(Finding("gold", m.start(1), m.end(1), m.group(0).strip(), slot.index, slot.text, "states the verdict"))
        return out
    norm = _norm_text(text)
    if f" {gold} " in norm:
        # map back roughly: first occurrence of the gold's first word in the original text
        first = gold.split()[0]
        m = re.search(rf"(?i)\b{re.escape(first)}\b", text)
        s = m.start() if m else 0
        out.append(Finding("gold", s, s + len(first), slot.text, slot.index, slot.text, "states the gold phrase"))
    return out


def check_leakage(
    guidance: str,
    slots: Sequence[GoldSlot],
    *,
    problem: str = "",
    verifier: Verifier | None = None,
) -> GateResult:
    r"""Run the deterministic leakage gate on one guidance text (see the module docstring).

    Args:
        guidance: the guidance.
        slots: the sub-problem's gold slots (:func:`gold_slots`).
        problem: the problem text (parent stem and sub-problem), for the verifier's definitions and
            the ``in_problem`` flag.
        verifier: the verifier to use (default: a private one, closed before returning).

    Returns:
        The findings (empty when the guidance passes).
    """
    result = GateResult()
    for m in _BOX.finditer(guidance):
        result.findings.append(Finding("box", m.start(), m.end(), m.group(0).strip(), reason="box"))
    for name, rx in _PHRASES:
        for m in rx.finditer(guidance):
            result.findings.append(Finding("answer_phrase", m.start(), m.end(), m.group(0).strip(), reason=name))
    cands = candidates(guidance)
    items: list[tuple[Any, ...]] = []
    pairs: list[tuple[Candidate, GoldSlot]] = []
    for slot in slots:
        if slot.answer_type in _TEXT_TYPES:
            result.findings += _text_findings(guidance, slot)
            if slot.answer_type != "QL":
                continue
        for c in cands:
            items.append(([slot.text], [c.text], slot.answer_type, "", slot.unit, problem or None))
            pairs.append((c, slot))
    result.candidates = len(cands)
    if items:
        verdicts = _verify_many(items, verifier)
        matched: dict[tuple[int, int], Finding] = {}
        for (c, slot), verdict in zip(pairs, verdicts, strict=True):
            if verdict.correct:
                key = (c.start, slot.index)
                if key not in matched or len(c.text) < len(matched[key].span):
                    matched[key] = Finding("gold", c.start, c.end, c.text, slot.index, slot.text, verdict.reason)
            elif verdict.reason.startswith("incorrect: timed out"):
                result.timeouts += 1
        found = list(matched.values())
        if found and problem.strip():
            given = _given_slots(problem, slots, {f.slot for f in found}, verifier)
            found = [Finding(**{**f.to_dict(), "in_problem": f.slot in given}) for f in found]
        result.findings += found
    result.findings.sort(key=lambda f: (f.start, f.end, f.rule))
    return result


RETRY_TIMEOUT_S = 60.0
"""The limit (seconds) of the one retry of a comparison that timed out (at least 4x the verifier's own)."""


def _verify_settled(v: Verifier, items: list[tuple[Any, ...]]) -> list[Any]:
    """``verify_many``, then every comparison that timed out once more with a long limit (load never decides)."""
    verdicts = list(v.verify_many(items))
    limit = max(RETRY_TIMEOUT_S, 4 * v.timeout)
    for k, verdict in enumerate(verdicts):
        if verdict.reason.startswith("incorrect: timed out"):
            golds, preds, at, ts, unit, problem = items[k]
            verdicts[k] = v.verify(golds, preds, at, ts, gold_unit=unit, problem=problem, timeout=limit)
    return verdicts


def _verify_many(items: list[tuple[Any, ...]], verifier: Verifier | None) -> list[Any]:
    """``verify_many`` (timeouts retried) on the given verifier, or on one made (and closed) for this call."""
    if verifier is not None:
        return _verify_settled(verifier, items)
    with Verifier() as v:
        return _verify_settled(v, items)


def _given_slots(problem: str, slots: Sequence[GoldSlot], wanted: set[int | None], verifier: Verifier | None) -> set[int]:
    cands = candidates(problem)
    todo = [s for s in slots if s.index in wanted and s.answer_type not in _TEXT_TYPES]
    items = [([s.text], [c.text], s.answer_type, "", s.unit, None) for s in todo for c in cands]
    if not items:
        return set()
    verdicts = _verify_many(items, verifier)
    n = len(cands)
    return {s.index for i, s in enumerate(todo) if any(x.correct for x in verdicts[i * n:(i + 1) * n])}


# -------------------------------------------------------------------------------------- sanitiser

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)|\n")


def _sentences(text: str) -> list[tuple[int, int]]:
    """Sentence (or line, or list item) spans; math spans never split."""
    masked = mask(text, [m.span() for m in MATH.finditer(text)])
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(masked):
        if m.start() > start:
            spans.append((start, m.start()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


@dataclass
class Sanitised:
    """The sanitiser's output.

    Attributes:
        text: the guidance with every leaking sentence removed (may be empty).
        removed: the sentences removed.
        result: the gate's verdict on ``text``.
    """

    text: str
    removed: list[str]
    result: GateResult

    @property
    def passed(self) -> bool:
        """Something is left and it passes the gate."""
        return bool(self.text.strip()) and self.result.passed


def sanitise(
    guidance: str,
    slots: Sequence[GoldSlot],
    *,
    problem: str = "",
    verifier: Verifier | None = None,
    rounds: int = 3,
) -> Sanitised:
    """Remove each sentence (line, list item, display block) that holds a finding, and check again.

    Args:
        guidance: the text.
        slots: the gold slots.
        problem: the problem text.
        verifier: the verifier (default: a private one per call).
        rounds: how many remove-and-check passes at most.

    Returns:
        The remaining text, what was removed, and the gate's result on the remaining text.
    """
    text, removed = guidance, []
    result = check_leakage(text, slots, problem=problem, verifier=verifier)
    for _ in range(max(1, rounds)):
        if result.passed or not text.strip():
            break
        drop = [(s, e) for s, e in _sentences(text) if any(f.start < e and f.end > s for f in result.findings)]
        if not drop:  # a finding outside every sentence span: drop everything
            drop = [(0, len(text))]
        removed += [text[s:e].strip() for s, e in drop]
        keep, pos = [], 0
        for s, e in drop:
            keep.append(text[pos:s])
            pos = e
        keep.append(text[pos:])
        text = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]{2,}", " ", "".join(keep))).strip()
        result = check_leakage(text, slots, problem=problem, verifier=verifier)
    return Sanitised(text, removed, result)
