"""Forced threaded interrupts and the softirq threads of PREEMPT_RT
(kernel/irq/manage.c, kernel/softirq.c).

On PREEMPT_RT ``force_irqthreads()`` is true: ``request_irq()`` turns every
handler not marked IRQF_NO_THREAD into a threaded one
(``irq_setup_forced_threading()``).  The hard interrupt runs only
``irq_default_primary_handler()``, which returns IRQ_WAKE_THREAD, and
``__irq_wake_thread()`` wakes the interrupt's kthread ``irq/N-name``
(``irq_thread()``, created SCHED_FIFO at ``MAX_RT_PRIO / 2`` = 50 by
``sched_set_fifo()``, bound to the interrupt's affinity).  The thread runs
``irq_forced_thread_fn()``: ``local_bh_disable()``, the driver's handler,
``local_bh_enable()`` -- and on PREEMPT_RT ``__local_bh_enable_ip()`` runs the
softirqs raised meanwhile (NET_RX from ``napi_schedule()``) right there, in
the thread, before it sleeps again.  ``handle_irq_event_percpu()`` still calls
``add_interrupt_randomness()`` in hard-IRQ context.

A softirq raised in hard-IRQ context with no thread to run it --
TIMER_SOFTIRQ from the tick's ``run_local_timers()`` -- cannot run on the way
out of the interrupt: on PREEMPT_RT ``invoke_softirq()`` wakes ``ksoftirqd/N``
(SCHED_OTHER, nice 0; kernel/softirq.c of v5.15).  The RT patch set moved the
timer softirqs to a thread of their own, ``ktimers/N`` at SCHED_FIFO 1
(``timersd``, ``wake_timersd()``; "softirq: Use a dedicated thread for timer
wakeups", Sebastian Andrzej Siewior, first in v5.16-rc3-rt7 per the
v5.18-rc6-rt7 announcement; still carried by 6.1-rt and 6.12-rt, later
mainline as ``ktimerd`` under CONFIG_IRQ_FORCED_THREADING).  The v5.15-rt
queue (linux-rt-devel ``linux-5.15.y-rt-rebase``) does not carry it, so a
v5.15 RT kernel -- the RT kernel of x86-ib40g, whose kernel is 5.15 --
expires its timers in ksoftirqd: :func:`timer_softirq_thread` chooses by
``Kernel.kernel_version`` (None: a recent one, ktimers).

What is simplified: each thread runs its work items in order, one Run() of
CPU time and then the handler's effect each; the split of a driver's
interrupt cost between its hard part and its thread is not known for any
platform, so the caller says what runs where.  A softirq pending when a
thread's ``local_bh_enable()`` runs other softirqs is not collected there
(the TIMER softirq always goes to its thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .core import BLOCK, SCHED_FIFO, SCHED_NORMAL, Run, Task, TaskBody

if TYPE_CHECKING:  # pragma: no cover
    from .core import Kernel

#: include/linux/sched/prio.h
MAX_RT_PRIO = 100
#: irq_thread() -> sched_set_fifo(): MAX_RT_PRIO / 2
IRQ_THREAD_PRIO = MAX_RT_PRIO // 2
#: timersd: sched_set_fifo_low() -> SCHED_FIFO 1
KTIMERS_PRIO = 1
#: include/linux/irqreturn.h
IRQ_NONE = 0
IRQ_HANDLED = 1
IRQ_WAKE_THREAD = 2
#: the first RT patch set with timersd (ktimers/N): v5.16-rc3-rt7
TIMERSD_SINCE = (5, 16)


def _version(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    return tuple(int(p) for p in str(text).split(".")[:2] if p.isdigit())


def timer_softirq_thread(kernel_version: str | None) -> str:
    """Where TIMER_SOFTIRQ runs on a PREEMPT_RT kernel of ``kernel_version``:
    ``"ktimers"`` (timersd, SCHED_FIFO 1; RT patch sets since v5.16-rc3-rt7,
    and None: a recent kernel) or ``"ksoftirqd"`` (SCHED_OTHER; v5.15-rt)."""
    v = _version(kernel_version)
    return "ktimers" if v is None or v >= TIMERSD_SINCE else "ksoftirqd"


class irq_work_item:
    """What a thread runs for one wakeup: ``cost_ns`` of CPU time, then ``fn(*args)``."""

    __slots__ = ("cost_ns", "fn", "args")

    def __init__(self, cost_ns: int, fn: Callable[..., Any] | None, args: tuple):
        self.cost_ns = int(cost_ns)
        self.fn = fn
        self.args = args


class SoftirqThread:
    """A kthread that runs what interrupts hand it, in order, then sleeps:
    ``irq/N-name`` (irq_thread()), ``ktimers/N`` or ``ksoftirqd/N``."""

    def __init__(self, k: "Kernel", cpu: int, comm: str, *, policy: int, rt_priority: int):
        self.k = k
        self.cpu = cpu
        self.pending: list[irq_work_item] = []
        self.runs = 0
        self.task: Task = k.kthread_run(self._thread, comm, cpu=cpu, policy=policy, rt_priority=rt_priority)

    def _thread(self, task: Task) -> TaskBody:
        """irq_thread() / run_ksoftirqd(): while woken with work, do it; then sleep."""
        while True:
            while self.pending:   # test_and_clear_bit(IRQTF_RUNTHREAD) / local_softirq_pending()
                item = self.pending.pop(0)
                self.runs += 1
                if item.cost_ns:
                    yield Run(item.cost_ns)
                if item.fn is not None:
                    item.fn(*item.args)
            yield BLOCK

    def wake(self, cost_ns: int, fn: Callable[..., Any] | None, *args: Any) -> None:
        """Queue a work item and wake the thread (a no-op wakeup if it is awake)."""
        self.pending.append(irq_work_item(cost_ns, fn, args))
        self.k.wake_up_process(self.task)


class IrqThreads:
    """The interrupt and softirq threads of one kernel with ``force_irqthreads``
    (PREEMPT_RT): built the first time an interrupt or a timer needs them."""

    def __init__(self, k: "Kernel"):
        self.k = k
        self.timer_thread = timer_softirq_thread(k.kernel_version)
        self._irq: dict[tuple[int, str], SoftirqThread] = {}
        self._softirqd: dict[int, SoftirqThread] = {}
        self._next_irq = 0

    def irq_thread(self, cpu: int, name: str) -> SoftirqThread:
        """The ``irq/N-name`` thread of interrupt ``name`` taken on ``cpu``
        (setup_irq_thread(): SCHED_FIFO MAX_RT_PRIO / 2, affine to the interrupt's CPU)."""
        key = (cpu, name)
        t = self._irq.get(key)
        if t is None:
            self._next_irq += 1
            t = self._irq[key] = SoftirqThread(self.k, cpu, f"irq/{self._next_irq}-{name}",
                                               policy=SCHED_FIFO, rt_priority=IRQ_THREAD_PRIO)
        return t

    def softirq_thread(self, cpu: int) -> SoftirqThread:
        """``ktimers/N`` or ``ksoftirqd/N`` (per CPU, smpboot threads) for the timer softirq."""
        t = self._softirqd.get(cpu)
        if t is None:
            if self.timer_thread == "ktimers":
                t = SoftirqThread(self.k, cpu, f"ktimers/{cpu}", policy=SCHED_FIFO, rt_priority=KTIMERS_PRIO)
            else:
                t = SoftirqThread(self.k, cpu, f"ksoftirqd/{cpu}", policy=SCHED_NORMAL, rt_priority=0)
            self._softirqd[cpu] = t
        return t

    def irq_wake_thread(self, cpu: int, name: str, cost_ns: int, fn: Callable[..., Any] | None,
                        *args: Any) -> None:
        """irq_default_primary_handler() returned IRQ_WAKE_THREAD: __irq_wake_thread()
        wakes ``irq/N-name``, whose irq_forced_thread_fn() runs the handler and,
        at its local_bh_enable(), the softirq the handler raised (``cost_ns`` in
        all), then ``fn(*args)``."""
        self.irq_thread(cpu, name).wake(cost_ns, fn, *args)

    def raise_timer_softirq(self, cpu: int, cost_ns: int, fn: Callable[..., Any] | None, *args: Any) -> None:
        """TIMER_SOFTIRQ raised in hard-IRQ context: wake_timersd() (ktimers/N) or,
        without timersd, invoke_softirq() -> wakeup_softirqd() (ksoftirqd/N)."""
        self.softirq_thread(cpu).wake(cost_ns, fn, *args)
