"""Judging after generation: the rule pass and the LLM pass, in a run or over a finished one.

:func:`verify_turns` (the rule verifier over the turns of a scope) and :func:`judge_turns` (the LLM
judge over the rule rejections) are the two passes; :func:`~studybench.evaluate.run_plan` calls them
after its generation pass, and :func:`add_llm_verdicts` (``studybench judge RUN_DIR``) calls them over
a finished run, found again with :func:`~studybench.evaluate.plan.find_run_dataset`.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.costs import PRICING_FILE, BudgetTracker
from studybench.datasets import Dataset
from studybench.evaluate.llm_pass import LLMStats, add_llm_verdicts_to_scope
from studybench.evaluate.plan import find_run_dataset
from studybench.evaluate.rule_pass import RuleStats, RuleVerifier, add_rule_verdicts
from studybench.evaluate.scope import ProgressFn, RunScope, close_all, run_sync
from studybench.evaluate.selection import errata_parents
from studybench.evaluate.spec import EvalError
from studybench.llm_judge import LLMJudge, LLMJudgeSpec, LLMJudgeSpecError
from studybench.models import EndpointError, check_endpoint
from studybench.report import write_report
from studybench.store import Manifest, RunStore, VerifierInfo, rule_settings

__all__ = ["JudgeRunResult", "add_llm_verdicts", "judge_spec_from_run", "judge_turns", "verify_turns"]


def verify_turns(scope: RunScope, store: RunStore, *, timeout: float, workers: int | None = None,
                 retry_timeouts: bool = False, progress: ProgressFn | None = None,
                 verifier: RuleVerifier | None = None) -> RuleStats:
    """The rule pass: a rule verdict for every turn of ``scope`` that lacks a current one.

    Args:
        scope: the turns.
        store: the run directory.
        timeout: seconds per symbolic verification (part of the verifier's settings).
        workers: worker processes of the local verifier (``None``: one per CPU, at most 8).
        retry_timeouts: verify again turns whose verdict timed out with the same settings.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn`.
        verifier: a verifier to use instead of a local one (e.g. a
            :class:`~studybench.evaluate.ray_judge.RayVerifier`, judging with ``timeout``); the caller
            closes it. Its ``chunk`` attribute, when it has one, is the number of turns sent at once.

    Returns:
        The pass's counts.
    """
    from studybench.verify import Verifier

    with (nullcontext(verifier) if verifier is not None else Verifier(workers=workers, timeout=timeout)) as v:
        return add_rule_verdicts(scope, store, v, rule_settings(timeout), progress=progress,
                                 retry_timeouts=retry_timeouts, chunk=getattr(v, "chunk", 512))


def judge_turns(scope: RunScope, store: RunStore, judge: LLMJudge, *, budget: BudgetTracker | None = None,
                judge_rule_accepts: bool = False, refresh: bool = False, progress: ProgressFn | None = None) -> LLMStats:
    """The LLM pass: the judge's verdict on every counting rule rejection of ``scope``; the judge is closed after.

    Args:
        scope: the turns.
        store: the run directory.
        judge: the LLM judge (closed when the pass ends, however it ends).
        budget: the tracker the judge charges (``None``: the judge's own, if any); once spent, no new
            request is sent and ``stats.budget_stop`` says why.
        judge_rule_accepts: also send rule accepts (see :func:`add_llm_verdicts`).
        refresh: judge again turns that already hold a verdict of this judge.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn`.

    Returns:
        The pass's counts.

    Raises:
        studybench.llm_judge.LLMJudgeConfigError: the judge endpoint refuses every request.
    """
    if budget is not None:
        judge.budget = budget

    async def llm() -> LLMStats:
        try:
            return await add_llm_verdicts_to_scope(scope, store, judge, judge_rule_accepts=judge_rule_accepts,
                                                   refresh=refresh, progress=progress)
        finally:
            await judge.aclose()

    return run_sync(llm())


def judge_spec_from_run(manifest: Manifest, **overrides: Any) -> LLMJudgeSpec:
    """The spec of the judge a run used last (its model, URL and template), with ``overrides`` applied.

    Args:
        manifest: the run's manifest.
        overrides: other :class:`~studybench.llm_judge.spec.LLMJudgeSpec` fields (``None`` values ignored).

    Raises:
        EvalError: the run has no judge yet, or an override is invalid.
    """
    prev = manifest.verifier.judge if manifest.verifier is not None else None
    if not isinstance(prev, dict) or not isinstance(prev.get("model"), str):
        raise EvalError("a judge model is required (--judge-model): this run has no judge yet", "judge.model")
    values: dict[str, Any] = {"model": prev["model"]}
    if isinstance(prev.get("base_url"), str):
        values["base_url"] = prev["base_url"]  # the run's judge, not $STUDYBENCH_JUDGE_BASE_URL
    if prev.get("template") not in (None, "builtin"):
        values["prompt"] = Path(str(prev["template"]))
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return LLMJudgeSpec.create(**values)
    except LLMJudgeSpecError as e:
        raise EvalError(str(e), f"judge.{e.field}") from None


@dataclass
class JudgeRunResult:
    """What :func:`add_llm_verdicts` did.

    Attributes:
        run_dir: the run directory.
        judge: the judge's description.
        rule: counts of the rule pass (rule verdicts that were still missing).
        llm: counts of the LLM pass.
        report: the report written afterwards.
        notes: things the user should know (e.g. the judge prompt changed since the run was judged).
        warnings: endpoint warnings.
    """

    run_dir: Path
    judge: dict[str, Any]
    rule: RuleStats
    llm: LLMStats
    report: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def add_llm_verdicts(
    run_dir: Path | str,
    judge: LLMJudgeSpec | None = None,
    *,
    judge_rule_accepts: bool = False,
    refresh: bool = False,
    activate: bool = True,
    split_path: Path | None = None,
    data_dir: Path | None = None,
    dataset: Dataset | None = None,
    verify_timeout: float | None = None,
    verify_workers: int | None = None,
    retry_timeouts: bool = False,
    progress: ProgressFn | None = None,
    preflight: bool = True,
    budget: Any = None,
) -> JudgeRunResult:
    """Add or refresh LLM verdicts on an existing run, without generating anything (paper 2.2).

    Rule verdicts still missing are computed first; then every counting rule rejection (and with
    ``judge_rule_accepts`` every accept) gets an LLM verdict tied to the digest of the completion it
    judged. Verdicts come from the cache when the same inputs were judged before. The report is
    written afterwards.

    Args:
        run_dir: a run directory made by :func:`run_eval`.
        judge: the judge (``None``: the run's judge, :func:`judge_spec_from_run`).
        judge_rule_accepts: also send rule accepts to the judge (scores are unchanged; the
            consistency report's starred cell becomes observed).
        refresh: judge again turns that already hold a verdict of this judge, asking the endpoint
            afresh (the verdict cache is not read; the new verdicts replace the cached ones).
        activate: make this judge the run's leaderboard judge (mode ``rule+llm``); ``False`` only
            adds verdicts (e.g. a second judge for Cohen's kappa).
        split_path: the test-set file, when it is no longer where the manifest says.
        data_dir: where the official files are.
        dataset: the test set itself (e.g. a run made from an in-memory
            :meth:`~studybench.datasets.Dataset.from_parents`); checked against the manifest's sha256.
        verify_timeout: the rule verifier's timeout (``None``: the run's own, else 5 s). Another value than
            the run's changes the verifier's settings: every turn is verified again.
        verify_workers: rule verifier worker processes.
        retry_timeouts: verify again turns whose rule verdict timed out with the same settings.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn`.
        preflight: check the judge endpoint first.
        budget: a :class:`~studybench.costs.BudgetTracker` the judge charges (:func:`studybench.costs.open_budget`); once spent, no new
            judge request is sent and ``result.llm.budget_stop`` says why (the rest stays un-judged).

    Returns:
        A :class:`JudgeRunResult`.

    Raises:
        EvalError: not a run directory, a bad manifest, test set or judge, or an unreachable endpoint.
        studybench.store.RunDirInUseError: another process is writing the run directory.
        OSError: a file of the run directory cannot be written (``e.filename`` names it).
        studybench.llm_judge.LLMJudgeConfigError: the judge endpoint refuses every request; the
            verdicts obtained so far are kept.
    """
    store = RunStore(Path(run_dir))
    try:
        man = store.read_manifest()
    except (FileNotFoundError, ValueError) as e:
        raise EvalError(str(e), "run_dir") from None
    store.check_unlocked()
    spec = judge if judge is not None else judge_spec_from_run(man)
    recorded = man.verifier.timeout if man.verifier is not None and man.verifier.timeout else None
    rule_timeout = verify_timeout if verify_timeout is not None else (recorded or 5.0)
    if not (isinstance(rule_timeout, (int, float)) and math.isfinite(rule_timeout) and 1e-3 <= rule_timeout <= 86_400):
        raise EvalError(f"verify_timeout: must be a finite number of seconds in [0.001, 86400], got {rule_timeout!r}",
                        "verify_timeout")
    if verify_workers is not None and not 1 <= verify_workers <= 1024:
        raise EvalError(f"verify_workers: must be in [1, 1024], got {verify_workers!r}", "verify_workers")
    try:
        llm_judge = spec.build()
    except LLMJudgeSpecError as e:
        raise EvalError(str(e), f"judge.{e.field}") from None
    llm_judge.budget = budget
    notes: list[str] = []
    warnings: list[str] = []
    judge_open = True
    try:
        ds = find_run_dataset(man, store.manifest_path, data_dir=data_dir, split_path=split_path, dataset=dataset)
        by_uid = {p.uid: p for p in ds.parents}
        missing = [p.uid for p in man.parents if p.uid not in by_uid]
        if missing:
            raise EvalError(f"{store.manifest_path}: parents not in the test set: {', '.join(missing[:5])}", "split")
        scope = RunScope(ds.name, errata_parents(man, [by_uid[p.uid] for p in man.parents]), man.k, list(man.seeds))
        prev = man.verifier.judge if man.verifier is not None else None
        if (isinstance(prev, dict) and prev.get("model") == llm_judge.model and prev.get("template") == llm_judge.template.source
                and prev.get("template_digest") != llm_judge.template.digest):
            notes.append(f"the judge prompt {llm_judge.template.source} changed since this run was last judged; "
                         "this is a new judge configuration (its verdicts are judged afresh)")
        if preflight:
            try:
                warnings += check_endpoint(llm_judge.backend, what="judge endpoint")
            except EndpointError as e:
                raise EvalError(str(e), "judge.base_url") from None
        with store.lock():
            try:
                changed = store.check_files(PRICING_FILE).to_json() != man.to_json()  # all readable before any write
            except (FileNotFoundError, ValueError) as e:
                raise EvalError(str(e), "run_dir") from None
            if changed:
                raise EvalError(f"{store.root}: another command changed the run while this one was starting; "
                                "run this command again", "run_dir")
            try:
                rule = verify_turns(scope, store, timeout=rule_timeout, workers=verify_workers,
                                    retry_timeouts=retry_timeouts, progress=progress)
                judge_open = False  # judge_turns closes it
                llm_stats = judge_turns(scope, store, llm_judge, judge_rule_accepts=judge_rule_accepts, refresh=refresh,
                                        progress=progress)
                settings = rule_settings(rule_timeout)
                verifier_info = (man.verifier or VerifierInfo(**settings)).model_copy(
                    update={"version": settings["version"], "timeout": settings["timeout"]})
                if activate:
                    verifier_info = verifier_info.model_copy(update={"mode": "rule+llm", "judge": llm_judge.describe()})
                if verifier_info != man.verifier:
                    man.verifier = verifier_info
                    store.write_manifest(man)
                rep = write_report(store)
            finally:
                store.close()
    finally:
        if judge_open:
            run_sync(close_all(llm_judge))
    return JudgeRunResult(store.root, llm_judge.describe(), rule, llm_stats, rep, notes, warnings)
