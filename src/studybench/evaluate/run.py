"""The run: :func:`run_eval` = :func:`~studybench.evaluate.plan.prepare_eval` then :func:`run_plan`.

:func:`run_plan` checks the endpoints, writes the manifest and generates every turn the run still
lacks (resuming: finished turns are reused), then hands the turns to the passes of
:mod:`~studybench.evaluate.judge_after` (the rule pass, then the LLM pass) and writes the report. The
``studybench eval`` command is ``prepare_eval`` and ``run_plan`` with a progress bar; what will be
run is planned in :mod:`~studybench.evaluate.plan`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.costs import PRICING_FILE
from studybench.evaluate.fit import plan_server_context
from studybench.evaluate.generate import GenerationStats, generate_turns
from studybench.evaluate.judge_after import (
    JudgeRunResult,
    add_llm_verdicts,
    judge_spec_from_run,
    judge_turns,
    verify_turns,
)
from studybench.evaluate.llm_pass import LLMStats
from studybench.evaluate.plan import EvalPlan, default_run_dir, find_run_dataset, prepare_eval, run_dataset
from studybench.evaluate.resume import resume_refusal
from studybench.evaluate.rule_pass import RuleStats, RuleVerifier
from studybench.evaluate.scope import ProgressFn, close_all, run_sync
from studybench.evaluate.spec import EvalError, EvalSpec
from studybench.evaluate.stopping import run_budget, stop_error
from studybench.llm_judge import LLMJudgeConfigError
from studybench.models import ChatBackend, EndpointError, ReferenceBackend, check_endpoint
from studybench.report import write_report
from studybench.store import RunStore, TurnKey, VerifierInfo, merge_labels, record_environment

__all__ = [
    "EvalPlan",
    "EvalResult",
    "JudgeRunResult",
    "add_llm_verdicts",
    "check_endpoints",
    "default_run_dir",
    "find_run_dataset",
    "judge_spec_from_run",
    "prepare_eval",
    "run_dataset",
    "run_eval",
    "run_plan",
    "run_sync",
]
"""Planning and judging-after names are importable from here as before (:mod:`~studybench.evaluate.plan`,
:mod:`~studybench.evaluate.judge_after` hold them)."""


@dataclass
class EvalResult:
    """What an evaluation did.

    Attributes:
        run_dir: the run directory.
        report: the report written (``None`` with ``only_generate``).
        generation: the generation pass's counts (``None`` with ``only_verify``).
        rule: the rule pass's counts (``None`` with ``only_generate``).
        llm: the LLM pass's counts (``None`` without a judge, or with ``only_generate``).
        warnings: endpoint warnings (e.g. the endpoint does not list the model).
    """

    run_dir: Path
    report: dict[str, Any] | None = None
    generation: GenerationStats | None = None
    rule: RuleStats | None = None
    llm: LLMStats | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def failed_turns(self) -> int:
        """Turns of the selection whose generation failed after all retries (they count as incorrect)."""
        if self.report is not None:
            return int(self.report["turns"]["failed"])
        return self.generation.failed if self.generation is not None else 0

    @property
    def par_at_k(self) -> float | None:
        """Par@k in percent, mean over seeds (``None`` without a report)."""
        return None if self.report is None else self.report["par_at_k"]["mean"]

    @property
    def sub_at_k(self) -> float | None:
        """Sub@k in percent, mean over seeds (``None`` without a report)."""
        return None if self.report is None else self.report["sub_at_k"]["mean"]


def check_endpoints(plan: EvalPlan) -> list[str]:
    """Check the model endpoint (and the judge's, unless ``only_generate``) before a run.

    Also reads the server's context length and plans every turn within it
    (:func:`~studybench.evaluate.fit.plan_server_context`; recorded in ``plan.manifest``).

    Returns:
        Warnings to show (e.g. the endpoint does not list the model, the server's context lowered the cap).

    Raises:
        EvalError: an endpoint is unreachable, has an invalid URL, or refuses the key; or no parent fits
            the server's context.
    """
    warnings: list[str] = []
    try:
        if plan.backend is not None and not isinstance(plan.backend, ReferenceBackend) and hasattr(plan.backend, "base_url"):
            warnings += check_endpoint(plan.backend)
            warnings += plan_server_context(plan.backend, plan.manifest.backend, plan.scope.parents, plan.artefacts)
        if plan.judge is not None and not plan.spec.only_generate:
            warnings += check_endpoint(plan.judge.backend, what="judge endpoint")
    except EndpointError as e:
        raise EvalError(str(e), "base_url") from None
    return warnings


def run_plan(
    plan: EvalPlan,
    *,
    progress: ProgressFn | None = None,
    on_turn_error: Callable[[TurnKey, str], None] | None = None,
    preflight: bool = True,
    rule_verifier: RuleVerifier | None = None,
) -> EvalResult:
    """Run a prepared evaluation: generate, verify, ask the LLM judge, write the report.

    Re-running the same plan resumes: finished turns and current verdicts are reused.

    Args:
        plan: from :func:`prepare_eval`.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn`.
        on_turn_error: called with (turn key, error) for each turn that failed after all retries.
        preflight: check the endpoints first (:func:`check_endpoints`).
        rule_verifier: the rule verifier to use instead of a local one (e.g. a
            :class:`~studybench.evaluate.ray_judge.RayVerifier`); it must judge with
            ``spec.verification.verify_timeout``,
            and the caller closes it. Its ``chunk`` attribute, when it has one, is the number of turns
            sent to it at once (default 512).

    Returns:
        The counts of each pass and the report (see :class:`EvalResult`). Turns that failed after
        retries are recorded, count as incorrect, and are retried by the next run of the same plan.

    Raises:
        EvalError: an endpoint check failed, or the run directory now holds another run.
        EndpointStoppedError: the endpoint stopped answering mid-run (``spec.generation.max_consecutive_failures``
            turns in a row could not reach it); what was done is saved, verified and reported as incomplete.
        BudgetStoppedError: ``spec.budgets.max_total_tokens`` or ``max_cost`` was reached; likewise.
        studybench.store.RunDirInUseError: another process is writing the run directory (it is
            locked for the whole run: :meth:`studybench.store.RunStore.lock`).
        studybench.llm_judge.LLMJudgeConfigError: the judge endpoint refuses every request.
        OSError: a file of the run directory cannot be written (``e.filename`` names it; e.g. a full
            disk); what was written before is kept, and running again resumes.
    """
    spec = plan.spec
    result = EvalResult(plan.run_dir)
    judge_open = plan.judge is not None
    try:
        if preflight:
            result.warnings = check_endpoints(plan)
        with RunStore(plan.run_dir).lock():
            _check_still_resumable(plan)
            plan.manifest = record_environment(plan.manifest, plan.previous, base_url=getattr(plan.backend, "base_url", None),
                                               split_path=plan.dataset.path)  # asks the server's version once
            store = plan.open_store()
            try:
                # one budget for the model's and the LLM judge's requests, from what the run already spent
                budget = run_budget(store, plan.manifest.backend.get("model"), plan.pricing, spec.budgets)
                if not spec.only_verify:
                    assert plan.backend is not None
                    gen = spec.generation
                    result.generation = run_sync(generate_turns(plan.scope, store, plan.backend, plan.artefacts,
                                                                concurrency=gen.concurrency, progress=progress,
                                                                on_error=on_turn_error, budget=budget,
                                                                max_consecutive_failures=gen.max_consecutive_failures))
                stop = stop_error(result)
                if spec.only_generate:
                    if stop is not None:
                        raise stop
                    return result
                ver = spec.verification
                result.rule = verify_turns(plan.scope, store, timeout=ver.verify_timeout, workers=ver.verify_workers,
                                           retry_timeouts=ver.retry_timeouts, progress=progress, verifier=rule_verifier)
                if plan.judge is not None and stop is None:
                    judge_open = False  # judge_turns closes it
                    try:
                        result.llm = judge_turns(plan.scope, store, plan.judge, budget=budget, progress=progress)
                    except LLMJudgeConfigError:
                        # the new judge refuses every request: the run keeps the judge it had (or none)
                        old = plan.previous.active_judge if plan.previous is not None else None
                        kept = {"mode": "rule+llm", "judge": old} if old is not None else {"mode": "rule", "judge": None}
                        verifier = (plan.manifest.verifier or VerifierInfo()).model_copy(update=kept)
                        store.write_manifest(plan.manifest.model_copy(update={"verifier": verifier}))
                        raise
                result.report = write_report(store)
                stop = stop or stop_error(result)  # the judge's pass may have spent the budget
                if stop is not None:
                    raise stop
            finally:
                store.close()
    finally:
        run_sync(close_all(plan.backend, plan.judge if judge_open else None))
    return result


def _check_still_resumable(plan: EvalPlan) -> None:
    """Refuse to run when the run directory changed since :func:`prepare_eval` (another writer came first)."""
    store = RunStore(plan.run_dir)
    if not store.exists():
        return
    try:
        current = store.check_files(*(() if plan.spec.budgets.pricing else (PRICING_FILE,)))  # all readable before any write
    except ValueError as e:
        raise EvalError(str(e), "out") from None
    if plan.previous is not None and current.to_json() == plan.previous.to_json():
        return
    refusal = resume_refusal(plan.run_dir, current, plan.manifest, plan.spec.generation.preset)
    if refusal:
        raise EvalError(refusal, "out")
    plan.manifest.created = current.created or plan.manifest.created
    plan.manifest.labels = merge_labels(current.labels, plan.spec.labels)[0]  # e.g. `studybench label` came between


def run_eval(
    spec: EvalSpec,
    out_dir: Path | str | None = None,
    *,
    backend: ChatBackend | None = None,
    progress: ProgressFn | None = None,
    on_turn_error: Callable[[TurnKey, str], None] | None = None,
) -> EvalResult:
    """Evaluate a model on a StudyBench test set (paper 2.2; docs/protocol.md 2-3): resumable.

    Args:
        spec: the evaluation (see :class:`~studybench.evaluate.spec.EvalSpec`).
        out_dir: the run directory (default ``runs/<model>-<split>``); running again resumes.
        backend: a chat backend to use instead of the one ``spec`` describes.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn`.
        on_turn_error: called with (turn key, error) for each turn that failed after all retries.

    Returns:
        An :class:`EvalResult` with the report (``result.report``; ``result.par_at_k``,
        ``result.sub_at_k``).

    Raises:
        EvalError: a setting, input, endpoint or run directory that cannot be used.
        studybench.llm_judge.LLMJudgeConfigError: the judge endpoint refuses every request.
    """
    plan = prepare_eval(spec, out_dir, backend=backend)
    return run_plan(plan, progress=progress, on_turn_error=on_turn_error)


