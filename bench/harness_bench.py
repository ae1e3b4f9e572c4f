"""Harness throughput through ``vllm-router`` against zero-latency replicas: where the harness, not the
endpoints, becomes the limit.

Starts N stub servers (``studybench.testing.stub_server``, each its own process, answering at once)
behind a real ``vllm-router`` process on loopback, and, for comparison, uses one stub directly. For
each endpoint and each concurrency it measures, in the same run on the same machine:

* **harness**: the generation pass of ``studybench eval`` (:func:`~studybench.evaluate.generate_turns`
  with the OpenAI backend, ``--concurrency C``) with everything a real run does: the append-only run
  store and its strict JSONL log, multi-turn continuity and the resume digests, an API key (so every
  reply is redacted of it, base64 forms included), a token budget checked before every request and
  charged with every reply, the liveness probe, and the Rich progress bars ``eval`` draws on a
  terminal (drawn to ``/dev/null``); in turns per second, and the harness process's CPU per turn
  (all its threads);
* **peer**: a plain ``openai`` SDK loop (``chat.completions.create`` per turn, the same
  conversations and concurrency, nothing stored: ``bench/harness_peer_bench.py``), turns/s and CPU;
* **ceiling**: what the endpoint itself serves to a load generator that is not the harness, firing a
  typical turn's request body over ``C`` keep-alive connections: ``wrk`` when it is installed (a C
  program: ``apt-get install wrk``), else a minimal raw-socket asyncio client in this script.

``--judge`` adds the LLM judge's pass (:func:`~studybench.evaluate.add_llm_verdicts_to_scope`): the
rule rejections of a run (generated and rule-verified beforehand, not timed) judged through stub
judges behind their own router, with the verdict cache, the run's verdict log, a budget and the
progress bars; in verdicts per second and CPU per verdict, against the judge endpoint's ceiling.

``--client lean sdk`` measures the harness with each HTTP client (``STUDYBENCH_HTTP_CLIENT``; the
default is the lean one). ``--repeat N`` measures every setting N times, interleaved, and prints
medians (and the range). ``--profile`` adds one profiled pass per client (cProfile with the thread
CPU clock, grouped into components: ``bench/profile_components.py``) for the first endpoint and
concurrency, and for the judge pass.

Every process shares this machine's cores (the replicas, the router, the load generator, the
harness), so the absolute figures are this machine's; the ratios are the point. The load average is
printed before and after. No verification is timed (see ``bench/verify_bench.py``).

Usage::

    python bench/harness_bench.py [--replicas 2] [--concurrency 64 256 1024] [--split transfer] [-k 16]
                                  [--policy round_robin] [--router-arg=ARG ...] [--seconds 3]
                                  [--no-direct | --no-router] [--no-peer] [--client lean sdk]
                                  [--repeat 3] [--profile] [--judge [--judge-k 4]] [--data-dir DIR]

The default workload is the Transfer split with k = 16 and one seed: 1,440 chains of one to several
turns (enough chains to keep 1,024 turns in flight), 4,480 turns per setting. Without the data
(``$STUDYBENCH_DATA``), or with ``--split synthetic``, a synthetic set of the same shape is used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_peer_bench import peer_loop
from profile_components import components, profile_call, table

from studybench.costs import BudgetTracker
from studybench.datasets import Dataset, load_dataset, resolve_split
from studybench.evaluate import (
    EvalSpec,
    add_llm_verdicts_to_scope,
    add_rule_verdicts,
    generate_turns,
    prepare_eval,
)
from studybench.models.base import PRESETS, ChatRequest
from studybench.models.openai_backend import OpenAIBackend
from studybench.protocol import Artefacts, build_messages
from studybench.records import SubProblemRef
from studybench.testing import Script, StubServer, start_stub_server
from studybench.testing.router import RouterStartError, start_vllm_router

REPLY = "<think>Some private reasoning.</think>\nUsing energy conservation we get the result.\n\nFinal Answer: \\boxed{{turn1}}"
JUDGED_REPLY = REPLY.replace("the result.", "the result (request seed {seed}).")
"""The replies the judge pass judges: one text per request, so every rule rejection needs a judgement of its own."""
JUDGE_REPLY = "## Justification\nThe student's value differs from the reference.\n## Verdict\nFALSE\n"
KEY_ENV = "STUDYBENCH_BENCH_API_KEY"
"""The bench's API key variable: a random key, so that every reply is redacted of it (base64 forms included)."""
HTTP_CLIENT_ENV = "STUDYBENCH_HTTP_CLIENT"


def _has_client_choice() -> bool:
    return "http_client" in inspect.signature(OpenAIBackend).parameters


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


# -- what a real run adds ------------------------------------------------------------------------------


@contextlib.contextmanager
def real_run(client: str) -> Iterator[Callable[[str, int, int | None], None]]:
    """The environment of a real ``eval``: an API key in ``KEY_ENV``, the HTTP client chosen, and the
    progress bars of ``studybench eval`` on a terminal (drawn to ``/dev/null``); yields the progress function."""
    from rich.console import Console

    from studybench.cli import common

    saved = {k: os.environ.get(k) for k in (KEY_ENV, HTTP_CLIENT_ENV, "STUDYBENCH_PROGRESS")}
    os.environ[KEY_ENV] = "sk-bench-" + secrets.token_urlsafe(30)
    os.environ["STUDYBENCH_PROGRESS"] = "bars"
    if client != "default":
        os.environ[HTTP_CLIENT_ENV] = client
    console, devnull = common.console, open(os.devnull, "w")  # noqa: SIM115 - closed below
    common.console = Console(file=devnull, force_terminal=True, width=120)
    try:
        with common.progress_bars("turns") as progress:
            yield progress
    finally:
        common.console = console
        devnull.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def budget() -> BudgetTracker:
    """A token budget far above what the bench spends: checked before every request, charged with every reply."""
    return BudgetTracker(max_total_tokens=10**15)


# -- measurements ------------------------------------------------------------------------------------


@dataclass
class Pass:
    """One timed pass: items (turns or verdicts), wall and CPU seconds (process; main thread), failures."""

    n: int
    wall: float
    cpu: float
    main_cpu: float
    failed: int

    @property
    def rate(self) -> float:
        return self.n / self.wall if self.wall > 0 else 0.0

    @property
    def cpu_ms(self) -> float:
        return 1000 * self.cpu / max(self.n, 1)

    @property
    def other_threads_ms(self) -> float:
        return 1000 * max(0.0, self.cpu - self.main_cpu) / max(self.n, 1)


def _timed(run: Callable[[], tuple[int, int]], profile: bool) -> tuple[Pass, Any]:
    """Run ``run()`` (-> (items, failed)), timed; under cProfile (thread CPU clock) when ``profile``."""
    stats = None
    cpu0, main0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    if profile:
        (n, failed), stats = profile_call(run, time.thread_time)
    else:
        n, failed = run()
    wall, cpu, main = time.perf_counter() - t0, time.process_time() - cpu0, time.thread_time() - main0
    return Pass(n, wall, cpu, main, failed), stats


def harness(ds: Dataset, base_url: str, concurrency: int, k: int, tmp: Path, client: str, profile: bool = False) -> tuple[Pass, Any]:
    """One generation pass of ``studybench eval`` with everything a real run does (module docstring)."""
    out = Path(tempfile.mkdtemp(dir=tmp))
    with real_run(client) as progress:
        be = OpenAIBackend("stub", base_url, PRESETS["paper"], concurrency=concurrency, max_retries=2, api_key_env=KEY_ENV)
        plan = prepare_eval(EvalSpec(dataset=ds, k=k, seeds=[0], concurrency=concurrency), out / "run", backend=be)
        store = plan.open_store()

        async def go():  # noqa: ANN202
            try:
                return await generate_turns(plan.scope, store, be, Artefacts(), concurrency=concurrency,
                                            progress=progress, budget=budget())
            finally:
                await be.aclose()

        def run() -> tuple[int, int]:
            g = asyncio.run(go())
            return g.generated, g.failed

        try:
            return _timed(run, profile)
        finally:
            store.close()
            shutil.rmtree(out, ignore_errors=True)


def peer(ds: Dataset, base_url: str, concurrency: int, k: int) -> Pass:
    """The plain openai SDK loop (``bench/harness_peer_bench.py``) on the same conversations."""
    def run() -> tuple[int, int]:
        n, _ = asyncio.run(peer_loop(ds.parents, base_url, k, concurrency))
        return n, 0

    return _timed(run, False)[0]


@dataclass
class JudgeWork:
    """A run whose rule rejections the judge pass judges (generated and rule-verified once, untimed)."""

    plan: Any
    rejections: int
    body: bytes


def judge_workload(ds: Dataset, gen_url: str, k: int, tmp: Path) -> JudgeWork:
    """Generate ``k`` attempts of ``ds`` against ``gen_url`` and rule-verify them (not timed)."""
    from studybench.llm_judge import LLMJudge
    from studybench.store import rule_settings
    from studybench.verify import Verifier

    be = OpenAIBackend("stub", gen_url, PRESETS["paper"], concurrency=64, max_retries=2)
    plan = prepare_eval(EvalSpec(dataset=ds, k=k, seeds=[0], concurrency=64), tmp / "judge-run", backend=be)
    store = plan.open_store()

    async def go():  # noqa: ANN202
        try:
            return await generate_turns(plan.scope, store, be, Artefacts(), concurrency=64)
        finally:
            await be.aclose()

    asyncio.run(go())
    with Verifier(timeout=5.0) as v:
        v.warm()
        rule = add_rule_verdicts(plan.scope, store, v, rule_settings(5.0))
    store.close()
    rejections = rule.total - rule.correct
    judge = LLMJudge("stub-judge", "http://127.0.0.1:1/v1")
    values = judge.task.values({"problem": "p" * 800, "reference_solution": "s" * 1500, "reference_answers": "NV\n1",
                                "student_solution": REPLY * 3, "student_answers": "2"})
    body = json.dumps(judge.backend.build_payload(ChatRequest([{"role": "user", "content": judge.template.render(values)}],
                                                              None, None, 0))).encode()  # type: ignore[arg-type]
    return JudgeWork(plan, rejections, body)


def judge_pass(work: JudgeWork, base_url: str, concurrency: int, tmp: Path, client: str, profile: bool = False) -> tuple[Pass, Any]:
    """The LLM judge's pass over the run's rule rejections, from scratch (fresh verdict log and cache)."""
    from studybench.llm_judge import LLMJudge, LLMVerdictCache

    store = work.plan.open_store()
    store.llm_log.close()
    store.llm_log.path.unlink(missing_ok=True)
    cache_dir = Path(tempfile.mkdtemp(dir=tmp))
    with real_run(client) as progress:
        judge = LLMJudge("stub-judge", base_url, cache=LLMVerdictCache(cache_dir), concurrency=concurrency, max_retries=2,
                         api_key_env=KEY_ENV, budget=budget())

        async def go():  # noqa: ANN202
            try:
                return await add_llm_verdicts_to_scope(work.plan.scope, store, judge, progress=progress)
            finally:
                await judge.aclose()

        def run() -> tuple[int, int]:
            s = asyncio.run(go())
            return s.judged, s.verdicts.get("error", 0) + s.verdicts.get("unjudgeable", 0)

        try:
            return _timed(run, profile)
        finally:
            store.close()
            shutil.rmtree(cache_dir, ignore_errors=True)


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


def ceiling(gen: str, url: str, body: bytes, concurrency: int, seconds: float, tmp: Path) -> tuple[float, int]:
    """The endpoint's own requests/s (``wrk`` or the raw client) and its errors."""
    return ceiling_wrk(url, body, concurrency, seconds, tmp) if gen == "wrk" else ceiling_raw(url, body, concurrency, seconds)


# -- report ------------------------------------------------------------------------------------------


def _med(xs: list[float]) -> str:
    """Median, with the range when there are several values."""
    m = statistics.median(xs)
    fmt = (lambda x: f"{x:,.0f}") if m >= 20 else (lambda x: f"{x:.2f}")
    return fmt(m) if len(xs) == 1 else f"{fmt(m)} ({fmt(min(xs))}-{fmt(max(xs))})"


def _loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


@dataclass
class Row:
    """The repeated measurements of one setting."""

    what: str
    endpoint: str
    concurrency: int
    client: str
    passes: list[Pass]
    ceilings: list[float]
    peers: list[Pass]
    failed: int = 0

    def line(self) -> str:
        rate = [p.rate for p in self.passes]
        cpu = [p.cpu_ms for p in self.passes]
        ceil = statistics.median(self.ceilings)
        cells = [self.what, self.endpoint, str(self.concurrency), self.client, _med(rate), _med(cpu)]
        if self.peers:
            prate = statistics.median(p.rate for p in self.peers)
            pcpu = statistics.median(p.cpu_ms for p in self.peers)
            cells += [_med([p.rate for p in self.peers]), _med([p.cpu_ms for p in self.peers]),
                      f"{statistics.median(rate) / prate:.2f}x", f"{pcpu / statistics.median(cpu):.2f}x"]
        else:
            cells += ["-"] * 4
        cells += [_med(self.ceilings), f"{statistics.median(rate) / ceil:.2f}"]
        return "| " + " | ".join(cells) + " |"


def main() -> int:  # noqa: C901 - a bench's main
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
    ap.add_argument("--no-peer", action="store_true", help="skip the plain openai SDK loop")
    ap.add_argument("--client", nargs="+", default=None, choices=["lean", "sdk"],
                    help="HTTP clients to measure the harness with (default: the default client only)")
    ap.add_argument("--repeat", type=int, default=1, help="measure every setting this many times (medians)")
    ap.add_argument("--profile", action="store_true", help="one profiled pass per client: where the CPU goes")
    ap.add_argument("--judge", action="store_true", help="also the LLM judge's pass over rule rejections")
    ap.add_argument("--judge-k", type=int, default=4, help="attempts per parent of the judged run (default 4)")
    ap.add_argument("--no-generation", action="store_true", help="only the judge pass (with --judge)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    clients = args.client or ["default"]
    if args.client and not _has_client_choice():
        print("(this version of studybench has one HTTP client: measuring it)")
        clients = ["default"]
    ds = workload(args.split, args.data_dir)
    chains = len(ds.parents) * args.k
    gen = "wrk" if shutil.which("wrk") else "raw asyncio client"
    print(f"{ds.name}: {len(ds.parents)} parents, {ds.n_sub_problems} sub-problems, k={args.k}: {chains} chains, "
          f"{ds.n_sub_problems * args.k} turns per setting; {os.cpu_count()} cores; ceiling by {gen}; "
          f"load average {_loadavg()}")
    if chains < max(args.concurrency):
        print(f"note: only {chains} chains, fewer than concurrency {max(args.concurrency)}: raise -k")
    body = typical_body(ds)
    rows: list[Row] = []
    profiles: list[tuple[str, Any, Pass, float]] = []

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
        for name, base_url in endpoints if not args.no_generation else []:
            url = base_url + "/chat/completions"
            for c in args.concurrency:
                setting = {cl: Row("generation", name, c, cl, [], [], []) for cl in clients}
                peers: list[Pass] = []
                ceils: list[float] = []
                for _ in range(args.repeat):
                    for cl in clients:
                        p, _ = harness(ds, base_url, c, args.k, tmp, cl)
                        setting[cl].passes.append(p)
                        setting[cl].failed += p.failed
                        print(f"  {name:<28} c={c:<5} {cl:<7} harness {p.rate:8,.0f} turns/s ({p.cpu_ms:.2f} ms CPU/turn, "
                              f"{p.failed} failed)", flush=True)
                    if not args.no_peer:
                        peers.append(peer(ds, base_url, c, args.k))
                        print(f"  {name:<28} c={c:<5} peer    {peers[-1].rate:8,.0f} turns/s ({peers[-1].cpu_ms:.2f} ms CPU/turn)", flush=True)
                    rate, bad = ceiling(gen, url, body, c, args.seconds, tmp)
                    ceils.append(rate)
                    print(f"  {name:<28} c={c:<5} ceiling {rate:8,.0f} req/s ({bad} errors)", flush=True)
                for r in setting.values():
                    r.peers, r.ceilings = peers, ceils
                    rows.append(r)
                if args.profile and not profiles:
                    for cl in clients:
                        _, stats = harness(ds, base_url, c, args.k, tmp, cl, profile=True)
                        med = setting[cl].passes
                        profiles.append((f"generation, {name}, c={c}, client {cl}", stats,
                                         med[len(med) // 2], statistics.median(p.cpu_ms for p in med)))
        if args.judge:
            jstubs = [stack.enter_context(start_stub_server(Script(default=JUDGE_REPLY), subprocess=True, record=False,
                                                            model="stub-judge")) for _ in range(n)]
            jurl = (jstubs[0].base_url if args.no_router else
                    stack.enter_context(router(jstubs, args.policy, tmp / "judge-router.log", tuple(args.router_arg))))
            jname = "direct (1 stub judge)" if args.no_router else f"router ({n} stub judges, {args.policy})"
            print(f"judge pass: generating and rule-verifying k={args.judge_k} (not timed) ...", flush=True)
            gen_stub = stack.enter_context(start_stub_server(Script(default=JUDGED_REPLY), subprocess=True, record=False))
            work = judge_workload(ds, gen_stub.base_url, args.judge_k, tmp)
            for c in args.concurrency:
                setting = {cl: Row("judge", jname, c, cl, [], [], []) for cl in clients}
                ceils = []
                for _ in range(args.repeat):
                    for cl in clients:
                        p, _ = judge_pass(work, jurl, c, tmp, cl)
                        setting[cl].passes.append(p)
                        setting[cl].failed += p.failed
                        print(f"  {jname:<28} c={c:<5} {cl:<7} judge {p.rate:8,.0f} verdicts/s ({p.cpu_ms:.2f} ms CPU/verdict, "
                              f"{p.failed} not TRUE/FALSE)", flush=True)
                    rate, bad = ceiling(gen, jurl + "/chat/completions", work.body, c, args.seconds, tmp)
                    ceils.append(rate)
                    print(f"  {jname:<28} c={c:<5} ceiling {rate:8,.0f} req/s ({bad} errors)", flush=True)
                for r in setting.values():
                    r.ceilings = ceils
                    rows.append(r)
                if args.profile and c == args.concurrency[0]:
                    for cl in clients:
                        _, stats = judge_pass(work, jurl, c, tmp, cl, profile=True)
                        med = setting[cl].passes
                        profiles.append((f"judge pass, {jname}, c={c}, client {cl}", stats, med[len(med) // 2],
                                         statistics.median(p.cpu_ms for p in med)))

    print()
    print(f"medians of {args.repeat} (range); load average after: {_loadavg()}")
    print("| pass | endpoint | concurrency | client | harness items/s | harness CPU ms/item | peer turns/s | "
          "peer CPU ms/turn | harness / peer (rate) | peer / harness (CPU) | endpoint ceiling req/s | harness / ceiling |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(r.line())
    failed = sum(r.failed for r in rows)
    if failed:
        print(f"\n{failed} turns or verdicts failed: the figures above are not of a clean run")
    for title, stats, p, cpu_ms in profiles:
        unit = "verdict" if title.startswith("judge") else "turn"
        print(f"\nprofile: {title} (cProfile, thread CPU clock; shares of the unprofiled median {cpu_ms:.2f} ms CPU/{unit})")
        print(table(components(stats), 1000 * cpu_ms, unit, {"other threads (progress refresh, ...)": 1000 * p.other_threads_ms}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
