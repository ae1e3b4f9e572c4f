"""``build decompose``: the knowledge points (KPs) each sub-problem needs, by a teacher LLM, then canonical KPs.

**Extraction** (one request per sub-problem; :func:`decompose_prompt`): the teacher sees the parent's stem
(where the given data sits), the sub-problem and its reference solution, and answers a JSON object
``{"knowledge_points": [...]}`` with 3-8 KPs, each ``type`` (``concept``, ``law_or_equation``,
``technique``, ``assumption``), a 2-6 word ``name``, a 1-2 sentence ``description`` and 2-6 ``keywords``.
Each KP is validated by :class:`KnowledgePoint` (pydantic); an invalid KP is dropped (its reason kept in
the record), and a reply with fewer than 3 valid KPs, or that is not such JSON, is malformed and re-asked
(3 attempts at temperature 0.2, :class:`~studybench.testset.llmstage.StageLLM`). At most 15 KPs are kept.
A sub-problem whose extraction failed (transport failure, every reply malformed or cut by the token
limit) is recorded with ``status: "failed"`` and its error: never dropped, counted in the summary, and
asked again when the command is re-run.

**Canonicalisation** (:func:`canonicalise`): first exact, KPs of one type whose names agree after
:func:`normalise_name` (case, punctuation, possessives, plurals, leading articles) are one KP; then,
unless disabled, a group joins an earlier canonical KP of the same type whose name embedding
(:func:`studybench.testset.embedding.load_embedder`; default the offline all-MiniLM-L6-v2 package) has
cosine >= ``merge_threshold`` with it. Groups are visited by use count, most used first, and compared with each canonical KP's
representative only (no chaining through a series of near neighbours). Every embedding merge is listed
in ``DIR/kp_merges.md`` for review.

Outputs: ``DIR/kps.jsonl`` (one sub-problem per line: key fields, ``status``, ``kps``, ``error``,
``invalid``, ``usage``) and ``DIR/kp_canonical.jsonl`` (``id``, ``type``, ``name``, ``names``,
``descriptions``, ``keywords``, ``sub_discipline``, ``uses``: the sub-problem keys).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from studybench.datasets import Dataset
from studybench.escaping import md_cell
from studybench.files import InputFileError, atomic_write_lines, atomic_write_text, parse_json
from studybench.records import SubProblemRef, label_map
from studybench.testset.embedding import embed_with_progress, load_embedder
from studybench.testset.llmstage import StageLLM, check_stage_meta, read_rows, run_items

__all__ = [
    "KP_TYPES",
    "DecomposeSettings",
    "KnowledgePoint",
    "canonicalise",
    "decompose",
    "decompose_prompt",
    "normalise_name",
    "parse_kps",
    "sub_key",
]

KP_TYPES = ("concept", "law_or_equation", "technique", "assumption")
"""The four KP types (paper 2.1)."""

PROMPT_VERSION = "decompose-v1"
MIN_KPS, ASK_MAX_KPS, KEEP_MAX_KPS = 3, 8, 15
_TYPE_ALIASES = {"law": "law_or_equation", "equation": "law_or_equation", "law_equation": "law_or_equation",
                 "law_or_formula": "law_or_equation", "principle": "law_or_equation", "method": "technique",
                 "approximation": "assumption"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\\$])")

SYSTEM = (
    "You are a physics teacher. You list the knowledge points a student must know to solve a problem: the "
    "concepts, laws or equations, techniques and modelling assumptions, the kind a textbook teaches. Never "
    "state the answer or any intermediate result."
)

TEMPLATE = """Problem statement (shared context):
{stem}

Sub-problem to analyse:
{problem}

Reference solution (for your analysis only):
{solution}

List the {lo}-{hi} knowledge points needed to solve the sub-problem. Reply with one JSON object and nothing else:
{{"knowledge_points": [{{"type": "concept" | "law_or_equation" | "technique" | "assumption",
  "name": "2-6 word name", "description": "1-2 sentences on what it says and how it is used here",
  "keywords": ["2-6 search keywords"]}}]}}"""


def sub_key(ref: SubProblemRef) -> str:
    """The key of a sub-problem in every build file: ``source/year/source_problem_id/problem_id``."""
    p = ref.parent
    return "/".join((p.source, p.year, p.source_problem_id, ref.sub_id))


def normalise_name(name: str) -> str:
    """Comparison key of a KP name: NFKC, casefolded, possessives and punctuation folded, leading article
    dropped, plural ``-s``/``-ies`` folded (``"Newton's Laws of Motion"`` -> ``"newton law of motion"``)."""
    s = unicodedata.normalize("NFKC", name).casefold()
    s = re.sub(r"['\u2019`]s\b", "", s).replace("'", "").replace("\u2019", "")
    s = re.sub(r"[\W_]+", " ", s)
    words = s.split()
    if len(words) > 1 and words[0] in ("the", "a", "an"):
        words = words[1:]
    out = []
    for w in words:
        if len(w) > 4 and w.endswith("ies"):
            w = w[:-3] + "y"
        elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        out.append(w)
    return " ".join(out)


class KnowledgePoint(BaseModel):
    """One KP as the teacher must give it (validated; see the module docstring)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    type: str
    name: str
    description: str
    keywords: list[str]

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> str:
        t = re.sub(r"[\W_]+", "_", str(v).casefold()).strip("_")
        t = _TYPE_ALIASES.get(t, t)
        if t not in KP_TYPES:
            raise ValueError(f"must be one of {', '.join(KP_TYPES)}")
        return t

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        v = " ".join(v.split())
        if not 2 <= len(v.split()) <= 6:
            raise ValueError(f"must have 2-6 words, has {len(v.split())}")
        return v

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("empty")
        if len(v) > 600 or len(_SENTENCE_END.split(v)) > 2:
            raise ValueError("must be 1-2 sentences")
        return v

    @field_validator("keywords", mode="before")
    @classmethod
    def _keywords(cls, v: Any) -> list[str]:
        if not isinstance(v, list):
            raise ValueError("must be a list of strings")
        seen: dict[str, str] = {}
        for k in v:
            if isinstance(k, str) and k.strip():
                seen.setdefault(k.strip().casefold(), " ".join(k.split()))
        kws = list(seen.values())
        if len(kws) < 2:
            raise ValueError("needs at least 2 keywords")
        return kws[:6]


def _json_object(text: str) -> Any:
    """The JSON object in a reply (a ``<think>`` block, code fences and prose around it ignored)."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:  # strict: NaN, Infinity and absurd numbers are refused too
        return parse_json(text[start:end + 1], "reply")
    except InputFileError as e:
        raise ValueError(f"invalid JSON ({e.problem})") from None


def parse_kps(text: str) -> dict[str, Any]:
    """Validate a teacher's reply to :func:`decompose_prompt`.

    Args:
        text: the reply.

    Returns:
        ``{"kps": [valid KP dicts, at most 15, duplicates by (type, normalised name) removed],
        "invalid": [reasons for the dropped ones], "proposed": n}``.

    Raises:
        ValueError: not a JSON object with a ``knowledge_points`` list, or fewer than 3 valid KPs.
    """
    data = _json_object(text)
    items = data.get("knowledge_points") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError('the JSON object has no "knowledge_points" list')
    kps: list[dict[str, Any]] = []
    invalid: list[str] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            invalid.append(f"#{i}: not an object")
            continue
        try:
            kp = KnowledgePoint.model_validate(item)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ()))
            invalid.append(f"#{i} {where}: {str(err.get('msg', 'invalid')).removeprefix('Value error, ')}")
            continue
        ident = (kp.type, normalise_name(kp.name))
        if ident in seen:
            invalid.append(f"#{i}: duplicate of {kp.name!r}")
            continue
        seen.add(ident)
        kps.append(kp.model_dump())
    if len(kps) < MIN_KPS:
        raise ValueError(f"{len(kps)} valid knowledge points (need at least {MIN_KPS})"
                         + (f"; {'; '.join(invalid[:4])}" if invalid else ""))
    return {"kps": kps[:KEEP_MAX_KPS], "invalid": invalid, "proposed": len(items),
            "over_limit": max(0, len(kps) - KEEP_MAX_KPS)}


def decompose_prompt(ref: SubProblemRef, *, max_chars: int = 12_000) -> list[dict[str, str]]:
    """The chat messages asking for the KPs of one sub-problem (stem, sub-problem, reference solution).

    Args:
        ref: the sub-problem with its parent.
        max_chars: each of stem, problem and solution is cut to this many characters.

    Returns:
        System and user messages.
    """
    def cut(s: str) -> str:
        s = (s or "").strip()
        return s if len(s) <= max_chars else s[:max_chars] + " [...]"

    user = TEMPLATE.format(stem=cut(ref.parent.stem) or "(none: the sub-problem is self-contained)",
                           problem=cut(ref.sub.problem), solution=cut(ref.sub.solution) or "(not available)",
                           lo=MIN_KPS, hi=ASK_MAX_KPS)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


@dataclass
class DecomposeSettings:
    """Settings of ``build decompose`` (recorded in ``DIR/decompose.meta.json``).

    Attributes:
        temperature: teacher sampling temperature (paper: 0.2).
        attempts: replies per sub-problem before it fails (paper: 3).
        max_tokens: completion budget per request.
        concurrency: sub-problems in progress at once.
        merge_threshold: cosine at or above which two KP names of one type merge.
        embed_merge: merge by embeddings at all (else exact names only).
        embedding_model: sentence-transformers name or path (``None``: the bundled MiniLM).
        embedding_backend: its runtime, ``torch`` (default) or ``onnx`` (opt-in;
            :func:`~studybench.testset.embedding.load_embedder`).
    """

    temperature: float = 0.2
    attempts: int = 3
    max_tokens: int = 4096
    concurrency: int = 16
    merge_threshold: float = 0.90
    embed_merge: bool = True
    embedding_model: str | None = None
    embedding_backend: str = "torch"


def _kp_id(kp_type: str, norm: str) -> str:
    return "kp-" + hashlib.sha256(f"{kp_type}|{norm}".encode()).hexdigest()[:12]


def canonicalise(
    rows: list[dict[str, Any]],
    *,
    merge_threshold: float = 0.90,
    embed: Callable[[list[str]], Any] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Canonical KPs of the ``kps.jsonl`` rows (see the module docstring).

    Args:
        rows: sub-problem rows (``key``, ``status``, ``kps``, ``sub_discipline``); failed rows contribute nothing.
        merge_threshold: cosine of name embeddings at or above which groups of one type merge.
        embed: texts -> L2-normalised embeddings; ``None``: exact merges only.

    Returns:
        ``(canonical, merges)``: canonical KPs sorted by use count (then name), and the embedding merges
        (``type``, ``into``, ``name``, ``cosine``, ``uses``).
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        if row.get("status") != "ok":
            continue
        for kp in row.get("kps") or []:
            ident = (kp["type"], normalise_name(kp["name"]))
            g = groups.setdefault(ident, {"names": Counter(), "descriptions": [], "keywords": Counter(),
                                          "uses": [], "disciplines": Counter()})
            g["names"][kp["name"]] += 1
            if kp["description"] not in g["descriptions"]:
                g["descriptions"].append(kp["description"])
            for k in kp.get("keywords") or []:
                g["keywords"][k.casefold()] += 1
            if row["key"] not in g["uses"]:
                g["uses"].append(row["key"])
            if row.get("sub_discipline"):
                g["disciplines"][row["sub_discipline"]] += 1
    order = sorted(groups, key=lambda i: (-len(groups[i]["uses"]), i))
    members: dict[tuple[str, str], list[tuple[str, str]]] = {}
    merges: list[dict[str, Any]] = []
    if embed is not None and order:
        display = {i: groups[i]["names"].most_common(1)[0][0] for i in order}
        vectors = embed([display[i] for i in order])
        reps: dict[str, list[tuple[int, tuple[str, str]]]] = {}
        for n, ident in enumerate(order):
            best, best_cos = None, -1.0
            for m, rep in reps.get(ident[0], []):
                cos = float(vectors[n] @ vectors[m])
                if cos > best_cos:
                    best, best_cos = rep, cos
            if best is not None and best_cos >= merge_threshold:
                members[best].append(ident)
                merges.append({"type": ident[0], "into": display[best], "name": display[ident],
                               "cosine": round(best_cos, 4), "uses": len(groups[ident]["uses"])})
            else:
                reps.setdefault(ident[0], []).append((n, ident))
                members[ident] = [ident]
    else:
        members = {i: [i] for i in order}
    canonical = []
    for rep, idents in members.items():
        names: Counter[str] = Counter()
        kw: Counter[str] = Counter()
        disc: Counter[str] = Counter()
        descriptions: list[str] = []
        uses: list[str] = []
        for ident in idents:
            g = groups[ident]
            names.update(g["names"])
            kw.update(g["keywords"])
            disc.update(g["disciplines"])
            descriptions += [d for d in g["descriptions"] if d not in descriptions]
            uses += [u for u in g["uses"] if u not in uses]
        canonical.append({
            "id": _kp_id(*rep),
            "type": rep[0],
            "name": groups[rep]["names"].most_common(1)[0][0],
            "names": [n for n, _ in names.most_common()],
            "descriptions": descriptions,
            "keywords": [k for k, _ in kw.most_common(12)],
            "sub_discipline": disc.most_common(1)[0][0] if disc else "",
            "sub_disciplines": sorted(disc),
            "uses": uses,
        })
    canonical.sort(key=lambda c: (-len(c["uses"]), c["type"], c["name"].casefold()))
    return canonical, merges


def _merges_md(merges: list[dict[str, Any]], threshold: float, exact: int, n_canonical: int, embed_on: bool) -> str:
    lines = ["# Knowledge-point merges (review)", "",
             f"{n_canonical} canonical KPs. {exact} spellings merged by exact (type, normalised name).", ""]
    if not embed_on:
        lines.append("Embedding merges: off (--no-embed-merge).")
    elif not merges:
        lines.append(f"Embedding merges: none at cosine >= {threshold:g}.")
    else:
        lines += [f"Embedding merges at cosine >= {threshold:g} ({len(merges)}); lowest cosine first, the most doubtful:", "",
                  "| type | canonical KP | merged name | cosine | uses |", "|---|---|---|---:|---:|"]
        for m in sorted(merges, key=lambda m: m["cosine"]):
            cells = [m["type"], m["into"], m["name"], f"{m['cosine']:.3f}", str(m["uses"])]
            lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _row_for(ref: SubProblemRef, labels: dict[str, str]) -> dict[str, Any]:
    p = ref.parent
    return {"source": p.source, "year": p.year, "source_problem_id": p.source_problem_id, "problem_id": ref.sub_id,
            "sub_discipline": labels.get(p.problem_type, p.problem_type)}


def decompose(
    dataset: Dataset,
    work: Path,
    llm: StageLLM,
    settings: DecomposeSettings,
    *,
    restart: bool = False,
    progress: Callable[[int, int], None] | None = None,
    embed_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run ``build decompose`` on every sub-problem of ``dataset`` into the work directory ``work``.

    Resumable: sub-problems already in ``kps.jsonl`` with status ``ok`` are skipped; failed ones are
    asked again (their replies come from the cache when the reply, not the transport, was the problem).
    The canonical KPs and ``kp_merges.md`` are rebuilt from the whole ``kps.jsonl`` every run.

    Args:
        dataset: the test set.
        work: the work directory.
        llm: the teacher (its cache normally ``work/cache/decompose.jsonl``).
        settings: the settings.
        restart: discard ``kps.jsonl`` and the recorded settings first.
        progress: ``(advance, total)`` as sub-problems finish.
        embed_progress: ``(done, total)`` over the KP names embedded for the merges
            (:func:`~studybench.testset.embedding.embed_with_progress`).

    Returns:
        The summary: ``sub_problems``, ``ok``, ``failed``, ``kps``, ``invalid_kps``, ``canonical``,
        ``exact_merged``, ``embedding_merges``, ``usage`` and the paths written; ``left`` (sub-problems
        not asked because the teacher's budget was spent, ``budget_stop`` says why; a re-run asks them).

    Raises:
        StageMetaError: ``kps.jsonl`` was made from another test set or with other settings (use ``restart``).
        RuntimeError: embedding merges are on and the model cannot be loaded.
        OSError: a file cannot be written.
    """
    work = Path(work)
    out = work / "kps.jsonl"
    check_stage_meta(work, "decompose", {
        "dataset": dataset.sha256, "teacher": llm.model, "temperature": settings.temperature,
        "attempts": settings.attempts, "max_tokens": settings.max_tokens, "prompt": PROMPT_VERSION,
    }, restart=restart)
    if restart and out.exists():
        out.unlink()
    old = read_rows(out)
    if any(r.get("status") != "ok" for r in old):  # failed sub-problems are asked again
        atomic_write_lines(out, (json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in old if r.get("status") == "ok"))
    refs = dataset.sub_problem_refs()
    labels = label_map(p.problem_type for p in dataset.parents)

    async def one(ref: SubProblemRef) -> dict[str, Any]:
        asked = await llm.ask(decompose_prompt(ref), temperature=settings.temperature, max_tokens=settings.max_tokens,
                              validate=parse_kps, attempts=settings.attempts, salt=PROMPT_VERSION)
        row = _row_for(ref, labels)
        if asked.ok:
            parsed = asked.parsed
            return {**row, "status": "ok", "kps": parsed["kps"], "invalid": parsed["invalid"],
                    "proposed": parsed["proposed"], "over_limit": parsed["over_limit"], "attempts": asked.attempts}
        return {**row, "status": "failed", "kps": [], "error": asked.error or "no usable reply",
                "attempts": asked.attempts}

    async def run() -> dict[str, int]:
        try:
            return await run_items(refs, sub_key, one, out, concurrency=settings.concurrency, progress=progress)
        finally:
            await llm.aclose()

    counts = asyncio.run(run())
    wanted = {sub_key(r) for r in refs}
    rows = [r for r in read_rows(out) if r.get("key") in wanted]
    embed = load_embedder(settings.embedding_model, backend=settings.embedding_backend) if settings.embed_merge else None
    if embed is not None and embed_progress is not None:
        embed = partial(embed_with_progress, embed, progress=embed_progress)
    try:
        canonical, merges = canonicalise(rows, merge_threshold=settings.merge_threshold, embed=embed)
    except RuntimeError as e:  # the embedding model (loaded on its first use)
        raise RuntimeError(f"{e} (or pass --no-embed-merge)") from None
    ok = [r for r in rows if r.get("status") == "ok"]
    n_kps = sum(len(r["kps"]) for r in ok)
    exact_groups = sum(len(c["names"]) for c in canonical)  # distinct spellings
    atomic_write_lines(work / "kp_canonical.jsonl", (json.dumps(c, ensure_ascii=False, allow_nan=False) + "\n" for c in canonical))
    atomic_write_text(work / "kp_merges.md", _merges_md(merges, settings.merge_threshold, max(0, exact_groups - len(canonical) - len(merges)),
                                                        len(canonical), settings.embed_merge))
    return {
        "sub_problems": len(refs), "asked": counts["done"], "resumed": counts["skipped"],
        "left": counts["left"], "budget_stop": counts["budget_stop"],
        "ok": len(ok), "failed": len(rows) - len(ok), "kps": n_kps,
        "invalid_kps": sum(len(r.get("invalid") or []) for r in ok),
        "canonical": len(canonical), "embedding_merges": len(merges),
        "failed_keys": [r["key"] for r in rows if r.get("status") != "ok"],
        "usage": dict(llm.usage),
        "files": [str(out), str(work / "kp_canonical.jsonl"), str(work / "kp_merges.md")],
    }
