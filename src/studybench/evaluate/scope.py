"""The turns a pass works on: selected parents x sub-problems x seeds x attempts.

A **turn** is one sub-problem of one attempt of one seed; its key is
(split, parent uid, sub-problem id, seed, attempt). Per-request sampling seeds are derived from
(seed, attempt, parent, sub-problem index) by sha256, so a rerun asks exactly the same requests.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from studybench.records import Parent, SubProblemRef
from studybench.store import TurnKey

__all__ = ["ProgressFn", "RunScope", "close_all", "request_seed", "run_sync"]

ProgressFn = Callable[[str, int, "int | None"], None]
"""``progress(phase, advance, total)``: each pass first calls it with ``advance=0`` and its total
(``None`` when unknown), then with the number of turns finished since the last call. Phases:
``"generate"``, ``"verify"``, ``"llm judge"``."""


_T = TypeVar("_T")


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine of a pass to completion from synchronous code.

    Also when an event loop is running already (a Jupyter notebook): then the coroutine runs on a
    fresh loop in a worker thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="studybench-eval") as pool:
        return pool.submit(asyncio.run, coro).result()


async def close_all(*things: Any) -> None:
    """Close each client given (``None`` is skipped); a failure to close never masks the real outcome."""
    for thing in things:
        if thing is not None:
            try:
                await thing.aclose()
            except Exception:  # noqa: BLE001 - closing must not mask the real outcome
                pass


def request_seed(seed: int, attempt: int, parent_uid: str, sub_index: int) -> int:
    """Deterministic per-request sampling seed in [0, 2**31) from run seed, attempt and sub-problem.

    Args:
        seed: the run seed.
        attempt: the attempt index (0..k-1).
        parent_uid: :attr:`studybench.records.Parent.uid`.
        sub_index: the sub-problem's position in its parent.

    Returns:
        The first 31 bits of sha256("seed|attempt|parent_uid|sub_index").
    """
    h = hashlib.sha256(f"{seed}|{attempt}|{parent_uid}|{sub_index}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class RunScope:
    """The selection one invocation covers.

    Attributes:
        split: the name used in turn keys (``application``, ``transfer`` or a file stem).
        parents: the selected parents, in file order.
        k: attempts per parent and seed.
        seeds: the run seeds.
    """

    split: str
    parents: list[Parent]
    k: int
    seeds: list[int]

    @property
    def n_sub_problems(self) -> int:
        """Scored sub-problems of the selected parents."""
        return sum(len(p.subs()) for p in self.parents)

    @property
    def n_turns(self) -> int:
        """Sub-problems x k x seeds."""
        return self.n_sub_problems * self.k * len(self.seeds)

    def key(self, ref: SubProblemRef, seed: int, attempt: int) -> TurnKey:
        """The turn key of sub-problem ``ref`` in ``attempt`` of ``seed``."""
        return TurnKey(self.split, ref.parent.uid, ref.sub_id, seed, attempt)

    def turns(self) -> Iterator[tuple[TurnKey, SubProblemRef]]:
        """Every (turn key, sub-problem) of the scope: parents x sub-problems x seeds x attempts."""
        for parent in self.parents:
            for i, sub in enumerate(parent.subs()):
                ref = SubProblemRef(parent, i, sub)
                for seed in self.seeds:
                    for a in range(self.k):
                        yield self.key(ref, seed, a), ref

    def chains(self) -> Iterator[tuple[Parent, int, int]]:
        """Every (parent, seed, attempt): one sequential solve of a parent's sub-problems."""
        for seed in self.seeds:
            for a in range(self.k):
                for p in self.parents:
                    yield p, seed, a
