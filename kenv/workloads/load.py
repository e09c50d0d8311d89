"""Background CPU load: a CPU-bound SCHED_NORMAL task pinned to one CPU.

Two shapes:

* ``continuous``: ``taskset -c N stress -c 1`` -- a busy loop in user space
  that never sleeps;
* ``BUSY/PERIOD`` (ms): a periodic batch job -- every PERIOD ms (absolute
  period, ``clock_nanosleep(TIMER_ABSTIME)``) it needs BUSY ms of CPU time,
  then sleeps until the next period.  When it shares its CPU, its busy phase
  stretches; it never catches up more than one period.

It runs in user mode, so every preemption model may preempt it, and CFS
shares its CPU with the other SCHED_NORMAL tasks there (vruntime, wakeup
preemption, sleeper credit -- all in :mod:`kenv.kernel.core`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..kernel.core import BLOCK, SCHED_NORMAL, Kernel, Run, Task, TaskBody
from ..sim.engine import NSEC_PER_MSEC, check_period

#: user-mode time requested per Run by the continuous hog: it never blocks,
#: so the chunk size only sets how often the simulator steps the generator
HOG_CHUNK_NS = 100 * NSEC_PER_MSEC

#: the longest periodic job period accepted (ms): a day; a larger one is no
#: periodic load within any run kenv makes
MAX_LOAD_PERIOD_MS = 86_400_000


@dataclass(frozen=True)
class LoadSpec:
    """``continuous`` (busy_ns None) or ``busy_ns`` of CPU every ``period_ns``."""

    busy_ns: int | None = None
    period_ns: int | None = None

    @property
    def continuous(self) -> bool:
        return self.busy_ns is None

    def __str__(self) -> str:
        if self.continuous:
            return "continuous"
        return f"{self.busy_ns / NSEC_PER_MSEC:g}/{self.period_ns / NSEC_PER_MSEC:g}"


def parse_load(spec: object) -> LoadSpec | None:
    """``None``/``False``/``"none"`` -> no load; ``True``/``"continuous"`` ->
    a busy loop; ``"BUSY/PERIOD"`` (ms, 0 < BUSY < PERIOD) -> a periodic job."""
    allowed = (f"none, continuous, or BUSY_MS/PERIOD_MS with 0 < BUSY_MS < PERIOD_MS <= "
               f"{MAX_LOAD_PERIOD_MS} (whole nanoseconds: BUSY_MS >= 1e-6)")
    if spec is None or spec is False or spec == "none":
        return None
    if spec is True or spec == "continuous":
        return LoadSpec()
    if isinstance(spec, LoadSpec):
        return spec
    if isinstance(spec, str) and spec.count("/") == 1:
        try:
            busy, period = (float(x) for x in spec.split("/"))
        except ValueError:
            raise ConfigError("load", spec, allowed) from None
        # (whole nanoseconds: at least 1 ns busy, a period of at most a day)
        if 0 < busy < period <= MAX_LOAD_PERIOD_MS:
            busy_ns, period_ns = int(busy * NSEC_PER_MSEC), int(period * NSEC_PER_MSEC)
            if 0 < busy_ns < period_ns:
                return LoadSpec(busy_ns, period_ns)
    raise ConfigError("load", spec, allowed)


def cpu_hog(task: Task) -> TaskBody:
    """``for (;;) ;`` in user space."""
    while True:
        yield Run(HOG_CHUNK_NS, user=True)


def periodic_job(task: Task, busy_ns: int, period_ns: int) -> TaskBody:
    """Every ``period_ns`` (absolute): ``busy_ns`` of user CPU, then sleep.

    Missed periods are skipped (the next start is the first period boundary
    after the work is done), as a periodic timer loop does.
    """
    k = task.k
    eng = k.engine
    check_period(period_ns, "load period")
    nxt = eng.now
    scope = k.task_scope(task)   # its CPU if pinned (start_load pins it)
    while True:
        yield Run(busy_ns, user=True)
        nxt += period_ns
        while nxt <= eng.now:
            nxt += period_ns
        eng.at_on(scope, nxt, k.wake_up_process, task)   # clock_nanosleep(TIMER_ABSTIME)
        yield BLOCK


def start_load(k: Kernel, cpu: int, spec: LoadSpec, *, nice: int = 0,
               comm: str = "stress") -> Task:
    """Start the load pinned to ``cpu`` (``taskset -c cpu ...``)."""
    if spec.continuous:
        return k.kthread_run(cpu_hog, comm, cpu=cpu, policy=SCHED_NORMAL, nice=nice)
    return k.kthread_run(lambda t: periodic_job(t, spec.busy_ns, spec.period_ns), comm, cpu=cpu,
                         policy=SCHED_NORMAL, nice=nice)


def start_cpu_hog(k: Kernel, cpu: int, *, nice: int = 0, comm: str = "stress") -> Task:
    """Start one continuous CPU hog pinned to ``cpu`` (``taskset -c cpu stress -c 1``)."""
    return start_load(k, cpu, LoadSpec(), nice=nice, comm=comm)


__all__ = ["HOG_CHUNK_NS", "LoadSpec", "cpu_hog", "parse_load", "periodic_job", "start_cpu_hog",
           "start_load"]
