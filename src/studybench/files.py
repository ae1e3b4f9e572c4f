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
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

__all__ = [
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

MAX_TEXT_BYTES = 10 * 1024 * 1024
"""Default size limit of a prompt-like file a user names (system prompt, playbook, guidance)."""

MAX_DATA_BYTES = 2 * 1024 * 1024 * 1024
"""Default size limit of a data file a user names (test set, pairs file, audit records)."""

MAX_JSON_BYTES = 256 * 1024 * 1024
"""Default size limit of a JSON file read whole that the package wrote itself (a run's manifest,
report and recorded prices, a build stage's metadata): far above any real one (a manifest indexing
every parent of both official sets is under 10 MB)."""

MAX_LOG_BYTES = 64 * 1024 * 1024 * 1024
"""Size limit of an append-only JSONL log (a run's generations and verdicts, caches). Logs are read
row by row, never whole; a run whose logs pass this would not fit in memory once indexed anyway."""

MAX_LOG_LINE_BYTES = 256 * 1024 * 1024
"""Size limit of one row of a JSONL log (a generation row holds a completion and its reasoning)."""

_INT_BOUND = 2**63


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


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _open_regular(p: Path, limit: int, *, missing_ok: bool = False, flags: int = _READ_FLAGS) -> int | None:
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
        raise InputFileError(p, f"not a regular file ({_kind(st.st_mode)})")
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
        raise InputFileError(p, f"not a regular file ({_kind(st.st_mode)})")
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
    fd = _open_regular(p, limit)
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


def text_digest(text: str) -> str:
    """sha256 hex of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def dumps_json(obj: Any, indent: int | None = 2) -> str:
    """Valid JSON text that is always encodable as UTF-8 (lone surrogates become ``\\u`` escapes).

    Args:
        obj: JSON-ready data.
        indent: as :func:`json.dumps` (``None``: one line).

    Returns:
        The text.

    Raises:
        ValueError: ``obj`` holds a ``NaN`` or an infinity, which JSON cannot express (``allow_nan=False``:
            never ``NaN`` / ``Infinity`` in a file).
    """
    text = json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, indent=indent, ensure_ascii=True, allow_nan=False)
    return text


def json_line(obj: Any) -> str:
    """``obj`` as one compact line of valid JSON (no newline; non-ASCII characters kept raw).

    Raises:
        ValueError: ``obj`` holds a ``NaN`` or an infinity.
    """
    return _LINE_ENCODER.encode(obj)


_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""What ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`` builds on every
call, built once (the same output, without the per-call construction)."""


class _Refused:
    """A number :func:`parse_json` refuses, in place of its value until the field is named."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _short(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:12]}...{literal[-6:]}"


def _field(path: list[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(the top level)"


def _find_refused(obj: Any) -> tuple[str, str] | None:
    """(field path, problem) of the first :class:`_Refused` in ``obj`` (iterative: no recursion limit)."""
    stack: list[tuple[Any, list[str | int]]] = [(obj, [])]
    while stack:
        node, where = stack.pop()
        if isinstance(node, _Refused):
            return _field(where), node.problem
        if isinstance(node, dict):
            stack.extend((v, [*where, str(k)]) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, [*where, i]) for i, v in reversed(list(enumerate(node))))
    return None


def parse_json(text: str | bytes, path: os.PathLike[str] | str, *, line: int | None = None) -> Any:
    """Parse JSON strictly: only what RFC 8259 allows, with numbers Python and other readers agree on.

    Refused: invalid UTF-8, invalid JSON, the ``NaN`` / ``Infinity`` / ``-Infinity`` literals
    Python's ``json`` accepts, numbers that overflow a float (``1e999999``), integers outside
    64 bits (a 400-digit count), nesting deeper than the parser's recursion limit.

    Args:
        text: the JSON (bytes are decoded as UTF-8, a leading byte-order mark dropped).
        path: the file it came from (for the message).
        line: the line of a JSONL file it came from (for the message).

    Returns:
        The parsed value.

    Raises:
        InputFileError: one of the above; the message names the file, the line (of a JSONL row) and,
            for a refused number, the field (``usage.prompt_tokens``, ``[3].year``).

    Speed: text that ``orjson`` reads is read by it (several times faster than :mod:`json` with the
    number hooks below). ``orjson`` accepts a subset of what this function accepts and gives the same
    values there (``tests/test_harness_speed.py`` compares the two on generated and mutated
    documents), except integers beyond 63 bits, which it reads where this function refuses them: a
    text holding a run of 19 digits takes the reference path, as does any text ``orjson`` refuses
    (so every refusal and its message come from the reference path).
    """
    if (_DIGITS_B if isinstance(text, bytes) else _DIGITS_S).search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return _parse_json_strictly(text, path, line=line)


_DIGITS_B = re.compile(rb"\d{19}")
_DIGITS_S = re.compile(r"\d{19}")


def _parse_json_strictly(text: str | bytes, path: os.PathLike[str] | str, *, line: int | None = None) -> Any:
    """:func:`parse_json` by its definition (:mod:`json` with hooks that refuse what JSON does not allow)."""
    at = f"line {line}: " if line is not None else ""
    if isinstance(text, bytes):
        if line is None:
            text = decode_utf8(text, path)
        else:
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputFileError(path, f"{at}not valid UTF-8 (byte offset {e.start} of the line)") from None
    refused: list[bool] = []

    def bad(problem: str) -> _Refused:
        refused.append(True)
        return _Refused(problem)

    def parse_int(s: str) -> int | _Refused:
        digits = len(s) - s.startswith("-")
        if digits > 19:
            return bad(f"integer out of range ({digits} digits; at most 64 bits)")
        n = int(s)
        return n if -_INT_BOUND <= n < _INT_BOUND else bad(f"integer out of range ({s}; at most 64 bits)")

    def parse_float(s: str) -> float | _Refused:
        x = float(s)
        return x if math.isfinite(x) else bad(f"number out of range ({_short(s)} is not a finite number)")

    def parse_constant(s: str) -> _Refused:
        return bad(f"{s} is not valid JSON (not a number)")

    try:
        obj = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except json.JSONDecodeError as e:
        where = at or f"line {e.lineno}: "
        raise InputFileError(path, f"{where}not valid JSON ({e.msg} at column {e.colno})", syntax=True) from None
    except RecursionError:
        raise InputFileError(path, f"{at}JSON nested too deeply") from None
    if refused:
        found = _find_refused(obj)
        assert found is not None
        raise InputFileError(path, f"{at}field '{found[0]}': {found[1]}")
    return obj


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
    fd = _open_regular(Path(path), limit)
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
                raise InputFileError(path, f"not a regular file ({_kind(mode)})")
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
        fd = _open_regular(self.path, self.limit, missing_ok=True)
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
                    raise InputFileError(self.path, f"not a regular file ({_kind(st.st_mode)})")
                fd = os.open(self.path, _APPEND_FLAGS, 0o644)
                try:
                    mode = os.fstat(fd).st_mode
                    if not stat.S_ISREG(mode):
                        raise InputFileError(self.path, f"not a regular file ({_kind(mode)})")
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
