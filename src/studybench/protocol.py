"""The conversation a model sees for sub-problem i of an attempt (docs/protocol.md section 2).

One attempt is a sequential multi-turn solve of a parent. For sub-problem ``i`` the messages are:

* a system message: :data:`DEFAULT_SYSTEM_PROMPT`, or a system-prompt artefact (GEPA, EvoSkill)
  that replaces it, or the default with a playbook artefact (ACE) appended between delimiters;
* turn 0 (user): :data:`INSTRUCTION`, the shared stem and sub-problem 0's text, separated by blank
  lines, empty parts skipped (ours: a stem identical to sub-problem 0's text is shown once);
* for every earlier sub-problem ``j < i``: its user turn, then the model's **own** earlier reply
  with reasoning removed (:func:`studybench.answers.strip_reasoning`), or
  :data:`PLACEHOLDER` when nothing usable remains (empty, failed turn);
* turn ``i`` (user): only sub-problem ``i``'s text.

Guidance (textbook-grounded hints) is appended to the sub-problem's user turn under a heading and
combines with either the system prompt or the playbook (not both: they are alternatives).
Never any gold solution or answer.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from studybench.answers import strip_reasoning
from studybench.datasets import Dataset
from studybench.files import (
    MAX_TEXT_BYTES,
    InputFileError,
    decode_utf8,
    jsonl_lines,
    parse_json,
    read_user_bytes,
)
from studybench.records import Parent, SubProblemRef
from studybench.tokens import count_tokens

__all__ = [
    "ANSWER_FORMAT",
    "DEFAULT_SYSTEM_PROMPT",
    "PLAYBOOK_MAX_TOKENS",
    "GUIDANCE_HEADING",
    "INSTRUCTION",
    "PLACEHOLDER",
    "Artefacts",
    "ArtefactError",
    "GuidanceKey",
    "build_messages",
    "clean_ace_playbook",
    "guidance_coverage",
    "load_artefacts",
    "messages_digest",
    "nearest_guidance_keys",
    "reference_messages_digest",
    "unmatched_guidance_message",
    "user_turn",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert physicist. Solve physics problems carefully and rigorously."
)

ANSWER_FORMAT = (
    "Reason step by step. The last line of your reply must be "
    "`Final Answer: \\boxed{...}` with your final answer inside the box. If there are several "
    "answers, put each one in its own \\boxed{} on that same line, in the order asked. Do not put "
    "units inside the boxes."
)
"""How to reason and box the final answer: the part of :data:`INSTRUCTION` that training exports
append to the last user turn (paper appendix J's boxed-answer suffix)."""

INSTRUCTION = "Solve the following physics problem. " + ANSWER_FORMAT

PLACEHOLDER = (
    "(No final answer was given for the previous sub-question. Continue with the next sub-question.)"
)

PLAYBOOK_BEGIN = "=== PLAYBOOK (BEGIN) ==="
PLAYBOOK_END = "=== PLAYBOOK (END) ==="
PLAYBOOK_NOTE = (
    "The playbook below collects strategies and lessons learned on earlier problems. Use it silently "
    "where it helps; do not mention or quote it in your answer."
)

GUIDANCE_HEADING = "### Guidance"
GUIDANCE_NOTE = (
    "The guidance above is a hint drawn from textbook material. It is not the answer: you must still "
    "derive the result yourself and box your final answer as instructed."
)

PLAYBOOK_MAX_TOKENS = 12_000
"""Default cap on a playbook's size, in built-in tokens (:mod:`studybench.tokens`): the paper's cap."""

GuidanceKey = tuple[str, str, str, str]
"""(source, year, source_problem_id, problem_id), all strings."""


class ArtefactError(ValueError):
    """An artefact file that cannot be used; the message names the file and what is wrong."""


@dataclass
class Artefacts:
    """Optional method artefacts applied to the conversation (docs/protocol.md section 2).

    Attributes:
        system_prompt: replaces the default system message (GEPA, EvoSkill).
        playbook: appended to the default system message between delimiters (ACE).
        guidance: hint text per sub-problem, keyed by (source, year, source_problem_id, problem_id).
        digests: sha256 of each artefact file, for the run manifest.
    """

    system_prompt: str | None = None
    playbook: str | None = None
    guidance: dict[GuidanceKey, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.system_prompt is not None and self.playbook is not None:
            raise ArtefactError(
                "--system-prompt and --playbook are alternatives (a system prompt replaces the system "
                "message, a playbook extends the default one); give at most one. Guidance combines with either."
            )

    def system_message(self) -> str:
        """The system message content for every turn."""
        if self.system_prompt is not None:
            return self.system_prompt
        if self.playbook is not None:
            return (
                f"{DEFAULT_SYSTEM_PROMPT}\n\n{PLAYBOOK_NOTE}\n\n{PLAYBOOK_BEGIN}\n"
                f"{self.playbook.strip()}\n{PLAYBOOK_END}"
            )
        return DEFAULT_SYSTEM_PROMPT

    def guidance_for(self, parent: Parent, sub_id: str) -> str | None:
        return self.guidance.get((parent.source, parent.year, parent.source_problem_id, sub_id))

    def describe(self) -> dict[str, Any]:
        return {
            "system_prompt": self.system_prompt is not None,
            "playbook": self.playbook is not None,
            "guidance_entries": len(self.guidance),
            "digests": dict(self.digests),
        }


def _read_text(path: Path, what: str) -> tuple[str, str]:
    """(text, sha256 of the bytes) of an artefact file: a regular file of at most 10 MiB, UTF-8, not blank."""
    try:
        data = read_user_bytes(path, limit=MAX_TEXT_BYTES)
        text = decode_utf8(data, path)
    except InputFileError as e:
        raise ArtefactError(f"{what} file {path}: {e.problem}") from None
    if not text.strip():
        raise ArtefactError(f"{what} file {path}: empty")
    return text, hashlib.sha256(data).hexdigest()


_GUIDANCE_TEXT_FIELDS = ("guidance", "hint", "hints", "text")


def _load_guidance(raw: str, path: Path) -> dict[GuidanceKey, str]:
    """Guidance file: JSON list (or ``{"data": [...]}``) or JSONL of objects with ``source``,
    ``year``, ``source_problem_id``, ``problem_id`` and ``guidance`` (or ``hint``/``text``)."""
    records: list[Any]
    try:  # strict JSON (files.parse_json): NaN, 1e999999, a 400-digit integer are refused, naming the field
        obj = parse_json(raw, path)
        if isinstance(obj, dict) and isinstance(obj.get("data"), list):
            obj = obj["data"]
        records = obj if isinstance(obj, list) else [obj]
    except InputFileError as e:
        if not e.syntax:
            raise ArtefactError(f"guidance file {e}") from None
        records = []  # not one JSON text: JSON Lines
        for n, line in jsonl_lines(raw):
            try:
                records.append(parse_json(line, path, line=n))
            except InputFileError as e:
                raise ArtefactError(f"guidance file {e}") from None
    out: dict[GuidanceKey, str] = {}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise ArtefactError(f"guidance file {path}: record {i}: expected an object")
        missing = [k for k in ("source", "source_problem_id") if k not in rec]
        if missing:
            raise ArtefactError(f"guidance file {path}: record {i}: missing field '{missing[0]}'")
        text = next((rec[f] for f in _GUIDANCE_TEXT_FIELDS if isinstance(rec.get(f), str)), None)
        if text is None:
            raise ArtefactError(
                f"guidance file {path}: record {i} (source_problem_id={rec['source_problem_id']}): "
                f"field 'guidance': missing or not a string"
            )
        try:
            spid = _key_part(rec["source_problem_id"])
            pid = rec.get("problem_id")
            key = (
                _key_part(rec["source"]),
                _key_part(rec.get("year")),
                spid,
                spid if pid in (None, "") else _key_part(pid),
            )
        except ValueError as e:
            raise ArtefactError(f"guidance file {path}: record {i}: {e}") from None
        if key in out:
            raise ArtefactError(f"guidance file {path}: record {i}: duplicate key {key}")
        if text.strip():
            out[key] = text.strip()
    return out


def _key_part(v: Any) -> str:
    """A join-key component as the test sets spell it: strings stripped, integral numbers without
    a decimal point (``2003.0`` -> ``"2003"``), ``None`` -> ``""``.

    Raises:
        ValueError: a list, object, boolean or non-integral float.
    """
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ValueError(f"key field must be a string or number, got {type(v).__name__}")
    if isinstance(v, float):
        if not v.is_integer():
            raise ValueError(f"key field {v!r} is not an integer")
        return str(int(v))
    return str(v).strip()


_ACE_BULLET = re.compile(r"^\s*(?:[-*+]\s+)?\[([^\]]+)\]\s*helpful=(\d+)\s*harmful=(\d+)\s*::\s*(.*)$")
_HEADER = re.compile(r"^\s{0,3}(#{1,6})\s")


def clean_ace_playbook(text: str) -> str:
    """A playbook as the model should see it: ACE's bullet ids and counters removed.

    ACE (Agentic Context Engineering) writes Markdown sections (``## STRATEGIES & INSIGHTS``,
    ``## FORMULAS & CALCULATIONS``, ``## CODE SNIPPETS & TEMPLATES``, ``## COMMON MISTAKES TO AVOID``,
    ``## PROBLEM-SOLVING HEURISTICS``, ``## CONTEXT CLUES & INDICATORS``, ``## OTHERS``) whose bullets
    read ``[sai-00001] helpful=3 harmful=0 :: text`` (an id is a section slug and a global number; any
    text without ``]`` is read as an id, as ACE's own parser does). Each becomes ``- text``; headers and other
    lines are kept; a section left with no content (up to the next header of its level or above) is
    dropped; runs of blank lines shrink to one. A text with no ACE bullet is returned unchanged.

    Args:
        text: the playbook file's text.

    Returns:
        The cleaned playbook.
    """
    lines = text.splitlines()
    if not any(_ACE_BULLET.match(line) for line in lines):
        return text
    lines = [f"- {m.group(4).strip()}" if (m := _ACE_BULLET.match(line)) else line.rstrip() for line in lines]
    levels = [len(m.group(1)) if (m := _HEADER.match(line)) else 0 for line in lines]
    keep = [True] * len(lines)
    for h, level in enumerate(levels):
        if level:
            end = next((j for j in range(h + 1, len(lines)) if 0 < levels[j] <= level), len(lines))
            keep[h] = any(lines[j].strip() and not levels[j] for j in range(h + 1, end))
    out: list[str] = []
    for line, kept in zip(lines, keep, strict=True):
        if kept and (line.strip() or (out and out[-1].strip())):
            out.append(line)
    return "\n".join(out).strip() + "\n"


def load_artefacts(
    system_prompt: Path | None = None,
    playbook: Path | None = None,
    guidance: Path | None = None,
    playbook_max_tokens: int | None = PLAYBOOK_MAX_TOKENS,
) -> Artefacts:
    """Read artefact files given on the command line.

    An ACE playbook is cleaned with :func:`clean_ace_playbook` (the digest stays the file's sha256).

    Args:
        system_prompt: file replacing the system message.
        playbook: file appended to the default system message.
        guidance: JSON or JSONL file of hints (see :data:`GuidanceKey`).
        playbook_max_tokens: the most built-in tokens (:func:`studybench.tokens.count_tokens`) the
            cleaned playbook may hold; ``None`` or 0: no cap.

    Returns:
        The artefacts, with the sha256 of each file's bytes.

    Raises:
        ArtefactError: a missing or unreadable file, one that is not a regular file (named pipe,
            device, directory) or over 10 MiB, not UTF-8 or empty, a malformed guidance record, or
            both a system prompt and a playbook, a playbook over ``playbook_max_tokens``.
    """
    digests: dict[str, str] = {}
    sp = pb = None
    gd: dict[GuidanceKey, str] = {}
    if system_prompt is not None:
        sp, digests["system_prompt"] = _read_text(system_prompt, "system prompt")
        sp = sp.strip()
    if playbook is not None:
        pb, digests["playbook"] = _read_text(playbook, "playbook")
        pb = clean_ace_playbook(pb)
        n = count_tokens(pb) if playbook_max_tokens else 0
        if playbook_max_tokens and n > playbook_max_tokens:
            raise ArtefactError(
                f"playbook file {playbook}: {n:,} tokens (built-in count, ids and counters removed) is over the "
                f"cap of {playbook_max_tokens:,}; raise it with --playbook-max-tokens N (0: no cap)"
            )
    if guidance is not None:
        raw, digests["guidance"] = _read_text(guidance, "guidance")
        gd = _load_guidance(raw, guidance)
    return Artefacts(system_prompt=sp, playbook=pb, guidance=gd, digests=digests)


def guidance_coverage(
    art: Artefacts, ds: Dataset, selected: list[Parent] | None = None
) -> tuple[int, list[GuidanceKey]]:
    """(number of sub-problems of ``selected`` (default: all parents) with guidance, guidance keys that
    match no sub-problem of ``ds`` at all)."""
    keys = set(ds.sub_problem_keys())
    parents = ds.parents if selected is None else selected
    sel = {(p.source, p.year, p.source_problem_id, s.problem_id) for p in parents for s in p.subs()}
    matched = sum(1 for k in art.guidance if k in sel)
    return matched, sorted(k for k in art.guidance if k not in keys)


def nearest_guidance_keys(key: GuidanceKey, ds: Dataset, n: int = 3) -> list[GuidanceKey]:
    """The sub-problem keys of ``ds`` closest to a guidance key that matches none.

    Within the same parent (source, year, source_problem_id) when ``ds`` has it, the ``n`` nearest
    ``problem_id`` spellings; otherwise the ``n`` keys closest as a whole (``difflib`` ratio >= 0.6).

    Args:
        key: the unmatched key.
        ds: the test set.
        n: the most keys returned.

    Returns:
        Up to ``n`` keys of ``ds``, nearest first (possibly none).
    """
    keys = ds.sub_problem_keys()
    same = {k[3]: k for k in keys if k[:3] == key[:3]}
    if same:
        return [same[m] for m in difflib.get_close_matches(key[3], list(same), n=n, cutoff=0.0)]
    joined = {"\x1f".join(k): k for k in keys}
    return [joined[m] for m in difflib.get_close_matches("\x1f".join(key), list(joined), n=n, cutoff=0.6)]


def unmatched_guidance_message(unmatched: list[GuidanceKey], art: Artefacts, ds: Dataset, *, shown: int = 5) -> str:
    """One line naming guidance keys that match no sub-problem of ``ds``, each with its nearest real keys.

    Args:
        unmatched: the keys (:func:`guidance_coverage`'s second item).
        art: the artefacts holding them.
        ds: the test set.
        shown: how many keys the message lists (the rest are counted).

    Returns:
        The message (without the advice on what to do).
    """
    parts = []
    for key in unmatched[:shown]:
        near = nearest_guidance_keys(key, ds)
        parts.append(f"{key!r}" + (f" (nearest: {', '.join(repr(k) for k in near)})" if near else " (nothing close)"))
    more = f"; and {len(unmatched) - shown} more" if len(unmatched) > shown else ""
    return (f"{len(unmatched)} of {len(art.guidance)} guidance entries match no sub-problem of {ds.name}: "
            f"{'; '.join(parts)}{more}")


def user_turn(parent: Parent, index: int, artefacts: Artefacts | None = None) -> str:
    """The user message for sub-problem ``index`` of ``parent`` (with guidance if any)."""
    sub = parent.subs()[index]
    if index == 0:
        stem = parent.stem.strip()
        text = sub.problem.strip()
        parts = [INSTRUCTION]
        if stem and stem != text:
            parts.append(stem)
        if text:
            parts.append(text)
        content = "\n\n".join(parts)
    else:
        content = sub.problem.strip()
    if artefacts is not None:
        hint = artefacts.guidance_for(parent, sub.problem_id)
        if hint:
            content = f"{content}\n\n{GUIDANCE_HEADING}\n\n{hint}\n\n{GUIDANCE_NOTE}"
    return content


def previous_reply(completion: str | None) -> str:
    """What the model sees of its own earlier reply: reasoning removed, or the placeholder."""
    if not completion:
        return PLACEHOLDER
    visible = strip_reasoning(completion)
    return visible if visible.strip() else PLACEHOLDER


def build_messages(
    ref: SubProblemRef,
    previous: list[str | None],
    artefacts: Artefacts | None = None,
) -> list[dict[str, str]]:
    """Messages for sub-problem ``ref`` given the model's raw replies to the earlier sub-problems.

    Args:
        ref: the sub-problem to ask (its ``index`` within the parent).
        previous: raw completions of sub-problems ``0..index-1`` of the same attempt (``None`` or
            ``""`` for a failed or empty turn); exactly ``ref.index`` items.

    Raises:
        ValueError: ``len(previous) != ref.index``.
    """
    if len(previous) != ref.index:
        raise ValueError(f"need {ref.index} previous replies, got {len(previous)}")
    art = artefacts or Artefacts()
    msgs: list[dict[str, str]] = [{"role": "system", "content": art.system_message()}]
    for j in range(ref.index):
        msgs.append({"role": "user", "content": user_turn(ref.parent, j, art)})
        msgs.append({"role": "assistant", "content": previous_reply(previous[j])})
    msgs.append({"role": "user", "content": user_turn(ref.parent, ref.index, art)})
    return msgs


def messages_digest(messages: list[dict[str, str]]) -> str:
    """sha256 of the canonical JSON of ``messages`` (hex, 64 chars).

    The canonical JSON is ``json.dumps(messages, ensure_ascii=False, separators=(",", ":"),
    sort_keys=True)`` encoded as UTF-8 (lone surrogates kept: ``surrogatepass``). When every message
    is a dict of strings, ``orjson`` writes exactly those bytes (the same escapes, raw non-ASCII, keys
    in code-point order; ``tests/evaluate/test_harness_fastpath.py`` checks every code point) several times
    faster, and is used; anything else (lone surrogates, other values) takes the reference path.
    """
    if _all_text(messages):
        try:
            return hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()
        except orjson.JSONEncodeError:  # a lone surrogate
            pass
    return reference_messages_digest(messages)


def _all_text(messages: Any) -> bool:
    """Whether ``messages`` is a list of dicts whose keys and values are all ``str``."""
    if type(messages) is not list:
        return False
    for m in messages:
        if type(m) is not dict:
            return False
        for k, v in m.items():
            if type(k) is not str or type(v) is not str:
                return False
    return True


def reference_messages_digest(messages: list[dict[str, Any]]) -> str:
    """:func:`messages_digest` by its definition, with :mod:`json` (any JSON value; for checks)."""
    blob = json.dumps(messages, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
