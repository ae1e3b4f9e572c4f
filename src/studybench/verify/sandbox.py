"""Process pool with hard wall-clock timeouts for symbolic and numeric verification (docs/protocol.md section 5).

Design:

* Workers are fresh interpreters (``sys.executable -I -c ...``) started lazily and reused; they talk
  to the parent over two pipes with ``multiprocessing.connection``. Unlike ``fork`` this is safe
  with threads, and unlike ``spawn``/``forkserver`` it never re-imports the caller's ``__main__``
  (scripts without a ``__main__`` guard keep working). Start-up (interpreter + SymPy import,
  about a second) is paid once per worker and is not counted against a task's timeout.
* Workers run isolated (``-I``: no current directory on the import path, no ``PYTHON*`` variables,
  no user site). Their import path is the interpreter's own: the standard library and the
  installed packages (site-packages with its ``.pth`` files, and the user site when the parent
  uses it); never the parent's ``PYTHONPATH`` entries, its working directory or paths a program
  added. ``studybench`` itself is loaded from the parent's own copy (also a ``PYTHONPATH``
  checkout), so a ``sympy.py`` on ``PYTHONPATH`` or a ``secrets.py`` in the working directory is
  never imported.
* A worker dies with its parent: on Linux the kernel kills it (``PR_SET_PDEATHSIG``; workers are
  started from one long-lived thread because the signal follows the thread that started the
  process), and everywhere a watchdog thread exits when the parent process is gone, also while a
  task is running.
* Each worker owns one pipe. A caller thread takes an idle worker, sends one task and waits on the
  pipe with ``poll(timeout)``. On overrun the worker is killed with SIGKILL, reaped, and a new one
  is started on demand; the caller gets a "timed out" result. No signals are used in the caller,
  so this works from any thread, including asyncio executor threads.
* A worker limits its own address space (``RLIMIT_AS``) so a runaway expression dies instead of
  swapping; a dead worker gives an "internal error" result.
* Only named task functions from :data:`TASKS` run in a worker; tasks carry plain strings.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from studybench.verify.reading.conversion import warm_up_parser
from studybench.verify.rules import check_gold_parsable_local, full_verdict

__all__ = ["SandboxPool", "TASKS", "TimedOut", "WorkerDied"]

_MEMORY_LIMIT = 4 * 1024**3
_READY_TIMEOUT = 120.0


class TimedOut(Exception):
    """The task overran its wall-clock limit; the worker was killed."""


class WorkerDied(Exception):
    """The worker exited unexpectedly (e.g. hit its memory limit)."""


def _task_verdict(gold: list[str], pred: list[str], at: str, ts: str, gold_unit: Any = None, defs: Any = ()) -> Any:
    # the item's definitions (studybench.verify.physics.definitions) are tried when the plain verdict is incorrect
    return full_verdict(gold, pred, at, ts, gold_unit, defs)


def _task_parsable(box: str, at: str) -> Any:
    return check_gold_parsable_local(box, at)


def _task_sleep(seconds: float) -> str:
    """Diagnostics: hold the worker busy (used by tests of the timeout path)."""
    time.sleep(float(seconds))
    return "slept"


def _task_ping() -> int:
    """Diagnostics: the worker's pid."""
    return os.getpid()


def _task_origin() -> dict[str, Any]:
    """Diagnostics: where the worker's ``studybench`` comes from, its import path and the modules it loaded."""
    import studybench

    modules = sorted({name.partition(".")[0] for name in list(sys.modules)})
    files = {m: getattr(sys.modules.get(m), "__file__", None) for m in modules}
    return {"studybench": studybench.__file__, "path": list(sys.path), "modules": modules, "files": files}


TASKS: dict[str, Callable[..., Any]] = {
    "verdict": _task_verdict,
    "parsable": _task_parsable,
    "sleep": _task_sleep,
    "ping": _task_ping,
    "origin": _task_origin,
}
"""The only functions a worker will run, by name."""


def _worker_main(conn: Any) -> None:
    """Worker loop: receive ``(name, args)``, reply ``("ok", result)`` or ``("err", text)``."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = _MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(_MEMORY_LIMIT, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):
        pass
    try:
        # warm the heavy imports (SymPy, latex2sympy's ANTLR parser) before reporting ready, so
        # that start-up never counts against a task's timeout
        import sympy  # noqa: F401

        if os.environ.get("STUDYBENCH_VERIFY_WARM", "1") != "0":
            # ANTLR's prediction cache: later parses in this worker are about a third cheaper; costs about
            # a second per worker start, so short-lived verifiers (tests) skip it with STUDYBENCH_VERIFY_WARM=0
            warm_up_parser()
        full_verdict(["x^2 = 1"], ["1 = x^2"], "EQ", "")
        full_verdict(["1\\,\\mathrm{km}"], ["1000\\,\\mathrm{m}"], "NV", "")  # loads pint's registry
    except Exception:  # pragma: no cover - import failure is reported per task
        pass
    try:
        conn.send(("ready", os.getpid()))
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            if msg is None:
                return
            name, args = msg
            fn = TASKS.get(name)
            if fn is None:
                conn.send(("err", f"unknown task {name!r}"))
                continue
            try:
                conn.send(("ok", fn(*args)))
            except MemoryError:
                conn.send(("err", "out of memory"))
            except RecursionError:
                conn.send(("err", "expression too deep"))
            except Exception as e:  # report, keep serving
                conn.send(("err", f"{type(e).__name__}"))
    except (BrokenPipeError, EOFError, OSError, KeyboardInterrupt):
        return


_PR_SET_PDEATHSIG = 1
_WATCH_INTERVAL = 0.2


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker exit as soon as ``parent_pid`` (its parent) is gone, even while a task runs.

    On Linux the kernel sends SIGKILL when the parent dies (``PR_SET_PDEATHSIG``); on every platform a
    daemon thread polls ``os.getppid()`` (a dead parent's children are re-parented) and exits.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError, ImportError):  # pragma: no cover - the watchdog still works
            pass
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_WATCH_INTERVAL)
        os._exit(1)

    threading.Thread(target=watch, name="studybench-parent-watch", daemon=True).start()


def _serve_fds(read_fd: int, write_fd: int, parent_pid: int | None = None) -> None:
    """Entry point of a worker process: serve tasks over two inherited pipe descriptors.

    Args:
        read_fd: the worker's end of the pipe it reads tasks from.
        write_fd: the worker's end of the pipe it writes results to.
        parent_pid: the pool's process; the worker exits when it is gone (``None``: not watched).
    """
    if parent_pid is not None:
        _die_with_parent(parent_pid)
    from multiprocessing.connection import Connection

    class _Duplex:
        def __init__(self) -> None:
            self.r = Connection(read_fd, writable=False)
            self.w = Connection(write_fd, readable=False)

        def send(self, obj: Any) -> None:
            self.w.send(obj)

        def recv(self) -> Any:
            return self.r.recv()

    _worker_main(_Duplex())


_BOOT = (
    "import sys, os, json, site, importlib.util as u; a = sys.argv; [site.addsitedir(d) for d in json.loads(a[2])]; "
    "s = u.spec_from_file_location('studybench', os.path.join(a[1], '__init__.py'), submodule_search_locations=[a[1]]); "
    "m = u.module_from_spec(s); sys.modules['studybench'] = m; s.loader.exec_module(m); "
    "from studybench.verify.sandbox import _serve_fds; _serve_fds(int(a[3]), int(a[4]), int(a[5]))"
)
"""A worker's start: ``python -I -c _BOOT PACKAGE_DIR SITE_DIRS READ_FD WRITE_FD PARENT_PID``.

``-I`` keeps the current directory, ``PYTHON*`` variables and the user site off the import path,
which is then the interpreter's own (standard library, site-packages); SITE_DIRS (a JSON list, see
:func:`_worker_site_dirs`) adds the parent's user site when the parent uses it. ``studybench`` is
loaded from PACKAGE_DIR (the parent's copy, also for an editable install or a ``PYTHONPATH``
checkout), so the worker runs the very code the parent runs and nothing else from the parent's path."""


def _worker_site_dirs() -> list[str]:
    """Installed-package directories of the parent that ``python -I`` leaves out: its user site, when in use.

    Returns:
        ``[user site-packages]`` when the parent has it on ``sys.path`` (a ``pip install --user``),
        else ``[]``. ``PYTHONPATH`` entries, the working directory and paths a program added are
        never passed: a worker imports only the installed packages.
    """
    try:
        import site

        user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    except Exception:  # pragma: no cover - an unusual site module
        return []
    if isinstance(user, str) and user and any(isinstance(p, str) and os.path.abspath(p) == user for p in sys.path):
        return [user]
    return []


def _worker_argv(read_fd: int, write_fd: int) -> list[str]:
    import json

    import studybench

    package_dir = os.path.dirname(os.path.abspath(studybench.__file__ or ""))
    return [sys.executable, "-I", "-c", _BOOT, package_dir, json.dumps(_worker_site_dirs(), allow_nan=False),
            str(read_fd), str(write_fd), str(os.getpid())]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class _Spawner:
    """Starts worker processes from one long-lived daemon thread of this process.

    Linux delivers ``PR_SET_PDEATHSIG`` when the *thread* that started a process exits, not the
    process: a worker started from a short-lived caller thread (an executor thread, a user thread)
    would be killed when that thread ends. Starting every worker here ties them to the process.
    """

    _lock = threading.Lock()
    _queue: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] | None = None
    _pid: int | None = None

    @classmethod
    def run(cls, fn: Callable[[], Any]) -> Any:
        """``fn()`` run on the spawner thread; its result, or its exception re-raised here."""
        with cls._lock:
            if cls._queue is None or cls._pid != os.getpid():  # first use, or a forked child
                cls._queue = queue.SimpleQueue()
                cls._pid = os.getpid()
                threading.Thread(target=cls._serve, args=(cls._queue,), name="studybench-spawner", daemon=True).start()
            q = cls._queue
        box: list[Any] = []
        done = threading.Event()
        q.put((fn, box, done))
        try:
            done.wait()
        except BaseException:
            done.wait()  # e.g. Ctrl-C: let the start finish before the caller closes the descriptors it passes
            raise
        ok, value = box[0]
        if not ok:
            raise value
        return value

    @staticmethod
    def _serve(q: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]]) -> None:
        while True:
            fn, box, done = q.get()
            try:
                box.append((True, fn()))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box.append((False, e))
            done.set()


class _Worker:
    """One worker: a fresh isolated interpreter (``python -I -c``) talking over two pipes.

    A fresh interpreter (rather than ``fork``/``forkserver``) never re-imports the caller's
    ``__main__`` and inherits no threads or locks; it costs one interpreter start plus the SymPy
    import (about a second) per worker, paid once since workers are reused.
    """

    def __init__(self) -> None:
        from multiprocessing.connection import Connection

        c_read, p_write = os.pipe()
        p_read, c_write = os.pipe()
        try:
            argv, env = _worker_argv(c_read, c_write), _child_env()
            self.proc: subprocess.Popen[bytes] = _Spawner.run(lambda: subprocess.Popen(
                argv,
                pass_fds=(c_read, c_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            ))
        except BaseException:
            for fd in (c_read, p_write, p_read, c_write):
                os.close(fd)
            raise
        os.close(c_read)
        os.close(c_write)
        self._w = Connection(p_write, readable=False)
        self._r = Connection(p_read, writable=False)
        self.ready = False

    def send(self, obj: Any) -> None:
        self._w.send(obj)

    def poll(self, timeout: float) -> bool:
        return self._r.poll(timeout)

    def recv(self) -> Any:
        return self._r.recv()

    def wait_ready(self, timeout: float) -> bool:
        if self.ready:
            return True
        try:
            if self._r.poll(timeout):
                msg = self._r.recv()
                self.ready = isinstance(msg, tuple) and msg[0] == "ready"
        except (EOFError, OSError):
            self.ready = False
        return self.ready

    def kill(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.kill()  # SIGKILL
            self.proc.wait(timeout=5)
        except Exception:  # pragma: no cover - best effort
            pass
        for c in (self._w, self._r):
            try:
                c.close()
            except OSError:  # pragma: no cover
                pass

    def stop(self) -> None:
        try:
            self._w.send(None)
            self.proc.wait(timeout=1)
        except Exception:
            pass
        self.kill()


class SandboxPool:
    """A lazily started, thread-safe pool of sandbox worker processes.

    Use :meth:`call` from any thread; :meth:`close` (or the context manager) stops the workers.

    Args:
        workers: maximum number of worker processes (default: CPU count, at most 8).

    Attributes:
        max_workers: the maximum number of worker processes.
        kills: how many workers were killed for overrunning their timeout.
    """

    def __init__(self, workers: int | None = None) -> None:
        """Create the pool; no worker starts before it is needed."""
        n = workers if workers is not None else min(8, os.cpu_count() or 1)
        self.max_workers = max(1, int(n))
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._all: set[_Worker] = set()
        self._closed = False
        self.kills = 0

    def _acquire(self, deadline: float) -> _Worker:
        """A ready worker, waiting at most until ``deadline`` (``time.monotonic()``).

        Waits for one to be free or to finish booting; raises :class:`TimedOut` when none is ready in time.
        """
        while True:
            if self._closed:
                raise RuntimeError("sandbox pool is closed")
            remaining = deadline - time.monotonic()
            w: _Worker | None = None
            try:
                w = self._idle.get_nowait()
            except queue.Empty:
                with self._lock:
                    if len(self._all) < self.max_workers:
                        w = _Worker()
                        self._all.add(w)
            if w is None:
                if remaining <= 0:
                    raise TimedOut()
                try:
                    w = self._idle.get(timeout=min(0.25, remaining))
                except queue.Empty:
                    continue
            if w.ready:
                return w
            if w.wait_ready(max(0.0, deadline - time.monotonic())):
                return w
            if w.proc.poll() is not None:
                self._discard(w)
                raise WorkerDied("worker failed to start")
            self._idle.put(w)  # still booting: leave it for a later call
            raise TimedOut()

    def _discard(self, w: _Worker) -> None:
        with self._lock:
            self._all.discard(w)
        w.kill()

    def _replace(self) -> None:
        """Start a replacement for a killed worker now (it boots while the caller moves on).

        The next task then does not wait for a whole interpreter start. Best effort; never raises.
        """
        try:
            with self._lock:
                if self._closed or len(self._all) >= self.max_workers:
                    return
                w = _Worker()
                self._all.add(w)
            self._idle.put(w)
        except Exception:  # pragma: no cover - out of processes etc.: start lazily later
            pass

    def _release(self, w: _Worker) -> None:
        if self._closed:
            self._discard(w)
        else:
            self._idle.put(w)

    def call(self, name: str, args: tuple[Any, ...], timeout: float) -> Any:
        """Run a named task in a worker under a hard wall-clock timeout.

        The timeout covers the whole call: waiting for a free (or booting) worker and the task itself, so
        a call returns within about ``timeout`` even when many threads share few workers. Start the workers
        first with :meth:`warm` so that interpreter start-up does not count against early calls.

        Args:
            name: a task of :data:`TASKS` (``"verdict"``, ``"parsable"``, ``"sleep"``, ``"ping"``, ``"origin"``).
            args: the task's arguments (plain picklable values).
            timeout: wall-clock seconds for the whole call.

        Returns:
            The task's result.

        Raises:
            TimedOut: no worker was ready in time, or the task overran (the worker is killed and replaced).
            WorkerDied: the worker crashed (e.g. hit its memory limit).
            RuntimeError: a task-side error, an unknown task, or a closed pool.
        """
        deadline = time.monotonic() + max(0.0, float(timeout))
        w = self._acquire(deadline)
        try:
            w.send((name, args))
            if not w.poll(max(0.0, deadline - time.monotonic())):
                self.kills += 1
                self._discard(w)
                self._replace()
                raise TimedOut()
            status, value = w.recv()
        except (EOFError, OSError, BrokenPipeError) as e:
            self._discard(w)
            raise WorkerDied(type(e).__name__) from None
        except TimedOut:
            raise
        except BaseException:
            self._discard(w)
            raise
        self._release(w)
        if status != "ok":
            raise RuntimeError(str(value))
        return value

    def warm(self, n: int | None = None) -> None:
        """Start workers now, in parallel, and wait until they are ready (at most two minutes).

        Args:
            n: how many (default: all). Never raises for a worker that fails to start.
        """
        want = min(n or self.max_workers, self.max_workers)
        fresh: list[_Worker] = []
        with self._lock:
            while not self._closed and len(self._all) < want:
                try:
                    w = _Worker()
                except Exception:  # pragma: no cover - out of processes
                    break
                self._all.add(w)
                fresh.append(w)
        for w in fresh:
            if w.wait_ready(_READY_TIMEOUT):
                self._release(w)
            else:
                self._discard(w)

    @property
    def size(self) -> int:
        """Number of live worker processes."""
        with self._lock:
            return len(self._all)

    def close(self) -> None:
        """Stop all workers. Idempotent."""
        self._closed = True
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for w in workers:
            w.stop()

    def __enter__(self) -> SandboxPool:
        """Use the pool as a context manager that closes it on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop all workers (:meth:`close`)."""
        self.close()
