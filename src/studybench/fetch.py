"""Download the official StudyBench files (``studybench data fetch``).

The official test sets and instruction layers live in the StudyBench GitHub repository
(github.com/thunlp/StudyBench; academic research use only). This module copies them into a local
data directory, by default the per-user cache that :func:`studybench.datasets.resolve_split`
searches:

===========================================================  ==================================
official path (under ``BASE/BRANCH/``)                        local path (under ``dest``)
===========================================================  ==================================
``eval/data/qwen3_8b_textbook_problem.json``                  ``application.json``
``eval/data/qwen3_8b_competition_problem.json``               ``transfer.json``
``train_data/verifiable_instr.json`` (``include_train``)      ``train/verifiable_instr.json``
``train_data/verifiable_instr_multi_subs.json`` (idem)        ``train/verifiable_instr_multi_subs.json``
``train_data/unverifiable_instr.json`` (idem)                 ``train/unverifiable_instr.json``
===========================================================  ==================================

Guarantees: every file is streamed to a temporary file in its destination directory and moved into
place with :func:`os.replace` only after *all* requested files downloaded and validated (test sets
must load with :func:`studybench.datasets.load_dataset`, instruction layers must be JSON lists of
objects), so a failed fetch leaves no new or half-written file behind. Transient failures
(connection errors, timeouts, HTTP 429 and 5xx) are retried with exponential back-off.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from studybench import __version__
from studybench.datasets import DatasetError, default_cache_dir, load_dataset
from studybench.files import MAX_DATA_BYTES, InputFileError, read_json
from studybench.secrets import redact_text, redact_url, url_secrets

__all__ = [
    "OFFICIAL_BASE",
    "OfficialFile",
    "FetchError",
    "TEST_FILES",
    "TRAIN_FILES",
    "fetch_official",
    "official_files",
]

OFFICIAL_BASE = "https://raw.githubusercontent.com/thunlp/StudyBench"
"""Raw-file root of the official repository; a file's URL is ``{base}/{branch}/{remote}``."""

MAX_BYTES = 1 << 30
"""Refuse downloads larger than this (1 GiB); the official files are a few MB."""

_CHUNK = 1 << 16


@dataclass(frozen=True)
class OfficialFile:
    """One official file: its path in the repository, its local path, and how to validate it."""

    remote: str
    local: str
    kind: str  # "test" (must load with load_dataset) or "train" (JSON list of objects)


TEST_FILES: tuple[OfficialFile, ...] = (
    OfficialFile("eval/data/qwen3_8b_textbook_problem.json", "application.json", "test"),
    OfficialFile("eval/data/qwen3_8b_competition_problem.json", "transfer.json", "test"),
)
"""The Application and Transfer sets."""

TRAIN_FILES: tuple[OfficialFile, ...] = (
    OfficialFile("train_data/verifiable_instr.json", "train/verifiable_instr.json", "train"),
    OfficialFile("train_data/verifiable_instr_multi_subs.json", "train/verifiable_instr_multi_subs.json", "train"),
    OfficialFile("train_data/unverifiable_instr.json", "train/unverifiable_instr.json", "train"),
)
"""The instruction layers (Instructions with Answer, single- and multi-turn; without Answer)."""


class FetchError(RuntimeError):
    """A download that failed or produced an unusable file.

    Attributes:
        url: the URL that failed.
        status: the HTTP status code, or None for connection errors and invalid content.
    """

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(redact_text(message, url_secrets(url)))  # never show credentials given in a URL
        self.url = redact_url(url)
        self.status = status


class _Transient(Exception):
    """An HTTP status worth retrying (429, 5xx)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".rstrip())
        self.status = status


def official_files(include_train: bool = False) -> list[OfficialFile]:
    """The files :func:`fetch_official` downloads, in order."""
    return [*TEST_FILES, *(TRAIN_FILES if include_train else ())]


def _url(base_url: str, branch: str, remote: str) -> str:
    return f"{base_url.rstrip('/')}/{branch.strip('/')}/{remote}"


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, (httpx.TransportError, _Transient))


def _download_once(client: httpx.Client, url: str, target: Path) -> Path:
    """Stream ``url`` into a new temporary file next to ``target``; return the temp path.

    Raises:
        _Transient: HTTP 429 / 5xx (retried by the caller).
        httpx.TransportError: connection problems (retried by the caller).
        FetchError: any other non-200 status, or a body over :data:`MAX_BYTES`.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, client.stream("GET", url) as resp:
            if resp.status_code == 429 or resp.status_code >= 500:
                raise _Transient(resp.status_code, resp.reason_phrase)
            if resp.status_code != 200:
                raise FetchError(
                    f"download failed: {url}: HTTP {resp.status_code} {resp.reason_phrase}".rstrip(),
                    url=url,
                    status=resp.status_code,
                )
            size = 0
            for chunk in resp.iter_bytes(_CHUNK):
                size += len(chunk)
                if size > MAX_BYTES:
                    raise FetchError(f"download failed: {url}: larger than {MAX_BYTES} bytes", url=url)
                out.write(chunk)
        return tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _download(client: httpx.Client, url: str, target: Path, retries: int, backoff: float) -> Path:
    retrying = Retrying(
        stop=stop_after_attempt(max(1, retries)),
        wait=wait_exponential(multiplier=backoff, max=max(backoff * 16, 0)),
        retry=retry_if_exception(_is_transient),
        reraise=False,
    )
    try:
        return retrying(_download_once, client, url, target)
    except RetryError as e:
        last = e.last_attempt.exception()
        n = e.last_attempt.attempt_number
        if isinstance(last, _Transient):
            raise FetchError(
                f"download failed: {url}: {last} (after {n} attempt{'s' if n > 1 else ''})",
                url=url,
                status=last.status,
            ) from None
        raise FetchError(
            f"download failed: {url}: {type(last).__name__}: {last or 'connection error'} "
            f"(after {n} attempt{'s' if n > 1 else ''})",
            url=url,
        ) from None


def _validate(tmp: Path, spec: OfficialFile, url: str) -> None:
    """Raise FetchError unless the downloaded file is usable."""
    if spec.kind == "test":
        try:
            load_dataset(tmp, name=Path(spec.local).stem)
        except DatasetError as e:
            msg = str(e).replace(str(tmp), spec.local)
            raise FetchError(f"{url}: the downloaded file is not a usable test set: {msg}", url=url) from None
        return
    try:
        obj = read_json(tmp, limit=MAX_DATA_BYTES)
    except InputFileError as e:
        raise FetchError(f"{url}: the downloaded file is not valid JSON ({e.problem})", url=url) from None
    if isinstance(obj, dict) and isinstance(obj.get("data"), list):
        obj = obj["data"]
    if not isinstance(obj, list) or not all(isinstance(r, dict) for r in obj):
        raise FetchError(f"{url}: the downloaded file is not a JSON list of records", url=url)


def fetch_official(
    dest: Path | None = None,
    *,
    base_url: str = OFFICIAL_BASE,
    branch: str = "main",
    include_train: bool = False,
    force: bool = False,
    timeout: float = 60,
    retries: int = 4,
    backoff: float = 0.5,
    log: Callable[[str], None] | None = None,
) -> list[Path]:
    """Download the official StudyBench files into ``dest`` (paper section 2; data README).

    Args:
        dest: target directory (created if needed); default
            :func:`studybench.datasets.default_cache_dir`, where named splits are found.
        base_url: raw-file root (default :data:`OFFICIAL_BASE`); a mirror or a local server in tests.
        branch: branch, tag or commit of the official repository.
        include_train: also fetch the three instruction layers into ``dest/train/``.
        force: download again even when a file is already present.
        timeout: per-request network timeout in seconds (connect, read, write, pool).
        retries: attempts per file for transient errors (connection drops, timeouts, 429, 5xx).
        backoff: base of the exponential wait between attempts, in seconds (0 = no wait).
        log: optional callback receiving one line per file ("skip ...", "fetched ...").

    Returns:
        The local paths of all requested files (downloaded now or already present), in the order
        of :func:`official_files`.

    Raises:
        FetchError: a download failed (the message names the URL and the HTTP status or the
            connection error) or a downloaded file is unusable (invalid JSON, a test set that does
            not load). Nothing is moved into place then: existing files stay as they were and no
            temporary file is left behind.
    """
    root = Path(dest) if dest is not None else default_cache_dir()
    say = log or (lambda _msg: None)
    wanted = official_files(include_train)
    todo: list[tuple[OfficialFile, Path, str]] = []
    for spec in wanted:
        target = root / spec.local
        url = _url(base_url, branch, spec.remote)
        if target.is_file() and not force:
            say(f"skip {target} (present; use force to download again)")
            continue
        todo.append((spec, target, url))

    staged: list[tuple[Path, Path, str]] = []  # (temp, target, url)
    try:
        if todo:
            headers = {"User-Agent": f"studybench/{__version__}"}
            with httpx.Client(timeout=timeout, follow_redirects=True, headers=headers) as client:
                for spec, target, url in todo:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = _download(client, url, target, retries, backoff)
                    staged.append((tmp, target, url))
                    _validate(tmp, spec, url)
        for tmp, target, url in staged:
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual file mode
            os.replace(tmp, target)
            say(f"fetched {redact_url(url)} -> {target}")
        staged.clear()
    finally:
        for tmp, _target, _u in staged:
            tmp.unlink(missing_ok=True)
    return [root / spec.local for spec in wanted]


def _umask() -> int:
    """The process umask (read without changing it for longer than one call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
