"""``studybench build fragments`` and ``studybench build retrieve``: textbook fragments and hybrid retrieval."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from studybench.cli.common import console, escape, fail, fail_write, plural, progress_bars
from studybench.cli.threads import EmbeddingBackend, TorchThreads, set_torch_threads

__all__ = ["fragments_cmd", "retrieve_cmd"]


def fragments_cmd(
    work: Annotated[Path, typer.Option("--work", help="The construction's work directory; writes WORK/fragments.jsonl and fragments.meta.json.")],
    books: Annotated[Path | None, typer.Option("--books", help="Books directory DIR/<source>/<chapter>/clean.redacted.md (after `studybench corpus redact`; default $STUDYBENCH_BOOKS).")] = None,
    min_chars: Annotated[int, typer.Option("--min-chars", help="A fragment shorter than this (characters) is merged into the previous one.")] = 200,
    max_chars: Annotated[int, typer.Option("--max-chars", help="A fragment longer than this is split into pieces of about --chunk-chars.")] = 6000,
    chunk_chars: Annotated[int, typer.Option("--chunk-chars", help="Target length of the pieces of a split fragment.")] = 2000,
    overlap: Annotated[int, typer.Option("--overlap", help="Characters each piece repeats from the previous one.")] = 400,
    allow_unredacted: Annotated[bool, typer.Option("--allow-unredacted", help="Read clean.md (else full.md) where clean.redacted.md is missing; such fragments say redacted: false.")] = False,
) -> None:
    """Cut every chapter into exposition and worked-example fragments at its headings (one JSON object per
    fragment: id, book, chapter, kind, section, solution_manual, start, end, text).

    A fragment under --min-chars is merged into the previous one; one over --max-chars is split into pieces
    of about --chunk-chars that overlap by --overlap, ending at paragraph breaks where possible. Chapters
    without clean.redacted.md are refused unless --allow-unredacted."""
    from studybench.testset.corpus.books import CorpusError
    from studybench.testset.corpus.fragments import FRAGMENTS, FragmentSettings, build_fragments

    if books is None:
        if not os.environ.get("STUDYBENCH_BOOKS"):
            fail("--books DIR is required (or set $STUDYBENCH_BOOKS)")
        books = Path(os.environ["STUDYBENCH_BOOKS"])
    st = FragmentSettings(min_chars=min_chars, max_chars=max_chars, chunk_chars=chunk_chars, overlap=overlap)
    try:
        st.check()
        with progress_bars(unit="chapters") as bar:
            m = build_fragments(books, work, settings=st, allow_unredacted=allow_unredacted,
                                progress=lambda _label, done, total: bar("fragments", 1, total))
    except (CorpusError, ValueError) as e:
        fail(str(e))
    except OSError as e:
        fail_write(e, work / FRAGMENTS, resumable=False)
    console.print(
        f"wrote {plural(m['fragments'], 'fragment')} ({m['by_kind']['exposition']:,} exposition, "
        f"{m['by_kind']['example']:,} example; {m['solution_manual_fragments']:,} from solution manuals) from "
        f"{plural(m['chapters'], 'chapter')} of {plural(m['books'], 'book')} to {escape(str(work / FRAGMENTS))}",
        soft_wrap=True)
    if m["unredacted_chapters"]:
        console.print(f"[yellow]warning:[/yellow] {plural(len(m['unredacted_chapters']), 'chapter')} not redacted "
                      "(fragments marked redacted: false)", soft_wrap=True)


def retrieve_cmd(
    work: Annotated[Path, typer.Option("--work", help="The work directory: reads fragments.jsonl and kp_canonical.jsonl, writes retrieval.jsonl.")],
    queries: Annotated[Path | None, typer.Option("--queries", help="Canonical KPs, one JSON object per line (default WORK/kp_canonical.jsonl).")] = None,
    from_split: Annotated[str | None, typer.Option("--from-split", help="Take the KPs from a test set's own knowledge_points instead (transfer, application or a file); no LLM needed.")] = None,
    top_n: Annotated[int, typer.Option("--top-n", help="Candidates kept per KP.")] = 30,
    depth: Annotated[int, typer.Option("--depth", help="Fragments each ranker (BM25, dense) keeps before fusion.")] = 200,
    rrf_k: Annotated[float, typer.Option("--rrf-k", help="Reciprocal rank fusion constant: score = sum 1/(k + rank).")] = 60.0,
    domain_map: Annotated[Path | None, typer.Option("--domain-map", help="JSON or YAML {sub-discipline or domain: [book, ...]}; a fragment from another book gets --out-of-domain-factor. Absent: no factor.")] = None,
    out_of_domain: Annotated[float, typer.Option("--out-of-domain-factor", help="Multiplier of the fused score of a fragment outside the KP's domain.")] = 0.6,
    embed_model: Annotated[str | None, typer.Option("--embedding-model", "--embed-model", help="sentence-transformers model name or folder (default: the bundled offline all-MiniLM-L6-v2).")] = None,
    max_seq_length: Annotated[int | None, typer.Option("--max-seq-length", help="Truncate texts to this many word pieces when embedding.")] = None,
    mode: Annotated[str, typer.Option("--mode", help="hybrid, bm25 or dense.")] = "hybrid",
    data_dir: Annotated[str | None, typer.Option("--data-dir", help="Where --from-split names are looked up (default $STUDYBENCH_DATA).")] = None,
    restart: Annotated[bool, typer.Option("--restart", help="Discard an existing retrieval.jsonl instead of resuming it.")] = False,
    torch_threads: TorchThreads = None,
    embedding_backend: EmbeddingBackend = "torch",
) -> None:
    """Retrieve the top --top-n fragments for every canonical KP: BM25 (the same normalisation for fragments
    and queries) and sentence embeddings, each keeping --depth, fused by reciprocal rank fusion and
    multiplied by --out-of-domain-factor for books outside the KP's domain. The fragment embeddings are
    cached in WORK/cache/ keyed by the fragments file's digest and the model; a rerun resumes."""
    from studybench.datasets import DatasetError, load_dataset, resolve_split
    from studybench.files import file_sha256
    from studybench.testset.embedding import load_embedder
    from studybench.testset.retrieval.hybrid import (
        KP_CANONICAL,
        RETRIEVAL,
        RetrieveError,
        RetrieveSettings,
        kps_from_dataset,
        load_domain_map,
        load_kps,
        retrieve,
    )

    if mode not in ("hybrid", "bm25", "dense"):
        fail(f"--mode must be hybrid, bm25 or dense, got {mode!r}")
    if queries is not None and from_split is not None:
        fail("give --queries or --from-split, not both")
    if mode != "bm25":
        set_torch_threads(torch_threads)
        from studybench.embedding_backend import require_backend

        try:  # the onnx extra checked before anything is read or indexed
            require_backend(embedding_backend)
        except RuntimeError as e:
            fail(str(e))
    st = RetrieveSettings(depth=depth, rrf_k=rrf_k, out_of_domain=out_of_domain, top_n=top_n, embed_model=embed_model,
                          max_seq_length=max_seq_length, use_bm25=mode != "dense", use_dense=mode != "bm25",
                          embed_backend=embedding_backend)
    try:
        st.check()
        if from_split is not None:
            path = resolve_split(from_split, data_dir)
            ds = load_dataset(path)
            kps = kps_from_dataset(ds)
            kp_digest = ds.sha256
            if not kps:
                fail(f"--from-split {from_split}: no knowledge_points in {path}")
        else:
            qpath = queries or work / KP_CANONICAL
            kps = load_kps(qpath)
            kp_digest = file_sha256(qpath)
        dmap = load_domain_map(domain_map) if domain_map is not None else None
        embed = (load_embedder(embed_model, max_seq_length=max_seq_length, backend=embedding_backend)
                 if st.use_dense else None)
        with progress_bars(unit="") as bar:
            shown: dict[str, int] = {}

            def report(what: str, done: int, total: int) -> None:  # retrieve() counts from 0: bars advance
                bar(what, done - shown.get(what, 0), total)
                shown[what] = done

            m = retrieve(work, kps, settings=st, domain_map=dmap, kp_digest=kp_digest, restart=restart, embed=embed,
                         progress=report)
    except (RetrieveError, DatasetError, ValueError, RuntimeError) as e:
        fail(str(e), code=1 if isinstance(e, RuntimeError) else 2)
    except OSError as e:
        fail_write(e, work / RETRIEVAL)
    cache = "cached embeddings" if m["cache_hit"] else "embeddings computed" if st.use_dense else "BM25 only"
    console.print(
        f"wrote {plural(m['written'], 'knowledge point')} to {escape(str(work / RETRIEVAL))}"
        + (f" ({m['skipped']:,} already there)" if m["skipped"] else "")
        + f"; index of {plural(m['fragments'], 'fragment')} in {m['index_seconds']:.1f} s ({cache})", soft_wrap=True)
