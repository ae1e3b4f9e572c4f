"""Text bound for other programs: spreadsheet cells, Markdown, the terminal.

One of the lowest modules of the package (it imports nothing of studybench). Model names, labels,
ids, sources, judge justifications and file names come from users, datasets and servers; written
verbatim they become live formulas in a spreadsheet, raw HTML in a Markdown viewer, or escape
sequences on a terminal. Each output kind has one rule here, used by every writer of that kind:

- **CSV** (:func:`csv_cell`, :func:`csv_writer`): the OWASP CSV-injection rule. A text cell whose
  first character is ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, or whose first character
  after leading spaces, tabs, line breaks and quotes (``"``, ``'``) is one of ``= + - @``, gets a single
  quote (``'``) in front, so a spreadsheet shows it as text instead of executing it. Two exceptions
  keep data data: cells that are not text (numbers, booleans, ``None``) are never changed, so negative
  numbers in numeric columns stay numbers; and a text cell that is a plain number literal
  (``-3``, ``+2.5e-3``, ``-0.75``) is kept as it is (no spreadsheet reads a formula in it). JSON,
  JSON Lines and Parquet outputs keep the raw text.
- **Markdown** (:func:`md_cell`): one line of inline text, safe in a table cell and in running text:
  line breaks and tabs become spaces, other control characters are shown escaped (:func:`printable`),
  ``<`` and ``>`` become HTML entities (no raw HTML: ``<script>``, ``<img onerror=...>``; an ``&`` is
  kept: an entity written in the text is shown, never run), and
  the Markdown punctuation that could end a cell or start markup is backslash-escaped
  (``\\ | ` [ ]``: no table breaks, code spans, links or remote images). A Markdown viewer shows the
  original text.
- **Terminal** (:func:`printable`, :func:`short_name`): control characters (C0 and C1, DEL, the
  Unicode line and paragraph separators, bidirectional overrides and isolates) are written as
  Python-style escapes (``\\x00``, ``\\x1b``, ``\\u202e``), so a NUL byte or an escape sequence in a
  source id is shown, never sent raw; ``short_name`` also shortens very long names in the middle.

Counted nouns in any of these outputs agree in number through :func:`plural` (``1 seed``, ``3 seeds``).
"""

from __future__ import annotations

import csv
import re
from typing import Any

__all__ = ["CSV_TRIGGERS", "csv_cell", "csv_writer", "md_cell", "plural", "printable", "short_name"]

CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet treat a cell as a formula (OWASP, "CSV Injection")."""

_AFTER_PADDING = re.compile(r"[ \t\r\n\"']*([=+\-@])")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_MD_SPECIAL = re.compile(r"([\\|`\[\]])")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def csv_cell(value: Any) -> Any:
    """A value fit for a CSV cell that spreadsheets open: the OWASP rule (module docstring).

    Args:
        value: any cell value.

    Returns:
        ``value`` itself unless it is text that a spreadsheet would execute; then ``"'" + value``.
    """
    if not isinstance(value, str) or not value:
        return value
    if value[0] in CSV_TRIGGERS or _AFTER_PADDING.match(value):
        if _NUMBER.fullmatch(value):
            return value
        return "'" + value
    return value


class _NeutralisingWriter:
    """A :func:`csv.writer` whose rows pass through :func:`csv_cell`."""

    def __init__(self, f: Any, **kwargs: Any) -> None:
        self._w = csv.writer(f, **kwargs)

    def writerow(self, row: Any) -> Any:
        return self._w.writerow([csv_cell(v) for v in row])

    def writerows(self, rows: Any) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(f: Any, **kwargs: Any) -> Any:
    """A :func:`csv.writer` (same arguments) that neutralises every cell with :func:`csv_cell`.

    Every CSV file the package writes is written through this.

    Args:
        f: the file-like object (e.g. an ``io.StringIO``).
        **kwargs: :func:`csv.writer`'s dialect and formatting parameters.

    Returns:
        An object with ``writerow`` and ``writerows``.
    """
    return _NeutralisingWriter(f, **kwargs)


def _escape(m: re.Match[str]) -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable(text: object, *, newlines: bool = False) -> str:
    """``text`` with control characters written as escapes (``\\x00``, ``\\x1b``, ``\\u202e``, ``\\n``).

    Args:
        text: any value (``str()`` of it is used).
        newlines: keep line feeds and tabs (multi-line terminal output); by default they are
            escaped too, so the result is one line.

    Returns:
        The text; unchanged when it holds no control character.
    """
    s = text if isinstance(text, str) else str(text)
    pattern = _CONTROL_KEEP_LINES if newlines else _CONTROL
    return pattern.sub(_escape, s) if pattern.search(s) else s


def short_name(name: object, limit: int = 160) -> str:
    """A file name or id for a one-line message: :func:`printable`, shortened in the middle past ``limit``.

    Args:
        name: the name (a path, an id).
        limit: the most characters kept (at least 20).

    Returns:
        The printable name, ``head…tail`` when it was longer than ``limit``.
    """
    s = printable(name)
    limit = max(20, int(limit))
    if len(s) <= limit:
        return s
    head = (limit - 1) * 2 // 3
    return s[:head] + "…" + s[len(s) - (limit - 1 - head):]


def md_cell(text: object) -> str:
    """Text safe inside a Markdown table cell or a line of Markdown: the rule in the module docstring.

    Args:
        text: any value (``str()`` of it is used; ``None`` gives ``"None"``).

    Returns:
        One line that a Markdown viewer shows as the original text (HTML and markup neutralised).
    """
    s = text if isinstance(text, str) else str(text)
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " ")
    s = printable(s)
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return s.replace("<", "&lt;").replace(">", "&gt;")


def plural(n: int, word: str, many: str | None = None, *, grouped: bool = False) -> str:
    """``n`` and the noun agreeing with it: ``"1 seed"``, ``"3 seeds"``, ``"0 seeds"`` (every report, table and message).

    Args:
        n: the count.
        word: the singular noun (``"seed"``, ``"sub-problem"``).
        many: the plural when it is not ``word + "s"`` (``"analyses"``).
        grouped: write ``n`` with thousands separators (``"10,000 resamples"``).

    Returns:
        ``f"{n} {word}"`` when ``n`` is 1, else ``n`` with the plural.
    """
    num = f"{n:,}" if grouped else f"{n}"
    return f"{num} {word}" if n == 1 else f"{num} {many or word + 's'}"
