"""Retrieval of textbook fragments for knowledge points (paper section 2.1, ``build retrieve``).

BM25 and sentence embeddings (:mod:`studybench.testset.embedding`), fused by reciprocal rank fusion,
with a factor for books outside a KP's domain. See :mod:`studybench.testset.retrieval.hybrid`.
"""

from studybench.testset.retrieval.hybrid import (
    KP,
    RETRIEVAL,
    HybridIndex,
    RetrieveError,
    RetrieveSettings,
    load_fragments,
    load_kps,
    retrieve,
    rrf_fuse,
)

__all__ = [
    "KP",
    "RETRIEVAL",
    "HybridIndex",
    "RetrieveError",
    "RetrieveSettings",
    "load_fragments",
    "load_kps",
    "retrieve",
    "rrf_fuse",
]
