"""GEPA's adapter for StudyBench: the data instances, the protocol as evaluation, the reflective records.

Split from :mod:`studybench.methods.gepa` (which runs GEPA in a run directory and re-exports these names):

* :func:`gepa_datasets`: one data instance per parent built from the Instructions with Answer.
* :class:`StudyBenchAdapter`: GEPA's adapter protocol; a parent's score is the fraction of its
  sub-problems answered correctly, by the rule verifier and optionally the LLM judge.
* :class:`ReflectionLM`: the reflection model GEPA asks for new prompts (an OpenAI-compatible endpoint).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from studybench.answers import strip_reasoning
from studybench.evaluate import is_unreachable_error, problem_text, request_seed, run_sync
from studybench.instructions import (
    InstructionError,
    InstructionLayer,
    find_instruction_files,
    instruction_parents,
    load_instructions,
)
from studybench.llm_judge import LLMJudge, llm_judge_inputs
from studybench.models import ChatBackend, ChatRequest, SamplingParams
from studybench.protocol import Artefacts, build_messages
from studybench.records import Parent, SubProblemRef

__all__ = [
    "COMPONENT",
    "GEPA_INSTALL_HINT",
    "GepaError",
    "ReflectionLM",
    "StudyBenchAdapter",
    "gepa_datasets",
    "require_gepa",
]

COMPONENT = "system_prompt"
"""The one component GEPA evolves."""
GEPA_INSTALL_HINT = 'pip install "studybench[gepa]"'

_PROBLEM_CHARS = 3000
_TAIL_CHARS = 1200
_BOX_CHARS = 300
_REASON_CHARS = 400



class GepaError(RuntimeError):
    """GEPA cannot run or stopped: a missing package, unusable data, a run directory of another run,
    an endpoint that does not answer. The message says what to do."""


def require_gepa() -> Any:
    """The ``gepa`` package.

    Raises:
        GepaError: it is not installed (the message names ``pip install "studybench[gepa]"``).
    """
    try:
        import gepa
    except ImportError:
        raise GepaError(f"GEPA needs the gepa package: {GEPA_INSTALL_HINT}") from None
    return gepa



def _head(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else f"{text[:n]} [... {len(text) - n} more characters]"


def _tail(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else f"[... {len(text) - n} characters before] {text[-n:]}"


# --------------------------------------------------------------------------------------------- data


def _exercise(p: Parent) -> tuple[str, str, str]:
    """The textbook exercise a parent comes from (a single-turn record and a chain of the same one match)."""
    spid = p.source_problem_id.split("#", 1)[0]
    chapter = str(getattr(p, "source_chapter", "") or "")
    if chapter and spid.startswith(chapter + "/"):
        spid = spid[len(chapter) + 1:]
    return (p.source, chapter, spid)


def gepa_datasets(
    source: str | os.PathLike[str] | Sequence[InstructionLayer],
    val_size: int = 32,
    seed: int = 0,
    limit: int | None = None,
) -> tuple[list[Parent], list[Parent]]:
    """GEPA's training and validation parents from the Instructions with Answer.

    Args:
        source: a ``train_data/`` directory (its single-turn and multi-sub layers, full or ``.head``
            copies), or loaded layers.
        val_size: validation parents (the paper: 32).
        seed: seeds the split.
        limit: use at most this many parents in all (a seeded sample of exercises), for quick runs.

    Returns:
        (trainset, valset). Split by exercise: every parent of one textbook exercise (its single-turn
        record and its multi-sub chain) lands on the same side; the validation set is filled with
        whole exercises, in a seeded order, up to ``val_size`` parents.

    Raises:
        GepaError: no with-answer layer in the directory, an unreadable layer, or fewer than
            ``val_size + 1`` parents.
    """
    if val_size < 1:
        raise GepaError(f"val_size must be >= 1, got {val_size}")
    if limit is not None and limit < 2:
        raise GepaError(f"limit must be >= 2, got {limit}")
    if isinstance(source, (str, os.PathLike)):
        files = {k: p for k, p in find_instruction_files(source).items() if k != "without_answer"}
        if not files:
            raise GepaError(f"{source}: no Instructions with Answer (verifiable_instr.json or "
                            "verifiable_instr_multi_subs.json, or their .head.json copies)")
        try:
            layers: Sequence[InstructionLayer] = [load_instructions(p, kind) for kind, p in files.items()]
        except InstructionError as e:
            raise GepaError(str(e)) from None
    else:
        layers = [lay for lay in source if lay.kind != "without_answer"]
    groups: dict[tuple[str, str, str], list[Parent]] = {}
    for layer in layers:
        for p in instruction_parents(layer)[0]:
            groups.setdefault(_exercise(p), []).append(p)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    if limit is not None:
        kept, n = [], 0
        for key in order:
            if n + len(groups[key]) <= limit:
                kept.append(key)
                n += len(groups[key])
        order = kept
    total = sum(len(groups[k]) for k in order)
    if total <= val_size:
        raise GepaError(f"{total} parents are not enough for a validation set of {val_size} and a training set: "
                        "lower --val-size" + (" or raise --limit" if limit is not None else ""))
    train: list[Parent] = []
    val: list[Parent] = []
    for key in order:
        g = groups[key]
        (val if len(val) + len(g) <= val_size else train).extend(g)
    return train, val


# ------------------------------------------------------------------------------------------ adapter


@dataclass
class _Turn:
    ref: SubProblemRef
    completion: str
    error: str | None
    extracted: list[str] | None = None
    correct: bool = False
    reason: str = ""


class StudyBenchAdapter:
    """GEPA's adapter for the StudyBench protocol (see the module docstring).

    Args:
        backend: the task model (:class:`~studybench.models.openai_backend.OpenAIBackend` or any
            :class:`~studybench.models.ChatBackend`); closed after every evaluation's event loop and
            usable again.
        verifier: the rule verifier (anything with ``verify_responses``, e.g. one shared
            :class:`studybench.verify.Verifier`; its owner closes it).
        judge: the LLM judge asked about rule rejections (``None``: rule verifier only).
        concurrency: most turns in flight.
        seed: seeds each request's sampling seed (per parent and turn).

    Attributes:
        rollouts: parents evaluated so far by this adapter (GEPA's metric calls).
        failed_requests: turns whose request failed (scored incorrect).
        last_error: the last such failure.
    """

    propose_new_texts = None  # GEPA's default reflective proposer

    def __init__(self, backend: ChatBackend, verifier: Any, *, judge: LLMJudge | None = None,
                 concurrency: int = 16, seed: int = 0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.backend = backend
        self.verifier = verifier
        self.judge = judge
        self.concurrency = concurrency
        self.seed = seed
        self.rollouts = 0
        self.failed_requests = 0
        self.last_error: str | None = None

    # -- evaluate ------------------------------------------------------------------------------------

    def evaluate(self, batch: list[Parent], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        """Run the multi-turn protocol on ``batch`` with ``candidate``'s system prompt and score it.

        Args:
            batch: parents.
            candidate: ``{"system_prompt": text}``.
            capture_traces: also return per-parent trajectories (for the reflective dataset).

        Returns:
            A ``gepa`` ``EvaluationBatch``: outputs ``{"parent", "score", "correct", "failed"}``,
            scores (fraction of a parent's sub-problems correct), trajectories when asked.

        Raises:
            GepaError: every request of the batch got no answer from the endpoint (a systemic failure,
                which stops the run; what was saved resumes).
        """
        from gepa.core.adapter import EvaluationBatch

        if not batch:
            return EvaluationBatch(outputs=[], scores=[], trajectories=[] if capture_traces else None)
        prompt = candidate[COMPONENT]
        chains = run_sync(self._rollouts(batch, prompt))
        self.rollouts += len(batch)
        turns = [t for chain in chains for t in chain]
        if turns and all(t.error and is_unreachable_error(t.error) for t in turns):
            raise GepaError(f"the task model's endpoint did not answer any of {len(turns)} requests "
                            f"({turns[-1].error}); the run is saved: run the same command again to resume")
        outputs, scores, trajectories = [], [], []
        for parent, chain in zip(batch, chains, strict=True):
            score = sum(t.correct for t in chain) / len(chain)
            scores.append(score)
            outputs.append({"parent": parent.uid, "score": score, "correct": [t.correct for t in chain],
                            "failed": sum(1 for t in chain if t.error)})
            if capture_traces:
                trajectories.append({"parent": parent.uid, "score": score, "turns": [_trace(t) for t in chain]})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=trajectories if capture_traces else None)

    async def _rollouts(self, batch: list[Parent], prompt: str) -> list[list[_Turn]]:
        art = Artefacts(system_prompt=prompt)
        sem = asyncio.Semaphore(self.concurrency)

        async def chain(parent: Parent) -> list[_Turn]:
            previous: list[str | None] = []
            out: list[_Turn] = []
            for i, sub in enumerate(parent.subs()):
                ref = SubProblemRef(parent, i, sub)
                msgs = build_messages(ref, previous, art)
                async with sem:
                    res = await self.backend.complete(
                        ChatRequest(msgs, request_seed(self.seed, 0, parent.uid, i), ref, i))
                if res.error:
                    self.failed_requests += 1
                    self.last_error = res.error
                out.append(_Turn(ref, res.completion or "", res.error))
                previous.append(None if res.error else res.completion)
            return out

        try:
            chains = await asyncio.gather(*(chain(p) for p in batch))
            turns = [t for c in chains for t in c if not t.error]
            items = [(t.ref.sub.answer, t.completion, t.ref.sub.answer_type, t.ref.sub.type_sequence, None,
                      problem_text(t.ref)) for t in turns]  # definitions stated in the problem count, as in eval
            verdicts = await asyncio.to_thread(self.verifier.verify_responses, items) if items else []
            for t, (preds, v) in zip(turns, verdicts, strict=True):
                t.extracted, t.correct, t.reason = list(preds), bool(v.correct), str(v.reason)
            for c in chains:
                for t in c:
                    if t.error:
                        t.reason = f"incorrect: the request failed ({t.error})"
            if self.judge is not None:
                await self._judge([t for t in turns if not t.correct])
            return chains
        finally:
            await self.backend.aclose()
            if self.judge is not None:
                await self.judge.aclose()

    async def _judge(self, rejected: list[_Turn]) -> None:
        assert self.judge is not None
        judge = self.judge
        verdicts = await asyncio.gather(*(judge.judge(llm_judge_inputs(t.ref, t.completion, t.extracted or []))
                                          for t in rejected))
        for t, v in zip(rejected, verdicts, strict=True):
            if v.correct:
                t.correct, t.reason = True, f"accepted by the LLM judge ({t.reason})"
            elif v.verdict == "FALSE":
                t.reason = f"{t.reason}; the LLM judge agreed: {v.justification}".strip()

    # -- reflective dataset ---------------------------------------------------------------------------

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        """What the reflection model reads about each parent of a minibatch.

        Args:
            candidate: the candidate evaluated.
            eval_batch: the result of :meth:`evaluate` with ``capture_traces=True``.
            components_to_update: the components to propose new texts for.

        Returns:
            ``{component: [{"Inputs": {...}, "Generated Outputs": ..., "Feedback": ...}, ...]}``, one
            record per parent: the problem (each sub-problem's text), the model's final answers and
            the end of its reply, and per sub-problem ``Correct.`` or ``Incorrect: expected
            \\boxed{...}; the verifier said: ...``.

        Raises:
            GepaError: ``eval_batch`` has no trajectories.
        """
        if eval_batch.trajectories is None:
            raise GepaError("make_reflective_dataset needs an evaluation with capture_traces=True")
        records = [_reflective_record(tr) for tr in eval_batch.trajectories]
        return {c: records for c in components_to_update}


def _trace(t: _Turn) -> dict[str, Any]:
    """The small, picklable trajectory of one turn."""
    sub, parent = t.ref.sub, t.ref.parent
    text = sub.problem.strip()
    if t.ref.index == 0 and parent.stem.strip() and parent.stem.strip() != text:
        text = f"{parent.stem.strip()}\n\n{text}"
    reply = strip_reasoning(t.completion) if t.completion else ""
    return {"sub_id": sub.problem_id, "problem": _head(text, _PROBLEM_CHARS), "gold": sub.answer.strip(),
            "extracted": [_head(x, _BOX_CHARS) for x in (t.extracted or [])], "reply_tail": _tail(reply, _TAIL_CHARS),
            "correct": t.correct, "reason": _head(t.reason, _REASON_CHARS), "error": t.error}


def _feedback(turn: Mapping[str, Any]) -> str:
    if turn["correct"]:
        return "Correct."
    if turn["error"]:
        return f"Incorrect: expected {turn['gold']}; the request failed, so no answer was given ({_head(turn['error'], 200)})."
    return f"Incorrect: expected {turn['gold']}; the verifier said: {turn['reason']}"


def _answer(turn: Mapping[str, Any]) -> str:
    if turn["error"]:
        return "(no reply: the request failed)"
    boxes = ", ".join(f"\\boxed{{{x}}}" for x in turn["extracted"]) or "(no final answer found)"
    return f"Final answer(s): {boxes}\nEnd of the reply: {turn['reply_tail'] or '(empty)'}"


def _reflective_record(trajectory: Mapping[str, Any]) -> dict[str, Any]:
    turns = trajectory["turns"]
    if len(turns) == 1:
        t = turns[0]
        return {"Inputs": {"Problem": t["problem"]}, "Generated Outputs": _answer(t), "Feedback": _feedback(t)}
    n = len(turns)
    return {
        "Inputs": {"Problem": f"A problem in {n} sub-questions, asked one per turn; the assistant sees its own "
                              "earlier replies.",
                   **{f"Sub-question {k}": t["problem"] for k, t in enumerate(turns, 1)}},
        "Generated Outputs": {f"Sub-question {k}": _answer(t) for k, t in enumerate(turns, 1)},
        "Feedback": "\n".join(f"Sub-question {k}: {_feedback(t)}" for k, t in enumerate(turns, 1))
                    + f"\nScore: {sum(t['correct'] for t in turns)}/{n} sub-questions correct.",
    }


# --------------------------------------------------------------------------------- reflection model


class ReflectionLM:
    """GEPA's reflection model (a callable prompt -> text) at an OpenAI-compatible endpoint.

    Args:
        model: model name.
        base_url: endpoint such as ``http://127.0.0.1:8001/v1``.
        api_key_env: environment variable holding its API key.
        temperature, max_tokens: sampling (``None``: the server's default).
        request_timeout, max_retries: as :class:`~studybench.models.openai_backend.OpenAIBackend`.

    Attributes:
        calls, failures: requests made; those that failed after the retries.
        streak: failures in a row (:func:`optimize` stops after three).
    """

    def __init__(self, model: str, base_url: str | None, *, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float | None = None, max_tokens: int | None = None,
                 request_timeout: float = 600.0, max_retries: int = 6) -> None:
        from studybench.models.openai_backend import OpenAIBackend

        self.backend = OpenAIBackend(model, base_url, SamplingParams(temperature=temperature, max_tokens=max_tokens),
                                     concurrency=4, request_timeout=request_timeout, max_retries=max_retries,
                                     api_key_env=api_key_env)
        self.calls = self.failures = self.streak = 0
        self.last_error: str | None = None

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        """The reply's text (reasoning removed).

        Raises:
            GepaError: the request failed after the retries (GEPA skips that proposal).
        """
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        self.calls += 1
        res = run_sync(self._ask(messages))
        if res.error:
            self.failures += 1
            self.streak += 1
            self.last_error = res.error
            raise GepaError(f"the reflection model failed: {res.error}")
        self.streak = 0
        return strip_reasoning(res.completion or "")

    async def _ask(self, messages: list[dict[str, Any]]) -> Any:
        try:
            return await self.backend.complete(ChatRequest(messages, None, None, 0))
        finally:
            await self.backend.aclose()

    def describe(self) -> dict[str, Any]:
        """Model, endpoint (credentials removed), sampling; never the key."""
        d = self.backend.describe()
        return {k: d[k] for k in ("model", "base_url", "sampling", "api_key_env")}


# ------------------------------------------------------------------------------------------ running
