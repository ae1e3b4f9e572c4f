"""``build verify``: does a retrieved textbook fragment teach a knowledge point? A teacher scores each pair 0-3.

**Inputs** (the work directory, each file in the format its writer documents): ``kps.jsonl`` (one
sub-problem per line: ``key``, ``status``, the four key fields) and ``kp_canonical.jsonl`` (``id``,
``type``, ``name``, ``descriptions``, ``keywords``, ``uses``: sub-problem keys) from
:mod:`studybench.testset.knowledge.points`; ``retrieval.jsonl`` from :mod:`studybench.testset.retrieval.hybrid` (one
canonical KP per line: ``kp``, the canonical ``id``, and ``candidates``, best first, each with
``fragment`` (the fragment id); the 1-based position in the list is the candidate's rank); and
``fragments.jsonl`` from :mod:`studybench.testset.corpus.fragments` (``id``, ``book``, ``chapter``, ``section``,
``kind`` ``"exposition"`` or ``"example"``, ``text``). ``kp_id``/``fragment_id``/``rank``/``source``
are read too where a hand-made file uses them.

**Batching: one request per (KP, fragment) pair.** A pair's request holds only that KP and that
fragment, so its cache key changes exactly when one of them changes (a fragment whose text changed is
asked again, every other pair comes from the cache), a malformed reply re-asks one pair, a failed call
costs one pair, and requests stay short (one fragment of at most ~6,000 characters rather than 30). The
pairs run concurrently; ``--candidates N`` verifies only the N best-ranked candidates of each KP.

**Rubric** (temperature 0): 0 irrelevant, 1 mentioned, 2 applied or a worked example that uses it, 3 direct
exposition; with a short verbatim quote. **Quote check**: a score of 2 or more whose quote, normalised to
lower-case letters and digits (:func:`normalise_quote`), has fewer than 20 characters or does not occur in
the fragment normalised the same way is demoted to 1, and the pair records why (``demoted``).

**KP status**: ``strongly covered`` when a pair scores 3, else ``covered`` when one scores 2 (after the
quote check); else ``unverified`` when a pair's call failed (transport error, every reply malformed or cut
by the token limit) or the KP has no line in ``retrieval.jsonl``; else ``uncovered`` (every candidate
verified below 2, or no candidate retrieved). A failed call never makes a KP uncovered. The kept
matches are the top 3 exposition and top 2 example fragments scoring >= 2 (score, then retrieval rank).

**Sub-problem status**, from the statuses of the canonical KPs it uses, with C the covered KPs (strong
included), U the uncovered and X the unverified:

- ``unverified``: the decomposition of the sub-problem failed (it has no KPs), or X is not empty and the
  verified KPs do not already decide the status (see ``partial``);
- ``strongly covered``: X empty and every KP strongly covered;
- ``covered``: X and U empty (every KP covered, not all strongly);
- ``partial``: C and U both non-empty (whatever X holds: verifying it cannot change that);
- ``uncovered``: X and C empty (every KP verified uncovered).

**Outputs**: ``verify_pairs.jsonl`` (one line per pair, resumable), ``coverage.md`` (summary), the CSV
matrices ``coverage_status.csv`` and ``coverage_score.csv`` (sub-problem x KP: status, best score), and
``coverage.jsonl``, which ``build guide`` reads, with two kinds of line:

- ``record: "kp"``: ``kp_id``, ``type``, ``name``, ``status``, ``best_score``, ``failed_calls``,
  ``matches`` (the kept fragments), ``uses`` and ``pairs`` (every pair's score, quote and demotion);
- ``record: "sub_problem"``: ``key`` (``source/year/source_problem_id/problem_id``, as in ``kps.jsonl``),
  the four key fields ``source``, ``year``, ``source_problem_id``, ``problem_id`` as separate strings,
  ``sub_discipline``, ``status`` (:data:`SUB_STATUSES`), ``decompose_status``, ``kp_counts`` and ``kps``:
  ``[{kp_id, name, type, status, description, matches: [{fragment_id, kind, score, rank, quote}]}]``.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studybench.escaping import csv_writer, md_cell
from studybench.files import InputFileError, atomic_write_lines, atomic_write_text, parse_json
from studybench.testset.llmstage import StageLLM, check_stage_meta, input_digest, read_rows, run_items

__all__ = [
    "KP_STATUSES",
    "SUB_STATUSES",
    "VerifySettings",
    "check_quote",
    "kp_status",
    "normalise_quote",
    "parse_score",
    "sub_problem_status",
    "verify",
    "verify_prompt",
]

KP_STATUSES = ("strongly covered", "covered", "uncovered", "unverified")
SUB_STATUSES = ("strongly covered", "covered", "partial", "uncovered", "unverified")
PROMPT_VERSION = "verify-v1"
MIN_QUOTE = 20
KEEP = {"exposition": 3, "example": 2}

SYSTEM = ("You judge whether a textbook fragment teaches a physics knowledge point. You quote the fragment "
          "exactly, character for character, and never invent text.")

TEMPLATE = """Knowledge point ({type}): {name}
{descriptions}
Keywords: {keywords}

Textbook fragment ({source}, {where}; {kind}):
<<<
{text}
>>>

Score how well the fragment supports learning this knowledge point:
0 = irrelevant; 1 = only mentioned; 2 = applied, or a worked example that uses it; 3 = direct exposition (explained or derived).
Reply with one JSON object and nothing else: {{"score": 0 | 1 | 2 | 3, "quote": "a short verbatim quote from the fragment (one sentence, 20-200 characters) that shows it; empty for 0"}}"""


def normalise_quote(text: str) -> str:
    """``text`` reduced to lower-case ASCII letters and digits (NFKC first), for the quote check."""
    return re.sub(r"[^a-z0-9]", "", unicodedata.normalize("NFKC", text).casefold())


def check_quote(quote: str, fragment: str) -> str | None:
    """Why a quote cannot support a score of 2 or more, or ``None`` when it can.

    Args:
        quote: the teacher's quote.
        fragment: the fragment's text.

    Returns:
        ``"quote too short (N < 20 normalised characters)"``, ``"quote not found in the fragment"`` or ``None``.
    """
    q = normalise_quote(quote)
    if len(q) < MIN_QUOTE:
        return f"quote too short ({len(q)} < {MIN_QUOTE} normalised characters)"
    if q not in normalise_quote(fragment):
        return "quote not found in the fragment"
    return None


def parse_score(text: str) -> dict[str, Any]:
    """Validate a reply to :func:`verify_prompt`.

    Returns:
        ``{"score": 0-3, "quote": str}``.

    Raises:
        ValueError: not a JSON object with an integer ``score`` from 0 to 3 and a string ``quote``.
    """
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:  # strict: NaN, Infinity and absurd numbers are refused too
        data = parse_json(text[start:end + 1], "reply")
    except InputFileError as e:
        raise ValueError(f"invalid JSON ({e.problem})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    score = data.get("score")
    if isinstance(score, str) and score.strip() in ("0", "1", "2", "3"):
        score = int(score.strip())
    if isinstance(score, bool) or not isinstance(score, (int, float)) or score not in (0, 1, 2, 3):
        raise ValueError(f'"score" must be 0, 1, 2 or 3, got {score!r}')
    quote = data.get("quote", "")
    if quote is None:
        quote = ""
    if not isinstance(quote, str):
        raise ValueError('"quote" must be a string')
    return {"score": int(score), "quote": quote}


def verify_prompt(kp: dict[str, Any], fragment: dict[str, Any], *, max_chars: int = 8000) -> list[dict[str, str]]:
    """The chat messages scoring one (KP, fragment) pair.

    Args:
        kp: a canonical KP (``type``, ``name``, ``descriptions``, ``keywords``).
        fragment: a fragment (``book``, ``chapter``, ``section``, ``kind``, ``text``).
        max_chars: the fragment text is cut to this many characters.

    Returns:
        System and user messages.
    """
    text = str(fragment.get("text") or "")
    text = text if len(text) <= max_chars else text[:max_chars] + " [...]"
    section = fragment.get("section")
    section = " / ".join(map(str, section)) if isinstance(section, list) else section
    where = ", ".join(str(v) for v in (fragment.get("chapter"), section) if v)
    user = TEMPLATE.format(type=str(kp.get("type", "")).replace("_", " "), name=kp.get("name", ""),
                           descriptions="\n".join(f"- {d}" for d in (kp.get("descriptions") or [])[:2]),
                           keywords=", ".join((kp.get("keywords") or [])[:8]),
                           source=fragment.get("book") or fragment.get("source") or "",
                           where=where or "-", kind=fragment.get("kind", "exposition"), text=text)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


@dataclass
class VerifySettings:
    """Settings of ``build verify`` (recorded in ``DIR/verify.meta.json``).

    Attributes:
        candidates: verify the best-ranked N candidates of each KP (``None``: all).
        attempts: replies per pair before its call counts as failed.
        max_tokens: completion budget per request.
        concurrency: pairs in progress at once.
    """

    candidates: int | None = None
    attempts: int = 3
    max_tokens: int = 1024
    concurrency: int = 16


def kp_status(pairs: list[dict[str, Any]], retrieved: bool = True) -> str:
    """A KP's status from its verified pairs (see the module docstring).

    Args:
        pairs: pair rows with ``status`` (``"ok"``/``"failed"``) and ``score`` (after the quote check).
        retrieved: whether the KP has a line in ``retrieval.jsonl``.

    Returns:
        One of :data:`KP_STATUSES`.
    """
    scores = [p["score"] for p in pairs if p.get("status") == "ok" and isinstance(p.get("score"), int)]
    if 3 in scores:
        return "strongly covered"
    if 2 in scores:
        return "covered"
    if not retrieved or any(p.get("status") != "ok" for p in pairs):
        return "unverified"
    return "uncovered"


def sub_problem_status(kp_statuses: list[str], decomposed: bool = True) -> str:
    """A sub-problem's status from the statuses of its KPs (see the module docstring).

    Args:
        kp_statuses: one of :data:`KP_STATUSES` per KP it uses.
        decomposed: whether its decomposition succeeded.

    Returns:
        One of :data:`SUB_STATUSES`.
    """
    if not decomposed or not kp_statuses:
        return "unverified"
    covered = sum(s in ("covered", "strongly covered") for s in kp_statuses)
    uncovered = kp_statuses.count("uncovered")
    unverified = kp_statuses.count("unverified")
    if covered and uncovered:
        return "partial"
    if unverified:
        return "unverified"
    if uncovered:
        return "uncovered"
    return "strongly covered" if all(s == "strongly covered" for s in kp_statuses) else "covered"


def _need(path: Path, what: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ValueError(f"{path}: not found (run `studybench build {what}` first)")
    return read_rows(path)


def _retrieval(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{kp id: {"candidates": [{"fragment_id", "rank", ...}]}}`` from ``retrieval.jsonl`` rows (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        kp_id = r.get("kp", r.get("kp_id"))
        if not isinstance(kp_id, str):
            continue
        cands = []
        for pos, c in enumerate(r.get("candidates") or [], start=1):
            if not isinstance(c, dict):
                continue
            fid = c.get("fragment", c.get("fragment_id"))
            if fid is None:
                continue
            rank = c.get("rank")
            cands.append({**c, "fragment_id": str(fid), "rank": rank if isinstance(rank, int) else pos})
        out[kp_id] = {**r, "candidates": cands}
    return out


def _kept(pairs: list[dict[str, Any]], fragments: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    good = sorted((p for p in pairs if p.get("status") == "ok" and (p.get("score") or 0) >= 2),
                  key=lambda p: (-p["score"], p.get("rank") or 0))
    kept: list[dict[str, Any]] = []
    taken: Counter[str] = Counter()
    for p in good:
        kind = str(fragments.get(p["fragment_id"], {}).get("kind") or "exposition")
        kind = kind if kind in KEEP else "exposition"
        if taken[kind] < KEEP[kind]:
            taken[kind] += 1
            kept.append({"fragment_id": p["fragment_id"], "kind": kind, "score": p["score"], "rank": p.get("rank"),
                         "quote": p.get("quote", "")})
    return kept


def verify(
    work: Path,
    llm: StageLLM,
    settings: VerifySettings,
    *,
    restart: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run ``build verify`` in the work directory ``work`` (see the module docstring).

    Resumable: pairs already in ``verify_pairs.jsonl`` are kept, except failed ones, which are asked
    again. ``coverage.jsonl``, ``coverage.md`` and the CSV matrices are rebuilt every run.

    Args:
        work: the work directory.
        llm: the teacher (its cache normally ``work/cache/verify.jsonl``).
        settings: the settings.
        restart: discard ``verify_pairs.jsonl`` and the recorded settings first (cached replies are reused
            where the KP and the fragment are unchanged).
        progress: ``(advance, total)`` as pairs finish.

    Returns:
        The summary: ``pairs``, ``asked``, ``failed_pairs``, ``demoted``, ``kps`` and ``sub_problems``
        (counts per status), ``usage`` and the files written; ``left`` (pairs not asked because the
        teacher's budget was spent, ``budget_stop`` says why; a re-run asks them).

    Raises:
        ValueError: an input file is missing (says which stage makes it).
        StageMetaError: the inputs or settings changed since the pairs were written (use ``restart``).
        OSError: a file cannot be written.
    """
    work = Path(work)
    inputs = {name: work / name for name in ("kps.jsonl", "kp_canonical.jsonl", "retrieval.jsonl", "fragments.jsonl")}
    subs = _need(inputs["kps.jsonl"], "decompose")
    canonical = {c["id"]: c for c in _need(inputs["kp_canonical.jsonl"], "decompose") if "id" in c}
    retrieval = _retrieval(_need(inputs["retrieval.jsonl"], "retrieve"))
    fragments = {str(f["id"]): f for f in _need(inputs["fragments.jsonl"], "fragments") if "id" in f}
    check_stage_meta(work, "verify", {
        **{f"digest:{n}": input_digest(p) for n, p in inputs.items() if n != "kps.jsonl"},
        "teacher": llm.model, "candidates": settings.candidates, "attempts": settings.attempts,
        "max_tokens": settings.max_tokens, "prompt": PROMPT_VERSION,
    }, restart=restart)
    out = work / "verify_pairs.jsonl"
    if restart and out.exists():
        out.unlink()
    old = read_rows(out)
    if any(r.get("status") != "ok" for r in old):  # failed calls are asked again
        atomic_write_lines(out, (json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in old if r.get("status") == "ok"))

    items: list[tuple[dict[str, Any], dict[str, Any]]] = []
    missing_fragments: set[tuple[str, str]] = set()
    for kp_id, kp in canonical.items():
        cands = sorted((retrieval.get(kp_id) or {}).get("candidates") or [], key=lambda c: c.get("rank") or 0)
        for cand in cands[: settings.candidates] if settings.candidates else cands:
            fid = str(cand.get("fragment_id"))
            if fid not in fragments:
                missing_fragments.add((kp_id, fid))
                continue
            items.append((kp, cand))

    def pair_key(item: tuple[dict[str, Any], dict[str, Any]]) -> str:
        return f"{item[0]['id']}\t{item[1]['fragment_id']}"

    async def one(item: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
        kp, cand = item
        frag = fragments[str(cand["fragment_id"])]
        row: dict[str, Any] = {"kp_id": kp["id"], "fragment_id": str(cand["fragment_id"]), "rank": cand.get("rank"),
                               "kind": frag.get("kind")}
        asked = await llm.ask(verify_prompt(kp, frag), temperature=0.0, max_tokens=settings.max_tokens,
                              validate=parse_score, attempts=settings.attempts, salt=PROMPT_VERSION)
        if not asked.ok:
            return {**row, "status": "failed", "score": None, "error": asked.error or "no usable reply",
                    "attempts": asked.attempts}
        raw, quote = asked.parsed["score"], asked.parsed["quote"]
        why = check_quote(quote, str(frag.get("text") or "")) if raw >= 2 else None
        return {**row, "status": "ok", "raw_score": raw, "score": 1 if why else raw, "quote": quote, "demoted": why,
                "attempts": asked.attempts}

    async def run() -> dict[str, int]:
        try:
            return await run_items(items, pair_key, one, out, concurrency=settings.concurrency, progress=progress)
        finally:
            await llm.aclose()

    counts = asyncio.run(run())
    wanted = {pair_key(i) for i in items}
    pairs = [p for p in read_rows(out) if p.get("key") in wanted]
    done = {p.get("key") for p in pairs}
    # pairs a spent budget left unasked are unverified (never uncovered) until a re-run asks them
    pending = [{"kp_id": kp["id"], "fragment_id": str(c["fragment_id"]), "rank": c.get("rank"), "status": "failed",
                "score": None, "error": "not asked: the budget was spent"}
               for kp, c in items if pair_key((kp, c)) not in done]
    return _aggregate(work, subs, canonical, retrieval, fragments, pairs, counts, llm, missing_fragments, pending)


def _aggregate(work: Path, subs: list[dict[str, Any]], canonical: dict[str, dict[str, Any]],
               retrieval: dict[str, Any], fragments: dict[str, dict[str, Any]], pairs: list[dict[str, Any]],
               counts: dict[str, Any], llm: StageLLM, missing_fragments: set[tuple[str, str]],
               pending: list[dict[str, Any]]) -> dict[str, Any]:
    by_kp: dict[str, list[dict[str, Any]]] = {}
    gone = [{"kp_id": k, "fragment_id": f, "status": "failed", "score": None, "error": "fragment not in fragments.jsonl"}
            for k, f in sorted(missing_fragments)]  # a candidate that cannot be read is unverified, never uncovered
    gone += pending
    for p in [*pairs, *gone]:
        by_kp.setdefault(p["kp_id"], []).append(p)
    kp_rows: dict[str, dict[str, Any]] = {}
    for kp_id, kp in canonical.items():
        kp_pairs = sorted(by_kp.get(kp_id, []), key=lambda p: p.get("rank") or 0)
        status = kp_status(kp_pairs, retrieved=kp_id in retrieval)
        scores = [p["score"] for p in kp_pairs if p.get("status") == "ok"]
        kp_rows[kp_id] = {
            "record": "kp", "kp_id": kp_id, "type": kp.get("type"), "name": kp.get("name"), "status": status,
            "best_score": max(scores) if scores else None, "failed_calls": sum(p.get("status") != "ok" for p in kp_pairs),
            "matches": _kept(kp_pairs, fragments), "uses": kp.get("uses") or [],
            "pairs": [{k: p.get(k) for k in ("fragment_id", "rank", "kind", "status", "raw_score", "score", "quote", "demoted", "error")}
                      for p in kp_pairs],
        }
    uses: dict[str, list[str]] = {}
    for kp_id, kp in canonical.items():
        for key in kp.get("uses") or []:
            uses.setdefault(key, []).append(kp_id)
    sub_rows = []
    for s in subs:
        key = s.get("key")
        ids = uses.get(key, []) if s.get("status") == "ok" else []
        statuses = [kp_rows[i]["status"] for i in ids]
        sub_rows.append({
            "record": "sub_problem", "key": key,
            **{k: s.get(k) for k in ("source", "year", "source_problem_id", "problem_id", "sub_discipline")},
            "status": sub_problem_status(statuses, decomposed=s.get("status") == "ok"),
            "decompose_status": s.get("status"),
            "kp_counts": dict(Counter(statuses)),
            "kps": [{"kp_id": i, "name": kp_rows[i]["name"], "type": kp_rows[i]["type"], "status": kp_rows[i]["status"],
                     "description": next(iter(canonical[i].get("descriptions") or []), ""),
                     "matches": kp_rows[i]["matches"]} for i in ids],
        })
    lines = [json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in [*kp_rows.values(), *sub_rows]]
    atomic_write_lines(work / "coverage.jsonl", lines)
    kp_ids = list(kp_rows)
    atomic_write_text(work / "coverage_status.csv", _matrix(sub_rows, kp_rows, kp_ids, lambda k: k["status"]))
    atomic_write_text(work / "coverage_score.csv", _matrix(sub_rows, kp_rows, kp_ids,
                                                          lambda k: "" if k["best_score"] is None else str(k["best_score"])))
    summary = {
        "pairs": len(pairs), "asked": counts["done"], "resumed": counts["skipped"],
        "left": counts["left"], "budget_stop": counts["budget_stop"],
        "failed_pairs": sum(p.get("status") != "ok" for p in pairs),
        "demoted": sum(bool(p.get("demoted")) for p in pairs),
        "missing_fragments": sorted({f for _, f in missing_fragments}),
        "kps": {s: sum(r["status"] == s for r in kp_rows.values()) for s in KP_STATUSES},
        "sub_problems": {s: sum(r["status"] == s for r in sub_rows) for s in SUB_STATUSES},
        "usage": dict(llm.usage),
        "files": [str(work / n) for n in ("verify_pairs.jsonl", "coverage.jsonl", "coverage.md", "coverage_status.csv", "coverage_score.csv")],
    }
    atomic_write_text(work / "coverage.md", _markdown(summary, sub_rows, kp_rows))
    return summary


def _matrix(sub_rows: list[dict[str, Any]], kp_rows: dict[str, dict[str, Any]], kp_ids: list[str],
            cell: Callable[[dict[str, Any]], str]) -> str:
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    w.writerow(["sub_problem", "status", *kp_ids])
    for s in sub_rows:
        mine = {k["kp_id"] for k in s["kps"]}
        w.writerow([s["key"], s["status"], *(cell(kp_rows[i]) if i in mine else "" for i in kp_ids)])
    return buf.getvalue()


def _markdown(summary: dict[str, Any], sub_rows: list[dict[str, Any]], kp_rows: dict[str, dict[str, Any]]) -> str:
    n_sub, n_kp = len(sub_rows), len(kp_rows)
    lines = ["# Knowledge-point coverage (`build verify`)", "",
             f"{n_sub} sub-problems, {n_kp} canonical KPs, {summary['pairs']} (KP, fragment) pairs scored "
             f"({summary['failed_pairs']} failed calls, {summary['demoted']} scores demoted by the quote check).", "",
             "| sub-problems | count | share |", "|---|---:|---:|"]
    for s, n in summary["sub_problems"].items():
        lines.append(f"| {s} | {n} | {n / n_sub:.1%} |" if n_sub else f"| {s} | 0 | - |")
    lines += ["", "| KPs | count | share |", "|---|---:|---:|"]
    for s, n in summary["kps"].items():
        lines.append(f"| {s} | {n} | {n / n_kp:.1%} |" if n_kp else f"| {s} | 0 | - |")
    by_disc: dict[str, Counter[str]] = {}
    for r in sub_rows:
        by_disc.setdefault(str(r.get("sub_discipline") or "-"), Counter())[r["status"]] += 1
    lines += ["", "Sub-problems by sub-discipline:", "", "| sub-discipline | " + " | ".join(SUB_STATUSES) + " |",
              "|---|" + "---:|" * len(SUB_STATUSES)]
    for d in sorted(by_disc):
        lines.append(f"| {md_cell(d)} | " + " | ".join(str(by_disc[d][s]) for s in SUB_STATUSES) + " |")
    u = summary["usage"]
    lines += ["", f"Teacher: {u.get('requests', 0)} requests, {u.get('cached', 0)} cached replies, {u.get('reasked', 0)} re-asks; "
              f"tokens {u.get('prompt_tokens', 0)} prompt, {u.get('completion_tokens', 0)} completion, "
              f"{u.get('reasoning_tokens', 0)} reasoning.",
              "", "Definitions: see `studybench.testset.verification.kpverify` (a failed call makes a KP unverified, never uncovered)."]
    return "\n".join(lines) + "\n"
