"""Schedule seeds x attempts x parents, generate turns, judge them; resumable (DESIGN.md).

Generation: every (seed, attempt, parent) is one *chain*: its sub-problems are asked in order, each
turn's conversation built by :func:`studybench.protocol.build_messages` from the model's own
earlier replies. Chains run concurrently (bounded by ``concurrency`` turns in flight).

Resume: a stored turn is reused when its row has no error and its ``messages_digest`` equals the
digest of the conversation the protocol builds now (so a regenerated earlier turn invalidates the
later turns of its chain, and artefact changes cannot mix). Everything else is generated again and
the new row supersedes the old one (readers keep the last row per key).

Judging: every current generation row is judged once per completion digest and verifier
configuration; a failed turn is recorded as incorrect with its error as the reason.

LLM judging (leaderboard mode ``rule+llm``, PROTOCOL.md section 6): :func:`llm_judge_run` sends every
current rule rejection (and, with ``audit_rule_accepts``, every rule accept too) to an LLM judge and
appends one row per (turn, judge configuration) to ``llm_judgements.jsonl``. A row is tied to the
digest of the completion and of the judge inputs it judged, so it never attaches to a regenerated
answer; a final row (TRUE, FALSE, unjudgeable) is reused, an ``error`` row is judged again.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from studybench import __version__
from studybench.datasets import Dataset
from studybench.files import text_digest
from studybench.models.base import ChatBackend, ChatRequest
from studybench.protocol import Artefacts, build_messages, messages_digest
from studybench.records import Parent, SubProblemRef
from studybench.store import RunStore, TurnKey, current_rule_verdict

__all__ = [
    "EvalConfig",
    "GenerationStats",
    "JudgeStats",
    "LLMJudgeStats",
    "generate",
    "judge_run",
    "llm_judge_run",
    "request_seed",
    "select_parents",
]

VERIFIER_MODE = "rule"
VERIFIER_MODES = ("rule", "rule+llm")
RETRYABLE_VERDICT = "incorrect: timed out"
"""Stored verdicts with this reason prefix are judged again on the next run (load may have caused them)."""


@dataclass
class EvalConfig:
    """What to run.

    Attributes:
        split: split name used in turn keys (``application``, ``transfer`` or a file stem).
        k: attempts per parent and seed.
        seeds: run seeds (each a full set of k attempts).
        concurrency: maximum turns in flight.
        judge_timeout: seconds per symbolic judgement (hard wall clock).
        judge_workers: verifier worker processes (``None``: one per CPU).
    """

    split: str
    k: int = 8
    seeds: list[int] = field(default_factory=lambda: [0])
    concurrency: int = 64
    judge_timeout: float = 5.0
    judge_workers: int | None = None


@dataclass
class GenerationStats:
    total: int = 0
    reused: int = 0
    generated: int = 0
    failed: int = 0
    seconds: float = 0.0

    @property
    def turns_per_s(self) -> float:
        return self.generated / self.seconds if self.seconds > 0 else 0.0


@dataclass
class JudgeStats:
    total: int = 0
    reused: int = 0
    judged: int = 0
    correct: int = 0
    seconds: float = 0.0


def select_parents(ds: Dataset, limit: int | None = None, start: int = 0, stop: int | None = None) -> list[Parent]:
    """Parents ``ds.parents[start:stop]``, then the first ``limit`` of those.

    Raises:
        ValueError: negative limit or an empty selection.
    """
    if limit is not None and limit < 0:
        raise ValueError("--limit must be >= 0")
    sel = ds.parents[start:stop]
    if limit is not None:
        sel = sel[:limit]
    if not sel:
        raise ValueError(f"the selection [{start}:{stop}] limit {limit} holds no parents of {ds.name}")
    return sel


def request_seed(seed: int, attempt: int, parent_uid: str, sub_index: int) -> int:
    """Deterministic per-request sampling seed in [0, 2**31) from run seed, attempt and slot."""
    h = hashlib.sha256(f"{seed}|{attempt}|{parent_uid}|{sub_index}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str | None) -> str | None:
    """Model text made safe to store and to send back: lone surrogates become U+FFFD."""
    if text is None:
        return None
    return _SURROGATE.sub("\ufffd", text)


def turn_key(split: str, slot: SubProblemRef, seed: int, attempt: int) -> TurnKey:
    return TurnKey(split, slot.parent.uid, slot.sub_id, seed, attempt)


def _turns(parents: list[Parent], cfg: EvalConfig) -> Iterator[tuple[TurnKey, SubProblemRef]]:
    """Every (turn key, slot) of the selection: parents x sub-problems x seeds x attempts."""
    for parent in parents:
        for i, sub in enumerate(parent.subs()):
            slot = SubProblemRef(parent, i, sub)
            for seed in cfg.seeds:
                for a in range(cfg.k):
                    yield turn_key(cfg.split, slot, seed, a), slot


ProgressFn = Callable[[int], None]


async def generate(
    parents: list[Parent],
    store: RunStore,
    backend: ChatBackend,
    artefacts: Artefacts,
    cfg: EvalConfig,
    progress: ProgressFn | None = None,
    on_error: Callable[[TurnKey, str], None] | None = None,
) -> GenerationStats:
    """Generate every missing or stale turn of ``parents`` x ``cfg.seeds`` x ``cfg.k``.

    ``progress(n)`` is called with the number of turns finished (reused turns included);
    ``on_error(key, error)`` for every turn that failed after the backend's retries.
    Returns counts and the wall time of the generation phase.
    """
    existing = store.latest_generations()
    stats = GenerationStats()
    sem = asyncio.Semaphore(max(1, cfg.concurrency))
    t0 = time.perf_counter()
    store.generations.open()

    async def chain(parent: Parent, seed: int, attempt: int) -> None:
        slots = [SubProblemRef(parent, i, s) for i, s in enumerate(parent.subs())]
        previous: list[str | None] = []
        for slot in slots:
            msgs = build_messages(slot, previous, artefacts)
            digest = messages_digest(msgs)
            key = turn_key(cfg.split, slot, seed, attempt)
            old = existing.get(key)
            if (
                old is not None
                and old.get("messages_digest") == digest
                and not old.get("error")
                and isinstance(old.get("completion"), str)
            ):
                previous.append(old["completion"])
                stats.reused += 1
                if progress:
                    progress(1)
                continue
            rseed = request_seed(seed, attempt, parent.uid, slot.index)
            async with sem:
                res = await backend.complete(ChatRequest(msgs, rseed, slot, slot.index))
            res.completion = clean_text(res.completion) or ""
            res.reasoning = clean_text(res.reasoning)
            row: dict[str, Any] = key.to_dict()
            row.update(
                {
                    "turn": slot.index,
                    "messages_digest": digest,
                    "request_seed": rseed,
                    "completion": res.completion,
                    "reasoning": res.reasoning,
                    "finish_reason": res.finish_reason,
                    "usage": res.usage,
                    "latency_s": round(res.latency_s, 6),
                    "attempts": res.attempts,
                    "error": res.error,
                    "time": time.time(),
                }
            )
            if res.extra:
                row["extra"] = res.extra
            store.generations.append(row)
            stats.generated += 1
            if res.error:
                stats.failed += 1
                previous.append(None)
                if on_error:
                    on_error(key, res.error)
            else:
                previous.append(res.completion)
            if progress:
                progress(1)

    tasks = [
        chain(p, seed, a)
        for seed in cfg.seeds
        for a in range(cfg.k)
        for p in parents
    ]
    stats.total = sum(len(p.subs()) for p in parents) * cfg.k * len(cfg.seeds)
    try:
        await asyncio.gather(*tasks)
    finally:
        store.generations.sync()
        stats.seconds = time.perf_counter() - t0
    return stats


def verifier_config(cfg: EvalConfig) -> dict[str, Any]:
    """What identifies a judgement's configuration (stored in each judgement row)."""
    return {"mode": VERIFIER_MODE, "version": __version__, "timeout": cfg.judge_timeout}


def judge_run(
    parents: list[Parent],
    store: RunStore,
    cfg: EvalConfig,
    verifier: Any,
    progress: ProgressFn | None = None,
    chunk: int = 512,
) -> JudgeStats:
    """Judge every current generation row of the selection that has no matching judgement.

    Args:
        verifier: an object with ``judge_many(items) -> list[Verdict]`` (:class:`studybench.verify.Verifier`).
    """
    from studybench.answers import extract_answers

    gens = store.latest_generations()
    judged = store.latest_judgements()
    vcfg = verifier_config(cfg)
    stats = JudgeStats()
    t0 = time.perf_counter()
    todo: list[tuple[TurnKey, dict[str, Any], SubProblemRef]] = []
    for key, slot in _turns(parents, cfg):
        g = gens.get(key)
        if g is None:
            continue
        if not isinstance(g.get("completion"), str):
            continue  # unusable row: the next generation pass replaces it
        stats.total += 1
        cd = text_digest(g["completion"])
        j = judged.get(key)
        if (
            j is not None
            and j.get("completion_digest") == cd
            and j.get("generation_error") == g.get("error")
            and j.get("verifier") == vcfg
            and not str(j.get("reason", "")).startswith(RETRYABLE_VERDICT)
        ):
            stats.reused += 1
            if j.get("correct"):
                stats.correct += 1
            if progress:
                progress(1)
            continue
        todo.append((key, g, slot))
    store.judgements.open()
    for start in range(0, len(todo), chunk):
        batch = todo[start : start + chunk]
        items = []
        extracted: list[list[str]] = []
        for _, g, slot in batch:
            gold = slot.sub.boxes
            preds = [] if g.get("error") else extract_answers(g.get("completion") or "", len(gold))
            extracted.append(preds)
            items.append((gold, preds, slot.sub.answer_type, slot.sub.type_sequence))
        verdicts = verifier.judge_many([it for it, (_, g, _) in zip(items, batch, strict=True) if not g.get("error")])
        vi = iter(verdicts)
        for (key, g, slot), preds in zip(batch, extracted, strict=True):
            if g.get("error"):
                correct, reason = False, f"incorrect: generation failed ({str(g['error'])[:300]})"
            else:
                v = next(vi)
                correct, reason = bool(v.correct), v.reason
            row = key.to_dict()
            row.update(
                {
                    "completion_digest": text_digest(g.get("completion") or ""),
                    "generation_error": g.get("error"),
                    "answer_type": slot.sub.answer_type.value,
                    "type_sequence": slot.sub.type_sequence_str,
                    "extracted": preds,
                    "correct": correct,
                    "reason": reason,
                    "verifier": vcfg,
                    "time": time.time(),
                }
            )
            store.judgements.append(row)
            stats.judged += 1
            if correct:
                stats.correct += 1
            if progress:
                progress(1)
    store.judgements.sync()
    stats.seconds = time.perf_counter() - t0
    return stats


@dataclass
class LLMJudgeStats:
    """Counts of one :func:`llm_judge_run` pass.

    ``candidates``: turns eligible for the judge (current rule rejections, plus rule accepts when
    audited); ``reused``: of those, with a current final verdict in the run already; ``judged``:
    verdicts obtained now (``cache_hits`` of them from the verdict cache, the rest over HTTP with
    ``requests`` chat requests in all); ``no_rule_verdict``: turns skipped for lack of a current rule
    judgement; ``verdicts``: counts of TRUE / FALSE / unjudgeable / error among the judged.
    """

    candidates: int = 0
    reused: int = 0
    judged: int = 0
    cache_hits: int = 0
    shared: int = 0
    requests: int = 0
    no_rule_verdict: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "reused": self.reused,
            "judged": self.judged,
            "cache_hits": self.cache_hits,
            "shared": self.shared,
            "requests": self.requests,
            "no_rule_verdict": self.no_rule_verdict,
            "verdicts": dict(self.verdicts),
            "seconds": round(self.seconds, 3),
        }


async def llm_judge_run(
    parents: list[Parent],
    store: RunStore,
    cfg: EvalConfig,
    judge: Any,
    *,
    audit_rule_accepts: bool = False,
    refresh: bool = False,
    progress: ProgressFn | None = None,
) -> LLMJudgeStats:
    """Add LLM verdicts for the selection's current rule rejections (paper 2.2, PROTOCOL.md 6).

    Args:
        judge: an object with ``judge_id`` (str), ``describe()`` and ``async judge(LLMJudgeInputs) ->
            LLMVerdict`` (:class:`studybench.llm_judge.LLMJudge`).
        audit_rule_accepts: also judge rule accepts (makes the rule verifier's false accepts
            observable in the consistency report; the cascade verdict of an accept is unchanged).
        refresh: judge again even where the run holds a current final verdict (the verdict cache
            still answers unless the judge was built with ``read_cache=False``).
        progress: called with 1 per candidate handled.

    Returns:
        :class:`LLMJudgeStats`. Rule judgements must exist (:func:`judge_run`) for a turn to be judged.
    """
    from studybench.answers import extract_answers
    from studybench.llm_judge import FINAL_VERDICTS, llm_judge_inputs

    gens = store.latest_generations()
    rules = store.latest_judgements()
    llm_rows = store.latest_llm_judgements()
    jid = judge.judge_id
    desc = judge.describe()
    stats = LLMJudgeStats()
    t0 = time.perf_counter()
    todo: list[tuple[TurnKey, SubProblemRef, str, bool, Any, list[str]]] = []
    for key, slot in _turns(parents, cfg):
        g = gens.get(key)
        if g is None or g.get("error") or not isinstance(g.get("completion"), str):
            continue
        current = current_rule_verdict(gens, rules, key)
        if current is None:
            stats.no_rule_verdict += 1
            continue
        j, cd = current
        rule_ok = j.get("correct") is True
        if rule_ok and not audit_rule_accepts:
            continue
        stats.candidates += 1
        extracted = j.get("extracted")
        if not isinstance(extracted, list):
            extracted = extract_answers(g["completion"], len(slot.sub.boxes))
        extracted = [str(x) for x in extracted]
        inputs = llm_judge_inputs(slot, g["completion"], extracted)
        old = llm_rows.get((key, jid))
        if (
            not refresh
            and old is not None
            and old.get("completion_digest") == cd
            and old.get("inputs_digest") == inputs.digest
            and old.get("verdict") in FINAL_VERDICTS
        ):
            stats.reused += 1
            if progress:
                progress(1)
            continue
        todo.append((key, slot, cd, rule_ok, inputs, extracted))
    store.llm_judgements.open()

    async def one(key: TurnKey, slot: SubProblemRef, cd: str, rule_ok: bool, inputs: Any, extracted: list[str]) -> None:
        v = await judge.judge(inputs)
        row = key.to_dict()
        row.update(
            {
                "judge_id": jid,
                "judge_model": desc.get("model"),
                "template_digest": desc.get("template_digest"),
                "completion_digest": cd,
                "inputs_digest": inputs.digest,
                "answer_type": slot.sub.answer_type.value,
                "extracted": extracted,
                "rule_correct": rule_ok,
                "verdict": v.verdict,
                "justification": v.justification,
                "error": v.error,
                "cached": v.cached,
                "shared": v.shared,
                "requests": v.requests,
                "time": time.time(),
            }
        )
        store.llm_judgements.append(row)
        stats.judged += 1
        stats.requests += v.requests
        if v.cached:
            stats.cache_hits += 1
        if v.shared:
            stats.shared += 1
        stats.verdicts[v.verdict] = stats.verdicts.get(v.verdict, 0) + 1
        if progress:
            progress(1)

    try:
        await asyncio.gather(*(one(*t) for t in todo))
    finally:
        store.llm_judgements.sync()
        stats.seconds = time.perf_counter() - t0
    return stats
