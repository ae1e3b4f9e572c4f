"""Rule judging on a Ray cluster: a Ray Data pipeline whose actors each hold one :class:`~studybench.verify.Verifier`.

The items are those of :meth:`Verifier.verify_many <studybench.verify.Verifier.verify_many>` (boxes) or
:meth:`Verifier.verify_responses <studybench.verify.Verifier.verify_responses>` (raw responses). They go
through ``ray.data.from_items`` (one row per item: its index and the pickled item), then
``map_batches(JudgeActor, compute=ray.data.ActorPoolStrategy(...))``: every actor holds one verifier with
one sandbox worker (the actor is the unit of parallelism; it asks Ray for one CPU, which that worker
uses). Each actor judges its batch exactly as a local verifier would, under the same hard timeout per
judgement: a judgement that overruns is ``"incorrect: timed out"`` and the actor goes on with the next
item. Verdicts come back as their JSON form (:meth:`Verdict.to_dict
<studybench.verify.verdict.Verdict.to_dict>`) and are put back in input order.

Connection and shutdown (who owns the cluster):

* Ray already initialised in this process (``ray.init`` called by the caller): it is used as it is and
  left running; the caller shuts it down.
* Otherwise :class:`RayVerifier` calls ``ray.init(address=ADDRESS)`` when an address is given (``auto``,
  ``ray://host:10001`` or ``host:6379``: an existing cluster, e.g. ``ray start --head``), else starts a
  local cluster (``ray.init(num_cpus=...)``). :meth:`RayVerifier.close` (or leaving its ``with`` block)
  calls ``ray.shutdown()``: that disconnects from an existing cluster, which keeps running, or stops
  the local one it started.

Every node needs the same ``studybench`` installed (``pip install 'studybench[ray]'``): the actors import
it. Ray itself is imported only when a pipeline runs; without the ``ray`` extra :class:`RayUnavailableError`
says how to install it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import pickle
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from studybench.verify import Verdict, Verifier

__all__ = [
    "RAY_INSTALL_HINT",
    "JudgeActor",
    "RayJudgeError",
    "RayUnavailableError",
    "RayVerifier",
    "ray_available",
    "ray_verify_many",
    "ray_verify_responses",
]

RAY_INSTALL_HINT = "pip install 'studybench[ray]'"
"""How to install the ``ray`` extra."""

_MODES = ("boxes", "responses")


class RayUnavailableError(RuntimeError):
    """The ``ray`` extra is not installed (the message names ``pip install 'studybench[ray]'``)."""


class RayJudgeError(RuntimeError):
    """Ray could not be started or reached, or the pipeline itself failed (not a judgement: those never fail)."""


def ray_available() -> bool:
    """Whether Ray (with Ray Data) is importable.

    Returns:
        ``True`` when ``ray`` and ``ray.data`` can be imported.
    """
    try:
        return importlib.util.find_spec("ray") is not None and importlib.util.find_spec("ray.data") is not None
    except (ImportError, ValueError):
        return False


def _import_ray() -> Any:
    if not ray_available():
        raise RayUnavailableError(f"judging on Ray needs the 'ray' extra: {RAY_INSTALL_HINT}")
    import ray
    import ray.data  # noqa: F401 - Ray Data must load

    return ray


class JudgeActor:
    """The callable class of the pipeline's ``map_batches``: one :class:`Verifier` per Ray actor.

    Args:
        timeout: the verifier's hard wall-clock seconds per judgement.
        mode: ``"boxes"`` (items of :meth:`Verifier.verify_many`) or ``"responses"`` (items of
            :meth:`Verifier.verify_responses`).

    Raises:
        ValueError: an unknown ``mode`` or a bad ``timeout``.
    """

    def __init__(self, timeout: float = 5.0, mode: str = "boxes") -> None:
        """Start the actor's verifier and its one sandbox worker (a second or so, part of the actor's start)."""
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        self.mode = mode
        self.verifier = Verifier(workers=1, timeout=timeout)
        self.verifier.warm()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Judge one batch.

        Args:
            batch: columns ``i`` (the items' indices) and ``item`` (each item pickled by the driver).

        Returns:
            Columns ``i`` (unchanged) and ``result``: per item the JSON of its verdict
            (``{"correct", "reason", "extracted"}``), with ``"answers"`` (the extracted answers) in
            ``responses`` mode. A malformed item gives an incorrect verdict, as locally; never raises.
        """
        import numpy as np

        items: list[Any] = []
        for blob in batch["item"]:
            try:
                items.append(pickle.loads(bytes(blob)))  # pickled by this pipeline's driver (RayVerifier)
            except Exception:  # noqa: BLE001 - judged below as a malformed item
                items.append(None)
        out: list[str] = []
        if self.mode == "responses":
            for answers, verdict in self.verifier.verify_responses(items):
                out.append(json.dumps({**verdict.to_dict(), "answers": list(answers)}, ensure_ascii=False, allow_nan=False))
        else:
            out.extend(json.dumps(v.to_dict(), ensure_ascii=False, allow_nan=False) for v in self.verifier.verify_many(items))
        return {"i": np.asarray(batch["i"]), "result": np.asarray(out, dtype=object)}

    def __del__(self) -> None:
        """Stop the actor's sandbox worker with the actor."""
        v = getattr(self, "verifier", None)
        if v is not None:
            v.close()


def _verdict(d: dict[str, Any]) -> Verdict:
    return Verdict(bool(d["correct"]), str(d["reason"]), tuple(str(x) for x in d.get("extracted") or ()))


@contextmanager
def _quiet_data_context(ray: Any) -> Iterator[None]:
    """Ray Data without its progress bars and per-execution INFO lines, restored afterwards."""
    ctx = ray.data.DataContext.get_current()
    saved = {k: getattr(ctx, k) for k in ("enable_progress_bars", "print_on_execution_start", "enable_auto_log_stats")
             if hasattr(ctx, k)}
    log = logging.getLogger("ray.data")
    level = log.level
    try:
        for k in saved:
            setattr(ctx, k, False)
        if log.getEffectiveLevel() < logging.ERROR:
            log.setLevel(logging.ERROR)  # its INFO lines and the "progress bars disabled" warning
        yield
    finally:
        for k, v in saved.items():
            setattr(ctx, k, v)
        log.setLevel(level)


def _check_reachable(address: str) -> None:
    """Fail fast on a ``host:port`` (or ``ray://host:port``) nobody answers at: Ray itself retries for minutes."""
    hostport = address.removeprefix("ray://").strip()
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host or "/" in hostport:
        return  # "auto", "local": Ray resolves them itself (and fails fast)
    shown = address if len(address) <= 100 else address[:97] + "..."
    if len(port) > 5 or not 0 < int(port) < 65536:
        raise RayJudgeError(f"cannot reach the Ray cluster at {shown}: the port must be 1-65535")
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=5.0).close()
    except (OSError, UnicodeError) as e:  # UnicodeError: a host name IDNA cannot encode (a label over 63 chars)
        why = "not a valid host name" if isinstance(e, UnicodeError) else e.strerror or type(e).__name__
        raise RayJudgeError(f"cannot reach the Ray cluster at {shown}: {why} "
                            "(start one with `ray start --head`, or check the address)") from None


class RayVerifier:
    """A rule verifier that judges on Ray: ``verify_many`` / ``verify_responses`` as a Ray Data pipeline.

    It has the methods of :class:`~studybench.verify.Verifier` that judge many items, so it can take its
    place in the rule pass (:func:`~studybench.evaluate.add_rule_verdicts`). Verdicts are identical to a
    local verifier's with the same ``timeout``. Ray is connected (or started) on first use; see the module
    docstring for who shuts it down.

    Args:
        address: a Ray cluster to connect to (``auto``, ``host:6379``, ``ray://host:10001``); ``None``:
            ``$RAY_ADDRESS`` when set, else a local cluster is started (when none runs in this process).
        num_cpus: CPUs of a local cluster this object starts (default: Ray's, all of them).
        actors: actors in the pool (default: the cluster's CPUs, at most one per batch).
        batch_size: items per batch (default: the items spread into about four batches per actor, at
            most 256 each).
        timeout: hard wall-clock seconds per judgement, as :class:`~studybench.verify.Verifier`'s.
        progress: called with the number of items just judged, as batches come back.

    Attributes:
        chunk: how many items a caller that judges in chunks (the rule pass) should send per call:
            each call is one pipeline whose actors start afresh, which costs seconds.

    Raises:
        ValueError: a bad ``actors``, ``batch_size``, ``num_cpus`` or ``timeout``.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        actors: int | None = None,
        batch_size: int | None = None,
        timeout: float = 5.0,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Check the settings; nothing starts before the first pipeline."""
        for name, val in (("actors", actors), ("batch_size", batch_size), ("num_cpus", num_cpus)):
            if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < 1):
                raise ValueError(f"{name} must be a whole number >= 1 (or None), got {val!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
        self.address = address
        self.num_cpus = num_cpus
        self.actors = actors
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.progress = progress
        self._owns_ray = False
        self.chunk = 16_384

    # -- connection
    def connect(self) -> None:
        """Connect to the cluster (or start a local one) unless Ray is already initialised in this process.

        Raises:
            RayUnavailableError: the ``ray`` extra is not installed.
            RayJudgeError: Ray could not be started or the address could not be reached.
        """
        ray = _import_ray()
        if ray.is_initialized():
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage reports over the network
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                  "ignore_reinit_error": True}
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        if address:
            _check_reachable(address)
            kwargs["address"] = address
        elif self.num_cpus is not None:
            kwargs["num_cpus"] = self.num_cpus
        try:
            ray.init(**kwargs)
        except Exception as e:  # ConnectionError, RuntimeError, ValueError: all one-line reasons
            where = f"the Ray cluster at {address if len(address) <= 100 else address[:97] + '...'}" if address else "a local Ray cluster"
            raise RayJudgeError(f"cannot start or reach {where}: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}") from None
        self._owns_ray = True

    def close(self) -> None:
        """``ray.shutdown()`` when this object initialised Ray (disconnects from, or stops, the cluster). Idempotent."""
        if self._owns_ray:
            self._owns_ray = False
            import ray

            ray.shutdown()

    def __enter__(self) -> RayVerifier:
        """Use as a context manager that closes what it opened (:meth:`close`)."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close (:meth:`close`)."""
        self.close()

    # -- judging
    def _run(self, items: Sequence[Any], mode: str) -> list[dict[str, Any]]:
        n = len(items)
        if n == 0:
            return []
        self.connect()
        import ray

        actors = self.actors
        if actors is None:
            actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
        size = self.batch_size or max(1, min(256, math.ceil(n / (4 * actors))))
        pool = max(1, min(actors, math.ceil(n / size)))
        rows = [{"i": i, "item": pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)} for i, item in enumerate(items)]
        out: list[dict[str, Any] | None] = [None] * n
        try:
            with _quiet_data_context(ray):
                ds = ray.data.from_items(rows).map_batches(
                    JudgeActor,
                    compute=ray.data.ActorPoolStrategy(min_size=pool, max_size=pool),
                    batch_size=size,
                    batch_format="numpy",
                    fn_constructor_kwargs={"timeout": self.timeout, "mode": mode},
                    num_cpus=1,
                )
                for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                    for i, res in zip(batch["i"], batch["result"], strict=True):
                        out[int(i)] = json.loads(res)
                    if self.progress is not None:
                        self.progress(len(batch["i"]))
        except RayUnavailableError:
            raise
        except Exception as e:  # a lost node or actor, a stopped cluster
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            raise RayJudgeError(f"the Ray judging pipeline failed: {type(e).__name__}: {first}") from None
        missing = [i for i, o in enumerate(out) if o is None]
        if missing:
            raise RayJudgeError(f"the Ray judging pipeline returned no verdict for {len(missing)} of {n} items "
                                f"(first: item {missing[0]})")
        return [o for o in out if o is not None]

    def verify_many(self, items: Sequence[Any]) -> list[Verdict]:
        """Verify many answers on the Ray cluster (:meth:`Verifier.verify_many <studybench.verify.Verifier.verify_many>`).

        Args:
            items: ``(gold_boxes, pred_boxes, answer_type, type_sequence[, gold_unit[, problem]])`` tuples.

        Returns:
            One verdict per item, in item order, equal to a local verifier's.

        Raises:
            RayUnavailableError: the ``ray`` extra is not installed.
            RayJudgeError: Ray could not be reached, or the pipeline failed (a judgement never does).
        """
        return [_verdict(d) for d in self._run(items, "boxes")]

    def verify_responses(self, items: Sequence[Any]) -> list[tuple[list[str], Verdict]]:
        """Extract and verify many raw responses on the Ray cluster (:meth:`Verifier.verify_responses <studybench.verify.Verifier.verify_responses>`).

        Args:
            items: ``(gold_answer, response, answer_type, type_sequence[, gold_unit[, problem]])`` tuples.

        Returns:
            One ``(extracted answers, verdict)`` pair per item, in item order, equal to a local verifier's.

        Raises:
            RayUnavailableError: the ``ray`` extra is not installed.
            RayJudgeError: Ray could not be reached, or the pipeline failed (a judgement never does).
        """
        return [([str(a) for a in d.get("answers") or ()], _verdict(d)) for d in self._run(items, "responses")]


def ray_verify_many(items: Sequence[Any], *, address: str | None = None, **options: Any) -> list[Verdict]:
    """Verify many answers on Ray: :meth:`RayVerifier.verify_many`, connecting and closing around one call.

    Args:
        items: as :meth:`Verifier.verify_many <studybench.verify.Verifier.verify_many>`.
        address: the cluster (see :class:`RayVerifier`).
        **options: ``num_cpus``, ``actors``, ``batch_size``, ``timeout``, ``progress`` of :class:`RayVerifier`.

    Returns:
        One verdict per item, in item order.

    Raises:
        RayUnavailableError: the ``ray`` extra is not installed.
        RayJudgeError: Ray could not be reached, or the pipeline failed.
        ValueError: a bad option.
    """
    with RayVerifier(address, **options) as rv:
        return rv.verify_many(items)


def ray_verify_responses(items: Sequence[Any], *, address: str | None = None, **options: Any) -> list[tuple[list[str], Verdict]]:
    """Extract and verify many raw responses on Ray: :meth:`RayVerifier.verify_responses` around one call.

    Args:
        items: as :meth:`Verifier.verify_responses <studybench.verify.Verifier.verify_responses>`.
        address: the cluster (see :class:`RayVerifier`).
        **options: ``num_cpus``, ``actors``, ``batch_size``, ``timeout``, ``progress`` of :class:`RayVerifier`.

    Returns:
        One ``(extracted answers, verdict)`` pair per item, in item order.

    Raises:
        RayUnavailableError: the ``ray`` extra is not installed.
        RayJudgeError: Ray could not be reached, or the pipeline failed.
        ValueError: a bad option.
    """
    with RayVerifier(address, **options) as rv:
        return rv.verify_responses(items)
