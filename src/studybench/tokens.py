"""Token counts and token spans, with a built-in tokenizer or a Hugging Face one.

The **built-in** tokenizer (``"builtin"``, the default) needs no download and no extra package. It
is a deterministic regex pre-tokenizer in the style of GPT/Qwen byte-level BPEs: a word keeps the one
space before it, long words are cut into pieces of at most :data:`WORD_PIECE` letters, numbers into
runs of at most three digits, every other symbol (punctuation, ``$``, ``^``, ``{``, ...) is a token of
its own, a LaTeX command such as ``\\frac`` is one token, a run of newlines is one token. It is an
**approximation** of a real BPE's count: about 3.9 characters per token on English prose (measured on
the GPL-3 licence text), a little below the ~4 usual for modern BPEs, so it tends to count slightly
more tokens than they do (chunks and budgets err on the small side). It was not compared with
Qwen2.5's tokenizer (none could be downloaded where it was written). Use ``--tokenizer NAME|PATH``
where exact counts matter.

Any other name is loaded lazily: a ``tokenizer.json`` file with the ``tokenizers`` library, a folder
or a hub name with ``transformers.AutoTokenizer`` (fast tokenizers only: spans come from their
offsets), and ``tiktoken:ENCODING`` with ``tiktoken`` when installed (it downloads its encodings at
first use, so it is never the default).

Spans always cover the text: consecutive ``(start, end)`` character offsets, the first starting at 0,
the last ending at ``len(text)``, each starting where the previous one ended.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

__all__ = [
    "BUILTIN",
    "WORD_PIECE",
    "Spans",
    "Tokenizer",
    "TokenizerError",
    "count_tokens",
    "load_tokenizer",
    "token_spans",
]

BUILTIN = "builtin"
WORD_PIECE = 6
"""Longest run of letters one built-in token holds (a longer word is cut into several)."""

_BUILTIN_RE = re.compile(
    rf"""
    \ ?[^\W\d_]{{1,{WORD_PIECE}}}      # a word piece, with the space before it
    | \ ?\\[A-Za-z]{{1,{WORD_PIECE}}}  # a LaTeX command (a long one in pieces)
    | \d{{1,3}}                        # up to three digits
    | \ ?[^\s\w]                       # one symbol, with the space before it
    | \n+                              # a run of newlines
    | [^\S\n]+(?!\S)                   # spaces, leaving the last one to the next word
    | (?s:.)                           # anything else: one character
    """,
    re.VERBOSE,
)


class Spans(Sequence[tuple[int, int]]):
    """Covering token spans, stored as their end offsets: 8 bytes a token, not a list of tuples.

    Indexing gives ``(start, end)`` (a token starts where the previous one ended, the first at 0);
    a slice gives a list. Equal to a list of the same spans.
    """

    __slots__ = ("_ends",)

    def __init__(self, ends: Iterable[int] = ()) -> None:
        self._ends = array("q", ends)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self._ends)))]
        n = len(self._ends)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError("token index out of range")
        return (self._ends[k - 1] if k else 0, self._ends[k])

    def __iter__(self) -> Iterator[tuple[int, int]]:
        prev = 0
        for end in self._ends:
            yield (prev, end)
            prev = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Spans):
            return self._ends == other._ends
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == len(self) and all(a == tuple(b) for a, b in zip(self, other, strict=False))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Spans({list(self)!r})"


class TokenizerError(ValueError):
    """A tokenizer that cannot be loaded; the message says why and what to do."""


@dataclass(frozen=True)
class Tokenizer:
    """A named tokenizer: ``spans(text)`` gives covering character spans, one per token.

    Attributes:
        name: ``"builtin"``, or the name or path it was loaded from.
        spans: the function from text to ``(start, end)`` spans (see :func:`token_spans`).
    """

    name: str
    spans: Callable[[str], Sequence[tuple[int, int]]]

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (the built-in tokenizer counts without keeping the spans)."""
        if self.spans is _builtin_spans:
            return sum(1 for _ in _BUILTIN_RE.finditer(text))
        return len(self.spans(text))


def _builtin_spans(text: str) -> Spans:
    return Spans(m.end() for m in _BUILTIN_RE.finditer(text))


def _covering(ends: Iterable[int], n: int) -> Spans:
    """Contiguous spans from token end offsets (made non-decreasing, the last one stretched to ``n``)."""
    out = array("q")
    prev = 0
    for end in ends:
        prev = min(max(int(end), prev), n)
        out.append(prev)
    if out:
        out[-1] = n
    elif n:
        out.append(n)
    spans = Spans()
    spans._ends = out  # noqa: SLF001 - our own class
    return spans


def _offsets_spans(offsets: Callable[[str], list[tuple[int, int]]]) -> Callable[[str], Spans]:
    def spans(text: str) -> Spans:
        if not text:
            return Spans()
        return _covering((e for _, e in offsets(text)), len(text))

    return spans


def _from_tokenizer_file(path: Path) -> Tokenizer:
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError:
        raise TokenizerError(f"--tokenizer {path}: reading a tokenizer.json needs the 'tokenizers' package (pip install tokenizers)") from None
    try:
        tok = HFTokenizer.from_file(str(path))
    except Exception as e:  # the library raises its own exception types
        raise TokenizerError(f"--tokenizer {path}: not a tokenizer.json the tokenizers library can read ({_first_line(e)})") from None
    return Tokenizer(str(path), _offsets_spans(lambda t: tok.encode(t, add_special_tokens=False).offsets))


def _from_transformers(name: str) -> Tokenizer:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TokenizerError(f"--tokenizer {name}: needs the 'transformers' package (pip install transformers), or give a tokenizer.json file") from None
    # read now, not when huggingface_hub was imported: HF_HUB_OFFLINE set later still keeps the hub unasked
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if offline:  # huggingface_hub reads the variable once, when imported, and asks the hub otherwise
        try:
            from huggingface_hub import constants as hub_constants

            hub_constants.HF_HUB_OFFLINE = True
        except ImportError:
            pass
    try:
        tok: Any = AutoTokenizer.from_pretrained(name, local_files_only=offline)
    except Exception as e:  # network, missing files, bad config: all mean "cannot load"
        offline = " (HF_HUB_OFFLINE is set: only locally cached models load)" if offline else ""
        raise TokenizerError(
            f"--tokenizer {name}: cannot load it{offline}: {_first_line(e)}; give a local folder or tokenizer.json, "
            "or download it first (huggingface-cli download NAME)"
        ) from None
    if not getattr(tok, "is_fast", False):
        raise TokenizerError(f"--tokenizer {name}: a slow (Python) tokenizer has no character offsets; use one with a tokenizer.json")

    def offsets(text: str) -> list[tuple[int, int]]:
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return list(enc["offset_mapping"])

    return Tokenizer(name, _offsets_spans(offsets))


def _from_tiktoken(encoding: str) -> Tokenizer:
    try:
        import tiktoken
    except ImportError:
        raise TokenizerError(f"--tokenizer tiktoken:{encoding}: needs the 'tiktoken' package (pip install tiktoken)") from None
    try:
        enc = tiktoken.get_encoding(encoding)
    except Exception as e:
        raise TokenizerError(f"--tokenizer tiktoken:{encoding}: cannot load the encoding ({_first_line(e)})") from None

    def spans(text: str) -> Spans:
        if not text:
            return Spans()
        ids = enc.encode(text, disallowed_special=())
        char_ends = array("q", accumulate(len(c.encode("utf-8", "surrogatepass")) for c in text))

        def ends() -> Iterator[int]:
            pos = 0
            for tid in ids:  # a token's bytes may end inside a character: its end rounds down
                pos += len(enc.decode_single_token_bytes(tid))
                yield bisect_right(char_ends, pos)

        return _covering(ends(), len(text))

    return Tokenizer(f"tiktoken:{encoding}", spans)


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


_BUILTIN_TOKENIZER = Tokenizer(BUILTIN, _builtin_spans)


def load_tokenizer(name: str | None = None) -> Tokenizer:
    """The tokenizer called ``name``.

    Args:
        name: ``None`` or ``"builtin"`` for the built-in approximation; a ``tokenizer.json`` file;
            a folder or Hugging Face hub name (``transformers.AutoTokenizer``, fast tokenizers
            only); or ``"tiktoken:ENCODING"``.

    Returns:
        The tokenizer.

    Raises:
        TokenizerError: the package it needs is missing, or it cannot be loaded (e.g. not cached
            while ``HF_HUB_OFFLINE=1``).
    """
    if name is None or name.strip() in ("", BUILTIN):
        return _BUILTIN_TOKENIZER
    name = name.strip()
    if name.startswith("tiktoken:"):
        return _from_tiktoken(name.split(":", 1)[1])
    path = Path(name).expanduser()
    if path.is_file():
        return _from_tokenizer_file(path)
    return _from_transformers(str(path) if path.is_dir() else name)


def _resolve(tokenizer: Tokenizer | str | None) -> Tokenizer:
    return tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)


def token_spans(text: str, tokenizer: Tokenizer | str | None = None) -> Spans:
    """Character spans of the tokens of ``text``.

    Args:
        text: the text.
        tokenizer: a :class:`Tokenizer`, a name for :func:`load_tokenizer`, or ``None`` (built-in).

    Returns:
        ``(start, end)`` per token, in order, covering ``text`` without gaps or overlaps (a
        :class:`Spans`: a sequence that keeps 8 bytes a token).

    Raises:
        TokenizerError: ``tokenizer`` is a name that cannot be loaded.
    """
    return _resolve(tokenizer).spans(text)


def count_tokens(text: str, tokenizer: Tokenizer | str | None = None) -> int:
    """Number of tokens in ``text``.

    Args:
        text: the text.
        tokenizer: a :class:`Tokenizer`, a name for :func:`load_tokenizer`, or ``None`` (built-in).

    Returns:
        The count.

    Raises:
        TokenizerError: ``tokenizer`` is a name that cannot be loaded.
    """
    return _resolve(tokenizer).count(text)
