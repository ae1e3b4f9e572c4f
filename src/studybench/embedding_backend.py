"""The runtimes a sentence-embedding model can run on: torch (the default) or onnxruntime (opt-in).

Every command that embeds (``audit contamination``, ``build retrieve``, ``build decompose``) takes
``--embedding-backend torch|onnx``; the library loaders take ``backend=`` (:func:`check_backend`).
``torch`` runs the sentence-transformers model as loaded. ``onnx`` (the ``onnx`` extra: onnxruntime and
onnx) runs the same model, float32, exported once to ONNX (:func:`onnx_encoder`): on a 2-core AVX2 CPU
one retrieval query embeds about 1.6x faster (``bench/query_embed_bench.py``), the audit's long batched
texts about 1.06x (``bench/audit_bench.py --compare-backend onnx``), and the vectors agree with torch's to
a cosine above 0.9999. It is never chosen silently: a verdict must not depend on what
happens to be installed, so vectors of the two backends are never mixed (the audit's embedding cache and
``build retrieve``'s fragment cache key on the backend) and the outputs record which one ran.

**Export** (offline, nothing downloaded): the loaded sentence-transformers model (its transformer,
pooling and normalisation modules) is traced by ``torch.onnx.export`` (the TorchScript exporter, opset
17, dynamic batch and sequence axes) into ``<root>/<key[:32]>/model.onnx`` beside ``model.json`` (the
key, the ONNX file's sha256, the input names). The *key* (:func:`model_digest`) is the sha256 of the
model's modules (``repr``) and the bytes of every weight, the torch version and the export format, so a
changed checkpoint gets a new export and an unchanged one is exported once: the export is written into a
fresh temporary folder that is then renamed into place (a concurrent export of the same model loses the
rename and uses the winner's), and a folder whose ``model.json`` does not match it or its ONNX file is
exported again. The root is ``$STUDYBENCH_ONNX_CACHE`` or ``<user cache dir>/studybench/onnx``.

**Inference**: the texts are tokenised by the sentence-transformers model itself (its tokenizer,
lower-casing and ``max_seq_length`` truncation), sorted by length in characters and batched as
``SentenceTransformer.encode`` does; onnxruntime's CPU provider runs with ``torch.get_num_threads()``
intra-op threads (so ``--torch-threads N`` sets both runtimes).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studybench.files import InputFileError, atomic_write_text, cache_dir, dumps_json, read_json

__all__ = [
    "token_lengths",
    "BACKENDS",
    "ONNX_EXTRA_HINT",
    "EmbeddingBackendMissing",
    "OnnxSentenceEncoder",
    "check_backend",
    "default_onnx_cache_root",
    "model_digest",
    "onnx_encoder",
    "require_backend",
]

BACKENDS = ("torch", "onnx")
"""Accepted ``backend`` values; ``torch`` is the default everywhere."""

ONNX_EXTRA_HINT = "pip install 'studybench[onnx]'"

EXPORT_FORMAT = 1
"""Version of the export layout and wrapper (part of the key: a change re-exports)."""

OPSET = 17

_ONNX = "model.onnx"
_META = "model.json"


class EmbeddingBackendMissing(RuntimeError):
    """The packages of the requested embedding backend (onnxruntime, onnx) are not installed."""



def token_lengths(model: Any, texts: Sequence[str]) -> list[int]:
    """Each text's length in the model's word pieces, capped at its ``max_seq_length`` (the padded length
    that decides a batch's cost); the length in characters for a model without a ``tokenizer``.

    The audit's stage 2 and ``build retrieve``'s fragments batch texts in this order: sorting by characters
    left 75% of the tokens of the audit bench workload's batches as padding (LaTeX and CJK text have many
    more word pieces per character than prose); by word pieces, 8%.

    Args:
        model: a sentence-transformers model (or anything with ``tokenizer`` and ``max_seq_length``).
        texts: the texts.

    Returns:
        One count per text.
    """
    tok = getattr(model, "tokenizer", None)
    if tok is None or not callable(tok) or not texts:
        return [len(t) for t in texts]
    cap = getattr(model, "max_seq_length", None) or None
    enc = tok(list(texts), add_special_tokens=True, truncation=cap is not None, max_length=cap,
              return_attention_mask=False, return_token_type_ids=False)
    return [len(ids) for ids in enc["input_ids"]]

def check_backend(backend: str) -> str:
    """The backend name, checked.

    Args:
        backend: ``"torch"`` or ``"onnx"``.

    Returns:
        ``backend`` unchanged.

    Raises:
        ValueError: any other value (the message names ``--embedding-backend``).
    """
    if backend not in BACKENDS:
        raise ValueError(f"--embedding-backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def require_backend(backend: str) -> str:
    """Check, before any work, that a backend can run: its name, and for ``onnx`` its packages.

    Args:
        backend: ``"torch"`` or ``"onnx"``.

    Returns:
        ``backend`` unchanged.

    Raises:
        ValueError: an unknown backend.
        EmbeddingBackendMissing: ``onnx`` and onnxruntime or onnx is not installed (the message names
            ``studybench[onnx]``).
    """
    import importlib.util

    if check_backend(backend) == "onnx":
        missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
        if missing:
            raise EmbeddingBackendMissing(
                f"--embedding-backend onnx needs {' and '.join(missing)} (not installed): {ONNX_EXTRA_HINT}")
    return backend


def default_onnx_cache_root() -> Path:
    """Where exported ONNX models are kept unless a directory is given.

    Returns:
        ``$STUDYBENCH_ONNX_CACHE`` if set, else ``<user cache dir>/studybench/onnx``.
    """
    return cache_dir("onnx", "STUDYBENCH_ONNX_CACHE")


def _import_onnx() -> tuple[Any, Any]:
    """``(onnxruntime, torch)``, or :class:`EmbeddingBackendMissing` naming the extra."""
    try:
        import onnx  # noqa: F401  (torch.onnx.export needs it)
        import onnxruntime
        import torch
    except ImportError as e:
        raise EmbeddingBackendMissing(
            f"--embedding-backend onnx needs onnxruntime and onnx ({e}): {ONNX_EXTRA_HINT}") from None
    return onnxruntime, torch


def model_digest(model: Any) -> str:
    """The key of a sentence-transformers model's ONNX export (see the module docstring).

    Args:
        model: a loaded float32 sentence-transformers model (a ``torch.nn.Module``).

    Returns:
        sha256 hex of the export format, the torch version, the modules' ``repr`` and every weight's bytes.
    """
    import torch

    h = hashlib.sha256()
    h.update(json.dumps([EXPORT_FORMAT, OPSET, torch.__version__, type(model).__qualname__, repr(model)],
                        ensure_ascii=True, default=str, allow_nan=False).encode("ascii"))
    for name, t in model.state_dict().items():
        t = t.detach().to("cpu").contiguous()
        h.update(json.dumps([name, str(t.dtype), list(t.shape)], allow_nan=False).encode("ascii"))
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _features(model: Any, texts: list[str]) -> dict[str, Any]:
    """The model's tokenised inputs of ``texts`` (tensors only)."""
    prep = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers >= 6: preprocess
    return {k: v for k, v in prep(texts).items() if hasattr(v, "shape")}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _valid_export(folder: Path, key: str) -> dict[str, Any] | None:
    """``model.json`` of a complete export of ``key`` in ``folder``, else ``None``."""
    try:
        meta = read_json(folder / _META)
        onnx_path = folder / _ONNX
        if (not isinstance(meta, dict) or meta.get("key") != key or meta.get("format") != EXPORT_FORMAT
                or onnx_path.is_symlink() or not onnx_path.is_file() or meta.get("sha256") != _sha256(onnx_path)):
            return None
    except (InputFileError, OSError):
        return None
    return meta


def _export(model: Any, folder: Path, key: str, torch: Any) -> dict[str, Any]:
    """Export ``model`` into a temporary folder beside ``folder`` and rename it into place."""
    import warnings

    sample = _features(model, ["a first sentence", "and a second, longer one"])
    names = list(sample)

    class _Wrapper(torch.nn.Module):  # positional inputs -> the model's features dict -> sentence_embedding
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            return self.model(dict(zip(names, inputs, strict=True)))["sentence_embedding"]

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{secrets.token_hex(6)}"
    tmp.mkdir()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notices
            torch.onnx.export(_Wrapper().eval(), tuple(sample[n] for n in names), str(tmp / _ONNX), dynamo=False,
                              input_names=names, output_names=["sentence_embedding"], opset_version=OPSET,
                              dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names},
                                            "sentence_embedding": {0: "batch"}})
        with open(tmp / _ONNX, "rb") as f:
            os.fsync(f.fileno())
        meta = {"format": EXPORT_FORMAT, "key": key, "sha256": _sha256(tmp / _ONNX), "inputs": names, "opset": OPSET}
        atomic_write_text(tmp / _META, dumps_json(meta) + "\n")
        if folder.exists() and _valid_export(folder, key) is None:
            shutil.rmtree(folder, ignore_errors=True)  # a torn or foreign folder: replaced
        try:
            os.rename(tmp, folder)
        except OSError:  # another process renamed its export first: use it
            won = _valid_export(folder, key)
            if won is None:
                raise
            meta = won
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return meta


class OnnxSentenceEncoder:
    """A sentence-transformers model run by onnxruntime; ``encode`` as ``SentenceTransformer.encode``.

    Made by :func:`onnx_encoder`. ``tokenizer``, ``max_seq_length`` (settable: it truncates) and
    ``get_embedding_dimension`` are the sentence-transformers model's, so code written for one takes the other.

    Attributes:
        backend: ``"onnx"``.
        path: the ONNX file.
        key: :func:`model_digest` of the exported model.
        exported: whether loading this encoder exported the model (``False``: the cached export was used).
        device: ``"cpu"``.
    """

    backend = "onnx"
    device = "cpu"

    def __init__(self, model: Any, path: Path, meta: dict[str, Any], exported: bool, session: Any) -> None:
        self.model = model
        self.path = path
        self.key: str = meta["key"]
        self.file_sha256: str = meta["sha256"]
        self.exported = exported
        self.session = session
        self._inputs = [i.name for i in session.get_inputs()]

    @property
    def tokenizer(self) -> Any:
        """The sentence-transformers model's tokenizer."""
        return self.model.tokenizer

    @property
    def max_seq_length(self) -> int:
        """Texts are truncated to this many word pieces (the model's setting)."""
        return self.model.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.model.max_seq_length = value

    def get_embedding_dimension(self) -> int:
        """The embedding size."""
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter() or 0)

    get_sentence_embedding_dimension = get_embedding_dimension

    def embedding_cache_id(self) -> str:
        """What identifies this encoder's vectors in an embedding cache: the export, its runtime, the truncation.

        Returns:
            sha256 hex, never equal to a torch model's id (:func:`studybench.audit.embedcache.model_id`).
        """
        import onnxruntime

        meta = ["onnx", self.key, self.file_sha256, self.max_seq_length, onnxruntime.__version__, "cpu"]
        return hashlib.sha256(json.dumps(meta, allow_nan=False).encode("ascii")).hexdigest()

    def encode(self, sentences: Sequence[str], batch_size: int = 32, *, normalize_embeddings: bool = False,
               convert_to_numpy: bool = True, show_progress_bar: bool = False, **_: Any) -> Any:
        """Embeddings of ``sentences``, in their order.

        Args:
            sentences: the texts.
            batch_size: texts per onnxruntime run (sorted by length in characters, longest first, as
                sentence-transformers batches them).
            normalize_embeddings: L2-normalise each row.
            convert_to_numpy: ignored (always a numpy array).
            show_progress_bar: ignored.

        Returns:
            A float32 numpy array ``(len(sentences), dim)``.
        """
        import numpy as np

        texts = list(sentences)
        out = np.zeros((len(texts), self.get_embedding_dimension()), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda k: -len(texts[k]))
        for start in range(0, len(order), max(1, batch_size)):
            part = order[start:start + batch_size]
            feats = _features(self.model, [texts[k] for k in part])
            run = self.session.run(None, {n: feats[n].numpy().astype(np.int64) for n in self._inputs})[0]
            out[part] = run
        if normalize_embeddings and len(texts):
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.where(norms > 0, norms, 1.0)
        return out


def onnx_encoder(model: Any, *, cache_dir: str | os.PathLike[str] | None = None) -> OnnxSentenceEncoder:
    """The ONNX version of a loaded sentence-transformers model: exported once, then read from the cache.

    Args:
        model: a float32 sentence-transformers model on the CPU, as loaded (before any change of
            ``max_seq_length``, which the encoder applies at tokenisation and may be set on it afterwards).
        cache_dir: the export cache (default :func:`default_onnx_cache_root`).

    Returns:
        :class:`OnnxSentenceEncoder`; its ``exported`` says whether this call exported.

    Raises:
        EmbeddingBackendMissing: onnxruntime or onnx is not installed (the message names ``studybench[onnx]``).
        RuntimeError: the export or onnxruntime failed (the message says which file).
    """
    ort, torch = _import_onnx()
    key = model_digest(model)
    root = Path(cache_dir) if cache_dir is not None else default_onnx_cache_root()
    folder = root / key[:32]
    meta = _valid_export(folder, key)
    exported = meta is None
    if meta is None:
        try:
            meta = _export(model, folder, key, torch)
        except Exception as e:  # the exporter's many failure types: one message naming the folder
            raise RuntimeError(f"cannot export the embedding model to ONNX in {folder}: {type(e).__name__}: {e}") from None
    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, int(torch.get_num_threads()))
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        session = ort.InferenceSession(str(folder / _ONNX), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own error types
        raise RuntimeError(f"onnxruntime cannot load {folder / _ONNX}: {type(e).__name__}: {e}") from None
    return OnnxSentenceEncoder(model, folder / _ONNX, meta, exported, session)
