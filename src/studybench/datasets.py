"""Load and validate StudyBench test sets; locate and fetch the official files.

Paper section 2.1 / docs/protocol.md section 1. The official Application file wraps its list as
``{"data": [...]}``; the Transfer file is a bare list. Both shapes are accepted for any split.

Errors are :class:`DatasetError` naming the file, the record index, the record's
``source_problem_id`` and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studybench.files import MAX_DATA_BYTES, InputFileError, cache_dir, parse_json, read_user_bytes
from studybench.records import Parent, ParentKey, SubProblemRef, sub_problem_refs

__all__ = [
    "DATA_ENV",
    "Dataset",
    "DatasetError",
    "OFFICIAL_SPLITS",
    "SPLIT_FILES",
    "default_cache_dir",
    "load_dataset",
    "load_split",
    "official_name",
    "resolve_split",
    "resolve_train_dir",
    "split_title",
]

DATA_ENV = "STUDYBENCH_DATA"

OFFICIAL_SPLITS: tuple[str, ...] = ("application", "transfer")
"""The two official test sets (paper 2.1), in the order reports list them."""

SPLIT_FILES = {split: f"{split}.json" for split in OFFICIAL_SPLITS}
"""Local file names of the two official test sets inside a data directory."""


def official_name(split: str | None) -> str | None:
    """``split`` when it names an official test set (:data:`OFFICIAL_SPLITS`), else ``None``.

    A test set loaded under this name keeps it in turn keys and reports; any other file is named
    by its stem.
    """
    return split if split in OFFICIAL_SPLITS else None


def split_title(split: str) -> str:
    """How tables and reports head a split: the paper's headings for the official ones, any other name as it is.

    Args:
        split: a split name (``application``, ``transfer``, or a file stem such as ``my_set``).

    Returns:
        ``Application`` / ``Transfer`` for :data:`OFFICIAL_SPLITS`; ``split`` unchanged otherwise (never
        capitalised: ``my_set`` prints as ``my_set``).
    """
    return split.capitalize() if split in OFFICIAL_SPLITS else split


class DatasetError(ValueError):
    """A test-set file that cannot be used as is; the message names file, record and field."""


@dataclass
class Dataset:
    """A loaded test set: parents in file order plus the file's identity."""

    name: str
    path: Path
    parents: list[Parent]
    sha256: str
    wrapped: bool = False
    raw: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return len(self.parents)

    @property
    def n_sub_problems(self) -> int:
        """Scored sub-problems of all parents (a single-question parent counts one)."""
        return sum(len(p.subs()) for p in self.parents)

    def sub_problem_refs(self) -> list[SubProblemRef]:
        """Every scored sub-problem with its parent and index, in file order."""
        return sub_problem_refs(self.parents)

    def sub_problem_keys(self) -> list[tuple[str, str, str, str]]:
        """The four-part key of every scored sub-problem, in file order.

        Returns:
            ``(source, year, source_problem_id, problem_id)`` tuples: the key a guidance file joins
            on (a single-question parent's ``problem_id`` is its ``source_problem_id``).
        """
        return [(r.parent.source, r.parent.year, r.parent.source_problem_id, r.sub_id) for r in self.sub_problem_refs()]

    def by_key(self) -> dict[ParentKey, Parent]:
        """Parents by their identity (source, year, source_problem_id)."""
        return {p.key: p for p in self.parents}

    @classmethod
    def from_parents(cls, parents: list[Parent], name: str) -> Dataset:
        """A dataset made in memory (e.g. from a construction stage), identified by the sha256 of its records.

        Args:
            parents: validated parents, each key (source, year, source_problem_id) once.
            name: the name used in turn keys and reports.

        Raises:
            DatasetError: no parents, or a duplicate parent key.
        """
        if not parents:
            raise DatasetError(f"{name}: no parents")
        seen: set[ParentKey] = set()
        for p in parents:
            if p.key in seen:
                raise DatasetError(f"{name}: duplicate parent key {p.key}")
            seen.add(p.key)
        raw = [p.model_dump(mode="json") for p in parents]
        blob = json.dumps(raw, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        digest = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
        return cls(name, Path(f"<memory:{name}>"), list(parents), digest, False, raw)


def default_cache_dir() -> Path:
    """Per-user cache directory where ``studybench data fetch`` stores the official files."""
    return cache_dir("data")


def _candidate_dirs(data_dir: str | os.PathLike[str] | None) -> list[Path]:
    if data_dir:
        return [Path(data_dir)]  # an explicit directory is the only place looked at
    dirs: list[Path] = []
    env = os.environ.get(DATA_ENV)
    if env:
        dirs.append(Path(env))
    dirs.append(default_cache_dir())
    return dirs


def resolve_split(split: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Map ``application`` / ``transfer`` / a path to an existing file.

    For named splits: ``data_dir`` when given (and only there), else ``$STUDYBENCH_DATA``, then the
    user cache of ``studybench data fetch``. In each directory both ``<split>.json`` and
    ``studybench/<split>.json`` are tried.

    Raises:
        DatasetError: the split is unknown or no file was found (the message lists where it looked).
    """
    if split in SPLIT_FILES:
        tried: list[str] = []
        for d in _candidate_dirs(data_dir):
            for rel in (SPLIT_FILES[split], f"studybench/{SPLIT_FILES[split]}"):
                p = d / rel
                tried.append(str(p))
                if p.is_file():
                    return p
        if data_dir:
            raise DatasetError(f"cannot find the {split} set in {data_dir} (looked for {', '.join(tried)}); "
                               f"an explicit data directory is the only place looked, whatever {DATA_ENV} says")
        raise DatasetError(
            f"cannot find the {split} set; looked in: {', '.join(tried)}. "
            f"Pass --data-dir DIR, set {DATA_ENV}=DIR, or run `studybench data fetch`."
        )
    p = Path(split)
    if p.is_file():
        return p
    raise DatasetError(
        f"{split!r} is neither a split name ({', '.join(SPLIT_FILES)}) nor an existing file"
    )


def resolve_train_dir(train_dir: str | os.PathLike[str] | None = None,
                      data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding the instruction layers (``train/`` beside the test sets).

    ``train_dir`` when given; else ``train/`` in ``data_dir``, ``$STUDYBENCH_DATA`` and the user
    cache of ``studybench data fetch --train``, the first that exists.

    Raises:
        DatasetError: no such directory (the message lists where it looked and how to get the files).
    """
    if train_dir is not None:
        p = Path(train_dir)
        if not p.is_dir():
            raise DatasetError(f"--train-dir {p}: not a directory")
        return p
    tried = []
    for d in _candidate_dirs(data_dir):
        for p in (d / "train", d / "studybench" / "train"):
            tried.append(str(p))
            if p.is_dir():
                return p
    raise DatasetError(f"cannot find the instruction layers; looked in: {', '.join(tried)}. Pass --train-dir DIR, "
                       f"set {DATA_ENV}=DIR (holding train/), or run `studybench data fetch --train`.")


def _loc_str(loc: tuple[Any, ...]) -> str:
    out = ""
    for x in loc:
        if isinstance(x, int):
            out += f"[{x}]"
        else:
            out += ("." if out else "") + str(x)
    return out or "<record>"


def _format_validation(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = _loc_str(tuple(err.get("loc", ())))
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if err.get("type") == "missing":
        return f"field '{loc}': missing required field"
    etype = str(err.get("type", ""))
    if etype.endswith("_type") or etype == "enum":
        msg = f"{msg} (got {type(err.get('input')).__name__})"
    # validators prefix their message with the field they blame ("answer: ...")
    head, sep, rest = msg.partition(": ")
    if sep and " " not in head and head:
        field_name = f"{loc}.{head}" if loc != "<record>" and not loc.endswith(head) else head
        if head.startswith("sub_problems"):
            field_name = head
        return f"field '{field_name}': {rest}"
    return f"field '{loc}': {msg}"


def _unencodable_field(obj: Any, loc: str = "", depth: int = 0) -> str | None:
    """Path of the first string that UTF-8 cannot encode (a lone surrogate), or ``None``."""
    if depth > 50:
        return None
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return loc or "<record>"
        return None
    if isinstance(obj, dict):
        for k, v in obj.items():
            name = f"{loc}.{k}" if loc else str(k)
            bad = _unencodable_field(k, name, depth + 1) or _unencodable_field(v, name, depth + 1)
            if bad:
                return bad
    elif isinstance(obj, list):
        for j, v in enumerate(obj):
            bad = _unencodable_field(v, f"{loc}[{j}]", depth + 1)
            if bad:
                return bad
    return None


def load_dataset(path: str | os.PathLike[str], name: str | None = None) -> Dataset:
    """Load and validate a StudyBench test-set file.

    Args:
        path: a JSON file holding a list of parents or ``{"data": [...]}``.
        name: display name (defaults to the file stem).

    Returns:
        A :class:`Dataset` with every parent validated.

    Raises:
        DatasetError: unreadable file, not a regular file (named pipe, device, directory), over
            2 GiB, invalid JSON, wrong shape, a record failing validation
            (message: ``FILE: record I (source_problem_id=ID): field 'F': what is wrong``), or a
            duplicate parent key.
    """
    p = Path(path)
    try:
        data = read_user_bytes(p, limit=MAX_DATA_BYTES)
    except InputFileError as e:
        raise DatasetError(str(e)) from None
    digest = hashlib.sha256(data).hexdigest()
    if not data.strip():
        raise DatasetError(f"{p}: empty file (expected a JSON list of parents)")
    try:  # strict JSON (files.parse_json): NaN, 1e999999, a 400-digit integer are refused, naming the field
        obj = parse_json(data, p)
    except InputFileError as e:
        raise DatasetError(str(e)) from None
    wrapped = False
    if isinstance(obj, dict):
        if "data" in obj and isinstance(obj["data"], list):
            obj, wrapped = obj["data"], True
        else:
            raise DatasetError(
                f"{p}: wrong JSON shape: expected a list of parents or an object with a 'data' list, "
                f"got an object with keys {sorted(obj)[:8]}"
            )
    if not isinstance(obj, list):
        raise DatasetError(f"{p}: wrong JSON shape: expected a list of parents, got {type(obj).__name__}")
    parents: list[Parent] = []
    seen: dict[ParentKey, int] = {}
    for i, rec in enumerate(obj):
        if not isinstance(rec, dict):
            raise DatasetError(f"{p}: record {i}: expected an object, got {type(rec).__name__}")
        spid = rec.get("source_problem_id", "?")
        bad = _unencodable_field(rec)
        if bad is not None:
            raise DatasetError(
                f"{p}: record {i} (source_problem_id={spid}): field '{bad}': text holds a lone UTF-16 "
                f"surrogate (a broken \\u escape) that cannot be encoded as UTF-8"
            )
        try:
            parent = Parent.model_validate(rec)
        except ValidationError as e:
            raise DatasetError(f"{p}: record {i} (source_problem_id={spid}): {_format_validation(e)}") from None
        except RecursionError:
            raise DatasetError(f"{p}: record {i} (source_problem_id={spid}): nested too deeply") from None
        if parent.key in seen:
            raise DatasetError(
                f"{p}: record {i} (source_problem_id={spid}): field 'source_problem_id': duplicate parent "
                f"key (source={parent.source!r}, year={parent.year!r}) already used by record {seen[parent.key]}"
            )
        seen[parent.key] = i
        parents.append(parent)
    if not parents:
        raise DatasetError(f"{p}: the file holds no parents")
    return Dataset(name or p.stem, p, parents, digest, wrapped, obj)


def load_split(split: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Find and load a test set: :func:`resolve_split` then :func:`load_dataset`.

    Args:
        split: ``application``, ``transfer`` (named so in turn keys and reports) or a path to a
            test-set JSON file (named by its stem).
        data_dir: where the official files are (see :func:`resolve_split`).

    Raises:
        DatasetError: not found, or not a valid test set.
    """
    return load_dataset(resolve_split(split, data_dir), name=official_name(split))
