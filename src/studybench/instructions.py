"""The instruction layers: Instructions with Answer (single-turn, multi-sub) and without Answer.

Paper section 2.1 and appendix J. The official ``train_data/`` files are JSON lists of records::

    {"messages": [{"role": "user", "content": ...}, ...],   # the chat so far, last turn a user turn
     "solution": ..., "answer": "\\boxed{...}", "answer_type": "NV", "type_sequence": "",
     "metadata": {"source": ..., "source_problem_id": ..., "source_chapter": ..., "sub_discipline": ...}}

* **single** (``verifiable_instr.json``, 867 records): one user turn, a gold answer.
* **multi_sub** (``verifiable_instr_multi_subs.json``, 553 records): one record per sub-problem of a
  textbook exercise, already flattened into a conversation: the earlier sub-problems' user turns,
  each followed by an assistant turn holding that sub-problem's gold answer, then this sub-problem's
  user turn. Consecutive records of one exercise form a **chain** (each record extends the one before).
* **without_answer** (``unverifiable_instr.json``, 646 records): a user turn and a worked solution,
  ``answer`` empty.

:func:`load_instructions` reads and checks a file; structural errors (not a list, a record that is
not an object, a field of the wrong type, a conversation that does not alternate user / assistant
ending with a user turn) raise :class:`InstructionError` naming file, record and field. A gold
answer the verifier cannot use (no box, slots that do not match ``type_sequence``, an unknown
``answer_type``) does not stop the load: :attr:`Instruction.gold_problem` names it, and exports leave
such records out and say so. :func:`instruction_parents` turns Instructions with Answer into test-set
:class:`~studybench.records.Parent` records, so the evaluation protocol runs on them unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from studybench.files import (
    MAX_DATA_BYTES,
    InputFileError,
    decode_utf8,
    jsonl_lines,
    parse_json,
    read_user_bytes,
)
from studybench.records import Parent, SubProblem

__all__ = [
    "LAYER_FILES",
    "LAYER_KINDS",
    "PAPER_COUNTS",
    "Instruction",
    "InstructionError",
    "InstructionLayer",
    "InstructionMetadata",
    "LayerKind",
    "find_instruction_files",
    "instruction_parents",
    "load_instructions",
]

LayerKind = Literal["single", "multi_sub", "without_answer"]
LAYER_KINDS: tuple[LayerKind, ...] = ("single", "multi_sub", "without_answer")

LAYER_FILES: dict[LayerKind, str] = {
    "single": "verifiable_instr.json",
    "multi_sub": "verifiable_instr_multi_subs.json",
    "without_answer": "unverifiable_instr.json",
}
"""Official file name of each layer inside ``train_data/`` (a ``NAME.head.json`` is a partial copy)."""

PAPER_COUNTS: dict[str, int] = {
    "single": 867,
    "multi_sub": 553,
    "with_answer": 1420,
    "without_answer": 646,
    "application_parents": 88,
    "application_sub_problems": 109,
    "transfer_parents": 90,
    "transfer_sub_problems": 280,
}
"""The paper's counts (Table 1): records per instruction layer, parents and sub-problems per test set."""


class InstructionError(ValueError):
    """An instruction file that cannot be used; the message names file, record and field."""


class InstructionMetadata(BaseModel):
    """Where an instruction comes from (``metadata`` of a record)."""

    model_config = ConfigDict(extra="allow")

    source: str
    source_problem_id: str
    source_chapter: str = ""
    sub_discipline: str = ""

    @field_validator("source_problem_id", "source_chapter", mode="before")
    @classmethod
    def _id_str(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return "" if v is None else v


class Message(BaseModel):
    """One chat turn."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant"]
    content: str


class Instruction(BaseModel):
    """One record of an instruction layer.

    Attributes:
        messages: the chat so far; the last turn is the user turn to answer.
        solution: the worked solution from the book.
        answer: the gold answer, ``\\boxed{...}`` per slot (empty without an answer).
        answer_type: one of NV EX EQ TUP IN MC TF QL ALT (empty without an answer).
        type_sequence: slot types of a TUP / ALT answer, as the file spells them.
        metadata: source, source_problem_id, source_chapter, sub_discipline.
    """

    model_config = ConfigDict(extra="allow")

    messages: list[Message]
    solution: str = ""
    answer: str = ""
    answer_type: str = ""
    type_sequence: str | list[str] = ""
    metadata: InstructionMetadata

    @field_validator("solution", "answer", "answer_type", mode="before")
    @classmethod
    def _none_empty(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("type_sequence", mode="before")
    @classmethod
    def _ts_none(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("messages")
    @classmethod
    def _alternate(cls, v: list[Message]) -> list[Message]:
        turns = [m for m in v if m.role != "system"]
        if not turns:
            raise ValueError("no user turn")
        for i, m in enumerate(turns):
            want = "user" if i % 2 == 0 else "assistant"
            if m.role != want:
                raise ValueError(f"turn {i} is {m.role!r}; expected {want!r} (turns alternate user / assistant from a user turn)")
        if turns[-1].role != "user":
            raise ValueError("the last turn must be a user turn (the one to answer)")
        if not turns[-1].content.strip():
            raise ValueError("the last user turn is empty")
        return v

    @property
    def has_answer(self) -> bool:
        """Whether the record carries a gold answer (Instructions with Answer)."""
        return bool(self.answer.strip())

    @property
    def question(self) -> str:
        """The user turn to answer (the last one)."""
        return self.messages[-1].content

    @property
    def sub_index(self) -> int:
        """How many earlier sub-problems the conversation holds (0 for a single-turn record)."""
        return sum(1 for m in self.messages if m.role == "assistant")

    @property
    def type_sequence_str(self) -> str:
        """``type_sequence`` as a comma string (``"EQ,NV"``)."""
        ts = self.type_sequence
        return ",".join(t.strip() for t in ts) if isinstance(ts, list) else ts.strip()

    def gold(self, problem_id: str = "") -> SubProblem:
        """The gold as a sub-problem record (the verifier's input).

        Args:
            problem_id: the id to give it (default: ``source_problem_id``).

        Raises:
            ValueError: a gold the verifier cannot use (see :attr:`gold_problem`).
        """
        try:
            return SubProblem(problem_id=problem_id or self.metadata.source_problem_id, problem=self.question,
                              solution=self.solution, answer=self.answer, answer_type=self.answer_type,
                              type_sequence=self.type_sequence)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise ValueError(msg if not loc or msg.startswith(loc) else f"{loc}: {msg}") from None

    @property
    def gold_problem(self) -> str | None:
        """Why the gold answer cannot be scored (``None``: it can, or the record has no answer)."""
        if not self.has_answer:
            return None
        try:
            self.gold()
        except ValueError as e:
            return str(e)
        return None


@dataclass
class InstructionLayer:
    """A loaded instruction file.

    Attributes:
        kind: ``single``, ``multi_sub`` or ``without_answer``.
        path: the file.
        records: the records in file order.
        sha256: of the file's bytes.
        head: whether the file is a partial copy (``*.head.json``).
    """

    kind: LayerKind
    path: Path
    records: list[Instruction]
    sha256: str
    head: bool = False
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)

    def gold_problems(self) -> list[tuple[int, str]]:
        """(record index, problem) for every record whose gold answer cannot be scored."""
        return [(i, p) for i, r in enumerate(self.records) if (p := r.gold_problem) is not None]

    def describe_problem(self, index: int, problem: str) -> str:
        """One line naming file, record and problem (for warnings)."""
        r = self.records[index]
        return f"{self.path}: record {index} (source_problem_id={r.metadata.source_problem_id}): {problem}"


def _kind_of(path: Path, records: list[Any]) -> LayerKind:
    name = path.name.lower()
    if "unverifiable" in name or "without" in name:
        return "without_answer"
    if "multi" in name:
        return "multi_sub"
    if "verifiable" in name or "single" in name:
        return "single"
    dicts = [r for r in records if isinstance(r, dict)]
    if dicts and not any(str(r.get("answer") or "").strip() for r in dicts):
        return "without_answer"
    if any(isinstance(r.get("messages"), list) and len(r["messages"]) > 1 for r in dicts):
        return "multi_sub"
    return "single"


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _surrogate_at(raw: Any) -> str | None:
    """The path of the first string (key or value) in ``raw`` holding a lone surrogate, else ``None``."""
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return where or "(record)"
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                name = f"{where}.{k}" if where else str(k)
                try:
                    str(k).encode("utf-8")
                except UnicodeEncodeError:
                    return f"{where}.(key)" if where else "(key)"
                stack.append((name, x))
        elif isinstance(v, list):
            stack.extend((f"{where}[{j}]", x) for j, x in reversed(list(enumerate(v))))
    return None


def _loc(err: dict[str, Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(err["loc"]))


def load_instructions(path: str | os.PathLike[str], kind: LayerKind | None = None) -> InstructionLayer:
    """Read and check one instruction file (paper 2.1; appendix J).

    Args:
        path: a JSON list of records, a ``{"data": [...]}`` wrapper, or JSON Lines.
        kind: the layer (default: from the file name, else from the records).

    Returns:
        The layer, records in file order.

    Raises:
        InstructionError: the file is missing, unreadable, not UTF-8 or not JSON; a record is not
            an object or has a missing or mistyped field; a conversation does not alternate user /
            assistant or does not end on a user turn; a record of a with-answer layer has no
            answer. The message names the file, the record (index and ``source_problem_id``) and the field.
    """
    p = Path(path)
    try:
        data = read_user_bytes(p, limit=MAX_DATA_BYTES)
        text = decode_utf8(data, p)
    except InputFileError as e:
        raise InstructionError(f"{p}: {e.problem}") from None
    try:  # strict JSON (files.parse_json): NaN, 1e999999, a 400-digit integer are refused, naming the field
        obj: Any = parse_json(text, p)
    except InputFileError as e:
        if not e.syntax:
            raise InstructionError(str(e)) from None
        obj = []  # not one JSON text: JSON Lines
        for n, line in jsonl_lines(text):
            try:
                obj.append(parse_json(line, p, line=n))
            except InputFileError as e:
                if e.syntax:
                    raise InstructionError(f"{p}: line {n}: not valid JSON (expected a JSON list or JSON Lines)") from None
                raise InstructionError(str(e)) from None
    if isinstance(obj, dict) and isinstance(obj.get("data"), list):
        obj = obj["data"]
    if not isinstance(obj, list):
        raise InstructionError(f"{p}: expected a JSON list of records, got {type(obj).__name__}")
    layer_kind = kind or _kind_of(p, obj)
    if layer_kind not in LAYER_KINDS:
        raise InstructionError(f"kind must be one of {', '.join(LAYER_KINDS)}, got {layer_kind!r}")
    records: list[Instruction] = []
    maybe_surrogates = _SURROGATE_ESCAPE.search(text) is not None
    for i, raw in enumerate(obj):
        if not isinstance(raw, dict):
            raise InstructionError(f"{p}: record {i}: expected an object, got {type(raw).__name__}")
        meta = raw.get("metadata")
        spid = meta.get("source_problem_id") if isinstance(meta, dict) else None
        spid = str(spid).encode("utf-8", "backslashreplace").decode() if isinstance(spid, (str, int)) else None
        who = f"{p}: record {i}" + (f" (source_problem_id={spid})" if spid is not None else "")
        if maybe_surrogates and (where := _surrogate_at(raw)):
            raise InstructionError(f"{who}: field {where}: a lone surrogate (an unpaired \\uD800-\\uDFFF escape): "
                                   "not text that can be written out")
        try:
            rec = Instruction.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise InstructionError(f"{who}: field {_loc(err) or '(record)'}: {msg}") from None
        if layer_kind != "without_answer" and not rec.has_answer:
            raise InstructionError(f"{who}: field answer: empty in a layer of Instructions with Answer")
        records.append(rec)
    sha = hashlib.sha256(data).hexdigest()
    return InstructionLayer(kind=layer_kind, path=p, records=records, sha256=sha, head=".head." in p.name)


def find_instruction_files(train_dir: str | os.PathLike[str]) -> dict[LayerKind, Path]:
    """The instruction files present in a ``train_data/`` directory.

    Args:
        train_dir: the directory (e.g. ``$STUDYBENCH_DATA/train``).

    Returns:
        ``{kind: path}`` for each layer found under its official name, or its ``.head.json`` copy
        when the full file is absent.
    """
    d = Path(train_dir)
    out: dict[LayerKind, Path] = {}
    for kind, name in LAYER_FILES.items():
        for cand in (d / name, d / name.replace(".json", ".head.json")):
            if cand.is_file():
                out[kind] = cand
                break
    return out


def _parent_from_chain(chain: list[Instruction]) -> Parent:
    first = chain[0].metadata
    spid = first.source_problem_id
    subs = [SubProblem(problem_id=f"{spid}.{j + 1}", problem=r.question, solution=r.solution, answer=r.answer,
                       answer_type=r.answer_type, type_sequence=r.type_sequence) for j, r in enumerate(chain)]
    return Parent(source=first.source, source_problem_id=spid, problem_type=first.sub_discipline,
                  source_chapter=first.source_chapter, sub_problems=subs)


def _extends(rec: Instruction, prev: Instruction) -> bool:
    m = rec.messages
    return (len(m) == len(prev.messages) + 2 and m[: len(prev.messages)] == prev.messages
            and m[-2].role == "assistant" and m[-2].content.strip() == prev.answer.strip()
            and rec.metadata.source == prev.metadata.source
            and rec.metadata.source_problem_id == prev.metadata.source_problem_id)


def instruction_parents(layer: InstructionLayer) -> tuple[list[Parent], list[str]]:
    """Instructions with Answer as test-set parents, so the evaluation protocol runs on them.

    A single-turn record becomes a single-question parent. The records of a multi-sub chain become
    one parent whose sub-problems are the chain's user turns in order (``problem_id``
    ``<source_problem_id>.<n>``); in the protocol the model then sees its own earlier replies, not
    the gold answers the file's conversations hold. Parent ids repeated within a source get the
    chapter prepended (``ch03/P3.5``).

    Args:
        layer: a ``single`` or ``multi_sub`` layer.

    Returns:
        (parents in file order, notes): the notes count records left out: golds the verifier cannot
        use (a chain is cut before such a record; the records after it in the chain are counted
        apart), and chains whose first sub-problems are not in the file (a ``.head.json`` copy).

    Raises:
        InstructionError: ``layer`` has no answers (``without_answer``).
    """
    if layer.kind == "without_answer":
        raise InstructionError(f"{layer.path}: Instructions without Answer have no gold answers to score")
    bad = {i for i, _ in layer.gold_problems()}
    chains: list[list[Instruction]] = []
    orphans = cut = 0
    prev: Instruction | None = None
    dropped: Instruction | None = None  # the last record of a chain cut by an unusable gold
    for i, rec in enumerate(layer.records):
        if rec.sub_index == 0:
            chains.append([rec])
        elif chains and prev is not None and chains[-1][-1] is prev and _extends(rec, prev):
            chains[-1].append(rec)
        else:
            if dropped is not None and _extends(rec, dropped):
                cut += 1
                dropped = rec
            else:
                orphans += 1
                dropped = None
            prev = None
            continue
        prev, dropped = rec, None
        if i in bad:  # an unusable gold ends its chain here; the turns before it still count
            chains[-1].pop()
            if not chains[-1]:
                chains.pop()
            prev, dropped = None, rec
    seen: dict[tuple[str, str], int] = {}
    for c in chains:
        key = (c[0].metadata.source, c[0].metadata.source_problem_id)
        seen[key] = seen.get(key, 0) + 1
    parents: list[Parent] = []
    taken: set[tuple[str, str]] = set()
    last_n: dict[tuple[str, str], int] = {}  # the last suffix tried per ident: linear, not quadratic, in repeats
    for c in chains:
        m, r = c[0].metadata, c[0]
        uid = m.source_problem_id
        if seen[(m.source, uid)] > 1:
            ident = f"{m.source_chapter}/{uid}" if m.source_chapter else uid
            uid, n = ident, last_n.get((m.source, ident), 1)
            if n > 1:
                uid = f"{ident}#{n}"
            while (m.source, uid) in taken:
                n += 1
                uid = f"{ident}#{n}"
            last_n[(m.source, ident)] = n
        taken.add((m.source, uid))
        if len(c) == 1 and layer.kind == "single":
            parent = Parent(source=m.source, source_problem_id=uid, problem=r.question, solution=r.solution,
                            answer=r.answer, answer_type=r.answer_type, type_sequence=r.type_sequence,
                            problem_type=m.sub_discipline, source_chapter=m.source_chapter)
        else:
            parent = _parent_from_chain(c)
            parent.source_problem_id = uid
        parents.append(parent)
    notes = []
    if bad:
        notes.append(f"{len(bad)} record(s) left out: gold answer the verifier cannot use")
    if cut:
        notes.append(f"{cut} record(s) left out: they follow an unusable gold answer in their chain")
    if orphans:
        notes.append(f"{orphans} record(s) left out: their earlier sub-problems are not in the file"
                     + (" (a .head.json copy)" if layer.head else ""))
    return parents, notes

