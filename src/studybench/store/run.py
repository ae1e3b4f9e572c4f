"""The run directory on disk: the manifest and the three append-only logs (DESIGN.md "Run directory").

::

    RUN/
      manifest.json         Manifest: config, data hash, package version, backend, sampling, verifier
      generations.jsonl     GenerationRow per generated turn
      judgements.jsonl      RuleVerdictRow per rule-judged completion
      llm_judgements.jsonl  LLMVerdictRow per LLM-judged completion and judge configuration
      report.json, report.md
      .lock                 held (flock) by the one process writing the run; names it (pid, host, command)

Rows go through :class:`studybench.files.JsonlLog` (one ``write`` of a complete line with
``O_APPEND``: a SIGKILL leaves at most a torn last line, which readers skip); readers keep the last
row per key, so re-running is idempotent. The manifest is written to a temporary file and renamed.

**One writer at a time.** :meth:`RunStore.lock` takes an exclusive ``flock`` on ``RUN/.lock`` for as
long as a command writes the run (``eval``, ``judge``); a second writer is refused with
:class:`RunDirInUseError`, which names the holder. The kernel releases the lock when its process
dies, so a crash (even SIGKILL) leaves no stale lock. The lock file itself is never deleted (deleting
it would let two processes lock two different files). Where ``fcntl`` is missing (Windows) there
is no locking.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from studybench.files import (
    MAX_JSON_BYTES,
    JsonlLog,
    atomic_write_text,
    dumps_json,
    json_line,
    parse_json,
    read_json,
)
from studybench.secrets import env_secrets, redact_command
from studybench.store.manifest import Manifest
from studybench.store.rows import GenerationRow, LLMVerdictRow, RuleVerdictRow, TurnKey

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no run-directory locking
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunDirInUseError", "RunStore"]

_R = TypeVar("_R", bound=BaseModel)


def _latest(log: JsonlLog, model: type[_R], by_judge: bool = False) -> dict[object, _R]:
    """The last row per key of ``log``, validated as ``model``.

    Rows without a valid key are skipped. The last row of a key wins even when it is unusable (fails
    ``model``): the key then has no row, as a corrupt row must not resurrect an older one.
    """
    raw: dict[object, dict[str, object]] = {}
    for row in log.rows():
        try:
            key: object = TurnKey.from_row(row)
        except (KeyError, TypeError, ValueError):
            continue
        if by_judge:
            jid = row.get("judge_id")
            if not isinstance(jid, str):
                continue
            key = (key, jid)
        raw[key] = row
    out: dict[object, _R] = {}
    for key, row in raw.items():
        try:
            out[key] = model.model_validate(row)
        except ValidationError:
            continue
    return out


class RunDirInUseError(RuntimeError):
    """Another process (or thread) is writing the run directory.

    Attributes:
        root: the run directory.
        holder: what the holder wrote into the lock file (``pid``, ``host``, ``command``, ``started``);
            empty when it is not known yet.
    """

    def __init__(self, root: Path, holder: dict[str, Any]) -> None:
        self.root = root
        self.holder = holder
        who = "another process"
        pid = holder.get("pid")
        if isinstance(pid, int):
            host = holder.get("host")
            who = f"pid {pid}" + (f" on {host}" if isinstance(host, str) and host != socket.gethostname() else "")
            extra = [str(holder[k]) if k == "command" else f"started {holder[k]}"
                     for k in ("command", "started") if isinstance(holder.get(k), str) and holder.get(k)]
            if extra:
                who += f" ({', '.join(extra)})"
        super().__init__(f"run directory {root} is in use by {who}; wait for it to finish or stop it "
                         "(only one command may write a run directory at a time)")


# locks this process holds: (resolved lock path, thread id) -> [fd, depth]
_HELD: dict[tuple[str, int], list[int]] = {}
_HELD_GUARD = threading.Lock()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        obj = parse_json(raw.decode("utf-8", "replace"), "lock file") if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _open_lock(path: Path) -> int:
    """Open (creating) the lock file for writing.

    A regular file only, never through a symbolic link: a run directory from elsewhere whose
    ``.lock`` points at another file must not get that file truncated.
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        if path.is_symlink():
            raise OSError(errno.ELOOP, "the lock file is a symbolic link (never followed); remove it", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "the lock file is not a regular file; remove it", str(path))
    return fd


def _command_line() -> str:
    """This process's command line, short (``studybench eval ...`` for the CLI)."""
    argv = list(sys.argv) or ["python"]
    argv[0] = "studybench" if argv[0].endswith(("__main__.py", "studybench")) else Path(argv[0]).name
    # the lock file lies in the run directory and a refused writer prints it: no credentials
    text = shlex.join(redact_command(argv, env_secrets(["OPENAI_API_KEY"])))
    return text if len(text) <= 200 else text[:197] + "..."


class RunStore:
    """The files of one run directory.

    Args:
        root: the run directory (created on the first write).

    Attributes:
        generation_log: ``generations.jsonl`` (:class:`GenerationRow` rows).
        rule_log: ``judgements.jsonl`` (:class:`RuleVerdictRow` rows; the file keeps its 0.1.0 name).
        llm_log: ``llm_judgements.jsonl`` (:class:`LLMVerdictRow` rows).
    """

    MANIFEST = "manifest.json"
    GENERATIONS = "generations.jsonl"
    RULE_VERDICTS = "judgements.jsonl"  # the file name of 0.1.0, kept so that old runs load
    LLM_VERDICTS = "llm_judgements.jsonl"

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.generation_log = JsonlLog(self.root / self.GENERATIONS)
        self.rule_log = JsonlLog(self.root / self.RULE_VERDICTS)
        self.llm_log = JsonlLog(self.root / self.LLM_VERDICTS)

    LOCK = ".lock"

    @property
    def lock_path(self) -> Path:
        """``ROOT/.lock`` (see :meth:`lock`)."""
        return self.root / self.LOCK

    @contextmanager
    def lock(self, command: str | None = None) -> Iterator[None]:
        """Hold the run directory's writer lock for the ``with`` block (creating the directory).

        Re-entrant within one thread; another thread or process is refused at once (no waiting).
        The lock file records this process's pid, host, command line and start time, so a refused
        writer can say who holds the directory.

        Args:
            command: what to record as the holder's command (default: this process's command line).

        Raises:
            RunDirInUseError: another process or thread holds the lock.
            OSError: the directory or the lock file cannot be created.
        """
        if fcntl is None:  # pragma: no cover
            yield
            return
        self.root.mkdir(parents=True, exist_ok=True)
        key = (str(self.lock_path.resolve()), threading.get_ident())
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is not None:
                held[1] += 1
        if held is None:
            fd = _open_lock(self.lock_path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunDirInUseError(self.root, holder) from None
            except BaseException:
                os.close(fd)
                raise
            info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command or _command_line(),
                    "started": time.strftime("%Y-%m-%d %H:%M:%S")}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json_line(info) + "\n").encode("utf-8", "backslashreplace"), 0)
            except OSError:
                pass  # a full disk: the lock still holds, the refusal message is just less specific
            with _HELD_GUARD:
                _HELD[key] = [fd, 1]
        try:
            yield
        finally:
            with _HELD_GUARD:
                entry = _HELD[key]
                entry[1] -= 1
                last = entry[1] == 0
                if last:
                    del _HELD[key]
            if last:
                try:
                    os.ftruncate(entry[0], 0)
                except OSError:
                    pass
                os.close(entry[0])  # releases the flock

    def check_unlocked(self) -> None:
        """Raise if another process or thread holds the writer lock now (nothing is created or kept).

        Raises:
            RunDirInUseError: the run directory is in use.
        """
        if fcntl is None or not self.lock_path.is_file():
            return
        with _HELD_GUARD:
            if (str(self.lock_path.resolve()), threading.get_ident()) in _HELD:
                return
        try:
            fd = os.open(self.lock_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunDirInUseError(self.root, _read_holder(fd)) from None
            except OSError:
                return
        finally:
            os.close(fd)

    @property
    def manifest_path(self) -> Path:
        """``ROOT/manifest.json``."""
        return self.root / self.MANIFEST

    def exists(self) -> bool:
        """Whether the directory holds a run (a manifest)."""
        return self.manifest_path.exists()

    def read_manifest(self) -> Manifest:
        """The validated manifest.

        Raises:
            FileNotFoundError: not a run directory (no manifest).
            ValueError: unreadable (:class:`~studybench.files.InputFileError`: a named pipe, too
                large, ...), not strict JSON, or a field fails validation (the message names the file
                and the field).
        """
        if not self.manifest_path.exists():
            raise FileNotFoundError(f"{self.root}: not a run directory (no {self.MANIFEST})")
        # a regular file only (a named pipe in its place must not block), strict JSON
        obj = read_json(self.manifest_path, limit=MAX_JSON_BYTES)
        return Manifest.parse(obj, self.manifest_path)

    def check_files(self, *json_files: str) -> Manifest:
        """Read every file of the run to the end (the manifest, the three logs and ``json_files``).

        For a command that must not write anything unless the run can be read (``eval`` resuming,
        ``judge``, ``label``): a named pipe, a file over its size limit or a corrupt row fails it
        before its first write.

        Args:
            json_files: names of other JSON files of the run directory to read (strictly, when present),
                e.g. the recorded prices ``pricing.json``.

        Returns:
            The validated manifest.

        Raises:
            FileNotFoundError: not a run directory.
            ValueError: a file cannot be read (:class:`~studybench.files.InputFileError`: not a
                regular file, too large, a row that is not strict JSON; the message names the file
                and the line), or the manifest is invalid.
        """
        manifest = self.read_manifest()
        for log in (self.generation_log, self.rule_log, self.llm_log):
            for _ in log.rows():
                pass
        for name in json_files:
            if os.path.lexists(self.root / name):
                read_json(self.root / name, limit=MAX_JSON_BYTES)
        return manifest

    def write_manifest(self, manifest: Manifest) -> None:
        """Write the manifest atomically (temporary file, then rename)."""
        atomic_write_text(self.manifest_path, dumps_json(manifest.to_json()) + "\n")

    def latest_generations(self) -> dict[TurnKey, GenerationRow]:
        """The last usable generation row per turn key."""
        return _latest(self.generation_log, GenerationRow)  # type: ignore[return-value]

    def latest_rule_verdicts(self) -> dict[TurnKey, RuleVerdictRow]:
        """The last usable rule verdict row per turn key."""
        return _latest(self.rule_log, RuleVerdictRow)  # type: ignore[return-value]

    def latest_llm_verdicts(self) -> dict[tuple[TurnKey, str], LLMVerdictRow]:
        """The last usable LLM verdict row per (turn key, judge id)."""
        return _latest(self.llm_log, LLMVerdictRow, by_judge=True)  # type: ignore[return-value]

    def append(self, row: GenerationRow | RuleVerdictRow | LLMVerdictRow) -> None:
        """Append one row to the log its type belongs to."""
        log = {GenerationRow: self.generation_log, RuleVerdictRow: self.rule_log, LLMVerdictRow: self.llm_log}[type(row)]
        log.append(row.to_json())

    def sync(self) -> None:
        """Flush every open log to disk (fsync)."""
        for log in (self.generation_log, self.rule_log, self.llm_log):
            log.sync()

    def close(self) -> None:
        """Flush (fsync) and close every open log."""
        self.generation_log.close()
        self.rule_log.close()
        self.llm_log.close()
