"""Contamination audit between training data and evaluation sets (Physics-R1; StudyBench paper 2.3, appendix H).

Three stages, each narrowing the candidates of the previous one:

1. word n-gram Jaccard (MinHash LSH candidate search, :mod:`.minhash`, then the exact Jaccard) and
   containment, :mod:`.ngrams`;
2. embedding cosine (sentence-transformers, the ``audit`` extra), :mod:`.embeddings`, with the
   embeddings cached on disk by content, :mod:`.embedcache`;
3. an optional LLM judge on the union of the stage-1 and stage-2 candidates: the LLM judge's client
   (:class:`studybench.llm_judge.LLMJudge`) with the duplicate task (:data:`.duplicates.DUPLICATE_TASK`),
   so it retries, re-asks malformed replies and caches verdicts like ``studybench judge``.

:mod:`.contamination` runs them (:func:`.contamination.run_audit`), :mod:`.reports` writes the outputs,
:mod:`.common` holds what the stages share. Records are read by :mod:`.records`; the
``studybench audit contamination`` command lives in :mod:`studybench.cli.audit`.
"""
