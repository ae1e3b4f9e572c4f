"""Reading the files a user names: regular files only, opened non-blocking, up to a size limit.

:func:`read_user_bytes` / :func:`read_user_text` refuse a named pipe, a device such as
``/dev/zero``, a directory or a socket before anything is read (so nothing blocks or reads without
bound), and a file over its size limit; :func:`jsonl_lines` splits JSONL on ``"\\n"`` only. Every
refusal is an :class:`InputFileError` naming the file. Re-exported by :mod:`studybench.files`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "MAX_DATA_BYTES",
    "MAX_TEXT_BYTES",
    "InputFileError",
    "decode_utf8",
    "file_kind",
    "jsonl_lines",
    "open_regular",
    "read_user_bytes",
    "read_user_text",
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
        syntax: the text is not JSON at all (:func:`parse_json`: a syntax error, where a reader of
            "JSON or JSON Lines" tries JSON Lines next), as opposed to JSON with a refused value.
    """

    def __init__(self, path: os.PathLike[str] | str, problem: str, *, syntax: bool = False) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem
        self.syntax = syntax


def file_kind(mode: int) -> str:
    """What a file that is not regular is, in words (``"a named pipe"``), from its ``st_mode``."""
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


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def open_regular(p: Path, limit: int, *, missing_ok: bool = False, flags: int = _READ_FLAGS) -> int | None:
    """A file descriptor of the regular file ``p`` (checked by ``stat`` before and ``fstat`` after opening).

    Opened non-blocking, so that a file swapped for a named pipe in between cannot block either.
    Returns ``None`` when ``p`` does not exist and ``missing_ok``.

    Raises:
        InputFileError: missing (unless ``missing_ok``), unreadable, not a regular file, or larger than ``limit``.
    """
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if missing_ok and not os.path.lexists(p):
            return None
        raise InputFileError(p, "cannot read file (No such file or directory)") from None
    except OSError as e:
        raise InputFileError(p, f"cannot read file ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(p, f"not a regular file ({file_kind(st.st_mode)})")
    if st.st_size > limit:
        raise InputFileError(p, f"too large ({st.st_size:,} bytes; the limit is {limit:,})")
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise InputFileError(p, f"cannot read file ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise InputFileError(p, f"cannot read file ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputFileError(p, f"not a regular file ({file_kind(st.st_mode)})")
    return fd


def read_user_bytes(path: os.PathLike[str] | str, *, limit: int = MAX_DATA_BYTES) -> bytes:
    """The bytes of a regular file, at most ``limit`` of them.

    Every file the package reads whole goes through here (or :func:`read_user_text`,
    :func:`read_json`). The file is checked with ``stat`` before it is opened and with ``fstat``
    after (it is opened non-blocking, so a file swapped for a named pipe in between cannot block
    either).

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
    fd = open_regular(p, limit)
    assert fd is not None
    try:
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
