"""What a simulator component may hear of one CPU: the kernel's observer interface.

A component that must hear what happens on a CPU while it measures a stretch
of its life (kenv.fastforward.qperf's busy stretches, :class:`BusyLog`)
attaches a :class:`CpuObserver` to that CPU (:meth:`kenv.kernel.core.CPU.attach`) and
detaches it when done (:meth:`~kenv.kernel.core.CPU.detach`).  One observer
per CPU at a time.  The kernel calls it, when one is attached, at these
places only (one ``is not None`` test each, nothing when none is attached):

* :meth:`CpuObserver.task_enqueued` -- a task is about to be put on this
  CPU's runqueue (``enqueue_task()`` from a wakeup or a preemption);
* :meth:`CpuObserver.interrupt` -- interrupt context (a hard IRQ, a softirq
  run from it, a timer's softirq) takes this CPU from ``start`` to ``end``
  (``end == start`` for a handler of no cost);
* :meth:`CpuObserver.mutex_wait` -- a task (of any CPU) blocks on a mutex
  whose owner last ran on this CPU (``mutex_lock()``'s slow path);
* :meth:`CpuObserver.idle_exit` -- a wakeup kicks this idle CPU: it is busy
  from now, the exit itself lasting until ``end``;
* :meth:`CpuObserver.context_switch` -- ``__schedule()`` at ``now`` switches
  a task in, the switch itself over ``[start, end)``;
* :meth:`CpuObserver.idle` -- ``__schedule()`` at ``now`` finds nothing to
  run: the CPU is idle from here.

The methods do nothing by default; an observer overrides those it needs.
An observer must not change the simulation from inside a call except as its
own contract says (a fast-forward cutting its skip short).

:class:`SkipFence` is the guard of a fast-forward that commits a stretch of
some CPUs while events of other CPUs run inside it: anything that reaches
a fenced CPU before the stretch's end is an error, raised at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..sim.engine import SimulationError

if TYPE_CHECKING:  # pragma: no cover
    from .core import CPU, Kernel, Task


class CpuObserver:
    """An observer of one CPU (see the module docstring); every event a no-op here."""

    __slots__ = ()

    def task_enqueued(self, task: "Task", now: int) -> None:
        """``task`` is about to be enqueued on this CPU at ``now``."""

    def interrupt(self, start: int, end: int) -> None:
        """Interrupt context runs on this CPU from ``start`` to ``end``."""

    def mutex_wait(self, task: "Task", now: int) -> None:
        """``task`` blocks at ``now`` on a mutex whose owner's CPU this is."""

    def idle_exit(self, now: int, end: int) -> None:
        """A wakeup at ``now`` kicks this idle CPU; the idle exit ends at ``end``."""

    def context_switch(self, now: int, start: int, end: int) -> None:
        """``__schedule()`` at ``now`` switches a task in over ``[start, end)``."""

    def idle(self, now: int) -> None:
        """``__schedule()`` at ``now`` leaves this CPU idle."""


class BusyLog(CpuObserver):
    """The busy stretches of a CPU, as (start, end): interrupts (of some
    cost), idle exits, context switches, and each stretch from the CPU
    leaving idle (a wakeup's kick or a switch-in) until it is idle again.
    ``busy_from``: the start of the stretch in progress, None while idle."""

    __slots__ = ("stretches", "busy_from")

    def __init__(self, busy_from: int | None):
        self.stretches: list[tuple[int, int]] = []
        self.busy_from = busy_from

    def interrupt(self, start: int, end: int) -> None:
        if end > start:
            self.stretches.append((start, end))

    def idle_exit(self, now: int, end: int) -> None:
        if self.busy_from is None:
            self.busy_from = now
        self.stretches.append((now, end))

    def context_switch(self, now: int, start: int, end: int) -> None:
        if self.busy_from is None:
            self.busy_from = now
        # the switch itself: a stretch of its own (a steal inside it delays the
        # task's start by what is left of it, not by its whole length)
        self.stretches.append((start, end))

    def idle(self, now: int) -> None:
        if self.busy_from is not None:
            self.stretches.append((self.busy_from, now))
            self.busy_from = None

    def until(self, t: int) -> list[tuple[int, int]]:
        """The stretches so far, the one in progress ending at ``t``."""
        out = list(self.stretches)
        if self.busy_from is not None:
            out.append((self.busy_from, t))
        return out


class SkipFence(CpuObserver):
    """The guard of a committed skip (see docs/fast-forward.md): a fast-forward
    has applied the outcome of CPUs ``cpus`` up to ``end`` (inclusive) while
    the engine runs events of other scopes inside that stretch
    (:meth:`kenv.sim.engine.Engine.quiet_limit`).  Those events must not
    reach a fenced CPU before ``end``: a task put on its runqueue (a remote
    wakeup, a migration), interrupt context on it (an IPI, a remote timer),
    a wait on a mutex its task holds.  Each is the bug of an event scoped
    to the wrong CPU, and raises SimulationError; after ``end`` they are
    the detailed simulation's own business and pass.  :meth:`put` attaches
    the fence (no other observer may be attached to those CPUs); the
    fast-forward lifts it (:meth:`lift`) when its task next runs.  The
    engine refuses a stop inside the stretch (Engine.fence)."""

    __slots__ = ("k", "cpus", "end", "what")

    def __init__(self, k: "Kernel", cpus: "tuple[CPU, ...]", end: int, what: str):
        self.k, self.cpus, self.end, self.what = k, cpus, end, what

    @classmethod
    def put(cls, k: "Kernel", cpus: "Iterable[CPU]", end: int, what: str) -> "SkipFence":
        fence = cls(k, tuple(cpus), end, what)
        for rq in fence.cpus:
            rq.attach(fence)
        k.engine.fence(end)
        return fence

    def lift(self) -> None:
        for rq in self.cpus:
            rq.detach(self)
        self.k.engine.unfence(self.end)

    def _touched(self, how: str, now: int) -> None:
        if now <= self.end:
            raise SimulationError(
                f"{how} at t={now} ns reaches CPU(s) {[rq.id for rq in self.cpus]} of {self.k.name}, "
                f"inside the stretch up to t={self.end} ns that {self.what} committed: an event "
                f"that can touch these CPUs ran inside it (its Event.scope is wrong)")

    def task_enqueued(self, task: "Task", now: int) -> None:
        self._touched(f"{task.comm}-{task.pid} enqueued", now)

    def interrupt(self, start: int, end: int) -> None:
        self._touched("interrupt context", self.k.now)

    def mutex_wait(self, task: "Task", now: int) -> None:
        self._touched(f"{task.comm}-{task.pid} waiting on a mutex", now)

    def idle_exit(self, now: int, end: int) -> None:
        self._touched("an idle exit", now)


def account_skipped_stretch(task: "Task", rq: "CPU | None" = None, *, times: int = 1, exec_ns: int = 0,
                            vruntime: int = 0, nvcsw: int = 0, nivcsw: int = 0, nr_switches: int = 0,
                            busy_ns: int = 0, min_vruntime: int = 0) -> None:
    """The scheduler's bookkeeping of a stretch a fast-forward skipped, the
    one place it is written: ``times`` repetitions of what ``update_curr()``
    (``sum_exec_runtime``, ``vruntime``, the runqueue's busy time and
    ``min_vruntime``) and ``__schedule()`` (``nvcsw``/``nivcsw``,
    ``nr_switches``) added to ``task`` and its runqueue ``rq`` in one
    repetition measured in detail.  ``rq`` None: ``task``'s counters only."""
    task.sum_exec_runtime += times * exec_ns
    task.vruntime += times * vruntime
    task.nvcsw += times * nvcsw
    task.nivcsw += times * nivcsw
    if rq is not None:
        rq.nr_switches += times * nr_switches
        rq.busy_ns += times * busy_ns
        rq.min_vruntime += times * min_vruntime
    elif nr_switches or busy_ns or min_vruntime:
        raise ValueError("account_skipped_stretch: runqueue counters given without a runqueue (rq=None)")
