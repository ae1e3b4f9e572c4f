"""The one registry of export formats: what ``studybench export ...`` writes, and from what.

Every format the package can write for other tools is one :class:`ExportFormat` entry of :data:`FORMATS`:
its name (the ``studybench export NAME`` command), what it reads (a run directory, the instruction
layers, the book corpus), the library function that writes it and, where the writer takes rows, the
function that gathers them, named as ``"module:function"`` so that looking a format up imports nothing
until it is used. The writers themselves stay with the data they know:

=============  ============================  ======================================================
format         reads                         writer
=============  ============================  ======================================================
``attempts``   a run directory               :func:`studybench.analysis.attempts.write_attempts`
``chunks``     the redacted book corpus      :func:`studybench.testset.corpus.chunks.export_chunks`
``verl``       the instruction layers        :func:`studybench.methods.exports.export_verl`
``trl``        the instruction layers        :func:`studybench.methods.exports.export_trl`
``csv``        the instruction layers        :func:`studybench.methods.exports.export_csv`
=============  ============================  ======================================================

The command line (:mod:`studybench.cli.export`) registers one command per entry, in this order, and
calls the writer it finds here. Adding a format is one entry here, its writer, and its command (see
``docs/recipes/export-format.md``). Paper appendix J (training material for self-evolution methods).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["FORMATS", "ExportFormat", "export_format", "write_export"]

Source = Literal["run", "instructions", "corpus"]


@dataclass(frozen=True)
class ExportFormat:
    """One export format.

    Attributes:
        name: the format's name and its command, ``studybench export NAME``.
        summary: one line: what is written, in which shape, for which tool.
        reads: what it is made from: ``run`` (a run directory), ``instructions`` (the instruction
            layers, :mod:`studybench.instructions`) or ``corpus`` (the redacted books).
        writer: ``"module:function"`` of the library function that writes the format.
        rows: ``"module:function"`` that gathers what the writer takes (the run's rows, the loaded
            instruction layers); empty when the writer reads its source itself.
        output: ``file`` or ``directory``: what the writer's first argument (``out``) names.
        extras: the optional install extra the writer needs (``pip install 'studybench[EXTRA]'``);
            empty when none.
    """

    name: str
    summary: str
    reads: Source
    writer: str
    rows: str = ""
    output: Literal["file", "directory"] = "file"
    extras: str = ""

    def load_writer(self) -> Callable[..., Any]:
        """The writer function (its module is imported now).

        Returns:
            The function named by :attr:`writer`.
        """
        return _resolve(self.writer)

    def load_rows(self) -> Callable[..., Any] | None:
        """The function that gathers the writer's input, or ``None`` when the writer reads its source.

        Returns:
            The function named by :attr:`rows`, or ``None``.
        """
        return _resolve(self.rows) if self.rows else None


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    fn = getattr(importlib.import_module(module), name)
    if not callable(fn):
        raise TypeError(f"{ref} is not a function")
    return fn


_INSTRUCTION_LAYERS = "studybench.methods.exports:load_layers"

FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("attempts", "a run as one tidy table: one row per parent x sub-problem x seed x attempt "
                 "(CSV, Parquet or JSON Lines)", "run",
                 writer="studybench.analysis.attempts:write_attempts",
                 rows="studybench.analysis.attempts:attempt_rows"),
    ExportFormat("chunks", "the redacted books cut into token chunks, JSON Lines and a manifest (e.g. for Bonito)",
                 "corpus", writer="studybench.testset.corpus.chunks:export_chunks"),
    ExportFormat("verl", "verl RL parquet: train / validation, split by exercise", "instructions",
                 writer="studybench.methods.exports:export_verl", rows=_INSTRUCTION_LAYERS, output="directory",
                 extras="train"),
    ExportFormat("trl", "a Hugging Face DatasetDict in TRL's conversational prompt-only format", "instructions",
                 writer="studybench.methods.exports:export_trl", rows=_INSTRUCTION_LAYERS, output="directory",
                 extras="train"),
    ExportFormat("csv", "the agent-loop CSV (EvoSkill's layout), train / val / test per book", "instructions",
                 writer="studybench.methods.exports:export_csv", rows=_INSTRUCTION_LAYERS),
)}
"""Every export format by name, in the order ``studybench export --help`` lists them."""


def export_format(name: str) -> ExportFormat:
    """The registered format called ``name``.

    Args:
        name: a key of :data:`FORMATS`.

    Returns:
        Its :class:`ExportFormat`.

    Raises:
        ValueError: no format has that name (the message lists the ones that exist).
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"no export format {name!r}; known: {', '.join(FORMATS)}") from None


def write_export(name: str, *args: Any, **kwargs: Any) -> Any:
    """Write format ``name``: call its writer with these arguments.

    ``write_export("csv", "out.csv", layers=load_layers(None, ["single"]))`` is
    :func:`studybench.methods.exports.export_csv` with the same arguments.

    Args:
        name: a key of :data:`FORMATS`.
        *args: the writer's positional arguments.
        **kwargs: the writer's keyword arguments.

    Returns:
        What the writer returns.

    Raises:
        ValueError: an unknown format (and whatever the writer raises).
    """
    return export_format(name).load_writer()(*args, **kwargs)
