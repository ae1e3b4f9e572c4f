"""Strict JSON: parsed as RFC 8259 allows (:func:`parse_json`), written only as valid JSON (:func:`dumps_json`).

``NaN`` and ``Infinity`` (which Python's ``json`` accepts), numbers that overflow a float
(``1e999999``), integers outside 64 bits and nesting deeper than the parser's recursion limit are
refused with an :class:`~studybench.files.reading.InputFileError` naming the file, the line and the
field. Re-exported by :mod:`studybench.files`.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

import orjson

from studybench.files.reading import InputFileError, decode_utf8

__all__ = ["dumps_json", "json_line", "parse_json"]

_INT_BOUND = 2**63


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
    values there (``tests/evaluate/test_harness_fastpath.py`` compares the two on generated and mutated
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
