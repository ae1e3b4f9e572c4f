r"""``build guide``: method-only guidance per sub-problem behind a leakage gate (issue 15, item 6).

Inputs, under the work directory ``DIR``:

``coverage.jsonl`` (written by ``build verify``, format in :mod:`studybench.testset.verification.kpverify`): the lines
    with ``record: "sub_problem"`` (lines with ``record: "kp"`` are skipped; a line without ``record`` is
    taken as a sub-problem). Fields read: the four key fields ``source``, ``year``,
    ``source_problem_id``, ``problem_id`` (top-level strings, or an object under ``key``); ``status``;
    ``kps``: ``[{kp_id, name, type, status, description, matches: [{fragment_id, score, kind}]}]``, a KP
    being covered when its ``status`` is ``covered`` or ``strongly covered`` (or ``covered: true``).
    Other fields are ignored; a torn last line is skipped.
``fragments.jsonl`` (written by ``build fragments``): ``id`` (or ``fragment_id``) and ``text``
    (``book``, ``chapter``, ``section`` shown when present).

The test set (``--split``) gives each sub-problem's stem, text and gold.

Per sub-problem with a covered KP: up to :data:`MAX_KPS` covered KPs (best match first), up to
:data:`MAX_FRAGMENTS` fragments each (their first :data:`FRAGMENT_CHARS` characters). The writer
(temperature 0.7) writes method-only guidance; each round is

(a) the deterministic gate (:func:`studybench.testset.guidance.leakage.check_leakage`),
(b) a review by the reviewer model (default: the writer), which sees the **parent stem**, the
    sub-problem and the gold and answers ``{"verdict": "pass"|"fail", "reasons": [...]}``,
(c) a writer reply cut by the token limit, a failed call or an empty reply is a failed round
    (never passing; it is not kept as a draft).

Up to :data:`ROUNDS` rounds; a failure's reasons go into the next prompt. When none passes, the
sanitiser (:func:`studybench.testset.guidance.leakage.sanitise`) runs on the last complete draft.

Outputs: ``DIR/guide.jsonl``, one record per sub-problem (resumable; ``path`` is
``passed_round_N``, ``sanitised_fallback``, ``failed`` or ``no_coverage``; ``transport_failed`` when
the writer's calls failed in transport and no draft came (such a record is asked again by the next run); ``review_passed``;
``gate_passed``; every round's writer/gate/review outcome), and ``DIR/guidance.jsonl``, the
artefact ``studybench eval --guidance`` reads: only guidance that passed a review, plus the
sanitised fallbacks when ``accept_fallback`` (each keeps ``path`` and ``review_passed: false``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studybench.datasets import Dataset
from studybench.files import InputFileError, JsonlLog, atomic_write_lines, parse_json
from studybench.records import Parent, SubProblem
from studybench.testset.guidance.leakage import GoldSlot, check_leakage, gold_slots, sanitise
from studybench.testset.llmstage import (
    Asked,
    StageLLM,
    StageMetaError,
    check_stage_meta,
    input_digest,
    run_items,
)
from studybench.verify import Verifier

__all__ = [
    "FRAGMENT_CHARS",
    "MAX_FRAGMENTS",
    "MAX_KPS",
    "ROUNDS",
    "GuideError",
    "GuideSettings",
    "parse_review",
    "read_jsonl",
    "guide_one",
    "run_guide",
    "write_guidance_file",
]

MAX_KPS = 8
MAX_FRAGMENTS = 2
FRAGMENT_CHARS = 2000
ROUNDS = 3


class GuideError(ValueError):
    """Inputs the stage cannot use (the message names the file and the record)."""


@dataclass
class GuideSettings:
    """Settings of one guide run (stored in ``DIR/guide.meta.json``)."""

    teacher: str
    reviewer: str
    temperature: float = 0.7
    max_tokens: int = 1024
    review_max_tokens: int = 512
    rounds: int = ROUNDS
    accept_fallback: bool = False


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file; a torn (unparsable) last line is skipped.

    Raises:
        GuideError: the file is missing, or a line other than the last is not a JSON object.
    """
    if not os.path.lexists(path):
        raise GuideError(f"{path}: cannot read (No such file or directory)")
    try:
        return list(JsonlLog(path).rows())
    except InputFileError as e:
        raise GuideError(str(e)) from None


_COVERED = ("covered", "strongly covered")


def _key(row: dict[str, Any], where: str) -> tuple[str, str, str, str]:
    obj = row.get("key") if isinstance(row.get("key"), dict) else row
    if not isinstance(obj.get("source"), str) or obj.get("source_problem_id") is None:
        raise GuideError(f"{where}: expected the key fields source, year, source_problem_id, problem_id")
    try:
        spid = str(obj["source_problem_id"]).strip()
        return (str(obj["source"]).strip(), str(obj.get("year") or "").strip(), spid,
                str(obj.get("problem_id") or spid).strip())
    except KeyError as e:
        raise GuideError(f"{where}: key field {e.args[0]!r} missing") from None


_SYSTEM_WRITER = (
    "You write method-only guidance for a physics problem, drawn from textbook passages. Name the concepts, "
    "laws and formulae that apply, the textbook examples that show the method, and the order of the steps. "
    "Never give the answer, any intermediate numerical result, or the key calculation; never box anything; "
    "never say what the final answer is or restate numbers from the problem. Plain prose, at most 250 words."
)
_SYSTEM_REVIEWER = (
    "You review guidance written for a physics problem. It must be method-only: it must not reveal the gold "
    "answer in any form (value, expression, equation, rearrangement, verdict), nor an intermediate result or the "
    "key calculation. Reply with one JSON object and nothing else: "
    '{"verdict": "pass" or "fail", "reasons": ["..."]}'
)


def parse_review(text: str) -> dict[str, Any]:
    """The reviewer's verdict: a JSON object ``{"verdict": "pass"|"fail", "reasons": [...]}`` (fences allowed).

    Raises:
        ValueError: no such object (the reply is asked again).
    """
    t = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    start, end = t.find("{"), t.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object")
    try:  # strict: NaN, Infinity and absurd numbers are refused too
        obj = parse_json(t[start:end + 1], "reply")
    except InputFileError as e:
        raise ValueError(f"invalid JSON ({e.problem})") from None
    verdict = str(obj.get("verdict", "")).strip().lower() if isinstance(obj, dict) else ""
    if verdict not in ("pass", "fail"):
        raise ValueError("verdict must be 'pass' or 'fail'")
    reasons = obj.get("reasons") or []
    if isinstance(reasons, str):
        reasons = [reasons]
    return {"verdict": verdict, "reasons": [str(r)[:500] for r in reasons][:10] if isinstance(reasons, list) else []}


def _problem_block(parent: Parent, sub: SubProblem) -> str:
    stem = parent.stem.strip()
    parts = [f"Problem (shared stem):\n{stem}"] if stem else []
    parts.append(f"Sub-problem:\n{sub.problem.strip() or parent.problem.strip()}")
    return "\n\n".join(parts)


def _writer_messages(parent: Parent, sub: SubProblem, kps: list[dict[str, Any]], feedback: list[str],
                     draft: str | None) -> list[dict[str, str]]:
    lines = [_problem_block(parent, sub), "", "Knowledge points and textbook passages:"]
    for i, kp in enumerate(kps, 1):
        lines.append(f"\nKP {i}: {kp['name']} ({kp.get('type', '')}). {kp.get('description', '')}".rstrip())
        for fr in kp["fragments"]:
            where = " / ".join(str(fr[k]) for k in ("book", "chapter", "section") if fr.get(k))
            lines.append(f"[{fr['fragment_id']}{' - ' + where if where else ''}]\n{fr['text']}")
    if feedback and draft is not None:
        lines += ["", "Your previous guidance was rejected:", draft, "", "Reasons:", *[f"- {r}" for r in feedback],
                  "", "Write it again without these problems."]
    elif feedback:
        lines += ["", "The previous attempt failed:", *[f"- {r}" for r in feedback]]
    lines += ["", "Write the guidance now."]
    return [{"role": "system", "content": _SYSTEM_WRITER}, {"role": "user", "content": "\n".join(lines)}]


def _review_messages(parent: Parent, sub: SubProblem, guidance: str) -> list[dict[str, str]]:
    user = (f"{_problem_block(parent, sub)}\n\nGold answer: {sub.answer}\n\nGuidance to review:\n"
            f"<<<\n{guidance}\n>>>\n\nDoes the guidance leak the gold answer, an intermediate result or the key "
            "calculation? Reply with the JSON object only.")
    return [{"role": "system", "content": _SYSTEM_REVIEWER}, {"role": "user", "content": user}]


def _call_outcome(a: Asked) -> dict[str, Any]:
    return {"ok": a.ok, "finish_reason": a.finish_reason, "truncated": a.truncated, "error": a.error,
            "attempts": a.attempts}


def _select_kps(row: dict[str, Any], fragments: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    kps = []
    for kp in row.get("kps") or []:
        if not isinstance(kp, dict) or not (kp.get("covered") is True or kp.get("status") in _COVERED):
            continue
        matches = sorted((m for m in kp.get("matches") or [] if isinstance(m, dict)),
                         key=lambda m: -float(m.get("score") or 0))
        frs = []
        for m in matches:
            fr = fragments.get(str(m.get("fragment_id")))
            if fr is not None:
                frs.append({**{k: fr.get(k) for k in ("book", "chapter", "section")},
                            "fragment_id": str(m.get("fragment_id")), "text": str(fr.get("text", ""))[:FRAGMENT_CHARS]})
            if len(frs) == MAX_FRAGMENTS:
                break
        best = max((float(m.get("score") or 0) for m in matches), default=0.0)
        kps.append((best, {"kp_id": kp.get("kp_id"), "name": str(kp.get("name", "")), "type": kp.get("type", ""),
                           "description": str(kp.get("description") or ""), "fragments": frs}))
    kps.sort(key=lambda t: -t[0])
    return [k for _, k in kps[:MAX_KPS]]


async def guide_one(writer: StageLLM, reviewer: StageLLM, verifier: Verifier, parent: Parent, sub: SubProblem,
                    kps: list[dict[str, Any]], settings: GuideSettings) -> dict[str, Any]:
    """Write, gate and review guidance for one sub-problem (see the module docstring).

    Args:
        writer: the teacher.
        reviewer: the reviewer (may be the same object).
        verifier: the rule verifier used by the gate.
        parent: the parent.
        sub: the sub-problem.
        kps: the selected KPs with their fragments.
        settings: the run's settings.

    Returns:
        The record (without its key fields).
    """
    slots: list[GoldSlot] = gold_slots(sub)
    problem = "\n\n".join(t for t in (parent.stem, sub.problem) if t and t.strip())
    rounds: list[dict[str, Any]] = []
    draft: str | None = None
    feedback: list[str] = []
    for n in range(1, settings.rounds + 1):
        rec: dict[str, Any] = {"round": n}
        rounds.append(rec)
        a = await writer.ask(_writer_messages(parent, sub, kps, feedback, draft), temperature=settings.temperature,
                             max_tokens=settings.max_tokens, salt=f"guide-round-{n}")
        rec["writer"] = _call_outcome(a)
        text = (a.text or "").strip()
        if a.truncated or a.finish_reason == "length":
            rec["failed"] = "writer reply cut at the token limit"
            feedback = ["your reply was cut off at the length limit; write shorter guidance"]
            continue
        if a.error is not None or not text:
            rec["failed"] = f"writer call failed ({a.error})" if a.error else "writer reply empty"
            continue
        draft = text
        gate = await asyncio.to_thread(check_leakage, text, slots, problem=problem, verifier=verifier)
        rec["gate"] = gate.to_dict()
        if not gate.passed:
            rec["failed"] = "leakage gate"
            feedback = gate.describe()
            continue
        r = await reviewer.ask(_review_messages(parent, sub, text), temperature=0.0,
                               max_tokens=settings.review_max_tokens, validate=parse_review, salt=f"review-round-{n}")
        rec["review"] = {**_call_outcome(r), **(r.parsed if r.ok and isinstance(r.parsed, dict) else {})}
        if not r.ok or not isinstance(r.parsed, dict):
            rec["failed"] = "review call failed or unreadable"
            continue
        if r.parsed["verdict"] != "pass":
            rec["failed"] = "review"
            feedback = r.parsed["reasons"] or ["the reviewer found a leak"]
            continue
        return {"path": f"passed_round_{n}", "review_passed": True, "gate_passed": True, "guidance": text,
                "rounds": rounds, "removed": []}
    if draft is None:
        out = {"path": "failed", "review_passed": False, "gate_passed": False, "guidance": "", "rounds": rounds,
               "removed": [], "why": "no complete draft"}
        if any((rd.get("writer") or {}).get("error") for rd in rounds):
            out["transport_failed"] = True  # not an outcome of the sub-problem: asked again on the next run
        return out
    s = await asyncio.to_thread(sanitise, draft, slots, problem=problem, verifier=verifier)
    if not s.passed:
        return {"path": "failed", "review_passed": False, "gate_passed": False, "guidance": "", "rounds": rounds,
                "removed": s.removed, "why": "sanitised draft empty or still leaking", "gate": s.result.to_dict()}
    return {"path": "sanitised_fallback", "review_passed": False, "gate_passed": True, "guidance": s.text,
            "rounds": rounds, "removed": s.removed}


def write_guidance_file(records: list[dict[str, Any]], out: Path, accept_fallback: bool) -> dict[str, int]:
    """Write the ``eval --guidance`` artefact from the stage's records.

    Args:
        records: ``guide.jsonl`` records.
        out: the file to write (``DIR/guidance.jsonl``).
        accept_fallback: also emit ``sanitised_fallback`` guidance (marked ``review_passed: false``).

    Returns:
        Counts per path, and ``emitted``.
    """
    counts: dict[str, int] = {}
    lines = []
    for r in records:
        counts[r["path"]] = counts.get(r["path"], 0) + 1
        ok = r.get("review_passed") is True or (accept_fallback and r["path"] == "sanitised_fallback")
        if ok and str(r.get("guidance", "")).strip():
            lines.append(json.dumps({k: r[k] for k in ("source", "year", "source_problem_id", "problem_id", "guidance",
                                                       "path", "review_passed")}, ensure_ascii=False, allow_nan=False) + "\n")
    atomic_write_lines(out, lines)
    counts["emitted"] = len(lines)
    return counts


async def run_guide(
    work: Path,
    dataset: Dataset,
    writer: StageLLM,
    reviewer: StageLLM,
    settings: GuideSettings,
    *,
    concurrency: int = 8,
    restart: bool = False,
    progress: Callable[..., None] | None = None,
    verifier: Verifier | None = None,
) -> dict[str, Any]:
    """Run the guide stage over ``DIR/coverage.jsonl`` (see the module docstring).

    Args:
        work: the work directory.
        dataset: the test set the coverage was built from.
        writer: the teacher.
        reviewer: the reviewer.
        settings: the stage's settings.
        concurrency: sub-problems in flight.
        restart: discard ``guide.jsonl`` and start again.
        progress: passed to the resumable driver.
        verifier: the gate's verifier (default: a private one).

    Returns:
        Counts per path, ``emitted``, ``transport_failed`` (the keys of sub-problems whose writer calls
        failed in transport and gave no draft: recorded as failed, asked again by the next run), and
        token usage of the writer and reviewer.

    Raises:
        GuideError: a missing or malformed input, an unknown key, or inputs changed since the first run.
    """
    cov_path, frag_path = work / "coverage.jsonl", work / "fragments.jsonl"
    coverage = read_jsonl(cov_path)
    fragments = {}
    for fr in read_jsonl(frag_path):
        fid = fr.get("fragment_id", fr.get("id"))
        if fid is not None:
            fragments[str(fid)] = fr
    meta = {"coverage": input_digest(cov_path), "fragments": input_digest(frag_path), "dataset": dataset.sha256,
            "settings": {k: v for k, v in vars(settings).items() if k != "accept_fallback"}}
    out = work / "guide.jsonl"
    try:
        check_stage_meta(work, "guide", meta, restart=restart)
    except StageMetaError as e:
        raise GuideError(str(e)) from None
    if restart and out.exists():
        out.unlink()
    old = read_jsonl(out) if out.exists() else []
    if any(r.get("transport_failed") for r in old):  # writer calls that failed in transport are asked again
        atomic_write_lines(out, (json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in old
                                 if not r.get("transport_failed")))
    subs = {(r.parent.source, r.parent.year, r.parent.source_problem_id, r.sub_id): r for r in dataset.sub_problem_refs()}
    items = []
    for n, row in enumerate(coverage, 1):
        if row.get("record", "sub_problem") != "sub_problem":
            continue
        key = _key(row, f"{cov_path}: line {n}")
        if key not in subs:
            raise GuideError(f"{cov_path}: line {n}: key {key} is no sub-problem of {dataset.name}")
        items.append((key, row))
    own = verifier is None
    v = verifier or Verifier()

    async def work_one(item: tuple[tuple[str, str, str, str], dict[str, Any]]) -> dict[str, Any]:
        key, row = item
        ref = subs[key]
        fields = dict(zip(("source", "year", "source_problem_id", "problem_id"), key, strict=True))
        kps = _select_kps(row, fragments)
        if not kps:
            return {**fields, "path": "no_coverage", "review_passed": False, "gate_passed": False, "guidance": "",
                    "rounds": [], "removed": [], "coverage_status": row.get("status")}
        rec = await guide_one(writer, reviewer, v, ref.parent, ref.sub, kps, settings)
        return {**fields, **rec, "coverage_status": row.get("status"),
                "kps": [k["kp_id"] for k in kps], "fragments": [f["fragment_id"] for k in kps for f in k["fragments"]]}

    def item_key(item: tuple[tuple[str, str, str, str], dict[str, Any]]) -> str:
        return hashlib.sha256(json.dumps(item[0], allow_nan=False).encode()).hexdigest()[:16]

    try:
        done = await run_items(items, item_key, work_one, out, concurrency=concurrency, progress=progress, restart=restart)
    finally:
        if own:
            v.close()
    records = read_jsonl(out)
    counts = write_guidance_file(records, work / "guidance.jsonl", settings.accept_fallback)
    return {"counts": counts, "items": done, "transport_failed": [r.get("key") for r in records if r.get("transport_failed")],
            "writer_usage": dict(writer.usage),
            "reviewer_usage": dict(reviewer.usage) if reviewer is not writer else {}}
