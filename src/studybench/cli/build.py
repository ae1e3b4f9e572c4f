"""``studybench build ...``: construct a test set the StudyBench way (paper section 2.1).

Each stage is a thin layer over a function in :mod:`studybench.testset` and writes JSON Lines that the next
stage reads, under one work directory: ``fragments`` -> ``decompose`` -> ``retrieve`` -> ``verify`` ->
``guide`` -> ``retry``, and ``capability`` for the Capability Filter.

The command functions live in :mod:`studybench.cli.build_retr` (fragments, retrieve),
:mod:`studybench.cli.build_llm` (decompose, verify) and :mod:`studybench.cli.build_guide` (guide, retry,
capability) as plain functions; :data:`BUILD_COMMANDS` registers them here, explicitly and in the order
``studybench build --help`` lists them. A new stage is one more entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from studybench.cli.build_guide import build_capability, build_guide, build_retry
from studybench.cli.build_llm import decompose_cmd, verify_cmd
from studybench.cli.build_retr import fragments_cmd, retrieve_cmd

__all__ = ["BUILD_COMMANDS", "build_app"]

BUILD_COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("fragments", fragments_cmd),
    ("retrieve", retrieve_cmd),
    ("decompose", decompose_cmd),
    ("verify", verify_cmd),
    ("guide", build_guide),
    ("retry", build_retry),
    ("capability", build_capability),
)
"""(command name, function) in the order the help lists them; each function's docstring is its help."""

build_app = typer.Typer(
    help="Build a test set: textbook `fragments`, knowledge-point `decompose` (teacher LLM), hybrid "
    "`retrieve` (BM25 + embeddings, RRF), `verify` (teacher scores 0-3), `guide` (method-only guidance "
    "behind a leakage gate), `retry` (the Naive Reachability Filter) and `capability` (the Capability Filter).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for _name, _fn in BUILD_COMMANDS:
    build_app.command(_name)(_fn)
