"""On-disk cache of stage-2 embeddings, by content: a second audit of the same corpus embeds nothing.

**Keys.** An embedding is stored under ``sha256(json([model id, text]))`` where the text is the exact
string that was embedded (no normalisation of ours: anything the model's tokenizer does not do
itself could change the vector) and the *model id* (:func:`model_id`) is the sha256 of everything
that decides the vector besides the text: the bytes of every weight and buffer (so the precision,
``float32`` or ``bfloat16``, and any other checkpoint change the id), the modules and their settings
(``repr``: pooling, normalisation, lower-casing, int8 quantised layers, whose packed integer weights
and scales are hashed too), ``max_seq_length`` (truncation) and the device type
(``cpu`` or ``cuda``: their arithmetic differs in the last bits). The ONNX backend's encoder has an id
of its own (``OnnxSentenceEncoder.embedding_cache_id``). A new model, backend, precision, truncation
or text gives a new key; nothing is ever served across them.

**Layout.** ``<root>/<model id[:32]>/<pack>.emb``: each audit that embeds something writes one *pack*
holding all the vectors it computed, written atomically (:func:`studybench.files.atomic_write_bytes`:
temporary file, fsync, rename) under a fresh name (the time and a random part), so concurrent audits
never overwrite each other. A pack is ``MAGIC``, ``dim`` and ``count`` (little-endian uint32), the
``count`` raw 32-byte keys, ``count x dim`` little-endian float32 values, and the sha256 of all the
preceding bytes. When a model's folder holds more than :data:`MAX_PACKS` packs, the next store merges
them into one.

**Reading** goes through :func:`studybench.files.read_user_bytes` (a regular file only, bounded size).
A pack is trusted only whole: the size must match its header, the trailing sha256 must match, every
value must be finite and every vector of unit length (the audit stores only L2-normalised vectors;
an empty text is never stored). Anything else (a torn write, a flipped bit, a file of another
program) is skipped with a warning, its vectors are computed again, and the bad file is removed.

The root is ``$STUDYBENCH_EMBEDDING_CACHE`` or the user cache directory (``.../studybench/embeddings``,
e.g. ``~/.cache/studybench/embeddings`` on Linux), as the judge's verdict cache
(:func:`studybench.llm_judge.default_cache_root`); ``audit contamination --embedding-cache DIR`` sets it
and ``--no-embedding-cache`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import struct
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studybench.audit.common import require_extra
from studybench.files import MAX_DATA_BYTES, InputFileError, atomic_write_bytes, cache_dir, read_user_bytes

__all__ = ["MAGIC", "MAX_PACKS", "EmbeddingCache", "default_embedding_cache_root", "embedding_key", "model_id"]

MAGIC = b"SBEMB01\n"
"""First bytes of a pack file (format version 1)."""

MAX_PACKS = 16
"""Packs per model folder above which a store merges them into one."""

_HEAD = struct.Struct("<II")
_SUFFIX = ".emb"
_UNIT_TOL = 1e-3

log = logging.getLogger(__name__)


def default_embedding_cache_root() -> Path:
    """Where embeddings are cached unless a directory is given.

    Returns:
        ``$STUDYBENCH_EMBEDDING_CACHE`` if set, else ``<user cache dir>/studybench/embeddings``.
    """
    return cache_dir("embeddings", "STUDYBENCH_EMBEDDING_CACHE")


def model_id(model: Any) -> str | None:
    """The identity of a sentence-transformers model for the cache keys (see the module docstring).

    Hashes the bytes of its ``state_dict`` (about 90 MB for MiniLM: a fraction of a second).

    Args:
        model: a loaded sentence-transformers model (any ``torch.nn.Module`` with ``encode``), or an
            object with an ``embedding_cache_id()`` method (the ONNX encoder,
            :class:`studybench.embedding_backend.OnnxSentenceEncoder`: its id hashes ``"onnx"``, the
            export's key and file, the truncation and the onnxruntime version, so torch and onnx vectors
            never share a key).

    Returns:
        sha256 hex, or ``None`` for an object that is neither (it cannot be identified, so it is not cached).
    """
    own = getattr(model, "embedding_cache_id", None)  # the ONNX encoder (studybench.embedding_backend)
    if callable(own):
        return str(own())
    state_dict = getattr(model, "state_dict", None)
    if not callable(state_dict):
        return None
    torch = require_extra("torch")
    h = hashlib.sha256()
    device = str(getattr(model, "device", "cpu")).split(":")[0]
    meta = [type(model).__qualname__, repr(model), getattr(model, "max_seq_length", None), device]
    h.update(json.dumps(meta, ensure_ascii=True, default=str, allow_nan=False).encode("ascii"))
    for name, tensor in state_dict().items():
        if not isinstance(tensor, torch.Tensor):
            _hash_state_extra(h, name, tensor, torch)
            continue
        t = tensor.detach().to("cpu").contiguous()
        h.update(json.dumps([name, str(t.dtype), list(t.shape)], allow_nan=False).encode("ascii"))
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _hash_state_extra(h: Any, name: str, value: Any, torch: Any) -> None:
    """Hash a ``state_dict`` entry that is not a plain tensor: the packed (weight, bias) of a dynamically
    quantised linear layer, its dtype; quantised tensors by their integers, scales and zero points."""
    if isinstance(value, tuple | list):
        for k, v in enumerate(value):
            _hash_state_extra(h, f"{name}.{k}", v, torch)
        return
    if not isinstance(value, torch.Tensor):
        h.update(json.dumps([name, type(value).__name__, str(value)], allow_nan=False).encode("ascii"))
        return
    t = value.detach().to("cpu")
    if t.is_quantized:
        qs = t.qscheme()
        if qs in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            params = [float(t.q_scale()), int(t.q_zero_point())]
        else:
            params = [t.q_per_channel_scales().tolist(), t.q_per_channel_zero_points().tolist(), t.q_per_channel_axis()]
        h.update(json.dumps([name, str(t.dtype), list(t.shape), str(qs), params], allow_nan=False).encode("ascii"))
        t = t.int_repr()
    else:
        h.update(json.dumps([name, str(t.dtype), list(t.shape)], allow_nan=False).encode("ascii"))
    t = t.contiguous()
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def embedding_key(model: str, text: str) -> bytes:
    """The raw 32-byte key of one text's embedding under one :func:`model_id`."""
    blob = json.dumps([model, text], ensure_ascii=True, allow_nan=False)  # lone surrogates escaped, never an error
    return hashlib.sha256(blob.encode("ascii")).digest()


def _pack(keys: Sequence[bytes], vectors: Any) -> bytes:
    np = require_extra("numpy")
    vec = np.ascontiguousarray(vectors, dtype="<f4")
    body = MAGIC + _HEAD.pack(vec.shape[1], vec.shape[0]) + b"".join(keys) + vec.tobytes()
    return body + hashlib.sha256(body).digest()


def _unpack(data: bytes) -> tuple[list[bytes], Any] | str:
    """``(keys, vectors)`` of a pack, or what is wrong with it."""
    np = require_extra("numpy")
    n_head = len(MAGIC) + _HEAD.size
    if len(data) < n_head + 32 or not data.startswith(MAGIC):
        return "not an embedding pack"
    dim, count = _HEAD.unpack_from(data, len(MAGIC))
    if dim == 0 or len(data) != n_head + 32 * count + 4 * dim * count + 32:
        return "size does not match its header (a torn or truncated write)"
    if hashlib.sha256(data[:-32]).digest() != data[-32:]:
        return "checksum mismatch (a damaged file)"
    keys = [data[n_head + 32 * k : n_head + 32 * (k + 1)] for k in range(count)]
    vec = np.frombuffer(data, dtype="<f4", count=dim * count, offset=n_head + 32 * count).reshape(count, dim)
    if not np.isfinite(vec).all():
        return "values that are not finite"
    if count and np.abs(np.linalg.norm(vec, axis=1) - 1.0).max() > _UNIT_TOL:
        return "vectors that are not of unit length"
    return keys, vec.astype(np.float32)


class EmbeddingCache:
    """Embeddings by :func:`embedding_key`, in packs under ``<root>/<model id[:32]>/``.

    Args:
        root: the cache directory (created on first write); ``None``: :func:`default_embedding_cache_root`.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_embedding_cache_root()
        self.rejected: list[str] = []
        """``"FILE: problem"`` of every pack skipped as untrustworthy by this object."""

    def folder(self, model: str) -> Path:
        """The folder of one model's packs."""
        return self.root / model[:32]

    def _packs(self, model: str) -> list[Path]:
        try:
            return sorted(p for p in self.folder(model).iterdir() if p.name.endswith(_SUFFIX))
        except OSError:  # no folder yet (or unreadable: a miss, computed again)
            return []

    def _read(self, path: Path) -> tuple[list[bytes], Any] | None:
        try:
            got = _unpack(read_user_bytes(path, limit=MAX_DATA_BYTES))
        except InputFileError as e:
            got = e.problem
        if isinstance(got, str):
            self.rejected.append(f"{path}: {got}")
            log.warning("embedding cache: skipping %s: %s; its vectors are computed again", path, got)
            try:
                if not path.is_symlink() and path.is_file():
                    path.unlink()
            except OSError:
                pass
            return None
        return got

    def lookup(self, model: str, keys: Sequence[bytes]) -> dict[bytes, Any]:
        """The cached vectors of those ``keys`` that are cached.

        Args:
            model: :func:`model_id` of the model.
            keys: :func:`embedding_key` of each text.

        Returns:
            ``{key: float32 vector}`` for the keys found in a valid pack.
        """
        wanted = set(keys)
        found: dict[bytes, Any] = {}
        if not wanted:
            return found
        for path in self._packs(model):
            got = self._read(path)
            if got is None:
                continue
            for k, row in zip(got[0], got[1], strict=True):
                if k in wanted:
                    found[k] = row
            if len(found) == len(wanted):
                break
        return found

    def store(self, model: str, keys: Sequence[bytes], vectors: Any) -> Path | None:
        """Write one pack of new vectors (and merge the folder's packs when there are too many).

        Args:
            model: :func:`model_id` of the model.
            keys: :func:`embedding_key` of each vector.
            vectors: float32 array ``(len(keys), dim)`` of L2-normalised rows.

        Returns:
            The pack written, or ``None`` when there was nothing to write.

        Raises:
            OSError: the pack cannot be written (the caller decides whether that matters).
        """
        if not keys:
            return None
        path = self._new_name(model)
        atomic_write_bytes(path, _pack(keys, vectors))
        packs = self._packs(model)
        if len(packs) > MAX_PACKS:
            self._merge(model, packs)
        return path

    def _new_name(self, model: str) -> Path:
        """A fresh pack name: the time and a random part (concurrent audits never write the same file)."""
        return self.folder(model) / f"{time.time_ns():020d}-{secrets.token_hex(8)}{_SUFFIX}"

    def _merge(self, model: str, packs: list[Path]) -> None:
        np = require_extra("numpy")
        merged: dict[bytes, Any] = {}
        for p in packs:
            got = self._read(p)
            if got is not None:
                merged.update(zip(got[0], got[1], strict=True))
        if merged:
            target = self._new_name(model)
            atomic_write_bytes(target, _pack(list(merged), np.stack(list(merged.values()))))
        else:
            target = None
        for p in packs:
            if p != target:
                try:
                    p.unlink()
                except OSError:
                    pass
