"""Generic file helpers: atomic writes, UTF-8-safe JSON, digests, and the append-only JSONL log.

Nothing here knows about runs, test sets or verdicts; :mod:`studybench.store` builds the run
directory on top of these, and every other module that writes a file uses them.

Crash safety: :func:`atomic_write_text` writes a temporary file in the target's directory, fsyncs it
and renames it over the target, so readers see the old or the new file, never a mix.
:class:`JsonlLog` appends each row with a single ``write`` of a complete line to a file opened with
``O_APPEND``, so a process killed at any moment (SIGKILL) leaves at most one torn last line, which
readers skip and the next writer truncates.

Errors: every ``OSError`` these helpers raise names the file it concerns (``e.filename``; for
:func:`atomic_write_text` the target, not its temporary file), so that a full disk (``ENOSPC``) can
be reported as "cannot write FILE".
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["JsonlLog", "atomic_write_text", "dumps_json", "file_sha256", "text_digest"]


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
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with _naming(path, tmp):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(text)
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
