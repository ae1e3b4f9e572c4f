"""Whether an endpoint is still answering, judged from every request attempt (retries included).

A generation pass asks :class:`EndpointHealth` whether to give up on an endpoint that died mid-run:
counting failed *turns* waits for every turn's retries and backoff (minutes at the default of six
retries), while counting failed *attempts* across all turns in flight sees a dead server within
seconds. An attempt counts as unreachable when no answer came (connection refused, reset or dropped,
a timeout) or a gateway answered for a backend that is gone (HTTP 502, 503, 504); any answer of the
server itself (a reply, an HTTP 4xx or 500) resets the count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["EndpointHealth", "UNREACHABLE_STATUSES"]

UNREACHABLE_STATUSES = frozenset({502, 503, 504})
"""HTTP statuses a proxy or load balancer sends when no model server is behind it."""


@dataclass
class EndpointHealth:
    """Consecutive unreachable attempts and the time of the last answer.

    Attributes:
        streak: attempts in a row, across all requests, that got no answer from the server.
        last_answer: ``time.monotonic()`` of the last attempt the server answered (or of creation).
        last_error: a short description of the last unreachable attempt.
    """

    streak: int = 0
    last_answer: float = field(default_factory=time.monotonic)
    last_error: str = ""

    def answered(self) -> None:
        """Record an attempt the server answered (a reply or an HTTP error of its own)."""
        self.streak = 0
        self.last_answer = time.monotonic()

    def unreachable(self, error: str) -> None:
        """Record an attempt that got no answer from the server.

        Args:
            error: what happened (``"ConnectError"``, ``"HTTP 503"``).
        """
        self.streak += 1
        self.last_error = error

    def dead(self, min_streak: int, grace_s: float) -> bool:
        """Whether the endpoint looks gone: ``min_streak`` unreachable attempts in a row and no answer
        for ``grace_s`` seconds (so a server restarting for a moment does not end a run).

        Args:
            min_streak: unreachable attempts in a row needed (``<= 0``: never dead).
            grace_s: seconds without an answer needed.

        Returns:
            ``True`` when both hold.
        """
        return min_streak > 0 and self.streak >= min_streak and time.monotonic() - self.last_answer >= grace_s

    def silent_for(self) -> float:
        """Seconds since the server last answered."""
        return time.monotonic() - self.last_answer
