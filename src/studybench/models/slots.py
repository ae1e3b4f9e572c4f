"""A bound on concurrent work that costs the same however many tasks wait for it.

:class:`Slots` is what :class:`asyncio.Semaphore` is used for in the harness (at most ``n`` holders,
waiters served first come first served), at a constant cost per acquire and release. The standard
semaphore scans its waiters on every release and on every uncontended acquire (Python 3.11-3.13:
``_wake_up_next`` and ``locked()`` walk the queue), and a generation pass keeps every chain waiting
on it (1,440 chains for 64 to 1,024 slots in ``bench/harness_bench.py``), so its cost per turn grew
with the number of chains: at concurrency 1,024 it was the largest single cost of the pass.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

__all__ = ["Slots"]


class Slots:
    """At most ``n`` holders at once; waiters get a slot in the order they asked (``async with``).

    A released slot goes straight to the first waiter still waiting; a waiter cancelled while it
    waits gives up its place, and one cancelled just after it was handed a slot passes it on.

    Args:
        n: the number of slots.

    Raises:
        ValueError: ``n`` below 1.
    """

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("Slots need n >= 1")
        self._free = n
        self._waiters: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        """Whether an acquire would wait now."""
        return self._free == 0

    async def acquire(self) -> None:
        """Take a slot, waiting for one when none is free."""
        # a free slot means no one is waiting (release hands slots to waiters): what is left in the
        # queue are futures of waiters cancelled meanwhile
        if self._free > 0:
            waiters = self._waiters
            while waiters and waiters[0].done():
                waiters.popleft()
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed a slot, then cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back (to the first waiter still waiting, if any)."""
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: Any) -> None:
        self.release()
