"""What one retrieval query's embedding costs on a CPU, per runtime and precision (issue 27), in one run.

The queries are the Transfer Set's KP queries (``kp_query``, as ``build retrieve`` and
``bench/retrieval_bench.py`` make them; ``--queries`` of them, seeded). Each variant embeds them one at a
time; the median wall-clock and CPU milliseconds per query are printed with the ratio to the reference
measured in the same run, and the cosine of each query's vector to the reference vector:

- ``torch float32`` (the reference): ``load_embedder(None)``, the sentence-transformers model as
  ``build retrieve`` uses it;
- ``torch int8``: ``load_embedder(None, quantize="int8")`` (torch dynamic quantisation of the linear
  layers; opt-in in ``build retrieve``);
- ``onnx float32 (package)`` (only with the ``onnx`` extra): the package's own path,
  ``load_embedder(None, backend="onnx")`` (``build retrieve --embedding-backend onnx``): the MiniLM exported
  once to ONNX (offline, cached under the project's cache directory) and run by onnxruntime with all graph
  optimisations; ``onnxruntime int8``: that export quantised with
  ``onnxruntime.quantization.quantize_dynamic`` (not offered by the package: measured only).

Every variant is measured with each ``--threads`` count (default 1 and 2; torch's intra-op threads and
onnxruntime's ``intra_op_num_threads``, which the package sets from torch's), ``--repeat`` times (default 3), and the median of the repeats'
medians is printed. The load average at the start and the end is printed: on a loaded machine the
CPU milliseconds are the steadier figure.

    python bench/query_embed_bench.py [--queries 100] [--threads 1 2] [--repeat 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from studybench.datasets import load_dataset, resolve_split
from studybench.files import atomic_write_text, dumps_json
from studybench.testset.embedding import load_embedder
from studybench.testset.retrieval.hybrid import kp_query, kps_from_dataset


def load_avg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def latency(fn: Callable[[list[str]], Any], queries: list[str]) -> tuple[float, float]:
    """Median wall-clock and CPU milliseconds of ``fn([query])`` over the queries."""
    fn(queries[:1])  # warm-up
    wall, cpu = [], []
    for q in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        fn([q])
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def onnx_embedders(tmp: Path) -> dict[str, Callable[[int], Callable[[list[str]], Any]]]:
    """``{name: make(threads) -> embed}`` for the package's onnx backend (float32) and an int8 quantisation of
    its export; empty without the ``onnx`` extra."""
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic

        from studybench.embedding_backend import OnnxSentenceEncoder, require_backend

        require_backend("onnx")
    except (ImportError, RuntimeError) as e:
        print(f"onnxruntime not measured: {e}", file=sys.stderr)
        return {}
    import torch

    def package(threads: int) -> Callable[[list[str]], Any]:
        torch.set_num_threads(threads)  # onnxruntime's intra-op threads follow torch's (as --torch-threads)
        embed = load_embedder(None, backend="onnx")
        embed(["warm-up"])  # loads (and, the first time, exports) outside the timing
        return embed

    i8 = tmp / "minilm.int8.onnx"

    def int8(threads: int) -> Callable[[list[str]], Any]:
        enc = load_embedder(None, backend="onnx").model()
        if not i8.exists():
            quantize_dynamic(str(enc.path), str(i8), weight_type=QuantType.QInt8)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(str(i8), so, providers=["CPUExecutionProvider"])
        q = OnnxSentenceEncoder(enc.model, i8, {"key": enc.key, "sha256": "int8"}, False, sess)
        return lambda texts: q.encode(texts, batch_size=64, normalize_embeddings=True)

    return {"onnx float32 (package)": package, "onnxruntime int8": int8}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="transfer")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-onnx", action="store_true", help="leave out onnxruntime even when it is installed")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if min(a.threads) < 1 or a.repeat < 1 or a.queries < 1:
        ap.error("--threads, --repeat and --queries must be >= 1")
    import torch

    kps = kps_from_dataset(load_dataset(resolve_split(a.split)))
    queries = [kp_query(k) for k in random.Random(a.seed).sample(kps, min(a.queries, len(kps)))]
    res: dict[str, Any] = {"queries": len(queries), "load_avg_start": load_avg(), "cpus": os.cpu_count()}
    torch_f32, torch_i8 = load_embedder(None), load_embedder(None, quantize="int8")
    ref = torch_f32(queries)
    with tempfile.TemporaryDirectory(prefix="query-embed-bench-") as tmp:
        makers: dict[str, Callable[[int], Callable[[list[str]], Any]]] = {
            "torch float32": lambda _t: torch_f32, "torch int8": lambda _t: torch_i8}
        if not a.no_onnx:
            makers |= onnx_embedders(Path(tmp))
        rows = []
        for threads in a.threads:
            torch.set_num_threads(threads)
            fns = {name: make(threads) for name, make in makers.items()}
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
            for _ in range(a.repeat):  # interleaved, so that a change of load hits every variant
                for name, fn in fns.items():
                    runs[name].append(latency(fn, queries))
            base_wall = statistics.median(w for w, _ in runs["torch float32"])
            base_cpu = statistics.median(c for _, c in runs["torch float32"])
            for name, fn in fns.items():
                wall = statistics.median(w for w, _ in runs[name])
                cpu = statistics.median(c for _, c in runs[name])
                cos = (np.concatenate([fn([q]) for q in queries]) * ref).sum(axis=1)
                row = {"variant": name, "threads": threads, "wall_ms": round(wall, 2), "cpu_ms": round(cpu, 2),
                       "wall_ratio": round(base_wall / wall, 2), "cpu_ratio": round(base_cpu / cpu, 2),
                       "cos_min": round(float(cos.min()), 7), "cos_median": round(float(np.median(cos)), 5),
                       "repeats_wall_ms": [round(w, 2) for w, _ in runs[name]]}
                rows.append(row)
                print(f"{name:<24} threads {threads}: median {wall:6.2f} ms wall ({base_wall / wall:4.2f}x torch float32), "
                      f"{cpu:6.2f} ms CPU ({base_cpu / cpu:4.2f}x); cosine to torch float32 min {cos.min():.6f}, "
                      f"median {np.median(cos):.4f}", flush=True)
    res["rows"] = rows
    res["load_avg_end"] = load_avg()
    print(f"load average {res['load_avg_start']} -> {res['load_avg_end']}; {len(queries)} queries, "
          f"median of {a.repeat} repeats")
    if a.out:
        atomic_write_text(a.out, dumps_json(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
