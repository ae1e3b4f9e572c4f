"""The book layout, PDF parsing through MinerU, and deterministic OCR clean-up (paper 2.1, appendix H).

Layout of ``--books DIR``::

    DIR/<source>/<chapter>/<anything>.pdf     input of `corpus parse` (optional)
    DIR/<source>/<chapter>/full.md            MinerU output
    DIR/<source>/<chapter>/clean.md           after `corpus clean`
    DIR/<source>/<chapter>/clean.redacted.md  after `corpus redact`: the training file

``<source>`` is the test set's ``source`` field (e.g. ``Purcell_EM``). A solution manual lives
beside its book: its chapters are further folders under the same ``DIR/<source>/`` (e.g.
``DIR/Purcell_EM/solutions-ch05/``). A chapter folder whose name contains ``answer``,
``solution``, ``manual`` or ``hint`` is treated as an answer section as a whole. Folders whose
name starts with ``.`` or ``_`` are not sources or chapters (reports go to ``DIR/_reports/``).

Clean-up rules (:data:`RULES`) are small named functions ``text -> (text, edits)``, applied in
order; math rules act only inside ``$...$``, ``$$...$$``, ``\\(...\\)`` and ``\\[...\\]``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from studybench.files import MAX_DATA_BYTES, InputFileError, atomic_write_text, read_user_bytes

__all__ = [
    "CLEAN",
    "FULL",
    "REDACTED",
    "RULES",
    "Chapter",
    "CorpusError",
    "clean_books",
    "clean_text",
    "drop_prompt_leaks",
    "is_answer_name",
    "layout_problems",
    "parse_books",
    "rejoin_split_numbers",
    "scan_books",
    "strip_page_numbers",
    "tighten_brace_spacing",
    "tighten_sub_sup",
]

FULL = "full.md"
CLEAN = "clean.md"
REDACTED = "clean.redacted.md"
REPORTS = "_reports"
_ANSWER_FOLDER = re.compile(r"(?<![a-z])(?:answers?|solutions?|manuals?|hints?)(?![a-z])", re.IGNORECASE)


def is_answer_name(name: str) -> bool:
    """A folder name that marks a solution manual or answer section (``answer``, ``solution``, ``manual``, ``hint``)."""
    return bool(_ANSWER_FOLDER.search(name))


class CorpusError(ValueError):
    """A books directory or file that cannot be used; the message says what is missing."""


@dataclass
class Chapter:
    """One chapter folder ``DIR/<source>/<name>/``."""

    source: str
    name: str
    path: Path
    pdfs: list[Path] = field(default_factory=list)

    def file(self, name: str) -> Path:
        return self.path / name

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    @property
    def answer_folder(self) -> bool:
        """A solution manual or answer section as a whole (by folder name)."""
        return is_answer_name(self.name)

    @property
    def label(self) -> str:
        return f"{self.source}/{self.name}"


def _visible(p: Path) -> bool:
    return p.is_dir() and not p.name.startswith((".", "_"))


def scan_books(root: Path) -> dict[str, list[Chapter]]:
    """Sources and their chapters under ``root`` (sorted by name).

    Raises:
        CorpusError: ``root`` does not exist or is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise CorpusError(f"--books {root}: not a directory (expected DIR/<source>/<chapter>/ holding full.md, clean.md or clean.redacted.md)")
    out: dict[str, list[Chapter]] = {}
    for src in sorted(filter(_visible, root.iterdir())):
        chapters = []
        for ch in sorted(filter(_visible, src.iterdir())):
            chapters.append(Chapter(src.name, ch.name, ch, sorted(ch.glob("*.pdf"))))
        out[src.name] = chapters
    return out


_NEEDS = {
    "parse": (None, "a *.pdf file"),
    "clean": (FULL, f"{FULL} (run `studybench corpus parse`, or put MinerU output there)"),
    "redact": (CLEAN, f"{CLEAN} (run `studybench corpus clean`)"),
    "audit": (REDACTED, f"{REDACTED} (run `studybench corpus redact`)"),
}


def layout_problems(books: dict[str, list[Chapter]], stage: str, sources: list[str] | None = None) -> list[str]:
    """What is missing for ``stage`` (parse, clean, redact, audit), one message per problem.

    Args:
        books: :func:`scan_books` output.
        sources: sources that must be present (e.g. every ``source`` of the Application Set).
    """
    problems: list[str] = []
    for s in sorted(set(sources or [])):
        if s not in books:
            problems.append(f"{s}: no folder DIR/{s}/ (a source of the test set)")
        elif not books[s]:
            problems.append(f"{s}: no chapter folders under DIR/{s}/")
    need, what = _NEEDS[stage]
    for chapters in books.values():
        for ch in chapters:
            if stage == "parse":
                if not ch.pdfs and not ch.has(FULL):
                    problems.append(f"{ch.label}: no *.pdf and no {FULL}")
            elif need is not None and not ch.has(need):
                problems.append(f"{ch.label}: no {what}")
    if not books:
        problems.append("no source folders (expected DIR/<source>/<chapter>/)")
    return problems


# --------------------------------------------------------------------------------------------------
# parse (MinerU)
# --------------------------------------------------------------------------------------------------

MINERU_HINT = (
    'MinerU is not installed. Install it with `pip install "studybench[mineru]"` (local models; see '
    "https://github.com/opendatalab/MinerU), or put each chapter's Markdown in DIR/<source>/<chapter>/full.md yourself."
)


def mineru_command() -> str | None:
    """Path of the ``mineru`` command-line tool, or ``None``."""
    return shutil.which("mineru")


def parse_books(
    root: Path,
    *,
    force: bool = False,
    backend: str = "pipeline",
    progress: Callable[[str, str], None] | None = None,
    timeout: float | None = None,
) -> dict[str, list[str]]:
    """Convert every chapter's PDF(s) to ``full.md`` with MinerU; resumable (done chapters are skipped).

    Several PDFs of one chapter are converted in name order and joined with a blank line.

    Args:
        backend: MinerU backend (``-b``), e.g. ``pipeline`` (CPU) or a VLM backend.
        progress: called with (chapter label, status) for every chapter.
        timeout: seconds per PDF (``None``: no limit).

    Returns:
        ``{"parsed": [...], "skipped": [...], "failed": [...]}`` chapter labels (failed with a reason).

    Raises:
        CorpusError: MinerU is not installed, or the books directory is unusable.
    """
    books = scan_books(root)
    exe = mineru_command()
    if exe is None:
        raise CorpusError(MINERU_HINT)
    done: dict[str, list[str]] = {"parsed": [], "skipped": [], "failed": []}
    for chapters in books.values():
        for ch in chapters:
            if not ch.pdfs:
                continue
            if ch.has(FULL) and not force:
                done["skipped"].append(ch.label)
                if progress:
                    progress(ch.label, "skipped")
                continue
            parts: list[str] = []
            error = None
            for pdf in ch.pdfs:
                with tempfile.TemporaryDirectory(prefix="mineru-") as tmp:
                    try:
                        res = subprocess.run(
                            [exe, "-p", str(pdf), "-o", tmp, "-b", backend],
                            capture_output=True, text=True, timeout=timeout, check=False,
                        )
                    except subprocess.TimeoutExpired:
                        error = f"{pdf.name}: MinerU timed out after {timeout:g}s"
                        break
                    mds = sorted(Path(tmp).rglob(f"{pdf.stem}.md")) or sorted(Path(tmp).rglob("*.md"))
                    if res.returncode != 0 or not mds:
                        tail = (res.stderr or res.stdout or "").strip().splitlines()[-1:] or ["no Markdown output"]
                        error = f"{pdf.name}: MinerU exit {res.returncode}: {tail[0][:200]}"
                        break
                    parts.append(read_text(mds[0]))
            if error:
                done["failed"].append(f"{ch.label}: {error}")
                if progress:
                    progress(ch.label, "failed")
                continue
            write_text(ch.file(FULL), "\n\n".join(p.strip("\n") for p in parts) + "\n")
            done["parsed"].append(ch.label)
            if progress:
                progress(ch.label, "parsed")
    return done


# --------------------------------------------------------------------------------------------------
# clean-up rules
# --------------------------------------------------------------------------------------------------

Rule = Callable[[str], tuple[str, int]]

_LEAK = re.compile(
    r"^\s*(?:"
    r"(?:please|kindly)\s+(?:output|convert|extract|transcribe|recogni[sz]e|return|provide)\b"
    r"|(?:convert|transcribe|extract|recogni[sz]e)\s+(?:the|this|all)\s+(?:image|page|document|text|content)"
    r"|(?:here\s+is|below\s+is)\s+(?:the\s+)?(?:markdown|transcription|extracted|converted|ocr)"
    r"|(?:you\s+are|as)\s+an?\s+(?:ai\b|helpful\s+assistant|language\s+model|ocr)"
    r"|i(?:'m|\s+am)\s+sorry,?\s+(?:but\s+)?i\s+can(?:not|'t)"
    r")"
    r"|<\|(?:im_start|im_end|endoftext|assistant|user|system)\|>",
    re.IGNORECASE,
)
_MAX_LEAK_PARAGRAPH = 800


def drop_prompt_leaks(text: str) -> tuple[str, int]:
    """Drop paragraphs that are the OCR model's prompt or chat chatter leaking into the output
    (e.g. "Please output the text content of the image", "<|im_start|>"); paragraphs over 800
    characters are kept. Edits = paragraphs dropped."""
    paras = re.split(r"(\n[ \t]*\n)", text)
    out: list[str] = []
    n = 0
    for i in range(0, len(paras), 2):
        para = paras[i]
        sep = paras[i + 1] if i + 1 < len(paras) else ""
        if para.strip() and len(para) <= _MAX_LEAK_PARAGRAPH and _LEAK.search(para):
            n += 1
            continue
        out.append(para + sep)
    return "".join(out), n


_MATH = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<![\\$])\$[^$\n]+?(?<!\\)\$", re.DOTALL)


def _in_math(text: str, fn: Callable[[str], tuple[str, int]]) -> tuple[str, int]:
    total = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal total
        new, n = fn(m.group(0))
        total += n
        return new

    return _MATH.sub(sub, text), total


_SPLIT_DECIMAL = re.compile(r"(\d)\s*\.\s+(\d)|(\d)\s+\.\s*(\d)")
_SPLIT_DIGITS = re.compile(r"(?<=\d)[ \t]+(?=\d)")


def rejoin_split_numbers(text: str) -> tuple[str, int]:
    """Inside math, rejoin numbers OCR split with spaces: ``5. 2`` -> ``5.2``, ``1 0 ^ {2 3}`` ->
    ``10 ^ {23}``. Edits = joins made."""

    def fix(math: str) -> tuple[str, int]:
        math, a = _SPLIT_DECIMAL.subn(lambda m: f"{m.group(1) or m.group(3)}.{m.group(2) or m.group(4)}", math)
        math, b = _SPLIT_DIGITS.subn("", math)
        return math, a + b

    return _in_math(text, fix)


_BRACE_OPEN = re.compile(r"\{[ \t]+")
_BRACE_CLOSE = re.compile(r"[ \t]+\}")
_BRACE_SIGN = re.compile(r"\{([+-])[ \t]+(?=[\w\\])")


def tighten_brace_spacing(text: str) -> tuple[str, int]:
    """Inside math, remove spaces just inside braces and after a leading sign: ``{ - 8 }`` ->
    ``{-8}``. Edits = spaces removed."""

    def fix(math: str) -> tuple[str, int]:
        math, a = _BRACE_OPEN.subn("{", math)
        math, b = _BRACE_CLOSE.subn("}", math)
        math, c = _BRACE_SIGN.subn(r"{\1", math)
        return math, a + b + c

    return _in_math(text, fix)


def tighten_sub_sup(text: str) -> tuple[str, int]:
    """Inside math, remove spaces around ``_`` and ``^``: ``E _ {T}`` -> ``E_{T}``. Edits = operators
    that had spaces."""

    def fix(math: str) -> tuple[str, int]:
        n = 0

        def sub(m: re.Match[str]) -> str:
            nonlocal n
            op = m.group(1)
            if m.group(0) != op:
                n += 1
            return op

        return re.sub(r"[ \t]*([_^])[ \t]*", sub, math), n

    return _in_math(text, fix)


_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s+.*|(?:\*\*)?\s*(?:exercises?|problems?|questions?|examples?)\b.*)$", re.IGNORECASE
)
_PAGE_NUMBER = re.compile(r"^\s*\d{1,4}\s*$")
_TRAILING_PAGE = re.compile(r"^(\s*#{0,6}\s*(?:\*\*)?\s*(?:exercises|problems|questions)\s*(?:\*\*)?)\s+\d{1,4}\s*$", re.IGNORECASE)


def strip_page_numbers(text: str) -> tuple[str, int]:
    """Remove stray page numbers after exercise headings: a line holding only a 1-4 digit number
    right after a heading (blank lines between allowed), and a number trailing a plural section
    heading (``## Problems 245`` -> ``## Problems``). Edits = numbers removed."""
    lines = text.split("\n")
    out: list[str] = []
    n = 0
    after_heading = False
    for line in lines:
        m = _TRAILING_PAGE.match(line)
        if m:
            out.append(m.group(1))
            n += 1
            after_heading = True
            continue
        if after_heading and _PAGE_NUMBER.match(line):
            n += 1
            after_heading = False
            continue
        if line.strip():
            after_heading = bool(_HEADING.match(line))
        out.append(line)
    return "\n".join(out), n


RULES: list[tuple[str, Rule]] = [
    ("drop_prompt_leaks", drop_prompt_leaks),
    ("strip_page_numbers", strip_page_numbers),
    ("rejoin_split_numbers", rejoin_split_numbers),
    ("tighten_brace_spacing", tighten_brace_spacing),
    ("tighten_sub_sup", tighten_sub_sup),
]
"""The clean-up rules in the order they run."""


def clean_text(text: str) -> tuple[str, dict[str, int]]:
    """Apply :data:`RULES` in order. Returns the cleaned text and edits per rule."""
    edits: dict[str, int] = {}
    for name, rule in RULES:
        text, n = rule(text)
        edits[name] = n
    return text, edits


def clean_books(root: Path, progress: Callable[[str], None] | None = None) -> dict[str, object]:
    """Write ``clean.md`` for every chapter with a ``full.md`` (deterministic; always recomputed).

    Returns:
        ``{"chapters": {label: {rule: edits}}, "totals": {rule: edits}, "skipped": [labels without full.md]}``.

    Raises:
        CorpusError: unusable books directory or an unreadable ``full.md``.
    """
    books = scan_books(root)
    per: dict[str, dict[str, int]] = {}
    totals = {name: 0 for name, _ in RULES}
    skipped: list[str] = []
    for chapters in books.values():
        for ch in chapters:
            if not ch.has(FULL):
                skipped.append(ch.label)
                continue
            text = read_text(ch.file(FULL))
            cleaned, edits = clean_text(text)
            write_text(ch.file(CLEAN), cleaned)
            per[ch.label] = edits
            for k, v in edits.items():
                totals[k] += v
            if progress:
                progress(ch.label)
    return {"chapters": per, "totals": totals, "skipped": skipped}


def write_text(path: Path, text: str) -> None:
    """Write a book file atomically.

    Raises:
        CorpusError: the file cannot be written (e.g. a directory of that name).
    """
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise CorpusError(f"{path}: cannot write ({e.strerror or e})") from None


def read_text(path: Path) -> str:
    """UTF-8 text of a book file (undecodable bytes replaced).

    Raises:
        CorpusError: the file cannot be read.
    """
    try:  # a regular file only (never a named pipe or a device), up to MAX_DATA_BYTES
        return read_user_bytes(path, limit=MAX_DATA_BYTES).decode("utf-8", errors="replace")
    except InputFileError as e:
        raise CorpusError(str(e)) from None
