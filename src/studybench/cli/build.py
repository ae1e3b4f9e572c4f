"""``studybench build ...``: construct a test set the StudyBench way (paper section 2.1).

Each stage is a thin layer over a function in :mod:`studybench.testset` and writes JSON Lines that the next
stage reads, under one work directory: ``fragments`` -> ``decompose`` -> ``retrieve`` -> ``verify`` ->
``guide`` -> ``retry``, and ``capability`` for the Capability Filter.
"""

from __future__ import annotations

import typer

__all__ = ["build_app"]

build_app = typer.Typer(
    help="Build a test set: textbook `fragments`, knowledge-point `decompose` (teacher LLM), hybrid "
    "`retrieve` (BM25 + embeddings, RRF), `verify` (teacher scores 0-3), `guide` (method-only guidance "
    "behind a leakage gate), `retry` (the Naive Reachability Filter) and `capability` (the Capability Filter).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
from studybench.cli import build_retr  # noqa: E402,F401,I001  (fragments, retrieve; imported in pipeline order: the help lists them so)
from studybench.cli import build_llm  # noqa: E402,F401  (decompose, verify)
from studybench.cli import build_guide  # noqa: E402,F401  (guide, retry, capability)
