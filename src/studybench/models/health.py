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

import math
import time
from dataclasses import dataclass, field

__all__ = ["DEFAULT_LIVENESS_TIMEOUT", "EndpointHealth", "LivenessCheck", "UNREACHABLE_STATUSES"]

DEFAULT_LIVENESS_TIMEOUT = 20.0
"""Seconds the liveness probe may go unanswered, while requests are in flight, before the endpoint
counts as hung (:class:`LivenessCheck`)."""

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
    hung: str | None = None
    """Why the endpoint counts as hung (it accepts connections and answers neither requests nor the
    liveness probe: :class:`LivenessCheck`), or ``None``."""
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

    def in_flight(self) -> int:
        """Attempts sent and not over yet."""
        return len(self._pending)

    def oldest_sent(self) -> float | None:
        """``time.monotonic()`` at which the oldest attempt still in flight was sent (``None``: none is)."""
        return min(self._pending.values(), default=None)


@dataclass
class LivenessCheck:
    """Telling a hung server from a slow one while requests are in flight.

    A long reasoning completion may legitimately take many minutes, so a request's own timeout cannot
    tell a slow server from one that accepts connections and never answers. While requests are in
    flight and none has been answered for :attr:`interval` seconds, the server's model list (``GET
    /models``, which vLLM and llama.cpp answer at once while they generate) is probed every
    :attr:`interval` seconds. The endpoint counts as hung when the probes, too, got no answer for
    :attr:`timeout` seconds and no request was answered meanwhile; any answer (any HTTP status) keeps
    it alive, so a slow but live server is never cut.

    Attributes:
        timeout: seconds without an answer to the probe (and to every request) before the endpoint is hung.
        failing_since: ``time.monotonic()`` at which the first unanswered probe of the current run of
            them was sent (``None``: the last probe was answered).
    """

    timeout: float = DEFAULT_LIVENESS_TIMEOUT
    failing_since: float | None = None

    @property
    def interval(self) -> float:
        """Seconds between probes, and of silence before the first: a quarter of the timeout, at most 5 s."""
        return min(5.0, self.timeout / 4)

    def due(self, health: EndpointHealth, now: float | None = None) -> bool:
        """Whether to probe now: attempts are in flight, the oldest waited :attr:`interval` seconds, and
        none was answered for as long.

        Args:
            health: the endpoint's attempts.
            now: ``time.monotonic()`` (default: now).
        """
        now = time.monotonic() if now is None else now
        oldest = health.oldest_sent()
        return (oldest is not None and now - oldest >= self.interval
                and now - health.last_answer >= self.interval)

    def answered(self) -> None:
        """Record a probe the server answered."""
        self.failing_since = None

    def unanswered(self, sent: float, health: EndpointHealth, now: float | None = None) -> bool:
        """Record a probe sent at ``sent`` that got no answer (a timeout, a refused or dropped connection).

        Args:
            sent: ``time.monotonic()`` when the probe was sent.
            health: the endpoint's attempts (an answer to a request since ``sent`` keeps it alive).
            now: ``time.monotonic()`` (default: now).

        Returns:
            Whether the endpoint is now hung: probes have gone unanswered for :attr:`timeout` seconds
            and no request was answered since the first of them was sent.
        """
        now = time.monotonic() if now is None else now
        if health.last_answer >= sent:  # a request was answered meanwhile: alive
            self.failing_since = None
            return False
        if self.failing_since is None or health.last_answer >= self.failing_since:
            self.failing_since = sent
        return math.isfinite(self.timeout) and now - self.failing_since >= self.timeout
