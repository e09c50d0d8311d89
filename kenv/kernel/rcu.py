"""RCU CPU stall detection (kernel/rcu/tree_stall.h, tree.c, tree_plugin.h).

Only what the stall detector sees is simulated: per CPU, when it last passed
a quiescent state (:func:`rcu_qs`) and since when it has not (the stretch,
``CPU.qs_stretch_start``; the per-CPU fields live on :class:`~kenv.kernel.core.CPU`,
as ``struct rcu_data`` is per CPU).  A context switch, idle and user mode are
quiescent states.  On none/voluntary, kernel code starts a stretch that only
the next of these ends (:func:`rcu_stretch_begin`); on full/rt the tick
reports a quiescent state unless preemption is off (:func:`rcu_preempt_disabled`).

Rather than run ``rcu_sched_clock_irq()`` at every tick, one event per CPU is
armed at the tick where ``check_cpu_stall()`` would fire for the current
stretch; if the stretch is over by then, nothing happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .tracepoints import trace_instant, trace_np_end

if TYPE_CHECKING:
    from .core import CPU, Kernel


@dataclass
class RcuStall:
    """One "rcu: INFO: rcu_sched self-detected stall on CPU" report."""

    t_ns: int
    cpu: int
    t_jiffies: int  # the ``t=`` field: jiffies since the grace period started
    task: str

    @property
    def t_s(self) -> float:
        return self.t_ns / 1e9

    def dmesg(self) -> str:
        return (f"[{self.t_s:12.6f}] rcu: INFO: rcu_sched self-detected stall on CPU\n"
                f"[{self.t_s:12.6f}] rcu: \t{self.cpu}-....: (t={self.t_jiffies} jiffies) "
                f"comm: {self.task}")


def rcu_qs(k: Kernel, rq: CPU) -> None:
    """rcu_qs() (kernel/rcu/tree_plugin.h): this CPU passed a quiescent state."""
    if rq.qs_stretch_start is not None and k.engine.recorder is not None:
        trace_np_end(k, rq)
    rq.last_qs = k.engine.now
    rq.qs_stretch_start = None


def rcu_stretch_begin(k: Kernel, rq: CPU) -> None:
    """Kernel code starts on this CPU: on none/voluntary nothing reports a
    quiescent state until the next context switch, idle or user mode
    (rcu_flavor_sched_clock_irq() of !PREEMPT_RCU reports one only from user
    mode or idle)."""
    if k.preemptible or rq.qs_stretch_start is not None:
        return
    rq.qs_stretch_start = k.engine.now
    _arm_stall_check(k, rq)


def rcu_preempt_disabled(k: Kernel, rq: CPU, disabled: bool) -> None:
    """On full/rt the tick reports a quiescent state unless preemption is off
    (rcu_flavor_sched_clock_irq() of PREEMPT_RCU: no rcu_qs() while
    ``preempt_count() & PREEMPT_MASK``)."""
    if not k.preemptible:
        return
    if disabled:
        if rq.qs_stretch_start is None:
            rq.qs_stretch_start = k.engine.now
            _arm_stall_check(k, rq)
    else:
        rcu_qs(k, rq)


def record_gp_stall_check_time(k: Kernel, stretch_start: int) -> tuple[int, int, int]:
    """When the stall detector fires for a stretch starting at ``stretch_start``:
    (time, gp_start, jiffies of the report).

    The grace period that needs this CPU starts at the first tick after
    the stretch begins (gp_start); record_gp_stall_check_time() sets
    ``jiffies_stall = gp_start + CONFIG_RCU_CPU_STALL_TIMEOUT * HZ``, and
    ``check_cpu_stall()`` (kernel/rcu/tree_stall.h), run from the scheduler
    tick, reports at the first tick after it, so ``t=`` reads timeout*HZ + 1
    (the kernelci report: t=2101 at HZ=100).
    """
    gp_start = k.jiffies_at(stretch_start) + 1
    j_report = gp_start + k.rcu_cpu_stall_timeout * k.HZ + 1
    return k.tick_time(j_report), gp_start, j_report


def _arm_stall_check(k: Kernel, rq: CPU) -> None:
    """Arm the tick at which check_cpu_stall() would report the current stretch."""
    if rq._rcu_ev is not None and rq._rcu_ev.pending:
        return
    at, _, _ = record_gp_stall_check_time(k, rq.qs_stretch_start)
    if rq.rcu_next_report is not None and rq.qs_stretch_start < rq.rcu_next_report:
        at = max(at, rq.rcu_next_report)
    rq._rcu_ev = k.engine.at_on(rq, max(at, k.engine.now), rcu_sched_clock_irq, k, rq)


def rcu_sched_clock_irq(k: Kernel, rq: CPU) -> None:
    """rcu_sched_clock_irq() (kernel/rcu/tree.c) at the armed tick: its stall check."""
    rq._rcu_ev = None
    check_cpu_stall(k, rq)


def check_cpu_stall(k: Kernel, rq: CPU) -> None:
    """check_cpu_stall() (kernel/rcu/tree_stall.h): report the stretch if it
    has lasted past jiffies_stall, and print_cpu_stall()'s next deadline."""
    s = rq.qs_stretch_start
    if s is None:
        return
    at, gp_start, _ = record_gp_stall_check_time(k, s)
    if rq.rcu_next_report is not None and s < rq.rcu_next_report:
        at = max(at, rq.rcu_next_report)
    now = k.engine.now
    if now < at:
        rq._rcu_ev = k.engine.at_on(rq, at, rcu_sched_clock_irq, k, rq)
        return
    comm = rq.curr.comm if rq.curr is not None else "swapper"
    stall = RcuStall(now, rq.id, k.jiffies - gp_start, comm)
    k.rcu_stalls.append(stall)
    trace_instant(k, rq.id, "rcu_stall", t_jiffies=stall.t_jiffies, comm=comm)
    # print_cpu_stall(): the next report comes 3 * timeout + 3 jiffies later.
    rq.rcu_next_report = now + (3 * k.rcu_cpu_stall_timeout * k.HZ + 3) * k.TICK_NSEC
    rq._rcu_ev = k.engine.at_on(rq, rq.rcu_next_report, rcu_sched_clock_irq, k, rq)
