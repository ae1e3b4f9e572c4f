"""Contamination audit, issue 27: the vectorised MinHash LSH agrees with datasketch's, and stage 2's
embedding cache (a second audit embeds nothing; a bad cache file is never trusted; keys follow model,
precision, truncation and text)."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import pytest
from _support import require_extra

from studybench.audit.contamination import AuditConfig, run_audit
from studybench.audit.ngrams import exact_jaccard, shingle_sets, stage1_jaccard

require_extra("audit", "datasketch", "numpy", module_level=True)

import numpy as np  # noqa: E402

from studybench.audit.minhash import (  # noqa: E402
    lsh_bands,
    lsh_candidates,
    minhash_signatures,
    reference_candidates,
    reference_signatures,
)
from studybench.audit.records import AuditRecord  # noqa: E402


@pytest.fixture(autouse=True)
def _own_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDYBENCH_EMBEDDING_CACHE", str(tmp_path / "emb-cache"))
    monkeypatch.setenv("STUDYBENCH_JUDGE_CACHE", str(tmp_path / "judge-cache"))


def _workload(seed: int, n_eval: int = 40, n_train: int = 200) -> tuple[list[str], list[str]]:
    """Eval texts, and training texts that are edited copies of them at many strengths, unrelated
    texts, short texts (fewer words than a shingle), repeated texts and empty ones."""
    rng = random.Random(seed)
    vocab = [f"w{k}" for k in range(300)] + ["力", "学", "$\\frac{1}{2}$"]
    evals = [" ".join(rng.choices(vocab, k=rng.randint(3, 120))) for _ in range(n_eval)] + ["", "   "]
    train: list[str] = []
    for _ in range(n_train):
        mode = rng.random()
        src = rng.choice(evals).split()
        if mode < 0.6:
            share = rng.choice([0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6])
            train.append(" ".join(rng.choice(vocab) if rng.random() < share else w for w in src))
        elif mode < 0.8:
            train.append(" ".join(rng.choices(vocab, k=rng.randint(1, 150))))
        elif mode < 0.9:
            train.append(rng.choice(train or [""]))
        else:
            train.append("")
    return train, evals


# -- stage 1: vectorised MinHash LSH --------------------------------------------------------------------------


def _schemes() -> list[str | None]:
    import inspect

    import datasketch

    # datasketch >= 2.0 has schemes (default affine32, and the older legacy one); before, only legacy
    return [None, "legacy"] if "scheme" in inspect.signature(datasketch.MinHash).parameters else [None]


@pytest.mark.parametrize("scheme", _schemes())
@pytest.mark.parametrize(("seed", "num_perm", "mh_seed"), [(0, 128, 1), (1, 64, 7), (2, 200, 123)])
def test_vectorised_signatures_equal_datasketch_minhash(seed: int, num_perm: int, mh_seed: int, scheme: str | None) -> None:
    train, evals = _workload(seed)
    ts, es = shingle_sets(train, evals, 5)
    # ids past 32 bits and past 64 bits, a negative one; a set larger than one chunk
    sets = [*ts, *es, frozenset({2**33 + 5, 9, 2**32 - 1}), frozenset({2**70 + 3, -5, 4}), frozenset(range(70_000))]
    got = minhash_signatures(sets, num_perm, mh_seed, scheme=scheme)
    want = reference_signatures(sets, num_perm, mh_seed, scheme=scheme)
    assert got.shape == (len(sets), num_perm)
    empty = minhash_signatures([frozenset()], num_perm, mh_seed, scheme=scheme)[0]
    for k, (s, m) in enumerate(zip(sets, want, strict=True)):
        if s:
            assert np.array_equal(got[k], m.hashvalues), k
            assert got[k].dtype == m.hashvalues.dtype
        else:
            assert m is None and np.array_equal(got[k], empty)


@pytest.mark.parametrize("seed", [3, 4, 5])
@pytest.mark.parametrize("threshold", [0.1, 0.25, 0.4, 0.7])
def test_vectorised_lsh_candidates_equal_a_datasketch_index(seed: int, threshold: float) -> None:
    train, evals = _workload(seed)
    ts, es = shingle_sets(train, evals, 5)
    got = lsh_candidates(
        minhash_signatures(ts), minhash_signatures(es), lsh_bands(threshold, 128),
        train_rows=[i for i, s in enumerate(ts) if s], eval_rows=[j for j, s in enumerate(es) if s],
    )
    want = reference_candidates(ts, es, threshold)
    assert got == want
    assert sum(map(len, want)) > 10  # the workload has candidates to agree on
    assert not any(got[j] for j, s in enumerate(es) if not s)  # an empty text is never a candidate


def test_stage1_scores_equal_the_datasketch_reference() -> None:
    train, evals = _workload(6, n_eval=60, n_train=400)
    ts, es = shingle_sets(train, evals, 5)
    res = stage1_jaccard(ts, es, 0.5)
    cands = reference_candidates(ts, es, 0.25)
    want = {(i, j): exact_jaccard(ts[i], es[j]) for j, c in enumerate(cands) for i in c}
    assert res.scores == {k: v for k, v in want.items() if v >= 0.3}
    assert res.lsh_candidates == len(want)
    assert sum(v >= 0.5 for v in res.scores.values()) > 10


# -- stage 2: the embedding cache -----------------------------------------------------------------------------


class CountingModel:
    """A deterministic stand-in for a sentence-transformers model: a torch module whose vectors come
    from the text's digest and its weight; counts the texts it embeds. With ``batch_noise`` a vector
    also depends, in its last bits, on the texts batched with it (as a real model's does)."""

    def __new__(cls, dim: int = 8, batch_noise: bool = False) -> Any:
        torch = pytest.importorskip("torch")

        class _Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))
                self.max_seq_length = 256
                self.embedded: list[str] = []

            def get_sentence_embedding_dimension(self) -> int:
                return dim

            def encode(self, texts: list[str], **_: Any) -> Any:
                self.embedded += list(texts)
                rows = []
                for pos, t in enumerate(texts):
                    d = hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest()
                    v = np.frombuffer(d[: dim], dtype=np.uint8).astype(np.float32) + 1.0
                    v = v * self.weight.detach().float().numpy()
                    if batch_noise:
                        v = v + np.float32(1e-6 * (len(texts) + pos % 5))
                    rows.append(v / np.linalg.norm(v))
                return np.stack(rows)

        return _Model()


def _recs(texts: list[str], prefix: str) -> list[AuditRecord]:
    return [AuditRecord(f"{prefix}{i}", t, "f", i, "generic", {"problem": t}) for i, t in enumerate(texts)]


def _pairs(result: Any) -> list[tuple[Any, ...]]:
    return [(p.train, p.eval, p.jaccard, p.containment, p.cosine, tuple(p.stages)) for p in result.pairs]


def test_a_second_audit_embeds_nothing_and_finds_the_same() -> None:
    train, evals = _workload(8)
    model = CountingModel()
    cfg = AuditConfig(cosine_threshold=0.9)
    first = run_audit(_recs(train, "t"), _recs(evals, "e"), cfg, model=model)
    present = [t for t in train + evals if t.strip()]
    distinct = set(present)
    assert len(distinct) < len(present)  # the workload repeats texts
    assert sorted(model.embedded) == sorted(present)  # as without a cache (the same batches); blank ones never
    assert first.stage2 is not None and first.stage2.counts is not None
    assert (first.stage2.counts.embedded, first.stage2.counts.cached) == (len(present), 0)
    assert first.stage2.counts.distinct == len(distinct)
    model.embedded.clear()
    second = run_audit(_recs(train, "t"), _recs(evals, "e"), cfg, model=model)
    assert model.embedded == []
    assert second.stage2 is not None and second.stage2.counts is not None
    assert (second.stage2.counts.embedded, second.stage2.counts.cached) == (0, len(distinct))
    assert _pairs(second) == _pairs(first) and any(p.cosine is not None for p in first.pairs)
    assert np.array_equal(second.stage2.train_emb, first.stage2.train_emb)
    # a third audit with two new texts embeds exactly those
    model.embedded.clear()
    run_audit(_recs([*train, "a new training text about waves"], "t"), _recs([*evals, "a new question"], "e"), cfg,
              model=model)
    assert sorted(model.embedded) == ["a new question", "a new training text about waves"]
    # off: embeds everything, writes nothing
    model.embedded.clear()
    before = sorted(Path(os.environ["STUDYBENCH_EMBEDDING_CACHE"]).rglob("*"))
    off = run_audit(_recs(train, "t"), _recs(evals, "e"), AuditConfig(cosine_threshold=0.9, embedding_use_cache=False),
                    model=model)
    assert len(model.embedded) == len(present) and _pairs(off) == _pairs(first)
    assert sorted(Path(os.environ["STUDYBENCH_EMBEDDING_CACHE"]).rglob("*")) == before


def test_the_cache_changes_no_bit_of_any_vector() -> None:
    """Cold cache: the vectors of an audit without a cache (the same batches). Warm cache: the first
    audit's vectors, repeated texts included."""
    train, evals = _workload(12)
    texts = [*train, *evals]
    model = CountingModel(batch_noise=True)
    from studybench.audit.embedcache import EmbeddingCache
    from studybench.audit.embeddings import embed_corpus, embed_non_empty

    plain = embed_non_empty(model, texts, 16, None)
    cache = EmbeddingCache(os.environ["STUDYBENCH_EMBEDDING_CACHE"])
    cold, _ = embed_corpus(model, texts, batch_size=16, cache=cache)
    first = {}
    for k, t in enumerate(texts):
        first.setdefault(t, k)
    # every first occurrence bit for bit as without the cache; repeats take their first occurrence's vector
    assert all(np.array_equal(cold[k], plain[first[t]]) for k, t in enumerate(texts))
    assert not all(np.array_equal(plain[k], plain[first[t]]) for k, t in enumerate(texts))  # the noise is real
    warm, counts = embed_corpus(model, [texts[-1], *texts[::-1]], batch_size=16, cache=cache)
    assert counts.embedded == 0 and np.array_equal(warm[1:], cold[::-1]) and np.array_equal(warm[0], cold[-1])


def _corruptions() -> dict[str, Any]:
    """Ways a pack can go bad: each a function of (path, the pack's bytes) that damages the file."""
    from studybench.audit.embedcache import MAGIC

    def rewrite(fn: Any) -> Any:
        return lambda p, data: p.write_bytes(fn(data))

    def resealed(fn: Any) -> Any:  # damage the payload, then fix the checksum: values must be checked too
        def go(data: bytes) -> bytes:
            body = fn(bytearray(data[:-32]))
            return bytes(body) + hashlib.sha256(bytes(body)).digest()
        return rewrite(go)

    def set_float(value: float) -> Any:
        def go(body: bytearray) -> bytearray:
            body[-4:] = np.array([value], dtype="<f4").tobytes()
            return body
        return go

    def fifo(p: Path, data: bytes) -> None:
        p.unlink()
        os.mkfifo(p)

    out = {
        "empty file": rewrite(lambda d: b""),
        "truncated": rewrite(lambda d: d[: len(d) // 2]),
        "one byte short": rewrite(lambda d: d[:-1]),
        "one byte more": rewrite(lambda d: d + b"\0"),
        "flipped bit in a vector": rewrite(lambda d: d[:-40] + bytes([d[-40] ^ 1]) + d[-39:]),
        "flipped bit in a key": rewrite(lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:]),
        "flipped bit in the checksum": rewrite(lambda d: d[:-1] + bytes([d[-1] ^ 1])),
        "wrong magic": rewrite(lambda d: b"X" + d[1:]),
        "header count too large": rewrite(lambda d: d[: len(MAGIC) + 4] + (2**31).to_bytes(4, "little") + d[len(MAGIC) + 8:]),
        "text instead": rewrite(lambda d: b'{"not": "a pack"}\n'),
        "NaN with a valid checksum": resealed(set_float(float("nan"))),
        "infinity with a valid checksum": resealed(set_float(float("inf"))),
        "not unit length with a valid checksum": resealed(set_float(7.0)),
        "a directory": lambda p, data: (p.unlink(), p.mkdir()),
    }
    if hasattr(os, "mkfifo"):
        out["a named pipe"] = fifo
    return out


@pytest.mark.parametrize("kind", list(_corruptions()))
def test_a_bad_cache_file_is_never_trusted_and_is_recomputed(kind: str, tmp_path: Path) -> None:
    train, evals = _workload(9, n_eval=10, n_train=30)
    model = CountingModel()
    cfg = AuditConfig(cosine_threshold=0.9, embedding_cache=str(tmp_path / "c"))
    first = run_audit(_recs(train, "t"), _recs(evals, "e"), cfg, model=model)
    packs = sorted((tmp_path / "c").rglob("*.emb"))
    assert len(packs) == 1
    _corruptions()[kind](packs[0], packs[0].read_bytes() if packs[0].is_file() else b"")
    model.embedded.clear()
    again = run_audit(_recs(train, "t"), _recs(evals, "e"), cfg, model=model)
    assert again.stage2 is not None and again.stage2.counts is not None
    assert again.stage2.counts.cached == 0 and again.stage2.counts.embedded == first.stage2.counts.embedded
    assert again.stage2.counts.cache_rejected == 1
    assert _pairs(again) == _pairs(first)
    assert np.array_equal(again.stage2.train_emb, first.stage2.train_emb)
    # the recomputed vectors were stored again: a third audit embeds nothing
    model.embedded.clear()
    third = run_audit(_recs(train, "t"), _recs(evals, "e"), cfg, model=model)
    assert model.embedded == [] and _pairs(third) == _pairs(first)


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    model = CountingModel()
    train, evals = _workload(10, n_eval=5, n_train=10)
    res = run_audit(_recs(train, "t"), _recs(evals, "e"), AuditConfig(embedding_cache=str(blocker / "sub")), model=model)
    assert res.stage2 is not None and res.stage2.counts is not None
    assert res.stage2.counts.cache_error and str(blocker) in res.stage2.counts.cache_error
    assert res.stage2.counts.embedded == sum(bool(t.strip()) for t in train + evals) > 0


def test_cache_keys_follow_model_precision_truncation_and_text() -> None:
    torch = pytest.importorskip("torch")
    from studybench.audit.embedcache import embedding_key, model_id

    base = CountingModel()
    ids = {"base": model_id(base)}
    m = CountingModel()
    assert model_id(m) == ids["base"]  # same weights and settings: same id
    with torch.no_grad():
        m.weight[0] += 1e-6
    ids["weight"] = model_id(m)
    ids["bf16"] = model_id(CountingModel().to(torch.bfloat16))
    m = CountingModel()
    m.max_seq_length = 128
    ids["truncation"] = model_id(m)
    assert len(set(ids.values())) == len(ids)
    keys = {embedding_key(ids["base"], t) for t in ("a text", "a text ", "A text", "a\u00a0text")}
    keys |= {embedding_key(ids["bf16"], "a text"), embedding_key(ids["truncation"], "a text")}
    assert len(keys) == 6
    assert model_id(object()) is None  # not a torch module: never cached


def test_an_object_that_is_not_a_torch_module_is_embedded_without_the_cache(tmp_path: Path) -> None:
    inner = CountingModel()

    class Plain:  # encode only: cannot be identified
        def get_sentence_embedding_dimension(self) -> int:
            return 8

        def encode(self, texts: list[str], **kw: Any) -> Any:
            return inner.encode(texts, **kw)

    train, evals = _workload(11, n_eval=5, n_train=10)
    for _ in range(2):
        res = run_audit(_recs(train, "t"), _recs(evals, "e"), AuditConfig(embedding_cache=str(tmp_path / "c")),
                        model=Plain())
        assert res.stage2 is not None and res.stage2.counts is not None and res.stage2.counts.cached == 0
    assert not (tmp_path / "c").exists()


def test_many_packs_are_merged_and_keep_every_vector(tmp_path: Path) -> None:
    from studybench.audit.embedcache import MAX_PACKS, EmbeddingCache, embedding_key

    cache = EmbeddingCache(tmp_path)
    rng = np.random.default_rng(0)
    keys, vecs = [], []
    for k in range(MAX_PACKS + 3):
        v = rng.normal(size=(2, 4)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        kk = [embedding_key("m", f"text {k} {n}") for n in range(2)]
        cache.store("m" * 40, kk, v)
        keys += kk
        vecs.append(v)
    assert len(list(cache.folder("m" * 40).glob("*.emb"))) <= MAX_PACKS
    got = cache.lookup("m" * 40, keys)
    assert np.array_equal(np.stack([got[k] for k in keys]), np.concatenate(vecs))
    assert cache.rejected == []


# -- stage 2: the opt-in int8 precision (issue 27) ---------------------------------------------------------------


def _linear_model(weight_shift: float = 0.0) -> Any:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.LayerNorm(8))
    with torch.no_grad():
        m[0].weight[0, 0] += weight_shift
    return m


def test_int8_models_are_cached_apart_from_float32_and_from_each_other() -> None:
    """The model id of a dynamically quantised model hashes its packed integer weights: two int8 models whose
    linear weights differ never share cache keys (their weights were skipped before), nor does int8 with float32."""
    from studybench.audit.embedcache import embedding_key, model_id
    from studybench.audit.embeddings import quantize_linear_int8

    f32 = _linear_model()
    q = quantize_linear_int8(f32)
    assert "DynamicQuantizedLinear" in repr(q[0]) and "Dynamic" not in repr(f32[0])  # a copy; f32 unchanged
    assert model_id(q) == model_id(quantize_linear_int8(_linear_model()))  # deterministic
    ids = {model_id(f32), model_id(q), model_id(quantize_linear_int8(_linear_model(0.05)))}
    assert len(ids) == 3
    assert len({embedding_key(i, "a text") for i in ids}) == 3  # type: ignore[arg-type]


def test_int8_is_opt_in_and_cpu_only() -> None:
    from studybench.audit.embeddings import DTYPES, resolve_dtype

    assert "int8" in DTYPES
    assert resolve_dtype("auto", "cpu") in ("float32", "bfloat16") and resolve_dtype("auto", "cuda") == "bfloat16"
    assert resolve_dtype("int8", "cpu") == "int8"
    for device in ("cuda", "cuda:1", "mps"):
        with pytest.raises(ValueError, match="int8.*CPU only"):
            resolve_dtype("int8", device)
        with pytest.raises(ValueError, match="int8"):
            AuditConfig(dtype="int8", device=device).validate()
    AuditConfig(dtype="int8").validate()
    assert AuditConfig(dtype="int8").to_dict()["dtype_used"] == "int8"


def test_texts_are_batched_by_word_pieces_not_characters() -> None:
    """Stage 2 sends texts to the model in order of their word-piece counts (capped at max_seq_length):
    by characters, LaTeX-heavy texts (many pieces per character) were batched with prose and padded it."""
    from studybench.audit.embeddings import embed_non_empty, token_lengths

    class Tokenizer:
        def __call__(self, texts: list[str], **kw: Any) -> dict[str, list[list[int]]]:
            cap = kw.get("max_length") if kw.get("truncation") else None
            ids = [[0] * (2 + 4 * t.count("$") + len(t.split())) for t in texts]  # "$" costs many pieces
            return {"input_ids": [x[:cap] if cap else x for x in ids]}

    rng = random.Random(3)
    texts = [" ".join(["word"] * rng.randint(1, 60)) for _ in range(150)]
    texts += ["$x$ " * rng.randint(1, 12) for _ in range(150)]
    texts += ["", "  "]
    rng.shuffle(texts)
    model = CountingModel()
    model.tokenizer = Tokenizer()
    model.max_seq_length = 40
    lengths = dict(zip(texts, token_lengths(model, texts), strict=True))
    assert max(lengths.values()) == 40  # capped
    out = embed_non_empty(model, texts, 8, None)
    sent = [lengths[t] for t in model.embedded]
    assert sent == sorted(sent) and len(sent) == 300  # by word pieces; blank texts never sent
    assert sorted(len(t) for t in model.embedded) != [len(t) for t in model.embedded]  # not by characters
    for k, t in enumerate(texts):  # each row is its text's vector, wherever it was batched
        assert np.allclose(out[k], model.encode([t])[0], atol=1e-6) if t.strip() else not out[k].any()
    plain = CountingModel()  # no tokenizer: by characters, as before
    embed_non_empty(plain, texts, 8, None)
    assert [len(t) for t in plain.embedded] == sorted(len(t) for t in plain.embedded)
