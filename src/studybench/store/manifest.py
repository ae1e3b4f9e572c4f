"""The run manifest (``manifest.json``): a typed model, and the rules for resuming a run.

A manifest records what a run directory holds: the test set (name, path, sha256), the selection
(slice, limit, parent ids, exclusions, sample; :mod:`studybench.evaluate.selection`) and the errata
setting, k and the seeds, the backend with its sampling parameters, the method artefacts'
digests, the verifier's mode and settings (with the LLM judge of ``rule+llm`` runs), a compact index
of the selected parents (so that reports need only the run directory) and the command line.

**Resuming.** Re-running into a directory is safe only when the new invocation would produce the same
turns. :meth:`Manifest.resume_conflicts` lists what must match and differs: every backend setting
except the operational ones in :data:`OPERATIONAL_BACKEND_KEYS` (URL, concurrency, retries,
timeouts, backoff, key variable, completion floor, liveness probe, server context, HTTP client), the test-set file's sha256, and each artefact's
digest (an old manifest's ``max_tokens`` + ``budget_includes_prompt`` is compared as today's
``max_tokens`` / ``context_budget``). The
selection (parents, k, seeds) may change: rows outside it are kept, and the manifest and report
describe the latest invocation.

**Labels** (``labels``) are free ``key: value`` strings describing the run (method, layer, base
model, ...), set with ``studybench eval --label`` or :func:`studybench.store.set_labels`. They are not
part of what must match to resume: a resumed invocation's labels are merged into the run's (later
wins).

**Environment** (``environment``, ``later_environments``): the Python, platform and package versions,
the model server's version and the data's commit of the invocations that wrote the run (see
:mod:`studybench.store.provenance`). Not part of what must match to resume. **Reproduction**
(``reproduces``): set by ``studybench reproduce`` on the new run: which run it re-runs and what was
overridden.

**Configuration** (``config``): the latest invocation's :class:`~studybench.evaluate.EvalSpec` in its
nested form (data, generation, budgets, verification, artefacts), secrets redacted. The fields above
stay as they were (a manifest's flat record of the run), so readers of older manifests need no
``config``; it is never part of what must match to resume.

Manifests written by older versions load unchanged and resume (unknown fields are kept; no
environment or configuration: ``null``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from studybench import __version__
from studybench.records import Parent, label_map

__all__ = [
    "current_budgets",
    "OPERATIONAL_BACKEND_KEYS",
    "VERIFIER_MODES",
    "Manifest",
    "ParentIndex",
    "SelectionInfo",
    "SplitInfo",
    "SubIndex",
    "VerifierInfo",
    "check_labels",
    "merge_labels",
    "parents_index",
    "rule_settings",
]

VERIFIER_MODES = ("rule", "rule+llm")
"""``rule``: the rule verifier only (reward-safe, never calls an LLM); ``rule+llm``: rule rejections
also go to an LLM judge (the paper's leaderboard numbers)."""

OPERATIONAL_BACKEND_KEYS = frozenset(
    {"base_url", "concurrency", "request_timeout", "max_retries", "backoff_initial", "backoff_max", "api_key_env",
     "min_completion_tokens", "liveness_timeout", "server_context", "http_client"}
)
"""Backend settings that may change between invocations of one run: they do not change answers.
``server_context`` (the server's context length and the cap it gave each turn's prompt + completion,
recorded by the invocation that read it) is here too: a run resumed on a server with another context
keeps its finished turns, and the manifest says what the latest invocation planned within."""

MAX_LABELS = 64
"""The most labels a run may carry."""

MAX_LABEL_KEY = 64
"""The longest label key (characters)."""

MAX_LABEL_VALUE = 500
"""The longest label value (characters)."""

MAX_LATER_ENVIRONMENTS = 100
"""The most later-invocation environments a manifest keeps (the oldest are dropped first)."""

MAX_CELLS = 50_000_000
"""Upper bound on k x seeds x sub-problems of a manifest (guards reports against hostile files)."""


def check_labels(labels: Any) -> dict[str, str]:
    """Validate run labels: string keys and values, both printable and bounded.

    A key is non-empty, has no ``=`` and no surrounding whitespace, and is at most
    :data:`MAX_LABEL_KEY` characters; a value is non-empty and at most :data:`MAX_LABEL_VALUE`
    characters; there are at most :data:`MAX_LABELS` labels. Printable means no control characters
    (no newline, tab or escape sequences).

    Args:
        labels: the labels, a mapping of key to value.

    Returns:
        The labels as a plain ``dict`` (same order).

    Raises:
        ValueError: the first offending label, named (e.g. ``label 'a=b': a key must not contain '='``).
    """
    if not isinstance(labels, dict):
        raise ValueError("labels must be a mapping of key to value")
    if len(labels) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(labels)}")
    out: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"label {key!r}: keys and values must be strings, got {type(value).__name__} {value!r}")
        if not key or not key.strip():
            raise ValueError("a label key must not be empty")
        problem = None
        if "=" in key:
            problem = "a key must not contain '='"
        elif key != key.strip():
            problem = "a key must not start or end with whitespace"
        elif len(key) > MAX_LABEL_KEY:
            problem = f"a key is at most {MAX_LABEL_KEY} characters, got {len(key)}"
        elif not key.isprintable():
            problem = "a key must be printable (no control characters)"
        elif not value:
            problem = "the value is empty"
        elif len(value) > MAX_LABEL_VALUE:
            problem = f"a value is at most {MAX_LABEL_VALUE} characters, got {len(value)}"
        elif not value.isprintable():
            problem = "the value must be printable (no newlines or control characters)"
        if problem is not None:
            raise ValueError(f"label {key[:MAX_LABEL_KEY]!r}: {problem}")
        out[key] = value
    return out


def merge_labels(old: dict[str, str], new: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Merge a new invocation's labels into a run's (later wins).

    Args:
        old: the run's labels.
        new: the labels given now.

    Returns:
        The merged labels, and one line per label that changed (``"method: 'GEPA' -> 'ACE'"``,
        ``"base: 'Qwen3-8B' (new)"``); no lines when ``new`` changes nothing.
    """
    changes = [f"{k}: {old[k]!r} -> {v!r}" if k in old else f"{k}: {v!r} (new)" for k, v in new.items() if old.get(k) != v]
    return {**old, **new}, changes


def rule_settings(timeout: float) -> dict[str, Any]:
    """The rule verifier's settings as stored with every rule verdict (a change triggers re-judging).

    Args:
        timeout: hard wall-clock seconds per symbolic verification.

    Returns:
        ``{"mode": "rule", "version": <studybench version>, "timeout": timeout}``.
    """
    return {"mode": "rule", "version": __version__, "timeout": timeout}


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class SplitInfo(_Model):
    """The test set a run was made on."""

    name: str
    path: str | None = None
    sha256: str | None = None
    parents: int | None = None
    sub_problems: int | None = None


class SelectionInfo(_Model):
    """Which parents of the test set the latest invocation selected."""

    slice: str | None = None
    limit: int | None = None
    parents: int | None = None


class SubIndex(_Model):
    """One sub-problem of a parent in the manifest's index."""

    id: str
    answer_type: str
    type_sequence: str = ""


class ParentIndex(_Model):
    """One selected parent in the manifest's index (enough for reports without the test-set file)."""

    uid: str
    source: str = ""
    year: str = ""
    source_problem_id: str = ""
    problem_type: str = "(none)"
    problem_type_raw: str = ""
    subs: list[SubIndex] = Field(min_length=1)


class VerifierInfo(_Model):
    """The verifier of a run: ``mode`` and the rule settings, plus the active LLM judge in ``rule+llm``."""

    mode: str = "rule"
    version: str | None = None
    timeout: float | None = Field(None, ge=1e-3, le=86_400.0, allow_inf_nan=False)
    judge: dict[str, Any] | None = None

    @property
    def active_judge(self) -> dict[str, Any] | None:
        """The LLM judge configuration the leaderboard report uses (``rule+llm`` only), or ``None``."""
        if self.mode != "rule+llm" or not isinstance(self.judge, dict):
            return None
        return self.judge if isinstance(self.judge.get("judge_id"), str) else None


class Manifest(_Model):
    """``manifest.json`` of a run directory (see the module docstring).

    Attributes:
        studybench_version: the package version that wrote it.
        created: ISO time of the first invocation.
        split: the test set.
        selection: the latest invocation's selection.
        k: attempts per parent and seed.
        seeds: the run seeds.
        backend: the backend's description (``backend``, ``model``, sampling, transport settings; no secrets).
        artefacts: which method artefacts were used, with their sha256 digests.
        verifier: mode, rule settings and the active LLM judge.
        parents: the index of the selected parents.
        command: the command line of the latest invocation (secrets redacted).
        labels: free ``key: value`` strings describing the run (:func:`check_labels`); not part of
            :meth:`resume_conflicts`.
        environment: the first invocation's environment (:mod:`studybench.store.provenance`;
            ``None``: not recorded).
        later_environments: environments of later invocations that differed from the one before.
        reproduces: for a run made by ``studybench reproduce``: the original run, its creation time
            and the overrides given (``None`` otherwise).
        errata: the latest invocation's errata setting (:mod:`studybench.errata`): ``{"mode":
            "official" | "apply" | "exclude", "digest", "items": [{"id", "parent", "sub_id", "kind"}],
            "dropped": {uid: why}}``; ``None`` in runs made before errata were recorded (they scored
            the official golds). A scoring setting like the verifier's: it may change between
            invocations (the rule pass verifies the errata items again), so it is not part of
            :meth:`resume_conflicts`.
        config: the latest invocation's configuration in its nested form, part by part (``data``,
            ``generation``, ``budgets``, ``verification``, ``artefacts``, and the flags ``only_generate``,
            ``only_verify``, ``labels``: :meth:`studybench.evaluate.EvalSpec.to_record`; secrets
            redacted). A record of what was asked, like ``command``: never part of
            :meth:`resume_conflicts`. ``None`` in manifests written before it was recorded (their
            settings are the fields above, which every manifest keeps).
    """

    studybench_version: str | None = None
    created: str | None = None
    split: SplitInfo
    selection: SelectionInfo | None = None
    k: int = Field(ge=1, le=100_000)
    seeds: list[int] = Field(min_length=1, max_length=10_000)
    backend: dict[str, Any] = Field(default_factory=dict)
    artefacts: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierInfo | None = None
    parents: list[ParentIndex] = Field(min_length=1)
    command: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    environment: dict[str, Any] | None = None
    later_environments: list[dict[str, Any]] = Field(default_factory=list)
    reproduces: dict[str, Any] | None = None
    errata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None

    @field_validator("environment", "reproduces", "errata", "config", mode="before")
    @classmethod
    def _object_or_none(cls, v: Any) -> Any:
        return v if isinstance(v, dict) else None  # a hand-edited or foreign value is not an error

    @field_validator("later_environments", mode="before")
    @classmethod
    def _environments(cls, v: Any) -> Any:
        return [e for e in v if isinstance(e, dict)][-MAX_LATER_ENVIRONMENTS:] if isinstance(v, list) else []

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> Any:
        return {} if v is None else check_labels(v)

    @field_validator("verifier", mode="before")
    @classmethod
    def _verifier_object(cls, v: Any) -> Any:
        return v if isinstance(v, (dict, VerifierInfo)) or v is None else {}

    @model_validator(mode="after")
    def _bounded(self) -> Manifest:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: a seed is listed twice")
        uids = [p.uid for p in self.parents]
        if len(set(uids)) != len(uids):
            raise ValueError(f"parents: {next(u for u in uids if uids.count(u) > 1)!r} is listed twice")
        for p in self.parents:
            ids = [s.id for s in p.subs]
            if len(set(ids)) != len(ids):
                raise ValueError(f"parents: {p.uid!r} lists a sub-problem twice")
        cells = self.k * len(self.seeds) * sum(len(p.subs) for p in self.parents)
        if cells > MAX_CELLS:
            raise ValueError(f"k x seeds x sub-problems = {cells:,} is implausibly large")
        return self

    @property
    def active_judge(self) -> dict[str, Any] | None:
        """The LLM judge the leaderboard report uses (see :attr:`VerifierInfo.active_judge`)."""
        return None if self.verifier is None else self.verifier.active_judge

    @property
    def n_turns(self) -> int:
        """Turns the latest selection covers: sub-problems x k x seeds."""
        return sum(len(p.subs) for p in self.parents) * self.k * len(self.seeds)

    @classmethod
    def parse(cls, obj: Any, source: Path | str = "manifest.json") -> Manifest:
        """Validate a manifest object.

        Args:
            obj: the decoded JSON.
            source: the file, for error messages.

        Raises:
            ValueError: ``SOURCE: field 'LOC': what is wrong`` for the first invalid field.
        """
        if not isinstance(obj, dict):
            raise ValueError(f"{source}: expected a JSON object")
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err.get("loc", ())) or "<manifest>"
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            raise ValueError(f"{source}: field '{loc}': {msg}") from None

    def to_json(self) -> dict[str, Any]:
        """The manifest as written to ``manifest.json``."""
        return self.model_dump(mode="json")

    def resume_conflicts(self, new: Manifest) -> list[str]:
        """What makes ``new`` a different run from this one (empty when resuming into it is safe).

        Args:
            new: the manifest the new invocation would write.

        Returns:
            One line per conflict, e.g. ``"backend.model: 'a' -> 'b'"``, ``"test-set file content
            changed"``, ``"artefact playbook changed"``.
        """
        diff: list[str] = []
        ob, nb = current_budgets(self.backend), current_budgets(new.backend)
        for key in sorted(set(ob) | set(nb)):
            if key not in OPERATIONAL_BACKEND_KEYS and ob.get(key) != nb.get(key):
                o, n = ob.get(key), nb.get(key)
                if isinstance(o, dict) and isinstance(n, dict):  # e.g. sampling: name the settings that differ
                    diff += [f"backend.{key}.{s}: {o.get(s)!r} -> {n.get(s)!r}" for s in sorted(set(o) | set(n)) if o.get(s) != n.get(s)]
                else:
                    diff.append(f"backend.{key}: {o!r} -> {n!r}")
        if self.split.sha256 != new.split.sha256:
            diff.append("test-set file content changed")
        od = self.artefacts.get("digests") or {}
        nd = new.artefacts.get("digests") or {}
        od = od if isinstance(od, dict) else {}
        nd = nd if isinstance(nd, dict) else {}
        for key in sorted(set(od) | set(nd)):
            if od.get(key) != nd.get(key):
                diff.append(f"artefact {key} changed")
        return diff

    def scope(self) -> tuple[int, int, list[int]]:
        """(parents, k, seeds) of the latest selection."""
        return len(self.parents), self.k, list(self.seeds)


def current_budgets(backend: dict[str, Any]) -> dict[str, Any]:
    """A backend description with its sampling in today's form of the two token budgets.

    Args:
        backend: ``Manifest.backend`` as recorded.

    Returns:
        The same description, its ``sampling`` rewritten when it is in the old form.

    Older manifests recorded ``max_tokens`` with ``budget_includes_prompt``: when true,
    ``max_tokens`` was the prompt + completion cap, today's ``context_budget``; when false, it was the
    completion budget, as ``max_tokens`` is today.
    """
    sampling = backend.get("sampling")
    if not isinstance(sampling, dict) or "budget_includes_prompt" not in sampling or "context_budget" in sampling:
        return backend
    old = dict(sampling)
    includes = old.pop("budget_includes_prompt")
    new: dict[str, Any] = {}
    for key, value in old.items():
        if key == "max_tokens":
            new["max_tokens"] = None if includes else value
            new["context_budget"] = value if includes else None
        else:
            new[key] = value
    new.setdefault("context_budget", None)
    return {**backend, "sampling": new}


def parents_index(parents: list[Parent]) -> list[ParentIndex]:
    """The manifest's index of the selected parents.

    Sub-discipline labels are normalised with :func:`studybench.records.label_map` over the
    selection (two spellings of one label, e.g. ``&`` vs ``and``, map to the most frequent one);
    the raw label is kept in ``problem_type_raw``.

    Args:
        parents: the selected parents, in order.

    Returns:
        One :class:`ParentIndex` per parent.
    """
    canon = label_map(p.problem_type for p in parents)
    return [
        ParentIndex(
            uid=p.uid,
            source=p.source,
            year=p.year,
            source_problem_id=p.source_problem_id,
            problem_type=canon.get(p.problem_type, "(none)"),
            problem_type_raw=p.problem_type,
            subs=[SubIndex(id=s.problem_id, answer_type=s.answer_type.value, type_sequence=s.type_sequence_str)
                  for s in p.subs()],
        )
        for p in parents
    ]
