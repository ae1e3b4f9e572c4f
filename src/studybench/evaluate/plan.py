"""What will be run: :func:`prepare_eval` turns an :class:`~studybench.evaluate.EvalSpec` into an :class:`EvalPlan`.

Planning loads and checks everything an evaluation needs and makes no request: the test set
(:meth:`~studybench.evaluate.spec.DataSpec.load`), the selection and errata
(:mod:`~studybench.evaluate.selection`), the artefacts, the run directory (new, or the same run to
resume: :mod:`~studybench.evaluate.resume`), the prices (:func:`studybench.costs.open_budget`), the
backend and the judge, and the manifest the run will write (its ``config`` is the spec, part by part).

:func:`find_run_dataset` finds the test set of a run made before (by the manifest's path or split
name, checked by sha256): the LLM judge over a finished run, ``studybench reproduce`` and the HTML
report use it.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studybench import __version__
from studybench.costs import BudgetError, Pricing, open_budget
from studybench.datasets import DATA_ENV, Dataset, DatasetError, load_dataset, official_name, resolve_split
from studybench.evaluate.fit import check_fit
from studybench.evaluate.resume import resume_refusal
from studybench.evaluate.scope import RunScope
from studybench.evaluate.selection import plan_selection, selection_info
from studybench.evaluate.spec import EvalError, EvalSpec
from studybench.llm_judge import LLMJudge, LLMJudgeSpecError
from studybench.models import ChatBackend
from studybench.protocol import Artefacts, GuidanceKey, guidance_coverage, unmatched_guidance_message
from studybench.secrets import env_secrets, known_secrets, redact_command, redact_obj, url_secrets
from studybench.store import (
    Manifest,
    RunStore,
    SplitInfo,
    VerifierInfo,
    artefact_paths,
    merge_labels,
    parents_index,
    rule_settings,
    stored_artefact_refs,
    write_artefacts,
)

__all__ = ["EvalPlan", "default_run_dir", "find_run_dataset", "prepare_eval", "run_dataset"]


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
        gen = spec.generation
        who = f"reference-{gen.reference_mode}" if gen.uses_reference else gen.model
    return Path("runs") / f"{_slug(who)}-{_slug(split_name)}"


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
        pricing: the prices (``spec.budgets.pricing``, else the run directory's recorded ones), for the
            report's cost and ``spec.budgets.max_cost``.
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

        Hold :meth:`~studybench.store.RunStore.lock` around them, as :func:`~studybench.evaluate.run_plan`
        does, to keep other writers out.

        Returns:
            The :class:`~studybench.store.RunStore` (close it when done).

        Raises:
            OSError: the run directory cannot be written.
        """
        store = RunStore(self.run_dir)
        write_artefacts(self.run_dir, self.artefacts)  # before the manifest that names them
        store.write_manifest(self.manifest)
        return store


def _verifier(spec: EvalSpec, judge: LLMJudge | None, previous: Manifest | None) -> tuple[str, dict[str, Any] | None]:
    """The verifier mode and active judge description.

    A judge given now, else the run's previous judge (unless ``rule`` is asked for), else the rule
    verifier alone.
    """
    mode = spec.verification.verifier_mode
    if judge is not None:
        return "rule+llm", judge.describe()
    if mode == "rule":
        return "rule", None
    old = previous.active_judge if previous is not None else None
    if old is not None:
        return "rule+llm", old  # keep the run's judge; its verdicts stay in the report
    if mode == "rule+llm":
        raise EvalError("verifier_mode: rule+llm needs a judge (--judge-model and --judge-base-url)", "verifier_mode")
    return "rule", None


def _previous_run(run_dir: Path, only_verify: bool) -> tuple[RunStore, Manifest | None]:
    """The run directory's store and the run it holds (``None``: a new run); refuse what cannot be used."""
    store = RunStore(run_dir)
    if store.exists():
        try:
            return store, store.read_manifest()
        except ValueError as e:
            raise EvalError(str(e), "out") from None
    if only_verify:
        raise EvalError(f"{run_dir}: no run to verify (no manifest.json); run without --only-verify first", "only_verify")
    if run_dir.is_dir():
        other = sorted(e.name for e in run_dir.iterdir() if e.name != RunStore.LOCK and not e.name.startswith(".manifest.json.tmp"))
        if other:
            raise EvalError(f"out: {run_dir} is not empty and holds no run (no manifest.json; it has {other[0]}"
                            f"{f' and {len(other) - 1} more' if len(other) > 1 else ''}); give a new or empty directory", "out")
    return store, None


def _judge(spec: EvalSpec, notes: list[str]) -> LLMJudge | None:
    """The LLM judge asked for now (``None`` without one, or in ``rule`` mode, which is noted)."""
    ver = spec.verification
    if ver.judge is None:
        return None
    if ver.verifier_mode == "rule":
        notes.append("--verifier-mode rule never calls an LLM; --judge-model is ignored")
        return None
    try:
        judge = ver.judge.build()
    except LLMJudgeSpecError as e:
        raise EvalError(str(e), f"judge.{e.field}") from None
    judge.backend.liveness_timeout = spec.generation.liveness_timeout
    return judge


def prepare_eval(spec: EvalSpec, out_dir: Path | str | None = None, *, backend: ChatBackend | None = None) -> EvalPlan:
    """Load and check everything an evaluation needs, without making a request (docs/protocol.md 2-3).

    Args:
        spec: the evaluation.
        out_dir: the run directory (default :func:`default_run_dir`). An existing run there is
            resumed if it is the same run (:meth:`studybench.store.Manifest.resume_conflicts`).
        backend: a chat backend to use instead of the one ``spec`` describes (e.g. your own).

    Returns:
        The plan; :func:`~studybench.evaluate.run_plan` runs it.

    Raises:
        EvalError: an unusable setting, test set, artefact or judge, guidance entries matching no
            sub-problem (unless ``ignore_unmatched_guidance``), a run directory holding a
            different run (the message says what differs and the fix), a non-empty directory that is
            not a run, ``only_verify`` without a run to verify, or a selection where no parent's prompt
            leaves a turn the completion floor within ``context_budget`` (a parent that does not fit
            is skipped, with a note: :mod:`studybench.evaluate.fit`).
        studybench.store.RunDirInUseError: another process is writing the run directory now.
    """
    if out_dir is not None and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise EvalError(f"--out {out_dir} exists and is not a directory", "out")
    # first what the evaluation decides (run directory, backend, judge, selection, the resume check), then
    # what it reads from the layers below, once, in one place (_resolve: guidance, prices, secrets)
    data, arts = spec.data, spec.artefacts
    ds, art = data.load(), arts.load()
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(spec, ds.name, backend)
    store, previous = _previous_run(run_dir, spec.only_verify)
    store.check_unlocked()
    notes: list[str] = []
    if spec.only_verify:
        be, backend_desc = None, dict(previous.backend) if previous is not None else {}
    else:
        be = backend if backend is not None else spec.make_backend()
        backend_desc = be.describe()
    judge = _judge(spec, notes)
    mode, judge_desc = _verifier(spec, judge, previous)
    parents, errata = plan_selection(data, ds)  # the selection, with the golds the errata setting scores
    if be is not None:
        notes += check_fit(be, parents, art)  # parents that do not fit are skipped; none fitting is refused
    try:
        manifest = _manifest(spec, ds, parents, backend_desc, art, mode, judge_desc, errata.describe(parents))
    except ValidationError as e:  # e.g. k x seeds x sub-problems too large
        msg = str(e.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")
        raise EvalError(f"k: the run is too large or malformed ({msg})", "k") from None
    if previous is not None:
        refusal = resume_refusal(run_dir, previous, manifest, spec.generation.preset)
        if refusal:
            raise EvalError(refusal, "out")
        manifest.created = previous.created or manifest.created
        manifest.labels, changed = merge_labels(previous.labels, manifest.labels)
        if changed:
            notes.append(f"labels merged into the run's (later wins): {'; '.join(changed)}")
    coverage, pricing = _resolve(spec, manifest, ds, parents, art, run_dir if previous is not None else None, be, judge)
    return EvalPlan(spec, run_dir, ds, RunScope(ds.name, parents, data.k, list(data.seeds)), art, manifest,
                    previous, be, judge, coverage, notes, pricing)


def _resolve(spec: EvalSpec, manifest: Manifest, ds: Dataset, parents: list[Any], art: Artefacts, recorded: Path | None,
             backend: Any, judge: LLMJudge | None) -> tuple[tuple[int, list[GuidanceKey]] | None, Pricing | None]:
    """What the plan reads from the layers below, in one place.

    The guidance's coverage, the prices (``spec.budgets.pricing``, else those of ``recorded``, the run
    directory when it already holds this run) and the invocation's secrets: the manifest's ``command``
    and ``config`` are written here, redacted.

    Returns:
        (guidance coverage or ``None`` without guidance, prices or ``None``).

    Raises:
        EvalError: guidance entries matching no sub-problem (unless ``ignore_unmatched_guidance``), an
            unreadable or malformed pricing file, or a cost limit without prices.
    """
    data, arts = spec.data, spec.artefacts
    coverage = guidance_coverage(art, ds, parents) if art.guidance else None
    if coverage is not None and coverage[1] and not arts.ignore_unmatched_guidance:
        split = ds.name if data.dataset is not None else data.split
        raise EvalError(
            f"guidance: {unmatched_guidance_message(coverage[1], art, ds)}. List the keys with "
            f"`studybench data ids --split {split}`, or run without these entries: "
            f"--ignore-unmatched-guidance (EvalSpec(ignore_unmatched_guidance=True))",
            "guidance",
        )
    try:
        pricing = open_budget(spec.budgets, run_dir=recorded).pricing
    except BudgetError as e:
        raise EvalError(str(e) if e.field == "pricing" else f"{e.field}: {e}", e.field) from None
    gen, judge_spec = spec.generation, spec.verification.judge
    own = getattr(backend, "secrets", ())
    found: list[str] = [*(own if isinstance(own, (tuple, list)) else ()), *url_secrets(gen.base_url)]
    names = [gen.api_key_env, "OPENAI_API_KEY"]
    if judge is not None:
        found += judge.backend.secrets
    if judge_spec is not None:
        found += url_secrets(judge_spec.base_url)
        names.append(judge_spec.api_key_env)
    secrets = known_secrets([*found, *env_secrets(names)])
    manifest.command = redact_command([Path(sys.argv[0]).name, *sys.argv[1:]], secrets)
    manifest.config = redact_obj(spec.to_record(), secrets)
    return coverage, pricing


def _manifest(spec: EvalSpec, ds: Dataset, parents: list[Any], backend_desc: dict[str, Any], art: Artefacts,
              mode: str, judge_desc: dict[str, Any] | None, errata: Any = None) -> Manifest:
    """The manifest this invocation writes, without ``command`` and ``config`` (:func:`_resolve` adds them, redacted)."""
    data, arts = spec.data, spec.artefacts
    return Manifest(
        studybench_version=__version__,
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        split=SplitInfo(name=ds.name, path=str(ds.path.resolve()) if ds.path.exists() else str(ds.path),
                        sha256=ds.sha256, parents=len(ds), sub_problems=ds.n_sub_problems),
        selection=selection_info(data, parents),
        k=data.k,
        seeds=list(data.seeds),
        backend=backend_desc,
        artefacts={**art.describe(), "paths": artefact_paths(arts.system_prompt, arts.playbook, arts.guidance),
                   **({"stored": refs} if (refs := stored_artefact_refs(art)) else {})},
        verifier=VerifierInfo(**{**rule_settings(spec.verification.verify_timeout), "mode": mode, "judge": judge_desc}),
        parents=parents_index(parents),
        labels=dict(spec.labels), errata=errata,
    )


def find_run_dataset(
    manifest: Manifest,
    where: Path | str,
    *,
    data_dir: Path | None = None,
    split_path: Path | None = None,
    dataset: Dataset | None = None,
    allow_changed: bool = False,
    how: str = "pass --split PATH or --data-dir DIR",
    or_else: str = "",
) -> Dataset:
    """The test set a run was made on, found by the manifest's path or split name and checked by sha256.

    The candidates, in order: ``dataset``; else ``split_path``; else the path the manifest recorded
    (not an in-memory test set's), then, for an official split (:data:`~studybench.datasets.OFFICIAL_SPLITS`),
    the file :func:`~studybench.datasets.resolve_split` finds in ``data_dir``. The test set keeps the
    run's split name, so its turn keys are the run's.

    Args:
        manifest: the run's manifest.
        where: the run directory or manifest file, for messages.
        data_dir: where the official files are (default ``$STUDYBENCH_DATA``, then the fetch cache).
        split_path: the test-set file, when it is no longer where the manifest says.
        dataset: the test set itself, checked like a file.
        allow_changed: return a candidate file whose content differs from the run's (the caller
            compares ``result.sha256`` with ``manifest.split.sha256``); by default it is refused.
        how: the options that point to the file, for the messages.
        or_else: words ending the message on a changed file (e.g. the option that accepts it).

    Raises:
        EvalError: no candidate file holds the run's test set (the message lists what was tried), a
            candidate is not a valid test set, or ``data_dir`` is not a directory.
    """
    name, want = manifest.split.name, manifest.split.sha256
    if data_dir is not None and dataset is None and split_path is None and not Path(data_dir).is_dir():
        raise EvalError(f"data_dir: {data_dir} is not a directory", "data_dir")
    if dataset is not None:
        if want and dataset.sha256 != want and not allow_changed:
            raise EvalError(f"{where}: the dataset given is not the run's test set (sha256 differs)", "dataset")
        return dataset
    candidates: list[Path] = []
    if split_path is not None:
        candidates.append(Path(split_path))
    else:
        if manifest.split.path and not manifest.split.path.startswith("<memory"):
            candidates.append(Path(manifest.split.path))
        if official_name(name):
            try:
                candidates.append(resolve_split(name, data_dir))
            except (DatasetError, ValueError):
                pass
    existing = [p for p in dict.fromkeys(candidates) if p.is_file()]
    changed: Dataset | None = None
    for path in existing:
        try:
            ds = load_dataset(path, name=name)
        except DatasetError as e:
            raise EvalError(str(e), "split") from None
        if not want or ds.sha256 == want:
            return ds
        changed = changed or ds
    if changed is None:
        tried = ", ".join(f"{p} (missing)" for p in candidates) or "no file recorded (an in-memory test set?)"
        env = f" or set ${DATA_ENV}" if official_name(name) and "--data-dir" not in how else ""
        raise EvalError(f"{where}: cannot find the test set this run was made on ({tried}); {how}{env}", "split")
    if allow_changed:
        return changed
    raise EvalError(f"{where}: the test-set file {changed.path} changed since the run was made (content differs from "
                    f"the run's test set: sha256 {str(want)[:12]} -> {changed.sha256[:12]}); restore the file or {how} "
                    f"with a copy of the original{or_else}", "split")


def run_dataset(manifest: Manifest, manifest_path: Path, data_dir: Path | None = None, split_path: Path | None = None,
                dataset: Dataset | None = None) -> Dataset:
    """The older name of :func:`find_run_dataset` (positional arguments, as before).

    Raises:
        EvalError: see :func:`find_run_dataset`.
    """
    return find_run_dataset(manifest, manifest_path, data_dir=data_dir, split_path=split_path, dataset=dataset)
