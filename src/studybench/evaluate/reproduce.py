"""Re-run a finished run with the same configuration: ``studybench reproduce RUN_DIR --out NEW``.

:func:`reproduction_spec` rebuilds, from a run's manifest, the :class:`~studybench.evaluate.EvalSpec`
that ``studybench eval`` would have built: the same test-set file (its sha256 checked: a changed file
is refused unless ``allow_data_change``), the same selection (slice, parent ids, exclusions, sample,
limit) and errata setting, k and seeds, the same backend and model with the same sampling, the same artefact files (each checked against its
recorded sha256), and the same verifier (mode, rule timeout, the LLM judge with its prompt
template). API keys come from the environment variables the run named, as in ``eval``. A new
endpoint (``base_url``, ``model``, ``judge_base_url``) may be given; the overrides are recorded in
the new run's manifest (``reproduces``).

:func:`prepare_reproduction` then plans the run with :func:`~studybench.evaluate.prepare_eval` (the
same pipeline as ``eval``) and refuses when the plan's configuration is not the original's
(:meth:`~studybench.store.Manifest.resume_conflicts`, the selected parents, k, seeds, the verifier);
:func:`reproduce_run` runs it. ``studybench compare RUN_DIR NEW`` then shows the paired difference
and the fields of the two manifests that differ (:func:`studybench.store.manifest_differences`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studybench.costs import PRICING_FILE
from studybench.datasets import Dataset
from studybench.evaluate.judge_after import judge_spec_from_run
from studybench.evaluate.plan import EvalPlan, find_run_dataset, prepare_eval
from studybench.evaluate.run import EvalResult, run_plan
from studybench.evaluate.scope import ProgressFn
from studybench.evaluate.selection import selection_values
from studybench.evaluate.spec import EvalError, EvalSpec
from studybench.files import InputFileError, read_user_bytes
from studybench.models import ChatBackend, SamplingParams
from studybench.store import Manifest, RunStore, TurnKey, current_budgets, manifest_differences

__all__ = ["Reproduction", "ReproduceResult", "prepare_reproduction", "reproduce_run", "reproduction_spec"]

_ARTEFACT_FLAGS = {"system_prompt": "--system-prompt", "playbook": "--playbook", "guidance": "--guidance"}
_SAMPLING_FIELDS = {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "repetition_penalty", "max_tokens",
                    "context_budget"}
_JUDGE_FIELDS = ("api_key_env", "concurrency", "request_timeout", "max_retries", "parse_retries", "max_tokens")
_BACKEND_FIELDS = ("api_key_env", "concurrency", "request_timeout", "max_retries", "min_completion_tokens", "liveness_timeout")


@dataclass
class Reproduction:
    """What :func:`reproduction_spec` rebuilt from a run.

    Attributes:
        source: the original run directory.
        original: its manifest.
        spec: the evaluation that re-runs it.
        dataset: the test set (checked against the manifest's sha256).
        overrides: the settings given instead of the recorded ones (``base_url``, ``model``, ...).
        data_change: ``(recorded sha256, current sha256)`` when the test-set file changed and
            ``allow_data_change`` was given, else ``None``.
        notes: things the user should know.
    """

    source: Path
    original: Manifest
    spec: EvalSpec
    dataset: Dataset
    overrides: dict[str, Any] = field(default_factory=dict)
    data_change: tuple[str | None, str] | None = None
    notes: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """The new run's ``Manifest.reproduces`` entry."""
        return {
            "run_dir": str(self.source.absolute()),
            "created": self.original.created,
            "overrides": dict(self.overrides),
            "data_change": None if self.data_change is None else {"from": self.data_change[0], "to": self.data_change[1]},
        }


@dataclass
class ReproduceResult:
    """What :func:`reproduce_run` did.

    Attributes:
        reproduction: what was re-run.
        result: the evaluation's result (report, counts).
        differences: ``(field, original, new)`` per manifest field that differs
            (:func:`studybench.store.manifest_differences`).
    """

    reproduction: Reproduction
    result: EvalResult
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(read_user_bytes(path)).hexdigest()
    except InputFileError:
        return None


def _dataset(source: Path, man: Manifest, split_path: Path | None, allow_data_change: bool
             ) -> tuple[Dataset, tuple[str | None, str] | None]:
    ds = find_run_dataset(man, source, split_path=split_path, allow_changed=allow_data_change,
                          how="give --split PATH", or_else=", or pass --allow-data-change to re-run on the changed data")
    if man.split.sha256 is None or ds.sha256 == man.split.sha256:
        return ds, None
    return ds, (man.split.sha256, ds.sha256)


def _command_paths(command: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    flags = {v: k for k, v in _ARTEFACT_FLAGS.items()}
    for i, arg in enumerate(command):
        name, eq, value = arg.partition("=")
        if name in flags:
            if eq:
                out[flags[name]] = value
            elif i + 1 < len(command):
                out[flags[name]] = command[i + 1]
    return out


def _artefacts(source: Path, man: Manifest, given: dict[str, Path | None]) -> dict[str, Path]:
    digests = man.artefacts.get("digests") if isinstance(man.artefacts.get("digests"), dict) else {}
    recorded = man.artefacts.get("paths") if isinstance(man.artefacts.get("paths"), dict) else {}
    from_command = _command_paths(man.command)
    out: dict[str, Path] = {}
    for key, path in given.items():
        if path is not None and key not in digests:
            raise EvalError(f"{_ARTEFACT_FLAGS[key]}: the run {source} was made without {_ARTEFACT_FLAGS[key]}", key)
    for key, want in digests.items():
        flag = _ARTEFACT_FLAGS.get(key)
        if flag is None:
            raise EvalError(f"{source}: the run used a {key!r} artefact that this version cannot give", "artefacts")
        options = [Path(p) for p in (given.get(key), recorded.get(key), from_command.get(key)) if isinstance(p, (str, Path))]
        if given.get(key) is not None:
            options = options[:1]
        found = [(p, _sha256(p)) for p in dict.fromkeys(options)]
        match = next((p for p, digest in found if digest == want), None)
        if match is None:
            seen = "; ".join(f"{p} ({'missing' if d is None else 'content differs'})" for p, d in found)
            raise EvalError(f"{source}: the run used a {flag} file with sha256 {str(want)[:12]}, and "
                            f"{seen or 'its path is not recorded'}; give {flag} PATH with that file", key)
        out[key] = match
    return out


def _backend_values(source: Path, man: Manifest, base_url: str | None, model: str | None) -> dict[str, Any]:
    b = current_budgets(man.backend)
    kind = b.get("backend")
    if kind == "reference" and model in (None, "reference"):
        return {"model": "reference", "backend": "reference", "reference_mode": b.get("mode") or "gold"}
    if kind not in ("openai", "reference"):
        raise EvalError(f"{source}: the run was made with the {kind!r} backend, which reproduce cannot rebuild; "
                        "re-run it with `studybench eval` or from Python with the same backend", "backend")
    sampling = b.get("sampling") if isinstance(b.get("sampling"), dict) else {}
    known = set(SamplingParams().to_dict())
    unknown = sorted(k for k, v in sampling.items() if k not in known and v is not None)
    if unknown:
        raise EvalError(f"{source}: the run's sampling has settings this version does not know ({', '.join(unknown)}); "
                        "reproduce it with the studybench version that made it", "sampling")
    url = base_url or b.get("base_url")
    if not base_url and isinstance(url, str) and "***" in url:
        raise EvalError(f"{source}: the run's endpoint URL was recorded with its secrets removed ({url}); "
                        "give --base-url", "base_url")
    values: dict[str, Any] = {"backend": "openai", "model": model or b.get("model"), "base_url": url, "preset": "none",
                              **{k: sampling.get(k) for k in _SAMPLING_FIELDS}, "thinking": sampling.get("enable_thinking")}
    values.update({k: b[k] for k in _BACKEND_FIELDS if b.get(k) is not None})
    return values


def _verifier_values(man: Manifest, judge_base_url: str | None) -> dict[str, Any]:
    v = man.verifier
    mode = v.mode if v is not None and v.mode in ("rule", "rule+llm") else "rule"
    values: dict[str, Any] = {"verifier_mode": mode, "verify_timeout": (v.timeout if v is not None and v.timeout else 5.0)}
    if mode == "rule+llm":
        prev = man.active_judge or {}
        extra = {k: prev.get(k) for k in _JUDGE_FIELDS if prev.get(k) is not None}
        values["judge"] = judge_spec_from_run(man, **extra, base_url=judge_base_url)
    return values


def reproduction_spec(
    run_dir: Path | str,
    *,
    split_path: Path | None = None,
    allow_data_change: bool = False,
    base_url: str | None = None,
    model: str | None = None,
    judge_base_url: str | None = None,
    system_prompt: Path | None = None,
    playbook: Path | None = None,
    guidance: Path | None = None,
    concurrency: int | None = None,
    verify_workers: int | None = None,
    max_cost: float | None = None,
    max_total_tokens: int | None = None,
) -> Reproduction:
    """The evaluation that re-runs ``run_dir`` with its recorded configuration (see the module docstring).

    Args:
        run_dir: a run directory made by ``studybench eval``.
        split_path: the test-set file, when it is no longer where the manifest says (checked by sha256).
        allow_data_change: re-run on the test-set file as it is now when its sha256 differs.
        base_url: another endpoint for the model (e.g. a new server); recorded as an override.
        model: another model name at the endpoint; recorded as an override (a different run).
        judge_base_url: another endpoint for the LLM judge of a ``rule+llm`` run.
        system_prompt: the system-prompt file when it moved (checked by sha256); likewise below.
        playbook: the playbook file.
        guidance: the guidance file.
        concurrency: requests in flight (default: the run's).
        verify_workers: rule verifier worker processes.
        max_cost: stop the reproduction cleanly once it cost this much (the run's recorded prices).
        max_total_tokens: stop it cleanly once it spent this many prompt + completion tokens.

    Returns:
        A :class:`Reproduction`.

    Raises:
        EvalError: not a run directory or a bad manifest, the test-set file missing or changed (without
            ``allow_data_change``), an artefact file missing or changed, a backend or sampling setting
            this version cannot rebuild, or an invalid override.
    """
    source = Path(run_dir)
    try:
        man = RunStore(source).read_manifest()
    except (FileNotFoundError, ValueError) as e:
        raise EvalError(str(e), "run_dir") from None
    ds, data_change = _dataset(source, man, split_path, allow_data_change)
    arts = _artefacts(source, man, {"system_prompt": system_prompt, "playbook": playbook, "guidance": guidance})
    given = {"base_url": base_url, "model": model, "judge_base_url": judge_base_url, "concurrency": concurrency,
             "split": None if split_path is None else str(split_path)}
    overrides = {k: v for k, v in given.items() if v is not None}
    overrides.update({k: str(p) for k, p in {"system_prompt": system_prompt, "playbook": playbook,
                                             "guidance": guidance}.items() if p is not None})
    values: dict[str, Any] = {
        "split": str(ds.path), "dataset": ds, "k": man.k, "seeds": list(man.seeds), **selection_values(man),
        **_backend_values(source, man, base_url, model), **_verifier_values(man, judge_base_url),
        **arts, "ignore_unmatched_guidance": True, "playbook_max_tokens": 0, "labels": dict(man.labels),
    }
    if concurrency is not None:
        values["concurrency"] = concurrency
    if verify_workers is not None:
        values["verify_workers"] = verify_workers
    if os.path.lexists(source / PRICING_FILE):  # the run's recorded prices: both reports price alike (an unreadable record is refused)
        values["pricing"] = source / PRICING_FILE
    values.update({k: v for k, v in {"max_cost": max_cost, "max_total_tokens": max_total_tokens}.items() if v is not None})
    try:
        spec = EvalSpec.create(**values)
    except EvalError as e:
        raise EvalError(f"{source}: cannot rebuild the run's configuration: {e}", e.field) from None
    notes = []
    if data_change is not None:
        notes.append(f"the test-set file changed since the run (sha256 {str(data_change[0])[:12]} -> "
                     f"{data_change[1][:12]}); re-running on the changed data (--allow-data-change)")
    return Reproduction(source, man, spec, ds, overrides, data_change, notes)


def _check_same(rep: Reproduction, plan: EvalPlan) -> None:
    """Refuse a plan whose configuration is not the original run's (beyond the overrides given)."""
    old, new = rep.original, plan.manifest
    expected = set()
    if "model" in rep.overrides:
        expected.add(f"backend.model: {old.backend.get('model')!r} -> {new.backend.get('model')!r}")
    if rep.data_change is not None:
        expected.add("test-set file content changed")
    problems = [c for c in old.resume_conflicts(new) if c not in expected]
    if (old.k, list(old.seeds)) != (new.k, list(new.seeds)):
        problems.append(f"k {old.k} / seeds {old.seeds} -> k {new.k} / seeds {new.seeds}")
    if rep.data_change is None and [p.uid for p in old.parents] != [p.uid for p in new.parents]:
        problems.append(f"the selection holds {len(new.parents)} parents, the run {len(old.parents)} (or other ones)")
    ov, nv = old.verifier, new.verifier
    if ov is not None and nv is not None:
        if (ov.mode, ov.timeout) != (nv.mode, nv.timeout):
            problems.append(f"verifier {ov.mode} (timeout {ov.timeout}) -> {nv.mode} (timeout {nv.timeout})")
        oj, nj = ov.active_judge, nv.active_judge
        if oj is not None and nj is not None and oj.get("template_digest") != nj.get("template_digest"):
            problems.append(f"the judge prompt {oj.get('template')} changed since the run (template digest differs)")
    if problems:
        raise EvalError(f"{rep.source}: the re-run would not have the run's configuration: {'; '.join(problems)}", "run_dir")


def prepare_reproduction(run_dir: Path | str, out: Path | str, *, backend: ChatBackend | None = None,
                         **options: Any) -> tuple[EvalPlan, Reproduction]:
    """Plan the re-run of ``run_dir`` into ``out`` with :func:`~studybench.evaluate.prepare_eval` (no request made).

    Args:
        run_dir: the original run directory.
        out: the new run directory (a new or empty directory; an interrupted reproduction there resumes).
        backend: a chat backend to use instead of the one rebuilt from the manifest.
        options: :func:`reproduction_spec`'s keyword arguments.

    Returns:
        The plan (its manifest records ``reproduces``) and the :class:`Reproduction`.

    Raises:
        EvalError: what :func:`reproduction_spec` and :func:`~studybench.evaluate.prepare_eval` raise,
            ``out`` being the run itself, or a plan whose configuration differs from the run's.
        studybench.store.RunDirInUseError: another process is writing ``out``.
    """
    source, target = Path(run_dir), Path(out)
    if target.exists() and source.exists() and target.resolve() == source.resolve():
        raise EvalError(f"--out {out}: give a new directory for the re-run, not the run itself", "out")
    rep = reproduction_spec(source, **options)
    plan = prepare_eval(rep.spec, target, backend=backend)
    _check_same(rep, plan)
    plan.manifest.reproduces = rep.record()
    plan.notes[:0] = rep.notes
    return plan, rep


def reproduce_run(
    run_dir: Path | str,
    out: Path | str,
    *,
    backend: ChatBackend | None = None,
    progress: ProgressFn | None = None,
    on_turn_error: Callable[[TurnKey, str], None] | None = None,
    **options: Any,
) -> ReproduceResult:
    """Re-run a run with its recorded configuration into a new run directory.

    Args:
        run_dir: the original run directory.
        out: the new run directory.
        backend: a chat backend to use instead of the one rebuilt from the manifest.
        progress: see :data:`~studybench.evaluate.scope.ProgressFn`.
        on_turn_error: called with (turn key, error) for each turn that failed after all retries.
        options: :func:`reproduction_spec`'s keyword arguments (``split_path``, ``allow_data_change``,
            ``base_url``, ``model``, ...).

    Returns:
        A :class:`ReproduceResult` (compare the runs with ``studybench compare RUN_DIR OUT``).

    Raises:
        EvalError: see :func:`prepare_reproduction` and :func:`~studybench.evaluate.run_plan`.
        EndpointStoppedError: the endpoint stopped answering (what was done is kept; call again to resume).
    """
    plan, rep = prepare_reproduction(run_dir, out, backend=backend, **options)
    result = run_plan(plan, progress=progress, on_turn_error=on_turn_error)
    new = RunStore(plan.run_dir).read_manifest()
    return ReproduceResult(rep, result, manifest_differences(rep.original, new))
