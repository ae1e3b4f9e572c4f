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

Errors: every ``OSError`` these helpers raise names the file it concerns (``e.filename``; for
:func:`atomic_write_text` the target, not its temporary file), so that a full disk (``ENOSPC``) can
be reported as "cannot write FILE".
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

__all__ = [
    "MAX_DATA_BYTES",
    "MAX_TEXT_BYTES",
    "InputFileError",
    "JsonlLog",
    "atomic_write_lines",
    "atomic_write_text",
    "decode_utf8",
    "dumps_json",
    "file_sha256",
    "jsonl_lines",
    "read_user_bytes",
    "read_user_text",
    "text_digest",
]

MAX_TEXT_BYTES = 10 * 1024 * 1024
"""Default size limit of a prompt-like file a user names (system prompt, playbook, guidance)."""

MAX_DATA_BYTES = 2 * 1024 * 1024 * 1024
"""Default size limit of a data file a user names (test set, pairs file, audit records)."""


class InputFileError(ValueError):
    """A file a user named that cannot be read as asked.

    Attributes:
        path: the file.
        problem: what is wrong, without the file name (e.g. ``"not a regular file (a named pipe)"``).
    """

    def __init__(self, path: os.PathLike[str] | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_user_bytes(path: os.PathLike[str] | str, *, limit: int = MAX_DATA_BYTES) -> bytes:
    """The bytes of a regular file a user named, at most ``limit`` of them.

    The file is checked with ``stat`` before it is opened and with ``fstat`` after (it is opened
    non-blocking, so a file swapped for a named pipe in between cannot block either).

    Args:
        path: the file (symbolic links are followed).
        limit: the largest size accepted, in bytes.

    Returns:
        The file's bytes.

    Raises:
        InputFileError: the file is missing or unreadable, is not a regular file (named pipe,
            device, directory, socket), or is larger than ``limit``.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise InputFileError(p, f"cannot read file ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(p, f"not a regular file ({_kind(st.st_mode)})")
    if st.st_size > limit:
        raise InputFileError(p, f"too large ({st.st_size:,} bytes; the limit is {limit:,})")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise InputFileError(p, f"cannot read file ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(p, f"not a regular file ({_kind(st.st_mode)})")
        chunks: list[bytes] = []
        total = 0
        while True:
            block = os.read(fd, min(1 << 20, limit + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
            if total > limit:
                raise InputFileError(p, f"too large (over {limit:,} bytes, the limit)")
        return b"".join(chunks)
    except OSError as e:
        raise InputFileError(p, f"cannot read file ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_user_text(path: os.PathLike[str] | str, *, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file a user named (a leading byte-order mark is dropped).

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.

    Returns:
        The decoded text.

    Raises:
        InputFileError: as :func:`read_user_bytes`, or the bytes are not UTF-8 (the message gives
            the line and byte offset).
    """
    data = read_user_bytes(path, limit=limit)
    return decode_utf8(data, path)


def decode_utf8(data: bytes, path: os.PathLike[str] | str) -> str:
    """``data`` decoded as UTF-8, a leading byte-order mark dropped.

    Args:
        data: the bytes read from ``path``.
        path: the file they came from (for the message).

    Returns:
        The text.

    Raises:
        InputFileError: not UTF-8 (the message gives the line and byte offset).
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputFileError(path, f"line {line}: not valid UTF-8 (byte offset {e.start})") from None


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of every non-blank line of JSONL text.

    Lines are split on ``"\\n"`` only: ``str.splitlines`` would also split inside JSON strings at
    U+2028, U+2029, U+0085, ``\\x1c``-``\\x1e``, form feeds and other characters that
    ``json.dumps(..., ensure_ascii=False)`` writes raw.

    Args:
        text: the file's text.

    Yields:
        Line number and line (a trailing ``"\\r"`` kept: JSON ignores it).
    """
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield n, line


def text_digest(text: str) -> str:
    """sha256 hex of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def dumps_json(obj: Any, indent: int | None = 2) -> str:
    """JSON text that is always encodable as UTF-8 (lone surrogates become ``\\u`` escapes)."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, indent=indent, ensure_ascii=True)
    return text


@contextmanager
def _naming(path: Path, *aliases: Path) -> Iterator[None]:
    """Give an ``OSError`` raised inside the block ``path`` as its file name (when it names none or an alias)."""
    try:
        yield
    except OSError as e:
        if e.filename is None or e.filename in {str(a) for a in aliases} | set(aliases):
            e.filename = str(path)
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
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with _naming(path, tmp):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
                for chunk in chunks:
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def file_sha256(path: Path) -> str:
    """sha256 hex of a file's bytes, read in 1 MiB blocks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class JsonlLog:
    """An append-only JSONL file of keyed rows, safe against SIGKILL at any moment."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def _repair_tail(self) -> int:
        """Truncate a torn last line (no trailing newline). Returns the number of bytes dropped."""
        if not self.path.exists():
            return 0
        size = self.path.stat().st_size
        if size == 0:
            return 0
        with open(self.path, "rb+") as f:
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return 0
            # find the last newline
            block = 1 << 16
            pos = size
            cut = 0
            while pos > 0:
                start = max(0, pos - block)
                f.seek(start)
                chunk = f.read(pos - start)
                idx = chunk.rfind(b"\n")
                if idx >= 0:
                    cut = start + idx + 1
                    break
                pos = start
            f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
            return size - cut

    def rows(self) -> Iterator[dict[str, Any]]:
        """All complete rows in file order (a torn or unparsable line is skipped)."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break  # torn tail from a killed writer
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):  # bad JSON or UTF-8, an integer over Python's digit limit, deep nesting
                    continue
                if isinstance(row, dict):
                    yield row

    def open(self) -> None:
        """Open the file for appending (creating it; a torn last line is truncated first).

        Raises:
            OSError: it cannot be created or repaired (``filename`` names the log).
        """
        if self._fd is None:
            with _naming(self.path):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._repair_tail()
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, row: dict[str, Any]) -> None:
        """Append one row as one complete line with a single write.

        Raises:
            OSError: the write failed, e.g. ``ENOSPC`` (``filename`` names the log). A partial line
                may remain; readers skip it and the next :meth:`open` truncates it.
        """
        self.open()
        try:
            data = (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: \u escapes read back exactly
            data = (json.dumps(row, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
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
