"""Knowledge points: the second stage of test-set construction (paper section 2.1, ``build decompose``).

A teacher LLM names the knowledge points (KPs) each sub-problem needs; near-duplicate names are merged
into canonical KPs by their embeddings (:mod:`studybench.testset.embedding`). See
:mod:`studybench.testset.knowledge.points` for the files written and the resume rules.
"""

from studybench.testset.knowledge.points import (
    KP_TYPES,
    DecomposeSettings,
    KnowledgePoint,
    canonicalise,
    decompose,
    parse_kps,
    sub_key,
)

__all__ = ["KP_TYPES", "DecomposeSettings", "KnowledgePoint", "canonicalise", "decompose", "parse_kps", "sub_key"]
