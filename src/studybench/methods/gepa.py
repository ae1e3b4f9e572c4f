"""GEPA (reflective prompt evolution) with the StudyBench protocol as its adapter (paper appendix J).

GEPA evolves one text component, the **system prompt** (``{"system_prompt": text}``). Each data
instance is one parent built from the Instructions with Answer (:func:`gepa_datasets`): a single-turn
record is a single-question parent, a multi-sub chain a parent whose sub-problems are asked in order
with the model's **own** earlier replies in the conversation (:func:`studybench.protocol.build_messages`).

* :class:`StudyBenchAdapter` implements GEPA's adapter protocol. A parent's score is the **fraction
  of its sub-problems answered correctly** (Sub-style: a smoother signal than all-or-nothing, and
  equal to it for single-question parents). Answers are scored by the rule verifier, optionally by
  the LLM judge on rule rejections; a failed request is an incorrect turn whose error is recorded.
* :func:`make_reflective_dataset <StudyBenchAdapter.make_reflective_dataset>` gives the reflection
  model, per parent: the problem (user turns), the model's answer (extracted boxes, the tail of the
  reply) and feedback (``Correct.`` or ``Incorrect: expected \\boxed{...}; the verifier said: ...``).
The adapter, the data instances and the reflection model live in :mod:`studybench.methods.gepa_adapter`
(re-exported here).

* :func:`optimize` runs GEPA in a run directory: GEPA's own state (``gepa_state.bin``: resumable; a
  pickle, so resume only run directories you made), ``best_system_prompt.md`` (what
  ``studybench eval --system-prompt`` takes), ``snapshots/best_at_<N>.md`` every ``snapshot_every``
  rollouts, ``gepa_run.json`` (settings without secrets, scores, rollouts used) and ``gepa_log.txt``.

A *rollout* is one parent evaluated once (GEPA's metric call). ``max_metric_calls`` is the budget of
the whole run directory: running again with a larger budget continues where the last run stopped.
The ``gepa`` package is imported only when needed (``pip install "studybench[gepa]"``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studybench.datasets import DatasetError, resolve_train_dir
from studybench.files import InputFileError, append_text, atomic_write_text, read_json
from studybench.llm_judge import LLMJudge
from studybench.methods.gepa_adapter import (
    COMPONENT,
    GEPA_INSTALL_HINT,
    GepaError,
    ReflectionLM,
    StudyBenchAdapter,
    gepa_datasets,
    require_gepa,
)
from studybench.models import SamplingParams
from studybench.protocol import DEFAULT_SYSTEM_PROMPT
from studybench.records import Parent

__all__ = [
    "BEST_PROMPT_FILE",
    "COMPONENT",
    "GEPA_INSTALL_HINT",
    "RUN_FILE",
    "GepaError",
    "GepaRunResult",
    "ReflectionLM",
    "StudyBenchAdapter",
    "gepa_datasets",
    "optimize",
    "require_gepa",
]

BEST_PROMPT_FILE = "best_system_prompt.md"
RUN_FILE = "gepa_run.json"

_REFLECTION_FAILURES = 3


def _gepa_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gepa")
    except PackageNotFoundError:
        return None


@dataclass
class GepaRunResult:
    """The outcome of :func:`optimize`.

    Attributes:
        run_dir: the run directory.
        best_prompt: the best system prompt found (by mean validation score).
        best_score: its mean validation score (fraction of sub-problems correct per parent, averaged).
        seed_score: the seed prompt's mean validation score.
        rollouts: metric calls used by the run directory so far (all invocations).
        candidates: prompts evaluated on the validation set.
        resumed: this invocation continued a saved run.
        stopped: why the run stopped before its budget (``None``: the budget was used).
        train_size, val_size: parents in each set.
    """

    run_dir: Path
    best_prompt: str
    best_score: float
    seed_score: float
    rollouts: int
    candidates: int
    resumed: bool
    stopped: str | None
    train_size: int
    val_size: int

    @property
    def best_path(self) -> Path:
        """``RUN_DIR/best_system_prompt.md``."""
        return self.run_dir / BEST_PROMPT_FILE


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _prompt_file_text(prompt: str) -> str:
    return prompt if prompt.endswith("\n") else prompt + "\n"


class _Tracker:
    """GEPA callbacks: progress lines, the best prompt file, and snapshots every ``every`` rollouts."""

    def __init__(self, run_dir: Path, policy: Any, every: int, resumed: bool, log: Callable[[str], None]) -> None:
        self.run_dir, self.policy, self.every, self.resumed, self.log = run_dir, policy, every, resumed, log
        self.last: int | None = None
        self.best_sha: str | None = None
        self.state: Any = None

    def _check(self, state: Any) -> None:
        total = int(state.total_num_evals)
        if self.last is None:
            self.last = total if self.resumed else 0
        idx = self.policy.get_best_program(state)
        prompt = state.program_candidates[idx][COMPONENT]
        if _sha(prompt) != self.best_sha:
            atomic_write_text(self.run_dir / BEST_PROMPT_FILE, _prompt_file_text(prompt))
            self.best_sha = _sha(prompt)
        if self.every > 0:
            for m in range((self.last // self.every + 1) * self.every, total + 1, self.every):
                atomic_write_text(self.run_dir / "snapshots" / f"best_at_{m}.md", _prompt_file_text(prompt))
        self.last = max(self.last, total)

    def on_iteration_start(self, event: Mapping[str, Any]) -> None:
        self.state = event["state"]
        self._check(self.state)

    def on_budget_updated(self, event: Mapping[str, Any]) -> None:
        if self.state is not None:  # a snapshot holds the best prompt as the budget passes its multiple
            self._check(self.state)

    def on_iteration_end(self, event: Mapping[str, Any]) -> None:
        self._check(event["state"])

    def on_optimization_end(self, event: Mapping[str, Any]) -> None:
        self._check(event["final_state"])

    def on_valset_evaluated(self, event: Mapping[str, Any]) -> None:
        best = " (best so far)" if event.get("is_best_program") else ""
        self.log(f"candidate {event['candidate_idx']}: validation score {event['average_score']:.3f} "
                 f"over {event['num_examples_evaluated']} parents{best}")


class _Log:
    """GEPA's logger: every line to ``gepa_log.txt`` and to ``log``."""

    def __init__(self, path: Path, log: Callable[[str], None]) -> None:
        self.path, self._log = path, log

    def log(self, message: str, *args: Any, **kwargs: Any) -> None:
        text = " ".join(str(x) for x in (message, *args))
        append_text(self.path, text.rstrip("\n") + "\n")
        self._log(text)


def _policy(resumed: bool) -> Any:
    """GEPA's full-validation policy that, on resume, does not evaluate the seed prompt again (gepa
    0.1.4 evaluates it on the whole validation set before loading the saved state, then discards it)."""
    from gepa.strategies.eval_policy import FullEvaluationPolicy

    class _Policy(FullEvaluationPolicy):  # type: ignore[misc]
        def get_seed_eval_batch(self, loader: Any) -> list[Any]:
            return [] if resumed else list(loader.all_ids())

    return _Policy()


def _check_resume(run_dir: Path, fingerprint: dict[str, Any]) -> dict[str, Any] | None:
    path = run_dir / RUN_FILE
    if not os.path.lexists(path):
        return None
    try:
        old = read_json(path)
        before = old["fingerprint"]
    except InputFileError as e:
        raise GepaError(f"{e}; this run directory cannot be resumed (use a new --run-dir)") from None
    except (KeyError, TypeError):
        raise GepaError(f"{path}: unreadable; this run directory cannot be resumed (use a new --run-dir)") from None
    names = {"model": "another --model", "val": "another validation set (--train-dir, --val-size, --seed, --limit)",
             "seed_prompt_sha256": "another --seed-prompt"}
    for key, what in names.items():
        if before.get(key) != fingerprint.get(key):
            raise GepaError(f"run directory {run_dir} holds a GEPA run with {what}; "
                            "give the same settings to resume it, or use a new --run-dir")
    return dict(old)


def optimize(
    *,
    model: str,
    base_url: str,
    reflection_model: str,
    run_dir: str | os.PathLike[str],
    max_metric_calls: int,
    reflection_base_url: str | None = None,
    train_dir: str | os.PathLike[str] | None = None,
    datasets: tuple[list[Parent], list[Parent]] | None = None,
    val_size: int = 32,
    seed: int = 0,
    limit: int | None = None,
    seed_prompt: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    reflection_api_key_env: str = "OPENAI_API_KEY",
    concurrency: int = 16,
    max_tokens: int | None = None,
    temperature: float | None = None,
    reflection_max_tokens: int | None = None,
    reflection_temperature: float | None = None,
    request_timeout: float = 600.0,
    max_retries: int = 6,
    minibatch_size: int = 3,
    candidate_selection: str = "pareto",
    snapshot_every: int = 100,
    judge: LLMJudge | None = None,
    verify_workers: int | None = None,
    verify_timeout: float = 5.0,
    log: Callable[[str], None] | None = None,
) -> GepaRunResult:
    """Evolve the system prompt with GEPA; resumable from ``run_dir`` (see the module docstring).

    Args:
        model, base_url, api_key_env: the task model at an OpenAI-compatible endpoint (the key is read
            from the named environment variable, never stored).
        reflection_model, reflection_base_url, reflection_api_key_env: the reflection model
            (endpoint default: ``base_url``).
        run_dir: the run directory (created; an existing one is resumed).
        max_metric_calls: rollout budget of the whole run directory (a parent evaluated once is one).
        train_dir: a ``train_data/`` directory for :func:`gepa_datasets` (default: :func:`studybench.datasets.resolve_train_dir`).
        datasets: (trainset, valset) given directly instead.
        val_size, seed, limit: see :func:`gepa_datasets`; ``seed`` also seeds GEPA and sampling.
        seed_prompt: the system prompt to start from (default: the protocol's).
        concurrency: turns in flight.
        max_tokens, temperature: the task model's sampling (``None``: the server's default).
        reflection_max_tokens, reflection_temperature: the reflection model's.
        request_timeout, max_retries: per request, both models.
        minibatch_size: parents per reflection minibatch.
        candidate_selection: ``pareto``, ``current_best``, ``epsilon_greedy`` or ``top_k_pareto``.
        snapshot_every: write ``snapshots/best_at_<N>.md`` each time the rollouts pass a multiple of
            this (0: never).
        judge: LLM judge for rule rejections (``None``: rule verifier only).
        verify_workers, verify_timeout: the rule verifier's worker processes and per-check timeout.
        log: receives progress lines (default: none; they are always written to ``gepa_log.txt``).

    Returns:
        The best prompt, its and the seed's validation scores, rollouts used.

    Raises:
        GepaError: gepa is not installed; no data; the run directory holds another run; an endpoint
            stopped answering (what was saved resumes).
        OSError: a file of the run directory could not be written.
    """
    require_gepa()
    import gepa

    from studybench.models.openai_backend import OpenAIBackend
    from studybench.verify import Verifier

    if max_metric_calls < 1:
        raise GepaError(f"max_metric_calls must be >= 1, got {max_metric_calls}")
    if snapshot_every < 0:
        raise GepaError(f"snapshot_every must be >= 0, got {snapshot_every}")
    out = (lambda _m: None) if log is None else log
    rd = Path(run_dir)
    if datasets is None:
        try:
            train_dir = resolve_train_dir(train_dir)
        except DatasetError as e:
            raise GepaError(str(e)) from None
        trainset, valset = gepa_datasets(train_dir, val_size=val_size, seed=seed, limit=limit)
    else:
        trainset, valset = datasets
    if not trainset or not valset:
        raise GepaError("GEPA needs a non-empty training set and validation set")
    seed_text = (seed_prompt if seed_prompt is not None else DEFAULT_SYSTEM_PROMPT).strip()
    if not seed_text:
        raise GepaError("the seed prompt is empty")
    fingerprint = {"model": model, "val": _sha(json.dumps([p.uid for p in valset], allow_nan=False)),
                   "seed_prompt_sha256": _sha(seed_text)}
    resumed = (rd / "gepa_state.bin").is_file()
    previous = _check_resume(rd, fingerprint) if resumed else None
    rd.mkdir(parents=True, exist_ok=True)
    backend = OpenAIBackend(model, base_url, SamplingParams(temperature=temperature, max_tokens=max_tokens),
                            concurrency=concurrency, request_timeout=request_timeout, max_retries=max_retries,
                            api_key_env=api_key_env)
    reflector = ReflectionLM(reflection_model, reflection_base_url or base_url, api_key_env=reflection_api_key_env,
                             temperature=reflection_temperature, max_tokens=reflection_max_tokens,
                             request_timeout=request_timeout, max_retries=max_retries)
    record: dict[str, Any] = {
        "method": "gepa", "gepa_version": _gepa_version(), "status": "running",
        "fingerprint": fingerprint,
        "task_model": {**{k: backend.describe()[k] for k in ("model", "base_url", "sampling", "api_key_env")},
                       "concurrency": concurrency},
        "reflection_model": reflector.describe(),
        "judge": None if judge is None else judge.describe(),
        "data": {"train_dir": None if train_dir is None else str(train_dir), "train_parents": len(trainset),
                 "val_parents": len(valset), "val_size": val_size, "seed": seed, "limit": limit,
                 "val_ids": [p.uid for p in valset]},
        "budget": {"max_metric_calls": max_metric_calls, "snapshot_every": snapshot_every,
                   "minibatch_size": minibatch_size, "candidate_selection": candidate_selection},
        "seed_prompt": seed_text,
        "invocations": int((previous or {}).get("invocations", 0)) + 1,
        "rollouts": (previous or {}).get("rollouts", 0),
    }
    atomic_write_text(rd / RUN_FILE, json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    policy = _policy(resumed)
    tracker = _Tracker(rd, policy, snapshot_every, resumed, out)
    logger = _Log(rd / "gepa_log.txt", out)
    out(("resuming" if resumed else "starting") + f" GEPA in {rd}: {len(trainset)} training and {len(valset)} "
        f"validation parents, budget {max_metric_calls} rollouts")

    def reflection_dead(_state: Any) -> bool:
        return reflector.streak >= _REFLECTION_FAILURES

    with Verifier(workers=verify_workers, timeout=verify_timeout) as verifier:
        adapter = StudyBenchAdapter(backend, verifier, judge=judge, concurrency=concurrency, seed=seed)
        try:
            result = gepa.optimize(
                seed_candidate={COMPONENT: seed_text}, trainset=trainset, valset=valset, adapter=adapter,
                reflection_lm=reflector, candidate_selection_strategy=candidate_selection,  # type: ignore[arg-type]
                reflection_minibatch_size=minibatch_size, max_metric_calls=max_metric_calls,
                stop_callbacks=[reflection_dead], logger=logger, run_dir=str(rd), callbacks=[tracker],
                track_best_outputs=False, seed=seed, raise_on_exception=True, val_evaluation_policy=policy,
            )
        except GepaError:
            record["status"] = "stopped"
            atomic_write_text(rd / RUN_FILE, json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
            raise
    best = result.best_idx
    best_prompt = result.candidates[best][COMPONENT]
    atomic_write_text(rd / BEST_PROMPT_FILE, _prompt_file_text(best_prompt))
    stopped = None
    if reflection_dead(None):
        stopped = (f"the reflection model failed {reflector.streak} times in a row ({reflector.last_error}); "
                   "the run is saved: run the same command again to resume")
    rollouts = int(result.total_metric_calls or 0)
    record.update({
        "status": "stopped" if stopped else "done",
        "rollouts": rollouts,
        "candidates": len(result.candidates),
        "seed_score": result.val_aggregate_scores[0],
        "best": {"score": result.val_aggregate_scores[best], "candidate": best, "sha256": _sha(best_prompt)},
        "failed_requests": adapter.failed_requests + int((previous or {}).get("failed_requests", 0)),
        "reflection": {"calls": reflector.calls, "failures": reflector.failures},
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    atomic_write_text(rd / RUN_FILE, json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return GepaRunResult(run_dir=rd, best_prompt=best_prompt, best_score=result.val_aggregate_scores[best],
                         seed_score=result.val_aggregate_scores[0], rollouts=rollouts,
                         candidates=len(result.candidates), resumed=resumed, stopped=stopped,
                         train_size=len(trainset), val_size=len(valset))
