"""The kernel's tracepoints, for a recorder attached to the engine (kenv.trace).

Named after the events they emit (include/trace/events/sched.h, irq.h):
``sched_switch``, ``sched_wakeup``, ``sched_process_exit``; the slices of
tasks, hard IRQs (irq_handler_entry/exit), softirqs (softirq_entry/exit)
and non-preemptible stretches; and :func:`trace_instant` for any other
kernel event (a BUG, an RCU stall, "crng init done"), like ``trace_printk()``.

Everything here runs only with a recorder attached (``engine.recorder``); the
scheduler tests for it before calling, so an unrecorded run pays nothing.
Tracks are (machine, cpu) with machine = the kernel's name, so two kernels on
one engine (qperf's client and server) keep apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import CPU, Kernel, Task


def task_prio(p: Task) -> int:
    """The ``prio`` ftrace prints: 120 + nice for SCHED_NORMAL, 99 - rt_priority for FIFO."""
    return 99 - p.rt_priority if p.is_rt else 120 + p.nice


def record_slice(k: Kernel, cpu: int, name: str, start: int, end: int, cat: str = "task",
                 **args: Any) -> None:
    rec = k.engine.recorder
    if rec is not None and (end > start or (end == start and cat != "task")):
        rec.slice(cat, (k.name, cpu), name, start, end, **args)


def trace_instant(k: Kernel, cpu: int, name: str, **args: Any) -> None:
    rec = k.engine.recorder
    if rec is not None:
        rec.instant("kernel", (k.name, cpu), name, k.engine.now, **args)


def trace_switch_out(k: Kernel, rq: CPU, p: Task, state: str) -> None:
    """``p`` leaves ``rq`` (``state``: R+ preempted, S blocked, X exited):
    its slice, sched_process_exit if it exited, and the prev_* fields of the
    sched_switch that follows."""
    rec = k.engine.recorder
    now = k.engine.now
    prio = task_prio(p)
    if now >= p._switched_in:  # zero-length too: cyclictest runs ~0 ns between its sleeps
        rec.slice("task", (k.name, rq.id), p.comm, p._switched_in, now, pid=p.pid, prio=prio)
    if state == "X":
        rec.instant("sched", (k.name, rq.id), "sched_process_exit", now,
                    comm=p.comm, pid=p.pid, prio=prio)
    rq.trace_prev = (p.comm, p.pid, prio, state)


def trace_sched_switch(k: Kernel, rq: CPU, nxt: Task | None, t: int) -> None:
    """sched_switch on ``rq`` at ``t`` (``nxt`` None: to the idle task)."""
    rec = k.engine.recorder
    idle = (f"swapper/{rq.id}", 0, 120)
    pc, pp, pprio, pstate = rq.trace_prev if rq.trace_prev is not None else idle + ("R",)
    rq.trace_prev = None
    nc, np_, nprio = (nxt.comm, nxt.pid, task_prio(nxt)) if nxt is not None else idle
    track = (k.name, rq.id)
    rec.instant("sched", track, "sched_switch", t, prev_comm=pc, prev_pid=pp, prev_prio=pprio,
                prev_state=pstate, next_comm=nc, next_pid=np_, next_prio=nprio)
    rec.counter("runnable tasks", f"cpu{rq.id}", t, rq.nr_running, k.name)


def trace_sched_wakeup(k: Kernel, rq: CPU, p: Task) -> None:
    rec = k.engine.recorder
    now = k.engine.now
    rec.instant("sched", (k.name, rq.id), "sched_wakeup", now, comm=p.comm, pid=p.pid,
                prio=task_prio(p), target_cpu=rq.id)
    rec.counter("runnable tasks", f"cpu{rq.id}", now, rq.nr_running, k.name)


def trace_finish(k: Kernel, rec: Any) -> None:
    """Recording ends: what is still running (and still non-preemptible)
    on each CPU gets its slice up to now, marked ``running``."""
    if k.engine.recorder is not rec:
        return
    now = k.engine.now
    for rq in k.cpus:
        p = rq.curr
        if p is not None and now >= p._switched_in:
            rec.slice("task", (k.name, rq.id), p.comm, p._switched_in, now, pid=p.pid,
                      prio=task_prio(p), running=True)
        if rq.qs_stretch_start is not None:
            trace_np_end(k, rq, reopen=True)


def trace_np_end(k: Kernel, rq: CPU, reopen: bool = False) -> None:
    """A non-preemptible stretch on ``rq`` ends now (or pauses at a
    cond_resched() that did not reschedule, ``reopen``).  On full/rt it is
    a preempt_disable() section; on none/voluntary, kernel code from its
    first instruction to the next context switch, return to user mode or
    cond_resched() -- the stretch the RCU stall detector watches."""
    start = rq.qs_stretch_start
    if rq.trace_np_start is not None and rq.trace_np_start > start:
        start = rq.trace_np_start
    now = k.engine.now
    rq.trace_np_start = now if reopen else None
    if now > start:
        name = "preempt_disable" if k.preemptible else f"non-preemptible kernel code ({k.preempt})"
        k.engine.recorder.slice("nonpreempt", (k.name, rq.id), name, start, now)
