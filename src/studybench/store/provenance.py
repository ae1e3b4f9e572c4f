"""Where a run came from: the software environment it was made in, and how two runs' manifests differ.

**The environment block.** Every ``studybench eval`` invocation records (:func:`collect_environment`)
the Python version and implementation, the platform, the versions of the packages that can change a
verdict or a request (:data:`VERDICT_PACKAGES`), the model server's own version when it reports one
(vLLM's ``GET /version``; :func:`server_version`) and the git commit of the test-set file's data
repository when known (:func:`data_commit`).

A run made in one invocation has one environment, ``Manifest.environment``. A resumed run keeps its
first environment there; a later invocation whose environment differs from the latest one recorded
(ignoring the time, and a server version or data commit it could not learn) is appended to
``Manifest.later_environments`` (at most :data:`studybench.store.manifest.MAX_LATER_ENVIRONMENTS`, the oldest dropped first).
:func:`latest_environment` is the one that last wrote the run: ``studybench report`` compares it with
the installed packages (:func:`version_mismatches`). A manifest written before environments were
recorded has ``environment: null``; its next invocation goes to ``later_environments``.

**Differences.** :func:`manifest_differences` lists the fields in which two manifests differ (test
set, selection, k, seeds, backend and sampling, artefact digests, verifier and judge, the latest
environment), as ``studybench compare`` and ``studybench reproduce`` show them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from studybench import __version__
from studybench.files import InputFileError, read_user_bytes
from studybench.store.manifest import MAX_LATER_ENVIRONMENTS, Manifest, current_budgets

__all__ = [
    "artefact_paths",
    "DATA_COMMIT_ENV",
    "VERDICT_PACKAGES",
    "collect_environment",
    "data_commit",
    "environment_differences",
    "installed_versions",
    "latest_environment",
    "manifest_differences",
    "merge_environment",
    "record_environment",
    "server_version",
    "version_mismatches",
]

VERDICT_PACKAGES = ("studybench", "sympy", "latex2sympy2_extended", "pint", "openai", "httpx",
                    "antlr4-python3-runtime", "pydantic", "mpmath")
"""Distributions whose version can change a verdict (the rule verifier's parsers and algebra) or a
request (the HTTP client stack, the manifest's validation)."""

DATA_COMMIT_ENV = "STUDYBENCH_DATA_COMMIT"
"""Environment variable naming the data's commit when the test-set file is not inside a git checkout."""

SERVER_PROBE_TIMEOUT = 2.0
"""Seconds the ``GET /version`` probe of the model server may take."""

_SHORT = re.compile(r"[\x20-\x7e]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_VOLATILE = ("recorded",)
_UNKNOWABLE = ("server_version", "data_commit")  # None in a later invocation: not learnt, not changed


def artefact_paths(system_prompt: Path | None = None, playbook: Path | None = None,
                   guidance: Path | None = None) -> dict[str, str]:
    """The absolute paths of the artefact files given, for ``Manifest.artefacts["paths"]`` (``studybench reproduce``).

    Args:
        system_prompt: the system-prompt file, if any.
        playbook: the playbook file, if any.
        guidance: the guidance file, if any.

    Returns:
        ``{artefact: absolute path}`` of those given (keys as in ``Manifest.artefacts["digests"]``).
    """
    given = {"system_prompt": system_prompt, "playbook": playbook, "guidance": guidance}
    return {k: str(Path(v).absolute()) for k, v in given.items() if v is not None}


def installed_versions() -> dict[str, str | None]:
    """The installed version of each of :data:`VERDICT_PACKAGES` (``None``: not installed).

    ``studybench`` is the running package's own ``__version__``.
    """
    out: dict[str, str | None] = {}
    for name in VERDICT_PACKAGES:
        if name == "studybench":
            out[name] = __version__
            continue
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _read(path: Path) -> str | None:
    try:  # a regular file only: a named pipe in a data directory's .git must not block
        return read_user_bytes(path, limit=16 << 20).decode("utf-8", errors="replace")[:4096].strip()
    except InputFileError:
        return None


def _resolve_ref(gitdir: Path, common: Path, ref: str) -> str | None:
    for base in (gitdir, common):
        value = _read(base / ref)
        if value is not None and _SHA.fullmatch(value):
            return value
    packed = _read(common / "packed-refs") if (common / "packed-refs").is_file() else None
    for line in (packed or "").splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _SHA.fullmatch(sha):
            return sha
    return None


def _head_commit(dotgit: Path) -> str | None:
    """The commit HEAD names in a checkout's ``.git`` (a directory, or a worktree's ``gitdir:`` file)."""
    gitdir = dotgit
    if dotgit.is_file():
        text = _read(dotgit) or ""
        if not text.startswith("gitdir:"):
            return None
        gitdir = (dotgit.parent / text.removeprefix("gitdir:").strip()).resolve()
    common_rel = _read(gitdir / "commondir") if (gitdir / "commondir").is_file() else None
    common = (gitdir / common_rel).resolve() if common_rel else gitdir
    head = _read(gitdir / "HEAD")
    if head is None:
        return None
    if _SHA.fullmatch(head):
        return head
    if head.startswith("ref:"):
        return _resolve_ref(gitdir, common, head.removeprefix("ref:").strip())
    return None


def _git_rev_parse(directory: Path) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        done = subprocess.run([git, "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and _SHA.fullmatch(out) else None


def data_commit(split_path: Path | str | None) -> str | None:
    """The git commit of the data a test-set file comes from, when known.

    ``$STUDYBENCH_DATA_COMMIT`` when set (a printable string of at most 100 characters); else the
    HEAD commit of the git checkout holding the file (the nearest ``.git`` above it, read without
    running git; ``git rev-parse HEAD`` with a 5 s timeout when the files cannot be read). The file may
    have uncommitted changes: the manifest's sha256 of the file is what identifies its content.

    Args:
        split_path: the test-set file (``None``: an in-memory test set).

    Returns:
        The commit, or ``None`` when unknown.
    """
    env = os.environ.get(DATA_COMMIT_ENV, "").strip()
    if env:
        return env if _SHORT.fullmatch(env) else None
    if split_path is None:
        return None
    try:
        if not Path(split_path).is_file():  # e.g. an in-memory test set's "<memory:NAME>"
            return None
        directory = Path(split_path).resolve().parent
    except (OSError, RuntimeError):
        return None
    for folder in [directory, *directory.parents][:64]:
        dotgit = folder / ".git"
        if dotgit.exists():
            return _head_commit(dotgit) or _git_rev_parse(folder)
    return None


def server_version(base_url: str | None, timeout: float = SERVER_PROBE_TIMEOUT) -> str | None:
    """The model server's version, asked once with ``GET <root>/version`` (vLLM answers ``{"version": ...}``).

    The root is ``base_url`` without a trailing ``/v1``, its query and any ``user:password@``. No API
    key is sent. Any failure (no such
    route, an error, a timeout, an answer not of that form) is ``None``: the probe never fails a run.

    Args:
        base_url: the OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``.
        timeout: seconds the probe may take.

    Returns:
        The reported version (printable, at most 100 characters), or ``None``.
    """
    if not base_url or not isinstance(base_url, str):
        return None
    root = base_url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    scheme, sep, rest = root.partition("://")
    host, slash, path = rest.partition("/")
    root = f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}".removesuffix("/v1").rstrip("/")  # no credentials
    try:
        import httpx

        r = httpx.get(f"{root}/version", timeout=timeout, follow_redirects=False)
        if r.status_code != 200 or len(r.content) > 4096:
            return None
        version = r.json().get("version")
    except Exception:  # noqa: BLE001 - the probe is best effort by design
        return None
    return version if isinstance(version, str) and _SHORT.fullmatch(version) else None


def collect_environment(split_path: Path | str | None = None, server: str | None = None) -> dict[str, Any]:
    """The environment block of this invocation (see the module docstring).

    Args:
        split_path: the test-set file (for :func:`data_commit`).
        server: the model server's reported version (:func:`server_version`), if any.

    Returns:
        ``{"recorded", "python", "python_implementation", "platform", "machine", "packages",
        "server_version", "data_commit"}``.
    """
    return {
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": installed_versions(),
        "server_version": server,
        "data_commit": data_commit(split_path),
    }


def latest_environment(manifest: Manifest) -> dict[str, Any] | None:
    """The environment of the invocation that last wrote the run (``None``: none recorded)."""
    later = [e for e in manifest.later_environments if isinstance(e, dict)]
    if later:
        return later[-1]
    return manifest.environment if isinstance(manifest.environment, dict) else None


def _comparable(env: dict[str, Any], against: dict[str, Any] | None) -> dict[str, Any]:
    out = {k: v for k, v in env.items() if k not in _VOLATILE}
    for key in _UNKNOWABLE:
        if out.get(key) is None and against is not None:
            out[key] = against.get(key)
    return out


def merge_environment(previous: Manifest | None, current: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(environment, later_environments)`` of a run after an invocation made in ``current``.

    Args:
        previous: the run's manifest before the invocation (``None``: a new run).
        current: this invocation's environment.

    Returns:
        A new run: ``(current, [])``. A resumed one: its first environment, and its later ones with
        ``current`` appended when it differs from the latest (see the module docstring).
    """
    if previous is None:
        return current, []
    first = previous.environment if isinstance(previous.environment, dict) else None
    later = [e for e in previous.later_environments if isinstance(e, dict)]
    latest = latest_environment(previous)
    if latest is None or _comparable(current, latest) != {k: v for k, v in latest.items() if k not in _VOLATILE}:
        later.append(current)
    return first, later[-MAX_LATER_ENVIRONMENTS:]


def record_environment(manifest: Manifest, previous: Manifest | None, *, base_url: str | None = None,
                       split_path: Path | str | None = None) -> Manifest:
    """``manifest`` with this invocation's environment recorded (asks the model server for its version).

    Args:
        manifest: the manifest the invocation writes.
        previous: the run's manifest before it (``None``: a new run).
        base_url: the model endpoint (``None``: no server, e.g. the reference backend).
        split_path: the test-set file.

    Returns:
        A copy with ``environment`` and ``later_environments`` set (:func:`merge_environment`).
    """
    current = collect_environment(split_path, server_version(base_url))
    first, later = merge_environment(previous, current)
    return manifest.model_copy(update={"environment": first, "later_environments": later})


def version_mismatches(manifest: Manifest, installed: dict[str, str | None] | None = None) -> list[tuple[str, Any, Any]]:
    """Packages of :data:`VERDICT_PACKAGES` whose installed version is not the one the run recorded.

    Args:
        manifest: the run's manifest (its :func:`latest_environment` is compared).
        installed: the installed versions (default :func:`installed_versions`).

    Returns:
        ``(package, recorded, installed)`` per differing package (empty when the run recorded no
        environment).
    """
    env = latest_environment(manifest)
    recorded = env.get("packages") if env is not None else None
    if not isinstance(recorded, dict):
        return []
    have = installed_versions() if installed is None else installed
    return [(name, recorded.get(name), have.get(name)) for name in VERDICT_PACKAGES
            if name in recorded and recorded.get(name) != have.get(name)]


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key in value:
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], out)
    else:
        out[prefix] = value


def environment_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``(field, a, b)`` for each field of two environment blocks that differs (the time excluded)."""
    fa: dict[str, Any] = {}
    fb: dict[str, Any] = {}
    _flatten("", {k: v for k, v in (a or {}).items() if k not in _VOLATILE}, fa)
    _flatten("", {k: v for k, v in (b or {}).items() if k not in _VOLATILE}, fb)
    return [(k, fa.get(k), fb.get(k)) for k in dict.fromkeys([*fa, *fb]) if fa.get(k) != fb.get(k)]


def _parents_id(m: Manifest) -> str:
    uids = [p.uid for p in m.parents]
    return f"{len(uids)} parents, ids {hashlib.sha256(chr(10).join(uids).encode()).hexdigest()[:12]}"


def _configuration(m: Manifest) -> dict[str, Any]:
    verifier = m.verifier.model_dump(mode="json") if m.verifier is not None else {}
    digests = m.artefacts.get("digests") if isinstance(m.artefacts.get("digests"), dict) else {}
    flat: dict[str, Any] = {}
    _flatten("", {
        "studybench_version": m.studybench_version,
        "split": {"name": m.split.name, "sha256": m.split.sha256, "path": m.split.path},
        "selection": m.selection.model_dump(mode="json") if m.selection is not None else {},
        "parents": _parents_id(m),
        "k": m.k,
        "seeds": list(m.seeds),
        "backend": current_budgets(m.backend),
        "artefacts": digests,
        "verifier": verifier,
    }, flat)
    env = latest_environment(m)
    _flatten("environment", {k: v for k, v in (env or {}).items() if k not in _VOLATILE}, flat)
    return flat


def manifest_differences(a: Manifest, b: Manifest) -> list[tuple[str, Any, Any]]:
    """The configuration and environment fields in which two runs' manifests differ.

    Compared: ``studybench_version``, the test set (name, sha256, path), the selection and the
    selected parents, k, seeds, every backend setting (sampling flattened, e.g.
    ``backend.sampling.temperature``), the artefact digests, the verifier (mode, rule version and
    timeout, the judge's settings) and the latest environment (e.g. ``environment.packages.sympy``).
    Not compared: times, command lines, labels, reproduction notes.

    Args:
        a: one manifest.
        b: the other.

    Returns:
        ``(field, value in a, value in b)`` per differing field, in a stable order.
    """
    fa, fb = _configuration(a), _configuration(b)
    return [(k, fa.get(k), fb.get(k)) for k in dict.fromkeys([*fa, *fb]) if fa.get(k) != fb.get(k)]
