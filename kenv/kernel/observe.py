"""What a simulator component may hear of one CPU: the kernel's observer interface.

A component that must hear what happens on a CPU while it measures a stretch
of its life (kenv.workloads.qperf_ff's busy stretches, :class:`BusyLog`)
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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .core import Task


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
