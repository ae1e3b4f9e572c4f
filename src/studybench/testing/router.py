"""A real ``vllm-router`` process on loopback in front of local replicas (the ``router`` extra).

Used by the router tests and ``bench/harness_bench.py``, and handy for rehearsing a many-replica run
with stub servers before GPUs are booked::

    with start_stub_server(script, subprocess=True) as a, start_stub_server(script, subprocess=True) as b, \\
            start_vllm_router([a.port, b.port], "round_robin", Path("router.log")) as base_url:
        ...  # studybench eval --base-url base_url

The router binds 127.0.0.1 only (its Prometheus exporter too, on a free port: by default it binds
29000, so two routers on one machine would clash). It starts taking traffic once every replica answers
``GET /health``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from studybench.files import read_user_bytes

__all__ = ["RouterStartError", "free_port", "http_status", "start_vllm_router"]


class RouterStartError(RuntimeError):
    """``vllm-router`` exited or did not become healthy in time; the message ends with its log's tail."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked; another process may take it later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str, timeout: float = 5.0) -> int:
    """The HTTP status of ``GET url``, or 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


@contextlib.contextmanager
def start_vllm_router(
    worker_ports: Sequence[int],
    policy: str,
    log: Path,
    extra: Sequence[str] = (),
    *,
    startup_timeout: float = 120.0,
) -> Iterator[str]:
    """Start ``vllm-router`` on 127.0.0.1 in front of local replicas; stop it (its process group) on exit.

    Args:
        worker_ports: the replicas' ports on 127.0.0.1 (each serving ``/health`` and ``/v1``).
        policy: the routing policy (``round_robin``, ``power_of_two``, ...).
        log: the file the router's output goes to.
        extra: more ``vllm-router`` flags (e.g. ``--health-check-interval-secs 1``).
        startup_timeout: seconds to wait for the router's ``/health``.

    Yields:
        The router's base URL, ``http://127.0.0.1:PORT/v1``.

    Raises:
        RouterStartError: the router exited or was not healthy within ``startup_timeout``.
    """
    port = free_port()
    cmd = [sys.executable, "-m", "vllm_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
           "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
           "--worker-urls", *[f"http://127.0.0.1:{p}" for p in worker_ports], "--policy", policy,
           "--worker-startup-timeout-secs", str(int(startup_timeout)), "--worker-startup-check-interval", "1",
           "--log-level", "warning", *extra]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.monotonic()
        while http_status(f"http://127.0.0.1:{port}/health") != 200:
            if proc.poll() is not None or time.monotonic() - t0 > startup_timeout:
                raise RouterStartError(f"vllm-router did not become healthy (exit {proc.poll()}):\n"
                                       f"{read_user_bytes(log).decode(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)
