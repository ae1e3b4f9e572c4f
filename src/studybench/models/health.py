"""Whether an endpoint is still answering, judged from every request attempt (retries included).

A generation pass asks :class:`EndpointHealth` whether to give up on an endpoint that died mid-run:
counting failed *turns* waits for every turn's retries and backoff (minutes at the default of six
retries), while counting failed *attempts* across all turns in flight sees a dead server within
seconds. An attempt counts as unreachable when no answer came (connection refused, reset or dropped,
a timeout) or a gateway answered for a backend that is gone (HTTP 502, 503, 504); any answer of the
server itself (a reply, an HTTP 4xx or 500) resets the count. An attempt sent before the count began
and still waiting (:meth:`EndpointHealth.begin`) keeps the endpoint alive: a slow server that is
working on earlier requests is not dead because newer ones got HTTP 503 from a proxy meanwhile.
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
    streak_began: float = 0.0
    _pending: dict[int, float] = field(default_factory=dict, repr=False)
    _next: int = field(default=0, repr=False)

    def begin(self) -> int:
        """Record an attempt being sent; pass the returned token to :meth:`end` when it is over.

        Returns:
            The attempt's token.
        """
        self._next += 1
        self._pending[self._next] = time.monotonic()
        return self._next

    def end(self, token: int) -> None:
        """Record that the attempt of ``token`` (from :meth:`begin`) is over, however it ended.

        Args:
            token: what :meth:`begin` returned.
        """
        self._pending.pop(token, None)

    def answered(self) -> None:
        """Record an attempt the server answered (a reply or an HTTP error of its own)."""
        self.streak = 0
        self.last_answer = time.monotonic()

    def unreachable(self, error: str) -> None:
        """Record an attempt that got no answer from the server.

        Args:
            error: what happened (``"ConnectError"``, ``"HTTP 503"``).
        """
        if self.streak == 0:
            self.streak_began = time.monotonic()
        self.streak += 1
        self.last_error = error

    def dead(self, min_streak: int, grace_s: float) -> bool:
        """Whether the endpoint looks gone: ``min_streak`` unreachable attempts in a row, no answer
        for ``grace_s`` seconds (so a server restarting for a moment does not end a run), and no
        attempt still waiting that was sent before the unreachable ones began (a slow server still
        working on it is alive).

        Args:
            min_streak: unreachable attempts in a row needed (``<= 0``: never dead).
            grace_s: seconds without an answer needed.

        Returns:
            ``True`` when both hold.
        """
        if min_streak <= 0 or self.streak < min_streak or time.monotonic() - self.last_answer < grace_s:
            return False
        return not any(sent < self.streak_began for sent in self._pending.values())

    def silent_for(self) -> float:
        """Seconds since the server last answered."""
        return time.monotonic() - self.last_answer
