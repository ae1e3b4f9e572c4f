"""The main job as functions: plan an evaluation, run it, add LLM verdicts to a finished run.

``run_eval(spec)`` = :func:`prepare_eval` (load and check everything, no request made) then
:func:`run_plan` (endpoint check, manifest, generation pass, rule pass, LLM pass, report). The
``studybench eval`` command is these two calls with a progress bar; ``studybench judge RUN_DIR`` is
:func:`add_llm_verdicts`.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from studybench import __version__
from studybench.costs import Pricing
from studybench.datasets import Dataset, DatasetError, load_dataset, resolve_split
from studybench.evaluate.fit import check_fit, plan_server_context
from studybench.evaluate.generate import GenerationStats, generate_turns
from studybench.evaluate.llm_pass import LLMStats, add_llm_verdicts_to_scope
from studybench.evaluate.resume import resume_refusal
from studybench.evaluate.rule_pass import RuleStats, RuleVerifier, add_rule_verdicts
from studybench.evaluate.scope import ProgressFn, RunScope
from studybench.evaluate.selection import errata_parents, plan_selection, selection_info
from studybench.evaluate.spec import EvalError, EvalSpec
from studybench.evaluate.stopping import plan_pricing, run_budget, stop_error
from studybench.llm_judge import LLMJudge, LLMJudgeConfigError, LLMJudgeSpec, LLMJudgeSpecError
from studybench.models import ChatBackend, EndpointError, ReferenceBackend, check_endpoint
from studybench.protocol import (
    ArtefactError,
    Artefacts,
    GuidanceKey,
    guidance_coverage,
    load_artefacts,
    unmatched_guidance_message,
)
from studybench.report import write_report
from studybench.report.tokens import PRICING_FILE, record_pricing
from studybench.secrets import env_secrets, known_secrets, redact_command, url_secrets
from studybench.store import (
    Manifest,
    RunStore,
    SplitInfo,
    TurnKey,
    VerifierInfo,
    artefact_paths,
    merge_labels,
    parents_index,
    record_environment,
    rule_settings,
    stored_artefact_refs,
    write_artefacts,
)

__all__ = [
    "EvalPlan",
    "EvalResult",
    "JudgeRunResult",
    "add_llm_verdicts",
    "check_endpoints",
    "default_run_dir",
    "judge_spec_from_run",
    "prepare_eval",
    "run_dataset",
    "run_eval",
    "run_plan",
    "run_sync",
]


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "run"


def default_run_dir(spec: EvalSpec, split_name: str, backend: ChatBackend | None = None) -> Path:
    """``runs/<model>-<split>`` (``runs/reference-<mode>-<split>`` for the reference backend).

    Args:
        spec: the evaluation.
        split_name: the test set's name.
        backend: a backend given instead of the spec's; its described model names the directory.
    """
    if backend is not None:
        desc = backend.describe()
        who = f"{desc.get('backend') or 'backend'}-{desc.get('mode')}" if desc.get("mode") else str(desc.get("model") or desc.get("backend"))
    else:
        who = f"reference-{spec.reference_mode}" if spec.uses_reference else spec.model
    return Path("runs") / f"{_slug(who)}-{_slug(split_name)}"


_T = TypeVar("_T")


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from synchronous code.

    Also when an event loop is running already (a Jupyter notebook): then the coroutine runs on a
    fresh loop in a worker thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="studybench-eval") as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class EvalPlan:
    """An evaluation ready to run: everything loaded and checked, nothing requested yet.

    Attributes:
        spec: what was asked.
        run_dir: the run directory (created or resumed).
        dataset: the test set.
        scope: the selected turns.
        artefacts: the method artefacts.
        manifest: the manifest this invocation writes.
        previous: the run directory's manifest before this invocation (``None``: a new run).
        backend: the chat backend (``None`` with ``only_verify``).
        judge: the LLM judge (``None`` unless ``rule+llm`` with a judge given now).
        guidance: (sub-problems of the selection with hints, guidance keys matching no sub-problem).
        notes: things the user should know (e.g. a judge ignored in ``rule`` mode).
        pricing: the prices (``spec.pricing``, else the run directory's recorded ones), for the
            report's cost and ``spec.max_cost``.
    """

    spec: EvalSpec
    run_dir: Path
    dataset: Dataset
    scope: RunScope
    artefacts: Artefacts
    manifest: Manifest
    previous: Manifest | None
    backend: ChatBackend | None
    judge: LLMJudge | None
    guidance: tuple[int, list[GuidanceKey]] | None = None
    notes: list[str] = field(default_factory=list)
    pricing: Pricing | None = None

    @property
    def resuming(self) -> bool:
        """Whether the run directory already held this run."""
        return self.previous is not None

    @property
    def scope_changed(self) -> bool:
        """Whether this invocation selects other parents, k or seeds than the previous one."""
        return self.previous is not None and self.previous.scope() != self.manifest.scope()

    def open_store(self) -> RunStore:
        """Write the manifest and return the run directory's store, for running passes by hand.

        Hold :meth:`~studybench.store.RunStore.lock` around them, as :func:`run_plan` does, to keep
        other writers out.

        Returns:
            The :class:`~studybench.store.RunStore` (close it when done).

        Raises:
            OSError: the run directory cannot be written.
        """
        store = RunStore(self.run_dir)
        write_artefacts(self.run_dir, self.artefacts)  # before the manifest that names them
        store.write_manifest(self.manifest)
        return store


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


def _load(spec: EvalSpec) -> Dataset:
    if spec.dataset is not None:
        return spec.dataset
    if spec.data_dir is not None and not Path(spec.data_dir).is_dir():
        # an explicit directory is never replaced by $STUDYBENCH_DATA or the cache
        raise EvalError(f"data_dir: {spec.data_dir} is not a directory", "data_dir")
    try:
        path = resolve_split(spec.split, spec.data_dir)
        return load_dataset(path, name=spec.split if spec.split in ("application", "transfer") else None)
    except DatasetError as e:
        raise EvalError(str(e), "split") from None


def _verifier(spec: EvalSpec, judge: LLMJudge | None, previous: Manifest | None) -> tuple[str, dict[str, Any] | None]:
    """The verifier mode and active judge description.

    A judge given now, else the run's previous judge (unless ``rule`` is asked for), else the rule
    verifier alone.
    """
    if judge is not None:
        return "rule+llm", judge.describe()
    if spec.verifier_mode == "rule":
        return "rule", None
    old = previous.active_judge if previous is not None else None
    if old is not None:
        return "rule+llm", old  # keep the run's judge; its verdicts stay in the report
    if spec.verifier_mode == "rule+llm":
        raise EvalError("verifier_mode: rule+llm needs a judge (--judge-model and --judge-base-url)", "verifier_mode")
    return "rule", None


def prepare_eval(spec: EvalSpec, out_dir: Path | str | None = None, *, backend: ChatBackend | None = None) -> EvalPlan:
    """Load and check everything an evaluation needs, without making a request (docs/protocol.md 2-3).

    Args:
        spec: the evaluation.
        out_dir: the run directory (default :func:`default_run_dir`). An existing run there is
            resumed if it is the same run (:meth:`studybench.store.Manifest.resume_conflicts`).
        backend: a chat backend to use instead of the one ``spec`` describes (e.g. your own).

    Returns:
        The plan; :func:`run_plan` runs it.

    Raises:
        EvalError: an unusable setting, test set, artefact or judge, guidance entries matching no
            sub-problem (unless ``spec.ignore_unmatched_guidance``), a run directory holding a
            different run (the message says what differs and the fix), a non-empty directory that is
            not a run, ``only_verify`` without a run to verify, or a selection where no parent's prompt
            leaves a turn the completion floor within ``context_budget`` (a parent that does not fit
            is skipped, with a note: :mod:`studybench.evaluate.fit`).
        studybench.store.RunDirInUseError: another process is writing the run directory now.
    """
    if out_dir is not None and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise EvalError(f"--out {out_dir} exists and is not a directory", "out")
    ds = _load(spec)
    parents, errata = plan_selection(spec, ds)  # the selection, with the golds the errata setting scores
    try:
        art = load_artefacts(spec.system_prompt, spec.playbook, spec.guidance, spec.playbook_max_tokens)
    except ArtefactError as e:
        raise EvalError(str(e), "artefacts") from None
    coverage = guidance_coverage(art, ds, parents) if art.guidance else None
    if coverage is not None and coverage[1] and not spec.ignore_unmatched_guidance:
        split = ds.name if spec.dataset is not None else spec.split
        raise EvalError(
            f"guidance: {unmatched_guidance_message(coverage[1], art, ds)}. List the keys with "
            f"`studybench data ids --split {split}`, or run without these entries: "
            f"--ignore-unmatched-guidance (EvalSpec(ignore_unmatched_guidance=True))",
            "guidance",
        )
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(spec, ds.name, backend)
    store = RunStore(run_dir)
    previous: Manifest | None = None
    if store.exists():
        try:
            previous = store.read_manifest()
        except ValueError as e:
            raise EvalError(str(e), "out") from None
    elif spec.only_verify:
        raise EvalError(f"{run_dir}: no run to verify (no manifest.json); run without --only-verify first", "only_verify")
    elif run_dir.is_dir():
        other = sorted(e.name for e in run_dir.iterdir() if e.name != RunStore.LOCK and not e.name.startswith(".manifest.json.tmp"))
        if other:
            raise EvalError(f"out: {run_dir} is not empty and holds no run (no manifest.json; it has {other[0]}"
                            f"{f' and {len(other) - 1} more' if len(other) > 1 else ''}); give a new or empty directory", "out")
    store.check_unlocked()
    pricing = plan_pricing(spec.pricing, spec.max_cost, store, previous is not None)
    notes: list[str] = []
    if spec.only_verify:
        be, backend_desc = None, dict(previous.backend) if previous is not None else {}
    else:
        be = backend if backend is not None else spec.make_backend()
        backend_desc = be.describe()
    judge: LLMJudge | None = None
    if spec.judge is not None and spec.verifier_mode != "rule":
        try:
            judge = spec.judge.build()
            judge.backend.liveness_timeout = spec.liveness_timeout
        except LLMJudgeSpecError as e:
            raise EvalError(str(e), f"judge.{e.field}") from None
    elif spec.judge is not None:
        notes.append("--verifier-mode rule never calls an LLM; --judge-model is ignored")
    if be is not None:
        notes += check_fit(be, parents, art)  # parents that do not fit are skipped; none fitting is refused
    mode, judge_desc = _verifier(spec, judge, previous)
    try:
        manifest = _manifest(spec, ds, parents, backend_desc, art, mode, judge_desc, _secrets(spec, be, judge), errata.describe(parents))
    except ValidationError as e:  # e.g. k x seeds x sub-problems too large
        msg = str(e.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")
        raise EvalError(f"k: the run is too large or malformed ({msg})", "k") from None
    if previous is not None:
        refusal = resume_refusal(run_dir, previous, manifest, spec.preset)
        if refusal:
            raise EvalError(refusal, "out")
        manifest.created = previous.created or manifest.created
        manifest.labels, changed = merge_labels(previous.labels, manifest.labels)
        if changed:
            notes.append(f"labels merged into the run's (later wins): {'; '.join(changed)}")
    return EvalPlan(spec, run_dir, ds, RunScope(ds.name, parents, spec.k, list(spec.seeds)), art, manifest,
                    previous, be, judge, coverage, notes, pricing)


def _secrets(spec: EvalSpec, backend: Any, judge: LLMJudge | None) -> tuple[str, ...]:
    """Every configured secret of this invocation.

    The keys of the backend and judge (and of the environment variables named for them) and
    credentials inside their URLs.
    """
    own = getattr(backend, "secrets", ())
    found: list[str] = [*(own if isinstance(own, (tuple, list)) else ()), *url_secrets(spec.base_url)]
    names = [spec.api_key_env, "OPENAI_API_KEY"]
    if judge is not None:
        found += judge.backend.secrets
    if spec.judge is not None:
        found += url_secrets(spec.judge.base_url)
        names.append(spec.judge.api_key_env)
    return known_secrets([*found, *env_secrets(names)])


def _manifest(spec: EvalSpec, ds: Dataset, parents: list[Any], backend_desc: dict[str, Any], art: Artefacts,
              mode: str, judge_desc: dict[str, Any] | None, secrets: tuple[str, ...] = (), errata: Any = None) -> Manifest:
    return Manifest(
        studybench_version=__version__,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        split=SplitInfo(name=ds.name, path=str(ds.path.resolve()) if ds.path.exists() else str(ds.path),
                        sha256=ds.sha256, parents=len(ds), sub_problems=ds.n_sub_problems),
        selection=selection_info(spec, parents),
        k=spec.k,
        seeds=list(spec.seeds),
        backend=backend_desc,
        artefacts={**art.describe(), "paths": artefact_paths(spec.system_prompt, spec.playbook, spec.guidance),
                   **({"stored": refs} if (refs := stored_artefact_refs(art)) else {})},
        verifier=VerifierInfo(**{**rule_settings(spec.verify_timeout), "mode": mode, "judge": judge_desc}),
        parents=parents_index(parents),
        command=redact_command([Path(sys.argv[0]).name, *sys.argv[1:]], secrets),
        labels=dict(spec.labels), errata=errata,
    )


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


async def _close(*things: Any) -> None:
    for thing in things:
        if thing is not None:
            try:
                await thing.aclose()
            except Exception:  # noqa: BLE001 - closing must not mask the real outcome
                pass


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
            :class:`~studybench.evaluate.ray_judge.RayVerifier`); it must judge with ``spec.verify_timeout``,
            and the caller closes it. Its ``chunk`` attribute, when it has one, is the number of turns
            sent to it at once (default 512).

    Returns:
        The counts of each pass and the report (see :class:`EvalResult`). Turns that failed after
        retries are recorded, count as incorrect, and are retried by the next run of the same plan.

    Raises:
        EvalError: an endpoint check failed, or the run directory now holds another run.
        EndpointStoppedError: the endpoint stopped answering mid-run (``spec.max_consecutive_failures``
            turns in a row could not reach it); what was done is saved, verified and reported as incomplete.
        BudgetStoppedError: ``spec.max_total_tokens`` or ``spec.max_cost`` was reached; likewise.
        studybench.store.RunDirInUseError: another process is writing the run directory (it is
            locked for the whole run: :meth:`studybench.store.RunStore.lock`).
        studybench.llm_judge.LLMJudgeConfigError: the judge endpoint refuses every request.
        OSError: a file of the run directory cannot be written (``e.filename`` names it; e.g. a full
            disk); what was written before is kept, and running again resumes.
    """
    from studybench.verify import Verifier

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
                if spec.pricing is not None and plan.pricing is not None:  # given now: later reports use it
                    record_pricing(store, plan.pricing)
                # one budget for the model's and the LLM judge's requests, from what the run already spent
                budget = run_budget(store, plan.manifest.backend.get("model"), plan.pricing, spec.max_cost, spec.max_total_tokens)
                if not spec.only_verify:
                    assert plan.backend is not None
                    result.generation = run_sync(generate_turns(plan.scope, store, plan.backend, plan.artefacts,
                                                            concurrency=spec.concurrency, progress=progress,
                                                            on_error=on_turn_error, budget=budget,
                                                            max_consecutive_failures=spec.max_consecutive_failures))
                stop = stop_error(result)
                if spec.only_generate:
                    if stop is not None:
                        raise stop
                    return result
                with (nullcontext(rule_verifier) if rule_verifier is not None
                      else Verifier(workers=spec.verify_workers, timeout=spec.verify_timeout)) as verifier:
                    result.rule = add_rule_verdicts(plan.scope, store, verifier, rule_settings(spec.verify_timeout),
                                                    progress=progress, retry_timeouts=spec.retry_timeouts,
                                                    chunk=getattr(verifier, "chunk", 512))
                if plan.judge is not None and stop is None:
                    judge = plan.judge
                    judge.budget = budget

                    async def llm() -> LLMStats:
                        nonlocal judge_open
                        try:
                            return await add_llm_verdicts_to_scope(plan.scope, store, judge, progress=progress)
                        finally:
                            judge_open = False
                            await judge.aclose()

                    try:
                        result.llm = run_sync(llm())
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
        run_sync(_close(plan.backend, plan.judge if judge_open else None))
    return result


def _check_still_resumable(plan: EvalPlan) -> None:
    """Refuse to run when the run directory changed since :func:`prepare_eval` (another writer came first)."""
    store = RunStore(plan.run_dir)
    if not store.exists():
        return
    try:
        current = store.check_files(*(() if plan.spec.pricing else (PRICING_FILE,)))  # all readable before any write
    except ValueError as e:
        raise EvalError(str(e), "out") from None
    if plan.previous is not None and current.to_json() == plan.previous.to_json():
        return
    refusal = resume_refusal(plan.run_dir, current, plan.manifest, plan.spec.preset)
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
    return run_plan(prepare_eval(spec, out_dir, backend=backend), progress=progress, on_turn_error=on_turn_error)


def run_dataset(manifest: Manifest, manifest_path: Path, data_dir: Path | None = None, split_path: Path | None = None,
                dataset: Dataset | None = None) -> Dataset:
    """The test set a run was made on, found by the manifest's path or split name and checked by sha256.

    Args:
        manifest: the run's manifest.
        manifest_path: its file, for messages.
        data_dir: where the official files are (for a run on ``application`` / ``transfer``).
        split_path: the test-set file, when it is no longer where the manifest says.
        dataset: the test set itself, checked like a file.

    Raises:
        EvalError: no candidate file holds the run's test set (the message lists what was tried), a
            candidate is not a valid test set, or ``data_dir`` is not a directory.
    """
    name, want = manifest.split.name, manifest.split.sha256
    if data_dir is not None and dataset is None and split_path is None and not Path(data_dir).is_dir():
        raise EvalError(f"data_dir: {data_dir} is not a directory", "data_dir")
    if dataset is not None:
        if want and dataset.sha256 != want:
            raise EvalError(f"{manifest_path}: the dataset given is not the run's test set (sha256 differs)", "dataset")
        return dataset
    candidates: list[Path] = []
    if split_path is not None:
        candidates.append(split_path)
    else:
        if manifest.split.path:
            candidates.append(Path(manifest.split.path))
        if name in ("application", "transfer"):
            try:
                candidates.append(resolve_split(name, data_dir))
            except (DatasetError, ValueError):
                pass
    tried = []
    for path in candidates:
        if not path.is_file():
            tried.append(f"{path} (missing)")
            continue
        try:
            ds = load_dataset(path, name=name if name in ("application", "transfer") else None)
        except DatasetError as e:
            raise EvalError(str(e), "split") from None
        if want and ds.sha256 != want:
            tried.append(f"{path} (content differs from the run's test set)")
            continue
        return ds
    raise EvalError(f"{manifest_path}: cannot find the test set this run was made on ({'; '.join(tried) or 'no path recorded'}); "
                    "pass --split PATH or --data-dir DIR", "split")


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
        budget: a :class:`~studybench.costs.BudgetTracker` the judge charges; once spent, no new
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
    from studybench.verify import Verifier

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
        ds = run_dataset(man, store.manifest_path, data_dir, split_path, dataset)
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
                with Verifier(workers=verify_workers, timeout=rule_timeout) as verifier:
                    rule = add_rule_verdicts(scope, store, verifier, rule_settings(rule_timeout), progress=progress,
                                             retry_timeouts=retry_timeouts)

                async def llm() -> LLMStats:
                    nonlocal judge_open
                    try:
                        return await add_llm_verdicts_to_scope(scope, store, llm_judge, judge_rule_accepts=judge_rule_accepts,
                                                               refresh=refresh, progress=progress)
                    finally:
                        judge_open = False
                        await llm_judge.aclose()

                llm_stats = run_sync(llm())
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
            run_sync(_close(llm_judge))
    return JudgeRunResult(store.root, llm_judge.describe(), rule, llm_stats, rep, notes, warnings)
