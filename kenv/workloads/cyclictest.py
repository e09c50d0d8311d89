"""cyclictest (rt-tests): ``cyclictest -S -p 95 -d 0 -i 1000 -m``.

``-S``: one thread per CPU, each pinned to its CPU (``-a -t -n``);
``-p 95``: SCHED_FIFO priority 95; ``-i 1000 -d 0``: every thread sleeps with
``clock_nanosleep(TIMER_ABSTIME)`` to an absolute period of 1000 us;
``-m``: mlockall (no page faults in the loop, nothing to model).

The measuring loop, as in rt-tests' ``timerthread()``::

    clock_gettime(&now); next = now + interval;
    for (;;) {
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        clock_gettime(&now);
        diff = calcdiff(now, next);          /* microseconds, truncated */
        min/max/avg/act update; cycles++;
        next += interval;
        while (tsgreater(&now, &next))       /* missed periods are skipped */
                next += interval;
    }

The expiry is an hrtimer: at ``next`` the timer interrupt fires on the
thread's CPU (later by the platform's interrupt jitter), its hard-IRQ handler
``hrtimer_wakeup()`` wakes the thread (hrtimers that wake RT tasks expire in
hard-IRQ context on PREEMPT_RT too), and the thread runs when the scheduler
lets it: at once on an idle CPU or a preemptible one, at the end of the
non-preemptible stretch otherwise.  The latency is everything between
``next`` and the return to user space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schema import check_int
from ..kernel.core import BLOCK, SCHED_FIFO, Kernel, Task, TaskBody

NSEC_PER_USEC = 1000


@dataclass(frozen=True)
class WakeupLatency:
    """A platform's cyclictest wakeup-latency baseline (all in ns).

    ``hrtimer_irq_ns``: the timer interrupt's hard-IRQ work (entry,
    ``hrtimer_interrupt()``, ``hrtimer_wakeup()`` -> ``try_to_wake_up()``),
    stolen from whatever runs on the CPU.  ``jitter_mean_ns``: mean of an
    exponentially distributed extra delay of the interrupt itself (idle-state
    exit, cache and TLB misses, SMIs), drawn per wakeup from the seeded rng.
    The rest of the baseline is the platform's ``SchedCosts`` (wakeup of an
    idle CPU, context switch).  ``thread_spawn_ns``: how far apart cyclictest
    starts its threads (thread creation, affinity and priority setup).
    """

    hrtimer_irq_ns: int
    jitter_mean_ns: float
    thread_spawn_ns: int = 30_000
    source: str = ""


@dataclass
class CyclictestStat:
    """One thread's line: ``T: 0 ( 1234) P:95 I:1000 C: ... Min: Act: Avg: Max:``."""

    thread: int
    cpu: int
    tid: int
    priority: int
    interval_us: int
    cycles: int = 0
    min_us: int = 0
    act_us: int = 0
    sum_us: int = 0
    max_us: int = 0
    max_ns: int = 0
    max_at_ns: int = 0   # intended wake time of the worst cycle

    @property
    def avg_us(self) -> int:
        """``(long)(avg / cycles)`` as cyclictest prints it."""
        return self.sum_us // self.cycles if self.cycles else 0

    def format(self) -> str:
        # print_stat(): "T:%2d (%5d) P:%2d I:%ld C:%7lu Min:%7ld Act:%5ld Avg:%5ld Max:%8ld"
        return (f"T:{self.thread:2d} ({self.tid:5d}) P:{self.priority:2d} I:{self.interval_us} "
                f"C:{self.cycles:7d} Min:{self.min_us:7d} Act:{self.act_us:5d} "
                f"Avg:{self.avg_us:5d} Max:{self.max_us:8d}")

    def to_dict(self) -> dict:
        return {"thread": self.thread, "cpu": self.cpu, "tid": self.tid, "cycles": self.cycles,
                "min_us": self.min_us, "act_us": self.act_us, "avg_us": self.avg_us,
                "max_us": self.max_us, "max_ns": self.max_ns}


class Cyclictest:
    """``cyclictest -S -p PRIO -d 0 -i INTERVAL -m`` on ``k``.

    ``start(t0)`` creates the threads from time ``t0`` on (thread i at
    ``t0 + i * thread_spawn_ns``).  ``stats`` holds one
    :class:`CyclictestStat` per thread, updated as the run goes.
    """

    _JITTER_BLOCK = 1024

    def __init__(self, k: Kernel, params: WakeupLatency, *, interval_us: int = 1000,
                 priority: int = 95, cpus: list[int] | None = None):
        check_int(interval_us, "interval_us", 1, allowed="an integer > 0")
        check_int(priority, "priority", 1, 99, "1..99 (SCHED_FIFO)")
        self.k = k
        self.params = params
        self.interval_ns = interval_us * NSEC_PER_USEC
        self.interval_us = interval_us
        self.priority = priority
        self.cpus = list(range(k.nr_cpus)) if cpus is None else list(cpus)
        self.stats: list[CyclictestStat] = []
        self.tasks: list[Task] = []

    # ----------------------------------------------------------------- setup
    def start(self, t0: int | None = None) -> None:
        k = self.k
        t0 = k.now if t0 is None else t0
        for i, cpu in enumerate(self.cpus):
            k.engine.at(t0 + i * self.params.thread_spawn_ns, self.spawn, i, cpu)

    def spawn(self, i: int, cpu: int) -> None:
        """Create thread ``i``, pinned to ``cpu`` (``-a``/``-S``), now."""
        st = CyclictestStat(i, cpu, 0, self.priority, self.interval_us)
        self.stats.append(st)
        task = self.k.kthread_run(lambda t: self._timerthread(t, st), "cyclictest", cpu=cpu,
                                  policy=SCHED_FIFO, rt_priority=self.priority)
        st.tid = task.pid
        self.tasks.append(task)

    def _jitter_block(self) -> list[int]:
        m = self.params.jitter_mean_ns
        if m <= 0:
            return [0] * self._JITTER_BLOCK
        return self.k.rng.exponential(m, self._JITTER_BLOCK).astype(np.int64).tolist()

    # ------------------------------------------------------------ the thread
    def _hrtimer_expire(self, task: Task) -> None:
        """The hrtimer interrupt on the thread's CPU: hrtimer_wakeup() in hard IRQ."""
        k = self.k
        k.hardirq(task.cpu, self.params.hrtimer_irq_ns, k.wake_up_process, task, name="hrtimer")

    def _timerthread(self, task: Task, st: CyclictestStat) -> TaskBody:
        k = self.k
        eng = k.engine
        interval = self.interval_ns
        jit = self._jitter_block()
        ji = 0
        nxt = eng.now + interval
        scope = k.task_scope(task)   # the thread's CPU: it is pinned (-a)
        while True:
            if ji == len(jit):
                jit = self._jitter_block()
                ji = 0
            eng.at_on(scope, nxt + jit[ji], self._hrtimer_expire, task)
            ji += 1
            yield BLOCK   # clock_nanosleep(TIMER_ABSTIME, &next)
            now = eng.now
            diff_ns = now - nxt
            diff = diff_ns // NSEC_PER_USEC   # calcdiff(): microseconds, truncated
            if st.cycles == 0 or diff < st.min_us:
                st.min_us = diff
            if diff_ns > st.max_ns:
                st.max_ns = diff_ns
                st.max_us = diff
                st.max_at_ns = nxt
            st.act_us = diff
            st.sum_us += diff
            st.cycles += 1
            nxt += interval
            while now > nxt:   # tsgreater(&now, &next): skip missed periods
                nxt += interval

    # ---------------------------------------------------------------- output
    def format_text(self) -> str:
        return "\n".join(st.format() for st in sorted(self.stats, key=lambda s: s.thread))

    @property
    def max_ns(self) -> int:
        return max((st.max_ns for st in self.stats), default=0)


__all__ = ["Cyclictest", "CyclictestStat", "WakeupLatency"]
