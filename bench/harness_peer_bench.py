"""Harness throughput: a full Transfer run (k = 8) against a local zero-latency OpenAI-compatible server.

Measures, in one run on the same machine:

* ``studybench``: the generation phase of the runner (protocol + OpenAIBackend + append-only store,
  all turns of all attempts with multi-turn continuity), then the rule pass (extraction + rule
  verifier), in turns per second;
* ``peer``: what a plain script does: the official ``openai`` SDK's ``chat.completions.create``
  on the same conversations with the same concurrency, no store, no judging.

The server runs in its own process (``studybench.testing.stub_server``) and answers instantly.

Usage::

    python bench/harness_peer_bench.py [--split transfer] [-k 8] [--concurrency 64] [--data-dir DIR]

Target (issue 2): >= 500 generation turns/s on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from studybench.datasets import load_dataset, resolve_split
from studybench.evaluate import EvalSpec, add_rule_verdicts, generate_turns, prepare_eval
from studybench.models.base import PRESETS
from studybench.models.openai_backend import OpenAIBackend
from studybench.protocol import Artefacts, build_messages
from studybench.records import SubProblemRef
from studybench.report import write_report
from studybench.store import rule_settings
from studybench.testing import Script, start_stub_server
from studybench.verify import Verifier

REPLY = "<think>Some private reasoning.</think>\nUsing energy conservation we get the result.\n\nFinal Answer: \\boxed{{{turn1}}}"


async def peer_loop(parents: list, base_url: str, k: int, concurrency: int) -> tuple[int, float]:
    """Plain SDK loop: same conversations (turn i sees earlier replies), same concurrency."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0)
    sem = asyncio.Semaphore(concurrency)
    n = 0

    async def chain(parent, attempt: int) -> None:
        nonlocal n
        prev: list[str | None] = []
        for i, sub in enumerate(parent.subs()):
            msgs = build_messages(SubProblemRef(parent, i, sub), prev)
            async with sem:
                r = await client.chat.completions.create(model="stub", messages=msgs, temperature=1.0, top_p=0.95, seed=attempt)
            prev.append(r.choices[0].message.content or "")
            n += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(chain(p, a) for a in range(k) for p in parents))
    dt = time.perf_counter() - t0
    await client.close()
    return n, dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="transfer")
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    ds = load_dataset(resolve_split(args.split, args.data_dir), name=args.split)
    parents = ds.parents
    n_turns = ds.n_sub_problems * args.k
    print(f"{ds.name}: {len(parents)} parents, {ds.n_sub_problems} sub-problems, k={args.k} -> {n_turns} turns; "
          f"concurrency {args.concurrency}; cores {os.cpu_count()}")

    with start_stub_server(Script(default=REPLY), subprocess=True) as srv, tempfile.TemporaryDirectory() as tmp:
        be = OpenAIBackend("stub", srv.base_url, PRESETS["paper"], concurrency=args.concurrency, max_retries=0)
        plan = prepare_eval(EvalSpec(dataset=ds, k=args.k, seeds=[0], concurrency=args.concurrency), Path(tmp) / "run", backend=be)
        store = plan.open_store()

        async def ours():
            try:
                return await generate_turns(plan.scope, store, be, Artefacts(), concurrency=args.concurrency)
            finally:
                await be.aclose()

        g = asyncio.run(ours())
        assert g.generated == n_turns and g.failed == 0, (g.generated, g.failed)
        with Verifier(timeout=5.0) as v:
            v.warm()
            j = add_rule_verdicts(plan.scope, store, v, rule_settings(5.0))
        rep = write_report(store)
        store.close()

        n_peer, dt_peer = asyncio.run(peer_loop(parents, srv.base_url, args.k, args.concurrency))

    gen_rate = g.generated / g.seconds
    peer_rate = n_peer / dt_peer
    print(f"studybench generate : {g.generated} turns in {g.seconds:.2f} s = {gen_rate:,.0f} turns/s")
    print(f"studybench verify   : {j.verified} turns in {j.seconds:.2f} s = {j.verified / max(j.seconds, 1e-9):,.0f} turns/s")
    print(f"studybench end-to-end (generate + verify): {n_turns / (g.seconds + j.seconds):,.0f} turns/s")
    print(f"peer (openai SDK chat.completions.create, no store): {n_peer} turns in {dt_peer:.2f} s = {peer_rate:,.0f} turns/s")
    print(f"ratio studybench/peer (generation): {gen_rate / peer_rate:.2f}x")
    print(f"target >= 500 generation turns/s: {'met' if gen_rate >= 500 else 'NOT met'}")
    print(f"(report sanity: Sub@{args.k} = {rep['sub_at_k']['mean']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
