"""A small discrete-event engine.

Time is an integer number of nanoseconds.  Events sit in a heap ordered by
``(time, sequence number)``; the sequence number makes ties deterministic
(first scheduled, first run), as in SimPy's ``core.py``.  Nothing here knows
about kernels: the domain lives in the code that schedules events.

A recorder (see :class:`Recorder`) may be attached to ``Engine.recorder``; the
layers above call it to note what ran where.  With no recorder attached the
hook costs one attribute test.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

NSEC_PER_USEC = 1_000
NSEC_PER_MSEC = 1_000_000
NSEC_PER_SEC = 1_000_000_000


class Event:
    """A scheduled callback.  ``cancel()`` it to keep it from running."""

    __slots__ = ("time", "fn", "args")

    def __init__(self, time: int, fn: Callable[..., Any] | None, args: tuple):
        self.time = time
        self.fn = fn
        self.args = args

    @property
    def pending(self) -> bool:
        return self.fn is not None

    def cancel(self) -> None:
        self.fn = None
        self.args = ()


class Engine:
    """The event loop: ``now``, ``at``, ``after``, ``run``."""

    __slots__ = ("now", "_heap", "_seq", "recorder", "events_run")

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Event]] = []
        self._seq = 0
        self.recorder: Recorder | None = None
        self.events_run = 0

    def at(self, time: int, fn: Callable[..., Any], *args: Any) -> Event:
        """Run ``fn(*args)`` at absolute time ``time`` (never in the past)."""
        if time < self.now:
            raise ValueError(f"event time {time} ns is before now ({self.now} ns)")
        ev = Event(int(time), fn, args)
        self._seq += 1
        heapq.heappush(self._heap, (ev.time, self._seq, ev))
        return ev

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> Event:
        return self.at(self.now + delay, fn, *args)

    def peek(self) -> int | None:
        """Time of the next live event, or None."""
        heap = self._heap
        while heap and heap[0][2].fn is None:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run(self, until: int | None = None, stop: Callable[[], bool] | None = None) -> None:
        """Run events up to and including time ``until`` (forever if None).

        ``stop`` is checked after each event; the loop ends when it returns
        True.  On return ``now`` is ``until`` if the loop ran out of events
        or reached it.
        """
        heap = self._heap
        pop = heapq.heappop
        while heap:
            t, _, ev = heap[0]
            if until is not None and t > until:
                break
            pop(heap)
            fn = ev.fn
            if fn is None:
                continue
            ev.fn = None
            self.now = t
            self.events_run += 1
            fn(*ev.args)
            if stop is not None and stop():
                return
        if until is not None and until > self.now:
            self.now = until


class Recorder:
    """Collects what ran where, for trace export.

    ``slice`` records a span on a track, ``instant`` a point event and
    ``counter`` a sampled value.  Tracks are (machine, cpu) pairs chosen by
    the caller; the engine does not interpret them.
    """

    def __init__(self) -> None:
        self.slices: list[tuple[str, int, str, int, int, dict]] = []
        self.instants: list[tuple[str, int, str, int, dict]] = []
        self.counters: list[tuple[str, str, int, float]] = []

    def slice(self, cat: str, track: int, name: str, start: int, end: int, **args: Any) -> None:
        self.slices.append((cat, track, name, start, end, args))

    def instant(self, cat: str, track: int, name: str, t: int, **args: Any) -> None:
        self.instants.append((cat, track, name, t, args))

    def counter(self, name: str, series: str, t: int, value: float) -> None:
        self.counters.append((name, series, t, value))
