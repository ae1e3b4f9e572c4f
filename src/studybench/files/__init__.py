"""Generic file helpers: atomic writes, UTF-8-safe JSON, digests, and the append-only JSONL log.

Nothing here knows about runs, test sets or verdicts; :mod:`studybench.store` builds the run
directory on top of these, and every other module that writes a file uses them.

Crash safety: :func:`atomic_write_text` writes a temporary file in the target's directory, fsyncs it
and renames it over the target, so readers see the old or the new file, never a mix.
:class:`JsonlLog` appends each row with a single ``write`` of a complete line to a file opened with
``O_APPEND``, so a process killed at any moment (SIGKILL) leaves at most one torn last line, which
readers skip and the next writer truncates.

Files a user names (test sets, artefacts, judge templates, pairs files) are read with
:func:`read_user_bytes` / :func:`read_user_text`: only regular files (a named pipe, a device such as
``/dev/zero``, a directory or a socket is refused before anything is read, so nothing blocks or
reads without bound), up to a size limit. JSONL is split with :func:`jsonl_lines`, on ``"\\n"`` only.
The files of a run directory and of a build's work directory are input too: the same rules hold
for every file the package reads (:func:`read_json` for a JSON file read whole, :class:`JsonlLog`
for the append-only logs), with a size limit per kind (:data:`MAX_JSON_BYTES`,
:data:`MAX_LOG_BYTES`, :data:`MAX_LOG_LINE_BYTES`).

JSON is read strictly (:func:`parse_json`): ``NaN`` and ``Infinity`` (which Python's ``json``
accepts), numbers that overflow a float (``1e999999``), integers outside 64 bits and nesting deeper
than the parser's recursion limit are refused with an :class:`InputFileError` naming the file, the
line and the field. JSON is written only as valid JSON (:func:`dumps_json`, ``allow_nan=False``).

Errors: every ``OSError`` these helpers raise names the file it concerns (``e.filename``; for
:func:`atomic_write_text` the target, not its temporary file), so that a full disk (``ENOSPC``) can
be reported as "cannot write FILE".

The package: :mod:`studybench.files.reading` (the readers of files a user names and
:class:`InputFileError`), :mod:`studybench.files.strict_json` (strict JSON in and out), and here
the atomic writers, digests and :class:`JsonlLog`; every public name is importable from here.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from studybench.files.reading import (
    MAX_DATA_BYTES,
    MAX_TEXT_BYTES,
    InputFileError,
    decode_utf8,
    file_kind,
    jsonl_lines,
    open_regular,
    read_user_bytes,
    read_user_text,
)
from studybench.files.strict_json import dumps_json, json_line, parse_json

__all__ = [
    "cache_dir",
    "MAX_DATA_BYTES",
    "MAX_JSON_BYTES",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINE_BYTES",
    "MAX_TEXT_BYTES",
    "InputFileError",
    "JsonlLog",
    "append_text",
    "atomic_write_bytes",
    "atomic_write_lines",
    "atomic_write_text",
    "decode_utf8",
    "dumps_json",
    "file_sha256",
    "json_line",
    "jsonl_lines",
    "parse_json",
    "read_json",
    "read_user_bytes",
    "read_user_text",
    "text_digest",
]


MAX_JSON_BYTES = 256 * 1024 * 1024
"""Default size limit of a JSON file read whole that the package wrote itself (a run's manifest,
report and recorded prices, a build stage's metadata): far above any real one (a manifest indexing
every parent of both official sets is under 10 MB)."""

MAX_LOG_BYTES = 64 * 1024 * 1024 * 1024
"""Size limit of an append-only JSONL log (a run's generations and verdicts, caches). Logs are read
row by row, never whole; a run whose logs pass this would not fit in memory once indexed anyway."""

MAX_LOG_LINE_BYTES = 256 * 1024 * 1024
"""Size limit of one row of a JSONL log (a generation row holds a completion and its reasoning)."""


def text_digest(text: str) -> str:
    """sha256 hex of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_json(path: os.PathLike[str] | str, *, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON file read whole, strictly (:func:`read_user_bytes`, then :func:`parse_json`).

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.

    Returns:
        The parsed value.

    Raises:
        InputFileError: the file cannot be read (missing, not a regular file, too large) or is not
            strict JSON (the message names the line, or the field of a refused number).
    """
    return parse_json(read_user_bytes(path, limit=limit), path)


@contextmanager
def _naming(path: Path, *aliases: Path) -> Iterator[None]:
    """Give an ``OSError`` raised inside the block ``path`` as its file name (when it names none or an alias)."""
    try:
        yield
    except OSError as e:
        if e.filename is None or e.filename in {str(a) for a in aliases} | set(aliases):
            e.filename = str(path)
        raise


@contextmanager
def _replacing(path: Path, mode: str, **kwargs: Any) -> Iterator[Any]:
    """A temporary file beside ``path``, opened with ``mode``; fsynced and renamed over ``path`` when the
    block ends, removed (and ``path`` untouched) when it raises. ``OSError`` names ``path``."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with _naming(path, tmp):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, mode, **kwargs) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and ``os.replace``.

    Characters UTF-8 cannot encode (lone surrogates) are written as backslash escapes. On failure
    the temporary file is removed and the ``OSError`` propagates (naming ``path``); ``path`` is untouched.

    Raises:
        OSError: the file cannot be written (e.g. ``ENOSPC``: the disk is full); ``filename`` is ``path``.
    """
    atomic_write_lines(path, (text,))


def atomic_write_lines(path: Path, chunks: Iterable[str]) -> None:
    """Stream ``chunks`` (strings, written as they come) to ``path`` via a temporary file and ``os.replace``.

    For output too large to hold in memory (JSON Lines). As :func:`atomic_write_text`: lone
    surrogates become backslash escapes; on failure (also an exception from ``chunks``) the temporary
    file is removed and ``path`` is untouched.

    Raises:
        OSError: the file cannot be written; ``filename`` is ``path``.
    """
    with _replacing(path, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
        for chunk in chunks:
            f.write(chunk)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as :func:`atomic_write_text` writes text (temporary file, fsync, ``os.replace``).

    Raises:
        OSError: the file cannot be written; ``filename`` is ``path``.
    """
    with _replacing(path, "wb") as f:
        f.write(data)


def file_sha256(path: Path, *, limit: int = MAX_LOG_BYTES) -> str:
    """sha256 hex of a regular file's bytes, read in 1 MiB blocks.

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.

    Raises:
        InputFileError: the file is missing or unreadable, not a regular file, or larger than ``limit``.
    """
    fd = open_regular(Path(path), limit)
    assert fd is not None
    h = hashlib.sha256()
    total = 0
    try:
        while block := os.read(fd, 1 << 20):
            total += len(block)
            if total > limit:
                raise InputFileError(path, f"too large (over {limit:,} bytes, the limit)")
            h.update(block)
    except OSError as e:
        raise InputFileError(path, f"cannot read file ({e.strerror or e})") from None
    finally:
        os.close(fd)
    return h.hexdigest()


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to a regular file (created when missing), as UTF-8 (lone surrogates escaped).

    For plain-text logs. A named pipe, a device or a directory in the file's place is refused, never
    blocked on or written to.

    Raises:
        InputFileError: ``path`` exists and is not a regular file.
        OSError: it cannot be written (``filename`` names it).
    """
    with _naming(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise InputFileError(path, f"not a regular file ({file_kind(mode)})")
            view = memoryview(text.encode("utf-8", "backslashreplace"))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)


_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class JsonlLog:
    """An append-only JSONL file of keyed rows, safe against SIGKILL at any moment.

    The file is input too: only a regular file is read or appended to (a named pipe, a device, a
    directory or a socket in its place is refused before anything is read or written, so nothing
    blocks), up to ``limit`` bytes in all and ``line_limit`` per row. A last line without its
    newline is a torn write of a killed writer: readers skip it and :meth:`open` truncates it.

    Args:
        path: the file.
        strict: what a complete line that is not a strict JSON object (:func:`parse_json`: invalid
            UTF-8 or JSON, ``NaN``, a number out of range, too deep) is. ``True`` (a run's logs,
            build stages' outputs): an :class:`InputFileError` naming the file and the line, as a row
            silently dropped could let an older row of its key count instead. ``False`` (caches,
            where a lost row is only a miss): skipped.
        limit: the largest file accepted, in bytes.
        line_limit: the longest row accepted, in bytes.
    """

    def __init__(self, path: Path, *, strict: bool = True, limit: int = MAX_LOG_BYTES,
                 line_limit: int = MAX_LOG_LINE_BYTES) -> None:
        self.path = path
        self.strict = strict
        self.limit = limit
        self.line_limit = line_limit
        self._fd: int | None = None

    def _repair_tail(self, fd: int) -> int:
        """Truncate a torn last line (no trailing newline) of the open file. Returns the bytes dropped."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return 0
        block = 1 << 16
        pos = size
        cut = 0
        while pos > 0:  # find the last newline
            start = max(0, pos - block)
            idx = os.pread(fd, pos - start, start).rfind(b"\n")
            if idx >= 0:
                cut = start + idx + 1
                break
            pos = start
        os.ftruncate(fd, cut)
        os.fsync(fd)
        return size - cut

    def rows(self) -> Iterator[dict[str, Any]]:
        """All complete rows in file order (a torn last line is skipped; nothing when the file is missing).

        Raises:
            InputFileError: the file is not a regular file, is unreadable or too large, a row is
                longer than ``line_limit``, or (``strict``) a complete line is not a strict JSON
                object; the message names the file and the line.
        """
        for _, row in self.numbered_rows():
            yield row

    def numbered_rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(1-based line number, row) of every complete row, as :meth:`rows`.

        Raises:
            InputFileError: as :meth:`rows`.
        """
        fd = open_regular(self.path, self.limit, missing_ok=True)
        if fd is None:
            return
        with os.fdopen(fd, "rb") as f:
            total = 0
            n = 0
            while True:
                try:
                    line = f.readline(self.line_limit + 1)
                except OSError as e:
                    raise InputFileError(self.path, f"cannot read file ({e.strerror or e})") from None
                if not line:
                    return
                n += 1
                total += len(line)
                if len(line) > self.line_limit:
                    raise InputFileError(self.path, f"line {n}: too long (over {self.line_limit:,} bytes, the limit)")
                if total > self.limit:
                    raise InputFileError(self.path, f"too large (over {self.limit:,} bytes, the limit)")
                if not line.endswith(b"\n"):
                    return  # torn tail from a killed writer
                if not line.strip():
                    continue
                try:
                    row = parse_json(line, self.path, line=n)
                except InputFileError:
                    if self.strict:
                        raise
                    continue
                if isinstance(row, dict):
                    yield n, row
                elif self.strict:
                    raise InputFileError(self.path, f"line {n}: not a JSON object (each row of a log is one)")

    def open(self) -> None:
        """Open the file for appending (creating it; a torn last line is truncated first).

        Raises:
            InputFileError: the file exists and is not a regular file (never written to or blocked on).
            OSError: it cannot be created or repaired (``filename`` names the log).
        """
        if self._fd is None:
            with _naming(self.path):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    st = os.stat(self.path)
                except FileNotFoundError:
                    st = None
                if st is not None and not stat.S_ISREG(st.st_mode):
                    raise InputFileError(self.path, f"not a regular file ({file_kind(st.st_mode)})")
                fd = os.open(self.path, _APPEND_FLAGS, 0o644)
                try:
                    mode = os.fstat(fd).st_mode
                    if not stat.S_ISREG(mode):
                        raise InputFileError(self.path, f"not a regular file ({file_kind(mode)})")
                    self._repair_tail(fd)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd

    def append(self, row: dict[str, Any]) -> None:
        """Append one row as one complete line with a single write.

        Raises:
            OSError: the write failed, e.g. ``ENOSPC`` (``filename`` names the log). A partial line
                may remain; readers skip it and the next :meth:`open` truncates it.
            InputFileError: as :meth:`open`.
            ValueError: ``row`` holds a ``NaN`` or an infinity (never written: JSON has none).
        """
        self.open()
        try:
            data = (json_line(row) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: \u escapes read back exactly
            data = (json.dumps(row, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")
        assert self._fd is not None
        view = memoryview(data)
        with _naming(self.path):
            try:
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
            except OSError:
                # part of the line may be on disk: the next append reopens, which truncates it first
                fd, self._fd = self._fd, None
                try:
                    os.close(fd)
                except OSError:
                    pass
                raise

    def append_many(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            self.append(r)

    def sync(self) -> None:
        """fsync the open file (nothing when it is not open).

        Raises:
            OSError: the data could not be written out (``filename`` names the log).
        """
        if self._fd is not None:
            with _naming(self.path):
                os.fsync(self._fd)

    def close(self) -> None:
        """fsync and close the file (idempotent).

        Raises:
            OSError: the data could not be written out (``filename`` names the log); the file is closed anyway.
        """
        if self._fd is not None:
            try:
                with _naming(self.path):
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


def cache_dir(name: str, env: str | None = None) -> Path:
    """A folder of the per-user cache: ``$env`` when that variable is set, else ``<user cache dir>/studybench/name``.

    Args:
        name: the cache's folder under the user cache directory (``judge``, ``embeddings``, ``onnx``, ``data``).
        env: the environment variable that overrides it (e.g. ``STUDYBENCH_JUDGE_CACHE``).

    Returns:
        The folder (not created).
    """
    value = os.environ.get(env) if env else None
    if value:
        return Path(value)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("studybench")) / name
