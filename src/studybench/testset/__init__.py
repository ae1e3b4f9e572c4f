"""Test-set construction, the StudyBench way (paper section 2.1), and the corpus hygiene around it.

The stages, one sub-package each, in pipeline order (``studybench build ...`` and ``studybench corpus
...`` are thin layers over them; each stage writes JSON Lines that the next reads, under one work
directory):

=====================  ==========================================  =========================================
sub-package            stage                                       entry points
=====================  ==========================================  =========================================
:mod:`.corpus`         books, clean-up, redaction, exercise pool,  :func:`~.corpus.build_fragments`,
                       chunks, fragments, Table 1/7 statistics     :func:`~.corpus.ingest_cnxml`, ...
:mod:`.knowledge`      knowledge points per sub-problem            :func:`~.knowledge.decompose`
:mod:`.retrieval`      BM25 + embeddings, RRF                      :func:`~.retrieval.retrieve`
:mod:`.verification`   teacher scores of (KP, fragment) pairs      :func:`~.verification.verify`
:mod:`.guidance`       method-only guidance behind a leakage gate  :func:`~.guidance.run_guide`
:mod:`.filters`        Naive Reachability and Capability Filters   :func:`~.filters.run_retry`,
                                                                   :func:`~.filters.run_capability`
=====================  ==========================================  =========================================

Shared by several stages: :mod:`.llmstage` (every LLM stage: concurrency, re-asks, the digest-keyed
reply cache, resume, budgets, usage) and :mod:`.embedding` (the one sentence-embedding loader).

Imports flow one way (``lint-imports``, pyproject.toml): ``filters`` over ``guidance`` over
``verification`` over ``knowledge | retrieval`` over ``corpus`` over ``llmstage | embedding``.

This module re-exports the stages' entry points lazily: ``import studybench.testset.corpus`` does not
load the filters (which load the evaluation harness).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - for type checkers and documentation tools
    from studybench.testset import (
        corpus,
        embedding,
        filters,
        guidance,
        knowledge,
        llmstage,
        retrieval,
        verification,
    )
    from studybench.testset.corpus import build_fragments, export_chunks, ingest_cnxml
    from studybench.testset.filters import run_capability, run_retry
    from studybench.testset.guidance import check_leakage, run_guide
    from studybench.testset.knowledge import decompose
    from studybench.testset.retrieval import retrieve

_EXPORTS = {
    "corpus": None,
    "knowledge": None,
    "retrieval": None,
    "verification": None,
    "guidance": None,
    "filters": None,
    "llmstage": None,
    "embedding": None,
    "build_fragments": "corpus",
    "export_chunks": "corpus",
    "ingest_cnxml": "corpus",
    "decompose": "knowledge",
    "retrieve": "retrieval",
    "run_guide": "guidance",
    "check_leakage": "guidance",
    "run_retry": "filters",
    "run_capability": "filters",
}

__all__ = [
    "build_fragments",
    "check_leakage",
    "corpus",
    "decompose",
    "embedding",
    "export_chunks",
    "filters",
    "guidance",
    "ingest_cnxml",
    "knowledge",
    "llmstage",
    "retrieval",
    "retrieve",
    "run_capability",
    "run_guide",
    "run_retry",
    "verification",
]


def __getattr__(name: str) -> Any:
    """Import a stage (or one of its entry points) on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = _EXPORTS[name]
    if home is None:
        return importlib.import_module(f"{__name__}.{name}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
