"""Progress for logs: one plain line per phase every tenth of its total or every 30 s.

A long ``eval``, ``judge`` or ``build retrieve`` whose output goes to a file or a pipe (``nohup``, a
batch job, ``| tee``) cannot draw progress bars, and printed nothing for many minutes. There,
:class:`LineProgress` prints lines such as::

    generate: 1200/4000 turns (30%), 3.2 turns/s, elapsed 0:06:15, ETA 0:14:35

when a phase starts, each time it passes another tenth of its total (but not within a second of the
last line), at least every 30 s while it runs (also when nothing finished meanwhile: a heartbeat),
and when it ends. The same
:data:`studybench.evaluate.ProgressFn` calls drive it and the Rich bars
(:func:`studybench.cli.common.progress_bars` picks one).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LINE_EVERY_S", "LINE_GAP_S", "LINE_STEP", "LineProgress", "clock_text"]

LINE_STEP = 0.1
"""A line each time a phase passes another such share of its total."""

LINE_EVERY_S = 30.0
"""And a line at least this often (seconds) while a phase runs."""

LINE_GAP_S = 1.0
"""But a tenth passed sooner than this after the last line prints none (a fast phase prints its first
and last lines only)."""


def clock_text(seconds: float) -> str:
    """``h:mm:ss`` of a non-negative number of seconds (``"?"`` when not finite)."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass
class _Phase:
    started: float
    last_line: float
    total: int | None = None
    done: int = 0
    next_mark: float = LINE_STEP
    finished: bool = False
    shown: int = -1  # ``done`` at the last line


class LineProgress:
    """A :data:`studybench.evaluate.ProgressFn` that writes progress lines (see the module docstring).

    Args:
        write: where each line goes (e.g. a console's ``print``).
        unit: what is counted (``"turns"``; ``""`` for nothing).
        step: a line each time a phase passes another such share of its total.
        every: and a line at least this often (seconds) while a phase runs (:meth:`tick`).
        gap: but no line for a tenth passed sooner than this (seconds) after the last line.
        clock: the time source (``time.monotonic``).

    Thread-safe: the evaluation calls it from its event loop while :meth:`tick` runs on a timer thread.
    """

    def __init__(self, write: Callable[[str], None], *, unit: str = "turns", step: float = LINE_STEP,
                 every: float = LINE_EVERY_S, gap: float = LINE_GAP_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.write, self.unit, self.step, self.every, self.gap, self.clock = write, unit, step, every, gap, clock
        self._phases: dict[str, _Phase] = {}
        self._lock = threading.Lock()

    def _line(self, name: str, p: _Phase, now: float) -> str:
        elapsed = now - p.started
        if p.shown < 0 and not p.done:
            return f"{name}: 0/{p.total}{' ' + self.unit if self.unit else ''}" if p.total else f"{name}: started"
        rate = p.done / elapsed if elapsed > 0 else 0.0
        unit = f" {self.unit}" if self.unit else ""
        per = f"{self.unit}/s" if self.unit else "/s"
        if p.total:
            share = min(p.done, p.total) / p.total
            left = max(p.total - p.done, 0)
            eta = clock_text(left / rate) if rate > 0 else "?"
            head = f"{name}: {p.done}/{p.total}{unit} ({100 * share:.0f}%)"
            tail = "done" if p.done >= p.total else f"ETA {eta}"
            return f"{head}, {rate:.1f} {per}, elapsed {clock_text(elapsed)}, {tail}"
        return f"{name}: {p.done}{unit}, {rate:.1f} {per}, elapsed {clock_text(elapsed)}"

    def _emit(self, name: str, p: _Phase, now: float) -> None:
        line = self._line(name, p, now)
        p.last_line, p.shown = now, p.done
        if p.total:
            p.next_mark = (math.floor(p.done / p.total / self.step + 1e-9) + 1) * self.step
        self.write(line)

    def __call__(self, phase: str, advance: int, total: int | None) -> None:
        """Count ``advance`` more done in ``phase`` (``total``: its new total, or ``None``: unchanged)."""
        with self._lock:
            now = self.clock()
            p = self._phases.get(phase)
            if p is None:
                p = self._phases[phase] = _Phase(started=now, last_line=now, total=total)
                p.done += advance
                self._emit(phase, p, now)  # the phase starts: say so, with its total
                return
            if total is not None:
                p.total = total
            p.done += advance
            if p.finished:
                return
            if p.total and p.done >= p.total:
                p.finished = True
                self._emit(phase, p, now)
            elif now - p.last_line >= self.every or (
                    p.total and p.done / p.total >= p.next_mark - 1e-9 and now - p.last_line >= self.gap):
                self._emit(phase, p, now)

    def tick(self) -> None:
        """Write a line for every running phase that has had none for ``every`` seconds (a heartbeat)."""
        with self._lock:
            now = self.clock()
            for name, p in self._phases.items():
                if not p.finished and now - p.last_line >= self.every:
                    self._emit(name, p, now)

    def close(self) -> None:
        """Write the last line of every phase that did not end with one (a run stopped or interrupted)."""
        with self._lock:
            now = self.clock()
            for name, p in self._phases.items():
                if not p.finished and p.done != p.shown:
                    p.finished = True
                    self._emit(name, p, now)
