"""A small discrete-event engine.

Time is an integer number of nanoseconds.  Events sit in a heap ordered by
``(time, sequence number)``; the sequence number makes ties deterministic
(first scheduled, first run), as in SimPy's ``core.py``.  Nothing here knows
about kernels: the domain lives in the code that schedules events.

A recorder (see :class:`Recorder`) may be attached to ``Engine.recorder``; the
layers above call it to note what ran where.  With no recorder attached the
hook costs one attribute test.

Code that builds its Engine internally (the experiments, the environments'
episodes) can still be recorded: inside ``with recording(rec):`` the next
Engine created gets ``rec`` (see :func:`recording`).

:meth:`Engine.advance` lets the code that handles an event go on with what it
would schedule next, without a round trip through the heap, when that event
would be the next one run anyway: same order, same clock, same ``stop``
checks, fewer heap operations (the kernel core uses it for a task's next
chunk of CPU time).
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

NSEC_PER_USEC = 1_000
NSEC_PER_MSEC = 1_000_000
NSEC_PER_SEC = 1_000_000_000

#: a run that handles this many events without the clock moving is stuck in a
#: loop that cannot advance simulated time (a zero period, a zero-byte read):
#: a bug caught here rather than a hang.  No model runs more than a few
#: thousand events at one instant (a step's worth is 5-20 events).
STALL_EVENTS = 1_000_000


class SimulationError(RuntimeError, ValueError):
    """An internal error of the simulation: an event in the past, a zero or
    negative period, or a loop that does not advance simulated time.  Inputs
    are validated before they reach the engine (kenv.schema); this is the
    last line, for bugs.  (A ValueError too: what ``at()`` raised for an
    event in the past before.)"""


def check_period(period: int, what: str = "period") -> int:
    """``period`` (ns) of a periodic thing, refused unless a positive integer:
    a zero period would run forever at one instant."""
    if type(period) is not int or period <= 0:
        raise SimulationError(f"{what} {period!r} ns: a periodic event needs an integer period > 0")
    return period


#: "no bound" for :meth:`Engine.quiet_limit`
FOREVER = 1 << 62


class Event:
    """A scheduled callback.  ``cancel()`` it to keep it from running.

    ``scope``: what the callback acts on, for a fast-forward that asks which
    events can touch what it skips (:meth:`Engine.quiet_limit`): the kernel
    gives an event on one CPU that CPU (:meth:`Engine.at_on`); None, the
    default, means "could touch anything"."""

    __slots__ = ("time", "fn", "args", "scope")

    def __init__(self, time: int, fn: Callable[..., Any] | None, args: tuple, scope: Any = None):
        self.time = time
        self.fn = fn
        self.args = args
        self.scope = scope

    @property
    def pending(self) -> bool:
        return self.fn is not None

    def cancel(self) -> None:
        self.fn = None
        self.args = ()


class Engine:
    """The event loop: ``now``, ``at``, ``after``, ``run``.

    The earliest pending event is kept out of the heap (``_head``): an event
    scheduled to be the next one -- the common case here, a task's next step
    a few microseconds away -- costs one comparison instead of a push and a
    pop.  The order is the heap's: (time, sequence number).
    """

    __slots__ = ("now", "_heap", "_head", "_seq", "recorder", "events_run", "_until", "_stop",
                 "_running", "_stop_requested", "_watch_at", "_watch_now", "_fence_end")

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Event]] = []
        self._head: tuple[int, int, Event] | None = None
        self._seq = 0
        self.recorder: Recorder | None = _claim_recorder(self) if _PENDING else None
        self.events_run = 0
        self._until: int | None = None
        self._stop: Callable[[], bool] | None = None
        self._running = False
        self._stop_requested = False
        # the stall watchdog: at events_run == _watch_at, the clock must have
        # moved since it read _watch_now (one comparison per event)
        self._watch_at = STALL_EVENTS
        self._watch_now = 0
        # the end of the last stretch a fast-forward committed (fence())
        self._fence_end = -1

    def _watchdog(self) -> None:
        """Every STALL_EVENTS events: raise if the clock has not moved since the last check."""
        if self.now == self._watch_now:
            raise SimulationError(f"{STALL_EVENTS} events ran at t={self.now} ns without simulated "
                                  f"time advancing: a loop with a zero period or zero-size work")
        self._watch_now = self.now
        self._watch_at = self.events_run + STALL_EVENTS

    def at(self, time: int, fn: Callable[..., Any], *args: Any) -> Event:
        """Run ``fn(*args)`` at absolute time ``time`` (never in the past)."""
        return self._queue(Event(int(time), fn, args))

    def at_on(self, scope: Any, time: int, fn: Callable[..., Any], *args: Any) -> Event:
        """:meth:`at` for an event that acts on ``scope`` (Event.scope)."""
        return self._queue(Event(int(time), fn, args, scope))

    def _queue(self, ev: Event) -> Event:
        """Put ``ev`` in the queue (the head entry or the heap), in (time, sequence) order."""
        if ev.time < self.now:
            raise SimulationError(f"event time {ev.time} ns is before now ({self.now} ns)")
        self._seq += 1
        entry = (ev.time, self._seq, ev)
        head = self._head
        if head is None:
            heap = self._heap
            if heap and heap[0] < entry:
                heapq.heappush(heap, entry)
            else:
                self._head = entry
        elif entry < head:
            heapq.heappush(self._heap, head)
            self._head = entry
        else:
            heapq.heappush(self._heap, entry)
        return ev

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> Event:
        return self.at(self.now + delay, fn, *args)

    def request_stop(self) -> None:
        """End the :meth:`run` in progress after the event being handled, as a
        ``stop`` test that has just turned true would -- for code that knows
        the moment its condition is met (cheaper than a test after every
        event).  Nothing if no run is in progress.  Refused (SimulationError)
        inside a stretch a fast-forward has committed (:meth:`fence`): the
        caller would see the stretch half done."""
        if self._running:
            if self.now < self._fence_end:
                raise SimulationError(f"request_stop() at t={self.now} ns, inside a stretch a "
                                      f"fast-forward committed up to t={self._fence_end} ns")
            self._stop_requested = True

    @property
    def until(self) -> int | None:
        """The ``until`` of the :meth:`run` in progress (None: none, or no bound)."""
        return self._until

    def _first(self) -> tuple[int, int, Event] | None:
        """The earliest live entry (made the head), or None; drops cancelled ones."""
        head = self._head
        heap = self._heap
        while True:
            if head is None:
                if not heap:
                    return None
                head = heapq.heappop(heap)
            if head[2].fn is not None:
                self._head = head
                return head
            head = None
            self._head = None

    def peek(self) -> int | None:
        """Time of the next live event, or None."""
        head = self._first()
        return head[0] if head is not None else None

    def quiet_limit(self, scopes: Any = None) -> int | None:
        """How far a fast-forward may commit what it skips, from now: the
        last nanosecond before the first pending event that may act on
        ``scopes`` (a container of scopes; an event whose scope is None or
        in it), not past ``until`` (FOREVER: no bound); None if not even now,
        or if a ``stop`` test could end the run after any event.  With
        ``scopes`` None every event counts: nothing else runs before the
        limit.  Otherwise events of other scopes run inside the stretch: the
        caller must guard what they could touch (kenv.kernel.observe.SkipFence)."""
        if not self._running or self._stop is not None or self._stop_requested:
            return None
        # the first pending event that counts, if before ``bound`` (one past the run's end)
        bound = (FOREVER if self._until is None else self._until) + 1
        head = self._first()
        if head is not None:
            t, _, ev = head
            if scopes is None or ev.scope is None or ev.scope in scopes:
                if t < bound:
                    bound = t
            else:   # the heap is not sorted: look at every pending event
                for t, _, ev in self._heap:
                    if t < bound and ev.fn is not None and (ev.scope is None or ev.scope in scopes):
                        bound = t
        limit = bound - 1
        return limit if limit >= self.now else None

    def fence(self, end: int) -> None:
        """A fast-forward has committed the outcome of a stretch up to ``end``
        while other events run inside it: until then no run may stop
        (:meth:`request_stop`)."""
        if end > self._fence_end:
            self._fence_end = end

    def unfence(self, end: int) -> None:
        """The fast-forward of :meth:`fence` ``(end)`` ended early (nothing skipped)."""
        if self._fence_end == end:
            self._fence_end = -1

    def quiet_through(self, time: int) -> bool:
        """Would the run in progress reach ``time`` without running an event
        on the way: no live event at or before ``time``, ``until`` not before
        it, and no ``stop`` test that could end the run first?"""
        if not self._running or self._stop is not None or self._stop_requested:
            return False
        until = self._until
        if until is not None and time > until:
            return False
        head = self._head
        if head is None or head[2].fn is None:
            head = self._first()
        return head is None or head[0] > time

    def advance(self, time: int) -> bool:
        """Called by an event handler as its last action, in place of
        ``at(time, ...)``: if an event at ``time`` scheduled now would be the
        very next event run -- the loop would not stop here (``until``,
        ``stop``), and every pending event is strictly later -- move the clock
        to ``time``, count the event, and return True: the caller then does
        what that event would have done.  Otherwise return False and change
        nothing (the caller schedules the event)."""
        if not self._running or time < self.now:
            return False
        until = self._until
        if until is not None and time > until:
            return False
        stop = self._stop
        if self._stop_requested or (stop is not None and stop()):
            return False
        head = self._head
        if head is None or head[2].fn is None:
            head = self._first()
        if head is not None and head[0] <= time:
            return False
        self.now = time
        self.events_run += 1
        if self.events_run >= self._watch_at:
            self._watchdog()
        return True

    def run(self, until: int | None = None, stop: Callable[[], bool] | None = None) -> None:
        """Run events up to and including time ``until`` (forever if None).

        ``stop`` is checked after each event; the loop ends when it returns
        True, or after an event that called :meth:`request_stop`.  On return
        ``now`` is ``until`` if the loop ran out of events or reached it.
        """
        heap = self._heap
        pop = heapq.heappop
        outer = (self._running, self._until, self._stop, self._stop_requested)
        self._running, self._until, self._stop, self._stop_requested = True, until, stop, False
        try:
            while True:
                head = self._head
                if head is None:
                    if not heap:
                        break
                    head = heap[0]
                    if until is not None and head[0] > until:
                        break
                    pop(heap)
                else:
                    if until is not None and head[0] > until:
                        break
                    self._head = None
                t, _, ev = head
                fn = ev.fn
                if fn is None:
                    continue
                ev.fn = None
                self.now = t
                self.events_run += 1
                if self.events_run >= self._watch_at:
                    self._watchdog()
                fn(*ev.args)
                if self._stop_requested or (stop is not None and stop()):
                    return
            if until is not None and until > self.now:
                self.now = until
        finally:
            self._running, self._until, self._stop, self._stop_requested = outer


class Recorder:
    """Collects what ran where, for trace export.

    ``slice`` records a span on a track, ``instant`` a point event and
    ``counter`` a sampled value.  Tracks are (machine, cpu) pairs chosen by
    the caller; the engine does not interpret them.  ``engine`` is the
    Engine it is attached to (by :class:`recording` or :meth:`attach`), ``ref(obj)`` a
    small stable number per object (for pointer-like trace fields that must
    not depend on ``id()``), ``finish_hooks`` callables run by
    :meth:`finish` when recording ends.
    """

    def __init__(self) -> None:
        self.slices: list[tuple[str, Any, str, int, int, dict]] = []
        self.instants: list[tuple[str, Any, str, int, dict]] = []
        #: (name, series, t, value, track): ``track`` is a machine name or None
        self.counters: list[tuple[str, str, int, float, Any]] = []
        self.engine: Engine | None = None
        self.finish_hooks: list[Callable[["Recorder"], None]] = []
        self._refs: dict[int, tuple[int, Any]] = {}

    def slice(self, cat: str, track: Any, name: str, start: int, end: int, **args: Any) -> None:
        self.slices.append((cat, track, name, start, end, args))

    def instant(self, cat: str, track: Any, name: str, t: int, **args: Any) -> None:
        self.instants.append((cat, track, name, t, args))

    def counter(self, name: str, series: str, t: int, value: float, track: Any = None) -> None:
        self.counters.append((name, series, t, value, track))

    def ref(self, obj: Any) -> int:
        """A number for ``obj``, 1, 2, ... in first-seen order (kept alive meanwhile)."""
        r = self._refs.get(id(obj))
        if r is None or r[1] is not obj:
            r = self._refs[id(obj)] = (len(self._refs) + 1, obj)
        return r[0]

    def attach(self, engine: "Engine") -> "Recorder":
        engine.recorder = self
        self.engine = engine
        return self

    def finish(self) -> None:
        """Recording ends: run the finish hooks once (e.g. close open samples)."""
        hooks, self.finish_hooks = self.finish_hooks, []
        for fn in hooks:
            fn(self)


#: Recorders waiting for the next Engine created (see :func:`recording`).
_PENDING: list[list] = []


def _claim_recorder(engine: Engine) -> "Recorder | None":
    """Engine.__init__: give the innermost pending ``recording()`` its engine."""
    slot = _PENDING[-1]
    if slot[1] is not None:
        return None
    slot[1] = engine
    slot[0].engine = engine
    return slot[0]


class recording:
    """``with recording(rec) as rec:`` -- record the first Engine created inside the block.

    The way to trace code that builds its Engine internally (an experiment's
    ``run_*`` function, an environment's ``reset()``) without changing its
    signature: ``Engine.__init__`` looks for a pending block (one test of a
    module-level list) and attaches its recorder.  Only the *first* Engine
    created in the block is recorded; later ones (e.g. the ``none`` baseline
    that ``run_qperf_tcp_lat`` runs after the requested deferral) get no
    recorder.  ``rec`` defaults to a new :class:`Recorder`; ``rec.engine``
    is the engine recorded, or None if none was created.  Blocks nest: an
    Engine goes to the innermost block, if that block has none yet.
    """

    def __init__(self, recorder: "Recorder | None" = None):
        self.recorder = recorder if recorder is not None else Recorder()
        self._slot: list | None = None

    def __enter__(self) -> "Recorder":
        self._slot = [self.recorder, None]
        _PENDING.append(self._slot)
        return self.recorder

    def __exit__(self, *exc: Any) -> None:
        for i in range(len(_PENDING) - 1, -1, -1):
            if _PENDING[i] is self._slot:
                del _PENDING[i]
                break
