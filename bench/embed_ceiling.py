"""How fast can the audit's stage 2 be on this CPU? Its arithmetic against the machine's own matmul ceiling.

Stage 2 of the contamination audit embeds every text with MiniLM; the first audit of the issue-27 workload
(6,432 training texts x 500 test items, ``bench/audit_bench.py``) is compute-bound. This script counts the
floating-point operations of that embedding from the texts' word pieces, batched as stage 2 batches them
(the model's own layer sizes; padding included), measures in the same run what this machine sustains on
matrix products of the model's shapes (float32, and bfloat16 for comparison), and prints:

- the **floor**: the operations divided by the sustained matmul rate, i.e. the stage-2 time no runtime can
  beat on this machine in that precision (attention, layer norms and the tokenizer only add to it);
- the **achieved** rate of the real model on a seeded sample of the texts, as a share of that ceiling
  (per CPU-second of this process, which a loaded machine inflates far less than the wall clock).

    python bench/embed_ceiling.py [--data-root ../shared/data] [--threads 2] [--sample 800] [--target-s 30]

It changes nothing and needs the ``audit`` extra.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from audit_bench import N_EVAL, N_TRAIN, build_workload, load_avg  # noqa: E402

from studybench.audit.embeddings import embed_non_empty, load_embedding_model, token_lengths  # noqa: E402
from studybench.files import dumps_json  # noqa: E402


def layer_flops(cfg: Any, seq: int) -> int:
    """Multiply-add operations (x2) of one token through one encoder layer in a batch padded to ``seq``."""
    h, inter = cfg.hidden_size, cfg.intermediate_size
    linear = 2 * (4 * h * h + 2 * h * inter)  # q, k, v, output projections; the two feed-forward products
    attention = 2 * 2 * seq * h  # scores (q k^T) and the weighted sum of values, per token
    return linear + attention


def padded_batches(n: list[int], batch_size: int) -> list[tuple[int, int]]:
    """(texts, padded length) of each batch when the texts are sent in order of word pieces, as stage 2 does."""
    order = sorted(range(len(n)), key=lambda k: n[k])
    return [(len(order[b : b + batch_size]), max(n[k] for k in order[b : b + batch_size]))
            for b in range(0, len(order), batch_size)]


def stage2_flops(cfg: Any, batches: list[tuple[int, int]]) -> int:
    """Operations of embedding the batches (every encoder layer; the embedding lookup and pooling are free)."""
    return sum(size * seq * layer_flops(cfg, seq) * cfg.num_hidden_layers for size, seq in batches)


def matmul_rate(torch: Any, rows: int, h: int, inter: int, dtype: Any, seconds: float = 2.0) -> tuple[float, float]:
    """Sustained operations of the model's two largest products, ``[rows, h] @ [h, inter]`` and back: per
    second of wall clock, and per CPU-second of this process (which a loaded machine inflates far less)."""
    a = torch.randn(rows, h, dtype=dtype)
    w1 = torch.randn(h, inter, dtype=dtype)
    w2 = torch.randn(inter, h, dtype=dtype)
    with torch.inference_mode():
        (a @ w1) @ w2  # warm up
        done, t0, c0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < seconds:
            (a @ w1) @ w2
            done += 1
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ops = done * 2 * 2 * rows * h * inter
    return ops / wall, ops / cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (the issue's machine: 2 cores)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--sample", type=int, default=800, help="texts embedded for the achieved rate (seeded)")
    ap.add_argument("--target-s", type=float, default=30.0, help="the first-audit target, for the ratio")
    ap.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    res: dict[str, Any] = {"threads": torch.get_num_threads(), "load_start": load_avg()}
    train, evals = build_workload(args.data_root, n_train=N_TRAIN, n_eval=N_EVAL)
    texts = [t for t in train + evals if t.strip()]
    model = load_embedding_model(dtype="float32")
    cfg = model[0].auto_model.config
    n = [min(k, model.max_seq_length) for k in token_lengths(model, texts)]
    batches = padded_batches(n, args.batch_size)
    flops = stage2_flops(cfg, batches)
    rows = args.batch_size * max(1, round(sum(n) / len(n)))
    res.update(texts=len(texts), word_pieces=sum(n), padded=sum(s * q for s, q in batches), gflop=round(flops / 1e9, 1))
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        rate, per_cpu = matmul_rate(torch, rows, cfg.hidden_size, cfg.intermediate_size, dtype)
        res[f"matmul_gflops_{name}"] = round(rate / 1e9, 1)
        res[f"matmul_gflop_per_cpu_s_{name}"] = round(per_cpu / 1e9, 1)
        res[f"floor_s_{name}"] = round(flops / rate, 1)
        res[f"floor_cpu_s_{name}"] = round(flops / per_cpu, 1)

    sample = sorted(random.Random(0).sample(range(len(texts)), min(args.sample, len(texts))))
    part = [texts[k] for k in sample]
    part_flops = stage2_flops(cfg, padded_batches([n[k] for k in sample], args.batch_size))
    embed_non_empty(model, part[: args.batch_size], args.batch_size, None)  # warm up
    c0, t0 = time.process_time(), time.perf_counter()
    embed_non_empty(model, part, args.batch_size, None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    res["sample_texts"] = len(part)
    res["achieved_gflops"] = round(part_flops / wall / 1e9, 1)
    res["achieved_gflop_per_cpu_s"] = round(part_flops / cpu / 1e9, 1)
    res["achieved_share_of_float32_ceiling"] = round(part_flops / cpu / (res["matmul_gflop_per_cpu_s_float32"] * 1e9), 2)
    res["sample_cpu_s_per_wall_s"] = round(cpu / wall, 2)
    res["projected_stage2_s"] = round(flops / (part_flops / wall), 1)
    res["projected_stage2_cpu_s"] = round(flops / (part_flops / cpu), 1)
    res["load_end"] = load_avg()
    print(dumps_json(res))
    print(f"stage 2 of the first audit: {res['gflop']} GFLOP over {res['texts']} texts ({res['padded']} padded word pieces)")
    print(f"floor on this machine, {res['threads']} threads: {res['floor_s_float32']} s in float32 "
          f"({res['matmul_gflops_float32']} GFLOP/s sustained; {res['floor_cpu_s_float32']} CPU-s), "
          f"{res['floor_s_bfloat16']} s in bfloat16 ({res['matmul_gflops_bfloat16']} GFLOP/s)")
    print(f"the real model reaches {res['achieved_share_of_float32_ceiling']:.0%} of the float32 ceiling per CPU-second "
          f"(projected stage 2: {res['projected_stage2_s']} s, {res['projected_stage2_cpu_s']} CPU-s); "
          f"stage 2 alone in {args.target_s:g} s needs "
          f"{res['floor_s_float32'] / args.target_s:.2f}x this machine's float32 matmul ceiling")
    if args.out:
        args.out.write_text(dumps_json(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
