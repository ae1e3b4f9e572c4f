"""Data checks: report suspicious but loadable test-set records (``studybench data check``).

:func:`studybench.datasets.load_dataset` rejects records that cannot be used at all. This module
looks at records that *do* load and lists what a maintainer should look at before trusting a score
on them. It never rejects and never edits anything. Paper section 2.1 (test-set construction);
docs/protocol.md section 1 (records).

Finding kinds (see :data:`KINDS`):

``math_delimiter_in_box``
    ``$``, ``\\(`` or ``\\[`` inside a gold box (the box is already math; often OCR residue such as
    ``\\boxed{5 104 00 $5 \\times 10^{-4}$}``).
``prose_in_box``
    English prose inside a non-QL gold box, e.g. a ``\\text{(directed away from the disk)}`` remark
    after the answer; a rule judge compares it as part of the answer.
``control_character``
    control characters in a text field, typically a JSON escape that ate a LaTeX backslash
    (``"\\frac"`` written as ``"\\f"`` + ``rac`` = form feed + ``rac``).
``packed_box``
    a TUP/ALT gold whose slots sit in one box (``\\boxed{a, b, c}``);
    :func:`studybench.records.gold_boxes` splits it at top-level commas.
``text_outside_boxes``
    gold text outside the boxes that is not just separators (commas, ``\\quad``, "and", ...), e.g. a
    Python-list-looking gold ``['\\\\boxed{0}', ...]`` or a remark after the last box.
``gold_unparsable``
    the verifier cannot parse a gold box for its type
    (:func:`studybench.verify.check_gold_parsable`; skipped when the verifier is not importable).
``gold_check_timed_out``
    the verifier's parse check of a gold box overran even when retried with a long timeout
    (:data:`RETRY_TIMEOUT`); it says nothing about the box (a loaded machine, or a very heavy gold).
``label_variant``
    a ``problem_type`` (sub-discipline) label spelled differently from the dataset's most frequent
    spelling of the same label (see :func:`studybench.records.normalise_label`).
``stem_equals_sub``
    the shared stem repeats a sub-problem's text verbatim (the prompt would show it twice).
``ignored_parent_gold``
    a multi-sub parent that also carries its own gold answer, which scoring ignores.
``missing_field``
    an optional field that is absent or empty (``source_kind``, ``domain``, ``problem_type``, a
    sub-problem's ``solution``, a sub-problem's ``knowledge_points`` when most sub-problems have them).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from studybench.answers import find_boxes, match_brace
from studybench.datasets import Dataset
from studybench.records import COMPOUND_TYPES, AnswerType, Parent, SubProblem, gold_boxes
from studybench.records import label_map as records_label_map

__all__ = [
    "KINDS",
    "RETRY_TIMEOUT",
    "Finding",
    "check_dataset",
    "count_by_kind",
    "label_map",
    "label_variants",
]

KINDS: dict[str, str] = {
    "math_delimiter_in_box": "math delimiters ($, \\(, \\[) inside a gold box",
    "prose_in_box": "prose inside a non-QL gold box",
    "control_character": "control characters in a text field (a JSON escape ate a LaTeX backslash?)",
    "packed_box": "TUP/ALT slots packed into one box",
    "text_outside_boxes": "gold text outside the boxes that is not just separators",
    "gold_unparsable": "the verifier cannot parse a gold box for its type",
    "gold_check_timed_out": "the verifier's parse check of a gold box timed out, even retried",
    "label_variant": "sub-discipline label spelled more than one way",
    "stem_equals_sub": "stem identical to a sub-problem's text",
    "ignored_parent_gold": "multi-sub parent with its own (ignored) gold answer",
    "missing_field": "optional field absent or empty",
}
"""Every finding kind with a one-line description (for CLI help and reports)."""


@dataclass(frozen=True)
class Finding:
    """One suspicious spot in a test set.

    Attributes:
        kind: one of :data:`KINDS`.
        parent_uid: :attr:`studybench.records.Parent.uid` (``source/year/source_problem_id``).
        sub_id: the sub-problem id (``problem_id``; ``source_problem_id`` for a single-question parent),
            or ``""`` for parent-level findings.
        field: the field's path inside the record, e.g. ``sub_problems[1].answer``, ``answer``,
            ``problem_type``.
        message: what looks wrong, with a short excerpt.
    """

    kind: str
    parent_uid: str
    sub_id: str
    field: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """Plain dict (JSON-ready)."""
        return asdict(self)


# --------------------------------------------------------------------------- labels


def _as_datasets(ds: Dataset | Iterable[Dataset]) -> list[Dataset]:
    return [ds] if isinstance(ds, Dataset) else list(ds)


def _labels(ds: Dataset | Iterable[Dataset], field: str) -> list[str]:
    return [v for d in _as_datasets(ds) for p in d.parents if isinstance(v := getattr(p, field, ""), str)]


def label_variants(ds: Dataset | Iterable[Dataset], field: str = "problem_type") -> dict[str, list[str]]:
    """Labels spelled more than one way.

    Args:
        ds: one dataset or several (e.g. both splits, to compare their spellings).
        field: the parent field holding the label (default ``problem_type``, the sub-discipline).

    Returns:
        ``{canonical: [spelling, ...]}`` for every label with two or more spellings; the canonical
        display form is the one :func:`studybench.records.label_map` chooses (the most frequent
        spelling; ties: the first seen) and comes first in its list, the others follow by
        decreasing frequency. Labels spelled one way are left out.
    """
    labels = _labels(ds, field)
    mapping = records_label_map(labels)
    counts = Counter(x for x in labels if x in mapping)
    groups: dict[str, list[str]] = {}
    for spelling in counts:
        groups.setdefault(mapping[spelling], []).append(spelling)
    out: dict[str, list[str]] = {}
    for canon, spellings in groups.items():
        if len(spellings) > 1:
            rest = sorted((x for x in spellings if x != canon), key=lambda x: -counts[x])
            out[canon] = [canon, *rest]
    return out


def label_map(ds: Dataset | Iterable[Dataset], field: str = "problem_type") -> dict[str, str]:
    """Map every spelling of a label in ``ds`` to its display form (:func:`studybench.records.label_map`)."""
    return records_label_map(_labels(ds, field))


def count_by_kind(findings: Iterable[Finding]) -> dict[str, int]:
    """Number of findings per kind, in :data:`KINDS` order (kinds without findings left out)."""
    c = Counter(f.kind for f in findings)
    order = {k: i for i, k in enumerate(KINDS)}
    return {k: c[k] for k in sorted(c, key=lambda k: (order.get(k, len(order)), k))}


# --------------------------------------------------------------------------- text helpers

_MAX_EXCERPT = 100


def _show(text: str, limit: int = _MAX_EXCERPT) -> str:
    """Excerpt for a message: control characters escaped, long text cut."""
    out = []
    for c in text:
        if unicodedata.category(c) == "Cc":
            out.append(c.encode("unicode_escape").decode("ascii"))
        else:
            out.append(c)
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _math_delimiters(box: str) -> list[str]:
    """Math-mode delimiters in a box: ``$``, ``\\(``, ``\\)``, ``\\[``, ``\\]`` (``\\\\[4pt]`` and
    ``\\$`` do not count)."""
    found: list[str] = []
    i, n = 0, len(box)
    while i < n:
        c = box[i]
        if c == "\\":
            nxt = box[i + 1] if i + 1 < n else ""
            if nxt in ("(", "[", ")", "]") and nxt:
                found.append("\\" + nxt)
            i += 2
            continue
        if c == "$":
            found.append("$")
        i += 1
    return found


_TEXT_MACROS = ("\\text", "\\textrm", "\\textit", "\\textbf", "\\textsf", "\\mbox", "\\mathrm", "\\operatorname")
_PROSE_MACROS = ("\\text", "\\textrm", "\\textit", "\\textbf", "\\textsf", "\\mbox")
_STOPWORDS = frozenset(
    "the a an of to is are be for with from by in at on into see where when if not and or as this that "
    "its it which away directed perpendicular parallel toward towards than".split()
)
_WORD = re.compile(r"[A-Za-z]{2,}")
_COMMAND = re.compile(r"\\[A-Za-z]+")


def _text_groups(box: str, macros: tuple[str, ...]) -> tuple[list[str], str]:
    """Contents of ``\\text{...}``-like groups in ``box`` and the box with them removed."""
    groups: list[str] = []
    rest: list[str] = []
    i, n = 0, len(box)
    while i < n:
        if box[i] == "\\":
            m = _COMMAND.match(box, i)
            if m and m.group() in macros:
                j = m.end()
                while j < n and box[j] == " ":
                    j += 1
                if j < n and box[j] == "{":
                    end = match_brace(box, j)
                    if end > 0:
                        groups.append(box[j + 1 : end - 1])
                        rest.append(" ")
                        i = end
                        continue
            rest.append(box[i : i + 2])
            i += 2
            continue
        rest.append(box[i])
        i += 1
    return groups, "".join(rest)


def _is_prose(words: list[str]) -> bool:
    return len(words) >= 3 or any(w.lower() in _STOPWORDS for w in words)


def _prose_in_box(box: str) -> str | None:
    """The prose excerpt inside a box, or None (unit words such as ``\\text{ m/s}`` are fine)."""
    groups, rest = _text_groups(box, _PROSE_MACROS)
    prose = [g.strip() for g in groups if _is_prose(_WORD.findall(_COMMAND.sub(" ", g)))]
    if prose:
        return " | ".join(prose)
    # bare English in math mode: three or more words of letters in a row
    _, bare = _text_groups(rest, _TEXT_MACROS)
    bare = _COMMAND.sub(" ", bare)
    m = re.search(r"(?<![A-Za-z])[A-Za-z]{3,}(?:[ ~]+[A-Za-z]{2,}){2,}", bare)
    if m:
        return m.group()
    return None


_SEPARATORS = re.compile(
    r"""\s+
    | [,;.:$&]
    | \\(?:quad|qquad|newline|,|;|:|!|\ |\\)
    | \\(?:hspace|vspace)\*?\{[^{}]*\}
    | \\(?:text|textrm|mathrm|mbox)\s*\{\s*(?:and|or|,|;|\s)*\}
    | (?<![A-Za-z])(?:and|or)(?![A-Za-z])
    """,
    re.VERBOSE | re.IGNORECASE,
)


def _outside_text(answer: str) -> str:
    """Gold text outside the top-level boxes, with separators removed."""
    parts: list[str] = []
    last = 0
    for b in find_boxes(answer):
        parts.append(answer[last : b.start])
        last = b.end
    parts.append(answer[last:])
    raw = " ".join(parts)
    return _SEPARATORS.sub("", raw)


def _boxes_elided(answer: str) -> str:
    """The gold with every box's content replaced by ``…`` (shows what lies outside the boxes)."""
    parts: list[str] = []
    last = 0
    for b in find_boxes(answer):
        parts.append(answer[last : b.start] + "\\boxed{…}")
        last = b.end
    parts.append(answer[last:])
    return "".join(parts).strip()


_CC_NAMES = {"\t": "tab", "\r": "carriage return", "\x08": "backspace", "\x0c": "form feed", "\x0b": "vertical tab"}
_ESCAPE_LETTER = {"\t": "t", "\r": "r", "\x08": "b", "\x0c": "f", "\x0b": "v", "\x07": "a"}


# LaTeX commands whose backslash + first letter is also a JSON escape (\t \r): a tab or carriage
# return directly followed by the rest of one of these is an eaten backslash, not whitespace.
_TAB_CR_COMMANDS = frozenset(
    "times theta tau text textbf textrm textit tilde tan tanh tfrac top triangle tag to "
    "rho right rangle rm rightarrow rbrace rfloor rceil".split()
)
_LETTERS = re.compile(r"[A-Za-z]*")


def _control_chars(text: str) -> str | None:
    """Describe control characters in ``text`` (newlines, tabs and CRLF as whitespace are fine), or None."""
    hits: Counter[str] = Counter()
    for i, c in enumerate(text):
        if unicodedata.category(c) != "Cc" or c == "\n":
            continue
        m = _LETTERS.match(text, i + 1)
        letters = m.group() if m else ""
        if c in ("\t", "\r") and _ESCAPE_LETTER[c] + letters not in _TAB_CR_COMMANDS:
            continue  # a real tab / carriage return, not an eaten backslash
        letters = letters[:8]
        if c in _ESCAPE_LETTER and letters:
            hits[f"U+{ord(c):04X} before {letters!r} (\\{_ESCAPE_LETTER[c]}{letters}?)"] += 1
        else:
            hits[f"U+{ord(c):04X} ({_CC_NAMES.get(c, unicodedata.name(c, 'control'))})"] += 1
    if not hits:
        return None
    total = sum(hits.values())
    shown = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in hits.most_common(3))
    return f"{total} control character{'s' if total > 1 else ''}: {shown}"


# --------------------------------------------------------------------------- gold parsing


RETRY_TIMEOUT = 60.0
"""Seconds allowed to the second parse check of a gold box whose first check (5 s) timed out."""


def _gold_parser() -> Callable[..., str | None] | None:
    """``studybench.verify.check_gold_parsable`` when it can be imported, else None (check skipped)."""
    try:
        from studybench.verify import check_gold_parsable
    except ImportError:
        return None
    return check_gold_parsable


# --------------------------------------------------------------------------- checks


class _Collector:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, kind: str, parent: Parent, sub_id: str, field: str, message: str) -> None:
        self.findings.append(Finding(kind, parent.uid, sub_id, field, message))


def _check_gold(
    out: _Collector,
    parent: Parent,
    sub: SubProblem,
    prefix: str,
    parser: Callable[..., str | None] | None,
) -> None:
    field = f"{prefix}answer"
    answer = sub.answer
    atype = sub.answer_type
    ts = sub.type_sequence
    raw_boxes = [b.content for b in find_boxes(answer)]
    boxes = gold_boxes(answer, atype, ts)
    sid = sub.problem_id

    if atype in COMPOUND_TYPES and len(raw_boxes) == 1 and len(ts) > 1:
        out.add(
            "packed_box", parent, sid, field,
            f"{atype.value} with {len(ts)} slots ({sub.type_sequence_str}) packed into one box; "
            f"split at top-level commas into: {' | '.join(_show(b, 40) for b in boxes)}",
        )

    outside = _outside_text(answer)
    if outside:
        out.add("text_outside_boxes", parent, sid, field,
                f"text outside the boxes: '{_show(_boxes_elided(answer), 160)}'")

    for i, box in enumerate(boxes):
        where = f"box {i + 1}/{len(boxes)}" if len(boxes) > 1 else "box"
        slot_type = ts[i] if atype in COMPOUND_TYPES and i < len(ts) else atype
        delims = _math_delimiters(box)
        if delims:
            out.add("math_delimiter_in_box", parent, sid, field,
                    f"{where} holds math delimiters {' '.join(dict.fromkeys(delims))}: '{_show(box)}'")
        if slot_type not in (AnswerType.QL, AnswerType.TUP, AnswerType.ALT):
            prose = _prose_in_box(box)
            if prose:
                out.add("prose_in_box", parent, sid, field,
                        f"{where} ({slot_type.value}) holds prose '{_show(prose, 60)}': '{_show(box)}'")
        if parser is not None and slot_type not in (AnswerType.TUP, AnswerType.ALT):
            # (a slot typed TUP/ALT is compared as a whole text, never parsed)
            try:
                why = parser(box, slot_type)
                if why == "timed out":  # load, not the box: once more with a long limit
                    why = parser(box, slot_type, timeout=RETRY_TIMEOUT)
            except Exception as e:  # noqa: BLE001 - a verifier bug must not stop the report
                why = f"verifier raised {type(e).__name__}: {e}"
            if why == "timed out":
                out.add("gold_check_timed_out", parent, sid, field,
                        f"{where} ({slot_type.value}) '{_show(box, 60)}': the parse check timed out "
                        f"(also with {RETRY_TIMEOUT:g} s)")
            elif why:
                out.add("gold_unparsable", parent, sid, field,
                        f"{where} ({slot_type.value}) '{_show(box, 60)}': {_show(str(why), 120)}")


def _check_text(out: _Collector, parent: Parent, sid: str, field: str, text: str) -> None:
    desc = _control_chars(text) if isinstance(text, str) else None
    if desc:
        out.add("control_character", parent, sid, field, desc)


def check_dataset(ds: Dataset, *, parse_golds: bool = True) -> list[Finding]:
    """Report suspicious but loadable records of a test set (never rejects, never edits).

    Args:
        ds: a loaded test set (:func:`studybench.datasets.load_dataset`).
        parse_golds: also ask the verifier whether every gold box parses for its type
            (``studybench.verify.check_gold_parsable``; silently skipped when it cannot be imported).

    Returns:
        Findings in file order (parent by parent; parent-level findings first), see :data:`KINDS`.
    """
    out = _Collector()
    parser = _gold_parser() if parse_golds else None
    canon = label_map(ds)
    variants = label_variants(ds)
    canon_count = Counter(p.problem_type for p in ds.parents)
    n_subs = sum(len(p.sub_problems) for p in ds.parents)
    n_kp = sum(1 for p in ds.parents for s in p.sub_problems if "knowledge_points" in s.model_fields_set)
    expect_kp = n_subs > 0 and n_kp * 2 > n_subs

    for parent in ds.parents:
        # parent-level
        for name in ("source_kind", "domain", "problem_type"):
            value = getattr(parent, name)
            if name not in parent.model_fields_set:
                out.add("missing_field", parent, "", name, f"optional field {name!r} is absent")
            elif not str(value).strip():
                out.add("missing_field", parent, "", name, f"optional field {name!r} is empty")
        label = parent.problem_type
        if label and canon.get(label, label) != label:
            group = variants.get(canon[label], [])
            out.add(
                "label_variant", parent, "", "problem_type",
                f"{label!r} is spelled {canon[label]!r} in {canon_count[canon[label]]} other parent(s); "
                f"variants: {', '.join(repr(v) for v in group)}",
            )
        if not parent.is_single:
            _check_text(out, parent, "", "problem", parent.problem)
            stem = parent.problem.strip()
            for j, s in enumerate(parent.sub_problems):
                if stem and s.problem.strip() == stem:
                    only = "the only" if len(parent.sub_problems) == 1 else f"sub-problem {j}'s"
                    out.add(
                        "stem_equals_sub", parent, s.problem_id, f"sub_problems[{j}].problem",
                        f"the stem repeats {only} sub-problem text verbatim ({len(stem)} characters); "
                        "the prompt would show it twice",
                    )
            if parent.answer.strip():
                same = [s.problem_id for s in parent.sub_problems if s.answer.strip() == parent.answer.strip()]
                extra = f" (it equals the gold of {', '.join(same)})" if same else ""
                out.add(
                    "ignored_parent_gold", parent, "", "answer",
                    f"the parent has sub_problems and its own gold '{_show(parent.answer, 60)}', "
                    f"which scoring ignores{extra}",
                )
        # sub-problems
        for j, sub in enumerate(parent.subs()):
            prefix = "" if parent.is_single else f"sub_problems[{j}]."
            sid = sub.problem_id
            _check_gold(out, parent, sub, prefix, parser)
            for name in ("problem", "solution", "answer"):
                _check_text(out, parent, sid, f"{prefix}{name}", getattr(sub, name))
            if not sub.solution.strip():
                given = (parent if parent.is_single else sub).model_fields_set
                state = "empty" if "solution" in given else "absent"
                out.add("missing_field", parent, sid, f"{prefix}solution", f"optional field 'solution' is {state}")
            if expect_kp and not parent.is_single and "knowledge_points" not in sub.model_fields_set:
                err = getattr(sub, "knowledge_points_error", None)
                why = f" (knowledge_points_error: '{_show(str(err), 80)}')" if err else ""
                out.add("missing_field", parent, sid, f"{prefix}knowledge_points",
                        f"'knowledge_points' is absent while {n_kp} of {n_subs} sub-problems have it{why}")
    return out.findings
