"""Benchmark and recall check of ``studybench build retrieve`` (issue 15 item 4).

**Speed.** On a work directory holding ``fragments.jsonl`` (e.g. ``build fragments`` of the OpenStax
University Physics corpus): the index build time (BM25 indexing; the fragment embeddings separately, since
they are computed once and cached) for the corpus and for a corpus of about ``--tokens`` (6M) tokens made by
repeating it, and the median latency of one hybrid query (query embedding + BM25 top 200 + dense top 200 +
RRF + top 30) on each, of the query embedding alone, and of a query whose vector was computed beforehand
(BM25, cosine, top-k and fusion only). Targets: index build <= 20 s, median hybrid query <= 20 ms. The embeddings of the
repeated corpus are the original ones tiled (identical texts; embedding them again would only repeat the
measured throughput, which is reported as fragments/s so the cost can be scaled).

**Recall.** With ``--labels FILE`` (JSON Lines: ``kp``, ``name``, ``relevant``: fragment ids judged
relevant by hand), recall@10 of a relevant fragment for BM25 only, dense only and fused: of the labelled
KPs with a relevant fragment in the judged pool (the union of the three top 10s), the share with one among
the top 10 of each ranking. The KPs are the
Transfer Set's own ``knowledge_points`` (``--split``), so no LLM is involved.

    python bench/retrieval_bench.py --work DIR [--split transfer] [--labels bench/data/retrieval_labels.jsonl]
        [--tokens 6000000] [--queries 200] [--sample 50 --seed 15 --dump FILE] [--out bench.json]
        [--torch-threads N] [--batch N ...] [--int8] [--compare-backend onnx]

``--torch-threads N`` sets torch's intra-op threads before anything is embedded (default: torch's own,
one per core). On a loaded 2-core machine two threads made one query's embedding ~20x slower than one
thread (OpenMP threads waiting on a busy core) while batch throughput was about the same; the report
records the count used.

**Batched queries** (issue 27): the same queries served in batches of ``--batch N`` (repeatable; default
8, 32 and all of them) through :meth:`HybridIndex.search_many` (one embedding call per batch); reported
as milliseconds per query (the batch's time over its size) with the ratio to one query at a time measured
in the same run, and the share of queries whose top ``top_n`` is the same as one at a time.

**int8** (``--int8``): the same with the model's linear layers dynamically quantised to int8
(``load_embedder(quantize="int8")``, torch, offline): the fragments are embedded again with it (cached
apart), latencies and their ratio to float32 in the same run, and the agreement of its rankings with
float32's on the bench's queries (overlap of the dense and fused top 10, same first fragment), also with
float32 fragment embeddings and int8 query embeddings; with ``--labels``, its recall@10 beside float32's.

**Embedding backend** (``--compare-backend onnx``): the same with ``load_embedder(backend="onnx")`` (the
package's opt-in onnxruntime path; its fragment embeddings computed once and cached apart, ``+onnx``): the
query embedding alone and the hybrid query, one at a time (interleaved with torch) and batched, the ratios
to torch in the same run, the agreement of the rankings, and with ``--labels`` both recalls@10.

``--dump FILE`` writes, for a seeded sample of ``--sample`` KPs, the union of the three rankings' top 10
(fragment id, section, first characters) for labelling by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from studybench.datasets import load_dataset, resolve_split
from studybench.files import atomic_write_text, dumps_json
from studybench.testset.embedding import load_embedder
from studybench.testset.retrieval.hybrid import (
    HybridIndex,
    RetrieveSettings,
    kp_query,
    kps_from_dataset,
    load_fragments,
    rrf_fuse,
)


def load_avg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def estimate_tokens(frags: list[dict[str, Any]]) -> int:
    """Tokens by the built-in tokenizer (``studybench.tokens``)."""
    from studybench.tokens import load_tokenizer

    tok = load_tokenizer(None)
    return sum(len(tok.spans(f["text"])) for f in frags)


def time_queries(ix: HybridIndex, queries: list[str]) -> list[float]:
    """Milliseconds per hybrid query, one query at a time."""
    out = []
    for q in queries:
        t0 = time.perf_counter()
        ix.search(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def time_batched(ix: HybridIndex, queries: list[str], n: int) -> tuple[float, list[list[str]]]:
    """(milliseconds per query, the candidates' fragment ids) serving ``queries`` in batches of ``n``."""
    total = 0.0
    found: list[list[str]] = []
    for start in range(0, len(queries), n):
        chunk = queries[start : start + n]
        t0 = time.perf_counter()
        rows = ix.search_many(chunk)
        total += time.perf_counter() - t0
        found += [[c["fragment"] for c in r] for r in rows]
    return total * 1000 / len(queries), found


def batched(ix: HybridIndex, queries: list[str], sizes: list[int], res: dict[str, Any], prefix: str = "") -> None:
    """One query at a time, then in batches of each size, in the same run: ms per query and ratios."""
    single = []
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        single.append([c["fragment"] for c in ix.search(q)])
        lat.append((time.perf_counter() - t0) * 1000)
    res[f"{prefix}single_query_ms_mean"] = round(statistics.fmean(lat), 2)
    res[f"{prefix}single_query_ms_median"] = round(statistics.median(lat), 2)
    for n in sizes:
        n = min(n, len(queries))
        ms, found = time_batched(ix, queries, n)
        res[f"{prefix}batch{n}_query_ms"] = round(ms, 2)
        res[f"{prefix}batch{n}_ratio_to_single_mean"] = round(statistics.fmean(lat) / ms, 2)
        res[f"{prefix}batch{n}_same_candidates"] = round(sum(a == b for a, b in zip(single, found, strict=True)) / len(queries), 3)


def overlap(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(len(a), 1)


def agreement(ref: HybridIndex, other: HybridIndex, queries: list[str]) -> dict[str, float]:
    """Mean top-10 overlap of the dense and fused rankings, and the share with the same first fragment."""
    dense, fused, top1 = [], [], []
    for q in queries:
        a, b = rankings(ref, q), rankings(other, q)
        dense.append(overlap(a["dense"], b["dense"]))
        fused.append(overlap(a["fused"], b["fused"]))
        top1.append(a["fused"][:1] == b["fused"][:1])
    return {"dense_top10_overlap": round(statistics.fmean(dense), 3), "fused_top10_overlap": round(statistics.fmean(fused), 3),
            "fused_same_first": round(statistics.fmean(top1), 3)}


def recall_at_10(ix: HybridIndex, kps: list[Any], labels: list[dict[str, Any]]) -> dict[str, Any]:
    """Recall@10 of a hand-judged relevant fragment, per ranking (BM25, dense, fused)."""
    by_kp = {k.id: k for k in kps}
    hits = {"bm25": 0, "dense": 0, "fused": 0}
    n = 0
    for lab in labels:
        if "kp" not in lab:  # the file's _meta line
            continue
        kp = by_kp.get(lab["kp"])
        if kp is None or not lab["relevant"]:  # recall over KPs with a relevant fragment in the pool
            continue
        n += 1
        r = rankings(ix, kp_query(kp))
        rel = set(lab["relevant"])
        for m in hits:
            hits[m] += bool(rel & set(r[m]))
    return {m: round(h / n, 3) for m, h in hits.items()} | {"kps": n, "labelled": sum("kp" in lab for lab in labels)}


def int8_report(frags: list[dict[str, Any]], digest: str, work: Path, queries: list[str], ix: HybridIndex,
                sizes: list[int], kps: list[Any], labels: list[dict[str, Any]] | None) -> dict[str, Any]:
    """float32 and int8 in the same run: latencies, ratios, agreement of rankings, recall@10."""
    embed8 = load_embedder(None, quantize="int8")
    res: dict[str, Any] = {"load_avg_start": load_avg()}
    t0 = time.perf_counter()
    ix8 = HybridIndex(frags, digest, RetrieveSettings(quantize="int8"), cache_dir=work / "cache", embed=embed8)
    res["int8_index_s"] = round(time.perf_counter() - t0, 2)
    res["int8_embeddings_cached"] = ix8.cache_hit
    ix8.search(queries[0])  # warm-up (model load)
    assert ix.embed is not None
    for name, fn in (("float32", ix.embed), ("int8", embed8)):
        ms = []
        for q in queries:
            t0 = time.perf_counter()
            fn([q])
            ms.append((time.perf_counter() - t0) * 1000)
        res[f"{name}_query_embed_ms_median"] = round(statistics.median(ms), 2)
    batched(ix, queries, sizes, res, "float32_")
    batched(ix8, queries, sizes, res, "int8_")
    res["int8_single_speedup_mean"] = round(res["float32_single_query_ms_mean"] / res["int8_single_query_ms_mean"], 2)
    res["agreement_int8_vs_float32"] = agreement(ix, ix8, queries)
    mixed = HybridIndex.__new__(HybridIndex)  # float32 fragment embeddings, int8 query embeddings
    mixed.__dict__.update(ix.__dict__)
    mixed.embed = embed8
    res["agreement_int8_queries_float32_index"] = agreement(ix, mixed, queries)
    if labels is not None:
        res["recall_at_10_float32"] = recall_at_10(ix, kps, labels)
        res["recall_at_10_int8"] = recall_at_10(ix8, kps, labels)
        res["recall_at_10_int8_queries_float32_index"] = recall_at_10(mixed, kps, labels)
    res["load_avg_end"] = load_avg()
    return res


def backend_report(frags: list[dict[str, Any]], digest: str, work: Path, queries: list[str], ix: HybridIndex,
                   sizes: list[int], kps: list[Any], labels: list[dict[str, Any]] | None, backend: str) -> dict[str, Any]:
    """torch and another embedding backend (the package's ``--embedding-backend``) in the same run: query
    embedding and hybrid query latencies, their ratios, agreement of the rankings, recall@10."""
    other = load_embedder(None, backend=backend)
    res: dict[str, Any] = {"backend": backend, "load_avg_start": load_avg()}
    t0 = time.perf_counter()
    ixo = HybridIndex(frags, digest, RetrieveSettings(embed_backend=backend), cache_dir=work / "cache", embed=other)
    res[f"{backend}_index_s"] = round(time.perf_counter() - t0, 2)
    res[f"{backend}_embeddings_cached"] = ixo.cache_hit
    ixo.search(queries[0])  # warm-up (model load)
    assert ix.embed is not None
    ms: dict[str, list[float]] = {"torch": [], backend: []}
    for q in queries:  # interleaved, so that a change of load hits both
        for name, fn in (("torch", ix.embed), (backend, other)):
            t0 = time.perf_counter()
            fn([q])
            ms[name].append((time.perf_counter() - t0) * 1000)
    for name, xs in ms.items():
        res[f"{name}_query_embed_ms_median"] = round(statistics.median(xs), 2)
    res["query_embed_ratio"] = round(statistics.median(ms["torch"]) / statistics.median(ms[backend]), 2)
    batched(ix, queries, sizes, res, "torch_")
    batched(ixo, queries, sizes, res, f"{backend}_")
    res["single_query_ratio_median"] = round(res["torch_single_query_ms_median"] / res[f"{backend}_single_query_ms_median"], 2)
    res[f"agreement_{backend}_vs_torch"] = agreement(ix, ixo, queries)
    if labels is not None:
        res["recall_at_10_torch"] = recall_at_10(ix, kps, labels)
        res[f"recall_at_10_{backend}"] = recall_at_10(ixo, kps, labels)
    res["load_avg_end"] = load_avg()
    return res


def speed(frags: list[dict[str, Any]], digest: str, work: Path, queries: list[str], tokens_target: int,
          embed: Any, sizes: list[int]) -> dict[str, Any]:
    res: dict[str, Any] = {"load_avg_start": load_avg(), "fragments": len(frags)}
    n_tok = estimate_tokens(frags)
    res["tokens"] = n_tok
    t0 = time.perf_counter()
    HybridIndex(frags, digest, RetrieveSettings(use_dense=False))
    res["bm25_index_s"] = round(time.perf_counter() - t0, 2)
    cache = work / "cache"
    t0 = time.perf_counter()
    ix = HybridIndex(frags, digest, RetrieveSettings(), cache_dir=cache, embed=embed)
    res["embeddings_cached"] = ix.cache_hit
    res["hybrid_index_s"] = round(time.perf_counter() - t0, 2)
    if not ix.cache_hit:
        res["embed_fragments_per_s"] = round(len(frags) / max(res["hybrid_index_s"] - res["bm25_index_s"], 1e-9), 1)
    ix.search(queries[0])  # warm-up (model load)
    emb_ms = []
    for q in queries:
        t0 = time.perf_counter()
        embed([q])
        emb_ms.append((time.perf_counter() - t0) * 1000)
    res["query_embed_ms_median"] = round(statistics.median(emb_ms), 2)
    lat = time_queries(ix, queries)
    res["query_ms_median"] = round(statistics.median(lat), 2)
    batched(ix, queries, sizes, res)  # one at a time and in batches, in the same run
    # the same with the query vectors computed beforehand: BM25 + cosine + top-k + fusion only
    vecs = dict(zip(queries, embed(queries), strict=True))
    ix.embed = lambda texts: np.stack([vecs[t] for t in texts])
    res["query_ms_p90"] = round(sorted(lat)[int(0.9 * (len(lat) - 1))], 2)
    lat = time_queries(ix, queries)
    res["query_ms_median_no_embed"] = round(statistics.median(lat), 2)
    # the ~6M-token corpus: the fragments repeated
    rep = max(1, round(tokens_target / max(n_tok, 1)))
    big = [{**f, "id": f"{f['id']}#r{k}"} for k in range(rep) for f in frags]
    res["repeat"] = rep
    res["repeat_tokens"] = n_tok * rep
    res["repeat_fragments"] = len(big)
    t0 = time.perf_counter()
    bix = HybridIndex(big, "", RetrieveSettings(use_dense=False))
    res["repeat_bm25_index_s"] = round(time.perf_counter() - t0, 2)
    bix.settings = RetrieveSettings()
    bix.embed = ix.embed
    bix.embeddings = np.tile(ix.embeddings, (rep, 1))
    lat = time_queries(bix, queries)
    res["repeat_query_ms_median_no_embed"] = round(statistics.median(lat), 2)
    bix.embed = embed
    if "embed_fragments_per_s" in res:
        res["repeat_embed_estimate_s"] = round(len(big) / res["embed_fragments_per_s"], 1)
    lat = time_queries(bix, queries)
    res["repeat_query_ms_median"] = round(statistics.median(lat), 2)
    res["repeat_query_ms_p90"] = round(sorted(lat)[int(0.9 * (len(lat) - 1))], 2)
    res["load_avg_end"] = load_avg()
    return res


def rankings(ix: HybridIndex, query: str) -> dict[str, list[str]]:
    """The top 10 fragment ids of BM25, dense and fused (RRF, no domain factor)."""
    bm = ix.bm25_ranking(query)
    dn = ix.dense_rankings([query])[0]
    fused = sorted(rrf_fuse([bm, dn], ix.settings.rrf_k).items(), key=lambda x: (-x[1], x[0]))
    ids = [f["id"] for f in ix.fragments]
    return {"bm25": [ids[i] for i in bm[:10]], "dense": [ids[i] for i in dn[:10]],
            "fused": [ids[i] for i, _ in fused[:10]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--split", default="transfer")
    ap.add_argument("--labels", type=Path)
    ap.add_argument("--dump", type=Path)
    ap.add_argument("--sample", type=int, default=50)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--tokens", type=int, default=6_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--torch-threads", type=int, help="torch intra-op threads (default: torch's own)")
    ap.add_argument("--batch", type=int, action="append", help="queries per batch for the batched path "
                    "(repeatable; default 8, 32 and all the queries)")
    ap.add_argument("--int8", action="store_true", help="also measure int8 dynamic quantisation against float32")
    ap.add_argument("--compare-backend", choices=["onnx"], help="also measure the package's --embedding-backend onnx "
                    "against torch (its fragment embeddings computed once and cached apart)")
    a = ap.parse_args()
    sizes = a.batch or [8, 32, a.queries]
    if min(sizes) < 1:
        ap.error("--batch must be >= 1")
    if a.torch_threads is not None and a.torch_threads < 1:
        ap.error("--torch-threads must be >= 1")

    frags, digest = load_fragments(a.work / "fragments.jsonl")
    kps = kps_from_dataset(load_dataset(resolve_split(a.split)))
    embed = load_embedder(None)
    report: dict[str, Any] = {"kps": len(kps)}
    import torch

    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    report["torch_threads"] = torch.get_num_threads()
    queries = [kp_query(k) for k in random.Random(a.seed).sample(kps, min(a.queries, len(kps)))]
    if not a.no_speed:
        report["speed"] = speed(frags, digest, a.work, queries, a.tokens, embed, sizes)
        print(json.dumps(report["speed"], indent=1))
    ix = HybridIndex(frags, digest, RetrieveSettings(), cache_dir=a.work / "cache", embed=embed)
    if a.dump:
        sample = random.Random(a.seed).sample(kps, a.sample)
        by_id = {f["id"]: f for f in frags}
        lines = []
        for kp in sample:
            r = rankings(ix, kp_query(kp))
            cands = list(dict.fromkeys(r["bm25"] + r["dense"] + r["fused"]))
            lines.append({"kp": kp.id, "name": kp.name, "query": kp_query(kp)[:300],
                          "candidates": [{"id": c, "section": by_id[c].get("section"),
                                          "head": " ".join(by_id[c]["text"].split())[:400]} for c in cands]})
        atomic_write_text(a.dump, "".join(dumps_json(x, indent=None) + "\n" for x in lines))
        print(f"wrote {len(lines)} KPs to {a.dump}")
    labels = None
    if a.labels:
        labels = [json.loads(x) for x in a.labels.read_text(encoding="utf-8").splitlines() if x.strip()]
        report["recall_at_10"] = recall_at_10(ix, kps, labels)
        print(json.dumps(report["recall_at_10"], indent=1))
    if a.int8:
        report["int8"] = int8_report(frags, digest, a.work, queries, ix, sizes, kps, labels)
        print(json.dumps(report["int8"], indent=1))
    if a.compare_backend:
        report[a.compare_backend] = backend_report(frags, digest, a.work, queries, ix, sizes, kps, labels, a.compare_backend)
        print(json.dumps(report[a.compare_backend], indent=1))
    if a.out:
        atomic_write_text(a.out, dumps_json(report) + "\n")


if __name__ == "__main__":
    main()
