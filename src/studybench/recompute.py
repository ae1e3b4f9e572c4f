r"""Recompute numeric golds from the reference solution's own numbers (``studybench data check --recompute``).

A worked solution writes its arithmetic as chains such as ``P = d\sigma\, n = 1.3\times10^{-34}
\times 1.1\times10^{24} = 1.4\times10^{-10}``. For every NV gold (an NV sub-problem, or an NV slot of
a TUP/ALT gold) this module:

1. reads the solution's math segments in order and splits them into chains at ``=``, ``\approx``
   and ``\simeq`` (an arrow, inequality or ``\sim`` ends a chain);
2. evaluates each computation on written numbers with :func:`studybench.arith.evaluate_arithmetic`
   (a small safe evaluator; nothing is ever ``eval``-ed or given to SymPy);
3. links a computation to the number the chain then states (``= 1.4\times10^{-10}``) when the two
   agree within :data:`LINK_TOL` (the stated number is the computation, rounded); a unit conversion
   between two stated numbers (``= 0.001 m = 1 mm``) carries the value over by their written ratio;
4. replaces a rounded intermediate result, wherever a later computation writes it again, by its
   unrounded value (so rounding does not compound from step to step);
5. finds the last stated number of the solution that equals the gold and compares the gold with its
   unrounded value by the verifier's NV tolerance (1% widened by half a unit in the gold's last
   written digit, at most 2%; :func:`studybench.verify.comparison.tolerance.close_enough`).

A gold is **flagged** when the solution's own numbers, carried at full precision, give a value that
a careful answer would report and that fails against the gold: the gold was rounded too early or
the solution's last step miscomputes. A gold is **not recomputable** when the solution states no
number equal to it, or the step that states it is no computation this evaluator reads (symbols,
constants written as letters, a step in other units). Physics mistakes (a wrong formula computed
correctly) are out of reach; :mod:`studybench.errata` lists those found by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from studybench.answers import find_boxes
from studybench.arith import NumberToken, evaluate_arithmetic, tokenize_arithmetic
from studybench.datasets import Dataset
from studybench.records import COMPOUND_TYPES, AnswerType, Parent, SubProblem
from studybench.verify.comparison.tolerance import close_enough
from studybench.verify.reading.numbers import written_resolution

__all__ = [
    "LINK_TOL",
    "RecomputeResult",
    "Recomputation",
    "recompute_dataset",
    "recompute_parent",
]

LINK_TOL = 0.10
"""A computation and the number its chain then states are one value (rounded) when they differ by at
most this share; further apart (a unit changed inside the step, or a slip), the stated number starts
afresh and nothing is carried over."""

_MAX_SOLUTION = 200_000
_MATH = re.compile(
    r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$"
    r"|\\begin\{(equation\*?|align\*?|aligned|gather\*?|eqnarray\*?|multline\*?)\}(.+?)\\end\{\5\}",
    re.DOTALL,
)
_DROP = re.compile(r"\\(?:tag|label|hspace|vspace|phantom)\*?\s*\{[^{}]*\}|\\(?:begin|end)\s*\{[A-Za-z*]+\}|\\nonumber|\\notag")
_STATEMENT_BREAK = re.compile(r"\\\\(?:\[[^\]]*\])?|\\q?quad\b|;|(?<!\\),\s+(?=[A-Za-z\\])|\\text\s*\{\s*(?:and|so|where|with|hence|thus|or)\b[^{}]*\}")
_RELATION = re.compile(r"=|\\approx\b|\\simeq\b|\\cong\b|\\thickapprox\b|\u2248")
_BREAKER = re.compile(r"\\(?:Rightarrow|rightarrow|Longrightarrow|implies|to|sim|propto|le|ge|leq|geq|ll|gg|neq|ne|lt|gt)\b|[<>\u2192\u21d2]")


@dataclass(frozen=True)
class Recomputation:
    """What the solution's own numbers say about one numeric gold.

    Attributes:
        parent_uid: :attr:`studybench.records.Parent.uid`.
        sub_id: the sub-problem id.
        field: the gold's field path (``answer``, ``sub_problems[1].answer``).
        slot: the box position within the gold (0 for an atomic NV gold).
        gold: the gold box as written.
        gold_value: its number.
        status: ``"flagged"`` (the recomputed value fails against the gold), ``"agrees"``, or
            ``"not_recomputable"``.
        recomputed: the value the solution's numbers give at full precision (``None`` when not recomputable).
        relative_error: ``|recomputed - gold| / |gold|`` (``None`` when not recomputable).
        step: the computation recomputed, with the number it stated and the rounded intermediate results
            it unrounded (``None`` when not recomputable).
        kind: for a flagged gold: ``"beyond_precision"`` (the careful value differs by more than half a
            unit in the gold's last written digit: the gold is wrong at its own digits) or ``"coarse"``
            (the gold rounds the careful value correctly, but to so few digits that the careful value
            fails the NV check, e.g. ``1 mm`` for 0.96 mm).
        reason: why it is flagged or not recomputable, in words.
    """

    parent_uid: str
    sub_id: str
    field: str
    slot: int
    gold: str
    gold_value: float | None
    status: str
    recomputed: float | None = None
    relative_error: float | None = None
    step: str | None = None
    kind: str | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


@dataclass
class RecomputeResult:
    """:func:`recompute_dataset`'s answer.

    Attributes:
        items: one :class:`Recomputation` per numeric gold slot, in file order.
    """

    items: list[Recomputation] = field(default_factory=list)

    @property
    def recomputed(self) -> int:
        """Numeric golds the solution's numbers could recompute (flagged or agreeing)."""
        return sum(1 for r in self.items if r.status != "not_recomputable")

    @property
    def flagged(self) -> list[Recomputation]:
        """The flagged golds."""
        return [r for r in self.items if r.status == "flagged"]

    def summary(self) -> dict[str, int]:
        """``{"numeric_golds", "recomputed", "agrees", "flagged", "not_recomputable"}``."""
        return {"numeric_golds": len(self.items), "recomputed": self.recomputed,
                "agrees": sum(1 for r in self.items if r.status == "agrees"), "flagged": len(self.flagged),
                "not_recomputable": sum(1 for r in self.items if r.status == "not_recomputable")}


# --------------------------------------------------------------------------- reading numbers


@dataclass(frozen=True)
class _Stated:
    """A chain member that states one number (``1.4\\times10^{-10}``, ``87 \\text{ event/sec}``)."""

    value: float
    mantissa: str  # the mantissa as written (for the written resolution)
    text: str


def _stated(member: str) -> _Stated | None:
    """The one number a member states (a mantissa times an optional power of ten, units allowed), or None."""
    toks = tokenize_arithmetic(member)
    if not toks:
        return None
    # a unit group may carry its own power (\mathrm{m}^{2}, \mathrm{s}^{-1}) or a division by one (/\mathrm{s})
    core = _drop_unit_powers(toks)
    if core is None:
        return None
    sign = 1.0
    if core and core[0][0:2] in (("op", "-"), ("op", "+")):
        sign = -1.0 if core[0][1] == "-" else 1.0
        core = core[1:]
    if not core or core[0][0] != "num":
        return None
    tok = core[0][1]
    assert isinstance(tok, NumberToken)
    rest = [t[0:2] if t[0] != "num" else ("num", getattr(t[1], "text", "")) for t in core[1:]]
    if not rest:
        return _Stated(sign * tok.value, tok.text, member)
    if tok.text == "10" and _is_exponent(rest[0:]):  # 10^{-3}: a bare power of ten
        value = evaluate_arithmetic(member)
        return None if value is None else _Stated(value, "", member)
    if rest[0:3] == [("op", "*"), ("num", "10"), ("op", "^")] and _is_exponent(rest[2:]):
        value = evaluate_arithmetic(member)
        return None if value is None else _Stated(value, tok.text + "\\times10^", member)
    return None


def _is_exponent(rest: list[tuple[str, object]]) -> bool:
    """Whether ``rest`` is exactly ``^ n``, ``^ ( n )`` or ``^ ( - n )`` (a power of ten's exponent)."""
    if not rest or rest[0] != ("op", "^"):
        return False
    tail = rest[1:]
    if len(tail) == 1:
        return tail[0][0] == "num" and len(str(tail[0][1])) == 1
    if tail[0] != ("op", "(") or tail[-1] != ("op", ")"):
        return False
    inner = tail[1:-1]
    if inner and inner[0] in (("op", "-"), ("op", "+")):
        inner = inner[1:]
    return len(inner) == 1 and inner[0][0] == "num" and str(inner[0][1]).isdigit()


def _drop_unit_powers(toks: list[tuple[str, object, int]]) -> list[tuple[str, object, int]] | None:
    """The tokens without unit groups (and the powers, products and divisions attached to them)."""
    out: list[tuple[str, object, int]] = []
    i, n = 0, len(toks)
    while i < n:
        k, v, _ = toks[i]
        if k == "unit":
            if out and out[-1][0] == "op" and out[-1][1] in ("/", "*"):
                out.pop()
            i += 1
            while i < n and toks[i][0:2] == ("op", "^"):  # ^{2}, ^{-1}, ^2
                i += 1
                if i < n and toks[i][0:2] == ("op", "("):
                    depth = 0
                    while i < n:
                        if toks[i][0:2] == ("op", "("):
                            depth += 1
                        elif toks[i][0:2] == ("op", ")"):
                            depth -= 1
                            if depth == 0:
                                break
                        i += 1
                i += 1
            continue
        out.append(toks[i])
        i += 1
    while out and out[-1][0] == "op" and out[-1][1] in ("/", "*"):
        out.pop()
    return out


def _literals(toks: list[tuple[str, object, int]]) -> list[tuple[int, float, int]]:
    """Numbers written in a computation: (offset of the mantissa, value, power of ten) for ``m`` and ``m \\times 10^{e}``.

    Exponents, subscripts and bare powers of ten are left out (they are exact as written).
    """
    kinds = [t[0:2] if t[0] != "num" else ("num", getattr(t[1], "text", "")) for t in toks]
    out: list[tuple[int, float, int]] = []
    n = len(toks)
    i = 0
    while i < n:
        if kinds[i] in (("op", "^"), ("op", "_")):
            i = _after_exponent(kinds, i)
            continue
        k, v, _ = toks[i]
        if k != "num" or (kinds[i][1] == "10" and i + 1 < n and kinds[i + 1] == ("op", "^")):
            i += 1
            continue
        assert isinstance(v, NumberToken)
        e = 0
        if kinds[i + 1: i + 4] == [("op", "*"), ("num", "10"), ("op", "^")]:
            end = _after_exponent(kinds, i + 3)
            if _is_exponent(kinds[i + 3: end]):
                digits = [str(x[1]) for x in kinds[i + 4: end] if x[0] == "num"]
                e = int(digits[0]) * (-1 if ("op", "-") in kinds[i + 4: end] else 1)
                out.append((v.start, v.value * 10.0 ** e, e))
                i = end
                continue
        out.append((v.start, v.value, 0))
        i += 1
    return out


def _after_exponent(kinds: list[tuple[str, object]], i: int) -> int:
    """The index after the exponent or subscript whose ``^`` / ``_`` is at ``i``."""
    j = i + 1
    if j < len(kinds) and kinds[j] == ("op", "("):
        depth = 0
        while j < len(kinds):
            if kinds[j] == ("op", "("):
                depth += 1
            elif kinds[j] == ("op", ")"):
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return j
    return min(j + 1, len(kinds))


def _unbox(text: str) -> str:
    """``text`` with every ``\\boxed{X}`` replaced by ``X``."""
    boxes = find_boxes(text)
    for b in reversed(boxes):
        text = text[: b.start] + " " + b.content + " " + text[b.end :]
    return text


def _members(segment: str) -> Iterable[list[str]]:
    """The chains of a math segment: lists of members between relation signs, at brace depth 0."""
    text = _DROP.sub(" ", _unbox(segment))
    for statement in _STATEMENT_BREAK.split(text):
        for piece in _BREAKER.split(statement):
            members: list[str] = []
            depth, last = 0, 0
            i = 0
            while i < len(piece):
                c = piece[i]
                if c == "\\" and i + 1 < len(piece) and piece[i + 1] in "{}":
                    i += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                elif depth == 0:
                    m = _RELATION.match(piece, i)
                    if m:
                        members.append(piece[last:i])
                        last = i = m.end()
                        continue
                i += 1
            members.append(piece[last:])
            cleaned = [_clean_member(m) for m in members]
            if len(cleaned) > 1:
                yield cleaned


def _clean_member(m: str) -> str:
    return m.strip().rstrip(".,;:").replace("&", " ").strip()


def _segments(solution: str) -> list[str]:
    if not isinstance(solution, str) or len(solution) > _MAX_SOLUTION:
        return []
    out = []
    for m in _MATH.finditer(solution):
        body = next((g for g in (m.group(1), m.group(2), m.group(3), m.group(4), m.group(6)) if g is not None), "")
        out.append(body)
    if not out:
        out = [line for line in solution.splitlines() if "=" in line]  # solutions written without delimiters
    return out


@dataclass
class _Event:
    """A number the solution states, with the unrounded value its computation gives (or None)."""

    value: float
    unrounded: float | None
    step: str


def _fmt(x: float) -> str:
    return f"{x:.4g}"


class _Tracer:
    """Walks solutions' chains in order; rounded intermediate results carry over to later solutions."""

    def __init__(self) -> None:
        self.known: list[tuple[float, float]] = []  # (stated value, unrounded value)

    def unround(self, value: float) -> float | None:
        for stated, full in reversed(self.known):
            if abs(stated - value) <= 1e-12 * max(abs(stated), 1e-300):
                return full
        return None

    def compute(self, member: str) -> tuple[float | None, str]:
        """A computation's value with rounded intermediate results unrounded, and the step as text."""
        toks = tokenize_arithmetic(member)
        if not toks:
            return None, ""
        values: dict[int, float] = {}
        swaps: list[str] = []
        for offset, value, e in _literals(toks):
            full = self.unround(value)
            if full is not None:
                values[offset] = full / 10.0 ** e
                if _fmt(value) != _fmt(full):
                    swaps.append(f"{_fmt(value)} -> {_fmt(full)}")
        v = evaluate_arithmetic(member, values)
        if v is None:
            return None, ""
        step = " ".join(member.split())
        return v, step + (f" [rounded intermediates unrounded: {', '.join(swaps)}]" if swaps else "")

    def trace(self, solution: str) -> list[_Event]:
        """Every stated number of ``solution``, with its unrounded value where a computation gives it."""
        events: list[_Event] = []
        for segment in _segments(solution):
            for chain in _members(segment):
                cur: float | None = None
                cur_step = ""
                prev: _Stated | None = None
                for member in chain:
                    st = _stated(member)
                    if st is None:
                        cur, cur_step = self.compute(member)
                        prev = None
                        continue
                    full: float | None = None
                    step = ""
                    if cur is not None and prev is None:  # the result of the computation just before it
                        if st.value != 0 and abs(cur - st.value) <= LINK_TOL * abs(st.value):
                            full, step = cur, f"{cur_step} = {' '.join(st.text.split())}"
                    elif cur is not None and prev is not None and prev.value != 0:
                        # a unit conversion between two stated numbers: carried over by their written ratio
                        full, step = cur * st.value / prev.value, f"{cur_step} = {' '.join(st.text.split())}"
                    if full is None:
                        full = self.unround(st.value)
                        step = "" if full is None else f"{' '.join(st.text.split())} (stated before)"
                    events.append(_Event(st.value, full, step))
                    if full is not None and _substitutable(st) and abs(full - st.value) > 1e-12 * abs(st.value):
                        self.known.append((st.value, full))
                    cur, cur_step, prev = full, step, st
        return events


def _substitutable(st: _Stated) -> bool:
    """A stated number whose value later computations may write again: a decimal or a scientific mantissa."""
    return "." in st.mantissa or "\\times10^" in st.mantissa


# --------------------------------------------------------------------------- golds


def _gold_number(box: str) -> _Stated | None:
    """The one number a gold box states (``87 \\text{ event / sec}``, ``d = 1\\,\\mathrm{mm}``), or None.

    A gold with an inequality, or stating several numbers (``328\\,K \\approx 55^\\circ C``), is left alone.
    """
    if _BREAKER.search(box):
        return None
    chains = list(_members(box))
    members = [m for chain in chains for m in chain] if chains else [box]
    numbers = [st for m in members if (st := _stated(_clean_member(m))) is not None]
    return numbers[0] if len(numbers) == 1 and _stated(_clean_member(members[-1])) is not None else None


def _same(a: float, b: float) -> bool:
    """Equal numbers, or equal magnitudes (a gold may state the magnitude of a signed result)."""
    return abs(abs(a) - abs(b)) <= 1e-9 * max(abs(b), 1e-300)


def _digit_resolution(g: _Stated) -> float:
    """Half a unit in the last written significant digit of a stated number (a plain integer counts its units)."""
    mant = g.mantissa.split("\\times10^")[0]
    if not mant or g.value == 0:
        return 0.0
    digits = mant.lstrip("+-")
    if "." in digits:
        decimals = len(digits.split(".", 1)[1])
    else:  # 1300: trailing zeros of an integer are not significant digits
        decimals = -(len(digits) - len(digits.rstrip("0"))) if digits.rstrip("0") else 0
    try:
        m = abs(float(digits))
    except ValueError:
        return 0.0
    return 0.0 if m == 0 else abs(g.value) * 0.5 * 10.0 ** (-decimals) / m


def _judge(parent: Parent, sub: SubProblem, field_path: str, slot: int, box: str,
           events: list[_Event]) -> Recomputation:
    base = {"parent_uid": parent.uid, "sub_id": sub.problem_id, "field": field_path, "slot": slot, "gold": box}
    g = _gold_number(box)
    if g is None:
        return Recomputation(**base, gold_value=None, status="not_recomputable", reason="the gold is not one written number")
    same = [e for e in events if e.unrounded is not None and _same(e.value, g.value)]
    if not same:  # the gold may round the solution's last stated number further
        res = _digit_resolution(g)
        same = [e for e in events if e.unrounded is not None and res and abs(abs(e.value) - abs(g.value)) <= res * (1 + 1e-9)]
    if not same:
        stated = any(_same(e.value, g.value) for e in events)
        return Recomputation(**base, gold_value=g.value, status="not_recomputable",
                             reason="no computation on written numbers states the gold" if stated
                             else "the solution states no number equal to the gold")
    done = same
    derived = [e for e in done if not e.step.endswith("(stated before)")]
    e = (derived or done)[-1]
    assert e.unrounded is not None
    if (e.unrounded < 0) != (g.value < 0) and _same(abs(e.value), abs(g.value)):
        e = _Event(-e.value, -e.unrounded, e.step)  # the gold gives a magnitude (a binding energy, a distance)
    rel = abs(e.unrounded - g.value) / abs(g.value) if g.value else (0.0 if e.unrounded == 0 else float("inf"))
    if close_enough(e.unrounded, g.value, resolution=written_resolution(g.mantissa or g.text, g.value)):
        return Recomputation(**base, gold_value=g.value, status="agrees", recomputed=e.unrounded, relative_error=rel, step=e.step)
    within = abs(e.unrounded - g.value) <= _digit_resolution(g) * (1 + 1e-9)
    kind = "coarse" if within else "beyond_precision"
    why = ("the gold is a correct rounding at its written digits, but so coarse that the careful value fails the NV check"
           if within else "the gold differs from the careful value by more than its written digits allow")
    return Recomputation(**base, gold_value=g.value, status="flagged", recomputed=e.unrounded, relative_error=rel,
                         step=e.step, kind=kind,
                         reason=f"the solution's own numbers give {_fmt(e.unrounded)}, {100 * rel:.1f}% from the gold {_fmt(g.value)}: {why}")


def _nv_slots(sub: SubProblem) -> list[tuple[int, str]]:
    types = list(sub.type_sequence) if sub.answer_type in COMPOUND_TYPES else [sub.answer_type]
    return [(i, b) for i, (b, t) in enumerate(zip(sub.boxes, types, strict=False)) if t is AnswerType.NV]


def recompute_parent(parent: Parent) -> list[Recomputation]:
    """Recompute each numeric gold slot of one parent from its reference solutions.

    The sub-problems' solutions are read in order, so a rounded result of an earlier sub-problem that
    a later one writes again is unrounded there too; a gold is matched in its own sub-problem's solution.

    Args:
        parent: the parent.

    Returns:
        One :class:`Recomputation` per NV slot (NV sub-problems and NV slots of TUP/ALT golds), in order.
    """
    tracer = _Tracer()
    if not parent.is_single and parent.solution.strip():
        tracer.trace(parent.solution)
    out: list[Recomputation] = []
    for j, sub in enumerate(parent.subs()):
        events = tracer.trace(sub.solution) if sub.solution.strip() else []
        path = "answer" if parent.is_single else f"sub_problems[{j}].answer"
        out += [_judge(parent, sub, path, i, box, events) for i, box in _nv_slots(sub)]
    return out


def recompute_dataset(ds: Dataset) -> RecomputeResult:
    """Recompute every numeric gold of a test set from its reference solutions (never edits anything).

    Args:
        ds: a loaded test set.

    Returns:
        A :class:`RecomputeResult`: one item per NV slot, in file order.
    """
    res = RecomputeResult()
    for parent in ds.parents:
        res.items.extend(recompute_parent(parent))
    return res
