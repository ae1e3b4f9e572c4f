"""Harness throughput through ``vllm-router`` against zero-latency replicas: where the harness, not the
endpoints, becomes the limit.

Starts N stub servers (``studybench.testing.stub_server``, each its own process, answering at once)
behind a real ``vllm-router`` process on loopback, and, for comparison, uses one stub directly. For
each endpoint and each concurrency it measures, in the same run on the same machine:

* **harness**: the generation pass of ``studybench eval`` (:func:`~studybench.evaluate.generate_turns`
  with the OpenAI backend, the append-only store and multi-turn continuity, ``--concurrency C``), in
  turns per second, and the harness process's CPU seconds per turn (all its threads);
* **ceiling**: what the endpoint itself serves to a load generator that is not the harness, firing a
  typical turn's request body over ``C`` keep-alive connections: ``wrk`` when it is installed (a C
  program: ``apt-get install wrk``), else a minimal raw-socket asyncio client in this script.

When the harness's turns/s is well below the ceiling at a concurrency, the harness is the limit there;
when the two are close, the endpoint is. Every process shares this machine's cores (the replicas, the
router, the load generator, the harness), so the absolute figures are this machine's; the ratio is
the point. No verification is done (it is a separate pass, see ``bench/verify_bench.py``).

Usage::

    python bench/harness_bench.py [--replicas 2] [--concurrency 64 256 1024] [--split transfer] [-k 16]
                                  [--policy round_robin] [--router-arg=ARG ...] [--seconds 3]
                                  [--no-direct | --no-router] [--data-dir DIR]

The default workload is the Transfer split with k = 16 and one seed: 1,440 chains of one to several
turns (enough chains to keep 1,024 turns in flight), 4,480 turns per setting. Without the data
(``$STUDYBENCH_DATA``), or with ``--split synthetic``, a synthetic set of the same shape is used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from studybench.datasets import Dataset, load_dataset, resolve_split
from studybench.evaluate import EvalSpec, generate_turns, prepare_eval
from studybench.models.base import PRESETS, ChatRequest
from studybench.models.openai_backend import OpenAIBackend
from studybench.protocol import Artefacts, build_messages
from studybench.records import SubProblemRef
from studybench.testing import Script, StubServer, start_stub_server
from studybench.testing.router import RouterStartError, start_vllm_router

REPLY = "<think>Some private reasoning.</think>\nUsing energy conservation we get the result.\n\nFinal Answer: \\boxed{{turn1}}"


# -- endpoints ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def router(stubs: list[StubServer], policy: str, log: Path, extra: tuple[str, ...] = ()) -> Iterator[str]:
    """A ``vllm-router`` process in front of ``stubs`` (``extra``: more of its flags); yields its base URL
    (``http://127.0.0.1:PORT/v1``)."""
    try:
        with start_vllm_router([s.port for s in stubs], policy, log, extra) as url:
            yield url
    except RouterStartError as e:
        raise SystemExit(str(e)) from None


# -- workload ----------------------------------------------------------------------------------------


def _synthetic(n_parents: int = 90) -> Dataset:
    """A set shaped like Transfer (1-5 sub-problems per parent, ~3.1 on average, paragraph-long texts)."""
    stem = "A uniform rod of mass m and length L is hinged at one end and released from rest. " * 6
    parents = []
    for i in range(n_parents):
        subs = [{"problem_id": f"S{i}({chr(97 + j)})", "problem": f"({chr(97 + j)}) {stem} Find quantity {j}.",
                 "answer": f"\\boxed{{{j + 1}}}", "answer_type": "NV", "type_sequence": ""}
                for j in range(1 + (i * 7) % 5)]
        parents.append({"source": "Synthetic", "year": "2024", "source_problem_id": f"S{i}", "problem_type": "Mechanics",
                        "problem": stem, "answer": "", "answer_type": "", "type_sequence": "", "sub_problems": subs})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.json"
        path.write_text(json.dumps(parents))
        return load_dataset(path, name="synthetic")


def workload(split: str, data_dir: str | None) -> Dataset:
    """The test set to run (the synthetic one when the split's file is not found)."""
    if split != "synthetic":
        try:
            return load_dataset(resolve_split(split, data_dir), name=split)
        except Exception as exc:  # noqa: BLE001 - any reason the data is not here
            print(f"({split} not available: {exc}; using a synthetic set of the same shape)")
    return _synthetic()


def typical_body(ds: Dataset) -> bytes:
    """The JSON body of a typical turn (the second turn of the first parent with two sub-problems)."""
    parent = next((p for p in ds.parents if len(p.subs()) > 1), ds.parents[0])
    i = min(1, len(parent.subs()) - 1)
    prev = [REPLY.replace("{turn1}", str(j + 1)) for j in range(i)]
    msgs = build_messages(SubProblemRef(parent, i, parent.subs()[i]), prev)
    backend = OpenAIBackend("stub", "http://127.0.0.1:1/v1", PRESETS["paper"])
    return json.dumps(backend.build_payload(ChatRequest(messages=msgs, seed=1, ref=None, turn_index=i))).encode()  # type: ignore[arg-type]


# -- measurements ------------------------------------------------------------------------------------


def harness(ds: Dataset, base_url: str, concurrency: int, k: int, tmp: Path) -> tuple[int, float, float, int]:
    """One generation pass of ``studybench eval``; returns (turns, wall seconds, CPU seconds, failed)."""
    be = OpenAIBackend("stub", base_url, PRESETS["paper"], concurrency=concurrency, max_retries=2)
    out = Path(tempfile.mkdtemp(dir=tmp))
    plan = prepare_eval(EvalSpec(dataset=ds, k=k, seeds=[0], concurrency=concurrency), out / "run", backend=be)
    store = plan.open_store()

    async def go():  # noqa: ANN202
        try:
            return await generate_turns(plan.scope, store, be, Artefacts(), concurrency=concurrency)
        finally:
            await be.aclose()

    cpu0, t0 = time.process_time(), time.perf_counter()
    g = asyncio.run(go())
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    store.close()
    shutil.rmtree(out, ignore_errors=True)
    return g.generated, wall, cpu, g.failed


def ceiling_wrk(url: str, body: bytes, concurrency: int, seconds: float, tmp: Path) -> tuple[float, int]:
    """Requests/s ``wrk`` gets from ``url`` with ``concurrency`` connections; (rate, non-2xx responses)."""
    body_file, script = tmp / "body.json", tmp / "post.lua"
    body_file.write_bytes(body)
    script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')
    threads = min(2, concurrency)
    r = subprocess.run(["wrk", "-t", str(threads), "-c", str(concurrency), "-d", f"{seconds:g}s", "-s", str(script), url],
                       capture_output=True, text=True, timeout=seconds + 120)
    m = re.search(r"Requests/sec:\s*([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise SystemExit(f"wrk failed: {r.stdout}{r.stderr}")
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", r.stdout)
    errs = re.search(r"Socket errors:(.*)", r.stdout)
    socket_errors = sum(int(x) for x in re.findall(r"\d+", errs.group(1))) if errs else 0
    return float(m.group(1)), (int(bad.group(1)) if bad else 0) + socket_errors


async def _raw_connection(host: str, port: int, request: bytes, end: float) -> tuple[int, int]:
    reader, writer = await asyncio.open_connection(host, port)
    done = bad = 0
    try:
        while time.perf_counter() < end:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                bad += 1
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            if length:
                await reader.readexactly(int(length.group(1)))
            else:  # chunked
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    await reader.readexactly(size + 2)
                    if size == 0:
                        break
            done += 1
    finally:
        writer.close()
    return done, bad


def ceiling_raw(url: str, body: bytes, concurrency: int, seconds: float) -> tuple[float, int]:
    """Requests/s a minimal raw-socket asyncio client gets (keep-alive, ``concurrency`` connections)."""
    m = re.match(r"http://([\d.]+):(\d+)(/.*)", url)
    assert m, url
    host, port, path = m.group(1), int(m.group(2)), m.group(3)
    request = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    async def go() -> list[tuple[int, int]]:
        end = time.perf_counter() + seconds
        return await asyncio.gather(*(_raw_connection(host, port, request, end) for _ in range(concurrency)))

    t0 = time.perf_counter()
    res = asyncio.run(go())
    return sum(d for d, _ in res) / (time.perf_counter() - t0), sum(b for _, b in res)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=2, help="stub servers behind the router (default 2)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--split", default="transfer", help="a split, a test-set file, or 'synthetic'")
    ap.add_argument("-k", type=int, default=16, help="attempts per parent (chains = parents x k)")
    ap.add_argument("--policy", default="round_robin", help="vllm-router --policy (round_robin, power_of_two, ...)")
    ap.add_argument("--router-arg", action="append", default=[], metavar="ARG",
                    help="one more vllm-router argument (repeat; e.g. --router-arg=--disable-retries)")
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each load-generator measurement")
    ap.add_argument("--no-direct", action="store_true", help="skip the comparison against one stub without router")
    ap.add_argument("--no-router", action="store_true", help="skip the router (e.g. without the router extra)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    ds = workload(args.split, args.data_dir)
    chains = len(ds.parents) * args.k
    gen = "wrk" if shutil.which("wrk") else "raw asyncio client"
    print(f"{ds.name}: {len(ds.parents)} parents, {ds.n_sub_problems} sub-problems, k={args.k}: {chains} chains, "
          f"{ds.n_sub_problems * args.k} turns per setting; {os.cpu_count()} cores; ceiling by {gen}")
    if chains < max(args.concurrency):
        print(f"note: only {chains} chains, fewer than concurrency {max(args.concurrency)}: raise -k")
    body = typical_body(ds)
    rows: list[tuple[str, int, int, float, float, float, int, int]] = []

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        n = max(args.replicas, 1)
        stubs = [stack.enter_context(start_stub_server(Script(default=REPLY), subprocess=True, record=False))
                 for _ in range(n)]
        endpoints: list[tuple[str, str]] = []
        if not args.no_router:
            endpoints.append((f"router ({n} stubs, {args.policy})", stack.enter_context(router(stubs, args.policy, tmp / "router.log", tuple(args.router_arg)))))
        if not args.no_direct:
            endpoints.append(("direct (1 stub)", stubs[0].base_url))
        for name, base_url in endpoints:
            for c in args.concurrency:
                turns, wall, cpu, failed = harness(ds, base_url, c, args.k, tmp)
                url = base_url + "/chat/completions"
                rate, bad = (ceiling_wrk(url, body, c, args.seconds, tmp) if gen == "wrk"
                             else ceiling_raw(url, body, c, args.seconds))
                rows.append((name, c, turns, turns / wall, 1000 * cpu / max(turns, 1), rate, failed, bad))
                print(f"  {name:<28} c={c:<5} harness {turns / wall:8,.0f} turns/s ({1000 * cpu / max(turns, 1):.2f} ms CPU/turn, "
                      f"{failed} failed)   ceiling {rate:8,.0f} req/s ({bad} errors)", flush=True)

    print()
    print("| endpoint | concurrency | harness turns/s | harness CPU ms/turn | endpoint ceiling req/s | harness / ceiling |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, c, _turns, tps, cpu_ms, rate, _failed, _bad in rows:
        print(f"| {name} | {c} | {tps:,.0f} | {cpu_ms:.2f} | {rate:,.0f} | {tps / rate:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
